//! PD, MR, CQ, QP, SRQ and AH verbs, and the `ops` table behind the inline data-path verbs
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

// ---------------------------------------------------------------------------------------------
// CQ

fn new_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    ex: bool,
) -> Result<*mut Cq, Errno> {
    let ctx = ctx_of(context).ok_or(Errno::EINVAL)?;
    let max = device::device_attr(ctx.inner.cfg).max_cqe;
    if cqe < 1 || cqe > max {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `context` is a live context (checked above).
    let nvec = unsafe { (*context).num_comp_vectors };
    if comp_vector < 0 || comp_vector >= nvec {
        return Err(Errno::EINVAL);
    }
    let ch = channel.cast::<Channel>();
    // SAFETY: NULL or a channel we handed out (module contract).
    if !channel.is_null() && unsafe { obj::<Channel, _>(channel) }.is_none() {
        return Err(Errno::EINVAL);
    }
    let cq = publish(Box::new(Cq {
        c: UnsafeCell::new(ibv_cq_ex {
            context,
            channel,
            cq_context,
            handle: 0,
            cqe: 0,
            mutex: Default::default(),
            cond: Default::default(),
            comp_events_completed: 0,
            async_events_completed: 0,
            comp_mask: 0,
            status: 0,
            wr_id: 0,
            start_poll: None,
            next_poll: None,
            end_poll: None,
            read_opcode: None,
            read_vendor_err: None,
            read_byte_len: None,
            read_imm_data: None,
            read_qp_num: None,
            read_src_qp: None,
            read_wc_flags: None,
            read_slid: None,
            read_sl: None,
            read_dlid_path_bits: None,
            read_completion_ts: None,
            read_cvlan: None,
            read_flow_tag: None,
            read_tm_info: None,
            read_completion_wallclock_ns: None,
        }),
        id: CqId(0),
        channel: ch,
        comp_events_reported: AtomicU32::new(0),
        lock: Mutex::new(()),
        acked: Condvar::new(),
        cur: Mutex::new(ibv_wc::default()),
        magic: Cq::alive(),
    }));
    // SAFETY: `channel` is NULL or a channel we handed out.
    let notifier = unsafe { ch.as_ref() }.map(|c| CqNotifier::new(c, cq as usize));
    let init = CqInit {
        cqe: cqe as u32,
        comp_vector: comp_vector as u32,
        notifier,
        cookie: cq as u64,
    };
    match ctx.inner.backend.create_cq(init) {
        Ok(info) => {
            // SAFETY: `cq` is not yet visible to the program or the engine's notifier users
            // beyond its address; we are its only user.
            unsafe {
                (*cq).id = info.id;
                let c = (*cq).c.get();
                (*c).handle = info.id.0 as u32;
                (*c).cqe = info.cqe.min(i32::MAX as u32) as c_int;
                if ex {
                    super::cq_ex::install(&mut *c);
                }
                if let Some(ch) = ch.as_ref() {
                    channel_ref(ch, 1);
                }
            }
            Ok(cq)
        }
        Err(e) => {
            // SAFETY: just allocated above, never handed to the program.
            unsafe { free(cq) };
            Err(noted("ibv_create_cq", e))
        }
    }
}

pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    guard(null_mut(), || {
        match new_cq(context, cqe, cq_context, channel, comp_vector, false) {
            Ok(cq) => cq.cast(),
            Err(e) => null_with(e),
        }
    })
}

/// `verbs_context.create_cq_ex`: a CQ whose `ibv_cq_ex` polling API (`ibv_start_poll`,
/// `ibv_next_poll`, `ibv_wc_read_*`) reads the same `DeviceContext::poll_cq` one completion at a
/// time (`cq_ex.rs`). Completion timestamps, CVLAN, flow tags, tag matching and parent domains are
/// refused with `EOPNOTSUPP` (`ibv_query_device_ex` reports no timestamp support).
pub unsafe extern "C" fn create_cq_ex_op(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    guard(null_mut(), || {
        if attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { &*attr };
        let known_flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0
            || (a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && a.flags & !known_flags != 0)
        {
            return null_with(Errno::EINVAL);
        }
        if a.wc_flags & !IBV_WC_STANDARD_FLAGS != 0
            || (a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 && !a.parent_domain.is_null())
        {
            unimplemented_once("ibv_create_cq_ex (timestamps/cvlan/flow tag/TM/parent domain)");
            return null_with(Errno::EOPNOTSUPP);
        }
        let cqe = c_int::try_from(a.cqe).unwrap_or(c_int::MAX);
        let vec = c_int::try_from(a.comp_vector).unwrap_or(c_int::MAX);
        match new_cq(context, cqe, a.cq_context, a.channel, vec, true) {
            Ok(cq) => cq.cast(),
            Err(e) => null_with(e),
        }
    })
}

pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(c) = (unsafe { obj::<Cq, _>(cq) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*c.c.get()).context }) else {
            return libc::EINVAL;
        };
        if cqe < 1 {
            return libc::EINVAL;
        }
        match ctx.inner.backend.resize_cq(c.id, cqe as u32) {
            Ok(n) => {
                let _g = c.lock.lock().unwrap_or_else(|e| e.into_inner());
                // SAFETY: C field of our object, under its lock.
                unsafe { (*c.c.get()).cqe = n.min(i32::MAX as u32) as c_int };
                0
            }
            Err(e) => noted("ibv_resize_cq", e).0,
        }
    })
}

/// `ibv_ack_cq_events`.
pub(crate) fn cq_ack(c: &Cq, n: u32) {
    // SAFETY: field of our live object.
    bump_u32(
        unsafe { core::ptr::addr_of_mut!((*c.c.get()).comp_events_completed) },
        &c.lock,
        n,
    );
    c.acked.notify_all();
}

pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(c) = (unsafe { obj::<Cq, _>(cq) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*c.c.get()).context }) else {
            return libc::EINVAL;
        };
        if let Err(e) = ctx.inner.backend.destroy_cq(c.id) {
            return noted("ibv_destroy_cq", e).0;
        }
        // SAFETY: `channel` is NULL or a live channel (it cannot be destroyed while refcnt > 0).
        if let Some(ch) = unsafe { c.channel.as_ref() } {
            ch.events.purge(|&a| a == cq as usize);
            // Like libibverbs: wait until every event handed out has been acknowledged.
            let mut g = c.lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut warned = false;
            loop {
                // SAFETY: C field of our object, read under its lock.
                let done = unsafe { (*c.c.get()).comp_events_completed };
                if done >= c.comp_events_reported.load(Ordering::Acquire) {
                    break;
                }
                let (g2, t) = c
                    .acked
                    .wait_timeout(g, Duration::from_secs(2))
                    .unwrap_or_else(|e| e.into_inner());
                g = g2;
                if t.timed_out() && !warned {
                    warned = true;
                    crate::log::warn(
                        "ibv_destroy_cq waits for completion events that were never acknowledged: \
                         call ibv_ack_cq_events() for every ibv_get_cq_event()",
                    );
                }
            }
            drop(g);
            channel_ref(ch, -1);
        }
        purge_async(&ctx.inner.events, AsyncElement::Cq(cq as u64));
        // SAFETY: boxed by new_cq; freed once.
        unsafe { free(cq.cast::<Cq>()) };
        0
    })
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: module contract.
        let Some(c) = (unsafe { obj::<Cq, _>(cq) }) else {
            return -libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*c.c.get()).context }) else {
            return -libc::EINVAL;
        };
        if num_entries < 0 || (wc.is_null() && num_entries > 0) {
            return -libc::EINVAL;
        }
        let out: &mut [ibv_wc] = if num_entries == 0 {
            &mut []
        } else {
            // SAFETY: the program's array of `num_entries` ibv_wc (module docs).
            unsafe { core::slice::from_raw_parts_mut(wc, num_entries as usize) }
        };
        match ctx.inner.backend.poll_cq(c.id, out) {
            Ok(n) => n.min(num_entries as usize) as c_int,
            Err(e) => -noted("ibv_poll_cq", e).0,
        }
    })
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(c) = (unsafe { obj::<Cq, _>(cq) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*c.c.get()).context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.req_notify_cq(c.id, solicited_only != 0) {
            Ok(()) => 0,
            Err(e) => noted("ibv_req_notify_cq", e).0,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// QP

struct QpArgs {
    /// `Some(send_ops_flags)` for the `ibv_wr_*` API.
    send_ops: Option<u64>,
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    cap: ibv_qp_cap,
    qp_type: u32,
    sq_sig_all: bool,
}

fn new_qp(pd: *mut ibv_pd, a: &QpArgs) -> Result<(*mut Qp, ibv_qp_cap), Errno> {
    // SAFETY: module contract for `pd`, `send_cq`, `recv_cq`, `srq`.
    let p = unsafe { obj::<Pd, _>(pd) }.ok_or(Errno::EINVAL)?;
    // SAFETY: our object.
    let context = unsafe { (*p.c.get()).context };
    let ctx = ctx_of(context).ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let scq = unsafe { obj::<Cq, _>(a.send_cq) }.ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let rcq = unsafe { obj::<Cq, _>(a.recv_cq) }.ok_or(Errno::EINVAL)?;
    // SAFETY: as above.
    let srq = if a.srq.is_null() {
        None
    } else {
        Some(unsafe { obj::<Srq, _>(a.srq) }.ok_or(Errno::EINVAL)?.id)
    };
    if !matches!(a.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD) {
        return Err(Errno::EOPNOTSUPP);
    }
    let qp = publish(Box::new(Qp {
        c: UnsafeCell::new(ibv_qp_ex_ext {
            base: ibv_qp_ex {
                qp_base: ibv_qp {
                    context,
                    qp_context: a.qp_context,
                    pd,
                    send_cq: a.send_cq,
                    recv_cq: a.recv_cq,
                    srq: a.srq,
                    handle: 0,
                    qp_num: 0,
                    state: IBV_QPS_RESET,
                    qp_type: a.qp_type,
                    mutex: Default::default(),
                    cond: Default::default(),
                    events_completed: 0,
                },
                comp_mask: 0,
                wr_id: 0,
                wr_flags: 0,
                wr_atomic_cmp_swp: None,
                wr_atomic_fetch_add: None,
                wr_bind_mw: None,
                wr_local_inv: None,
                wr_rdma_read: None,
                wr_rdma_write: None,
                wr_rdma_write_imm: None,
                wr_send: None,
                wr_send_imm: None,
                wr_send_inv: None,
                wr_send_tso: None,
                wr_set_ud_addr: None,
                wr_set_xrc_srqn: None,
                wr_set_inline_data: None,
                wr_set_inline_data_list: None,
                wr_set_sge: None,
                wr_set_sge_list: None,
                wr_start: None,
                wr_complete: None,
                wr_abort: None,
                wr_atomic_write: None,
            },
            wr_flush: None,
        }),
        id: QpId(0),
        sq_sig_all: a.sq_sig_all,
        lock: Mutex::new(()),
        qp_ex: a.send_ops.is_some(),
        pending: Mutex::new(Default::default()),
        magic: Qp::alive(),
    }));
    if a.send_ops.is_some() {
        // SAFETY: not yet published; we are the only user.
        unsafe { super::wr::install(&mut (*(*qp).c.get()).base) };
    }
    let init = QpInit {
        pd: p.id,
        qp_type: a.qp_type,
        send_cq: scq.id,
        recv_cq: rcq.id,
        srq,
        cap: a.cap,
        sq_sig_all: a.sq_sig_all,
        cookie: qp as u64,
    };
    match ctx.inner.backend.create_qp(init) {
        Ok(info) => {
            // SAFETY: not yet published to the program.
            unsafe {
                (*qp).id = info.id;
                let c = (*qp).c.get();
                (*c).base.qp_base.handle = info.id.0 as u32;
                (*c).base.qp_base.qp_num = info.qp_num;
            }
            Ok((qp, info.cap))
        }
        Err(e) => {
            // SAFETY: never handed to the program.
            unsafe { free(qp) };
            Err(noted("ibv_create_qp", e))
        }
    }
}

pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard(null_mut(), || {
        if qp_init_attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct, read by value.
        let ia = unsafe { &*qp_init_attr };
        let args = QpArgs {
            send_ops: None,
            qp_context: ia.qp_context,
            send_cq: ia.send_cq,
            recv_cq: ia.recv_cq,
            srq: ia.srq,
            cap: ia.cap,
            qp_type: ia.qp_type,
            sq_sig_all: ia.sq_sig_all != 0,
        };
        match new_qp(pd, &args) {
            Ok((qp, cap)) => {
                // Like the kernel: report the actual capacities back.
                // SAFETY: non-NULL program struct.
                unsafe { (*qp_init_attr).cap = cap };
                qp.cast()
            }
            Err(e) => null_with(e),
        }
    })
}

/// `verbs_context.create_qp_ex`. The inline `ibv_create_qp_ex` calls `ibv_create_qp` itself when
/// only `IBV_QP_INIT_ATTR_PD` is set; other masks arrive here. `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`
/// (what Debian's perftest uses by default) gives a QP with the `ibv_wr_*` API (`wr.rs`).
pub unsafe extern "C" fn create_qp_ex_op(
    _context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard(null_mut(), || {
        if attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let ia = unsafe { &*attr };
        let known =
            IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        let flags_ok = ia.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS == 0 || ia.create_flags == 0;
        if ia.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || ia.comp_mask & !known != 0 || !flags_ok {
            // XRC, RSS, TSO headers, create flags, … need the engine.
            unimplemented_once("ibv_create_qp_ex (XRC/RSS/TSO/create_flags)");
            return null_with(Errno::EOPNOTSUPP);
        }
        let send_ops =
            (ia.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(ia.send_ops_flags);
        if let Some(ops) = send_ops {
            if ops & !super::wr::SUPPORTED_SEND_OPS != 0 {
                unimplemented_once("ibv_create_qp_ex (send_ops_flags BIND_MW/TSO/FLUSH)");
                return null_with(Errno::EOPNOTSUPP);
            }
        }
        let args = QpArgs {
            send_ops,
            qp_context: ia.qp_context,
            send_cq: ia.send_cq,
            recv_cq: ia.recv_cq,
            srq: ia.srq,
            cap: ia.cap,
            qp_type: ia.qp_type,
            sq_sig_all: ia.sq_sig_all != 0,
        };
        match new_qp(ia.pd, &args) {
            Ok((qp, cap)) => {
                // SAFETY: non-NULL program struct.
                unsafe { (*attr).cap = cap };
                qp.cast()
            }
            Err(e) => null_with(e),
        }
    })
}

/// `ibv_qp_to_qp_ex`: the extended QP view exists only for QPs created with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`; NULL for the others, as libibverbs answers.
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: module contract.
    match unsafe { obj::<Qp, _>(qp) } {
        Some(q) if q.qp_ex => qp.cast(),
        _ => null_mut(),
    }
}

pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program struct, read by value.
        let a = unsafe { attr.read() };
        match ctx.inner.backend.modify_qp(q.id, &a, attr_mask) {
            Ok(()) => {
                if attr_mask & IBV_QP_STATE != 0 {
                    let _g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
                    // SAFETY: C field of our object, under its lock.
                    unsafe { (*q.c.get()).base.qp_base.state = a.qp_state };
                }
                0
            }
            Err(e) => noted("ibv_modify_qp", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let base = unsafe { &(*q.c.get()).base.qp_base };
        let Some(ctx) = ctx_of(base.context) else {
            return libc::EINVAL;
        };
        if attr.is_null() || init_attr.is_null() {
            return libc::EINVAL;
        }
        let mut a = ibv_qp_attr::default();
        match ctx.inner.backend.query_qp(q.id, attr_mask, &mut a) {
            Ok(cap) => {
                // SAFETY: non-NULL program structs.
                unsafe {
                    attr.write(a);
                    init_attr.write(ibv_qp_init_attr {
                        qp_context: base.qp_context,
                        send_cq: base.send_cq,
                        recv_cq: base.recv_cq,
                        srq: base.srq,
                        cap,
                        qp_type: base.qp_type,
                        sq_sig_all: c_int::from(q.sq_sig_all),
                    });
                }
                0
            }
            Err(e) => noted("ibv_query_qp", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.destroy_qp(q.id) {
            Ok(()) => {
                purge_async(&ctx.inner.events, AsyncElement::Qp(qp as u64));
                // SAFETY: boxed by new_qp; freed once.
                unsafe { free(qp.cast::<Qp>()) };
                0
            }
            Err(e) => noted("ibv_destroy_qp", e).0,
        }
    })
}

/// `sg_list[0..num_sge]` as a slice.
///
/// # Safety
/// `sg` must point to `n` readable `ibv_sge` (or `n == 0`), unchanged for `'a`.
unsafe fn sges<'a>(sg: *const ibv_sge, n: c_int) -> Result<&'a [ibv_sge], Errno> {
    if n < 0 || (n > 0 && sg.is_null()) {
        return Err(Errno::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: function contract.
    Ok(unsafe { core::slice::from_raw_parts(sg, n as usize) })
}

unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let base = unsafe { &(*q.c.get()).base.qp_base };
        let Some(ctx) = ctx_of(base.context) else {
            return libc::EINVAL;
        };
        let is_ud = base.qp_type == IBV_QPT_UD;
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: the program's WR list (module docs).
            let w = unsafe { cur.read() };
            let r = (|| {
                // SAFETY: the WR's scatter list (module docs).
                let sg_list = unsafe { sges(w.sg_list, w.num_sge) }?;
                let inline_buf;
                let inline_data = if w.send_flags & IBV_SEND_INLINE != 0 {
                    // SAFETY: inline SGEs name program memory readable for this call.
                    inline_buf = unsafe { gather(sg_list) };
                    Some(&inline_buf[..])
                } else {
                    None
                };
                let mut s = SendWr {
                    wr_id: w.wr_id,
                    opcode: w.opcode,
                    send_flags: w.send_flags,
                    imm_data: w.imm_data,
                    sg_list,
                    inline_data,
                    remote_addr: 0,
                    rkey: 0,
                    compare_add: 0,
                    swap: 0,
                    ud: None,
                };
                // SAFETY: reading the union member that `opcode`/QP type select; all members
                // are plain data, so any bit pattern is a valid value.
                unsafe {
                    if is_ud {
                        let ah = obj::<Ah, _>(w.wr.ud.ah).ok_or(Errno::EINVAL)?;
                        s.ud = Some(UdDest {
                            ah: ah.id,
                            remote_qpn: w.wr.ud.remote_qpn,
                            remote_qkey: w.wr.ud.remote_qkey,
                        });
                    } else {
                        match w.opcode {
                            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
                                s.remote_addr = w.wr.atomic.remote_addr;
                                s.compare_add = w.wr.atomic.compare_add;
                                s.swap = w.wr.atomic.swap;
                                s.rkey = w.wr.atomic.rkey;
                            }
                            _ => {
                                s.remote_addr = w.wr.rdma.remote_addr;
                                s.rkey = w.wr.rdma.rkey;
                            }
                        }
                    }
                }
                ctx.inner
                    .backend
                    .post_send(q.id, &s)
                    .map_err(|e| noted("ibv_post_send", e))
            })();
            if let Err(e) = r {
                if !bad_wr.is_null() {
                    // SAFETY: non-NULL out-pointer.
                    unsafe { *bad_wr = cur };
                }
                return e.0;
            }
            cur = w.next;
        }
        0
    })
}

/// Concatenates the bytes the SGEs name (inline data).
///
/// # Safety
/// Each SGE must name `length` readable bytes at `addr` for the duration of the call (the verbs
/// contract for inline sends: no lkey, the provider copies at post time).
pub(crate) unsafe fn gather(sg: &[ibv_sge]) -> Vec<u8> {
    let mut v = Vec::with_capacity(sg.iter().map(|s| s.length as usize).sum());
    for s in sg {
        if s.length > 0 && s.addr != 0 {
            // SAFETY: function contract.
            v.extend_from_slice(unsafe {
                core::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
            });
        }
    }
    v
}

fn post_recv_list(
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    mut f: impl FnMut(&RecvWr<'_>) -> VerbResult<()>,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the program's WR list (module docs).
        let w = unsafe { cur.read() };
        // SAFETY: the WR's scatter list.
        let r = unsafe { sges(w.sg_list, w.num_sge) }.and_then(|sg_list| {
            f(&RecvWr {
                wr_id: w.wr_id,
                sg_list,
            })
        });
        if let Err(e) = r {
            if !bad_wr.is_null() {
                // SAFETY: non-NULL out-pointer.
                unsafe { *bad_wr = cur };
            }
            return e.0;
        }
        cur = w.next;
    }
    0
}

unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        post_recv_list(wr, bad_wr, |w| {
            ctx.inner
                .backend
                .post_recv(q.id, w)
                .map_err(|e| noted("ibv_post_recv", e))
        })
    })
}

// ---------------------------------------------------------------------------------------------
// SRQ

pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
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
        if srq_init_attr.is_null() {
            return null_with(Errno::EINVAL);
        }
        // SAFETY: non-NULL program struct.
        let ia = unsafe { &*srq_init_attr };
        let srq = publish(Box::new(Srq {
            c: UnsafeCell::new(ibv_srq {
                context,
                srq_context: ia.srq_context,
                pd,
                handle: 0,
                mutex: Default::default(),
                cond: Default::default(),
                events_completed: 0,
            }),
            id: SrqId(0),
            lock: Mutex::new(()),
            magic: Srq::alive(),
        }));
        match ctx.inner.backend.create_srq(p.id, ia.attr, srq as u64) {
            Ok(info) => {
                // SAFETY: not yet published; then the program's struct (non-NULL).
                unsafe {
                    (*srq).id = info.id;
                    (*(*srq).c.get()).handle = info.id.0 as u32;
                    (*srq_init_attr).attr = info.attr;
                }
                srq.cast()
            }
            Err(e) => {
                // SAFETY: never handed to the program.
                unsafe { free(srq) };
                null_with(noted("ibv_create_srq", e))
            }
        }
    })
}

fn srq_ctx<'a>(srq: *mut ibv_srq) -> Option<(&'a Srq, &'a Context)> {
    // SAFETY: module contract.
    let s = unsafe { obj::<Srq, _>(srq) }?;
    // SAFETY: our object.
    let ctx = ctx_of(unsafe { (*s.c.get()).context })?;
    Some((s, ctx))
}

pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        if srq_attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program struct.
        let a = unsafe { srq_attr.read() };
        match ctx.inner.backend.modify_srq(s.id, &a, srq_attr_mask) {
            Ok(()) => 0,
            Err(e) => noted("ibv_modify_srq", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        if srq_attr.is_null() {
            return libc::EINVAL;
        }
        match ctx.inner.backend.query_srq(s.id) {
            Ok(a) => {
                // SAFETY: non-NULL program struct.
                unsafe { srq_attr.write(a) };
                0
            }
            Err(e) => noted("ibv_query_srq", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        match ctx.inner.backend.destroy_srq(s.id) {
            Ok(()) => {
                purge_async(&ctx.inner.events, AsyncElement::Srq(srq as u64));
                // SAFETY: boxed by ibv_create_srq; freed once.
                unsafe { free(srq.cast::<Srq>()) };
                0
            }
            Err(e) => noted("ibv_destroy_srq", e).0,
        }
    })
}

unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        let Some((s, ctx)) = srq_ctx(srq) else {
            return libc::EINVAL;
        };
        post_recv_list(wr, bad_wr, |w| {
            ctx.inner
                .backend
                .post_srq_recv(s.id, w)
                .map_err(|e| noted("ibv_post_srq_recv", e))
        })
    })
}

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
        // Our sgid index: the entry equal to the packet's destination GID.
        let gids = ctx.inner.cfg.gids();
        let Some(sgid_index) = gids.iter().position(|x| *x == g.dgid.raw) else {
            set_errno(libc::ENOENT);
            return -1;
        };
        let flow = u32::from_be(g.version_tclass_flow);
        let a = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: g.sgid,
                flow_label: flow & 0xfffff,
                sgid_index: sgid_index as u8,
                hop_limit: 0xff,
                traffic_class: ((flow >> 20) & 0xff) as u8,
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

// ---------------------------------------------------------------------------------------------
// Multicast

unsafe fn mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16, attach: bool) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object.
        let Some(ctx) = ctx_of(unsafe { (*q.c.get()).base.qp_base.context }) else {
            return libc::EINVAL;
        };
        if gid.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL program GID.
        let g = unsafe { (*gid).raw };
        let r = if attach {
            ctx.inner.backend.attach_mcast(q.id, g, lid)
        } else {
            ctx.inner.backend.detach_mcast(q.id, g, lid)
        };
        match r {
            Ok(()) => 0,
            Err(e) => noted("ibv_attach_mcast/ibv_detach_mcast", e).0,
        }
    })
}

pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(qp, gid, lid, true) }
}

pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(qp, gid, lid, false) }
}

// ---------------------------------------------------------------------------------------------
// Memory windows (ops table only): not supported (rxe's max_mw is 0 in the attributes we report).

unsafe extern "C" fn alloc_mw(_pd: *mut ibv_pd, _type: c_uint) -> *mut ibv_mw {
    unimplemented_once("ibv_alloc_mw");
    null_with(Errno::EOPNOTSUPP)
}
unsafe extern "C" fn bind_mw(_qp: *mut ibv_qp, _mw: *mut ibv_mw, _b: *mut ibv_mw_bind) -> c_int {
    unimplemented_once("ibv_bind_mw");
    libc::EOPNOTSUPP
}
unsafe extern "C" fn dealloc_mw(_mw: *mut ibv_mw) -> c_int {
    unimplemented_once("ibv_dealloc_mw");
    libc::EOPNOTSUPP
}

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
