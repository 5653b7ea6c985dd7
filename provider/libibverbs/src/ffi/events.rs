//! Completion channels, completion events and async events: real file descriptors that
//! `poll`/`epoll` can wait on.
//!
//! Each event source is an [`EventQueue`]: a mutex-protected queue of records plus an
//! `eventfd(EFD_SEMAPHORE)` whose counter equals the number of queued records, so the fd is
//! readable iff an event is pending, a blocking read waits for one, and a program that set
//! `O_NONBLOCK` on the fd gets `EAGAIN` like with the kernel's uverbs fds. Destroying a CQ/QP/SRQ
//! removes its queued events (as the kernel does), so no event names a freed object.
//!
//! # Safety
//! The `unsafe` here: (1) `libc` calls on fds we own; (2) dereferencing program-supplied
//! out-pointers (`cq`, `cq_context`, `event`) after NULL checks — the program guarantees they point
//! to writable storage of the right type, as with libibverbs; (3) dereferencing our own
//! `ibv_comp_channel`/`ibv_cq` objects, valid until their destroy verb (module-level contract in
//! `ffi/mod.rs`). Cookies in the queues are addresses of live objects: a destroy purges them
//! before the object is freed.

use super::objects::{self, Cq};
use super::{guard, set_errno};
use crate::abi::*;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// A queue of event records with an eventfd that counts them.
pub struct EventQueue<T> {
    fd: OwnedFd,
    queue: Mutex<VecDeque<T>>,
}

impl<T> EventQueue<T> {
    pub fn new() -> std::io::Result<EventQueue<T>> {
        // SAFETY: plain syscall; the returned fd (if >= 0) is owned by us from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventQueue {
            fd,
            queue: Mutex::new(VecDeque::new()),
        })
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, rec: T) {
        self.lock().push_back(rec);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local to our eventfd. The counter cannot realistically
        // overflow (2^64 - 2), so the write does not block.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Takes one record, blocking in `read(2)` on the eventfd unless the program made it
    /// non-blocking. `Err(errno)` as `read` reports it (`EAGAIN`, `EINTR`, …).
    pub fn pop(&self) -> Result<T, i32> {
        loop {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a local from our eventfd.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
            if n != 8 {
                return Err(std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO));
            }
            if let Some(rec) = self.lock().pop_front() {
                return Ok(rec);
            }
            // The record this token counted was purged by a destroy; wait for the next one.
        }
    }

    /// Removes the records `pred` matches and their tokens.
    pub fn purge(&self, pred: impl Fn(&T) -> bool) {
        let mut q = self.lock();
        let before = q.len();
        q.retain(|r| !pred(r));
        let removed = before - q.len();
        drop(q);
        for _ in 0..removed {
            let mut v: u64 = 0;
            // Non-blocking drain: temporarily via poll so a program's blocking fd is not
            // changed. A token a concurrent `pop` already took is simply not there.
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one valid pollfd, zero timeout; then an 8-byte read into a local.
            unsafe {
                if libc::poll(&mut pfd, 1, 0) != 1 {
                    break;
                }
                libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Completion channels

/// Our `struct ibv_comp_channel`.
#[repr(C)]
pub struct Channel {
    pub c: core::cell::UnsafeCell<ibv_comp_channel>,
    /// Addresses of `Cq`s with a pending completion event.
    pub events: Arc<EventQueue<usize>>,
    pub refcnt: Mutex<u32>,
    pub magic: std::sync::atomic::AtomicU32,
}

impl objects::Live for Channel {
    const MAGIC: u32 = u32::from_be_bytes(*b"rCH_");
    const WHAT: &'static str = "ibv_comp_channel";
    fn magic(&self) -> &std::sync::atomic::AtomicU32 {
        &self.magic
    }
}

/// Given to the engine with each CQ that has a completion channel.
#[derive(Clone)]
pub struct CqNotifier {
    queue: Arc<EventQueue<usize>>,
    cq: usize,
}

impl CqNotifier {
    pub(crate) fn new(channel: &Channel, cq: usize) -> CqNotifier {
        CqNotifier {
            queue: channel.events.clone(),
            cq,
        }
    }
    /// Queues one completion event for this CQ on its channel (what the kernel does when an
    /// armed CQ gets a completion). The engine must disarm the CQ itself: one event per
    /// `req_notify_cq`.
    pub fn notify(&self) {
        self.queue.push(self.cq);
    }
}

impl std::fmt::Debug for CqNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CqNotifier(fd {}, cq {:#x})",
            self.queue.raw_fd(),
            self.cq
        )
    }
}

pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    guard(core::ptr::null_mut(), || {
        if super::context::from_ptr(context).is_none() {
            set_errno(libc::EINVAL);
            return core::ptr::null_mut();
        }
        let events = match EventQueue::new() {
            Ok(q) => Arc::new(q),
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EMFILE));
                return core::ptr::null_mut();
            }
        };
        let ch = Box::new(Channel {
            c: core::cell::UnsafeCell::new(ibv_comp_channel {
                context,
                fd: events.raw_fd(),
                refcnt: 0,
            }),
            events,
            refcnt: Mutex::new(0),
            magic: <Channel as objects::Live>::alive(),
        });
        objects::publish(ch).cast()
    })
}

pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> i32 {
    guard(libc::EIO, || {
        // SAFETY: a channel pointer we handed out (module contract).
        let Some(ch) = (unsafe { objects::obj::<Channel, _>(channel) }) else {
            return libc::EINVAL;
        };
        if *ch.refcnt.lock().unwrap_or_else(|e| e.into_inner()) != 0 {
            return libc::EBUSY;
        }
        // SAFETY: allocated by `ibv_create_comp_channel` with Box, freed only here.
        unsafe { objects::free(channel.cast::<Channel>()) };
        0
    })
}

/// Called by CQ creation/destruction to keep `refcnt` (ABI field and our lock) right.
pub(crate) fn channel_ref(ch: &Channel, delta: i32) {
    let mut g = ch.refcnt.lock().unwrap_or_else(|e| e.into_inner());
    *g = g.saturating_add_signed(delta);
    // The C field is informational for programs; keep it equal.
    // SAFETY: written only under `refcnt`'s lock; programs only read it.
    unsafe { (*ch.c.get()).refcnt = *g as i32 };
}

pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut core::ffi::c_void,
) -> i32 {
    guard(-1, || {
        // SAFETY: a channel we handed out.
        let ch = unsafe { objects::obj::<Channel, _>(channel) };
        let Some(ch) = ch.filter(|_| !cq.is_null() && !cq_context.is_null()) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        match ch.events.pop() {
            Ok(addr) => {
                let c = addr as *mut Cq;
                // SAFETY: queued CQ addresses are live (purged on destroy); out-pointers checked.
                unsafe {
                    (*c).comp_events_reported
                        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    *cq = c.cast();
                    *cq_context = (*(*c).c.get()).cq_context;
                }
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    guard((), || {
        // SAFETY: a CQ we handed out.
        if let Some(c) = unsafe { objects::obj::<Cq, _>(cq) } {
            objects::cq_ack(c, nevents);
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Async events

/// What an async event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncElement {
    /// The `cookie` given with the CQ (its `ibv_cq` address).
    Cq(u64),
    /// The `cookie` of [`crate::backend::QpInit`].
    Qp(u64),
    /// The `cookie` given to `create_srq`.
    Srq(u64),
    Port(u8),
    Device,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct AsyncRecord {
    pub element: AsyncElement,
    pub event_type: u32,
}

/// Given to the engine at `open_device`; wired to `context->async_fd`.
#[derive(Clone)]
pub struct AsyncEventSink {
    pub(crate) queue: Arc<EventQueue<AsyncRecord>>,
}

impl AsyncEventSink {
    /// Queues an async event (`IBV_EVENT_*`) for the program's `ibv_get_async_event`.
    pub fn post(&self, element: AsyncElement, event_type: u32) {
        self.queue.push(AsyncRecord {
            element,
            event_type,
        });
    }
}

impl std::fmt::Debug for AsyncEventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AsyncEventSink(fd {})", self.queue.raw_fd())
    }
}

/// Drops queued async events about `element` (called before its object is freed).
pub(crate) fn purge_async(sink: &AsyncEventSink, element: AsyncElement) {
    sink.queue.purge(|r| r.element == element);
}

pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> i32 {
    guard(-1, || {
        let Some(ctx) = super::context::from_ptr(context) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if event.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        match ctx.inner.events.queue.pop() {
            Ok(rec) => {
                let element = match rec.element {
                    AsyncElement::Cq(p) => ibv_async_event_element {
                        cq: p as *mut ibv_cq,
                    },
                    AsyncElement::Qp(p) => ibv_async_event_element {
                        qp: p as *mut ibv_qp,
                    },
                    AsyncElement::Srq(p) => ibv_async_event_element {
                        srq: p as *mut ibv_srq,
                    },
                    AsyncElement::Port(n) => ibv_async_event_element { port_num: n as i32 },
                    AsyncElement::Device => ibv_async_event_element { port_num: 0 },
                };
                // SAFETY: `event` checked non-NULL; the program provides the storage.
                unsafe {
                    event.write(ibv_async_event {
                        element,
                        event_type: rec.event_type,
                    })
                };
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    guard((), || {
        if event.is_null() {
            return;
        }
        // SAFETY: the program passes back an event we filled in.
        let ev = unsafe { event.read() };
        // Per-object async-event counters, as libibverbs keeps them. Destroy verbs do not wait
        // for them (queued events are purged instead), so this is bookkeeping only.
        // SAFETY: element pointers name objects we handed out and the program has not destroyed
        // (it must ack before destroying, as with libibverbs).
        unsafe {
            match ev.event_type {
                IBV_EVENT_CQ_ERR => {
                    if let Some(c) = objects::obj::<Cq, _>(ev.element.cq) {
                        let f = core::ptr::addr_of_mut!((*c.c.get()).async_events_completed);
                        objects::bump_u32(f, &c.lock, 1);
                    }
                }
                1..=7 | 16 => {
                    if let Some(q) = objects::obj::<objects::Qp, _>(ev.element.qp) {
                        let f = core::ptr::addr_of_mut!((*q.c.get()).base.qp_base.events_completed);
                        objects::bump_u32(f, &q.lock, 1);
                    }
                }
                14 | 15 => {
                    if let Some(s) = objects::obj::<objects::Srq, _>(ev.element.srq) {
                        let f = core::ptr::addr_of_mut!((*s.c.get()).events_completed);
                        objects::bump_u32(f, &s.lock, 1);
                    }
                }
                _ => {}
            }
        }
    })
}
