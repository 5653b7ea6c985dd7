//! The interposed libc socket calls (`LD_PRELOAD`): the only `unsafe` of the crate.
//!
//! `socket(AF_NETLINK, SOCK_RAW or SOCK_DGRAM, NETLINK_RDMA)` returns one end of an
//! `AF_UNIX` datagram socket pair instead of a kernel netlink socket; the other end (close on
//! exec, non-blocking) stays with this library. What the program sends on its end
//! (`send`, `sendto`, `sendmsg`) is answered by [`crate::answer`] and the answers are written
//! to the other end, so the program's end becomes readable and `poll`, `select`, `recv`,
//! `read`, non-blocking mode, `MSG_PEEK` and `MSG_TRUNC` behave as on a datagram socket;
//! `recvmsg` / `recvfrom` add the kernel's `sockaddr_nl` (port 0) that libmnl and libnl
//! check. `bind`, `connect`, `getsockname` and the `SOL_NETLINK` options (`NETLINK_CAP_ACK`,
//! `NETLINK_EXT_ACK`, which change the ack framing) are kept per socket. Every other call, and
//! every other socket, goes straight to the next definition (`dlsym(RTLD_NEXT)`, libc's): one
//! atomic load while no such socket is open.
//!
//! Limits: a socket copied with `dup` is not recognised (its sends go nowhere); `write` on the
//! socket is not interposed; an fd closed behind libc's back (`close_range`, a raw syscall) is
//! noticed at its next use by its inode and forgotten.
//!
//! # Safety
//! * The real functions come from `dlsym(RTLD_NEXT, name)` and are called with the caller's
//!   arguments unchanged, as the C prototypes (from the `libc` crate) say.
//! * Pointers from the caller are only read or written within the lengths the caller gives
//!   (`buf`/`len`, `iovec`s, `msg_name`/`msg_namelen`, `optval`/`optlen`, `addr`/`addrlen`),
//!   after checking them for NULL, as the kernel would.
//! * The socket table lock is never held while calling anything that could come back here
//!   (a std file read closes its file through the interposed `close`).
use crate::{answer, device};
use libc::{c_int, c_void, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

const NETLINK_RDMA: c_int = 20;
const SOL_NETLINK: c_int = 270;
const NETLINK_CAP_ACK: c_int = 10;
const NETLINK_EXT_ACK: c_int = 11;
const SOCKADDR_NL_LEN: socklen_t = 12;

/// The next definition of a libc function, looked up once.
macro_rules! real {
    ($name:ident : fn($($t:ty),*) -> $r:ty) => {{
        static P: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
        let mut p = P.load(Ordering::Relaxed);
        if p.is_null() {
            p = libc::dlsym(libc::RTLD_NEXT, concat!(stringify!($name), "\0").as_ptr().cast());
            P.store(p, Ordering::Relaxed);
        }
        (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($t),*) -> $r>(p))
    }};
}

/// Fails like libc with `errno`.
unsafe fn fail<T: From<i8>>(errno: c_int) -> T {
    *libc::__errno_location() = errno;
    T::from(-1)
}

#[derive(Clone, Copy)]
struct Sock {
    fd: c_int,
    peer: c_int,
    ino: u64,
    portid: u32,
    bound: bool,
    cap_ack: bool,
    ext_ack: bool,
}

static SOCKS: Mutex<Vec<Sock>> = Mutex::new(Vec::new());
static LIVE: AtomicUsize = AtomicUsize::new(0);
static FIRST_BOUND: AtomicBool = AtomicBool::new(false);
static NEXT_PORT: AtomicU32 = AtomicU32::new(0xffff_f000);

fn table() -> MutexGuard<'static, Vec<Sock>> {
    SOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe fn ino(fd: c_int) -> Option<u64> {
    let mut st: libc::stat = std::mem::zeroed();
    (libc::fstat(fd, &mut st) == 0).then_some(st.st_ino)
}

/// The emulated socket `fd` is, if it is one (and still the same open file).
unsafe fn lookup(fd: c_int) -> Option<Sock> {
    if LIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    let s = table().iter().find(|s| s.fd == fd).copied()?;
    if ino(fd) == Some(s.ino) {
        return Some(s);
    }
    forget(fd);
    None
}

fn forget(fd: c_int) -> Option<Sock> {
    let mut t = table();
    let i = t.iter().position(|s| s.fd == fd)?;
    LIVE.fetch_sub(1, Ordering::AcqRel);
    Some(t.swap_remove(i))
}

fn update(fd: c_int, f: impl FnOnce(&mut Sock)) {
    if let Some(s) = table().iter_mut().find(|s| s.fd == fd) {
        f(s);
    }
}

/// The kernel's autobind: the process id for the first socket, then -4096, -4097, …
fn autobind(s: &mut Sock) {
    if !s.bound {
        s.portid = if FIRST_BOUND.swap(true, Ordering::AcqRel) {
            NEXT_PORT.fetch_sub(1, Ordering::AcqRel)
        } else {
            std::process::id()
        };
        s.bound = true;
    }
}

unsafe fn put_addr(addr: *mut sockaddr, len: *mut socklen_t, portid: u32) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let mut nl: libc::sockaddr_nl = std::mem::zeroed();
    nl.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    nl.nl_pid = portid;
    let n = (*len).min(SOCKADDR_NL_LEN) as usize;
    std::ptr::copy_nonoverlapping(
        (&nl as *const libc::sockaddr_nl).cast::<u8>(),
        addr.cast(),
        n,
    );
    *len = SOCKADDR_NL_LEN;
}

/// Answers what was sent; returns `len` or fails with `ENOBUFS` when an answer does not fit.
unsafe fn handle(mut s: Sock, data: &[u8]) -> ssize_t {
    if !s.bound {
        autobind(&mut s);
        update(s.fd, |t| *t = s);
    }
    let spec = std::env::var("ROCE_NETLINK_DEVICES").ok();
    let devs = device::devices(
        std::path::Path::new("/sys/class/infiniband"),
        std::path::Path::new("/sys/class/net"),
        spec.as_deref(),
    );
    let so = answer::SockOpts {
        portid: s.portid,
        cap_ack: s.cap_ack,
        ext_ack: s.ext_ack,
    };
    let Some(send) = real!(send: fn(c_int, *const c_void, size_t, c_int) -> ssize_t) else {
        return fail(libc::ENOSYS);
    };
    for g in answer::answer(data, &so, &devs) {
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        if send(s.peer, g.as_ptr().cast(), g.len(), flags) != g.len() as ssize_t {
            return fail(libc::ENOBUFS);
        }
    }
    data.len() as ssize_t
}

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let Some(real) = real!(socket: fn(c_int, c_int, c_int) -> c_int) else {
        return fail(libc::ENOSYS);
    };
    let flags = ty & (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
    let base = ty & !flags;
    if domain != libc::AF_NETLINK
        || protocol != NETLINK_RDMA
        || (base != libc::SOCK_RAW && base != libc::SOCK_DGRAM)
    {
        return real(domain, ty, protocol);
    }
    let mut fds = [-1 as c_int; 2];
    if libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | flags, 0, fds.as_mut_ptr()) != 0 {
        return -1;
    }
    let peer = fds[1];
    libc::fcntl(peer, libc::F_SETFD, libc::FD_CLOEXEC);
    libc::fcntl(peer, libc::F_SETFL, libc::O_NONBLOCK);
    let Some(ino) = ino(fds[0]) else {
        libc::close(fds[0]);
        libc::close(peer);
        return fail(libc::EMFILE);
    };
    table().push(Sock {
        fd: fds[0],
        peer,
        ino,
        portid: 0,
        bound: false,
        cap_ack: false,
        ext_ack: false,
    });
    LIVE.fetch_add(1, Ordering::AcqRel);
    fds[0]
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let Some(real) = real!(close: fn(c_int) -> c_int) else {
        return fail(libc::ENOSYS);
    };
    if lookup(fd).is_some() {
        if let Some(s) = forget(fd) {
            real(s.peer);
        }
    }
    real(fd)
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(real) = real!(bind: fn(c_int, *const sockaddr, socklen_t) -> c_int) else {
        return fail(libc::ENOSYS);
    };
    let Some(mut s) = lookup(fd) else {
        return real(fd, addr, len);
    };
    if addr.is_null() || len < SOCKADDR_NL_LEN {
        return fail(libc::EINVAL);
    }
    let nl = &*addr.cast::<libc::sockaddr_nl>();
    if c_int::from(nl.nl_family) != libc::AF_NETLINK {
        return fail(libc::EINVAL);
    }
    if nl.nl_pid != 0 {
        s.portid = nl.nl_pid;
        s.bound = true;
    } else {
        autobind(&mut s);
    }
    update(fd, |t| *t = s);
    0
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(real) = real!(connect: fn(c_int, *const sockaddr, socklen_t) -> c_int) else {
        return fail(libc::ENOSYS);
    };
    let Some(mut s) = lookup(fd) else {
        return real(fd, addr, len);
    };
    autobind(&mut s);
    update(fd, |t| *t = s);
    0
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(real) = real!(getsockname: fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int) else {
        return fail(libc::ENOSYS);
    };
    let Some(s) = lookup(fd) else {
        return real(fd, addr, len);
    };
    if addr.is_null() || len.is_null() {
        return fail(libc::EFAULT);
    }
    put_addr(addr, len, s.portid);
    0
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    let Some(real) = real!(setsockopt: fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int)
    else {
        return fail(libc::ENOSYS);
    };
    if level != SOL_NETLINK || lookup(fd).is_none() {
        return real(fd, level, name, val, len);
    }
    if val.is_null() || (len as usize) < std::mem::size_of::<c_int>() {
        return fail(libc::EINVAL);
    }
    let on = val.cast::<c_int>().read_unaligned() != 0;
    match name {
        NETLINK_CAP_ACK => update(fd, |s| s.cap_ack = on),
        NETLINK_EXT_ACK => update(fd, |s| s.ext_ack = on),
        _ => {}
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let Some(real) =
        real!(getsockopt: fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int)
    else {
        return fail(libc::ENOSYS);
    };
    let Some(s) = lookup(fd) else {
        return real(fd, level, name, val, len);
    };
    let v = match (level, name) {
        (SOL_NETLINK, NETLINK_CAP_ACK) => c_int::from(s.cap_ack),
        (SOL_NETLINK, NETLINK_EXT_ACK) => c_int::from(s.ext_ack),
        (SOL_NETLINK, _) => return fail(libc::ENOPROTOOPT),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => libc::AF_NETLINK,
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => NETLINK_RDMA,
        (libc::SOL_SOCKET, libc::SO_TYPE) => libc::SOCK_RAW,
        _ => return real(fd, level, name, val, len),
    };
    if val.is_null() || len.is_null() || (*len as usize) < std::mem::size_of::<c_int>() {
        return fail(libc::EINVAL);
    }
    val.cast::<c_int>().write_unaligned(v);
    *len = std::mem::size_of::<c_int>() as socklen_t;
    0
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    let Some(real) = real!(sendto: fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t)
    else {
        return fail(libc::ENOSYS);
    };
    let Some(s) = lookup(fd) else {
        return real(fd, buf, len, flags, addr, alen);
    };
    if buf.is_null() && len > 0 {
        return fail(libc::EFAULT);
    }
    let data = if len == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(buf.cast::<u8>(), len)
    };
    handle(s, data)
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    let Some(real) = real!(send: fn(c_int, *const c_void, size_t, c_int) -> ssize_t) else {
        return fail(libc::ENOSYS);
    };
    if lookup(fd).is_none() {
        return real(fd, buf, len, flags);
    }
    sendto(fd, buf, len, flags, std::ptr::null(), 0)
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let Some(real) = real!(sendmsg: fn(c_int, *const msghdr, c_int) -> ssize_t) else {
        return fail(libc::ENOSYS);
    };
    let Some(s) = lookup(fd) else {
        return real(fd, msg, flags);
    };
    if msg.is_null() || ((*msg).msg_iov.is_null() && (*msg).msg_iovlen > 0) {
        return fail(libc::EFAULT);
    }
    let mut data = Vec::new();
    for i in 0..(*msg).msg_iovlen {
        let v = &*(*msg).msg_iov.add(i);
        if v.iov_len > 0 {
            if v.iov_base.is_null() {
                return fail(libc::EFAULT);
            }
            data.extend_from_slice(std::slice::from_raw_parts(
                v.iov_base.cast::<u8>(),
                v.iov_len,
            ));
        }
    }
    handle(s, &data)
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let Some(real) = real!(recvmsg: fn(c_int, *mut msghdr, c_int) -> ssize_t) else {
        return fail(libc::ENOSYS);
    };
    if msg.is_null() || lookup(fd).is_none() {
        return real(fd, msg, flags);
    }
    let (name, namelen) = ((*msg).msg_name, (*msg).msg_namelen);
    (*msg).msg_name = std::ptr::null_mut();
    (*msg).msg_namelen = 0;
    let n = real(fd, msg, flags);
    (*msg).msg_name = name;
    (*msg).msg_namelen = namelen;
    if n >= 0 && !name.is_null() {
        put_addr(name.cast(), &mut (*msg).msg_namelen, 0);
    }
    n
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    let Some(real) = real!(recvfrom: fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t)
    else {
        return fail(libc::ENOSYS);
    };
    if lookup(fd).is_none() {
        return real(fd, buf, len, flags, addr, alen);
    }
    let n = real(
        fd,
        buf,
        len,
        flags,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    if n >= 0 {
        put_addr(addr, alen, 0);
    }
    n
}
