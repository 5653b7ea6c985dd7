//! The QPs, CQs and SRQs of ids (`rdma_create_qp`, `rdma_create_srq`, …) and the QP
//! transitions librdmacm makes for the program from `rdma_init_qp_attr`.
//!
//! # Safety
//! See the module documentation of `ffi::rdmacm`; the verbs objects are ours, made and
//! destroyed through the exported verbs, which check them again.
use super::*;
use crate::ffi::exports::*;
use crate::ffi::guard;
use core::ptr::null_mut;

/// `rdma_init_qp_attr` for `state`: the attributes and mask the CM gives, with the source GID
/// index of the id's address (index 1: the device's configured address; rxe's table has the
/// same layout for one address).
pub(crate) fn init_attr(i: &CmId, state: u32) -> Result<(ibv_qp_attr, c_int), i32> {
    let st = match state {
        IBV_QPS_INIT => roce_emu::QpState::Init,
        IBV_QPS_RTR => roce_emu::QpState::Rtr,
        IBV_QPS_RTS => roce_emu::QpState::Rts,
        _ => return Err(libc::EINVAL),
    };
    let (a, mask) = i.dev.cm(|c, _| c.init_qp_attr(i.cm, st))?;
    let mut attr = ibv_qp_attr::default();
    crate::engine::qp_attr_to_c(&a, &mut attr);
    if mask.contains(roce_emu::QpAttrMask::AV) {
        attr.ah_attr.grh.sgid_index = 1;
    }
    Ok((attr, mask.bits() as c_int))
}

fn modify(i: &CmId, attr: &mut ibv_qp_attr, mask: c_int) -> Result<(), i32> {
    // SAFETY: the id's QP (checked again by ibv_modify_qp).
    match unsafe { ibv_modify_qp(i.c().qp, attr, mask) } {
        0 => Ok(()),
        e if e > 0 => Err(e),
        _ => Err(libc::EINVAL),
    }
}

/// librdmacm's `ucma_modify_qp_rtr`: INIT again (access flags now known), then RTR with the
/// responder resources of the connection.
pub(crate) fn to_rtr(i: &CmId, resp_res: u8) -> Result<(), i32> {
    let (mut a, m) = init_attr(i, IBV_QPS_INIT)?;
    modify(i, &mut a, m)?;
    let (mut a, m) = init_attr(i, IBV_QPS_RTR)?;
    if resp_res != RDMA_MAX_RESP_RES {
        a.max_dest_rd_atomic = resp_res;
    }
    modify(i, &mut a, m)
}

/// librdmacm's `ucma_modify_qp_rts`.
pub(crate) fn to_rts(i: &CmId, init_depth: u8) -> Result<(), i32> {
    let (mut a, m) = init_attr(i, IBV_QPS_RTS)?;
    if init_depth != RDMA_MAX_INIT_DEPTH {
        a.max_rd_atomic = init_depth;
    }
    modify(i, &mut a, m)
}

/// librdmacm's `ucma_modify_qp_err` (best effort: the QP may already be in error).
pub(crate) fn to_err(i: &CmId) {
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_ERR,
        ..Default::default()
    };
    let _ = modify(i, &mut a, IBV_QP_STATE);
}

/// A new QP's first transitions: RC to INIT; UD to INIT, RTR and RTS (send PSN 0), as
/// librdmacm's `ucma_init_conn_qp` and `ucma_init_ud_qp`.
fn init_qp(i: &CmId) -> Result<(), i32> {
    let (mut a, m) = init_attr(i, IBV_QPS_INIT)?;
    modify(i, &mut a, m)?;
    if i.c().qp_type == IBV_QPT_UD {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            ..Default::default()
        };
        modify(i, &mut a, IBV_QP_STATE)?;
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            sq_psn: 0,
            ..Default::default()
        };
        modify(i, &mut a, IBV_QP_STATE | IBV_QP_SQ_PSN)?;
    }
    Ok(())
}

/// librdmacm's `ucma_create_cqs`: a CQ and a completion channel for each direction the
/// program left empty.
fn create_cqs(i: &CmId, send: bool, recv: bool, send_wr: u32, recv_wr: u32) -> Result<(), i32> {
    let c = i.c();
    let ctx = c.verbs;
    let me = c as *mut rdma_cm_id as *mut core::ffi::c_void;
    let mk = |n: u32| -> Result<(*mut ibv_comp_channel, *mut ibv_cq), i32> {
        // SAFETY: our own context.
        let ch = unsafe { ibv_create_comp_channel(ctx) };
        if ch.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: as above.
        let cq = unsafe { ibv_create_cq(ctx, n.max(1) as c_int, me, ch, 0) };
        if cq.is_null() {
            // SAFETY: the channel just made.
            unsafe { ibv_destroy_comp_channel(ch) };
            return Err(libc::ENOMEM);
        }
        Ok((ch, cq))
    };
    if recv && c.recv_cq.is_null() {
        let (ch, cq) = mk(recv_wr)?;
        c.recv_cq_channel = ch;
        c.recv_cq = cq;
    }
    if send && c.send_cq.is_null() {
        let (ch, cq) = mk(send_wr)?;
        c.send_cq_channel = ch;
        c.send_cq = cq;
    }
    i.state().own_cqs = true;
    Ok(())
}

fn destroy_cqs(i: &CmId) {
    if !std::mem::take(&mut i.state().own_cqs) {
        return;
    }
    let c = i.c();
    // SAFETY: CQs and channels this module made for the id (NULL-safe verbs).
    unsafe {
        if !c.send_cq.is_null() {
            ibv_destroy_cq(c.send_cq);
        }
        if !c.recv_cq.is_null() {
            ibv_destroy_cq(c.recv_cq);
        }
        if !c.send_cq_channel.is_null() {
            ibv_destroy_comp_channel(c.send_cq_channel);
        }
        if !c.recv_cq_channel.is_null() {
            ibv_destroy_comp_channel(c.recv_cq_channel);
        }
    }
    c.send_cq = null_mut();
    c.recv_cq = null_mut();
    c.send_cq_channel = null_mut();
    c.recv_cq_channel = null_mut();
}

pub(crate) fn create_qp(i: &CmId, pd: *mut ibv_pd, attr: &mut ibv_qp_init_attr) -> c_int {
    let c = i.c();
    if c.verbs.is_null() {
        return fail(libc::EINVAL);
    }
    let pd = if pd.is_null() { c.pd } else { pd };
    if pd.is_null() {
        return fail(libc::EINVAL);
    }
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        if let Err(e) = create_cqs(
            i,
            attr.send_cq.is_null(),
            attr.recv_cq.is_null() && attr.srq.is_null(),
            attr.cap.max_send_wr,
            attr.cap.max_recv_wr,
        ) {
            destroy_cqs(i);
            return fail(e);
        }
        if attr.send_cq.is_null() {
            attr.send_cq = c.send_cq;
        }
        if attr.recv_cq.is_null() {
            attr.recv_cq = if c.recv_cq.is_null() {
                c.send_cq
            } else {
                c.recv_cq
            };
        }
    }
    if attr.srq.is_null() {
        attr.srq = c.srq;
    }
    attr.qp_type = c.qp_type;
    // SAFETY: our PD and the program's (completed) init attributes.
    let qp = unsafe { ibv_create_qp(pd, attr) };
    if qp.is_null() {
        destroy_cqs(i);
        return -1;
    }
    c.qp = qp;
    let r = super::ece::init_ece(i, qp)
        .and_then(|_| init_qp(i))
        .and_then(|_| super::ece::settle_local_ece(i, qp));
    if let Err(e) = r {
        // SAFETY: the QP just made.
        unsafe { ibv_destroy_qp(qp) };
        c.qp = null_mut();
        destroy_cqs(i);
        return fail(e);
    }
    0
}

pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if qp_init_attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL program struct; written back as librdmacm does (caps, CQs).
        create_qp(i, pd, unsafe { &mut *qp_init_attr })
    })
}

pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { &mut *attr };
        if a.comp_mask & !IBV_QP_INIT_ATTR_PD != 0 {
            crate::log::explain_once(
                "rdma_create_qp_ex: only IBV_QP_INIT_ATTR_PD is supported (EOPNOTSUPP)",
            );
            return fail(libc::EOPNOTSUPP);
        }
        let mut ia = ibv_qp_init_attr {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        let r = create_qp(i, a.pd, &mut ia);
        a.cap = ia.cap;
        a.send_cq = ia.send_cq;
        a.recv_cq = ia.recv_cq;
        r
    })
}

pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    guard((), || {
        let Some(i) = id_from(id) else { return };
        let c = i.c();
        if !c.qp.is_null() {
            // SAFETY: the id's QP.
            unsafe { ibv_destroy_qp(c.qp) };
            c.qp = null_mut();
        }
        destroy_cqs(i);
    })
}

pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL program structs.
        let state = unsafe { (*qp_attr).qp_state };
        match init_attr(i, state) {
            Ok((a, m)) => {
                // SAFETY: as above.
                unsafe {
                    *qp_attr = a;
                    *qp_attr_mask = m;
                }
                0
            }
            Err(e) => fail(e),
        }
    })
}

pub unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let c = i.c();
        let pd = if pd.is_null() { c.pd } else { pd };
        if attr.is_null() || pd.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: our PD, the program's init attributes.
        let srq = unsafe { ibv_create_srq(pd, attr) };
        if srq.is_null() {
            return -1;
        }
        c.srq = srq;
        0
    })
}

pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    guard(-1, || {
        if id_from(id).is_none() || attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { &*attr };
        let mut b = ibv_srq_init_attr {
            srq_context: a.srq_context,
            attr: a.attr,
        };
        let pd = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 {
            a.pd
        } else {
            null_mut()
        };
        // SAFETY: as rdma_create_srq.
        unsafe { rdma_create_srq(id, pd, &mut b) }
    })
}

pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    guard((), || {
        let Some(i) = id_from(id) else { return };
        let c = i.c();
        if !c.srq.is_null() {
            // SAFETY: the id's SRQ.
            unsafe { ibv_destroy_srq(c.srq) };
            c.srq = null_mut();
        }
    })
}
