//! `struct sockaddr` ⇄ [`SocketAddr`], and RoCE GIDs of addresses.
//!
//! # Safety
//! Reads a program's `sockaddr` only after a NULL check and only as far as its family says
//! (`sockaddr_in` for AF_INET, `sockaddr_in6` for AF_INET6), as the kernel's `ucma` does.
use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, AF_INET, AF_INET6};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The address at `p`: `Ok(None)` for NULL, `Err(EAFNOSUPPORT)` for a family other than
/// IPv4/IPv6 (AF_IB is not supported).
///
/// # Safety
/// `p` is NULL or points to a `sockaddr` of the size its family implies.
pub unsafe fn read(p: *const sockaddr) -> Result<Option<SocketAddr>, i32> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: per the contract.
    unsafe {
        match (*p).sa_family as i32 {
            AF_INET => {
                let a = &*(p as *const sockaddr_in);
                Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                ))))
            }
            AF_INET6 => {
                let a = &*(p as *const sockaddr_in6);
                Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    u32::from_be(a.sin6_flowinfo),
                    a.sin6_scope_id,
                ))))
            }
            _ => Err(libc::EAFNOSUPPORT),
        }
    }
}

/// `a` as a `sockaddr_storage` (and its length).
pub fn storage(a: SocketAddr) -> (sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut s: sockaddr_storage = unsafe { core::mem::zeroed() };
    let len = write(&mut s, a);
    (s, len)
}

/// Writes `a` into `s`; returns its length.
pub fn write(s: &mut sockaddr_storage, a: SocketAddr) -> libc::socklen_t {
    // SAFETY: all-zero is a valid sockaddr_storage; the casts below stay inside its 128 bytes
    // (sockaddr_in and sockaddr_in6 are smaller and less aligned).
    unsafe {
        *s = core::mem::zeroed();
        match a {
            SocketAddr::V4(v) => {
                let p = &mut *(s as *mut sockaddr_storage as *mut sockaddr_in);
                p.sin_family = AF_INET as u16;
                p.sin_port = v.port().to_be();
                p.sin_addr.s_addr = u32::from(*v.ip()).to_be();
                core::mem::size_of::<sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(v) => {
                let p = &mut *(s as *mut sockaddr_storage as *mut sockaddr_in6);
                p.sin6_family = AF_INET6 as u16;
                p.sin6_port = v.port().to_be();
                p.sin6_addr.s6_addr = v.ip().octets();
                p.sin6_flowinfo = v.flowinfo().to_be();
                p.sin6_scope_id = v.scope_id();
                core::mem::size_of::<sockaddr_in6>() as libc::socklen_t
            }
        }
    }
}

/// The port stored in `s` (0 for an empty or unknown family).
pub fn port(s: &sockaddr_storage) -> u16 {
    // SAFETY: reads a sockaddr_storage we own as the family it says.
    unsafe { read(s as *const sockaddr_storage as *const sockaddr) }
        .ok()
        .flatten()
        .map_or(0, |a| a.port())
}

/// The RoCEv2 GID of `ip` (IPv4-mapped for IPv4).
pub fn gid(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        IpAddr::V6(v) => v.octets(),
    }
}
