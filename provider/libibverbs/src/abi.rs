//! `#[repr(C)]` mirrors of the structs that `libibverbs.so.1` shares with programs, exactly as the
//! installed rdma-core v44 `<infiniband/verbs.h>` lays them out on x86_64 (gcc, glibc:
//! `sizeof(pthread_mutex_t) = 40`, `sizeof(pthread_cond_t) = 48`).
//!
//! Sizes and the offsets that matter are pinned by compile-time asserts at the bottom (values from
//! roce-spec-notes E.5, which were measured against the same headers); `tests/abi_layout.rs`
//! compares every field against a C program compiled with the installed header, and
//! `tests/abi/` (rdma-sys) against rdma-sys's bindgen of it.
//!
//! Names are the C names so that a field can be grepped in `verbs.h`. C unions whose members all
//! have the same type (`imm_data`/`invalidate_rkey`) are one field; others are Rust `union`s
//! (writing them is safe; reading them is done only in `ffi`). `union ibv_gid` is 16 bytes aligned
//! to 8 (it has a `u64` member), mirrored as `[u8; 16]` with `align(8)`.
//!
//! This module contains no `unsafe`.
#![forbid(unsafe_code)]
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};

// ---------------------------------------------------------------------------------------------
// Constants and enum values (verbs.h; the values are ABI)

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context.abi_compat` of a context that has a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;

pub const IBV_PORT_NOP: u32 = 0;
pub const IBV_PORT_DOWN: u32 = 1;
pub const IBV_PORT_INIT: u32 = 2;
pub const IBV_PORT_ARMED: u32 = 3;
pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_PORT_ACTIVE_DEFER: u32 = 5;

pub const IBV_MTU_256: u32 = 1;
pub const IBV_MTU_512: u32 = 2;
pub const IBV_MTU_1024: u32 = 3;
pub const IBV_MTU_2048: u32 = 4;
pub const IBV_MTU_4096: u32 = 5;

pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

pub const IBV_ATOMIC_NONE: u32 = 0;
pub const IBV_ATOMIC_HCA: u32 = 1;
pub const IBV_ATOMIC_GLOB: u32 = 2;

pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPT_UC: u32 = 3;
pub const IBV_QPT_UD: u32 = 4;
pub const IBV_QPT_RAW_PACKET: u32 = 8;
pub const IBV_QPT_XRC_SEND: u32 = 9;
pub const IBV_QPT_XRC_RECV: u32 = 10;
pub const IBV_QPT_DRIVER: u32 = 0xff;

pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_SQD: u32 = 4;
pub const IBV_QPS_SQE: u32 = 5;
pub const IBV_QPS_ERR: u32 = 6;
pub const IBV_QPS_UNKNOWN: u32 = 7;

/// `enum ibv_qp_attr_mask`
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const IBV_WR_LOCAL_INV: u32 = 7;
pub const IBV_WR_BIND_MW: u32 = 8;
pub const IBV_WR_SEND_WITH_INV: u32 = 9;
pub const IBV_WR_TSO: u32 = 10;
pub const IBV_WR_DRIVER1: u32 = 11;
pub const IBV_WR_FLUSH: u32 = 14;
pub const IBV_WR_ATOMIC_WRITE: u32 = 15;

pub const IBV_SEND_FENCE: c_uint = 1;
pub const IBV_SEND_SIGNALED: c_uint = 2;
pub const IBV_SEND_SOLICITED: c_uint = 4;
pub const IBV_SEND_INLINE: c_uint = 8;
pub const IBV_SEND_IP_CSUM: c_uint = 16;

pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
pub const IBV_WC_TM_RNDV_INCOMPLETE: u32 = 23;

pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_COMP_SWAP: u32 = 3;
pub const IBV_WC_FETCH_ADD: u32 = 4;
pub const IBV_WC_BIND_MW: u32 = 5;
pub const IBV_WC_LOCAL_INV: u32 = 6;
pub const IBV_WC_TSO: u32 = 7;
pub const IBV_WC_FLUSH: u32 = 8;
pub const IBV_WC_ATOMIC_WRITE: u32 = 9;
pub const IBV_WC_RECV: u32 = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;

pub const IBV_WC_GRH: c_uint = 1;
pub const IBV_WC_WITH_IMM: c_uint = 2;
pub const IBV_WC_IP_CSUM_OK: c_uint = 4;
pub const IBV_WC_WITH_INV: c_uint = 8;

pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
pub const IBV_ACCESS_REMOTE_READ: c_int = 4;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 8;
pub const IBV_ACCESS_MW_BIND: c_int = 16;
pub const IBV_ACCESS_ZERO_BASED: c_int = 32;
pub const IBV_ACCESS_ON_DEMAND: c_int = 64;
pub const IBV_ACCESS_HUGETLB: c_int = 128;
/// Newer than v44 (not in its verbs.h), like `IBV_ACCESS_FLUSH_PERSISTENT`.
pub const IBV_ACCESS_FLUSH_GLOBAL: c_int = 256;
pub const IBV_ACCESS_FLUSH_PERSISTENT: c_int = 512;
/// Bits 20..29: optional access flags a provider may ignore (`IBV_ACCESS_OPTIONAL_RANGE`).
pub const IBV_ACCESS_OPTIONAL_RANGE: c_int = 0x3ff0_0000;

pub const IBV_EVENT_CQ_ERR: u32 = 0;
pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
pub const IBV_EVENT_PORT_ERR: u32 = 10;
pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
/// Newer than v44 (not in its verbs.h).
pub const IBV_EVENT_DEVICE_SPEED_CHANGE: u32 = 20;

/// `enum ibv_gid_type` (`ibv_gid_entry.gid_type`) and `enum ibv_gid_type_sysfs` (driver.h).
pub const IBV_GID_TYPE_IB: u32 = 0;
pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
pub const IBV_GID_TYPE_SYSFS_IB_ROCE_V1: c_int = 0;
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;

/// `enum ibv_fork_status`
pub const IBV_FORK_DISABLED: c_int = 0;
pub const IBV_FORK_ENABLED: c_int = 1;
pub const IBV_FORK_UNNEEDED: c_int = 2;

/// `IBV_QUERY_PORT_*`/`ibv_port_cap_flags`: `IBV_PORT_CM_SUP` etc. rxe reports
/// `IB_PORT_CM_SUP | IB_PORT_DEVICE_MGMT_SUP | IB_PORT_VENDOR_CLASS_SUP` (0x0001_0000 | ...).
pub const IBV_PORT_CM_SUP: u32 = 1 << 16;
pub const IBV_PORT_DEVICE_MGMT_SUP: u32 = 1 << 19;
pub const IBV_PORT_VENDOR_CLASS_SUP: u32 = 1 << 24;

/// `ibv_device_cap_flags`
pub const IBV_DEVICE_BAD_PKEY_CNTR: c_uint = 1 << 1;
pub const IBV_DEVICE_BAD_QKEY_CNTR: c_uint = 1 << 2;
pub const IBV_DEVICE_AUTO_PATH_MIG: c_uint = 1 << 4;
pub const IBV_DEVICE_CHANGE_PHY_PORT: c_uint = 1 << 5;
pub const IBV_DEVICE_UD_AV_PORT_ENFORCE: c_uint = 1 << 6;
pub const IBV_DEVICE_CURR_QP_STATE_MOD: c_uint = 1 << 7;
pub const IBV_DEVICE_SHUTDOWN_PORT: c_uint = 1 << 8;
pub const IBV_DEVICE_PORT_ACTIVE_EVENT: c_uint = 1 << 10;
pub const IBV_DEVICE_SYS_IMAGE_GUID: c_uint = 1 << 11;
pub const IBV_DEVICE_RC_RNR_NAK_GEN: c_uint = 1 << 12;
pub const IBV_DEVICE_SRQ_RESIZE: c_uint = 1 << 13;
pub const IBV_DEVICE_N_NOTIFY_CQ: c_uint = 1 << 14;
pub const IBV_DEVICE_MEM_WINDOW: c_uint = 1 << 17;
pub const IBV_DEVICE_MEM_MGT_EXTENSIONS: c_uint = 1 << 21;
pub const IBV_DEVICE_MEM_WINDOW_TYPE_2B: c_uint = 1 << 24;

// ---------------------------------------------------------------------------------------------
// Opaque helpers

/// `pthread_mutex_t` (glibc x86_64: 40 bytes, align 8). All-zero is `PTHREAD_MUTEX_INITIALIZER`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_mutex_t(pub [u8; 40]);
/// `pthread_cond_t` (glibc x86_64: 48 bytes, align 8). All-zero is `PTHREAD_COND_INITIALIZER`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_cond_t(pub [u8; 48]);

impl Default for pthread_mutex_t {
    fn default() -> Self {
        Self([0; 40])
    }
}
impl Default for pthread_cond_t {
    fn default() -> Self {
        Self([0; 48])
    }
}

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// Opaque: never dereferenced by this library.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    ibv_xrcd,
    ibv_wq,
    ibv_rwq_ind_table,
    ibv_flow,
    ibv_flow_attr,
    ibv_flow_action,
    ibv_dm,
    ibv_counters,
    ibv_td,
    ibv_mw_bind,
    verbs_ex_private,
    ibv_wc_tm_info,
    ibv_counter_attach_attr,
    ibv_counters_init_attr,
    ibv_alloc_dm_attr,
    ibv_flow_action_esp_attr,
    ibv_qp_rate_limit_attr,
    ibv_parent_domain_init_attr,
    ibv_td_init_attr,
    ibv_modify_cq_attr,
    ibv_ops_wr,
    ibv_rwq_ind_table_init_attr,
    ibv_wq_attr,
    ibv_wq_init_attr,
    ibv_values_ex,
    ibv_qp_open_attr,
    ibv_xrcd_init_attr,
    ibv_sa_path_rec,
    ib_user_path_rec,
    ib_uverbs_qp_attr,
    ib_uverbs_ah_attr,
    verbs_device_ops,
    verbs_sysfs_dev,
);

/// `union ibv_gid` (raw bytes, network order; `{subnet_prefix, interface_id}` view is `u64`s).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

// ---------------------------------------------------------------------------------------------
// Device and context

/// `struct _ibv_device_ops` (obsolete, two NULL function pointers).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(*mut ibv_context)>,
}

#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

pub type CompatFn = Option<unsafe extern "C" fn() -> *mut c_void>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    pub _compat_query_device:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int>,
    pub _compat_query_port:
        Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int>,
    pub _compat_alloc_pd: CompatFn,
    pub _compat_dealloc_pd: CompatFn,
    pub _compat_reg_mr: CompatFn,
    pub _compat_rereg_mr: CompatFn,
    pub _compat_dereg_mr: CompatFn,
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, c_uint) -> *mut ibv_mw>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int>,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> c_int>,
    pub _compat_create_cq: CompatFn,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub _compat_cq_event: CompatFn,
    pub _compat_resize_cq: CompatFn,
    pub _compat_destroy_cq: CompatFn,
    pub _compat_create_srq: CompatFn,
    pub _compat_modify_srq: CompatFn,
    pub _compat_query_srq: CompatFn,
    pub _compat_destroy_srq: CompatFn,
    pub post_srq_recv: Option<
        unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    >,
    pub _compat_create_qp: CompatFn,
    pub _compat_query_qp: CompatFn,
    pub _compat_modify_qp: CompatFn,
    pub _compat_destroy_qp: CompatFn,
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat_create_ah: CompatFn,
    pub _compat_destroy_ah: CompatFn,
    pub _compat_attach_mcast: CompatFn,
    pub _compat_detach_mcast: CompatFn,
    pub _compat_async_event: CompatFn,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context` as in v44 (648 bytes; the extended ops sit in front of `context` and
/// new ones are added at the top, so an op's offset relative to `context` never changes).
#[repr(C)]
pub struct verbs_context {
    pub query_port:
        Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int>,
    pub advise_mr:
        Option<unsafe extern "C" fn(*mut ibv_pd, c_uint, u32, *mut ibv_sge, u32) -> c_int>,
    pub alloc_null_mr: Option<unsafe extern "C" fn(*mut ibv_pd) -> *mut ibv_mr>,
    pub read_counters: Option<unsafe extern "C" fn(*mut ibv_counters, *mut u64, u32, u32) -> c_int>,
    pub attach_counters_point_flow: Option<
        unsafe extern "C" fn(
            *mut ibv_counters,
            *mut ibv_counter_attach_attr,
            *mut ibv_flow,
        ) -> c_int,
    >,
    pub create_counters: Option<
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_counters_init_attr) -> *mut ibv_counters,
    >,
    pub destroy_counters: Option<unsafe extern "C" fn(*mut ibv_counters) -> c_int>,
    pub reg_dm_mr:
        Option<unsafe extern "C" fn(*mut ibv_pd, *mut ibv_dm, u64, usize, c_uint) -> *mut ibv_mr>,
    pub alloc_dm:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_alloc_dm_attr) -> *mut ibv_dm>,
    pub free_dm: Option<unsafe extern "C" fn(*mut ibv_dm) -> c_int>,
    pub modify_flow_action_esp:
        Option<unsafe extern "C" fn(*mut ibv_flow_action, *mut ibv_flow_action_esp_attr) -> c_int>,
    pub destroy_flow_action: Option<unsafe extern "C" fn(*mut ibv_flow_action) -> c_int>,
    pub create_flow_action_esp: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *mut ibv_flow_action_esp_attr,
        ) -> *mut ibv_flow_action,
    >,
    pub modify_qp_rate_limit:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_rate_limit_attr) -> c_int>,
    pub alloc_parent_domain: Option<
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd,
    >,
    pub dealloc_td: Option<unsafe extern "C" fn(*mut ibv_td) -> c_int>,
    pub alloc_td:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td>,
    pub modify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, *mut ibv_modify_cq_attr) -> c_int>,
    pub post_srq_ops:
        Option<unsafe extern "C" fn(*mut ibv_srq, *mut ibv_ops_wr, *mut *mut ibv_ops_wr) -> c_int>,
    pub destroy_rwq_ind_table: Option<unsafe extern "C" fn(*mut ibv_rwq_ind_table) -> c_int>,
    pub create_rwq_ind_table: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *mut ibv_rwq_ind_table_init_attr,
        ) -> *mut ibv_rwq_ind_table,
    >,
    pub destroy_wq: Option<unsafe extern "C" fn(*mut ibv_wq) -> c_int>,
    pub modify_wq: Option<unsafe extern "C" fn(*mut ibv_wq, *mut ibv_wq_attr) -> c_int>,
    pub create_wq:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_wq_init_attr) -> *mut ibv_wq>,
    pub query_rt_values:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_values_ex) -> c_int>,
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub priv_: *mut verbs_ex_private,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *const ibv_query_device_ex_input,
            *mut ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub ibv_destroy_flow: Option<unsafe extern "C" fn(*mut ibv_flow) -> c_int>,
    pub ABI_placeholder2: Option<unsafe extern "C" fn()>,
    pub ibv_create_flow:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_flow_attr) -> *mut ibv_flow>,
    pub ABI_placeholder1: Option<unsafe extern "C" fn()>,
    pub open_qp:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_open_attr) -> *mut ibv_qp>,
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    pub get_srq_num: Option<unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> c_int>,
    pub create_srq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq>,
    pub open_xrcd:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd>,
    pub close_xrcd: Option<unsafe extern "C" fn(*mut ibv_xrcd) -> c_int>,
    pub _ABI_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

/// The extended ops newer rdma-core headers (after v44) added above `query_port`, top first:
/// `free_buf, alloc_buf, dm_export_dmabuf_fd, reg_mr_ex, dealloc_dmah, alloc_dmah`. We allocate
/// room for them (all NULL = absent) so a program built against newer headers that tests
/// `verbs_get_ctx_op(ctx, alloc_dmah)` reads our memory, not the heap in front of it.
pub const VERBS_CONTEXT_HEAD_EXTRA_OPS: usize = 6;

// ---------------------------------------------------------------------------------------------
// Attributes

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps_per_transport {
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub per_transport_caps: ibv_odp_caps_per_transport,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr` as in v44 (52 bytes). Newer headers append `active_speed_ex` (u32 at 52,
/// size 56); see [`ibv_port_attr_ext`].
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The newest `ibv_port_attr` (rdma-core ≥ 48): v44's plus `active_speed_ex`. We fill this one and
/// copy `min(len, 56)` bytes, so both old and new programs get what they asked for.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr_ext {
    pub base: ibv_port_attr,
    pub active_speed_ex: u32,
}

/// `struct _compat_ibv_port_attr`: the first 48 bytes of `ibv_port_attr` (through `flags`).
pub const COMPAT_PORT_ATTR_LEN: usize = 48;
opaque!(_compat_ibv_port_attr);

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

// ---------------------------------------------------------------------------------------------
// Objects

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    pub type_: c_uint,
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_completion_ts: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
    pub read_cvlan: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u16>,
    pub read_flow_tag: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_tm_info: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_wc_tm_info)>,
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
}

/// `enum ibv_create_cq_wc_flags`: the fields an `ibv_cq_ex` can report.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `enum ibv_cq_init_attr_mask`
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `enum ibv_create_cq_attr_flags`
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;
pub const IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 1 << 1;

#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: c_uint,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_ex` as in v44 (352 bytes; newer headers append `wr_flush`, see
/// [`ibv_qp_ex_ext`]).
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `ibv_qp_ex` as newer headers define it (v44's plus `wr_flush` at 352).
#[repr(C)]
pub struct ibv_qp_ex_ext {
    pub base: ibv_qp_ex,
    pub wr_flush: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, usize, u8, u8)>,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

#[repr(C)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `enum ibv_qp_init_attr_mask`
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_create_send_ops_flags`
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_TSO: u64 = 1 << 10;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `struct ibv_data_buf` (`ibv_wr_set_inline_data_list`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

// ---------------------------------------------------------------------------------------------
// Work requests and completions

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}
/// `ibv_send_wr.wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}
/// `ibv_send_wr.qp_type`
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}
/// The anonymous union at the end of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    /// `imm_data` (network order) or `invalidate_rkey`: a C union of two 32-bit members.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    pub ext: ibv_send_wr_ext,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (network order) or `invalidated_rkey`: a C union of two 32-bit members.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `ibv_async_event.element`
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut ibv_wq,
    pub port_num: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    pub event_type: u32,
}

// ---------------------------------------------------------------------------------------------
// Compile-time layout checks (x86_64 values, roce-spec-notes E.5 = installed v44 verbs.h).

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("roce-ibverbs mirrors the x86_64 Linux libibverbs ABI only");

macro_rules! assert_layout {
    ($t:ty, $size:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = {
            assert!(size_of::<$t>() == $size, concat!("sizeof ", stringify!($t)));
            $(assert!(offset_of!($t, $field) == $off, concat!(stringify!($t), ".", stringify!($field)));)*
        };
    };
}

assert_layout!(ibv_gid, 16);
assert_layout!(
    ibv_device,
    664,
    node_type = 16,
    transport_type = 20,
    name = 24,
    dev_name = 88,
    dev_path = 152,
    ibdev_path = 408
);
assert_layout!(
    ibv_context_ops,
    256,
    alloc_mw = 56,
    bind_mw = 64,
    dealloc_mw = 72,
    poll_cq = 88,
    req_notify_cq = 96,
    post_srq_recv = 160,
    post_send = 200,
    post_recv = 208,
    _compat_async_event = 248
);
assert_layout!(
    ibv_context,
    328,
    device = 0,
    ops = 8,
    cmd_fd = 264,
    async_fd = 268,
    num_comp_vectors = 272,
    mutex = 280,
    abi_compat = 320
);
assert_layout!(
    verbs_context,
    648,
    query_port = 0,
    create_cq_ex = 200,
    priv_ = 208,
    query_device_ex = 216,
    ibv_destroy_flow = 224,
    ibv_create_flow = 240,
    open_qp = 256,
    create_qp_ex = 264,
    get_srq_num = 272,
    create_srq_ex = 280,
    open_xrcd = 288,
    close_xrcd = 296,
    _ABI_placeholder3 = 304,
    sz = 312,
    context = 320
);
assert_layout!(
    ibv_device_attr,
    232,
    node_guid = 64,
    sys_image_guid = 72,
    max_mr_size = 80,
    page_size_cap = 88,
    vendor_id = 96,
    max_qp = 108,
    atomic_cap = 164,
    max_pkeys = 224,
    local_ca_ack_delay = 226,
    phys_port_cnt = 227
);
assert_layout!(
    ibv_device_attr_ex,
    400,
    comp_mask = 232,
    odp_caps = 240,
    completion_timestamp_mask = 264,
    hca_core_clock = 272,
    device_cap_flags_ex = 280,
    tso_caps = 288,
    rss_caps = 296,
    max_wq_type_rq = 328,
    packet_pacing_caps = 332,
    raw_packet_caps = 344,
    tm_caps = 348,
    cq_mod_caps = 368,
    max_dm_size = 376,
    pci_atomic_caps = 384,
    xrc_odp_caps = 392,
    phys_port_cnt_ex = 396
);
assert_layout!(
    ibv_port_attr,
    52,
    state = 0,
    max_mtu = 4,
    active_mtu = 8,
    gid_tbl_len = 12,
    port_cap_flags = 16,
    max_msg_sz = 20,
    bad_pkey_cntr = 24,
    qkey_viol_cntr = 28,
    pkey_tbl_len = 32,
    lid = 34,
    sm_lid = 36,
    lmc = 38,
    max_vl_num = 39,
    sm_sl = 40,
    subnet_timeout = 41,
    init_type_reply = 42,
    active_width = 43,
    active_speed = 44,
    phys_state = 45,
    link_layer = 46,
    flags = 47,
    port_cap_flags2 = 48
);
assert_layout!(ibv_port_attr_ext, 56, active_speed_ex = 52);
assert_layout!(
    ibv_gid_entry,
    32,
    gid = 0,
    gid_index = 16,
    port_num = 20,
    gid_type = 24,
    ndev_ifindex = 28
);
assert_layout!(ibv_pd, 16, context = 0, handle = 8);
assert_layout!(
    ibv_mr,
    48,
    context = 0,
    pd = 8,
    addr = 16,
    length = 24,
    handle = 32,
    lkey = 36,
    rkey = 40
);
assert_layout!(
    ibv_mw,
    32,
    context = 0,
    pd = 8,
    rkey = 16,
    handle = 20,
    type_ = 24
);
assert_layout!(ibv_comp_channel, 16, context = 0, fd = 8, refcnt = 12);
assert_layout!(
    ibv_cq,
    128,
    context = 0,
    channel = 8,
    cq_context = 16,
    handle = 24,
    cqe = 28,
    mutex = 32,
    cond = 72,
    comp_events_completed = 120,
    async_events_completed = 124
);
assert_layout!(
    ibv_cq_ex,
    288,
    comp_mask = 128,
    status = 132,
    wr_id = 136,
    start_poll = 144,
    next_poll = 152,
    end_poll = 160,
    read_opcode = 168,
    read_completion_wallclock_ns = 280
);
assert_layout!(
    ibv_cq_init_attr_ex,
    56,
    cqe = 0,
    cq_context = 8,
    channel = 16,
    comp_vector = 24,
    wc_flags = 32,
    comp_mask = 40,
    flags = 44,
    parent_domain = 48
);
assert_layout!(
    ibv_srq,
    128,
    context = 0,
    srq_context = 8,
    pd = 16,
    handle = 24,
    mutex = 32,
    cond = 72,
    events_completed = 120
);
assert_layout!(ibv_srq_attr, 12);
assert_layout!(ibv_srq_init_attr, 24, srq_context = 0, attr = 8);
assert_layout!(
    ibv_srq_init_attr_ex,
    64,
    comp_mask = 20,
    srq_type = 24,
    pd = 32,
    xrcd = 40,
    cq = 48,
    tm_cap = 56
);
assert_layout!(
    ibv_qp,
    160,
    context = 0,
    qp_context = 8,
    pd = 16,
    send_cq = 24,
    recv_cq = 32,
    srq = 40,
    handle = 48,
    qp_num = 52,
    state = 56,
    qp_type = 60,
    mutex = 64,
    cond = 104,
    events_completed = 152
);
assert_layout!(
    ibv_qp_ex,
    352,
    qp_base = 0,
    comp_mask = 160,
    wr_id = 168,
    wr_flags = 176,
    wr_atomic_cmp_swp = 184,
    wr_send = 240,
    wr_set_sge = 304,
    wr_start = 320,
    wr_complete = 328,
    wr_abort = 336,
    wr_atomic_write = 344
);
assert_layout!(ibv_qp_ex_ext, 360, wr_flush = 352);
assert_layout!(ibv_qp_cap, 20);
assert_layout!(
    ibv_qp_init_attr,
    64,
    qp_context = 0,
    send_cq = 8,
    recv_cq = 16,
    srq = 24,
    cap = 32,
    qp_type = 52,
    sq_sig_all = 56
);
assert_layout!(
    ibv_qp_init_attr_ex,
    136,
    comp_mask = 60,
    pd = 64,
    xrcd = 72,
    create_flags = 80,
    max_tso_header = 84,
    rwq_ind_tbl = 88,
    rx_hash_conf = 96,
    source_qpn = 120,
    send_ops_flags = 128
);
assert_layout!(
    ibv_global_route,
    24,
    dgid = 0,
    flow_label = 16,
    sgid_index = 20,
    hop_limit = 21,
    traffic_class = 22
);
assert_layout!(
    ibv_ah_attr,
    32,
    grh = 0,
    dlid = 24,
    sl = 26,
    src_path_bits = 27,
    static_rate = 28,
    is_global = 29,
    port_num = 30
);
assert_layout!(
    ibv_qp_attr,
    144,
    qp_state = 0,
    cur_qp_state = 4,
    path_mtu = 8,
    path_mig_state = 12,
    qkey = 16,
    rq_psn = 20,
    sq_psn = 24,
    dest_qp_num = 28,
    qp_access_flags = 32,
    cap = 36,
    ah_attr = 56,
    alt_ah_attr = 88,
    pkey_index = 120,
    alt_pkey_index = 122,
    en_sqd_async_notify = 124,
    sq_draining = 125,
    max_rd_atomic = 126,
    max_dest_rd_atomic = 127,
    min_rnr_timer = 128,
    port_num = 129,
    timeout = 130,
    retry_cnt = 131,
    rnr_retry = 132,
    alt_port_num = 133,
    alt_timeout = 134,
    rate_limit = 136
);
assert_layout!(ibv_ah, 24, context = 0, pd = 8, handle = 16);
assert_layout!(
    ibv_grh,
    40,
    paylen = 4,
    next_hdr = 6,
    hop_limit = 7,
    sgid = 8,
    dgid = 24
);
assert_layout!(ibv_ece, 12);
assert_layout!(ibv_data_buf, 16, addr = 0, length = 8);
assert_layout!(ibv_sge, 16, addr = 0, length = 8, lkey = 12);
assert_layout!(
    ibv_send_wr,
    128,
    wr_id = 0,
    next = 8,
    sg_list = 16,
    num_sge = 24,
    opcode = 28,
    send_flags = 32,
    imm_data = 36,
    wr = 40,
    qp_type = 72,
    ext = 80
);
assert_layout!(
    ibv_send_wr_atomic,
    32,
    compare_add = 8,
    swap = 16,
    rkey = 24
);
assert_layout!(ibv_send_wr_ud, 16, remote_qpn = 8, remote_qkey = 12);
assert_layout!(ibv_mw_bind_info, 32);
assert_layout!(
    ibv_recv_wr,
    32,
    wr_id = 0,
    next = 8,
    sg_list = 16,
    num_sge = 24
);
assert_layout!(
    ibv_wc,
    48,
    wr_id = 0,
    status = 8,
    opcode = 12,
    vendor_err = 16,
    byte_len = 20,
    imm_data = 24,
    qp_num = 28,
    src_qp = 32,
    wc_flags = 36,
    pkey_index = 40,
    slid = 42,
    sl = 44,
    dlid_path_bits = 45
);
assert_layout!(ibv_async_event, 16, element = 0, event_type = 8);

/// What a program can see of our allocation in front of `struct ibv_context`: v44's ops plus
/// room for the newer ones, all of which we leave NULL.
pub const VERBS_CONTEXT_ALLOC_SZ: usize =
    size_of::<verbs_context>() + VERBS_CONTEXT_HEAD_EXTRA_OPS * size_of::<usize>();
const _: () = assert!(VERBS_CONTEXT_ALLOC_SZ == 696);
