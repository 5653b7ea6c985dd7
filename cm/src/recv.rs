//! Received CM MADs: kernel cm.c's `cm_*_handler` (connection lookup, duplicates, stale
//! connections, state changes) followed by cma.c's `cma_ib_req_handler` / `cma_ib_handler` /
//! `cma_sidr_rep_handler` (listener match on the `cma_hdr`, the rdma_cm event).
use crate::ib::{self, issue_drep, issue_rej, CmState, Conn};
use crate::rdma::{sidr_rep_msg, RdmaId, RdmaState};
use crate::timers::{send, send_conn, send_retx};
use crate::{errno, Endpoint, Event, EventKind, Id, Instant, MadIn, PortSpace, QpKind, UdParam};
use roce_wire::cm::{self, drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req};
use roce_wire::cm::{Message, MsgResponse, RejReason, SidrStatus};
use roce_wire::{cma, mad, Error};
use std::net::SocketAddr;

impl Endpoint {
    /// Takes one MAD received on QP1. Anything that is not a well-formed 256-byte CM MAD
    /// (class 0x07, class version 2, method Send) is counted and dropped; so are LAP/APR and
    /// messages that match no connection (a DREQ is still answered, as the kernel does).
    pub fn handle_mad(&mut self, now: Instant, m: &MadIn) {
        self.mirror.dirty = true;
        self.counters.mads_received += 1;
        if m.bytes.len() != mad::MAD_LEN {
            self.counters.malformed += 1;
            return;
        }
        let parsed = match cm::Mad::parse(m.bytes) {
            Ok(p) => p,
            Err(Error::NotCm) => return self.counters.not_cm += 1,
            Err(Error::UnknownAttribute(_)) => return self.counters.unknown_attribute += 1,
            Err(_) => return self.counters.malformed += 1,
        };
        if parsed.header.response || parsed.header.method != mad::method::SEND {
            self.counters.not_cm += 1;
            return;
        }
        let tid = parsed.header.tid;
        match parsed.message {
            Message::Req(r) => self.on_req(now, m, tid, &r, parsed.header.attr_mod),
            Message::Mra(r) => self.on_mra(now, &r),
            Message::Rej(r) => self.on_rej(now, &r),
            Message::Rep(r) => self.on_rep(now, m, tid, &r, parsed.header.attr_mod),
            Message::Rtu(r) => self.on_rtu(&r),
            Message::Dreq(r) => self.on_dreq(m, tid, &r),
            Message::Drep(r) => self.on_drep(now, &r),
            Message::SidrReq(r) => self.on_sidr_req(m, tid, &r),
            Message::SidrRep(r) => self.on_sidr_rep(&r),
        }
    }

    /// `cm_acquire_id`: the connection with this local comm ID whose remote comm ID is
    /// `remote` (0 before the peer's is known).
    fn acquire(&self, local: u32, remote: u32) -> Option<Id> {
        let id = *self.comm.get(&local)?;
        let c = self.ids.get(&id)?.conn.as_ref()?;
        (c.remote_id == remote).then_some(id)
    }

    /// A connection in the remote tables matching `f` (`cm_insert_remote_id`/`_qpn` lookups).
    fn find_remote(&self, except: Option<Id>, f: impl Fn(&Conn) -> bool) -> Option<Id> {
        self.ids.iter().find_map(|(&id, r)| {
            let c = r.conn.as_ref()?;
            (Some(id) != except && c.remote_inserted && f(c)).then_some(id)
        })
    }

    fn conn_mut(
        &mut self,
        id: Id,
    ) -> Option<(&mut RdmaId, &mut std::collections::VecDeque<crate::MadOut>)> {
        let Endpoint { ids, tx, .. } = self;
        ids.get_mut(&id)
            .filter(|r| r.conn.is_some())
            .map(|r| (r, tx))
    }

    /// `ib_send_cm_dreq` on an established connection a new REQ/REP showed to be stale.
    fn dreq_stale(&mut self, now: Instant, id: Id) {
        let Some(c) = self.ids.get(&id).and_then(|r| r.conn.as_ref()) else {
            return;
        };
        if c.state != CmState::Established {
            return;
        }
        let tid = self.form_tid(c.local_id);
        if let Some((r, tx)) = self.conn_mut(id) {
            let Some(c) = r.conn.as_mut() else { return };
            let (timeout, retries, msg) = (c.timeout_ms, c.max_cm_retries, c.dreq());
            c.state = CmState::DreqSent;
            send_retx(tx, c, now, tid, msg, (CmState::DreqSent, timeout, retries));
        }
    }

    /// The listeners of a service ID, in bind order; `None` when it is no rdma_cm service ID.
    fn listeners(&self, sid: u64) -> Vec<Id> {
        let Some(s) = cma::ServiceId::from_u64(sid) else {
            return Vec::new();
        };
        let ps = PortSpace::from_wire(s.port_space);
        self.ports
            .owners(ps, s.port)
            .filter(|i| {
                self.ids
                    .get(i)
                    .is_some_and(|r| r.state == RdmaState::Listen)
            })
            .collect()
    }

    /// `cma_ib_id_from_event` + `cma_match_private_data` + `cma_ib_check_req_qp_type`: the
    /// first listener whose QP type fits and whose bound address the `cma_hdr` names (or
    /// which is bound to a wildcard), with the header; `None` → REJ 28 / SIDR_REP 2.
    fn match_listener(
        &self,
        ls: &[Id],
        kind: QpKind,
        pd: &[u8],
        m: &MadIn,
    ) -> Option<(Id, cma::Repr)> {
        let h = cma::Repr::parse_private_data(pd).ok()?;
        if h.cma_version != cma::CMA_VERSION
            || (!self.cfg.addrs.contains(&h.dst_addr) && h.dst_addr != m.dst)
        {
            return None;
        }
        ls.iter().copied().find_map(|l| {
            let r = self.ids.get(&l)?;
            let a = r.local?.ip();
            let ok = r.kind == kind && (a.is_unspecified() || (a == h.dst_addr));
            ok.then_some((l, h))
        })
    }

    /// Unpolled CONNECT_REQUEST events of listener `l` (ucma's backlog).
    fn backlog_full(&self, l: Id) -> bool {
        let n = self
            .events
            .iter()
            .filter(|e| e.kind == EventKind::ConnectRequest && e.listen_id == Some(l))
            .count();
        !matches!(self.ids.get(&l), Some(r) if n < r.backlog)
    }

    /// A new child id of listener `l` for a request from `h.src_addr`.
    fn new_child(&mut self, l: Id, h: &cma::Repr, sid: u64) -> Id {
        let (ps, kind) = self
            .ids
            .get(&l)
            .map_or((PortSpace::Tcp, QpKind::Rc), |r| (r.ps, r.kind));
        let child = self.create_id(ps, kind);
        if let Some(r) = self.ids.get_mut(&child) {
            r.state = RdmaState::Connect;
            r.local = Some(SocketAddr::new(h.dst_addr, sid as u16));
            r.peer = Some(SocketAddr::new(h.src_addr, h.port));
        }
        child
    }

    /// `cm_req_handler` + `cm_match_req` + `cma_ib_req_handler`.
    fn on_req(&mut self, now: Instant, m: &MadIn, tid: u64, r: &req::Repr, attr_mod: u32) {
        let guid = r.local_ca_guid;
        // Duplicate REQ (`cm_dup_req_handler`).
        if let Some(id) = self.find_remote(None, |c| {
            c.remote_id == r.local_comm_id && c.remote_ca_guid == guid
        }) {
            self.counters.duplicates += 1;
            let Some(c) = self.ids.get(&id).and_then(|x| x.conn.as_ref()) else {
                return;
            };
            let msg = match c.state {
                CmState::MraReqSent => c.mra(MsgResponse::Req),
                CmState::Timewait => c.rej(CmState::Timewait, RejReason::StaleConn, &[], &[]),
                _ => return,
            };
            let ctid = c.tid;
            return send(&mut self.tx, m.dst, m.src, ctid, msg);
        }
        let reply = |reason| issue_rej(r.local_comm_id, r.vendor_id, reason, MsgResponse::Req);
        // Stale connection: a live connection with the same remote QPN and CA GUID.
        if let Some(old) = self.find_remote(None, |c| {
            c.remote_qpn == r.local_qpn && c.remote_ca_guid == guid
        }) {
            self.counters.stale += 1;
            send(&mut self.tx, m.dst, m.src, tid, reply(RejReason::StaleConn));
            return self.dreq_stale(now, old);
        }
        let ls = self.listeners(r.service_id);
        if ls.is_empty() {
            self.counters.no_listener += 1;
            return send(
                &mut self.tx,
                m.dst,
                m.src,
                tid,
                reply(RejReason::InvalidServiceId),
            );
        }
        let rc =
            r.transport_service_type == req::service_type::RC && r.extended_transport_type == 0;
        let kind = if rc { QpKind::Rc } else { QpKind::Ud };
        let Some((l, h)) = self.match_listener(&ls, kind, &r.private_data, m) else {
            // cma refuses it: the new cm_id is destroyed in REQ_RCVD → REJ 28, Local Comm ID 0.
            self.counters.bad_cma_hdr += 1;
            let mut rej = reply(RejReason::ConsumerDefined);
            if let Message::Rej(x) = &mut rej {
                x.local_comm_id = 0;
            }
            return send(&mut self.tx, m.dst, m.src, tid, rej);
        };
        if self.backlog_full(l) {
            // ucma: -ENOMEM → `cm_destroy_id` resets to idle without a REJ; the peer retries.
            self.counters.backlog_drops += 1;
            return;
        }
        let child = self.new_child(l, &h, r.service_id);
        let local_id = self.alloc_comm_id(child);
        let p = &r.primary_path;
        let peer = match cm::gid_addr(&p.local_port_gid) {
            a if a.is_unspecified() => m.src,
            a => a,
        };
        let av = ib::Av {
            local: m.dst,
            peer,
            flow_label: p.flow_label,
            traffic_class: p.traffic_class,
            hop_limit: ib::DEFAULT_HOP_LIMIT,
            // `cm_format_paths_from_req` (life = ACK timeout − 1) + `cm_init_av_by_path` (+1)
            timeout: p.local_ack_timeout.max(1),
        };
        let mut c = Conn::new(local_id, av);
        c.remote_id = r.local_comm_id;
        c.remote_ca_guid = guid;
        c.remote_qpn = r.local_qpn;
        c.remote_inserted = true;
        c.service_id = r.service_id;
        c.tid = tid;
        c.timeout_ms = ib::convert_to_ms(r.local_cm_response_timeout);
        c.max_cm_retries = r.max_cm_retries;
        c.initiator_depth = r.responder_resources;
        c.responder_resources = r.initiator_depth;
        c.path_mtu = r.path_mtu;
        c.sq_psn = r.starting_psn.value();
        c.retry_count = r.retry_count;
        c.rnr_retry_count = r.rnr_retry_count;
        // CONNECT_REQUEST delivered, then `ib_send_cm_mra(CMA_CM_MRA_SETTING)`: the delayed
        // MRA, nothing on the wire.
        c.state = CmState::MraReqSent;
        if let Some(x) = self.ids.get_mut(&child) {
            x.conn = Some(c);
        }
        self.events
            .push_back(Event::connect_request(child, l, r, attr_mod));
    }

    /// `cm_sidr_req_handler` + `cma_ib_req_handler`.
    fn on_sidr_req(&mut self, m: &MadIn, tid: u64, r: &sidr_req::Repr) {
        // `cm_insert_remote_sidr`: keyed by (Request ID, source LID), and the LID is 0 on RoCE.
        let dup = self
            .ids
            .values()
            .filter_map(|x| x.conn.as_ref())
            .any(|c| c.state == CmState::SidrReqRcvd && c.remote_id == r.request_id);
        if dup {
            self.counters.duplicates += 1;
            return;
        }
        let mut tmp = Conn::new(
            0,
            ib::Av {
                local: m.dst,
                peer: m.src,
                flow_label: m.flow_label,
                traffic_class: m.traffic_class,
                hop_limit: ib::DEFAULT_HOP_LIMIT,
                timeout: ib::CMA_IBOE_PACKET_LIFETIME + 1,
            },
        );
        tmp.remote_id = r.request_id;
        tmp.service_id = r.service_id;
        tmp.tid = tid;
        let refuse = |this: &mut Endpoint, status| {
            send_conn(&mut this.tx, &tmp, sidr_rep_msg(&tmp, status, 0, 0, &[]));
        };
        let ls = self.listeners(r.service_id);
        if ls.is_empty() {
            self.counters.no_listener += 1;
            return refuse(self, SidrStatus::Unsupported);
        }
        let Some((l, h)) = self.match_listener(&ls, QpKind::Ud, &r.private_data, m) else {
            self.counters.bad_cma_hdr += 1;
            return refuse(self, SidrStatus::Reject);
        };
        if self.backlog_full(l) {
            // `cm_sidr_req_handler` destroys the id in SIDR_REQ_RCVD: status 2.
            self.counters.backlog_drops += 1;
            return refuse(self, SidrStatus::Reject);
        }
        let child = self.new_child(l, &h, r.service_id);
        tmp.local_id = self.alloc_comm_id(child);
        tmp.state = CmState::SidrReqRcvd;
        let ud = UdParam {
            qp_num: 0,
            qkey: 0,
            remote: h.src_addr,
            local: h.dst_addr,
            flow_label: m.flow_label,
            hop_limit: ib::DEFAULT_HOP_LIMIT,
            traffic_class: m.traffic_class,
        };
        if let Some(x) = self.ids.get_mut(&child) {
            x.conn = Some(tmp);
        }
        let pd = &r.private_data[cma::HEADER_LEN..];
        let mut ev = Event::ud(child, EventKind::ConnectRequest, 0, pd, Some(ud));
        ev.listen_id = Some(l);
        self.events.push_back(ev);
    }

    /// `cm_rep_handler` / `cm_dup_rep_handler`, then `cma_ib_handler(IB_CM_REP_RECEIVED)`.
    fn on_rep(&mut self, now: Instant, m: &MadIn, tid: u64, r: &rep::Repr, attr_mod: u32) {
        let Some(id) = self.acquire(r.remote_comm_id, 0) else {
            let Some(id) = self.acquire(r.remote_comm_id, r.local_comm_id) else {
                self.counters.unknown_comm_id += 1;
                return;
            };
            self.counters.duplicates += 1;
            let Some(c) = self.ids.get(&id).and_then(|x| x.conn.as_ref()) else {
                return;
            };
            let msg = match c.state {
                CmState::Established => c.rtu(),
                CmState::MraRepSent => c.mra(MsgResponse::Rep),
                _ => return,
            };
            let ctid = c.tid;
            return send(&mut self.tx, m.dst, m.src, ctid, msg);
        };
        let state = self
            .ids
            .get(&id)
            .and_then(|x| x.conn.as_ref())
            .map(|c| c.state);
        if !matches!(state, Some(CmState::ReqSent | CmState::MraReqRcvd)) {
            self.counters.unexpected += 1;
            return;
        }
        let guid = r.local_ca_guid;
        if self
            .find_remote(Some(id), |c| {
                c.remote_id == r.local_comm_id && c.remote_ca_guid == guid
            })
            .is_some()
        {
            self.counters.duplicates += 1;
            return;
        }
        if let Some(old) = self.find_remote(Some(id), |c| {
            c.remote_qpn == r.local_qpn && c.remote_ca_guid == guid
        }) {
            self.counters.stale += 1;
            let rej = issue_rej(
                r.local_comm_id,
                r.remote_comm_id,
                RejReason::StaleConn,
                MsgResponse::Rep,
            );
            send(&mut self.tx, m.dst, m.src, tid, rej);
            return self.dreq_stale(now, old);
        }
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        c.remote_id = r.local_comm_id;
        c.remote_ca_guid = guid;
        c.remote_qpn = r.local_qpn;
        c.remote_inserted = true;
        c.initiator_depth = r.responder_resources;
        c.responder_resources = r.initiator_depth;
        c.sq_psn = r.starting_psn.value();
        c.rnr_retry_count = r.rnr_retry_count;
        c.av.timeout = ib::ack_timeout(r.target_ack_delay, c.av.timeout.saturating_sub(1));
        c.retx = None;
        c.state = CmState::RepRcvd;
        if x.state != RdmaState::Connect {
            return;
        }
        if x.kind == QpKind::Rc {
            // `ib_send_cm_mra(CMA_CM_MRA_SETTING)`: delayed, nothing sent.
            c.state = CmState::MraRepSent;
            c.service_timeout = ib::CMA_MRA_SERVICE_TIMEOUT;
        }
        self.events
            .push_back(Event::connect_response(id, r, attr_mod));
    }

    /// `cm_rtu_handler`.
    fn on_rtu(&mut self, r: &rtu::Repr) {
        let Some(id) = self.acquire(r.remote_comm_id, r.local_comm_id) else {
            self.counters.unknown_comm_id += 1;
            return;
        };
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        if !matches!(c.state, CmState::RepSent | CmState::MraRepRcvd) {
            self.counters.duplicates += 1;
            return;
        }
        c.state = CmState::Established;
        c.retx = None;
        if x.state == RdmaState::Connect {
            self.events
                .push_back(Event::simple(id, EventKind::Established, 0));
        }
    }

    /// `cm_dreq_handler`.
    fn on_dreq(&mut self, m: &MadIn, tid: u64, d: &dreq::Repr) {
        let Some(id) = self.acquire(d.remote_comm_id, d.local_comm_id) else {
            self.counters.unknown_comm_id += 1;
            return send(&mut self.tx, m.dst, m.src, tid, issue_drep(d));
        };
        let Some((x, tx)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        if c.local_qpn != d.remote_qpn_eecn {
            self.counters.unexpected += 1;
            return;
        }
        match c.state {
            CmState::RepSent | CmState::DreqSent | CmState::Established | CmState::MraRepRcvd => {
                c.retx = None;
            }
            CmState::Timewait => {
                let (t, msg) = (c.tid, c.drep());
                send(tx, m.dst, m.src, t, msg);
                self.counters.duplicates += 1;
                return;
            }
            CmState::DreqRcvd => return self.counters.duplicates += 1,
            _ => return self.counters.unexpected += 1,
        }
        c.state = CmState::DreqRcvd;
        c.tid = tid;
        if x.state == RdmaState::Connect {
            x.state = RdmaState::Disconnect;
            self.events
                .push_back(Event::simple(id, EventKind::Disconnected, 0));
        }
    }

    /// `cm_drep_handler`.
    fn on_drep(&mut self, now: Instant, d: &drep::Repr) {
        let Some(id) = self.acquire(d.remote_comm_id, d.local_comm_id) else {
            self.counters.unknown_comm_id += 1;
            return;
        };
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        if !matches!(c.state, CmState::DreqSent | CmState::DreqRcvd) {
            self.counters.unexpected += 1;
            return;
        }
        c.enter_timewait(now);
        if x.state == RdmaState::Connect {
            x.state = RdmaState::Disconnect;
            self.events
                .push_back(Event::simple(id, EventKind::Disconnected, 0));
        }
    }

    /// `cm_acquire_rejected_id` + `cm_rej_handler`, then REJECTED with status = reason and the
    /// 148 private-data bytes.
    fn on_rej(&mut self, now: Instant, r: &rej::Repr) {
        let reason = r.reason;
        let id = if reason == RejReason::Timeout {
            let mut g = [0u8; 8];
            g.copy_from_slice(&r.ari[..8]);
            let guid = u64::from_be_bytes(g);
            self.find_remote(None, |c| {
                c.remote_ca_guid == guid && c.remote_id == r.local_comm_id
            })
        } else if r.message_rejected == MsgResponse::Req {
            self.acquire(r.remote_comm_id, 0)
        } else {
            self.acquire(r.remote_comm_id, r.local_comm_id)
        };
        let Some(id) = id else {
            self.counters.unknown_comm_id += 1;
            return;
        };
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        match c.state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::RepSent
            | CmState::MraRepRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent => {
                if reason == RejReason::StaleConn {
                    c.enter_timewait(now);
                } else {
                    c.reset_to_idle();
                }
            }
            CmState::DreqSent | CmState::RepRcvd | CmState::MraRepSent | CmState::Established => {
                c.enter_timewait(now)
            }
            _ => return self.counters.unexpected += 1,
        }
        if x.state == RdmaState::Connect {
            let mut ev = Event::simple(id, EventKind::Rejected, reason.code() as i32);
            ev.private_data = r.private_data.to_vec();
            self.events.push_back(ev);
        }
    }

    /// `cm_mra_handler`: only pushes the outstanding REQ/REP timer out to
    /// IBA_time(service timeout) + IBA_time(av.timeout); rdma_cm ignores the event.
    fn on_mra(&mut self, now: Instant, r: &mra::Repr) {
        let id = match r.message_mraed {
            MsgResponse::Req => self.acquire(r.remote_comm_id, 0),
            MsgResponse::Rep | MsgResponse::Other => {
                self.acquire(r.remote_comm_id, r.local_comm_id)
            }
            MsgResponse::Reserved => None,
        };
        let Some(id) = id else {
            self.counters.unknown_comm_id += 1;
            return;
        };
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        let next = match (c.state, r.message_mraed) {
            (CmState::ReqSent, MsgResponse::Req) => CmState::MraReqRcvd,
            (CmState::RepSent, MsgResponse::Rep) => CmState::MraRepRcvd,
            (CmState::MraReqRcvd | CmState::MraRepRcvd, _) => return self.counters.duplicates += 1,
            _ => return self.counters.unexpected += 1,
        };
        let timeout = ib::convert_to_ms(r.service_timeout) + ib::convert_to_ms(c.av.timeout);
        let Some(t) = c.retx.as_mut() else { return };
        t.timeout_ms = timeout;
        t.deadline = now.add_nanos(timeout * 1_000_000);
        t.sent_in = next;
        c.state = next;
    }

    /// `cm_sidr_rep_handler` + `cma_sidr_rep_handler`: status ≠ 0 → UNREACHABLE with the
    /// status; a zero or foreign Q_Key → ADDR_ERROR -EINVAL; else ESTABLISHED with the UD
    /// parameters.
    fn on_sidr_rep(&mut self, r: &sidr_rep::Repr) {
        let Some(id) = self.acquire(r.request_id, 0) else {
            self.counters.unknown_comm_id += 1;
            return;
        };
        let Some((x, _)) = self.conn_mut(id) else {
            return;
        };
        let Some(c) = x.conn.as_mut() else { return };
        if c.state != CmState::SidrReqSent {
            self.counters.duplicates += 1;
            return;
        }
        c.state = CmState::Idle;
        c.retx = None;
        if x.state != RdmaState::Connect {
            return;
        }
        let pd = &r.private_data[..];
        let ev = if r.status != SidrStatus::Success {
            Event::ud(id, EventKind::Unreachable, r.status.code() as i32, pd, None)
        } else if r.qkey == 0 || (x.ps != PortSpace::Ipoib && r.qkey != cma::RDMA_UDP_QKEY) {
            Event::ud(id, EventKind::AddrError, -errno::EINVAL, pd, None)
        } else {
            let ud = UdParam {
                qp_num: r.qpn,
                qkey: r.qkey,
                remote: c.av.peer,
                local: c.av.local,
                flow_label: c.av.flow_label,
                hop_limit: c.av.hop_limit,
                traffic_class: c.av.traffic_class,
            };
            Event::ud(id, EventKind::Established, 0, pd, Some(ud))
        };
        self.events.push_back(ev);
    }
}
