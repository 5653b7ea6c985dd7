//! Device, port, GID and P_Key queries (no engine needed: the values come from `device.rs`).
//!
//! # Safety
//! Out-structs come from the program. We write them only after a NULL check and never past the
//! size the program's header says they have: a fixed `sizeof` for the legacy symbols (48 bytes
//! for `ibv_query_port`'s `_compat_ibv_port_attr`), the caller's `*_len`/`entry_size` for the
//! extended ones. Every write is a `copy_nonoverlapping` of a fully initialized local of at least
//! that many bytes.

use super::context::from_ptr;
use super::guard;
use crate::abi::*;
use crate::config::DeviceConfig;
use crate::device;
use core::ffi::{c_int, c_void};
use core::mem::size_of;

/// Writes `min(src_len, dst_len)` bytes of `src` to `dst`, zeroing the rest of `dst_len`.
///
/// # Safety
/// `dst` must be valid for `dst_len` bytes of writes.
unsafe fn copy_out<T: Copy>(src: &T, dst: *mut c_void, dst_len: usize) {
    let n = dst_len.min(size_of::<T>());
    // SAFETY: caller guarantees `dst..dst+dst_len`; `src` is a local of size_of::<T>() >= n.
    unsafe {
        core::ptr::write_bytes(dst.cast::<u8>(), 0, dst_len);
        core::ptr::copy_nonoverlapping((src as *const T).cast::<u8>(), dst.cast::<u8>(), n);
    }
}

pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    guard(libc::EIO, || {
        let Some(ctx) = from_ptr(context) else {
            return libc::EINVAL;
        };
        if device_attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL `struct ibv_device_attr*` (fixed size since 2005).
        unsafe { device_attr.write(device::device_attr(ctx.inner.cfg)) };
        0
    })
}

/// `verbs_context.query_device_ex`.
pub unsafe extern "C" fn query_device_ex_op(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        let Some(ctx) = from_ptr(context) else {
            return libc::EINVAL;
        };
        // SAFETY: `input` is NULL or a program-owned input struct.
        if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
            return libc::EINVAL;
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return libc::EINVAL;
        }
        let v = device::device_attr_ex(ctx.inner.cfg);
        // SAFETY: the program's header says `attr` has `attr_size` bytes.
        unsafe { copy_out(&v, attr.cast(), attr_size) };
        0
    })
}

fn port_ok(port_num: u32) -> bool {
    port_num >= 1 && port_num <= u32::from(device::PHYS_PORT_CNT)
}

/// The exported `ibv_query_port@@IBVERBS_1.1`: programs built against v1.1+ headers reach it
/// only when `verbs_get_ctx_op(ctx, query_port)` is absent, and it fills the 48-byte
/// `_compat_ibv_port_attr`. Programs that call it directly get the same 48 bytes.
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut _compat_ibv_port_attr,
) -> c_int {
    // SAFETY: forwarded contract: `port_attr` has (at least) the compat size.
    unsafe { query_port_ex(context, port_num, port_attr.cast(), COMPAT_PORT_ATTR_LEN) }
}

/// `verbs_context.query_port`: what the inline `ibv_query_port` calls, with the program's
/// `sizeof(struct ibv_port_attr)` (52 with v44 headers, 56 with newer ones).
pub unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    guard(libc::EIO, || {
        let Some(ctx) = from_ptr(context) else {
            return libc::EINVAL;
        };
        if port_attr.is_null() || !port_ok(u32::from(port_num)) {
            return libc::EINVAL;
        }
        if port_attr_len < COMPAT_PORT_ATTR_LEN {
            return libc::EINVAL;
        }
        let v = device::port_attr(ctx.inner.cfg);
        // SAFETY: `port_attr` has `port_attr_len` bytes (the program's header or the compat size).
        unsafe { copy_out(&v, port_attr.cast(), port_attr_len) };
        0
    })
}

fn gid_entry(cfg: &DeviceConfig, port_num: u32, index: u32) -> Result<ibv_gid_entry, c_int> {
    if !port_ok(port_num) {
        return Err(libc::EINVAL);
    }
    let Some(raw) = device::gid(cfg, i64::from(index)) else {
        return Err(libc::EINVAL);
    };
    if raw == [0; 16] {
        return Err(libc::ENODATA);
    }
    Ok(ibv_gid_entry {
        gid: ibv_gid { raw },
        gid_index: index,
        port_num,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: ndev_ifindex(cfg),
    })
}

/// The interface index of the netdev the GID belongs to: `lo` for a loopback address, else 0
/// (unknown: the emulated NIC has no netdev of its own).
fn ndev_ifindex(cfg: &DeviceConfig) -> u32 {
    if cfg.ip.is_loopback() {
        // SAFETY: NUL-terminated literal.
        unsafe { libc::if_nametoindex(c"lo".as_ptr()) }
    } else {
        0
    }
}

pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard(-1, || {
        let Some(ctx) = from_ptr(context) else {
            return -1;
        };
        if gid.is_null() || index < 0 {
            return -1;
        }
        match gid_entry(ctx.inner.cfg, u32::from(port_num), index as u32) {
            // SAFETY: non-NULL `union ibv_gid*`.
            Ok(e) => unsafe { gid.write(e.gid) },
            // An empty slot reads as the zero GID, as libibverbs returns it.
            // SAFETY: as above.
            Err(libc::ENODATA) => unsafe { gid.write(ibv_gid::default()) },
            Err(_) => return -1,
        }
        0
    })
}

pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        let Some(ctx) = from_ptr(context) else {
            return libc::EINVAL;
        };
        if entry.is_null() || flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return libc::EINVAL;
        }
        match gid_entry(ctx.inner.cfg, port_num, gid_index) {
            Ok(e) => {
                // SAFETY: the program's entry has `entry_size` >= sizeof bytes.
                unsafe { copy_out(&e, entry.cast(), entry_size) };
                0
            }
            Err(e) => e,
        }
    })
}

pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard(-(libc::EIO as isize), || {
        let Some(ctx) = from_ptr(context) else {
            return -(libc::EINVAL as isize);
        };
        if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return -(libc::EINVAL as isize);
        }
        let cfg = ctx.inner.cfg;
        let valid: Vec<ibv_gid_entry> = (0..device::GID_TBL_LEN as u32)
            .take(device::gid_count(cfg))
            .filter_map(|i| gid_entry(cfg, 1, i).ok())
            .collect();
        if valid.len() > max_entries {
            return -(libc::EINVAL as isize);
        }
        if entries.is_null() && !valid.is_empty() {
            return -(libc::EINVAL as isize);
        }
        for (i, e) in valid.iter().enumerate() {
            // SAFETY: `entries` holds `max_entries` >= valid.len() elements of `entry_size` bytes.
            unsafe {
                copy_out(
                    e,
                    entries.cast::<u8>().add(i * entry_size).cast(),
                    entry_size,
                )
            };
        }
        valid.len() as isize
    })
}

/// `ibv_query_gid_type@IBVERBS_PRIVATE_34` (used by `ibv_devinfo`): `enum ibv_gid_type_sysfs`.
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut c_int,
) -> c_int {
    guard(-1, || {
        let Some(ctx) = from_ptr(context) else {
            return -1;
        };
        if gid_type.is_null() {
            return -1;
        }
        match gid_entry(ctx.inner.cfg, u32::from(port_num), index) {
            Ok(_) => {
                // SAFETY: non-NULL out-pointer.
                unsafe { *gid_type = IBV_GID_TYPE_SYSFS_ROCE_V2 };
                0
            }
            Err(_) => -1,
        }
    })
}

pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard(-1, || {
        if from_ptr(context).is_none() || pkey.is_null() || !port_ok(u32::from(port_num)) {
            return -1;
        }
        if !(0..c_int::from(device::PKEY_TBL_LEN)).contains(&index) {
            return -1;
        }
        let v = if index == 0 { device::DEFAULT_PKEY } else { 0 };
        // SAFETY: non-NULL `__be16*`.
        unsafe { *pkey = v.to_be() };
        0
    })
}

pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    if from_ptr(context).is_none() || !port_ok(u32::from(port_num)) {
        return -1;
    }
    if u16::from_be(pkey) == device::DEFAULT_PKEY {
        0
    } else {
        -1
    }
}

/// Ethernet L2 address of a RoCE destination. The emulated NICs have synthetic MACs derived
/// from their IP (`config.rs`), so the MAC follows from the GID without a neighbour lookup.
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    context: *mut ibv_context,
    attr: *mut ibv_ah_attr,
    eth_mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    guard(-1, || {
        if from_ptr(context).is_none() || attr.is_null() || eth_mac.is_null() {
            return -1;
        }
        // SAFETY: non-NULL program struct.
        let attr = unsafe { attr.read() };
        if attr.is_global == 0 {
            return -1;
        }
        let mac = roce_emu::net::mac_of_gid(&attr.grh.dgid.raw);
        // SAFETY: `eth_mac` is `uint8_t eth_mac[6]`; `vid` is NULL or a `uint16_t*`.
        unsafe {
            core::ptr::copy_nonoverlapping(mac.as_ptr(), eth_mac, 6);
            if !vid.is_null() {
                *vid = 0xffff;
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::super::context::*;
    use super::*;

    #[test]
    fn port_query_never_writes_past_len() {
        // SAFETY: C entry points used as a C program would.
        unsafe {
            let list = ibv_get_device_list(core::ptr::null_mut());
            let ctx = ibv_open_device(*list);
            let mut buf = [0xAAu8; 64];
            assert_eq!(ibv_query_port(ctx, 1, buf.as_mut_ptr().cast()), 0);
            assert!(
                buf[48..].iter().all(|&b| b == 0xAA),
                "compat symbol wrote past 48 bytes"
            );
            assert_eq!(
                u32::from_ne_bytes(buf[0..4].try_into().unwrap()),
                IBV_PORT_ACTIVE
            );
            assert_eq!(buf[46], IBV_LINK_LAYER_ETHERNET);
            let mut buf = [0xAAu8; 64];
            assert_eq!(query_port_ex(ctx, 1, buf.as_mut_ptr().cast(), 52), 0);
            assert!(buf[52..].iter().all(|&b| b == 0xAA));
            assert_eq!(
                query_port_ex(ctx, 2, buf.as_mut_ptr().cast(), 52),
                libc::EINVAL
            );

            let mut g = ibv_gid::default();
            assert_eq!(ibv_query_gid(ctx, 1, 1, &mut g), 0);
            assert_eq!(&g.raw[10..], &[0xff, 0xff, 127, 0, 0, 1]);
            assert_eq!(ibv_query_gid(ctx, 1, 5, &mut g), 0);
            assert_eq!(g.raw, [0; 16]);
            assert_eq!(ibv_query_gid(ctx, 1, 1024, &mut g), -1);

            let mut e = [ibv_gid_entry::default(); 4];
            let n = _ibv_query_gid_table(ctx, e.as_mut_ptr(), 4, 0, size_of::<ibv_gid_entry>());
            assert_eq!(n, 2);
            assert_eq!(e[1].gid_type, IBV_GID_TYPE_ROCE_V2);
            assert_eq!(e[1].gid_index, 1);
            assert_eq!(
                _ibv_query_gid_ex(ctx, 1, 7, e.as_mut_ptr(), 0, size_of::<ibv_gid_entry>()),
                libc::ENODATA
            );
            let mut pk = 0u16;
            assert_eq!(ibv_query_pkey(ctx, 1, 0, &mut pk), 0);
            assert_eq!(pk, 0xffff);
            let mut a = core::mem::MaybeUninit::<ibv_device_attr_ex>::zeroed();
            assert_eq!(
                query_device_ex_op(
                    ctx,
                    core::ptr::null(),
                    a.as_mut_ptr(),
                    size_of::<ibv_device_attr_ex>()
                ),
                0
            );
            assert_eq!(a.assume_init().orig_attr.phys_port_cnt, 1);
            ibv_close_device(ctx);
            ibv_free_device_list(list);
        }
    }
}
