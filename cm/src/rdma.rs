//! rdma_cm ids and the calls on them (kernel cma.c: `rdma_bind_addr`, `rdma_resolve_addr`,
//! `rdma_resolve_route`, `rdma_listen`, `rdma_connect`, `rdma_accept`, `rdma_reject`,
//! `rdma_disconnect`, `rdma_notify`, `rdma_destroy_id`, and the ib_cm sends they make).
use crate::ib::{self, CmState, Conn};
use crate::timers::{send_conn, send_retx};
use crate::{errno, ConnParam, Ece, Endpoint, Event, EventKind, Id, Instant, PortSpace, QpKind};
use roce_wire::cm::{rej, rep, req, sidr_rep, sidr_req, Message, RejReason, SidrStatus};
use roce_wire::{cma, Psn};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `enum rdma_cm_state` (the query states collapse: resolution completes at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RdmaState {
    Idle,
    AddrBound,
    AddrResolved,
    RouteResolved,
    Connect,
    Disconnect,
    Listen,
}

/// The RoCE route of an active id (`cma_resolve_iboe_route`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Route {
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// An rdma_cm id (`struct rdma_id_private`) with its ib_cm connection, if any.
#[derive(Clone, Debug)]
pub(crate) struct RdmaId {
    pub ps: PortSpace,
    pub kind: QpKind,
    pub state: RdmaState,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    /// The port this id holds in the port table (not children of a listener).
    pub bound_port: Option<u16>,
    /// `seq_num`: the random starting PSN this side advertises = its own RQ PSN.
    pub seq_num: u32,
    pub backlog: usize,
    pub route: Option<Route>,
    pub conn: Option<Conn>,
    /// `rdma_set_service_type` (`tos_set`/`tos`): the traffic class of routes resolved after it.
    pub tos: Option<u8>,
    /// `rdma_set_ack_timeout` (`timeout_set`/`timeout`): the Local ACK Timeout for RTS.
    pub ack_timeout: Option<u8>,
    /// `id_priv->ece`: what the next REQ, REP or SIDR_REP offers (`rdma_connect_ece`,
    /// `rdma_accept_ece`).
    pub ece: Ece,
}

/// ucma's `max_backlog` default.
const MAX_BACKLOG: usize = 1024;

fn wildcard_of(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    }
}

fn check_len(pd: &[u8], max: usize) -> Result<(), i32> {
    if pd.len() > max {
        Err(errno::EINVAL)
    } else {
        Ok(())
    }
}

impl Endpoint {
    pub(crate) fn id_mut(&mut self, id: Id) -> Result<&mut RdmaId, i32> {
        self.ids.get_mut(&id).ok_or(errno::EINVAL)
    }

    /// A new local comm ID: a cyclic index XOR a random operand (`cm_alloc_id_priv`), never 0
    /// (a REJ's Local Comm ID 0 means "no id").
    pub(crate) fn alloc_comm_id(&mut self, owner: Id) -> u32 {
        loop {
            let mut v = self.comm_next ^ self.comm_xor;
            if let Some(slot) = self.comm_slot {
                // the top byte names the process of a shared device (`set_comm_id_slot`)
                v = (slot as u32 + 1) << 24 | (v & 0xFF_FFFF);
            }
            self.comm_next = self.comm_next.wrapping_add(1);
            if v != 0 && !self.comm.contains_key(&v) {
                self.comm.insert(v, owner);
                return v;
            }
        }
    }

    /// `cm_form_tid`: the agent number, then the local comm ID as the kernel's raw `__be32`
    /// read on a little-endian host (byte-reversed).
    pub(crate) fn form_tid(&self, local_id: u32) -> u64 {
        (self.hi_tid as u64) << 32 | local_id.swap_bytes() as u64
    }

    /// On a device shared by several processes (each with its own endpoint), makes every local
    /// comm ID carry `slot + 1` in its top byte, so that whoever receives the device's MADs can
    /// hand a reply (which echoes the ID) to the process that owns it.
    pub fn set_comm_id_slot(&mut self, slot: u8) {
        self.comm_slot = Some(slot.min(0xFE));
    }

    /// The service IDs this endpoint listens on (REQs for them are its own).
    pub fn listening_service_ids(&self) -> Vec<u64> {
        self.ids
            .values()
            .filter(|r| r.state == RdmaState::Listen)
            .filter_map(|r| {
                let port = r.bound_port.or(r.local.map(|l| l.port()))?;
                Some(cma::service_id(r.ps.wire(), port))
            })
            .collect()
    }

    /// `rdma_create_id`.
    pub fn create_id(&mut self, ps: PortSpace, kind: QpKind) -> Id {
        let id = Id(self.next_id);
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let seq_num = self.rng.psn();
        self.ids.insert(
            id,
            RdmaId {
                ps,
                kind,
                state: RdmaState::Idle,
                local: None,
                peer: None,
                bound_port: None,
                seq_num,
                backlog: 0,
                route: None,
                conn: None,
                tos: None,
                ack_timeout: None,
                ece: Ece::default(),
            },
        );
        id
    }

    /// `rdma_bind_addr`: the address must be a configured one or a wildcard (EADDRNOTAVAIL);
    /// port 0 takes an ephemeral port from 32768..=60999; the id must be unbound (EINVAL).
    pub fn bind(&mut self, id: Id, addr: SocketAddr) -> Result<(), i32> {
        let rid = self.ids.get(&id).ok_or(errno::EINVAL)?;
        if rid.state != RdmaState::Idle {
            return Err(errno::EINVAL);
        }
        let ip = addr.ip();
        if !ip.is_unspecified() && !self.cfg.addrs.contains(&ip) {
            return Err(errno::EADDRNOTAVAIL);
        }
        let ps = rid.ps;
        let port = if addr.port() == 0 {
            let rover = self.rng.ephemeral_port();
            self.ports.reserve_any(ps, id, ip, rover)?
        } else {
            self.ports.reserve(ps, addr.port(), id, ip)?;
            addr.port()
        };
        let rid = self.id_mut(id)?;
        let mut local = addr;
        local.set_port(port);
        rid.local = Some(local);
        rid.bound_port = Some(port);
        rid.state = RdmaState::AddrBound;
        Ok(())
    }

    /// `rdma_resolve_addr`: binds an unbound id (to `src`, or the wildcard of `dst`'s family),
    /// then picks the source address — `dst` itself when it is ours, else the first configured
    /// address of its family — and queues ADDR_RESOLVED, or ADDR_ERROR (-ENETUNREACH) when
    /// there is none. Resolution is immediate, so `timeout_ms` is unused.
    pub fn resolve_addr(
        &mut self,
        _now: Instant,
        id: Id,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        _timeout_ms: u32,
    ) -> Result<(), i32> {
        if self.ids.get(&id).ok_or(errno::EINVAL)?.state == RdmaState::Idle {
            let src = src.unwrap_or_else(|| SocketAddr::new(wildcard_of(dst.ip()), 0));
            self.bind(id, src)?;
        }
        let rid = self.ids.get(&id).ok_or(errno::EINVAL)?;
        let Some(local) = rid.local else {
            return Err(errno::EINVAL);
        };
        if rid.state != RdmaState::AddrBound || local.is_ipv4() != dst.is_ipv4() {
            return Err(errno::EINVAL);
        }
        let same_family = |a: &&IpAddr| a.is_ipv4() == dst.is_ipv4();
        let src_ip = if !local.ip().is_unspecified() {
            Some(local.ip())
        } else if self.cfg.addrs.contains(&dst.ip()) {
            Some(dst.ip())
        } else {
            self.cfg.addrs.iter().find(same_family).copied()
        };
        let Some(src_ip) = src_ip else {
            self.events
                .push_back(Event::simple(id, EventKind::AddrError, -errno::ENETUNREACH));
            return Ok(());
        };
        let mut dst = dst;
        if dst.ip().is_unspecified() {
            // `cma_resolve_loopback`: the any-address means this host.
            dst.set_ip(src_ip);
        }
        let (ps, port) = (rid.ps, rid.bound_port);
        if let Some(port) = port {
            self.ports.update_addr(ps, port, id, src_ip);
        }
        let rid = self.id_mut(id)?;
        let mut l = local;
        l.set_ip(src_ip);
        rid.local = Some(l);
        rid.peer = Some(dst);
        rid.state = RdmaState::AddrResolved;
        self.events
            .push_back(Event::simple(id, EventKind::AddrResolved, 0));
        Ok(())
    }

    /// `rdma_resolve_route` (`cma_resolve_iboe_route`): hop limit 64, traffic class 0, and the
    /// flow label of the rdma_cm ports (or an IPv6 source's own flow label); queues
    /// ROUTE_RESOLVED.
    pub fn resolve_route(&mut self, _now: Instant, id: Id, _timeout_ms: u32) -> Result<(), i32> {
        let rid = self.id_mut(id)?;
        let (Some(local), Some(peer)) = (rid.local, rid.peer) else {
            return Err(errno::EINVAL);
        };
        if rid.state != RdmaState::AddrResolved {
            return Err(errno::EINVAL);
        }
        // `cma_get_roce_udp_flow_label`
        let own = match local {
            SocketAddr::V6(a) => a.flowinfo() & 0xF_FFFF,
            SocketAddr::V4(_) => 0,
        };
        let flow_label = if own != 0 {
            own
        } else {
            cma::roce_udp_flow_label(local.port(), peer.port())
        };
        rid.route = Some(Route {
            flow_label,
            hop_limit: ib::DEFAULT_HOP_LIMIT,
            // `cma_resolve_iboe_route`: the id's TOS if set, else the port's default (0)
            traffic_class: rid.tos.unwrap_or(0),
        });
        rid.state = RdmaState::RouteResolved;
        self.events
            .push_back(Event::simple(id, EventKind::RouteResolved, 0));
        Ok(())
    }

    /// `rdma_set_service_type` (RDMA_OPTION_ID_TOS): the traffic class (IP TOS) of the route
    /// this id resolves afterwards, carried in its REQ's path and used by both sides' QPs.
    pub fn set_tos(&mut self, id: Id, tos: u8) -> Result<(), i32> {
        self.id_mut(id)?.tos = Some(tos);
        Ok(())
    }

    /// `rdma_set_ack_timeout` (RDMA_OPTION_ID_ACK_TIMEOUT): the Local ACK Timeout
    /// (4.096 µs × 2^t) `init_qp_attr` gives the QP at RTS instead of the one from the path;
    /// RC ids only (EINVAL), as the kernel.
    pub fn set_ack_timeout(&mut self, id: Id, timeout: u8) -> Result<(), i32> {
        let rid = self.id_mut(id)?;
        if rid.kind != QpKind::Rc {
            return Err(errno::EINVAL);
        }
        rid.ack_timeout = Some(timeout);
        Ok(())
    }

    /// `rdma_listen`: binds an unbound id to 0.0.0.0 and an ephemeral port first; a backlog
    /// ≤ 0 or over 1024 means 1024 (ucma). Requests beyond the backlog of unpolled
    /// CONNECT_REQUEST events are dropped (the peer retries).
    pub fn listen(&mut self, id: Id, backlog: i32) -> Result<(), i32> {
        if self.ids.get(&id).ok_or(errno::EINVAL)?.state == RdmaState::Idle {
            self.bind(id, SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0))?;
        }
        let rid = self.id_mut(id)?;
        if rid.state != RdmaState::AddrBound {
            return Err(errno::EINVAL);
        }
        rid.backlog = match usize::try_from(backlog) {
            Ok(b) if b > 0 && b < MAX_BACKLOG => b,
            _ => MAX_BACKLOG,
        };
        rid.state = RdmaState::Listen;
        Ok(())
    }

    /// `rdma_connect_ece` (what ucma calls): [`Endpoint::connect`] with a REQ that offers
    /// `ece` (Vendor ID and the header's AttributeModifier; a SIDR_REQ carries none).
    pub fn connect_ece(
        &mut self,
        now: Instant,
        id: Id,
        p: &ConnParam,
        ece: Ece,
    ) -> Result<(), i32> {
        self.id_mut(id)?.ece = ece;
        self.connect(now, id, p)
    }

    /// `rdma_connect`: RC ids send a REQ (`cma_connect_ib`), UD ids a SIDR_REQ
    /// (`cma_resolve_ib_udp`); the route must be resolved (EINVAL). The REQ offers the ECE
    /// of the last [`Endpoint::connect_ece`] (none by default).
    pub fn connect(&mut self, now: Instant, id: Id, p: &ConnParam) -> Result<(), i32> {
        self.mirror.dirty = true;
        let rid = self.ids.get(&id).ok_or(errno::EINVAL)?;
        let (Some(local), Some(peer), Some(route)) = (rid.local, rid.peer, rid.route) else {
            return Err(errno::EINVAL);
        };
        if rid.state != RdmaState::RouteResolved {
            return Err(errno::EINVAL);
        }
        let (kind, ps, seq_num, ece) = (rid.kind, rid.ps, rid.seq_num, rid.ece);
        let user_max = match kind {
            QpKind::Rc => cma::REQ_USER_DATA_LEN,
            QpKind::Ud => cma::SIDR_REQ_USER_DATA_LEN,
        };
        check_len(&p.private_data, user_max)?;
        let local_id = self.alloc_comm_id(id);
        let av = ib::Av {
            local: local.ip(),
            peer: peer.ip(),
            flow_label: route.flow_label,
            traffic_class: route.traffic_class,
            hop_limit: route.hop_limit,
            // `cm_init_av_by_path`: packet life time + 1
            timeout: ib::CMA_IBOE_PACKET_LIFETIME + 1,
        };
        let mut conn = Conn::new(local_id, av);
        conn.tid = self.form_tid(local_id);
        conn.service_id = cma::service_id(ps.wire(), peer.port());
        conn.max_cm_retries = self.cfg.max_cm_retries;
        conn.local_qpn = p.qp_num & 0xFF_FFFF;
        conn.ece_attr_mod = ece.attr_mod;
        // The cma_hdr, then the user's bytes (zero-padded to the field).
        let mut pd = [0u8; sidr_req::PRIVATE_DATA_LEN];
        cma::Repr::new(local.ip(), local.port(), peer.ip())
            .emit(&mut cma::Packet::new_unchecked(&mut pd[..cma::HEADER_LEN]));
        ib::copy_into(&mut pd[cma::HEADER_LEN..], &p.private_data);
        let msg = match kind {
            QpKind::Rc => {
                // `cm_init_av_by_path` + `ib_send_cm_req`: 2 × IBA_time(life) + IBA_time(20)
                conn.timeout_ms = 2 * ib::convert_to_ms(ib::CMA_IBOE_PACKET_LIFETIME)
                    + ib::convert_to_ms(ib::CMA_CM_RESPONSE_TIMEOUT);
                conn.initiator_depth = p.initiator_depth;
                conn.responder_resources = p.responder_resources;
                conn.path_mtu = ib::mtu_enum(self.cfg.path_mtu);
                conn.retry_count = p.retry_count.min(7);
                conn.rnr_retry_count = p.rnr_retry_count.min(7);
                conn.state = CmState::ReqSent;
                self.format_req(&conn, p, seq_num, &pd, ece)
            }
            QpKind::Ud => {
                conn.timeout_ms = ib::convert_to_ms(ib::CMA_CM_RESPONSE_TIMEOUT);
                conn.state = CmState::SidrReqSent;
                Message::SidrReq(sidr_req::Repr {
                    request_id: local_id,
                    partition_key: roce_wire::DEFAULT_PKEY,
                    service_id: conn.service_id,
                    private_data: pd,
                })
            }
        };
        let (tid, state, timeout, retries) =
            (conn.tid, conn.state, conn.timeout_ms, conn.max_cm_retries);
        send_retx(
            &mut self.tx,
            &mut conn,
            now,
            tid,
            msg,
            (state, timeout, retries),
        );
        let rid = self.id_mut(id)?;
        rid.conn = Some(conn);
        rid.state = RdmaState::Connect;
        Ok(())
    }

    /// The REQ kernel rdma_cm sends over RoCE (`cma_connect_ib` + `cm_format_req`).
    fn format_req(&self, conn: &Conn, p: &ConnParam, seq_num: u32, pd: &[u8], ece: Ece) -> Message {
        let mut private_data = [0u8; req::PRIVATE_DATA_LEN];
        ib::copy_into(&mut private_data, pd);
        Message::Req(req::Repr {
            local_comm_id: conn.local_id,
            vendor_id: ece.vendor_id & 0xFF_FFFF,
            service_id: conn.service_id,
            local_ca_guid: self.cfg.node_guid,
            local_qkey: 0,
            local_qpn: conn.local_qpn,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: ib::CMA_CM_RESPONSE_TIMEOUT,
            transport_service_type: req::service_type::RC,
            end_to_end_flow_control: p.flow_control,
            starting_psn: Psn::new(seq_num),
            local_cm_response_timeout: ib::CMA_CM_RESPONSE_TIMEOUT,
            retry_count: conn.retry_count,
            partition_key: roce_wire::DEFAULT_PKEY,
            path_mtu: conn.path_mtu,
            rdc_exists: false,
            rnr_retry_count: conn.rnr_retry_count,
            max_cm_retries: conn.max_cm_retries.min(15),
            srq: p.srq,
            extended_transport_type: 0,
            primary_path: ib::req_path(&conn.av),
            alternate_path: Default::default(),
            sap_supported: false,
            private_data,
        })
    }

    /// `rdma_accept_ece` (what ucma calls): [`Endpoint::accept`] with a REP or SIDR_REP that
    /// offers `ece`.
    pub fn accept_ece(&mut self, now: Instant, id: Id, p: &ConnParam, ece: Ece) -> Result<(), i32> {
        self.id_mut(id)?.ece = ece;
        self.accept(now, id, p)
    }

    /// `rdma_accept` on a passive id: REP (`cma_accept_ib` → `ib_send_cm_rep`, starting PSN =
    /// this id's `seq_num`, target ACK delay 15, retried every IBA_time(REQ Local CM Response
    /// Timeout)), or SIDR_REP status 0 with Q_Key 0x01234567 for a UD id.
    pub fn accept(&mut self, now: Instant, id: Id, p: &ConnParam) -> Result<(), i32> {
        self.mirror.dirty = true;
        let guid = self.cfg.node_guid;
        let Endpoint { ids, tx, .. } = self;
        let rid = ids.get_mut(&id).ok_or(errno::EINVAL)?;
        let (seq_num, ece) = (rid.seq_num, rid.ece);
        let conn = rid.conn.as_mut().ok_or(errno::EINVAL)?;
        if rid.state != RdmaState::Connect {
            return Err(errno::EINVAL);
        }
        if rid.kind == QpKind::Ud {
            check_len(&p.private_data, sidr_rep::PRIVATE_DATA_LEN)?;
            if conn.state != CmState::SidrReqRcvd {
                return Err(errno::EINVAL);
            }
            let mut msg = sidr_rep_msg(
                conn,
                SidrStatus::Success,
                p.qp_num,
                cma::RDMA_UDP_QKEY,
                &p.private_data,
            );
            if let Message::SidrRep(r) = &mut msg {
                // `cm_format_sidr_rep` writes bits 15:8 into the 16-bit high field and 7:0
                // into the low byte: only 16 bits of the Vendor ID travel.
                r.vendor_id = ece.vendor_id & 0xFFFF;
            }
            conn.ece_attr_mod = ece.attr_mod;
            send_conn(tx, conn, msg);
            conn.state = CmState::Idle;
            return Ok(());
        }
        check_len(&p.private_data, rep::PRIVATE_DATA_LEN)?;
        if !matches!(conn.state, CmState::ReqRcvd | CmState::MraReqSent) {
            return Err(errno::EINVAL);
        }
        let mut r = rep::Repr {
            local_comm_id: conn.local_id,
            remote_comm_id: conn.remote_id,
            local_qkey: 0,
            local_qpn: p.qp_num & 0xFF_FFFF,
            vendor_id: ece.vendor_id & 0xFF_FFFF,
            local_eecn: 0,
            starting_psn: Psn::new(seq_num),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: ib::CA_ACK_DELAY,
            failover_accepted: 0,
            end_to_end_flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: p.srq,
            local_ca_guid: guid,
            private_data: [0; rep::PRIVATE_DATA_LEN],
        };
        ib::copy_into(&mut r.private_data, &p.private_data);
        let (tid, timeout, retries) = (conn.tid, conn.timeout_ms, conn.max_cm_retries);
        conn.state = CmState::RepSent;
        conn.ece_attr_mod = ece.attr_mod;
        send_retx(
            tx,
            conn,
            now,
            tid,
            Message::Rep(r),
            (CmState::RepSent, timeout, retries),
        );
        conn.initiator_depth = p.initiator_depth;
        conn.responder_resources = p.responder_resources;
        conn.local_qpn = p.qp_num & 0xFF_FFFF;
        Ok(())
    }

    /// The active side's RTU after CONNECT_RESPONSE (librdmacm's `rdma_accept(NULL)` path →
    /// `cma_rep_recv` → `ib_send_cm_rtu`). No event: librdmacm reports ESTABLISHED itself.
    pub fn establish(&mut self, _now: Instant, id: Id) -> Result<(), i32> {
        self.mirror.dirty = true;
        let Endpoint { ids, tx, .. } = self;
        let conn = ids
            .get_mut(&id)
            .and_then(|r| r.conn.as_mut())
            .ok_or(errno::EINVAL)?;
        if !matches!(conn.state, CmState::RepRcvd | CmState::MraRepSent) {
            return Err(errno::EINVAL);
        }
        conn.private_data.clear();
        send_conn(tx, conn, conn.rtu());
        conn.state = CmState::Established;
        Ok(())
    }

    /// `rdma_reject`: REJ 28 (consumer defined) with up to 148 bytes of private data, or a
    /// SIDR_REP with status 2 for a UD request.
    pub fn reject(&mut self, now: Instant, id: Id, private_data: &[u8]) -> Result<(), i32> {
        self.reject_reason(now, id, private_data, RejReason::ConsumerDefined)
    }

    /// `rdma_reject` with a reason, as ucma passes it: 28 (consumer defined) or 35 (vendor
    /// option not supported, librdmacm's `rdma_reject_ece`), any other EINVAL. A UD request
    /// gets SIDR_REP status 2 whatever the reason.
    pub fn reject_reason(
        &mut self,
        now: Instant,
        id: Id,
        private_data: &[u8],
        reason: RejReason,
    ) -> Result<(), i32> {
        self.mirror.dirty = true;
        if !matches!(
            reason,
            RejReason::ConsumerDefined | RejReason::VendorOptionNotSupported
        ) {
            return Err(errno::EINVAL);
        }
        let Endpoint { ids, tx, .. } = self;
        let rid = ids.get_mut(&id).ok_or(errno::EINVAL)?;
        let conn = rid.conn.as_mut().ok_or(errno::EINVAL)?;
        if rid.kind == QpKind::Ud {
            check_len(private_data, sidr_rep::PRIVATE_DATA_LEN)?;
            if conn.state != CmState::SidrReqRcvd {
                return Err(errno::EINVAL);
            }
            send_conn(
                tx,
                conn,
                sidr_rep_msg(conn, SidrStatus::Reject, 0, 0, private_data),
            );
            conn.state = CmState::Idle;
            return Ok(());
        }
        check_len(private_data, rej::PRIVATE_DATA_LEN)?;
        send_rej(tx, conn, now, reason, &[], private_data)
    }

    /// `rdma_disconnect`: a DREQ if established (retried like the REQ/REP this side sent), a
    /// DREP if a DREQ was received (then timewait); otherwise nothing. EINVAL without a
    /// connection.
    pub fn disconnect(&mut self, now: Instant, id: Id) -> Result<(), i32> {
        self.mirror.dirty = true;
        if self.ids.get(&id).and_then(|r| r.conn.as_ref()).is_none() {
            return Err(errno::EINVAL);
        }
        self.disconnect_conn(now, id);
        Ok(())
    }

    /// `ib_send_cm_dreq`, else `ib_send_cm_drep`.
    fn disconnect_conn(&mut self, now: Instant, id: Id) {
        let tid = self
            .ids
            .get(&id)
            .and_then(|r| r.conn.as_ref())
            .map(|c| self.form_tid(c.local_id));
        let Endpoint { ids, tx, .. } = self;
        let Some(conn) = ids.get_mut(&id).and_then(|r| r.conn.as_mut()) else {
            return;
        };
        match conn.state {
            CmState::Established => {
                let (timeout, retries) = (conn.timeout_ms, conn.max_cm_retries);
                let msg = conn.dreq();
                conn.state = CmState::DreqSent;
                let tid = tid.unwrap_or(conn.tid);
                send_retx(
                    tx,
                    conn,
                    now,
                    tid,
                    msg,
                    (CmState::DreqSent, timeout, retries),
                );
            }
            CmState::DreqRcvd => {
                conn.private_data.clear();
                conn.enter_timewait(now);
                send_conn(tx, conn, conn.drep());
            }
            _ => {}
        }
    }

    /// `rdma_notify(IB_EVENT_COMM_EST)` → `cm_establish`: a passive id in REP_SENT becomes
    /// established (its REP no longer retried) and reports ESTABLISHED; EISCONN if it already
    /// is, EINVAL in other states.
    pub fn notify(&mut self, _now: Instant, id: Id) -> Result<(), i32> {
        self.mirror.dirty = true;
        let rid = self.id_mut(id)?;
        if rid.state != RdmaState::Connect {
            return Err(errno::EINVAL);
        }
        let conn = rid.conn.as_mut().ok_or(errno::EINVAL)?;
        match conn.state {
            CmState::RepSent | CmState::MraRepRcvd => {
                conn.state = CmState::Established;
                conn.retx = None;
                self.events
                    .push_back(Event::simple(id, EventKind::Established, 0));
                Ok(())
            }
            CmState::Established => Err(errno::EISCONN),
            _ => Err(errno::EINVAL),
        }
    }

    /// `rdma_destroy_id` → `cm_destroy_id`: REJ 4 (ARI = our GUID) for a REQ still unanswered,
    /// REJ 28 for a request or reply not yet completed, one DREQ if established, a DREP if a
    /// DREQ was received, SIDR_REP 2 for an unanswered SIDR_REQ. The id's queued events go, and
    /// so do children of a listener whose CONNECT_REQUEST was not polled yet (rejected).
    pub fn destroy_id(&mut self, now: Instant, id: Id) {
        self.mirror.dirty = true;
        let Some(rid) = self.ids.get(&id) else { return };
        if rid.state == RdmaState::Listen {
            let children: Vec<Id> = self
                .events
                .iter()
                .filter(|e| e.kind == EventKind::ConnectRequest && e.listen_id == Some(id))
                .map(|e| e.id)
                .collect();
            for c in children {
                self.destroy_id(now, c);
            }
        }
        self.events.retain(|e| e.id != id);
        let guid = self.cfg.node_guid;
        let tid = self
            .ids
            .get(&id)
            .and_then(|r| r.conn.as_ref())
            .map(|c| self.form_tid(c.local_id));
        let Endpoint { ids, tx, .. } = self;
        let Some(mut rid) = ids.remove(&id) else {
            return;
        };
        if let Some(conn) = rid.conn.as_mut() {
            let tid = tid.unwrap_or(conn.tid);
            send_farewell(tx, conn, now, guid, tid);
            self.comm.remove(&conn.local_id);
        }
        if let (Some(port), ps) = (rid.bound_port, rid.ps) {
            self.ports.release(ps, port, id);
        }
    }
}

/// What `cm_destroy_id` sends for a connection in its state: REJ 4 with ARI = `guid` (REQ
/// unanswered), REJ 28 (request or reply pending), one DREQ with `own_tid` (established; sent
/// once, the destroy cancels it right away), a DREP (DREQ received), SIDR_REP 2 (SIDR_REQ
/// pending); nothing in the other states. Used by [`Endpoint::destroy_id`] and, for a process
/// that died, by [`crate::farewell`].
pub(crate) fn send_farewell(
    tx: &mut VecDeque<crate::MadOut>,
    conn: &mut Conn,
    now: Instant,
    guid: u64,
    own_tid: u64,
) {
    match conn.state {
        CmState::SidrReqRcvd => {
            send_conn(tx, conn, sidr_rep_msg(conn, SidrStatus::Reject, 0, 0, &[]));
        }
        CmState::ReqSent | CmState::MraReqRcvd => {
            let ari = guid.to_be_bytes();
            let _ = send_rej(tx, conn, now, RejReason::Timeout, &ari, &[]);
        }
        CmState::ReqRcvd
        | CmState::MraReqSent
        | CmState::RepSent
        | CmState::MraRepRcvd
        | CmState::RepRcvd
        | CmState::MraRepSent => {
            let _ = send_rej(tx, conn, now, RejReason::ConsumerDefined, &[], &[]);
        }
        CmState::Established => {
            crate::timers::send(tx, conn.av.local, conn.av.peer, own_tid, conn.dreq());
        }
        CmState::DreqRcvd => send_conn(tx, conn, conn.drep()),
        _ => {}
    }
}

/// `cm_format_sidr_rep`: Request ID and Service ID echoed.
pub(crate) fn sidr_rep_msg(
    conn: &Conn,
    status: SidrStatus,
    qpn: u32,
    qkey: u32,
    pd: &[u8],
) -> Message {
    let mut r = sidr_rep::Repr {
        request_id: conn.remote_id,
        status,
        additional_info_length: 0,
        vendor_id: 0,
        qpn: qpn & 0xFF_FFFF,
        service_id: conn.service_id,
        qkey,
        additional_info: [0; sidr_rep::ADDITIONAL_INFO_LEN],
        private_data: [0; sidr_rep::PRIVATE_DATA_LEN],
    };
    ib::copy_into(&mut r.private_data, pd);
    Message::SidrRep(r)
}

/// `cm_send_rej_locked`: allowed from the request/reply states (to idle, or to timewait after
/// our REP), EINVAL elsewhere.
pub(crate) fn send_rej(
    tx: &mut VecDeque<crate::MadOut>,
    conn: &mut Conn,
    now: Instant,
    reason: RejReason,
    ari: &[u8],
    pd: &[u8],
) -> Result<(), i32> {
    let state = conn.state;
    match state {
        CmState::ReqSent
        | CmState::MraReqRcvd
        | CmState::ReqRcvd
        | CmState::MraReqSent
        | CmState::RepRcvd
        | CmState::MraRepSent => conn.reset_to_idle(),
        CmState::RepSent | CmState::MraRepRcvd => conn.enter_timewait(now),
        _ => return Err(errno::EINVAL),
    }
    send_conn(tx, conn, conn.rej(state, reason, ari, pd));
    Ok(())
}
