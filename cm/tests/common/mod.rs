//! A tiny in-test network: two endpoints, virtual time, and a loss rule per (sender, attribute,
//! occurrence). Every MAD that leaves an endpoint is logged, delivered or dropped.
#![allow(dead_code)]
use roce_cm::{Config, ConnParam, Endpoint, Event, Id, Instant, MadIn, MadOut, PortSpace, QpKind};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

pub const A_IP: &str = "10.0.0.1";
pub const B_IP: &str = "10.0.0.2";
pub const A_GUID: u64 = 0x0211_22ff_fe33_4455;
pub const B_GUID: u64 = 0x0266_77ff_fe88_99aa;

pub const REQ: u16 = 0x0010;
pub const MRA: u16 = 0x0011;
pub const REJ: u16 = 0x0012;
pub const REP: u16 = 0x0013;
pub const RTU: u16 = 0x0014;
pub const DREQ: u16 = 0x0015;
pub const DREP: u16 = 0x0016;
pub const SIDR_REQ: u16 = 0x0017;
pub const SIDR_REP: u16 = 0x0018;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    A,
    B,
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `addr:port` as a socket address.
pub fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// The RC connection parameters most tests connect with: one READ or atomic each way, 7
/// retries and RNR retries, QP `qpn`.
pub fn param(qpn: u32) -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: qpn,
        ..Default::default()
    }
}

pub fn config(addr: &str, guid: u64, seed: u64) -> Config {
    Config {
        node_guid: guid,
        addrs: vec![ip(addr)],
        path_mtu: 1024,
        seed,
        max_cm_retries: 15,
    }
}

/// One MAD that left an endpoint.
#[derive(Clone, Debug)]
pub struct Sent {
    pub from: Side,
    pub at: Instant,
    pub attr: u16,
    pub dropped: bool,
    pub out: MadOut,
}

impl Sent {
    pub fn tid(&self) -> u64 {
        u64::from_be_bytes(self.out.bytes[8..16].try_into().unwrap())
    }
    pub fn parse(&self) -> roce_wire::cm::Mad {
        roce_wire::cm::Mad::parse(&self.out.bytes).unwrap()
    }
}

pub struct Net {
    pub a: Endpoint,
    pub b: Endpoint,
    pub now: Instant,
    /// (sender, attribute) → the occurrences (0-based) to drop.
    pub drops: BTreeMap<(Side, u16), Vec<usize>>,
    /// Drop everything from this side from now on.
    pub blackhole: Option<Side>,
    seen: BTreeMap<(Side, u16), usize>,
    pub log: Vec<Sent>,
    pub ev_a: Vec<Event>,
    pub ev_b: Vec<Event>,
}

impl Net {
    pub fn new() -> Net {
        Net::with(config(A_IP, A_GUID, 1), config(B_IP, B_GUID, 2))
    }

    pub fn with(a: Config, b: Config) -> Net {
        Net {
            a: Endpoint::new(a),
            b: Endpoint::new(b),
            now: Instant::from_millis(1000),
            drops: BTreeMap::new(),
            blackhole: None,
            seen: BTreeMap::new(),
            log: Vec::new(),
            ev_a: Vec::new(),
            ev_b: Vec::new(),
        }
    }

    /// A creates an id, resolves B's 10.0.0.2:7174 (address, then route) and connects with
    /// `p`; nothing is delivered yet. Returns A's id.
    pub fn connect_a(&mut self, ps: PortSpace, kind: QpKind, p: &ConnParam) -> Id {
        let a = self.a.create_id(ps, kind);
        let now = self.now;
        let to = sa(&format!("{B_IP}:7174"));
        self.a.resolve_addr(now, a, None, to, 2000).unwrap();
        self.a.resolve_route(now, a, 2000).unwrap();
        self.a.connect(now, a, p).unwrap();
        a
    }

    pub fn drop_nth(&mut self, from: Side, attr: u16, nth: usize) {
        self.drops.entry((from, attr)).or_default().push(nth);
    }

    /// Moves MADs both ways until both endpoints are quiet, collecting events.
    pub fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(m) = self.a.poll_transmit() {
                moved = true;
                self.deliver(Side::A, m);
            }
            while let Some(m) = self.b.poll_transmit() {
                moved = true;
                self.deliver(Side::B, m);
            }
            while let Some(e) = self.a.poll_event() {
                self.ev_a.push(e);
            }
            while let Some(e) = self.b.poll_event() {
                self.ev_b.push(e);
            }
            if !moved {
                break;
            }
        }
    }

    fn deliver(&mut self, from: Side, m: MadOut) {
        let attr = u16::from_be_bytes([m.bytes[16], m.bytes[17]]);
        let n = self.seen.entry((from, attr)).or_insert(0);
        let nth = *n;
        *n += 1;
        let dropped = self.blackhole == Some(from)
            || self
                .drops
                .get(&(from, attr))
                .is_some_and(|v| v.contains(&nth));
        self.log.push(Sent {
            from,
            at: self.now,
            attr,
            dropped,
            out: m.clone(),
        });
        if dropped {
            return;
        }
        let mad = MadIn {
            src: m.src,
            dst: m.dst,
            flow_label: 0,
            traffic_class: 0,
            hop_limit: 64,
            bytes: &m.bytes,
        };
        match from {
            Side::A => self.b.handle_mad(self.now, &mad),
            Side::B => self.a.handle_mad(self.now, &mad),
        }
    }

    /// Runs timers and traffic until `now + ms`.
    pub fn advance_ms(&mut self, ms: u64) {
        let end = self.now.add_nanos(ms * 1_000_000);
        self.pump();
        loop {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                    self.pump();
                }
                _ => break,
            }
        }
        self.now = end;
    }

    /// The MADs sent with this attribute, in order.
    pub fn sent(&self, from: Side, attr: u16) -> Vec<&Sent> {
        self.log
            .iter()
            .filter(|s| s.from == from && s.attr == attr)
            .collect()
    }

    pub fn take_a(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.ev_a)
    }

    pub fn take_b(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.ev_b)
    }
}
