//! RDMA CM for Rust programs: the connection model of librdmacm — listen on a port, take
//! connection requests and accept or reject them, connect to an address, disconnect — over the
//! device's connection manager ([`roce_cm`]), which speaks IB CM MADs on QP1 as kernel
//! `rdma_cm` does. A Rust program connects to another one, or to a C program using
//! librdmacm on the drop-in library, with no out-of-band endpoint exchange.
//!
//! ```no_run
//! use roce_provider::verbs::{cm, AccessFlags, Device, DeviceConfig, QpType};
//! use std::time::Duration;
//! let t = Duration::from_secs(5);
//! // server, on 127.0.0.1
//! let ctx = Device::open(DeviceConfig::new("127.0.0.1".parse().unwrap()))?;
//! let listener = cm::Listener::bind(&ctx, 7471)?;
//! let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(64).build()?);
//! let request = listener.next_request(t)?;
//! let qp = pd.create_qp(&cq, &cq, QpType::Rc).build()?;
//! let conn = request.accept(qp, b"welcome", t)?;
//! // client, on 127.0.0.2: cm::connect(&ctx, qp, "127.0.0.1:7471".parse().unwrap(), b"", t)?
//! conn.disconnect(t)?;
//! # Ok::<(), roce_provider::verbs::Error>(())
//! ```
//!
//! Only RC connections in the TCP port space so far; devices on a simulated network have no CM
//! ([`Error::CmNeedsUdp`]).
//!
//! A call that waits for the peer (`next_request`, `accept`, `connect`, `disconnect`) first
//! progresses the device itself for up to 200 µs, as a CQ poll does (yielding the CPU when
//! nothing arrived), and only then sleeps until the progress thread delivers the event: a peer
//! on this host answers within that time, and the two thread wake-ups per message saved are
//! most of a connection's cost (`roce bench --tests cm`: about 5,000 connections/s without,
//! 35,000–45,000 with).
use super::error::{Error, Result};
use super::{Context, PreparedQueuePair, QueuePair};
use crate::runtime::Device as RtDevice;
pub use roce_cm::EventKind;
use roce_cm::{ConnParam, Event, Id, PortSpace, QpKind};
use roce_emu::{QpAttrMask, QpState};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Events of one runtime device's CM, by the id they are for (a connect request by its
/// listener's).
#[derive(Default)]
struct Hub {
    q: Mutex<HashMap<u32, VecDeque<Event>>>,
    cv: Condvar,
}

impl Hub {
    fn push(&self, ev: Event) {
        let key = match ev.kind {
            EventKind::ConnectRequest => ev.listen_id.unwrap_or(ev.id).0,
            _ => ev.id.0,
        };
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .push_back(ev);
        self.cv.notify_all();
    }

    /// The next event for `id`, waiting up to `timeout`.
    fn wait(&self, id: Id, timeout: Duration) -> Result<Event> {
        let end = Instant::now() + timeout;
        let mut g = self.q.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(ev) = g.get_mut(&id.0).and_then(|q| q.pop_front()) {
                return Ok(ev);
            }
            let now = Instant::now();
            if now >= end {
                return Err(Error::Timeout(timeout));
            }
            g = self
                .cv
                .wait_timeout(g, end - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The next event for `id`, if one is queued.
    fn try_take(&self, id: Id) -> Option<Event> {
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&id.0)
            .and_then(|q| q.pop_front())
    }

    fn forget(&self, id: Id) {
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id.0);
    }
}

/// How long a wait for a CM event progresses the device itself before it sleeps.
const EVENT_SPIN: Duration = Duration::from_micros(200);

/// The hub of each runtime device this process uses through `verbs::cm` (by address).
static HUBS: Mutex<Vec<(usize, Arc<Hub>)>> = Mutex::new(Vec::new());

fn hub(dev: &RtDevice) -> Arc<Hub> {
    let key = dev as *const RtDevice as usize;
    let mut g = HUBS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, h)) = g.iter().find(|(k, _)| *k == key) {
        return h.clone();
    }
    let h = Arc::new(Hub::default());
    let to = h.clone();
    dev.set_cm_handler(Some(Arc::new(move |ev| to.push(ev))));
    g.push((key, h.clone()));
    h
}

/// What every CM object holds: the context (which keeps the device alive), its hub and id.
struct IdHandle {
    ctx: Context,
    hub: Arc<Hub>,
    id: Id,
}

impl IdHandle {
    fn new(ctx: &Context) -> Result<IdHandle> {
        let dev = ctx.runtime().ok_or(Error::CmNeedsUdp)?;
        let hub = hub(dev);
        let id = dev.cm(|c, _| c.create_id(PortSpace::Tcp, QpKind::Rc));
        Ok(IdHandle {
            ctx: ctx.clone(),
            hub,
            id,
        })
    }

    fn dev(&self) -> &RtDevice {
        self.ctx
            .runtime()
            .expect("a CM id is only made on a runtime device")
    }

    fn call<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut roce_cm::Endpoint, roce_cm::Instant, Id) -> std::result::Result<R, i32>,
    ) -> Result<R> {
        let id = self.id;
        self.dev()
            .cm(|c, now| f(c, now, id))
            .map_err(|errno| Error::Cm { op, errno })
    }

    /// Waits for `want`; a refusal or anything unexpected is an error.
    fn expect(&self, want: EventKind, timeout: Duration) -> Result<Event> {
        // A peer on this host answers within tens of microseconds: look for it first, moving the
        // device inline as a CQ poll does, then sleep until the progress thread delivers it.
        let spin_end = Instant::now() + EVENT_SPIN.min(timeout);
        let ev = loop {
            if let Some(ev) = self.hub.try_take(self.id) {
                break ev;
            }
            if Instant::now() >= spin_end {
                break self.hub.wait(self.id, timeout)?;
            }
            if self.dev().progress() == 0 {
                // nothing arrived: let the other threads (the peer's, on a shared CPU) run
                std::thread::yield_now();
            }
        };
        if ev.kind == want && ev.status == 0 {
            return Ok(ev);
        }
        Err(Error::CmRefused {
            event: ev.kind,
            status: ev.status,
            private_data: ev.private_data,
        })
    }

    /// RTR then RTS with the attributes the CM computed (librdmacm's `ucma_modify_qp_rtr` /
    /// `_rts`), the QP's own read/atomic limits where it has them.
    fn ready(&self, qp: &QueuePair, rd: (u8, u8)) -> Result<()> {
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            let (mut a, mask) = self.call("init_qp_attr", |c, _, id| c.init_qp_attr(id, st))?;
            a.ah_attr.sgid_index = 1;
            if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
                a.max_dest_rd_atomic = a.max_dest_rd_atomic.min(rd.0);
            }
            if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
                a.max_rd_atomic = a.max_rd_atomic.min(rd.1);
            }
            qp.modify(&a, mask)?;
        }
        Ok(())
    }
}

impl Drop for IdHandle {
    fn drop(&mut self) {
        let id = self.id;
        if let Some(d) = self.ctx.runtime() {
            d.cm_destroy(id);
        }
        self.hub.forget(id);
    }
}

fn param(qp: &QueuePair, rd: (u8, u8), private_data: &[u8]) -> ConnParam {
    ConnParam {
        private_data: private_data.to_vec(),
        responder_resources: rd.0,
        initiator_depth: rd.1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: qp.qpn(),
        ..Default::default()
    }
}

/// A listening id (`rdma_bind_addr` + `rdma_listen`) on the device's address.
pub struct Listener {
    h: IdHandle,
    addr: SocketAddr,
}

impl Listener {
    /// Listens on `port` of the device's address (0: an ephemeral port).
    pub fn bind(ctx: &Context, port: u16) -> Result<Listener> {
        let h = IdHandle::new(ctx)?;
        h.dev()
            .cm_bind(h.id, SocketAddr::new(ctx.ip(), port))
            .map_err(|errno| Error::Cm { op: "bind", errno })?;
        h.call("listen", |c, _, id| c.listen(id, 64))?;
        let addr = h
            .dev()
            .cm(|c, _| c.local_addr(h.id))
            .unwrap_or(SocketAddr::new(ctx.ip(), port));
        Ok(Listener { h, addr })
    }

    /// The address and port it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next connection request, waiting up to `timeout`.
    pub fn next_request(&self, timeout: Duration) -> Result<ConnectRequest> {
        let ev = self.h.expect(EventKind::ConnectRequest, timeout)?;
        let peer = self.h.dev().cm(|c, _| c.peer_addr(ev.id));
        Ok(ConnectRequest {
            h: IdHandle {
                ctx: self.h.ctx.clone(),
                hub: self.h.hub.clone(),
                id: ev.id,
            },
            private_data: ev.private_data,
            offer: (ev.param.responder_resources, ev.param.initiator_depth),
            peer,
        })
    }
}

/// A connection request taken from a [`Listener`]: accept it with a QP, or reject it. Dropped
/// unanswered, it is rejected.
pub struct ConnectRequest {
    h: IdHandle,
    private_data: Vec<u8>,
    offer: (u8, u8),
    peer: Option<SocketAddr>,
}

impl ConnectRequest {
    /// What the peer sent with its request (rdma_cm's 56 bytes for RC).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }
    /// The peer's address and port.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Accepts with `qp` (an RC QP in INIT from a builder): RTR and RTS as rdma_cm computes
    /// them, then REP (with `private_data`, up to 196 bytes) and waits for the peer's RTU.
    pub fn accept(
        self,
        qp: PreparedQueuePair,
        private_data: &[u8],
        timeout: Duration,
    ) -> Result<Connection> {
        let (dest, init) = qp.rd_atomic();
        let rd = (dest.min(self.offer.1), init.min(self.offer.0));
        let qp = qp.into_inner();
        self.h.ready(&qp, rd)?;
        let p = param(&qp, rd, private_data);
        self.h.call("accept", |c, now, id| c.accept(now, id, &p))?;
        self.h.expect(EventKind::Established, timeout)?;
        Ok(Connection {
            h: self.h,
            qp,
            peer: self.peer,
            private_data: Vec::new(),
        })
    }

    /// Rejects with `private_data` (up to 148 bytes; the peer sees REJ reason 28).
    pub fn reject(self, private_data: &[u8]) -> Result<()> {
        self.h
            .call("reject", |c, now, id| c.reject(now, id, private_data))
    }
}

/// `rdma_resolve_addr` + `rdma_resolve_route` + `rdma_connect` with `qp` (an RC QP in INIT from
/// a builder) to `to`, then RTR, RTS and RTU when the peer accepts.
pub fn connect(
    ctx: &Context,
    qp: PreparedQueuePair,
    to: SocketAddr,
    private_data: &[u8],
    timeout: Duration,
) -> Result<Connection> {
    let h = IdHandle::new(ctx)?;
    let t = timeout.as_millis().min(u32::MAX as u128) as u32;
    h.call("resolve_addr", |c, now, id| {
        c.resolve_addr(now, id, None, to, t)
    })?;
    h.expect(EventKind::AddrResolved, timeout)?;
    h.call("resolve_route", |c, now, id| c.resolve_route(now, id, t))?;
    h.expect(EventKind::RouteResolved, timeout)?;
    let rd = qp.rd_atomic();
    let qp = qp.into_inner();
    let p = param(&qp, rd, private_data);
    h.call("connect", |c, now, id| c.connect(now, id, &p))?;
    let ev = h.expect(EventKind::ConnectResponse, timeout)?;
    let rd = (
        rd.0.min(ev.param.responder_resources.max(1)),
        rd.1.min(ev.param.initiator_depth.max(1)),
    );
    if let Err(e) = h.ready(&qp, rd) {
        let _ = h.call("reject", |c, now, id| c.reject(now, id, &[]));
        return Err(e);
    }
    h.call("establish", |c, now, id| c.establish(now, id))?;
    Ok(Connection {
        h,
        qp,
        peer: Some(to),
        private_data: ev.private_data,
    })
}

/// An established RC connection: its QP, ready to post. Dropped without [`disconnect`], the
/// peer still gets a DREQ (as when a program exits with the connection open).
///
/// [`disconnect`]: Connection::disconnect
pub struct Connection {
    h: IdHandle,
    qp: QueuePair,
    peer: Option<SocketAddr>,
    private_data: Vec<u8>,
}

impl Connection {
    /// The connected QP.
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }
    /// The peer's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
    /// What the peer sent with its accept (client side; rdma_cm's 196 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// Waits up to `timeout` for the peer to disconnect (a DREQ), then answers it.
    pub fn wait_disconnect(self, timeout: Duration) -> Result<()> {
        self.h.expect(EventKind::Disconnected, timeout)?;
        self.finish()
    }

    /// Disconnects: the QP to ERR (its posted work flushes), DREQ, and waits up to `timeout`
    /// for the peer's DREP (or its own DREQ).
    pub fn disconnect(self, timeout: Duration) -> Result<()> {
        self.qp.modify(
            &roce_emu::QpAttr {
                qp_state: QpState::Err,
                ..Default::default()
            },
            QpAttrMask::STATE,
        )?;
        self.h
            .call("disconnect", |c, now, id| c.disconnect(now, id))?;
        self.h.expect(EventKind::Disconnected, timeout)?;
        Ok(())
    }

    fn finish(self) -> Result<()> {
        let _ = self.qp.modify(
            &roce_emu::QpAttr {
                qp_state: QpState::Err,
                ..Default::default()
            },
            QpAttrMask::STATE,
        );
        self.h
            .call("disconnect", |c, now, id| c.disconnect(now, id))
    }
}
