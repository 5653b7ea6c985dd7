//! SRQ verbs: create, modify, query, destroy, and the `post_srq_recv` ops entry.
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

// ---------------------------------------------------------------------------------------------
// SRQ

pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
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
        if srq_init_attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let ia = unsafe { &*srq_init_attr };
        let srq = publish(Box::new(Srq {
            c: UnsafeCell::new(ibv_srq {
                context,
                srq_context: ia.srq_context,
                pd,
                handle: 0,
                mutex: Default::default(),
                cond: Default::default(),
                events_completed: 0,
            }),
            id: SrqId(0),
            lock: Mutex::new(()),
            magic: Srq::alive(),
        }));
        match ctx.inner.backend.create_srq(p.id, ia.attr, srq as u64) {
            Ok(info) => {
                // SAFETY: not yet published; then the program's struct (non-NULL).
                unsafe {
                    (*srq).id = info.id;
                    (*(*srq).c.get()).handle = info.id.0 as u32;
                    (*srq_init_attr).attr = info.attr;
                }
                srq.cast()
            }
            Err(e) => {
                // SAFETY: never handed to the program.
                unsafe { free(srq) };
                null_with(noted("ibv_create_srq", e))
            }
        }
    })
}

fn srq_ctx<'a>(srq: *mut ibv_srq) -> Option<(&'a Srq, &'a Context)> {
    // SAFETY: module contract.
    let s = unsafe { obj::<Srq, _>(srq) }?;
    // SAFETY: our object.
    let ctx = ctx_of(unsafe { (*s.c.get()).context })?;
    Some((s, ctx))
}

pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        if srq_attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { srq_attr.read() };
        match ctx.inner.backend.modify_srq(s.id, &a, srq_attr_mask) {
            Ok(()) => 0,
            Err(e) => noted("ibv_modify_srq", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        if srq_attr.is_null() {
            return libc::EINVAL;
        }
        match ctx.inner.backend.query_srq(s.id) {
            Ok(a) => {
                // SAFETY: non-NULL program struct.
                unsafe { srq_attr.write(a) };
                0
            }
            Err(e) => noted("ibv_query_srq", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.destroy_srq(s.id) {
            Ok(()) => {
                purge_async(&ctx.inner.events, AsyncElement::Srq(srq as u64));
                // SAFETY: boxed by ibv_create_srq; freed once.
                unsafe { free(srq.cast::<Srq>()) };
                0
            }
            Err(e) => noted("ibv_destroy_srq", e).0,
        }
    })
}

pub(super) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        post_recv_list(wr, bad_wr, |w| {
            ctx.inner
                .backend
                .post_srq_recv(s.id, w)
                .map_err(|e| noted("ibv_post_srq_recv", e))
        })
    })
}
