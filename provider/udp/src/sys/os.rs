//! The `unsafe` code behind [`crate::os`]: the process-level syscalls of the provider (the
//! steering helper's shared port table and control socket, `poll`, `getrandom`, user IDs,
//! `atexit`). Moved here from the provider so that all syscall `unsafe` of the product lives in
//! this crate's private `sys` modules.
//!
//! # Safety argument (applies to every function here, besides the notes at each block)
//!
//! * Every pointer handed to the kernel is derived from a Rust borrow (`&[u8]`, `&mut [u8]`, a
//!   local `iovec`/`msghdr`/`pollfd`/`stat`) that lives until the syscall returns; the kernel
//!   keeps none of them afterwards, and every length is that of the same borrow.
//! * File descriptors are borrowed from live owners (`UnixStream`, `OwnedFd`, `AsFd`) for the
//!   duration of the call; a stale one can only make the kernel return `EBADF`. Descriptors the
//!   kernel creates (`memfd_create`, `SCM_RIGHTS`) are wrapped in an `OwnedFd` at once, so each
//!   is closed exactly once.
//! * [`SharedPage`] maps exactly [`PAGE`] bytes of a file checked (or made) to be at least that
//!   long, so no access inside the mapping can fault; the mapping lives as long as the value and
//!   is reached only through aligned atomics inside it.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// The size of a [`SharedPage`].
pub const PAGE: usize = 4096;

/// One page of memory shared between processes: a `memfd` (nothing on disk), mapped
/// read-write and shared, reached only through atomics.
pub struct SharedPage {
    base: *mut u8,
}

// SAFETY: the mapping lives as long as the value and is only accessed through atomics.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: `base` is a live mapping of PAGE bytes made by `map_fd`.
        unsafe { libc::munmap(self.base.cast(), PAGE) };
    }
}

impl SharedPage {
    /// A new zeroed page (a `memfd` called `name`, close-on-exec) and the fd that maps it, to be
    /// handed to other processes.
    pub fn create(name: &std::ffi::CStr) -> io::Result<(SharedPage, OwnedFd)> {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on an owned fd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let p = SharedPage::map_fd(fd.as_raw_fd())?;
        Ok((p, fd))
    }

    /// Maps a page received from another process. `InvalidData` when the file is shorter than
    /// a page (mapping it would fault on access).
    pub fn map(fd: &OwnedFd) -> io::Result<SharedPage> {
        if file_len(fd)? < PAGE as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared page: the file is shorter than a page",
            ));
        }
        SharedPage::map_fd(fd.as_raw_fd())
    }

    fn map_fd(fd: RawFd) -> io::Result<SharedPage> {
        // SAFETY: a shared mapping of PAGE bytes of a file at least that long (both callers
        // check or make the length first).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedPage { base: p.cast() })
    }

    /// The 64-bit word at byte offset `at`. Panics unless `at` is 8-aligned and inside the page.
    pub fn word64(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= PAGE, "word64 at {at}");
        // SAFETY: aligned, inside the mapping, only ever accessed atomically.
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }

    /// The 32-bit word at byte offset `at`. Panics unless `at` is 4-aligned and inside the page.
    pub fn word32(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= PAGE, "word32 at {at}");
        // SAFETY: aligned, inside the mapping, only ever accessed atomically.
        unsafe { &*self.base.add(at).cast::<AtomicU32>() }
    }
}

/// The length of the file behind `fd` (`fstat`).
pub fn file_len(fd: &impl AsFd) -> io::Result<u64> {
    // SAFETY: plain syscall; `st` is a live local (all-zero is a valid `stat`).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_size as u64)
}

/// Sends `line` (no SIGPIPE if the other end has gone: the drop-in library runs inside
/// programs that do not ignore it).
pub fn send_line(s: &UnixStream, line: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < line.len() {
        // SAFETY: a live buffer of the given length.
        let n = unsafe {
            libc::send(
                s.as_raw_fd(),
                line[done..].as_ptr().cast(),
                line.len() - done,
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// Sends `line` with `fd` attached (`SCM_RIGHTS`).
pub fn send_with_fd(s: &UnixStream, line: &[u8], fd: &impl AsFd) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: line.as_ptr() as *mut libc::c_void,
        iov_len: line.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut ctl = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds one header and one fd (CMSG_SPACE above).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd.as_fd().as_raw_fd());
    }
    // SAFETY: `msg` is fully initialised.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives what is there (up to `buf.len()` bytes) and an fd if one came with it (any further
/// fds of the same message are closed). `nonblocking`: `WouldBlock` instead of waiting.
/// `Ok((0, None))` is the end of the stream.
pub fn recv_with_fd(
    s: &UnixStream,
    buf: &mut [u8],
    nonblocking: bool,
) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(4 * std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut ctl = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let flags = libc::MSG_CMSG_CLOEXEC | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: `msg` is fully initialised and its buffers are live.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut got = None;
    // SAFETY: walking the control messages the kernel wrote, within msg_controllen; each fd
    // it passed is new to this process and owned by nothing else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    // the first is kept; any other is closed by the drop
                    if got.is_none() {
                        got = Some(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, got))
}

/// `poll(2)` for input on `fds` for up to `timeout_ms` (-1: forever). Entry `i` of the result
/// is whether `fds[i]` has any event (`revents != 0`: readable, hang-up or error). An
/// interrupted or failed call reports no events (the callers poll again).
pub fn poll_in(fds: &[RawFd], timeout_ms: i32) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a live array of that many pollfds; invalid fds only yield POLLNVAL.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    p.iter().map(|f| f.revents != 0).collect()
}

/// Fills `buf` from the kernel's entropy pool (getrandom(2), blocking until it is initialised;
/// `EINTR` retried).
pub fn getrandom(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid, writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// The real user ID of the process (`getuid`).
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The effective user ID of the process (`geteuid`).
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Registers `f` to run at normal process exit (`atexit(3)`). Returns whether it was registered.
///
/// `f` is a plain `extern "C" fn()`: it is code of this program or of the shared object it is in.
/// That object must not be unloaded before exit; the crates of this workspace are linked into
/// the `roce` binary or into `libibverbs.so.1`, which programs never `dlclose`.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: registers a function pointer that stays valid until exit (see above).
    unsafe { libc::atexit(f) == 0 }
}
