//! ECE (enhanced connection establishment, `RDMACM_1.3`): what librdmacm v44 keeps per id
//! (`local_ece`, `remote_ece` of `struct cma_id_private`) and how it fills the REQ and REP
//! from them, on a device whose provider has no ECE (rxe, and our QPs: `ibv_query_ece` and
//! `ibv_set_ece` answer `EOPNOTSUPP`).
//!
//! Consequences, as with librdmacm over rxe: an id whose QP `rdma_create_qp` made offers no
//! ECE (`init_ece` takes the QP's answer, nothing), so its REQ carries Vendor ID 0 and
//! AttributeModifier 0; a program that brings its own QP (`conn_param->qp_num`) sends what it
//! gave `rdma_set_local_ece`. A REP echoes the REQ's Vendor ID with this side's options. The
//! peer's REQ or REP ECE is kept and `rdma_get_remote_ece` returns it (zero when the peer sent
//! none); both calls refuse an id that has a QP (EINVAL), as librdmacm's.
//!
//! # Safety
//! See the module documentation of `ffi::rdmacm`.
use super::*;
use crate::ffi::exports::{ibv_query_ece, ibv_set_ece};
use crate::ffi::guard;
use core::ffi::c_void;
use roce_cm::{Ece, RejReason};

/// librdmacm's `init_ece`, right after `rdma_create_qp` made the QP: the id's local ECE
/// becomes the QP's (nothing here); for the id of a connect request that offered ECE, the QP
/// is told the outcome (`ibv_set_ece`, which our QPs refuse, as rxe's). Errors other than
/// `EOPNOTSUPP` fail the creation.
pub(crate) fn init_ece(i: &CmId, qp: *mut ibv_qp) -> Result<(), i32> {
    let mut e = ibv_ece::default();
    match ibv_query_ece(qp, &mut e) {
        0 | libc::EOPNOTSUPP => {}
        r => return Err(r),
    }
    let remote = {
        let mut st = i.state();
        st.local_ece = Ece {
            vendor_id: e.vendor_id,
            attr_mod: e.options,
        };
        st.remote_ece
    };
    if remote.vendor_id == 0 {
        return Ok(());
    }
    let (vendor_id, options) = if remote.vendor_id != e.vendor_id {
        (e.vendor_id, 0)
    } else {
        (remote.vendor_id, remote.attr_mod)
    };
    let mut set = ibv_ece {
        vendor_id,
        options,
        comp_mask: 0,
    };
    match ibv_set_ece(qp, &mut set) {
        0 | libc::EOPNOTSUPP => Ok(()),
        r => Err(r),
    }
}

/// librdmacm's `set_local_ece`, after the new QP's first transitions: for a connect request
/// that offered ECE, the options the QP settled on (0 when it cannot say).
pub(crate) fn settle_local_ece(i: &CmId, qp: *mut ibv_qp) -> Result<(), i32> {
    if i.state().remote_ece.vendor_id == 0 {
        return Ok(());
    }
    let mut e = ibv_ece::default();
    match ibv_query_ece(qp, &mut e) {
        0 | libc::EOPNOTSUPP => {}
        r => return Err(r),
    }
    i.state().local_ece.attr_mod = e.options;
    Ok(())
}

/// The ECE of `rdma_connect`'s REQ (`ucma_copy_ece_param_to_kern_req`): the local one.
pub(crate) fn for_req(i: &CmId) -> Ece {
    i.state().local_ece
}

/// The ECE of `rdma_accept`'s REP or SIDR_REP (`ucma_copy_ece_param_to_kern_rep`): the
/// request's Vendor ID echoed, with the local options.
pub(crate) fn for_rep(i: &CmId) -> Ece {
    let st = i.state();
    Ece {
        vendor_id: st.remote_ece.vendor_id,
        attr_mod: st.local_ece.attr_mod,
    }
}

/// A connect response for an id with a QP, before its transitions
/// (`ucma_process_conn_resp_ece`): a REP without ECE clears the QP's options, a REP naming
/// another vendor than ours fails the connection (EINVAL), otherwise the QP takes the REP's
/// (our QPs refuse, as rxe's).
pub(crate) fn check_conn_resp(i: &CmId, rep: Ece) -> Result<(), i32> {
    let local = i.state().local_ece;
    let mut e = if rep.vendor_id == 0 {
        ibv_ece {
            vendor_id: local.vendor_id,
            options: 0,
            comp_mask: 0,
        }
    } else if rep.vendor_id != local.vendor_id {
        return Err(libc::EINVAL);
    } else {
        ibv_ece {
            vendor_id: rep.vendor_id,
            options: rep.attr_mod,
            comp_mask: 0,
        }
    };
    i.state().remote_ece.vendor_id = rep.vendor_id;
    match ibv_set_ece(i.c().qp, &mut e) {
        0 | libc::EOPNOTSUPP => Ok(()),
        r => Err(r),
    }
}

/// After the connect response's transitions: the options the QP settled on, 0 when it
/// cannot say (`EOPNOTSUPP`).
pub(crate) fn after_conn_resp(i: &CmId) -> Result<(), i32> {
    let mut e = ibv_ece::default();
    let options = match ibv_query_ece(i.c().qp, &mut e) {
        0 => e.options,
        libc::EOPNOTSUPP => 0,
        r => return Err(r),
    };
    i.state().local_ece.attr_mod = options;
    Ok(())
}

pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if !i.c().qp.is_null() || ece.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let e = unsafe { *ece };
        if e.vendor_id == 0 || e.comp_mask != 0 {
            return fail(libc::EINVAL);
        }
        i.state().local_ece = Ece {
            vendor_id: e.vendor_id,
            attr_mod: e.options,
        };
        0
    })
}

pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if !i.c().qp.is_null() || ece.is_null() {
            return fail(libc::EINVAL);
        }
        let r = i.state().remote_ece;
        // SAFETY: non-NULL program struct.
        unsafe {
            *ece = ibv_ece {
                vendor_id: r.vendor_id,
                options: r.attr_mod,
                comp_mask: 0,
            };
        }
        0
    })
}

/// `rdma_reject` with reason 35 (vendor option not supported); the same private-data rules
/// (up to 148 bytes, EINVAL beyond). A UD request gets SIDR_REP status 2, as with
/// `rdma_reject`.
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    unsafe { ops::reject_with_reason(id, private_data, len, RejReason::VendorOptionNotSupported) }
}
