//! PD and MR verbs: `ibv_alloc_pd`/`ibv_dealloc_pd`, `ibv_reg_mr` (and `_iova`, `_iova2`), `ibv_dereg_mr`.
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

// ---------------------------------------------------------------------------------------------
// PD

pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    guard(null_mut(), || {
        let Some(ctx) = ctx_of(context) else {
            return null_with(Errno::EINVAL);
        };
        match ctx.inner.backend.alloc_pd() {
            Ok(id) => {
                let pd = Box::new(Pd {
                    c: UnsafeCell::new(ibv_pd {
                        context,
                        handle: id.0 as u32,
                    }),
                    id,
                    magic: Pd::alive(),
                });
                publish(pd).cast()
            }
            Err(e) => null_with(noted("ibv_alloc_pd", e)),
        }
    })
}

pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(p) = (unsafe { obj::<Pd, _>(pd) }) else {
            return libc::EINVAL;
        };
        // SAFETY: reading our own object's C struct.
        let Some(ctx) = ctx_of(unsafe { (*p.c.get()).context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.dealloc_pd(p.id) {
            Ok(()) => {
                // SAFETY: boxed by ibv_alloc_pd; freed once, here.
                unsafe { free(pd.cast::<Pd>()) };
                0
            }
            Err(e) => noted("ibv_dealloc_pd", e).0,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// MR

pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint) }
}

pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
}

pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
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
        let mem = match MrMemory::new(addr as usize, length) {
            Ok(m) => m,
            Err(e) => return null_with(e),
        };
        // Optional access bits (IBV_ACCESS_OPTIONAL_RANGE) may be ignored by a provider.
        let access = (access as c_int) & !IBV_ACCESS_OPTIONAL_RANGE;
        match ctx.inner.backend.reg_mr(p.id, mem, iova, access) {
            Ok(info) => {
                let mr = Box::new(Mr {
                    c: UnsafeCell::new(ibv_mr {
                        context,
                        pd,
                        addr,
                        length,
                        handle: info.id.0 as u32,
                        lkey: info.lkey,
                        rkey: info.rkey,
                    }),
                    id: info.id,
                    magic: Mr::alive(),
                });
                publish(mr).cast()
            }
            Err(e) => null_with(noted("ibv_reg_mr", e)),
        }
    })
}

pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(m) = (unsafe { obj::<Mr, _>(mr) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*m.c.get()).context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.dereg_mr(m.id) {
            Ok(()) => {
                // SAFETY: boxed by ibv_reg_mr*; freed once.
                unsafe { free(mr.cast::<Mr>()) };
                0
            }
            Err(e) => noted("ibv_dereg_mr", e).0,
        }
    })
}
