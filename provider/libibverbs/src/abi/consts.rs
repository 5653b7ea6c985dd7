//! Constants and enum values of `verbs.h` (the values are ABI).

use core::ffi::{c_int, c_uint};

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
/// `enum ibv_mw_type`
pub const IBV_MW_TYPE_1: u32 = 1;
pub const IBV_MW_TYPE_2: u32 = 2;
pub const IBV_WR_DRIVER1: u32 = 11;
/// `IBV_WR_FLUSH` is rdma-core v45's (v44 has `IBV_WR_ATOMIC_WRITE` only).
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
/// Bits of `ibv_device_attr_ex.device_cap_flags_ex` above 32: the kernel's
/// `IB_UVERBS_DEVICE_FLUSH_GLOBAL`, `_FLUSH_PERSISTENT` (rdma-core v45's kernel headers; not in
/// v44's) and `_ATOMIC_WRITE` (v44), which libibverbs passes through unnamed.
pub const IB_UVERBS_DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;
pub const IB_UVERBS_DEVICE_FLUSH_PERSISTENT: u64 = 1 << 39;
pub const IB_UVERBS_DEVICE_ATOMIC_WRITE: u64 = 1 << 40;

/// `enum ibv_placement_type` and `enum ibv_selectivity_level` (`ibv_wr_flush`, rdma-core v45).
pub const IBV_FLUSH_GLOBAL: u8 = 1;
pub const IBV_FLUSH_PERSISTENT: u8 = 2;
pub const IBV_FLUSH_RANGE: u8 = 0;
pub const IBV_FLUSH_MR: u8 = 1;
