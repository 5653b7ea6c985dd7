//! Opaque helpers (`pthread_*_t`, opaque structs, `union ibv_gid`), `struct ibv_device` and the context: `ibv_context`, `ibv_context_ops`, `verbs_context`.

use super::*;
use core::ffi::{c_char, c_int, c_uint, c_void};

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
