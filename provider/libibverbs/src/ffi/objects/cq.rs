//! CQ verbs: create (plain and `ibv_cq_ex`), resize, destroy, and the `poll_cq`/`req_notify_cq` ops entries.
//!
//! # Safety
//! The object-wrapper contract in [`super`] (`ffi/objects/mod.rs`) applies; each `unsafe` block
//! below carries its own `SAFETY:` line.

use super::*;

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
                    crate::ffi::cq_ex::install(&mut *c);
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

pub(super) unsafe extern "C" fn poll_cq(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
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

pub(super) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
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
