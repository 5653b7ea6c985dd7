//! Symbols that must exist (Debian's binaries and libmlx5/libefa/librdmacm are linked with
//! BIND_NOW, so every import has to resolve when they load) but that this emulated device does
//! not implement. Each one follows the convention of the real function — `NULL` + `errno`, a
//! positive errno return, `-1` + `errno`, or nothing for `void` — and says once on stderr which
//! verb a program called.
//!
//! The `ibv_cmd_*`, `verbs_*`, `execute_ioctl` … symbols of `IBVERBS_PRIVATE_34` are the
//! provider-facing half of libibverbs. Providers are never loaded here (there is no uverbs
//! device to match them with), so only libmlx5's and libefa's load-time constructors run, and
//! they only call `verbs_register_driver_34`, which accepts and ignores the registration.
//!
//! The stubs are declared without parameters: on x86_64 SysV the caller passes arguments in
//! registers/stack it owns, so a callee that ignores them is ABI-compatible with any prototype
//! of the same return class (int in `eax`, pointer in `rax`, or none).
//!
//! The data symbol `verbs_allow_disassociate_destroy` (a `bool`, read by libmlx5) is defined in
//! the generated assembly (`build.rs`), as a zero byte in `.bss`.
//!
//! # Safety
//! No stub dereferences anything.

use super::set_errno;
use crate::log::unimplemented_once;
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

/// Returns a positive errno (the `int` verbs convention: 0 or errno).
macro_rules! stub_errno {
    ($($name:ident),* $(,)?) => {$(
        pub extern "C" fn $name() -> c_int {
            unimplemented_once(stringify!($name));
            set_errno(libc::EOPNOTSUPP);
            libc::EOPNOTSUPP
        }
    )*};
}

/// Returns NULL with `errno = EOPNOTSUPP` (constructors).
macro_rules! stub_null {
    ($($name:ident),* $(,)?) => {$(
        pub extern "C" fn $name() -> *mut c_void {
            unimplemented_once(stringify!($name));
            set_errno(libc::EOPNOTSUPP);
            null_mut()
        }
    )*};
}

/// Returns -1 with `errno = EOPNOTSUPP`.
macro_rules! stub_minus1 {
    ($($name:ident),* $(,)?) => {$(
        pub extern "C" fn $name() -> c_int {
            unimplemented_once(stringify!($name));
            set_errno(libc::EOPNOTSUPP);
            -1
        }
    )*};
}

/// `void` functions.
macro_rules! stub_void {
    ($($name:ident),* $(,)?) => {$(
        pub extern "C" fn $name() {
            unimplemented_once(stringify!($name));
        }
    )*};
}

// ---- public verbs (IBVERBS_1.x) ----------------------------------------------------------

// Sharing objects between processes needs a kernel device fd.
stub_null!(
    ibv_import_device,
    ibv_import_pd,
    ibv_import_mr,
    ibv_import_dm
);
stub_void!(ibv_unimport_pd, ibv_unimport_mr, ibv_unimport_dm);
// dma-buf memory registration.
stub_null!(ibv_reg_dmabuf_mr);
// Kernel-ABI struct converters used by librdmacm only with a kernel RDMA CM (never here).
stub_void!(
    ibv_copy_ah_attr_from_kern,
    ibv_copy_qp_attr_from_kern,
    ibv_copy_path_rec_from_kern,
    ibv_copy_path_rec_to_kern,
);

/// `ibv_rereg_mr`: returns `IBV_REREG_MR_ERR_INPUT` (-1) with `errno`, as for an unsupported
/// provider op.
pub extern "C" fn ibv_rereg_mr() -> c_int {
    unimplemented_once("ibv_rereg_mr");
    set_errno(libc::EOPNOTSUPP);
    -1
}

/// Obsolete (pre-2017 provider registration); accepted and ignored.
pub extern "C" fn ibv_register_driver() {}

// ---- IBVERBS_PRIVATE_34 --------------------------------------------------------------------

/// Provider constructors (libmlx5, libefa) register here at load time: accept and ignore.
pub extern "C" fn verbs_register_driver_34() {}

/// `__verbs_log(ctx, level, fmt, ...)`: provider debug log; nothing to log from.
pub extern "C" fn __verbs_log() {}

stub_null!(_verbs_init_and_alloc_context, verbs_open_device);
stub_void!(verbs_init_cq, verbs_set_ops, verbs_uninit_context);
stub_minus1!(ibv_read_ibdev_sysfs_file);

/// `unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer *)`.
pub extern "C" fn __ioctl_final_num_attrs(num_attrs: u32) -> u32 {
    num_attrs
}

stub_errno!(
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
);
