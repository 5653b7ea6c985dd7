//! AH verbs: `ibv_create_ah`, `ibv_destroy_ah`, `ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`.
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

// ---------------------------------------------------------------------------------------------
// AH

pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
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
        if attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { attr.read() };
        match ctx.inner.backend.create_ah(p.id, &a) {
            Ok(id) => publish(Box::new(Ah {
                c: UnsafeCell::new(ibv_ah {
                    context,
                    pd,
                    handle: id.0 as u32,
                }),
                id,
                magic: Ah::alive(),
            }))
            .cast(),
            Err(e) => null_with(noted("ibv_create_ah", e)),
        }
    })
}

pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(a) = (unsafe { obj::<Ah, _>(ah) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*a.c.get()).context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.destroy_ah(a.id) {
            Ok(()) => {
                // SAFETY: boxed by ibv_create_ah; freed once.
                unsafe { free(ah.cast::<Ah>()) };
                0
            }
            Err(e) => noted("ibv_destroy_ah", e).0,
        }
    })
}

/// Builds the AH attributes that answer a received UD message (RoCE: from its GRH).
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard(-1, || {
        let Some(ctx) = ctx_of(context) else {
            return -1;
        };
        if wc.is_null() || ah_attr.is_null() {
            return -1;
        }
        // SAFETY: non-NULL program structs.
        let w = unsafe { wc.read() };
        // RoCE needs the GRH (the source GID is the only address).
        if w.wc_flags & IBV_WC_GRH == 0 || grh.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: non-NULL program struct.
        let g = unsafe { grh.read() };
        // SAFETY: the same 40 bytes, as bytes.
        let raw: [u8; 40] = unsafe { core::ptr::read(grh as *const [u8; 40]) };
        // RoCEv2 over IPv4 puts the IPv4 header in the last 20 bytes of the GRH area (the
        // first 20 are zero), as rdma-core's ibv_init_ah_from_wc reads it: addresses as
        // IPv4-mapped GIDs, the TOS as traffic class, no flow label.
        let flow = u32::from_be(g.version_tclass_flow);
        let (sgid, dgid, flow_label, tclass) = if flow >> 28 != 6 {
            let ip4 = &raw[20..40];
            if ip4[0] >> 4 != 4 {
                set_errno(libc::EPROTONOSUPPORT);
                return -1;
            }
            let mapped = |a: &[u8]| {
                let mut gid = [0u8; 16];
                gid[10] = 0xff;
                gid[11] = 0xff;
                gid[12..].copy_from_slice(a);
                gid
            };
            (mapped(&ip4[12..16]), mapped(&ip4[16..20]), 0, ip4[1])
        } else {
            (
                g.sgid.raw,
                g.dgid.raw,
                flow & 0xfffff,
                ((flow >> 20) & 0xff) as u8,
            )
        };
        // Our sgid index: the entry equal to the packet's destination GID.
        let gids = ctx.inner.cfg.gids();
        let Some(sgid_index) = gids.iter().position(|x| *x == dgid) else {
            set_errno(libc::ENOENT);
            return -1;
        };
        let a = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: sgid },
                flow_label,
                sgid_index: sgid_index as u8,
                hop_limit: 0xff,
                traffic_class: tclass,
            },
            dlid: w.slid,
            sl: w.sl,
            src_path_bits: w.dlid_path_bits,
            static_rate: 0,
            is_global: 1,
            port_num,
        };
        // SAFETY: non-NULL program struct.
        unsafe { ah_attr.write(a) };
        0
    })
}

pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    guard(null_mut(), || {
        // SAFETY: module contract.
        let Some(p) = (unsafe { obj::<Pd, _>(pd) }) else {
            return null_with(Errno::EINVAL);
        };
        let mut a = ibv_ah_attr::default();
        // SAFETY: forwarded program pointers; `a` is ours.
        unsafe {
            if ibv_init_ah_from_wc((*p.c.get()).context, port_num, wc, grh, &mut a) != 0 {
                return null_mut();
            }
            ibv_create_ah(pd, &mut a)
        }
    })
}
