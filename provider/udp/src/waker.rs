//! [`Waker`]: lets another thread interrupt a blocking [`super::Socket::recv_batch`].
//!
//! A progress thread that sleeps in `recv_batch` must also wake up when the application posts
//! work. Give the socket a waker ([`super::Socket::set_waker`]) and call [`Waker::wake`] from
//! any thread: the blocked (or next) blocking receive returns `Ok(0)` at once. Wake-ups are never
//! lost: the eventfd stays readable until the receive consumes it. Waking a sleeping thread costs
//! tens of µs on this class of machine (`perf-facts.md`): spin first ([`super::Wait::SpinThenBlock`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};

/// An eventfd-backed wake-up signal; share it with `Arc`.
#[derive(Debug)]
pub struct Waker {
    f: File,
}

impl Waker {
    /// Creates the eventfd.
    pub fn new() -> io::Result<Waker> {
        Ok(Waker {
            f: File::from(super::sys::eventfd()?),
        })
    }

    /// Wakes the socket's blocking receive (now or the next one). Cheap when nobody sleeps:
    /// one `write` system call.
    pub fn wake(&self) {
        // EAGAIN only when the counter would overflow: it is then readable anyway.
        let _ = (&self.f).write(&1u64.to_ne_bytes());
    }

    /// Consumes pending wake-ups; true if there were any.
    pub fn drain(&self) -> bool {
        let mut b = [0u8; 8];
        matches!((&self.f).read(&mut b), Ok(8))
    }

    /// Sleeps until woken or `timeout` passes; consumes the wake-ups. True if woken.
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<bool> {
        // The eventfd is readable exactly when a wake-up is pending.
        let woken = super::sys::wait_fd(self.raw_fd(), false, None, Some(timeout))?;
        debug_assert!(!woken, "no second fd was given");
        Ok(self.drain())
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.f.as_raw_fd()
    }
}
