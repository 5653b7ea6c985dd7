//! QP verbs: create (plain and extended), modify, query, destroy, the `post_send`/`post_recv` ops
//! entries, and multicast attach/detach.
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

// ---------------------------------------------------------------------------------------------
// QP

struct QpArgs {
    /// `Some(send_ops_flags)` for the `ibv_wr_*` API.
    send_ops: Option<u64>,
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    cap: ibv_qp_cap,
    qp_type: u32,
    sq_sig_all: bool,
}

fn new_qp(pd: *mut ibv_pd, a: &QpArgs) -> Result<(*mut Qp, ibv_qp_cap), Errno> {
    // SAFETY: module contract for `pd`, `send_cq`, `recv_cq`, `srq`.
    let p = unsafe { obj::<Pd, _>(pd) }.ok_or(Errno::EINVAL)?;
    // SAFETY: our object.
    let context = unsafe { (*p.c.get()).context };
    let ctx = ctx_of(context).ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let scq = unsafe { obj::<Cq, _>(a.send_cq) }.ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let rcq = unsafe { obj::<Cq, _>(a.recv_cq) }.ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let srq = if a.srq.is_null() {
        None
    } else {
        Some(unsafe { obj::<Srq, _>(a.srq) }.ok_or(Errno::EINVAL)?.id)
    };
    if !matches!(a.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD) {
        return Err(Errno::EOPNOTSUPP);
    }
    let qp = publish(Box::new(Qp {
        c: UnsafeCell::new(ibv_qp_ex_ext {
            base: ibv_qp_ex {
                qp_base: ibv_qp {
                    context,
                    qp_context: a.qp_context,
                    pd,
                    send_cq: a.send_cq,
                    recv_cq: a.recv_cq,
                    srq: a.srq,
                    handle: 0,
                    qp_num: 0,
                    state: IBV_QPS_RESET,
                    qp_type: a.qp_type,
                    mutex: Default::default(),
                    cond: Default::default(),
                    events_completed: 0,
                },
                comp_mask: 0,
                wr_id: 0,
                wr_flags: 0,
                wr_atomic_cmp_swp: None,
                wr_atomic_fetch_add: None,
                wr_bind_mw: None,
                wr_local_inv: None,
                wr_rdma_read: None,
                wr_rdma_write: None,
                wr_rdma_write_imm: None,
                wr_send: None,
                wr_send_imm: None,
                wr_send_inv: None,
                wr_send_tso: None,
                wr_set_ud_addr: None,
                wr_set_xrc_srqn: None,
                wr_set_inline_data: None,
                wr_set_inline_data_list: None,
                wr_set_sge: None,
                wr_set_sge_list: None,
                wr_start: None,
                wr_complete: None,
                wr_abort: None,
                wr_atomic_write: None,
            },
            wr_flush: None,
        }),
        id: QpId(0),
        sq_sig_all: a.sq_sig_all,
        lock: Mutex::new(()),
        qp_ex: a.send_ops.is_some(),
        pending: Mutex::new(Default::default()),
        magic: Qp::alive(),
    }));
    if a.send_ops.is_some() {
        // SAFETY: not yet published; we are the only user.
        unsafe { crate::ffi::wr::install(&mut *(*qp).c.get()) };
    }
    let init = QpInit {
        pd: p.id,
        qp_type: a.qp_type,
        send_cq: scq.id,
        recv_cq: rcq.id,
        srq,
        cap: a.cap,
        sq_sig_all: a.sq_sig_all,
        cookie: qp as u64,
    };
    match ctx.inner.backend.create_qp(init) {
        Ok(info) => {
            // SAFETY: not yet published to the program.
            unsafe {
                (*qp).id = info.id;
                let c = (*qp).c.get();
                (*c).base.qp_base.handle = info.id.0 as u32;
                (*c).base.qp_base.qp_num = info.qp_num;
            }
            Ok((qp, info.cap))
        }
        Err(e) => {
            // SAFETY: never handed to the program.
            unsafe { free(qp) };
            Err(noted("ibv_create_qp", e))
        }
    }
}

pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard(null_mut(), || {
        if qp_init_attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct, read by value.
        let ia = unsafe { &*qp_init_attr };
        let args = QpArgs {
            send_ops: None,
            qp_context: ia.qp_context,
            send_cq: ia.send_cq,
            recv_cq: ia.recv_cq,
            srq: ia.srq,
            cap: ia.cap,
            qp_type: ia.qp_type,
            sq_sig_all: ia.sq_sig_all != 0,
        };
        match new_qp(pd, &args) {
            Ok((qp, cap)) => {
                // Like the kernel: report the actual capacities back.
                // SAFETY: non-NULL program struct.
                unsafe { (*qp_init_attr).cap = cap };
                qp.cast()
            }
            Err(e) => null_with(e),
        }
    })
}

/// `verbs_context.create_qp_ex`. The inline `ibv_create_qp_ex` calls `ibv_create_qp` itself when
/// only `IBV_QP_INIT_ATTR_PD` is set; other masks arrive here. `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`
/// (what Debian's perftest uses by default) gives a QP with the `ibv_wr_*` API (`wr.rs`).
pub unsafe extern "C" fn create_qp_ex_op(
    _context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard(null_mut(), || {
        if attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let ia = unsafe { &*attr };
        let known =
            IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        let flags_ok = ia.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS == 0 || ia.create_flags == 0;
        if ia.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || ia.comp_mask & !known != 0 || !flags_ok {
            // XRC, RSS, TSO headers, create flags, … need the engine.
            unimplemented_once("ibv_create_qp_ex (XRC/RSS/TSO/create_flags)");
            return null_with(Errno::EOPNOTSUPP);
        }
        let send_ops =
            (ia.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(ia.send_ops_flags);
        if let Some(ops) = send_ops {
            let supported = crate::ffi::wr::supported_send_ops(ia.qp_type);
            if ops & !supported != 0 {
                // As rxe's provider (check_qp_init_attr): refused at creation, not at every post.
                crate::log::explain_once(&format!(
                    "ibv_create_qp_ex: this emulated device does not support send_ops_flags {} \
                     on {} QPs (EOPNOTSUPP). It supports {}: ask only for the operations the \
                     program posts",
                    crate::ffi::wr::send_ops_names(ops & !supported),
                    qp_type_name(ia.qp_type),
                    crate::ffi::wr::send_ops_names(supported),
                ));
                return null_with(Errno::EOPNOTSUPP);
            }
        }
        let args = QpArgs {
            send_ops,
            qp_context: ia.qp_context,
            send_cq: ia.send_cq,
            recv_cq: ia.recv_cq,
            srq: ia.srq,
            cap: ia.cap,
            qp_type: ia.qp_type,
            sq_sig_all: ia.sq_sig_all != 0,
        };
        match new_qp(ia.pd, &args) {
            Ok((qp, cap)) => {
                // SAFETY: non-NULL program struct.
                unsafe { (*attr).cap = cap };
                qp.cast()
            }
            Err(e) => null_with(e),
        }
    })
}

fn qp_type_name(t: u32) -> &'static str {
    match t {
        IBV_QPT_RC => "RC",
        IBV_QPT_UC => "UC",
        IBV_QPT_UD => "UD",
        _ => "other",
    }
}

/// `ibv_qp_to_qp_ex`: the extended QP view exists only for QPs created with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`; NULL for the others, as libibverbs answers.
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: module contract.
    match unsafe { obj::<Qp, _>(qp) } {
        Some(q) if q.qp_ex => qp.cast(),
        _ => null_mut(),
    }
}

pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program struct, read by value.
        let a = unsafe { attr.read() };
        match ctx.inner.backend.modify_qp(q.id, &a, attr_mask) {
            Ok(()) => {
                if attr_mask & IBV_QP_STATE != 0 {
                    let _g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
                    // SAFETY: C field of our object, under its lock.
                    unsafe { (*q.c.get()).base.qp_base.state = a.qp_state };
                }
                0
            }
            Err(e) => noted("ibv_modify_qp", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let base = unsafe { &(*q.c.get()).base.qp_base };
        let Some(ctx) = ctx_of(base.context) else {
            return libc::EINVAL;
        };
        if attr.is_null() || init_attr.is_null() {
            return libc::EINVAL;
        }
        let mut a = ibv_qp_attr::default();
        match ctx.inner.backend.query_qp(q.id, attr_mask, &mut a) {
            Ok(cap) => {
                // SAFETY: non-NULL program structs.
                unsafe {
                    attr.write(a);
                    init_attr.write(ibv_qp_init_attr {
                        qp_context: base.qp_context,
                        send_cq: base.send_cq,
                        recv_cq: base.recv_cq,
                        srq: base.srq,
                        cap,
                        qp_type: base.qp_type,
                        sq_sig_all: c_int::from(q.sq_sig_all),
                    });
                }
                0
            }
            Err(e) => noted("ibv_query_qp", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.destroy_qp(q.id) {
            Ok(()) => {
                purge_async(&ctx.inner.events, AsyncElement::Qp(qp as u64));
                // SAFETY: boxed by new_qp; freed once.
                unsafe { free(qp.cast::<Qp>()) };
                0
            }
            Err(e) => noted("ibv_destroy_qp", e).0,
        }
    })
}

/// `sg_list[0..num_sge]` as a slice.
///
/// # Safety
/// `sg` must point to `n` readable `ibv_sge` (or `n == 0`), unchanged for `'a`.
unsafe fn sges<'a>(sg: *const ibv_sge, n: c_int) -> Result<&'a [ibv_sge], Errno> {
    if n < 0 || (n > 0 && sg.is_null()) {
        return Err(Errno::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: function contract.
    Ok(unsafe { core::slice::from_raw_parts(sg, n as usize) })
}

pub(super) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let base = unsafe { &(*q.c.get()).base.qp_base };
        let Some(ctx) = ctx_of(base.context) else {
            return libc::EINVAL;
        };
        let is_ud = base.qp_type == IBV_QPT_UD;
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: the program's WR list (module docs).
            let w = unsafe { cur.read() };
            let r = (|| {
                // SAFETY: the WR's scatter list (module docs).
                let sg_list = unsafe { sges(w.sg_list, w.num_sge) }?;
                let inline_buf;
                let inline_data = if w.send_flags & IBV_SEND_INLINE != 0 {
                    // SAFETY: inline SGEs name program memory readable for this call.
                    inline_buf = unsafe { gather(sg_list) };
                    Some(&inline_buf[..])
                } else {
                    None
                };
                let mut s = SendWr {
                    wr_id: w.wr_id,
                    opcode: w.opcode,
                    send_flags: w.send_flags,
                    imm_data: w.imm_data,
                    sg_list,
                    inline_data,
                    remote_addr: 0,
                    rkey: 0,
                    compare_add: 0,
                    swap: 0,
                    ud: None,
                    bind: MwBindWr::default(),
                    flush: Default::default(),
                };
                // SAFETY: reading the union member that `opcode`/QP type select; all members
                // are plain data, so any bit pattern is a valid value.
                unsafe {
                    if is_ud {
                        let ah = obj::<Ah, _>(w.wr.ud.ah).ok_or(Errno::EINVAL)?;
                        s.ud = Some(UdDest {
                            ah: ah.id,
                            remote_qpn: w.wr.ud.remote_qpn,
                            remote_qkey: w.wr.ud.remote_qkey,
                        });
                    } else {
                        match w.opcode {
                            IBV_WR_FLUSH | IBV_WR_ATOMIC_WRITE => {
                                return Err(legacy_iba15(w.opcode))
                            }
                            IBV_WR_BIND_MW => {
                                let b = w.ext.bind_mw;
                                let mw = obj::<Mw, _>(b.mw).ok_or(Errno::EINVAL)?;
                                s.bind = super::mw::bind_wr(mw, b.rkey, &b.bind_info)?;
                            }
                            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                                s.remote_addr = w.wr.atomic.remote_addr;
                                s.compare_add = w.wr.atomic.compare_add;
                                s.swap = w.wr.atomic.swap;
                                s.rkey = w.wr.atomic.rkey;
                            }
                            _ => {
                                s.remote_addr = w.wr.rdma.remote_addr;
                                s.rkey = w.wr.rdma.rkey;
                            }
                        }
                    }
                }
                ctx.inner
                    .backend
                    .post_send(q.id, &s)
                    .map_err(|e| noted("ibv_post_send", e))
            })();
            if let Err(e) = r {
                if !bad_wr.is_null() {
                    // SAFETY: non-NULL out-pointer.
                    unsafe { *bad_wr = cur };
                }
                return e.0;
            }
            cur = w.next;
        }
        0
    })
}

/// `IBV_WR_FLUSH` / `IBV_WR_ATOMIC_WRITE` in `ibv_post_send`: `struct ibv_send_wr` has no field
/// for a FLUSH's placement type and selectivity level or for the 8 bytes an ATOMIC WRITE
/// stores; they are `ibv_wr_flush` / `ibv_wr_atomic_write` operations. rdma-core's rxe provider
/// copies no operand for them in this path (`convert_send_wr`), so the kernel sends rkey 0 and
/// the WR fails at the responder with a remote access error, the QP going to the error state;
/// here the post is refused with EINVAL and the QP stays usable (emu README, deviations).
fn legacy_iba15(opcode: u32) -> Errno {
    let (op, verb) = if opcode == IBV_WR_FLUSH {
        ("IBV_WR_FLUSH", "ibv_wr_flush")
    } else {
        ("IBV_WR_ATOMIC_WRITE", "ibv_wr_atomic_write")
    };
    crate::log::explain_once(&format!(
        "ibv_post_send: {op} is refused here (EINVAL): struct ibv_send_wr cannot carry its \
         operands (rxe's provider sends it with rkey 0 and it fails at the responder). Create \
         the QP with ibv_create_qp_ex and IBV_QP_INIT_ATTR_SEND_OPS_FLAGS and post it with {verb}"
    ));
    Errno::EINVAL
}

/// Concatenates the bytes the SGEs name (inline data).
///
/// # Safety
/// Each SGE must name `length` readable bytes at `addr` for the duration of the call (the verbs
/// contract for inline sends: no lkey, the provider copies at post time).
pub(crate) unsafe fn gather(sg: &[ibv_sge]) -> Vec<u8> {
    let mut v = Vec::with_capacity(sg.iter().map(|s| s.length as usize).sum());
    for s in sg {
        if s.length > 0 && s.addr != 0 {
            // SAFETY: function contract.
            v.extend_from_slice(unsafe {
                core::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
            });
        }
    }
    v
}

pub(super) fn post_recv_list(
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    mut f: impl FnMut(&RecvWr<'_>) -> VerbResult<()>,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the program's WR list (module docs).
        let w = unsafe { cur.read() };
        // SAFETY: the WR's scatter list.
        let r = unsafe { sges(w.sg_list, w.num_sge) }.and_then(|sg_list| {
            f(&RecvWr {
                wr_id: w.wr_id,
                sg_list,
            })
        });
        if let Err(e) = r {
            if !bad_wr.is_null() {
                // SAFETY: non-NULL out-pointer.
                unsafe { *bad_wr = cur };
            }
            return e.0;
        }
        cur = w.next;
    }
    0
}

pub(super) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        post_recv_list(wr, bad_wr, |w| {
            ctx.inner
                .backend
                .post_recv(q.id, w)
                .map_err(|e| noted("ibv_post_recv", e))
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Multicast

unsafe fn mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16, attach: bool) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        if gid.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program GID.
        let g = unsafe { (*gid).raw };
        let r = if attach {
            ctx.inner.backend.attach_mcast(q.id, g, lid)
        } else {
            ctx.inner.backend.detach_mcast(q.id, g, lid)
        };
        match r {
            Ok(()) => 0,
            Err(e) => noted("ibv_attach_mcast/ibv_detach_mcast", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(qp, gid, lid, true) }
}

pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(qp, gid, lid, false) }
}
