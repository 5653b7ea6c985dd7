//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw` (the `ops` entries the
//! inline verbs of verbs.h call). A type 1 bind is posted on the QP as an `IBV_WR_BIND_MW`
//! work request with the window's key byte incremented (`ibv_inc_rkey`), and `mw->rkey` takes
//! the new rkey once it is posted, as rdma-core's rxe provider does; a type 2 window is bound by
//! the program's own `IBV_WR_BIND_MW` (`ibv_post_send`, `ibv_wr_bind_mw`).
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

/// `ibv_inc_rkey`: the next key byte, the index bits kept.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xFF) | (rkey.wrapping_add(1) & 0xFF)
}

pub(super) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: c_uint) -> *mut ibv_mw {
    guard(null_mut(), || {
        // SAFETY: module contract.
        let Some(p) = (unsafe { obj::<Pd, _>(pd) }) else {
            return null_with(Errno::EINVAL);
        };
        // SAFETY: our object.
        let context = unsafe { (*p.c.get()).context };
        let Some(ctx) = ctx_of(context) else {
            return null_with(Errno::EINVAL);
        };
        match ctx.inner.backend.alloc_mw(p.id, mw_type) {
            Ok(rkey) => {
                let mw = Box::new(Mw {
                    c: UnsafeCell::new(ibv_mw {
                        context,
                        pd,
                        rkey,
                        handle: rkey >> 8,
                        type_: mw_type,
                    }),
                    magic: Mw::alive(),
                });
                publish(mw).cast()
            }
            Err(e) => null_with(noted("ibv_alloc_mw", e)),
        }
    })
}

pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(m) = (unsafe { obj::<Mw, _>(mw) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let (context, rkey) = unsafe { ((*m.c.get()).context, (*m.c.get()).rkey) };
        let Some(ctx) = ctx_of(context) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.dealloc_mw(rkey) {
            Ok(()) => {
                // SAFETY: boxed by alloc_mw; freed once, here.
                unsafe { free(mw.cast::<Mw>()) };
                0
            }
            Err(e) => noted("ibv_dealloc_mw", e).0,
        }
    })
}

/// The engine's view of a bind of window `mw` (its rkey as the program's `ibv_mw` holds it) to
/// `info`, with the new rkey `rkey`. `EINVAL` for an `info->mr` that is not one of ours.
pub(crate) fn bind_wr(mw: &Mw, rkey: u32, info: &ibv_mw_bind_info) -> Result<MwBindWr, Errno> {
    // SAFETY: module contract: NULL (unbind) or one of our MRs.
    let mr_lkey = match unsafe { obj::<Mr, _>(info.mr) } {
        // SAFETY: our object.
        Some(m) => unsafe { (*m.c.get()).lkey },
        None if info.mr.is_null() => 0,
        None => return Err(Errno::EINVAL),
    };
    Ok(MwBindWr {
        // SAFETY: our object's C struct (the program serializes its use of the window).
        mw_rkey: unsafe { (*mw.c.get()).rkey },
        rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: info.mw_access_flags,
    })
}

/// `ibv_bind_mw` (libibverbs has checked the type and the region's PD): posts the bind on `qp`.
pub(super) unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    b: *mut ibv_mw_bind,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let (Some(q), Some(m)) = (unsafe { obj::<Qp, _>(qp) }, unsafe { obj::<Mw, _>(mw) }) else {
            return libc::EINVAL;
        };
        if b.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program's `struct ibv_mw_bind`, read now.
        let b = unsafe { b.read() };
        // rdma-core's rxe provider refuses zero-based type 1 windows (o10-36.2.2)
        if b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED as c_uint != 0 {
            return libc::EINVAL;
        }
        // SAFETY: our objects.
        let (context, old) = unsafe { ((*q.c.get()).base.qp_base.context, (*m.c.get()).rkey) };
        let Some(ctx) = ctx_of(context) else {
            return libc::EINVAL;
        };
        let bind = match bind_wr(m, inc_rkey(old), &b.bind_info) {
            Ok(x) => x,
            Err(e) => return e.0,
        };
        let wr = SendWr {
            wr_id: b.wr_id,
            opcode: IBV_WR_BIND_MW,
            send_flags: b.send_flags,
            imm_data: 0,
            sg_list: &[],
            inline_data: None,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ud: None,
            bind,
            flush: Default::default(),
        };
        match ctx.inner.backend.post_send(q.id, &wr) {
            Ok(()) => {
                // the program undoes this itself if the bind completes in error (rdma-core)
                // SAFETY: our object's C struct.
                unsafe { (*m.c.get()).rkey = bind.rkey };
                0
            }
            Err(e) => noted("ibv_bind_mw", e).0,
        }
    })
}
