//! PD, MR, CQ, QP, SRQ and AH verbs (one file per object family: [`pd_mr`], [`cq`], [`qp`]
//! with multicast, [`srq`], [`ah`], [`mw`]; the object wrappers and the live-object checks
//! are here), and the `ops` table behind the inline data-path verbs
//! (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_post_srq_recv`).
//! Each one checks its arguments, resolves C pointers to engine ids and calls the
//! [`DeviceContext`](crate::backend::DeviceContext) of the object's context.
//!
//! # Safety
//! * Each object is a `#[repr(C)]` wrapper whose first field is `UnsafeCell<C struct>`, boxed;
//!   the C pointer is the box pointer (module contract in `ffi/mod.rs`), freed only by its
//!   destroy verb after the engine agreed. Rust only holds `&Wrapper` (never `&mut`) while a
//!   program may be using the object from another thread; C-visible fields are written through
//!   `UnsafeCell::get()` at creation, or under the wrapper's `lock` afterwards.
//! * Work-request lists and scatter lists are the program's: each `ibv_send_wr`/`ibv_recv_wr`
//!   is read by value, and `sg_list[0..num_sge]` is borrowed as a slice only for the duration of
//!   the backend call (the program must not modify a WR list while posting it).
//! * `wc` in `poll_cq` is the program's array of `num_entries` elements; it becomes a
//!   `&mut [ibv_wc]` for the duration of the call.

use super::context::{from_ptr, Context};
use super::events::{channel_ref, purge_async, AsyncElement, Channel, CqNotifier};
use super::memory::MrMemory;
use super::{guard, set_errno};
use crate::abi::*;
use crate::backend::*;
use crate::device;
use crate::log::unimplemented_once;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_void};
use core::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[repr(C)]
pub struct Pd {
    pub c: UnsafeCell<ibv_pd>,
    pub id: PdId,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Mr {
    pub c: UnsafeCell<ibv_mr>,
    pub id: MrId,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Cq {
    pub c: UnsafeCell<ibv_cq_ex>,
    pub id: CqId,
    pub channel: *mut Channel,
    /// Completion events handed to the program by `ibv_get_cq_event`.
    pub comp_events_reported: AtomicU32,
    pub lock: Mutex<()>,
    pub acked: Condvar,
    /// The completion `ibv_start_poll`/`ibv_next_poll` made current (`ibv_cq_ex` API).
    pub cur: Mutex<ibv_wc>,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Qp {
    pub c: UnsafeCell<ibv_qp_ex_ext>,
    pub id: QpId,
    pub sq_sig_all: bool,
    pub lock: Mutex<()>,
    /// Created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: `ibv_qp_to_qp_ex` answers, `wr_*` are set.
    pub qp_ex: bool,
    /// Work requests built by `ibv_wr_*` since `ibv_wr_start` (see `wr.rs`).
    pub pending: Mutex<super::wr::Pending>,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Srq {
    pub c: UnsafeCell<ibv_srq>,
    pub id: SrqId,
    pub lock: Mutex<()>,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Mw {
    pub c: UnsafeCell<ibv_mw>,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

#[repr(C)]
pub struct Ah {
    pub c: UnsafeCell<ibv_ah>,
    pub id: AhId,
    /// [`Live::MAGIC`] while the object exists; cleared by its destroy verb.
    pub magic: AtomicU32,
}

/// The context of an object whose C struct starts with `struct ibv_context *context`.
fn ctx_of<'a>(context: *mut ibv_context) -> Option<&'a Context> {
    from_ptr(context)
}

/// Our object types, each with a magic number that is set while the object exists, so that a
/// destroyed (or wrong-typed) object passed back by the program is answered with `EINVAL` and a
/// warning instead of being used. Best effort: memory reused for a new object of the same type
/// passes, as it would with any handle scheme.
pub(crate) trait Live: Sized {
    const MAGIC: u32;
    const WHAT: &'static str;
    fn magic(&self) -> &AtomicU32;
    fn alive() -> AtomicU32 {
        AtomicU32::new(Self::MAGIC)
    }
}

macro_rules! live {
    ($($t:ty => $m:literal, $what:literal;)*) => {$(
        impl Live for $t {
            const MAGIC: u32 = u32::from_be_bytes(*$m);
            const WHAT: &'static str = $what;
            fn magic(&self) -> &AtomicU32 {
                &self.magic
            }
        }
    )*};
}
live! {
    Pd => b"rPD_", "ibv_pd";
    Mr => b"rMR_", "ibv_mr";
    Cq => b"rCQ_", "ibv_cq";
    Qp => b"rQP_", "ibv_qp";
    Srq => b"rSRQ", "ibv_srq";
    Ah => b"rAH_", "ibv_ah";
    Mw => b"rMW_", "ibv_mw";
}

/// `p as &Wrapper`: `None` for NULL, and (with a one-time warning) for an object that is not a
/// live `W`. The pointer is looked up in the registry of live objects ([`super::live`]) before it
/// is dereferenced, so a destroyed object is never read.
///
/// # Safety
/// A `p` found in the registry is a live `W` we allocated; the program must not destroy it while
/// this call uses it (the verbs contract).
pub(crate) unsafe fn obj<'a, W: Live, C>(p: *mut C) -> Option<&'a W> {
    if p.is_null() {
        return None;
    }
    // SAFETY: registered by `publish` as a live `W` and not yet freed (`free` unregisters first).
    let w = super::live::is_live(p as usize, W::MAGIC).then(|| unsafe { &*p.cast::<W>() });
    if let Some(w) = w.filter(|w| w.magic().load(Ordering::Acquire) == W::MAGIC) {
        Some(w)
    } else {
        crate::log::misuse_once(
            W::WHAT,
            &format!(
                "a {} that was destroyed (or is not one) was passed to a verb; it returns EINVAL",
                W::WHAT
            ),
        );
        None
    }
}

/// Allocates `w` for the program: the returned pointer is the C object, registered as live.
pub(crate) fn publish<W: Live>(w: Box<W>) -> *mut W {
    let p = Box::into_raw(w);
    super::live::register(p as usize, W::MAGIC);
    p
}

/// Marks `p` dead, forgets it in the registry and frees it.
///
/// # Safety
/// `p` was allocated by [`publish`], is live, and is not used again by us.
pub(crate) unsafe fn free<W: Live>(p: *mut W) {
    super::live::unregister(p as usize, W::MAGIC);
    // SAFETY: per the function contract.
    unsafe {
        (*p).magic().store(0, Ordering::Release);
        drop(Box::from_raw(p));
    }
}

fn null_with<T>(e: Errno) -> *mut T {
    set_errno(e.0);
    null_mut()
}

/// Says once on stderr that the engine does not implement `verb` yet, then passes `e` on.
fn noted(verb: &'static str, e: Errno) -> Errno {
    if e == Errno::EOPNOTSUPP || e == Errno::ENOSYS {
        unimplemented_once(verb);
    }
    e
}

/// Adds one to a C-visible counter under `lock` (used by the ack verbs).
pub(crate) fn bump_u32(field: *mut u32, lock: &Mutex<()>, n: u32) {
    let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a field of one of our live objects, written only under its lock.
    unsafe { *field = (*field).wrapping_add(n) };
}

mod ah;
mod cq;
mod mw;
mod pd_mr;
mod qp;
mod srq;

pub use ah::*;
pub use cq::*;
pub(crate) use mw::bind_wr;
use mw::{alloc_mw, bind_mw, dealloc_mw};
pub use pd_mr::*;
pub use qp::*;
pub use srq::*;

/// The `ops` table of every context: the data-path entries the inline verbs call; the
/// `_compat_*` slots stay NULL as in libibverbs ≥ 1.1 (nothing calls them).
pub fn context_ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat_query_device: None,
        _compat_query_port: None,
        _compat_alloc_pd: None,
        _compat_dealloc_pd: None,
        _compat_reg_mr: None,
        _compat_rereg_mr: None,
        _compat_dereg_mr: None,
        alloc_mw: Some(alloc_mw),
        bind_mw: Some(bind_mw),
        dealloc_mw: Some(dealloc_mw),
        _compat_create_cq: None,
        poll_cq: Some(poll_cq),
        req_notify_cq: Some(req_notify_cq),
        _compat_cq_event: None,
        _compat_resize_cq: None,
        _compat_destroy_cq: None,
        _compat_create_srq: None,
        _compat_modify_srq: None,
        _compat_query_srq: None,
        _compat_destroy_srq: None,
        post_srq_recv: Some(post_srq_recv),
        _compat_create_qp: None,
        _compat_query_qp: None,
        _compat_modify_qp: None,
        _compat_destroy_qp: None,
        post_send: Some(post_send),
        post_recv: Some(post_recv),
        _compat_create_ah: None,
        _compat_destroy_ah: None,
        _compat_attach_mcast: None,
        _compat_detach_mcast: None,
        _compat_async_event: None,
    }
}
