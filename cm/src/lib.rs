//! A sans-IO RDMA connection manager: what the Linux kernel's IB CM (`drivers/infiniband/core/
//! cm.c`) and RDMA CM (`cma.c`) do for a RoCEv2 port, minus touching QPs.
//!
//! The [`Endpoint`] owns rdma_cm ids (ports, addresses, listeners) and, under each connected id,
//! one IB CM connection (IBA vol 1 chapter 12 state machine: REQ/REP/RTU, MRA, REJ, DREQ/DREP,
//! SIDR_REQ/SIDR_REP). It never reads a clock or touches a socket:
//! - inputs carry `now` ([`Endpoint::handle_mad`], [`Endpoint::handle_timeout`], the calls);
//! - outputs are polled: [`Endpoint::poll_transmit`] (256-byte MADs to send as UD SENDs from
//!   QP1 to the peer's QP1), [`Endpoint::poll_event`] (rdma_cm events, as `rdma_get_cm_event`
//!   would return them), [`Endpoint::poll_timeout`] (when to call `handle_timeout` next).
//!
//! Events are never returned synchronously: a call such as [`Endpoint::resolve_addr`] queues its
//! event, as the kernel delivers it from a work queue.
//!
//! QP attributes: [`Endpoint::init_qp_attr`] gives exactly what kernel `rdma_init_qp_attr`
//! gives librdmacm (rdma-cm-notes §6). The AH's `sgid_index` is left 0: the caller maps the
//! id's local address ([`Endpoint::local_addr`]) to its GID index.
//!
//! Wire facts (service IDs, `cma_hdr`, REQ fields, timers, duplicates) follow rdma-cm-notes and
//! kernel 6.1; see the crate README for the state machine and the deliberate differences.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

pub use mirror::{farewell, BadMirror, ConnMirror, MirrorChange, MirrorState};
pub use roce_emu::Instant;
/// REJ reasons (`enum ib_cm_rej_reason`), for [`Endpoint::reject_reason`].
pub use roce_wire::cm::RejReason;

mod events;
mod ib;
mod mirror;
mod ports;
mod qp_attr;
mod rdma;
mod recv;
mod rng;
mod timers;

/// Positive errno values the calls return (Linux numbering).
pub mod errno {
    /// No such file or directory.
    pub const ENOENT: i32 = 2;
    /// Invalid argument (wrong state, unknown id, private data too long).
    pub const EINVAL: i32 = 22;
    /// Address already in use.
    pub const EADDRINUSE: i32 = 98;
    /// Cannot assign requested address (not local, or a wildcard clash).
    pub const EADDRNOTAVAIL: i32 = 99;
    /// Network is unreachable.
    pub const ENETUNREACH: i32 = 101;
    /// Transport endpoint is already connected.
    pub const EISCONN: i32 = 106;
    /// Connection timed out.
    pub const ETIMEDOUT: i32 = 110;
}

/// Endpoint configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Local CA GUID (REQ/REP Local CA GUID, the ARI of REJ 4).
    pub node_guid: u64,
    /// Addresses of the local device(s); ids bind and resolve only to these (or a wildcard).
    pub addrs: Vec<IpAddr>,
    /// Active path MTU in bytes (256..=4096): the REQ's Path Packet Payload MTU.
    pub path_mtu: u32,
    /// Seed of all randomness: comm-ID XOR operand, starting PSNs, ephemeral ports, TIDs.
    pub seed: u64,
    /// Max CM retries (REQ field and retransmission count); 15 as the kernel.
    pub max_cm_retries: u8,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            node_guid: 0,
            addrs: Vec::new(),
            path_mtu: 1024,
            seed: 0,
            max_cm_retries: ib::CMA_MAX_CM_RETRIES,
        }
    }
}

/// An rdma_cm id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub u32);

/// rdma_cm port spaces (`enum rdma_ucm_port_space`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSpace {
    /// RDMA_PS_IPOIB 0x0002.
    Ipoib,
    /// RDMA_PS_TCP 0x0106.
    Tcp,
    /// RDMA_PS_UDP 0x0111.
    Udp,
    /// RDMA_PS_IB 0x013F.
    Ib,
}

impl PortSpace {
    /// From the RDMA_PS_* value.
    pub fn from_raw(v: u32) -> Option<PortSpace> {
        u16::try_from(v)
            .ok()
            .and_then(roce_wire::cma::PortSpace::from_code)
            .map(PortSpace::from_wire)
    }
    /// The RDMA_PS_* value.
    pub fn raw(self) -> u32 {
        self.wire().code() as u32
    }
    pub(crate) fn wire(self) -> roce_wire::cma::PortSpace {
        use roce_wire::cma::PortSpace as W;
        match self {
            PortSpace::Ipoib => W::Ipoib,
            PortSpace::Tcp => W::Tcp,
            PortSpace::Udp => W::Udp,
            PortSpace::Ib => W::Ib,
        }
    }
    pub(crate) fn from_wire(w: roce_wire::cma::PortSpace) -> PortSpace {
        use roce_wire::cma::PortSpace as W;
        match w {
            W::Ipoib => PortSpace::Ipoib,
            W::Tcp => PortSpace::Tcp,
            W::Udp => PortSpace::Udp,
            W::Ib => PortSpace::Ib,
        }
    }
}

/// QP type of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpKind {
    /// Reliable connected: REQ/REP/RTU.
    Rc,
    /// Unreliable datagram: SIDR.
    Ud,
}

/// `struct rdma_conn_param` (with `qkey` of `rdma_ud_param`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnParam {
    /// User private data.
    pub private_data: Vec<u8>,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Retry count (clamped to 7 on the wire).
    pub retry_count: u8,
    /// RNR retry count (clamped to 7 on the wire).
    pub rnr_retry_count: u8,
    /// The QP uses an SRQ.
    pub srq: bool,
    /// The local QP number (calls); the remote QPN (events).
    pub qp_num: u32,
    /// UD accept: ignored for IP ids, as the kernel (SIDR_REP carries 0x01234567).
    pub qkey: u32,
}

/// Enhanced connection establishment parameters (`struct rdma_ucm_ece`): a REQ, REP or
/// SIDR_REP carries `vendor_id` in its Vendor ID field (24 bits; 16 in a SIDR_REP, as the
/// kernel writes it) and `attr_mod` in the MAD header's AttributeModifier
/// (`cm_format_mad_ece_hdr`). All zero when the peer offers none (rxe: no ECE support).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ece {
    /// Vendor ID (IEEE OUI of the offering vendor).
    pub vendor_id: u32,
    /// Vendor options (`ibv_ece.options`).
    pub attr_mod: u32,
}

/// `enum rdma_cm_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum EventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    MulticastJoin,
    MulticastError,
    AddrChange,
    TimewaitExit,
}

impl EventKind {
    /// The `enum rdma_cm_event_type` value (ADDR_RESOLVED 0 … TIMEWAIT_EXIT 15).
    pub fn raw(self) -> u32 {
        self as u32
    }
}

/// UD parameters of an event (`struct rdma_ud_param` minus the private data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdParam {
    /// Remote QPN (SIDR_REP); 0 on a ConnectRequest, as the kernel.
    pub qp_num: u32,
    /// Remote Q_Key (SIDR_REP); 0 on a ConnectRequest.
    pub qkey: u32,
    /// The peer's address (the AH's destination).
    pub remote: IpAddr,
    /// Our address (map it to the AH's source GID index).
    pub local: IpAddr,
    /// Flow label of the AH.
    pub flow_label: u32,
    /// Hop limit of the AH.
    pub hop_limit: u8,
    /// Traffic class of the AH.
    pub traffic_class: u8,
}

/// An rdma_cm event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The id (for ConnectRequest: the new child id made for the request).
    pub id: Id,
    /// For ConnectRequest: the listening id.
    pub listen_id: Option<Id>,
    /// Event type.
    pub kind: EventKind,
    /// 0, a negative errno (-ETIMEDOUT …), the REJ reason for Rejected, the SIDR status for
    /// Unreachable after a SIDR_REP.
    pub status: i32,
    /// Private data as rdma_cm hands it up: REQ 56 bytes (after the cma_hdr), SIDR_REQ 180,
    /// REP 196, REJ 148, SIDR_REP 136; empty for the other events.
    pub private_data: Vec<u8>,
    /// Connection parameters as `rdma_cm_event.param.conn` (`qp_num` = remote QPN).
    pub param: ConnParam,
    /// UD parameters (UD ConnectRequest, SIDR Established).
    pub ud: Option<UdParam>,
    /// The peer's ECE from its REQ (ConnectRequest) or REP (ConnectResponse); zero otherwise,
    /// as the kernel's `rdma_cm_event.ece`.
    pub ece: Ece,
}

/// One received QP1 MAD.
pub struct MadIn<'a> {
    /// Source IP (the peer).
    pub src: IpAddr,
    /// Destination IP (ours).
    pub dst: IpAddr,
    /// GRH/IPv6 flow label.
    pub flow_label: u32,
    /// Traffic class / TOS.
    pub traffic_class: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// The MAD: 256 bytes; anything else is counted as malformed and dropped.
    pub bytes: &'a [u8],
}

/// One MAD to send as a UD SEND from QP1 to the peer's QP1 (Q_Key 0x80010000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadOut {
    /// Source IP.
    pub src: IpAddr,
    /// Destination IP.
    pub dst: IpAddr,
    /// The whole MAD.
    pub bytes: [u8; 256],
}

/// Counters.
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    /// MADs given to `handle_mad`.
    pub mads_received: u64,
    /// MADs handed out by `poll_transmit` (retransmissions included).
    pub mads_sent: u64,
    /// Not 256 bytes, truncated, or a field out of range.
    pub malformed: u64,
    /// Not a CM MAD (base version, class, class version) or not method Send.
    pub not_cm: u64,
    /// A CM attribute that is not one of the nine (LAP, APR, ClassPortInfo …; LAP is dropped on
    /// RoCE as the kernel does).
    pub unknown_attribute: u64,
    /// A REP/RTU/REJ/MRA/DREQ/DREP/SIDR_REP that matches no connection (a DREQ is still
    /// answered with a DREP).
    pub unknown_comm_id: u64,
    /// REQ without a listener (REJ 8 sent) or SIDR_REQ without one (SIDR_REP status 1).
    pub no_listener: u64,
    /// REQ whose `cma_hdr` or QP type does not match any listener (REJ 28 / SIDR_REP 2).
    pub bad_cma_hdr: u64,
    /// REQ or REP from a remote QP with a connection already (REJ 10 stale connection).
    pub stale: u64,
    /// Duplicate REQ/REP/RTU/DREQ/MRA/SIDR_REQ received.
    pub duplicates: u64,
    /// MADs re-sent by the retransmission timer.
    pub retransmits: u64,
    /// Retries exhausted (REQ, REP, DREQ, SIDR_REQ).
    pub timeouts: u64,
    /// REQ/SIDR_REQ dropped because the listener's backlog of unpolled requests was full.
    pub backlog_drops: u64,
    /// MADs received in a state that does not take them (ignored, as the kernel).
    pub unexpected: u64,
}

/// The connection manager of one host (all local devices' addresses).
pub struct Endpoint {
    pub(crate) cfg: Config,
    pub(crate) rng: rng::Rng,
    pub(crate) ids: BTreeMap<Id, rdma::RdmaId>,
    pub(crate) next_id: u32,
    /// Local comm ID → owning id.
    pub(crate) comm: BTreeMap<u32, Id>,
    pub(crate) comm_next: u32,
    pub(crate) comm_xor: u32,
    /// `set_comm_id_slot`.
    pub(crate) comm_slot: Option<u8>,
    pub(crate) hi_tid: u32,
    pub(crate) ports: ports::Ports,
    pub(crate) tx: VecDeque<MadOut>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counters: Counters,
    pub(crate) mirror: mirror::Mirror,
}

impl Endpoint {
    /// A new endpoint.
    pub fn new(cfg: Config) -> Endpoint {
        let mut rng = rng::Rng::new(cfg.seed);
        let comm_xor = rng.next_u32();
        // The kernel's agent number is a small per-host counter (`hi_tid`).
        let hi_tid = 1 + rng.next_u32() % 0xFF;
        let last_port = rng.ephemeral_port();
        Endpoint {
            cfg,
            rng,
            ids: BTreeMap::new(),
            next_id: 1,
            comm: BTreeMap::new(),
            comm_next: 0,
            comm_xor,
            comm_slot: None,
            hi_tid,
            ports: ports::Ports::new(last_port),
            tx: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            mirror: mirror::Mirror::default(),
        }
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<MadOut> {
        let m = self.tx.pop_front()?;
        self.counters.mads_sent += 1;
        Some(m)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The id's local address (after bind, resolve or on a child, the listener's port).
    pub fn local_addr(&self, id: Id) -> Option<SocketAddr> {
        self.ids.get(&id).and_then(|i| i.local)
    }

    /// The id's port space.
    pub fn port_space(&self, id: Id) -> Option<PortSpace> {
        self.ids.get(&id).map(|i| i.ps)
    }

    /// The id's peer address (after resolve_addr, or the requester on a child).
    pub fn peer_addr(&self, id: Id) -> Option<SocketAddr> {
        self.ids.get(&id).and_then(|i| i.peer)
    }
}
