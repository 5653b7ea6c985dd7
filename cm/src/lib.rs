//! Sans-IO RDMA connection manager (stub API; implementation follows).
#![forbid(unsafe_code)]
#![allow(unused_variables, dead_code)]
use std::net::{IpAddr, SocketAddr};

pub use roce_emu::Instant;

/// Endpoint configuration.
pub struct Config {
    /// Local CA GUID.
    pub node_guid: u64,
    /// Local device addresses.
    pub addrs: Vec<IpAddr>,
    /// Active path MTU in bytes.
    pub path_mtu: u32,
    /// Seed of all randomness.
    pub seed: u64,
    /// Max CM retries (15 as the kernel).
    pub max_cm_retries: u8,
}

/// An rdma_cm id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub u32);

/// rdma_cm port spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSpace {
    /// RDMA_PS_IPOIB
    Ipoib,
    /// RDMA_PS_TCP
    Tcp,
    /// RDMA_PS_UDP
    Udp,
    /// RDMA_PS_IB
    Ib,
}

impl PortSpace {
    /// From the RDMA_PS_* value.
    pub fn from_raw(v: u32) -> Option<PortSpace> {
        match v {
            0x0002 => Some(PortSpace::Ipoib),
            0x0106 => Some(PortSpace::Tcp),
            0x0111 => Some(PortSpace::Udp),
            0x013F => Some(PortSpace::Ib),
            _ => None,
        }
    }
    /// The RDMA_PS_* value.
    pub fn raw(self) -> u32 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
            PortSpace::Ib => 0x013F,
        }
    }
}

/// QP type of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpKind {
    /// RC
    Rc,
    /// UD
    Ud,
}

/// `struct rdma_conn_param`.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)]
pub struct ConnParam {
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: bool,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub qp_num: u32,
    pub qkey: u32,
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
    /// The `enum rdma_cm_event_type` value.
    pub fn raw(self) -> u32 {
        self as u32
    }
}

/// UD parameters of an event.
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub struct UdParam {
    pub qp_num: u32,
    pub qkey: u32,
    pub remote: IpAddr,
    pub local: IpAddr,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// An rdma_cm event.
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub struct Event {
    pub id: Id,
    pub listen_id: Option<Id>,
    pub kind: EventKind,
    pub status: i32,
    pub private_data: Vec<u8>,
    pub param: ConnParam,
    pub ud: Option<UdParam>,
}

/// One received QP1 MAD.
#[allow(missing_docs)]
pub struct MadIn<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub flow_label: u32,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub bytes: &'a [u8],
}

/// One MAD to send from QP1 to the peer's QP1.
#[allow(missing_docs)]
pub struct MadOut {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub bytes: [u8; 256],
}

/// Counters.
#[derive(Default, Clone, Debug)]
#[allow(missing_docs)]
pub struct Counters {
    pub mads_received: u64,
    pub mads_sent: u64,
    pub malformed: u64,
    pub unknown_comm_id: u64,
    pub no_listener: u64,
    pub duplicates: u64,
    pub retransmits: u64,
    pub timeouts: u64,
}

/// The connection manager.
pub struct Endpoint {
    cfg: Config,
    counters: Counters,
}

#[allow(missing_docs)]
impl Endpoint {
    pub fn new(cfg: Config) -> Endpoint {
        Endpoint { cfg, counters: Counters::default() }
    }
    pub fn create_id(&mut self, ps: PortSpace, kind: QpKind) -> Id {
        todo!()
    }
    pub fn destroy_id(&mut self, now: Instant, id: Id) {
        todo!()
    }
    pub fn bind(&mut self, id: Id, addr: SocketAddr) -> Result<(), i32> {
        todo!()
    }
    pub fn resolve_addr(&mut self, now: Instant, id: Id, src: Option<SocketAddr>, dst: SocketAddr, timeout_ms: u32) -> Result<(), i32> {
        todo!()
    }
    pub fn resolve_route(&mut self, now: Instant, id: Id, timeout_ms: u32) -> Result<(), i32> {
        todo!()
    }
    pub fn listen(&mut self, id: Id, backlog: i32) -> Result<(), i32> {
        todo!()
    }
    pub fn connect(&mut self, now: Instant, id: Id, p: &ConnParam) -> Result<(), i32> {
        todo!()
    }
    pub fn accept(&mut self, now: Instant, id: Id, p: &ConnParam) -> Result<(), i32> {
        todo!()
    }
    pub fn establish(&mut self, now: Instant, id: Id) -> Result<(), i32> {
        todo!()
    }
    pub fn reject(&mut self, now: Instant, id: Id, private_data: &[u8]) -> Result<(), i32> {
        todo!()
    }
    pub fn disconnect(&mut self, now: Instant, id: Id) -> Result<(), i32> {
        todo!()
    }
    pub fn notify(&mut self, now: Instant, id: Id) -> Result<(), i32> {
        todo!()
    }
    pub fn init_qp_attr(&self, id: Id, state: roce_emu::QpState) -> Result<(roce_emu::QpAttr, roce_emu::QpAttrMask), i32> {
        todo!()
    }
    pub fn local_addr(&self, id: Id) -> Option<SocketAddr> {
        todo!()
    }
    pub fn peer_addr(&self, id: Id) -> Option<SocketAddr> {
        todo!()
    }
    pub fn handle_mad(&mut self, now: Instant, mad: &MadIn) {
        todo!()
    }
    pub fn poll_transmit(&mut self) -> Option<MadOut> {
        todo!()
    }
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }
    pub fn handle_timeout(&mut self, now: Instant) {
        todo!()
    }
    pub fn poll_event(&mut self) -> Option<Event> {
        todo!()
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}
