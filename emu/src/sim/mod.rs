//! A deterministic simulated network that drives several [`Nic`]s on virtual time.
//!
//! Every datagram a NIC transmits is scheduled for delivery according to its link's latency,
//! bandwidth, jitter and seeded impairments (loss, duplication, reordering delay, bit-flip
//! corruption, which the receiver's ICRC check must catch). Time jumps straight to the next event
//! (a delivery or a NIC timer); nothing sleeps. The same seed gives the same run, bit for bit.
//! Datagrams can be handed to a [`PacketSink`] (e.g. a pcap writer) and to a test filter.
mod connect;
mod due;
mod pcap;
pub use connect::{connect_pair, connect_qp, ConnectAttr};
pub use pcap::PcapSink;

use crate::{Instant, Nic, RxMeta, Transmit};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use roce_wire::transport::{Packet, Repr};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::IpAddr;

/// Properties and impairments of a directed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay (ns).
    pub latency_ns: u64,
    /// Uniform extra delay in `[0, jitter_ns]` (ns).
    pub jitter_ns: u64,
    /// Bytes per second on the wire (`None` = infinite).
    pub bandwidth_bps: Option<u64>,
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability a datagram is held back by up to `reorder_delay_ns` (reordering).
    pub reorder: f64,
    /// Maximum hold-back for reordered datagrams (ns).
    pub reorder_delay_ns: u64,
    /// Probability one bit of the datagram is flipped.
    pub corrupt: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            latency_ns: 1_000,
            jitter_ns: 0,
            bandwidth_bps: None,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay_ns: 0,
            corrupt: 0.0,
        }
    }
}

impl LinkConfig {
    /// A perfect link with zero latency.
    pub fn ideal() -> LinkConfig {
        LinkConfig {
            latency_ns: 0,
            ..Default::default()
        }
    }
}

/// Receives every datagram the network delivers (for pcap writing or tracing).
pub trait PacketSink {
    /// `bytes` is BTH..ICRC as delivered (after any corruption).
    fn packet(
        &mut self,
        time: Instant,
        src_ip: IpAddr,
        dst_ip: IpAddr,
        src_port: u16,
        bytes: &[u8],
    );
    /// The same with every IP/UDP field the receiver saw; defaults to [`PacketSink::packet`].
    fn packet_meta(&mut self, time: Instant, meta: &RxMeta, bytes: &[u8]) {
        self.packet(time, meta.src_ip, meta.dst_ip, meta.src_port, bytes)
    }
}

/// What a test filter decides for a transmitted datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let the link's own rules apply.
    Pass,
    /// Drop it.
    Drop,
}

/// A transmitted datagram as a test filter or capture sees it.
#[derive(Clone, Debug)]
pub struct Captured {
    /// Transmission time.
    pub time: Instant,
    /// Sending NIC index.
    pub from: usize,
    /// Receiving NIC index (`usize::MAX` when nobody has the address).
    pub to: usize,
    /// Parsed headers.
    pub repr: Repr,
    /// BTH..ICRC as transmitted.
    pub bytes: Vec<u8>,
    /// Dropped (by the filter or the link).
    pub dropped: bool,
}

type Filter = Box<dyn FnMut(&Captured) -> Verdict>;

struct Flight {
    to: usize,
    meta: RxMeta,
    data: Vec<u8>,
    len: usize,
}

/// Size of every packet buffer the network owns (BTH..ICRC of any MTU fits).
const BUF: usize = 8192;

/// Network statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SimStats {
    pub transmitted: u64,
    pub delivered: u64,
    pub lost: u64,
    pub filtered: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub unroutable: u64,
}

/// The simulated network and its NICs.
pub struct SimNet {
    /// Current virtual time.
    pub now: Instant,
    /// The devices, by index.
    pub nics: Vec<Nic>,
    default_link: LinkConfig,
    /// Every link is [`LinkConfig::ideal`] (no override, ideal default).
    all_ideal: bool,
    routes: Vec<(IpAddr, usize)>,
    links: BTreeMap<(usize, usize), LinkConfig>,
    busy_until: BTreeMap<(usize, usize), Instant>,
    heap: BinaryHeap<Reverse<(Instant, u64, u32)>>,
    /// Deliveries due now, in transmission order (the zero-latency fast path: no slot, no heap).
    due: due::Due,
    flights: Vec<Option<Flight>>,
    free_flights: Vec<u32>,
    pool: Vec<Vec<u8>>,
    seq: u64,
    rng: SmallRng,
    seed: u64,
    buf: Vec<u8>,
    sink: Option<Box<dyn PacketSink>>,
    filter: Option<Filter>,
    capture: Option<Vec<Captured>>,
    /// Statistics.
    pub stats: SimStats,
}

impl SimNet {
    /// An empty network with `seed` for every random decision.
    pub fn new(seed: u64, default_link: LinkConfig) -> SimNet {
        SimNet {
            now: Instant::ZERO,
            nics: Vec::new(),
            default_link,
            all_ideal: default_link == LinkConfig::ideal(),
            routes: Vec::new(),
            links: BTreeMap::new(),
            busy_until: BTreeMap::new(),
            heap: BinaryHeap::with_capacity(1024),
            due: due::Due::new(64),
            flights: Vec::new(),
            free_flights: Vec::new(),
            pool: Vec::new(),
            seq: 0,
            rng: SmallRng::seed_from_u64(seed),
            seed,
            buf: vec![0; BUF],
            sink: None,
            filter: None,
            capture: None,
            stats: SimStats::default(),
        }
    }

    /// The seed this network was built with (print it when a test fails).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Adds a NIC; returns its index.
    pub fn add_nic(&mut self, nic: Nic) -> usize {
        let i = self.nics.len();
        for g in nic.gids() {
            self.routes.push((crate::verbs::ip_from_gid(g), i));
        }
        self.nics.push(nic);
        i
    }

    /// Overrides the link `from → to`.
    pub fn set_link(&mut self, from: usize, to: usize, cfg: LinkConfig) {
        self.links.insert((from, to), cfg);
        self.all_ideal = false;
    }

    /// Sets the link config for both directions between every pair.
    pub fn set_default_link(&mut self, cfg: LinkConfig) {
        self.default_link = cfg;
        self.links.clear();
        self.all_ideal = cfg == LinkConfig::ideal();
    }

    /// Installs a sink that sees every delivered datagram.
    pub fn set_sink(&mut self, sink: Box<dyn PacketSink>) {
        self.sink = Some(sink);
    }

    /// Installs a test filter that may drop chosen transmitted datagrams.
    pub fn set_filter(&mut self, f: impl FnMut(&Captured) -> Verdict + 'static) {
        self.filter = Some(Box::new(f));
    }

    /// Removes the filter.
    pub fn clear_filter(&mut self) {
        self.filter = None;
    }

    /// Starts recording every transmitted datagram.
    pub fn start_capture(&mut self) {
        self.capture = Some(Vec::new());
    }

    /// Returns and clears the recording.
    pub fn take_capture(&mut self) -> Vec<Captured> {
        self.capture
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn route(&mut self, ip: IpAddr) -> Option<usize> {
        route(&mut self.routes, ip)
    }

    fn pooled(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| vec![0; BUF])
    }

    fn transmit(&mut self, from: usize, t: Transmit) {
        self.stats.transmitted += 1;
        let len = t.len;
        let to = self.route(t.dst_ip);
        let want_record = self.filter.is_some() || self.capture.is_some();
        if let (false, Some(to), true) = (want_record, to, self.all_ideal) {
            // Zero-latency perfect link and nobody watching: exactly what the general path
            // below does for it (no random draw, one copy due now), without the detours.
            let fresh = self.pooled();
            let data = std::mem::replace(&mut self.buf, fresh);
            self.seq += 1;
            let old = self.due.push_owned(to, t.rx_meta(), data, len);
            if !old.is_empty() {
                self.pool.push(old);
            }
            return;
        }
        let mut verdict = Verdict::Pass;
        if want_record {
            let bytes = self.buf[..len].to_vec();
            let repr = Packet::new_checked(&bytes[..])
                .ok()
                .and_then(|p| Repr::parse(&p).ok());
            if let Some(repr) = repr {
                let mut c = Captured {
                    time: self.now,
                    from,
                    to: to.unwrap_or(usize::MAX),
                    repr,
                    bytes,
                    dropped: false,
                };
                if let Some(f) = self.filter.as_mut() {
                    verdict = f(&c);
                }
                c.dropped = verdict == Verdict::Drop;
                if let Some(cap) = self.capture.as_mut() {
                    cap.push(c);
                }
            }
        }
        let Some(to) = to else {
            self.stats.unroutable += 1;
            return;
        };
        if verdict == Verdict::Drop {
            self.stats.filtered += 1;
            return;
        }
        let link = if self.links.is_empty() {
            self.default_link
        } else {
            *self.links.get(&(from, to)).unwrap_or(&self.default_link)
        };
        let rng = &mut self.rng;
        if link.loss > 0.0 && rng.gen_bool(link.loss.min(1.0)) {
            self.stats.lost += 1;
            return;
        }
        let copies = if link.duplicate > 0.0 && rng.gen_bool(link.duplicate.min(1.0)) {
            2
        } else {
            1
        };
        let mut depart = self.now;
        if let Some(bw) = link.bandwidth_bps.filter(|b| *b > 0) {
            let busy = self.busy_until.entry((from, to)).or_insert(Instant::ZERO);
            depart = depart.max(*busy);
            let tx_ns = ((len as u128 + 60) * 1_000_000_000 / bw as u128) as u64;
            *busy = depart.add_nanos(tx_ns);
            depart = *busy;
        }
        let meta = t.rx_meta();
        for c in 0..copies {
            let rng = &mut self.rng;
            let mut at = depart.add_nanos(link.latency_ns);
            if link.jitter_ns > 0 {
                at = at.add_nanos(rng.gen_range(0..=link.jitter_ns));
            }
            if link.reorder > 0.0 && rng.gen_bool(link.reorder.min(1.0)) {
                at = at.add_nanos(rng.gen_range(0..=link.reorder_delay_ns.max(1)));
                self.stats.reordered += 1;
            }
            if c == 1 {
                self.stats.duplicated += 1;
                at = at.add_nanos(
                    rng.gen_range(0..=link.reorder_delay_ns.max(link.latency_ns).max(1)),
                );
            }
            let corrupt = link.corrupt > 0.0 && rng.gen_bool(link.corrupt.min(1.0));
            let last = c + 1 == copies;
            let mut data = if last && !corrupt {
                // hand the transmit buffer itself to the flight (no copy)
                let fresh = self.pooled();
                std::mem::replace(&mut self.buf, fresh)
            } else {
                let mut d = self.pooled();
                d[..len].copy_from_slice(&self.buf[..len]);
                d
            };
            if corrupt && len > 5 {
                // any bit but BTH byte 4 (FECN/BECN/resv6a, masked by the ICRC by design)
                let rng = &mut self.rng;
                let mut byte = rng.gen_range(0..len - 1);
                if byte >= 4 {
                    byte += 1;
                }
                let bit = rng.gen_range(0..8);
                self.stats.corrupted += 1;
                data[byte] ^= 1 << bit;
            }
            self.enqueue_owned(at, to, meta, data, len);
        }
    }

    fn enqueue_owned(&mut self, at: Instant, to: usize, meta: RxMeta, data: Vec<u8>, len: usize) {
        let id = self.seq;
        self.seq += 1;
        let f = Flight {
            to,
            meta,
            data,
            len,
        };
        if at <= self.now {
            let old = self.due.push_owned(f.to, f.meta, f.data, f.len);
            if !old.is_empty() {
                self.pool.push(old);
            }
            return;
        }
        let slot = match self.free_flights.pop() {
            Some(i) => {
                self.flights[i as usize] = Some(f);
                i
            }
            None => {
                self.flights.push(Some(f));
                (self.flights.len() - 1) as u32
            }
        };
        self.heap.push(Reverse((at, id, slot)));
    }

    /// The next delayed delivery whose time has come (they were sent before anything in the
    /// zero-latency queue, so they go first).
    fn next_delayed(&mut self) -> Option<Flight> {
        while let Some(Reverse((at, _, slot))) = self.heap.peek().copied() {
            if at > self.now {
                break;
            }
            self.heap.pop();
            self.free_flights.push(slot);
            if let Some(f) = self.flights[slot as usize].take() {
                return Some(f);
            }
        }
        None
    }

    /// Every link ideal and nobody watching: datagrams go straight into the due ring.
    #[inline]
    fn direct(&self) -> bool {
        self.all_ideal && self.filter.is_none() && self.capture.is_none()
    }

    /// Lets NIC `i` transmit everything it has; true when it sent anything.
    fn drain_nic(&mut self, i: usize) -> bool {
        if !self.nics[i].may_transmit() {
            return false;
        }
        let now = self.now;
        let mut sent = false;
        if self.direct() {
            // Zero-latency perfect link: exactly what `transmit` does for it (no random draw,
            // one copy due now), written in place.
            let nic = &mut self.nics[i];
            loop {
                let hand = Direct {
                    due: &mut self.due,
                    routes: &mut self.routes,
                    stats: &mut self.stats,
                    seq: &mut self.seq,
                };
                if !hand.send(nic, now) {
                    return sent;
                }
                sent = true;
                if !nic.may_transmit() {
                    return sent;
                }
            }
        }
        while let Some(t) = self.nics[i].poll_transmit(now, &mut self.buf) {
            sent = true;
            self.transmit(i, t);
        }
        sent
    }

    /// Delivers the next datagram due now; false when there is none.
    fn deliver_one(&mut self) -> bool {
        if let Some(f) = self.next_delayed() {
            self.stats.delivered += 1;
            let bytes = &f.data[..f.len];
            if let Some(s) = self.sink.as_mut() {
                s.packet_meta(self.now, &f.meta, bytes);
            }
            self.nics[f.to].handle_datagram(self.now, &f.meta, bytes);
            self.pool.push(f.data);
            return true;
        }
        let Some(d) = self.due.front() else {
            return false;
        };
        self.stats.delivered += 1;
        let bytes = &d.data[..d.len];
        if let Some(s) = self.sink.as_mut() {
            s.packet_meta(self.now, &d.meta, bytes);
        }
        self.nics[d.to].handle_datagram(self.now, &d.meta, bytes);
        self.due.pop();
        true
    }

    /// Delivers and transmits everything due at the current time.
    pub fn pump(&mut self) {
        if self.direct() && self.heap.is_empty() {
            self.pump_direct();
            return;
        }
        loop {
            let mut progress = false;
            for i in 0..self.nics.len() {
                progress |= self.drain_nic(i);
            }
            // let the receiver answer before more arrivals at the same instant
            progress |= self.deliver_one();
            if !progress {
                break;
            }
        }
    }

    /// [`SimNet::pump`] when every link is ideal, nobody watches and nothing is in flight with
    /// a delay (nothing then ever is): the same order (each NIC drained in index order, then
    /// one delivery, until neither happens), with only the zero-latency hand-off in the loop.
    fn pump_direct(&mut self) {
        let now = self.now;
        loop {
            let mut progress = false;
            for nic in self.nics.iter_mut() {
                while nic.may_transmit() {
                    let hand = Direct {
                        due: &mut self.due,
                        routes: &mut self.routes,
                        stats: &mut self.stats,
                        seq: &mut self.seq,
                    };
                    if !hand.send(nic, now) {
                        break;
                    }
                    progress = true;
                }
            }
            // let the receiver answer before more arrivals at the same instant
            if let Some(d) = self.due.front() {
                self.stats.delivered += 1;
                let bytes = &d.data[..d.len];
                if let Some(s) = self.sink.as_mut() {
                    s.packet_meta(now, &d.meta, bytes);
                }
                self.nics[d.to].handle_datagram(now, &d.meta, bytes);
                self.due.pop();
            } else if !progress {
                return;
            }
        }
    }

    /// The next moment anything happens (a delivery or a NIC timer).
    pub fn next_event(&self) -> Option<Instant> {
        let d = if self.due.is_empty() {
            self.heap.peek().map(|Reverse((t, _, _))| *t)
        } else {
            Some(self.now)
        };
        let t = self.nics.iter().filter_map(|n| n.poll_timeout()).min();
        match (d, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pumps, then advances time to the next event and runs it. False when nothing is pending.
    pub fn step(&mut self) -> bool {
        self.pump();
        let Some(t) = self.next_event() else {
            return false;
        };
        if t > self.now {
            self.now = t;
        }
        let now = self.now;
        for n in &mut self.nics {
            if n.poll_timeout().is_some_and(|d| d <= now) {
                n.handle_timeout(now);
            }
        }
        self.pump();
        true
    }

    /// Steps until `pred` holds (true) or the next event lies past `deadline` / nothing is
    /// pending (false).
    pub fn run_until(
        &mut self,
        mut pred: impl FnMut(&mut SimNet) -> bool,
        deadline: Instant,
    ) -> bool {
        loop {
            self.pump();
            if pred(self) {
                return true;
            }
            match self.next_event() {
                Some(t) if t <= deadline => {
                    self.step();
                }
                _ => return pred(self),
            }
        }
    }

    /// Steps until nothing is pending or `deadline`; returns true when idle.
    pub fn run_idle(&mut self, deadline: Instant) -> bool {
        self.run_until(|s| s.next_event().is_none(), deadline)
    }
}

/// The NIC that has `ip`; moves its entry to the front, since consecutive datagrams mostly go
/// to the same place.
/// The zero-latency hand-off of [`SimNet::drain_nic`] and [`SimNet::pump_direct`]: a datagram
/// goes straight from a NIC into the due ring, written in place.
struct Direct<'a> {
    due: &'a mut due::Due,
    routes: &'a mut [(IpAddr, usize)],
    stats: &'a mut SimStats,
    seq: &'a mut u64,
}

impl Direct<'_> {
    /// `nic` transmits one datagram into the due ring; false when it had nothing to send.
    #[inline(always)]
    fn send(self, nic: &mut Nic, now: Instant) -> bool {
        let slot = self.due.next_free();
        let Some(t) = nic.poll_transmit(now, &mut slot.data) else {
            return false;
        };
        self.stats.transmitted += 1;
        match route(self.routes, t.dst_ip) {
            Some(to) => {
                slot.to = to;
                slot.meta = t.rx_meta();
                slot.len = t.len;
                self.due.commit();
                *self.seq += 1;
            }
            None => self.stats.unroutable += 1,
        }
        true
    }
}

#[inline]
fn route(routes: &mut [(IpAddr, usize)], ip: IpAddr) -> Option<usize> {
    if let Some(&(a, i)) = routes.first() {
        if a == ip {
            return Some(i);
        }
    }
    let k = routes.iter().position(|(a, _)| *a == ip)?;
    routes.swap(0, k);
    Some(routes[0].1)
}
