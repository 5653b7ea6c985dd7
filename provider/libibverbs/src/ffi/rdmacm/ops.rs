//! Event channels, ids and their calls, and the events (`rdma_get_cm_event`).
//!
//! # Safety
//! See the module documentation of `ffi::rdmacm`.
use super::addr;
use super::*;
use crate::ffi::guard;
use core::ffi::c_void;
use roce_cm::{ConnParam, EventKind, PortSpace, QpKind, RejReason};

fn kind_of(ps: u32, qp_type: u32) -> QpKind {
    match (ps, qp_type) {
        (_, IBV_QPT_UD) => QpKind::Ud,
        (RDMA_PS_UDP | RDMA_PS_IPOIB, _) => QpKind::Ud,
        _ => QpKind::Rc,
    }
}

/// A new id for CM id `cm`: on `chan` (a program channel or a listener's), or on a private
/// channel of its own when `chan` is NULL (a synchronous id). Registered in [`IDS`] by the
/// caller.
pub(crate) fn alloc_id(
    dev: &Arc<Device>,
    cm: roce_cm::Id,
    ps: u32,
    qp_type: u32,
    chan: *mut rdma_event_channel,
    context: *mut c_void,
) -> Result<*mut CmId, i32> {
    let (q, own, cptr) = match channel_from(chan) {
        Some(c) => (c.q.clone(), core::ptr::null_mut(), chan),
        None => {
            let own = new_channel()?;
            // SAFETY: just created.
            let q = unsafe { (*own).q.clone() };
            (q, own, own as *mut rdma_event_channel)
        }
    };
    // SAFETY: all-zero is valid for these C structs (pointers NULL, numbers 0).
    let mut c: rdma_cm_id = unsafe { core::mem::zeroed() };
    c.channel = cptr;
    c.context = context;
    c.ps = ps;
    c.qp_type = qp_type;
    c.route.addr.ibaddr.pkey = 0xFFFFu16.to_be();
    let b = Box::new(CmId {
        id: UnsafeCell::new(c),
        cm,
        dev: dev.clone(),
        q: Mutex::new(q),
        own_channel: Mutex::new(own),
        st: Mutex::new(IdState {
            resp_res: RDMA_MAX_RESP_RES,
            init_depth: RDMA_MAX_INIT_DEPTH,
            ..Default::default()
        }),
        acked: Condvar::new(),
        // SAFETY: all-zero is a valid path record.
        path: UnsafeCell::new(unsafe { core::mem::zeroed() }),
    });
    let p = Box::into_raw(b);
    live::register(p as usize, ID_TAG);
    Ok(p)
}

/// Fills the id's addresses from the CM, and the device, PD and port when it is on one.
fn fill_route(id: &CmId, d: &CmDevice) {
    let (l, r) = id.dev.cm(|c, _| (c.local_addr(id.cm), c.peer_addr(id.cm)));
    let c = id.c();
    if let Some(l) = l {
        addr::write(&mut c.route.addr.src_addr, l);
        c.route.addr.ibaddr.sgid.raw = addr::gid(l.ip());
        if !l.ip().is_unspecified() {
            c.verbs = d.ctx as *mut ibv_context;
            c.pd = d.pd as *mut ibv_pd;
            c.port_num = 1;
        }
    }
    if let Some(r) = r {
        addr::write(&mut c.route.addr.dst_addr, r);
        c.route.addr.ibaddr.dgid.raw = addr::gid(r.ip());
    }
}

pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    guard(core::ptr::null_mut(), || match new_channel() {
        Ok(p) => p as *mut rdma_event_channel,
        Err(e) => {
            set_errno(e);
            core::ptr::null_mut()
        }
    })
}

pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    guard((), || {
        if channel_from(channel).is_some() {
            // SAFETY: a live channel; the program destroys it after its ids (librdmacm's rule).
            unsafe { free_channel(channel as *mut Channel) };
        }
    })
}

pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    guard(-1, || {
        if id.is_null() || (!channel.is_null() && channel_from(channel).is_none()) {
            return fail(libc::EINVAL);
        }
        let (Some(space), qp_type) = (
            PortSpace::from_raw(ps),
            match ps {
                RDMA_PS_UDP | RDMA_PS_IPOIB => IBV_QPT_UD,
                _ => IBV_QPT_RC,
            },
        ) else {
            return fail(libc::EINVAL);
        };
        create_id(channel, id, context, space, qp_type)
    })
}

pub(crate) fn create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    space: PortSpace,
    qp_type: u32,
) -> c_int {
    let d = match cm_device() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let cm = d
        .dev
        .cm(|c, _| c.create_id(space, kind_of(space.raw(), qp_type)));
    let p = match alloc_id(&d.dev, cm, space.raw(), qp_type, channel, context) {
        Ok(p) => p,
        Err(e) => {
            d.dev.cm(|c, now| c.destroy_id(now, cm));
            return fail(e);
        }
    };
    ids()
        .get_or_insert_with(HashMap::new)
        .insert(cm.0, p as usize);
    // SAFETY: non-NULL out-pointer from the program.
    unsafe { *id = p as *mut rdma_cm_id };
    0
}

pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        destroy_id(i);
        0
    })
}

pub(crate) fn destroy_id(i: &CmId) {
    let me = i as *const CmId as usize;
    if let Some(m) = ids().as_mut() {
        m.remove(&i.cm.0);
    }
    i.dev.cm_destroy(i.cm);
    // Events not yet taken: a connect request's new id goes with it (the CM rejects it).
    let q = i.queue();
    let orphans = core::cell::RefCell::new(Vec::new());
    q.purge(|p| {
        if p.listen == me {
            orphans.borrow_mut().push(p.id);
        }
        p.id == me || p.listen == me
    });
    for o in orphans.into_inner() {
        // SAFETY: the new id of a connect request nobody took: live, and ours alone.
        let child = unsafe { &*(o as *const CmId) };
        destroy_id(child);
    }
    let c = i.c();
    if !c.event.is_null() {
        // SAFETY: the event a synchronous call kept in `id->event`.
        unsafe { rdma_ack_cm_event(c.event) };
        c.event = core::ptr::null_mut();
    }
    {
        let mut st = i.state();
        while st.unacked > 0 {
            st = i.acked.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
    let own = *i.own_channel.lock().unwrap_or_else(|e| e.into_inner());
    if live::unregister(me, ID_TAG) {
        // SAFETY: allocated by `alloc_id`, no longer registered anywhere.
        drop(unsafe { Box::from_raw(me as *mut CmId) });
    }
    if !own.is_null() {
        // SAFETY: the id's private channel, used by nobody else.
        unsafe { free_channel(own) };
    }
}

/// librdmacm's `ucma_complete`: a synchronous id waits for the event of its call, keeps it in
/// `id->event`, and fails with the event's status.
pub(crate) fn complete(i: &CmId) -> c_int {
    if !i.sync() {
        return 0;
    }
    let c = i.c();
    if !c.event.is_null() {
        // SAFETY: the previous event kept there.
        unsafe { rdma_ack_cm_event(c.event) };
        c.event = core::ptr::null_mut();
    }
    let mut ev = core::ptr::null_mut();
    // SAFETY: our own channel and a local out-pointer.
    if unsafe { rdma_get_cm_event(c.channel, &mut ev) } != 0 {
        return -1;
    }
    c.event = ev;
    // SAFETY: the event just returned.
    let e = unsafe { &*ev };
    if e.status != 0 {
        return fail(if e.event == EventKind::Rejected.raw() {
            libc::ECONNREFUSED
        } else if e.status < 0 {
            -e.status
        } else {
            e.status
        });
    }
    0
}

fn sockaddr_arg(p: *mut libc::sockaddr) -> Result<Option<std::net::SocketAddr>, c_int> {
    // SAFETY: a program address argument, read as far as its family says.
    unsafe { addr::read(p) }.map_err(fail)
}

pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, a: *mut libc::sockaddr) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let a = match sockaddr_arg(a) {
            Ok(Some(a)) => a,
            Ok(None) => return fail(libc::EINVAL),
            Err(r) => return r,
        };
        if let Err(e) = i.dev.cm_bind(i.cm, a) {
            return fail(e);
        }
        if let Ok(d) = cm_device() {
            fill_route(i, d);
        }
        0
    })
}

pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let s = match sockaddr_arg(src) {
            Ok(s) => s,
            Err(r) => return r,
        };
        let d = match sockaddr_arg(dst) {
            Ok(Some(d)) => d,
            Ok(None) => return fail(libc::EINVAL),
            Err(r) => return r,
        };
        let t = timeout_ms.max(0) as u32;
        if let Err(e) = i.dev.cm(|c, now| c.resolve_addr(now, i.cm, s, d, t)) {
            return fail(e);
        }
        addr::write(&mut i.c().route.addr.dst_addr, d);
        complete(i)
    })
}

pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let t = timeout_ms.max(0) as u32;
        if let Err(e) = i.dev.cm(|c, now| c.resolve_route(now, i.cm, t)) {
            return fail(e);
        }
        complete(i)
    })
}

pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if let Err(e) = i.dev.cm(|c, _| c.listen(i.cm, backlog)) {
            return fail(e);
        }
        if let Ok(d) = cm_device() {
            fill_route(i, d);
        }
        0
    })
}

/// librdmacm's `ucma_valid_param` + `ucma_copy_conn_param_to_kern`: the parameters the CM
/// sends, with RDMA_MAX_RESP_RES/INIT_DEPTH replaced by the device's limits and the QP's
/// number when the id has one.
fn conn_param(i: &CmId, p: *const rdma_conn_param) -> Result<ConnParam, i32> {
    let attr = i.dev.with_nic(|n| n.query_device());
    let mut st = i.state();
    let mut out = ConnParam {
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    if !p.is_null() {
        // SAFETY: non-NULL program argument.
        let p = unsafe { &*p };
        // RDMA_MAX_*: as many as the connection request offered (passive) and the device allows
        if p.responder_resources != RDMA_MAX_RESP_RES {
            st.resp_res = p.responder_resources;
        }
        if p.initiator_depth != RDMA_MAX_INIT_DEPTH {
            st.init_depth = p.initiator_depth;
        }
        out.flow_control = p.flow_control != 0;
        out.retry_count = p.retry_count.min(7);
        out.rnr_retry_count = p.rnr_retry_count.min(7);
        out.srq = p.srq != 0;
        out.qp_num = p.qp_num & 0xFF_FFFF;
        if p.private_data_len > 0 {
            if p.private_data.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's private data, `private_data_len` bytes.
            out.private_data = unsafe {
                core::slice::from_raw_parts(
                    p.private_data as *const u8,
                    p.private_data_len as usize,
                )
            }
            .to_vec();
        }
    }
    st.resp_res = st.resp_res.min(attr.max_qp_rd_atom.min(254) as u8);
    st.init_depth = st.init_depth.min(attr.max_qp_init_rd_atom.min(254) as u8);
    out.responder_resources = st.resp_res;
    out.initiator_depth = st.init_depth;
    let qp = i.c().qp;
    if !qp.is_null() {
        // SAFETY: the id's QP, created by `rdma_create_qp`.
        unsafe {
            out.qp_num = (*qp).qp_num;
            out.srq = !(*qp).srq.is_null();
        }
    }
    out.qkey = RDMA_UDP_QKEY;
    Ok(out)
}

pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, p: *mut rdma_conn_param) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let cp = match conn_param(i, p) {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        let ece = super::ece::for_req(i);
        if let Err(e) = i.dev.cm(|c, now| c.connect_ece(now, i.cm, &cp, ece)) {
            return fail(e);
        }
        complete(i)
    })
}

pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, p: *mut rdma_conn_param) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let cp = match conn_param(i, p) {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        if !i.c().qp.is_null() && i.c().qp_type != IBV_QPT_UD {
            let (rr, id_) = {
                let st = i.state();
                (st.resp_res, st.init_depth)
            };
            if let Err(e) = qp::to_rtr(i, rr).and_then(|_| qp::to_rts(i, id_)) {
                let _ = i.dev.cm(|c, now| c.reject(now, i.cm, &[]));
                return fail(e);
            }
        }
        let ece = super::ece::for_rep(i);
        if let Err(e) = i.dev.cm(|c, now| c.accept_ece(now, i.cm, &cp, ece)) {
            return fail(e);
        }
        complete(i)
    })
}

pub unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    unsafe { reject_with_reason(id, private_data, len, RejReason::ConsumerDefined) }
}

/// librdmacm's `reject_with_reason` (`rdma_reject`: 28, `rdma_reject_ece`: 35).
///
/// # Safety
/// `private_data` holds `len` bytes when non-NULL.
pub(crate) unsafe fn reject_with_reason(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    len: u8,
    reason: RejReason,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let data = if len > 0 && !private_data.is_null() {
            // SAFETY: the program's private data, `len` bytes.
            unsafe { core::slice::from_raw_parts(private_data as *const u8, len as usize) }.to_vec()
        } else {
            Vec::new()
        };
        match i.dev.cm(|c, now| c.reject_reason(now, i.cm, &data, reason)) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        if !i.c().qp.is_null() && i.c().qp_type != IBV_QPT_UD {
            qp::to_err(i);
        }
        if let Err(e) = i.dev.cm(|c, now| c.disconnect(now, i.cm)) {
            return fail(e);
        }
        complete(i)
    })
}

pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        match i.dev.cm(|c, now| c.establish(now, i.cm)) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, _event: u32) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        match i.dev.cm(|c, now| c.notify(now, i.cm)) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    guard(-1, || {
        let Some(i) = id_from(id) else {
            return fail(libc::EINVAL);
        };
        let (q, own, cptr) = match channel_from(channel) {
            Some(c) => (c.q.clone(), core::ptr::null_mut(), channel),
            None if channel.is_null() => match new_channel() {
                // SAFETY: just created.
                Ok(p) => (unsafe { (*p).q.clone() }, p, p as *mut rdma_event_channel),
                Err(e) => return fail(e),
            },
            None => return fail(libc::EINVAL),
        };
        // (events already queued for the id stay on its old channel, as with librdmacm's
        // rule that a program migrates an id with no events outstanding)
        *i.q.lock().unwrap_or_else(|e| e.into_inner()) = q;
        i.c().channel = cptr;
        let prev = core::mem::replace(
            &mut *i.own_channel.lock().unwrap_or_else(|e| e.into_inner()),
            own,
        );
        if !prev.is_null() {
            // SAFETY: the id's previous private channel.
            unsafe { free_channel(prev) };
        }
        0
    })
}

pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    guard(0, || {
        id_from(id).map_or(0, |i| addr::port(&i.c().route.addr.src_addr).to_be())
    })
}

pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    guard(0, || {
        id_from(id).map_or(0, |i| addr::port(&i.c().route.addr.dst_addr).to_be())
    })
}

/// The record behind a `struct rdma_cm_event`: the C struct, then a copy of its private data.
#[repr(C)]
pub struct EventRec {
    pub ev: rdma_cm_event,
    pub data: [u8; 256],
    pub id: usize,
}

pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    guard(-1, || {
        let Some(ch) = channel_from(channel) else {
            return fail(libc::EINVAL);
        };
        if event.is_null() {
            return fail(libc::EINVAL);
        }
        loop {
            let p = match ch.q.pop() {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            if let Some(rec) = process(p) {
                // SAFETY: non-NULL out-pointer from the program.
                unsafe { *event = rec };
                return 0;
            }
        }
    })
}

pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    guard(-1, || {
        if event.is_null() || !live::unregister(event as usize, EVENT_TAG) {
            return fail(libc::EINVAL);
        }
        // SAFETY: a record of ours, just unregistered: nobody else frees it.
        let rec = unsafe { Box::from_raw(event as *mut EventRec) };
        if live::is_live(rec.id, ID_TAG) {
            // SAFETY: a live id.
            let i = unsafe { &*(rec.id as *const CmId) };
            let mut st = i.state();
            st.unacked = st.unacked.saturating_sub(1);
            i.acked.notify_all();
        }
        0
    })
}

/// librdmacm's side of an event (`rdma_get_cm_event`): a new id's addresses, the QP
/// transitions and RTU of a connect response, the QP to ERR on a reject; `None` when the
/// event was consumed.
fn process(p: Pending) -> Option<*mut rdma_cm_event> {
    if !live::is_live(p.id, ID_TAG) {
        return None;
    }
    // SAFETY: a live id.
    let i = unsafe { &*(p.id as *const CmId) };
    let d = cm_device().ok()?;
    let ev = p.ev;
    let mut kind = ev.kind;
    let mut status = ev.status;
    match kind {
        EventKind::AddrResolved | EventKind::ConnectRequest => fill_route(i, d),
        EventKind::RouteResolved => {
            fill_route(i, d);
            let c = i.c();
            // SAFETY: the id's own path record.
            let pr = unsafe { &mut *i.path.get() };
            pr.sgid = c.route.addr.ibaddr.sgid;
            pr.dgid = c.route.addr.ibaddr.dgid;
            pr.pkey = 0xFFFFu16.to_be();
            pr.hop_limit = 64;
            pr.reversible = 1;
            pr.numb_path = 1;
            pr.mtu_selector = 2;
            pr.mtu = i.dev.with_nic(|n| n.query_port().active_mtu as u8);
            pr.rate_selector = 2;
            pr.rate = 3;
            pr.packet_life_time_selector = 2;
            pr.packet_life_time = 18;
            c.route.path_rec = pr;
            c.route.num_paths = 1;
        }
        EventKind::ConnectResponse if !i.c().qp.is_null() => {
            let (rr, idp) = {
                let st = i.state();
                (st.resp_res, st.init_depth)
            };
            let r = super::ece::check_conn_resp(i, ev.ece)
                .and_then(|_| qp::to_rtr(i, rr))
                .and_then(|_| qp::to_rts(i, idp))
                .and_then(|_| i.dev.cm(|c, now| c.establish(now, i.cm)))
                .and_then(|_| super::ece::after_conn_resp(i));
            match r {
                Ok(()) => kind = EventKind::Established,
                Err(e) => {
                    // librdmacm: the QP to ERR, CONNECT_ERROR with status -1 and errno set
                    qp::to_err(i);
                    let _ = i.dev.cm(|c, now| c.reject(now, i.cm, &[]));
                    kind = EventKind::ConnectError;
                    set_errno(e);
                    status = -1;
                }
            }
        }
        EventKind::ConnectResponse => i.state().remote_ece = ev.ece,
        EventKind::Rejected | EventKind::Unreachable | EventKind::ConnectError
            if !i.c().qp.is_null() && i.c().qp_type != IBV_QPT_UD =>
        {
            qp::to_err(i);
        }
        _ => {}
    }
    let mut rec = Box::new(EventRec {
        // SAFETY: all-zero is a valid event (NULL pointers, zero numbers).
        ev: unsafe { core::mem::zeroed() },
        data: [0; 256],
        id: p.id,
    });
    let n = ev.private_data.len().min(256);
    rec.data[..n].copy_from_slice(&ev.private_data[..n]);
    rec.ev.id = i.raw();
    rec.ev.listen_id = if p.listen != 0 {
        p.listen as *mut rdma_cm_id
    } else {
        core::ptr::null_mut()
    };
    rec.ev.event = kind.raw();
    rec.ev.status = status;
    let data_ptr = if n > 0 {
        rec.data.as_ptr() as *const c_void
    } else {
        core::ptr::null()
    };
    if let Some(ud) = &ev.ud {
        let mut ah = ibv_ah_attr {
            is_global: 1,
            port_num: 1,
            ..Default::default()
        };
        ah.grh.dgid.raw = addr::gid(ud.remote);
        ah.grh.sgid_index = 1;
        ah.grh.hop_limit = ud.hop_limit;
        ah.grh.flow_label = ud.flow_label;
        ah.grh.traffic_class = ud.traffic_class;
        rec.ev.param.ud = rdma_ud_param {
            private_data: data_ptr,
            private_data_len: n as u8,
            ah_attr: ah,
            qp_num: ud.qp_num,
            qkey: ud.qkey,
        };
    } else {
        rec.ev.param.conn = rdma_conn_param {
            private_data: data_ptr,
            private_data_len: n as u8,
            responder_resources: ev.param.responder_resources,
            initiator_depth: ev.param.initiator_depth,
            flow_control: ev.param.flow_control as u8,
            retry_count: ev.param.retry_count,
            rnr_retry_count: ev.param.rnr_retry_count,
            srq: ev.param.srq as u8,
            qp_num: ev.param.qp_num,
        };
    }
    if kind == EventKind::ConnectRequest {
        // the new id takes the initiator's offer as its own limits (librdmacm's
        // `ucma_process_conn_req`)
        let mut st = i.state();
        st.resp_res = ev.param.responder_resources;
        st.init_depth = ev.param.initiator_depth;
        st.remote_ece = ev.ece;
    }
    // the event counts against the id it names (the listener's for a connect request is the
    // new id's: destroying the listener does not wait for it)
    i.state().unacked += 1;
    let p = Box::into_raw(rec);
    live::register(p as usize, EVENT_TAG);
    Some(p as *mut rdma_cm_event)
}
