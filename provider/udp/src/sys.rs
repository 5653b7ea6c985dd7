//! The only `unsafe` code of the UDP datapath: thin wrappers over `sendmmsg`, `recvmmsg`,
//! `setsockopt`/`getsockopt` on integers, `ppoll`, `sched_setaffinity`, `unshare` and
//! `clock_gettime`. The process-level syscalls of the provider (shared memory, `SCM_RIGHTS`,
//! `poll`, `getrandom`, user IDs, `atexit`) are in [`os`], with their own safety argument.
//!
//! # Safety argument (applies to every function here)
//!
//! * Every pointer handed to the kernel is derived, inside the wrapper, from a Rust borrow
//!   (`&[u8]`, `&mut [u8]`, `&SockAddr`, `&mut Vec<_>`) that lives until the wrapper returns, and
//!   the kernel does not keep any of them after the syscall returns. Lengths passed with a pointer
//!   are the length of the same borrow, so the kernel never reads or writes outside it.
//! * The `mmsghdr`/`iovec` arrays are plain-old-data scratch vectors owned by the caller. They
//!   only grow (to the call's message count, before any pointer into them is taken), and right
//!   before each call every field the kernel reads in the first `n` entries is rewritten from
//!   this call's borrows, so no stale pointer from an earlier call reaches the kernel (entries
//!   past `n` are never handed to it).
//! * `sendmmsg`/`recvmmsg` go through `libc::syscall` rather than glibc's wrappers: same kernel
//!   entry and arguments, minus the wrappers' thread-cancellation bracket (nothing here cancels
//!   threads); a negative result sets `errno` as the wrappers do.
//! * Receive buffers are `&mut [u8]`: any byte pattern written by the kernel is a valid `u8`.
//!   Sender addresses are written into `sockaddr_storage` values that we zero first; we read
//!   them back as `sockaddr_in`/`sockaddr_in6` only after checking `ss_family` and
//!   `msg_namelen`, and `sockaddr_storage` is large and aligned enough for both.
//! * Integer socket options are passed as a pointer to a local `c_int` with its exact size.
//! * The file descriptor comes from a live `socket2::Socket` borrowed for the duration of the call;
//!   a stale or invalid descriptor can only make the kernel return `EBADF`.
//!
//! Everything above this module is safe Rust: control messages are encoded and decoded by
//! [`super::cmsg`] on ordinary byte buffers.
#![allow(unsafe_code)]

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::SockAddr;

use super::cmsg::AlignedBuf;

pub(crate) mod os;

/// Linux socket option numbers that `libc` does not export for glibc targets.
/// They are part of the stable kernel ABI (`include/uapi/linux/udp.h`, `asm-generic/socket.h`).
pub(crate) mod consts {
    use libc::c_int;
    /// `SOL_UDP` (= `IPPROTO_UDP`).
    pub const SOL_UDP: c_int = 17;
    /// Disable UDP checksums for IPv6 sends (`UDP_NO_CHECK6_TX`).
    pub const UDP_NO_CHECK6_TX: c_int = 101;
    /// Accept zero UDP checksums on IPv6 receive (`UDP_NO_CHECK6_RX`).
    pub const UDP_NO_CHECK6_RX: c_int = 102;
    /// UDP generic segmentation offload: segment size (`UDP_SEGMENT`).
    pub const UDP_SEGMENT: c_int = 103;
    /// UDP generic receive offload (`UDP_GRO`).
    pub const UDP_GRO: c_int = 104;
    /// Send IPv4 UDP with a zero checksum (`SO_NO_CHECK`).
    #[cfg(not(any(target_arch = "mips", target_arch = "mips64", target_arch = "sparc64")))]
    pub const SO_NO_CHECK: c_int = 11;
    /// `SO_SNDBUFFORCE` (generic value).
    pub const SO_SNDBUFFORCE: c_int = 32;
    /// `SO_RCVBUFFORCE` (generic value).
    pub const SO_RCVBUFFORCE: c_int = 33;
    /// Receive queue overflow (drop) counter as a control message (`SO_RXQ_OVFL`).
    pub const SO_RXQ_OVFL: c_int = 40;
}

/// Sets an integer socket option.
pub fn setsockopt_int(fd: &impl AsRawFd, level: i32, name: i32, val: i32) -> io::Result<()> {
    let v: libc::c_int = val;
    // SAFETY: pointer to a live local of exactly `size_of::<c_int>()` bytes (module docs).
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
pub(crate) fn getsockopt_int(fd: &impl AsRawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: pointer to a live local and its exact size (module docs).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock `std::time::Instant` reads on Linux), without
/// `Instant`'s checked subtraction: the runtime reads it several times per packet.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live local of the exact type the call writes; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail (a failure would leave the zeroes).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// One datagram to hand to `sendmmsg`: destination, payload pieces, encoded control messages.
pub(crate) struct SendMsg<'a> {
    pub addr: &'a SockAddr,
    pub data: &'a [u8],
    pub control: &'a [u8],
}

/// Reusable scratch for [`sendmmsg`]; holds no pointers between calls.
#[derive(Default)]
pub(crate) struct SendScratch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

// SAFETY: the raw pointers inside are rewritten before every use and never dereferenced by us;
// the scratch is only a capacity reservation, so moving it to another thread is harmless.
unsafe impl Send for SendScratch {}

/// `sendmmsg` of `n` messages described by `msg(i)`. Returns how many the kernel took (a prefix).
/// `MSG_DONTWAIT` is always passed.
pub(crate) fn sendmmsg<'a>(
    fd: RawFd,
    n: usize,
    msg: impl Fn(usize) -> SendMsg<'a>,
    scratch: &mut SendScratch,
) -> io::Result<usize> {
    let n = n.min(1024);
    if n == 0 {
        return Ok(0);
    }
    // As in `recvmmsg`: the vectors keep their length between calls (only grown, never rebuilt)
    // and every field the kernel reads is rewritten below from this call's borrows.
    if scratch.hdrs.len() < n {
        // SAFETY: mmsghdr and iovec are plain old data; all-zero is valid.
        unsafe {
            scratch.hdrs.resize(n, mem::zeroed());
            scratch.iovs.resize(n, mem::zeroed());
        }
    }
    for (i, (h, iov)) in scratch.hdrs[..n]
        .iter_mut()
        .zip(scratch.iovs.iter_mut())
        .enumerate()
    {
        let m = msg(i);
        iov.iov_base = m.data.as_ptr() as *mut libc::c_void;
        iov.iov_len = m.data.len();
        let hdr = &mut h.msg_hdr;
        hdr.msg_name = m.addr.as_ptr() as *mut libc::c_void;
        hdr.msg_namelen = m.addr.len();
        hdr.msg_iov = iov;
        hdr.msg_iovlen = 1;
        if m.control.is_empty() {
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
        } else {
            hdr.msg_control = m.control.as_ptr() as *mut libc::c_void;
            hdr.msg_controllen = m.control.len() as _;
        }
        hdr.msg_flags = 0;
        h.msg_len = 0;
    }
    // SAFETY: every pointer in hdrs/iovs points into borrows ('a) that outlive this call
    // (module docs); the kernel only reads them. The raw system call (not glibc's wrapper, a
    // cancellation point that brackets it with two more calls): this process never cancels
    // threads, so the only difference is the cost.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sendmmsg,
            fd,
            scratch.hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// What the kernel reported for one received message.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RecvMeta {
    pub len: usize,
    pub control_len: usize,
    pub flags: i32,
    pub src: Option<SocketAddr>,
}

/// Receive buffers (`slots` data buffers of `slot_size + headroom` bytes, 64-byte aligned, and as
/// many control buffers) together with the `recvmmsg` headers that point into them, built once:
/// a receive only resets the lengths and flags the kernel changed in the previous one, so an
/// empty poll (a busy-polling caller makes millions) costs no per-slot work at all.
///
/// Safety argument: every pointer in `hdrs` points into a heap allocation owned by this value
/// (`bufs[i]`, `ctrls[i]`, `iovs`, `names`), made at construction and never resized, moved or
/// freed before this value is dropped (the fields are private and only read afterwards), so
/// the pointers stay valid wherever the value itself moves. The kernel writes through them
/// only inside [`recvmmsg`], which takes `&mut self`: no Rust reference into the buffers is
/// alive then. Outside it, the buffers are read through shared borrows of `self`.
pub(crate) struct RecvSlots {
    bufs: Vec<AlignedBuf>,
    ctrls: Vec<AlignedBuf>,
    headroom: usize,
    slot_size: usize,
    hdrs: Vec<libc::mmsghdr>,
    /// Never read by us: kept alive because `hdrs` point into it.
    #[allow(dead_code)]
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    /// Entries whose lengths and flags the kernel may have changed in the last call.
    dirty: usize,
}

// SAFETY: the raw pointers inside point only into this value's own heap allocations (see the
// type docs), so moving the value to another thread moves their ownership with it.
unsafe impl Send for RecvSlots {}

impl std::fmt::Debug for RecvSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvSlots")
            .field("slots", &self.bufs.len())
            .field("slot_size", &self.slot_size)
            .field("headroom", &self.headroom)
            .finish()
    }
}

impl RecvSlots {
    /// `slots` (1..=1024) buffers of `slot_size` usable bytes starting `headroom` bytes past a
    /// 64-byte boundary, each with a control buffer of `ctrl_size` bytes.
    pub(crate) fn new(slots: usize, slot_size: usize, headroom: usize, ctrl_size: usize) -> Self {
        let n = slots.clamp(1, 1024);
        let mut bufs: Vec<AlignedBuf> = (0..n)
            .map(|_| AlignedBuf::new(slot_size + headroom, 64))
            .collect();
        let mut ctrls: Vec<AlignedBuf> = (0..n).map(|_| AlignedBuf::new(ctrl_size, 8)).collect();
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain old data; all-zero is valid.
        let (mut hdrs, mut iovs, mut names) = unsafe {
            (
                vec![mem::zeroed::<libc::mmsghdr>(); n],
                vec![mem::zeroed::<libc::iovec>(); n],
                vec![mem::zeroed::<libc::sockaddr_storage>(); n],
            )
        };
        for i in 0..n {
            let data = &mut bufs[i].as_mut_slice()[headroom..];
            iovs[i].iov_base = data.as_mut_ptr().cast();
            iovs[i].iov_len = data.len();
            let m = &mut hdrs[i].msg_hdr;
            m.msg_iov = &mut iovs[i];
            m.msg_iovlen = 1;
            m.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            let c = ctrls[i].as_mut_slice();
            m.msg_control = if c.is_empty() {
                std::ptr::null_mut()
            } else {
                c.as_mut_ptr().cast()
            };
        }
        let mut s = RecvSlots {
            bufs,
            ctrls,
            headroom,
            slot_size,
            hdrs,
            iovs,
            names,
            dirty: n,
        };
        s.reset();
        s
    }

    /// Gives the first `dirty` entries their buffer sizes back (the kernel overwrote them with
    /// what it received).
    #[inline]
    fn reset(&mut self) {
        let name_len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        for (h, c) in self.hdrs[..self.dirty].iter_mut().zip(&self.ctrls) {
            h.msg_hdr.msg_namelen = name_len;
            h.msg_hdr.msg_controllen = c.len() as _;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        self.dirty = 0;
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Slot `i`'s data buffer (from the headroom on, `slot_size` bytes).
    #[inline]
    pub(crate) fn data(&self, i: usize) -> &[u8] {
        &self.bufs[i].as_slice()[self.headroom..]
    }

    /// The first `len` bytes of slot `i`'s control buffer.
    #[inline]
    pub(crate) fn control(&self, i: usize, len: usize) -> &[u8] {
        let c = self.ctrls[i].as_slice();
        &c[..len.min(c.len())]
    }
}

/// `recvmmsg` with `MSG_DONTWAIT` into `slots`. Fills `meta[i]` for each message received;
/// returns the count.
pub(crate) fn recvmmsg(
    fd: RawFd,
    slots: &mut RecvSlots,
    meta: &mut [RecvMeta],
) -> io::Result<usize> {
    let n = slots.len().min(meta.len());
    if n == 0 {
        return Ok(0);
    }
    slots.reset();
    // SAFETY: the first `n` headers point into `slots`' own buffers, with their sizes (type
    // docs); `slots` is borrowed exclusively for the call. The raw system call, as in
    // `sendmmsg`: a busy-polling caller makes millions of these.
    let r = unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            fd,
            slots.hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
    // The kernel writes lengths and flags back only into the entries it filled; to be safe
    // against any kernel that touches the entry it stopped at, that one is reset too.
    if r < 0 {
        slots.dirty = 1;
        return Err(io::Error::last_os_error());
    }
    let r = r as usize;
    slots.dirty = (r + 1).min(n);
    for ((m, h), name) in meta.iter_mut().zip(&slots.hdrs).zip(&slots.names).take(r) {
        *m = RecvMeta {
            len: (h.msg_len as usize).min(slots.slot_size),
            #[allow(clippy::unnecessary_cast)] // socklen_t on some libcs, usize on glibc
            control_len: h.msg_hdr.msg_controllen as usize,
            flags: h.msg_hdr.msg_flags,
            src: storage_to_addr(name, h.msg_hdr.msg_namelen),
        };
    }
    Ok(r)
}

fn storage_to_addr(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match s.ss_family as i32 {
        libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: family checked, storage is larger and at least as aligned as sockaddr_in.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above for sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Waits until `fd` is readable (`POLLIN`) or writable (`POLLOUT`), or `wake` (an eventfd) is
/// readable, or `timeout` passes (`None`: forever). Returns `true` when `wake` fired. `EINTR`
/// counts as a spurious wake-up of `fd` (the caller retries).
pub(crate) fn wait_fd(
    fd: RawFd,
    write: bool,
    wake: Option<RawFd>,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let mut p = [
        libc::pollfd {
            fd,
            events: if write { libc::POLLOUT } else { libc::POLLIN },
            revents: 0,
        },
        libc::pollfd {
            fd: wake.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = match &ts {
        Some(t) => t as *const libc::timespec,
        None => std::ptr::null(),
    };
    let n = if wake.is_some() { 2 } else { 1 };
    // SAFETY: `n` live pollfds, a live timespec or null, null sigmask (module docs).
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), n, tsp, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(wake.is_some() && p[1].revents & libc::POLLIN != 0)
}

/// A new non-blocking, close-on-exec eventfd.
pub(crate) fn eventfd() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, is valid and owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Pins the calling thread to one CPU. Best effort: errors are returned, not fatal.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes inside it (bounds checked by libc for
    // cpu < CPU_SETSIZE, which we check first); sched_setaffinity reads it with its exact size.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The calling thread's CPU affinity mask (to restore after [`pin_to_cpu`]).
pub(crate) fn affinity() -> io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain old data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        if libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// How many CPUs the calling thread may run on (its affinity mask), if the kernel says.
pub fn cpus_allowed() -> Option<usize> {
    let set = affinity().ok()?;
    // SAFETY: `set` is an initialised cpu_set_t; CPU_COUNT only reads it.
    Some(unsafe { libc::CPU_COUNT(&set) } as usize)
}

/// `sched_yield`: lets another runnable thread on this CPU run first.
pub fn yield_cpu() {
    // SAFETY: no arguments, no memory; it cannot fail on Linux.
    unsafe { libc::sched_yield() };
}

/// Sets the calling thread's CPU affinity mask (one from [`affinity`]).
pub(crate) fn set_affinity(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t read with its exact size.
    if unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
/// Moves the calling *thread* into a new, empty network namespace (needs `CAP_SYS_ADMIN`).
/// Only the loopback device exists there, down. Used by capture tests to observe the kernel's
/// software GSO segmentation without touching the host's `lo`.
pub(crate) fn unshare_net() -> io::Result<()> {
    // SAFETY: no pointers; affects only the calling thread's namespace membership.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
/// `recvfrom` on an `AF_PACKET` socket: fills `buf`, returns the packet length (before any
/// truncation) and `sll_pkttype` (`PACKET_HOST`, `PACKET_OUTGOING`, ...).
pub(crate) fn recv_packet(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<(usize, u8)> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    let mut slen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: buf and sll are live exclusive borrows passed with their exact sizes; MSG_TRUNC
    // makes the kernel return the real length but never write past `buf.len()`.
    let r = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_TRUNC,
            (&mut sll as *mut libc::sockaddr_ll).cast(),
            &mut slen,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r as usize, sll.sll_pkttype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmsg_macros_agree_with_libc() {
        for len in [0u32, 1, 2, 4, 8, 16, 20, 28] {
            // SAFETY: pure arithmetic const fns.
            let (space, clen) = unsafe { (libc::CMSG_SPACE(len), libc::CMSG_LEN(len)) };
            assert_eq!(super::super::cmsg::space(len as usize), space as usize);
            assert_eq!(super::super::cmsg::len(len as usize), clen as usize);
        }
    }

    #[test]
    fn constants_match_kernel_abi() {
        assert_eq!(consts::SOL_UDP, libc::IPPROTO_UDP);
        assert_eq!(consts::SO_RCVBUFFORCE, 33);
    }
}
