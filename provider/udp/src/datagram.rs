//! Datagram metadata shapes shared with the NIC engine, and the preallocated receive batch.

use std::net::{IpAddr, SocketAddr};

use super::cmsg::{self, RecvInfo};
use super::headers::{
    gso_segment_ip_id, icrc_verdict, recover_ipv4_id, solve_ipv4_id, HeaderFacts, IcrcCounters,
    IcrcPolicy, IcrcVerdict, WireHeaders,
};
use super::sys::{RecvMeta, RecvSlots};
use roce_wire::ROCE_V2_UDP_PORT;

/// One datagram (or, with `gso_size`, several equal-size datagrams) to send.
///
/// `payload` is the UDP payload, BTH .. ICRC, already complete. The ICRC must have been computed
/// over the headers the kernel will really send: see [`super::Socket::wire_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutDatagram<'a> {
    /// Destination IP (same family as the socket; the emulated peer NIC's address).
    pub dst: IpAddr,
    /// Destination UDP port (4791).
    pub dst_port: u16,
    /// The UDP source port asked for (rxe: `0xC000 + hash(qpn)`). Under
    /// [`super::SourcePorts::Fixed`] the socket's own port is used instead.
    pub src_port: u16,
    /// IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN). `None`: the socket default (0).
    pub tos: Option<u8>,
    /// TTL / hop limit. `None`: the socket default (64).
    pub ttl: Option<u8>,
    /// BTH .. ICRC; or `n` segments back to back when `gso_size` is set.
    pub payload: &'a [u8],
    /// Send `payload` as segments of this many bytes (the last may be shorter), one UDP datagram
    /// each, in one system call (UDP GSO). Without kernel GSO the socket splits it itself.
    pub gso_size: Option<u16>,
}

impl<'a> OutDatagram<'a> {
    /// A datagram to `dst:4791` with default TOS/TTL and no GSO.
    pub fn new(dst: IpAddr, src_port: u16, payload: &'a [u8]) -> Self {
        OutDatagram {
            dst,
            dst_port: ROCE_V2_UDP_PORT,
            src_port,
            tos: None,
            ttl: None,
            payload,
            gso_size: None,
        }
    }

    /// The number of UDP datagrams this describes.
    pub fn segments(&self) -> usize {
        match self.gso_size {
            Some(g) if g > 0 && self.payload.len() > g as usize => {
                self.payload.len().div_ceil(g as usize)
            }
            _ => 1,
        }
    }

    /// The payload of segment `i` (`i < segments()`).
    pub fn segment(&self, i: usize) -> &'a [u8] {
        match self.gso_size {
            Some(g) if self.segments() > 1 => {
                let g = g as usize;
                let s = i * g;
                &self.payload[s..(s + g).min(self.payload.len())]
            }
            _ => self.payload,
        }
    }
}

/// One received UDP datagram (one GRO segment), borrowed from a [`RecvBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InDatagram<'a> {
    /// Source IP and UDP port.
    pub src: SocketAddr,
    /// Destination IP of the IP header (from `IP_PKTINFO`; the socket's address if absent).
    pub dst: IpAddr,
    /// Destination UDP port (the socket's port).
    pub dst_port: u16,
    /// IPv4 TOS / IPv6 traffic class, when the kernel reported it.
    pub tos: Option<u8>,
    /// TTL / hop limit, when reported.
    pub ttl: Option<u8>,
    /// The IPv4 identification, if known. Always `None` from a UDP socket: the kernel does not
    /// report it. See [`super::headers`] for what that means for the ICRC.
    pub ip_id: Option<u16>,
    /// BTH .. ICRC.
    pub payload: &'a [u8],
    /// Index of this datagram inside a GRO-coalesced buffer (0 without GRO).
    pub gro_index: u16,
    /// The datagram was cut because the buffer was too small.
    pub truncated: bool,
}

impl InDatagram<'_> {
    /// The IP and UDP headers this datagram most likely had on the wire, for ICRC checks: the
    /// IPv4 identification is `ip_id` when known, else what our own senders use (0, or the GSO
    /// rule applied to `gro_index`). Pair with [`super::check_icrc`] and an
    /// [`super::IcrcPolicy`], since a foreign IPv4 sender's identification is unknowable here.
    pub fn wire_headers(&self) -> WireHeaders {
        WireHeaders::new(&HeaderFacts {
            src: self.src.ip(),
            dst: self.dst,
            sport: self.src.port(),
            dport: self.dst_port,
            payload_len: self.payload.len(),
            ip_id: self
                .ip_id
                .unwrap_or_else(|| gso_segment_ip_id(self.gro_index as usize)),
            tos: self.tos.unwrap_or(0),
            ttl: self.ttl.unwrap_or(64),
        })
    }
}

impl InDatagram<'_> {
    /// Checks this datagram's ICRC over [`InDatagram::wire_headers`] under `policy`, counting
    /// the outcome (exact for IPv6 and when `ip_id` is known).
    pub fn check_icrc(&self, policy: IcrcPolicy, counters: &IcrcCounters) -> IcrcVerdict {
        let v4 = self.src.is_ipv4() && self.dst.is_ipv4();
        let exact = !v4 || self.ip_id.is_some();
        let id = self
            .ip_id
            .unwrap_or_else(|| gso_segment_ip_id(self.gro_index as usize));
        // The ICRC computed from the facts (no header rebuild), once: `matches` compares it,
        // `recover` solves its difference from the stored one for the real ID. The rebuilt
        // headers only for what that cannot take (mixed address families, a runt).
        let computed = std::cell::Cell::new(None::<u32>);
        let matches = || {
            let n = self.payload.len();
            let fast = (n >= 16).then(|| {
                let (body, tail) = self.payload.split_at(n - roce_wire::ICRC_LEN);
                roce_wire::icrc::compute_udp(
                    self.src.ip(),
                    self.dst,
                    self.src.port(),
                    self.dst_port,
                    id,
                    body,
                )
                .map(|c| {
                    computed.set(Some(c));
                    cfg!(fuzzing) || c.to_le_bytes() == tail
                })
            });
            match fast.flatten() {
                Some(m) => m,
                None => self.wire_headers().verify_icrc(self.payload).is_ok(),
            }
        };
        let recover = || match computed.get() {
            Some(c) if v4 => {
                let stored = roce_wire::icrc::stored(self.payload).ok()?;
                solve_ipv4_id(stored, c, id, self.payload.len())
            }
            _ => recover_ipv4_id(&self.wire_headers(), self.payload),
        };
        icrc_verdict(exact, policy, matches, recover, counters)
    }
}

/// Default receive slot size: large enough for a 64 KiB GRO buffer.
pub const GRO_SLOT: usize = 65536;
/// Alignment of each receive slot.
pub const SLOT_ALIGN: usize = 64;

/// A reusable set of receive buffers for [`super::Socket::recv_batch`].
///
/// Each slot is `slot_size` bytes (default [`GRO_SLOT`]) and starts at a 64-byte-aligned address
/// plus `headroom`. `headroom` lets a caller choose where the payload lands relative to a
/// 64-byte boundary (e.g. `64 - 28` puts the data after BTH+RETH on a boundary), which avoids
/// the misaligned-`memcpy` cliff described in `perf-facts.md` when copying it out.
#[derive(Debug)]
pub struct RecvBatch {
    pub(crate) slots: RecvSlots,
    pub(crate) meta: Vec<RecvMeta>,
    pub(crate) info: Vec<RecvInfo>,
    pub(crate) filled: usize,
    pub(crate) local: SocketAddr,
}

impl RecvBatch {
    /// `slots` buffers of [`GRO_SLOT`] bytes.
    pub fn new(slots: usize) -> Self {
        Self::with_layout(slots, GRO_SLOT, 0)
    }

    /// `slots` buffers of `slot_size` usable bytes each, starting `headroom` bytes past a 64-byte
    /// boundary.
    pub fn with_layout(slots: usize, slot_size: usize, headroom: usize) -> Self {
        let slots = slots.clamp(1, 1024);
        RecvBatch {
            slots: RecvSlots::new(slots, slot_size, headroom, cmsg::RECV_SPACE),
            meta: vec![RecvMeta::default(); slots],
            info: vec![RecvInfo::default(); slots],
            filled: 0,
            local: SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of slots (buffers) filled by the last receive. A GRO slot holds several datagrams.
    pub fn buffers(&self) -> usize {
        self.filled
    }

    /// Total payload bytes in the last receive.
    pub fn bytes(&self) -> usize {
        self.meta[..self.filled].iter().map(|m| m.len).sum()
    }

    /// Highest `SO_RXQ_OVFL` drop count seen in the last receive (cumulative for the socket).
    pub fn drops(&self) -> Option<u32> {
        self.info[..self.filled]
            .iter()
            .filter_map(|i| i.drops)
            .max()
    }

    /// Number of datagrams (after splitting GRO buffers) in the last receive.
    pub fn datagrams(&self) -> usize {
        (0..self.filled).map(|i| self.slot_segments(i)).sum()
    }

    fn slot_segments(&self, i: usize) -> usize {
        gro_segments(self.meta[i].len, self.info[i].gro_size)
    }

    /// The raw buffer of slot `i` (GRO-coalesced when `gro_size(i)` is set).
    pub fn slot(&self, i: usize) -> &[u8] {
        &self.slots.data(i)[..self.meta[i].len]
    }

    /// The GRO segment size reported for slot `i`.
    pub fn gro_size(&self, i: usize) -> Option<u16> {
        self.info[i].gro_size
    }

    /// Iterates every datagram of the last receive, splitting GRO buffers into segments.
    pub fn iter(&self) -> impl Iterator<Item = InDatagram<'_>> + '_ {
        (0..self.filled).flat_map(move |i| {
            let m = &self.meta[i];
            let info = &self.info[i];
            let data = self.slot(i);
            let src = m.src.unwrap_or(self.local);
            let dst = info.dst.unwrap_or(self.local.ip());
            let truncated = m.flags & libc::MSG_TRUNC != 0;
            split_gro(data, info.gro_size)
                .enumerate()
                .map(move |(k, payload)| InDatagram {
                    src,
                    dst,
                    dst_port: self.local.port(),
                    tos: info.tos,
                    ttl: info.ttl,
                    ip_id: None,
                    payload,
                    gro_index: k as u16,
                    truncated,
                })
        })
    }

    pub(crate) fn control(&self, i: usize) -> &[u8] {
        self.slots.control(i, self.meta[i].control_len)
    }
}

/// How many datagrams a GRO buffer of `len` bytes holds: what [`split_gro`] yields (an empty
/// buffer is one empty datagram).
fn gro_segments(len: usize, gro_size: Option<u16>) -> usize {
    match gro_size {
        Some(g) if g > 0 && len > g as usize => len.div_ceil(g as usize),
        _ => 1,
    }
}

/// Splits a GRO buffer into its datagrams: equal `gro_size` pieces, the last possibly shorter.
/// Without a segment size the whole buffer is one datagram.
pub fn split_gro(buf: &[u8], gro_size: Option<u16>) -> impl Iterator<Item = &[u8]> {
    let g = match gro_size {
        Some(g) if g > 0 && buf.len() > g as usize => g as usize,
        _ => buf.len().max(1),
    };
    // `chunks` yields nothing for an empty buffer, but a zero-length UDP datagram is still one
    // datagram: it is counted and dropped as a runt, not lost without a trace (as
    // `RecvBatch::datagrams` already counted it).
    let empty = buf.is_empty().then_some(buf);
    buf.chunks(g).chain(empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gro_split_equal_and_short_tail() {
        let b: Vec<u8> = (0..250u8).collect();
        let parts: Vec<&[u8]> = split_gro(&b, Some(100)).collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], &b[..100]);
        assert_eq!(parts[1], &b[100..200]);
        assert_eq!(parts[2], &b[200..]);
        assert_eq!(split_gro(&b, None).count(), 1);
        assert_eq!(split_gro(&b, Some(250)).count(), 1);
        assert_eq!(split_gro(&b, Some(0)).count(), 1);
        assert_eq!(split_gro(&b[..200], Some(100)).count(), 2);
        assert_eq!(
            split_gro(&[], Some(100)).collect::<Vec<_>>(),
            [&[] as &[u8]]
        );
        assert_eq!(split_gro(&[], None).count(), 1);
    }

    /// `RecvBatch::datagrams` (which counts) and `RecvBatch::iter` (which hands datagrams to the
    /// engine) agree for every buffer length and segment size, and the pieces are the buffer.
    #[test]
    fn gro_split_count_matches_the_count_for_every_length() {
        let b: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        for len in 0..=b.len() {
            for g in std::iter::once(None).chain((0..=301u16).map(Some)) {
                let parts: Vec<&[u8]> = split_gro(&b[..len], g).collect();
                assert_eq!(parts.len(), gro_segments(len, g), "len {len} gro {g:?}");
                assert_eq!(parts.concat(), &b[..len]);
            }
        }
    }

    /// Under `RecoverId` a datagram whose sender used another IPv4 ID (kernel rxe, hardware, a
    /// GSO segment received without GRO) is accepted with exactly that ID, solved from the CRC
    /// already computed for the guess; one corrupted bit makes it bad. Every length from a bare
    /// BTH to 4 KiB of payload, at GRO index 0 and 3.
    #[test]
    fn recover_id_finds_the_senders_id_from_the_one_crc() {
        use super::super::{IcrcCounters, IcrcPolicy, IcrcVerdict};
        let (src, dst) = ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
        let counters = IcrcCounters::default();
        for (n, id) in [
            (16usize, 0x1234u16),
            (20, 1),
            (80, 0xFFFF),
            (1040, 0x8001),
            (4112, 47),
        ] {
            let mut d = vec![0u8; 28 + n];
            for (i, b) in d[28..].iter_mut().enumerate() {
                *b = (i * 7 + 1) as u8;
            }
            d[0] = 0x45;
            d[2..4].copy_from_slice(&((28 + n) as u16).to_be_bytes());
            d[4..6].copy_from_slice(&id.to_be_bytes());
            d[6] = 0x40;
            d[9] = 17;
            d[12..16].copy_from_slice(&[198, 18, 0, 1]);
            d[16..20].copy_from_slice(&[198, 18, 0, 2]);
            d[20..22].copy_from_slice(&0xC001u16.to_be_bytes());
            d[22..24].copy_from_slice(&4791u16.to_be_bytes());
            d[24..26].copy_from_slice(&((8 + n) as u16).to_be_bytes());
            roce_wire::icrc::fill_ipv4_datagram(&mut d).unwrap();
            for gro_index in [0u16, 3] {
                let mut dg = InDatagram {
                    src: SocketAddr::new(src, 0xC001),
                    dst,
                    dst_port: 4791,
                    tos: None,
                    ttl: None,
                    ip_id: None,
                    payload: &d[28..],
                    gro_index,
                    truncated: false,
                };
                let v = dg.check_icrc(IcrcPolicy::RecoverId, &counters);
                assert_eq!(v, IcrcVerdict::RecoveredId(id), "n {n} gro {gro_index}");
                let mut bad = d[28..].to_vec();
                bad[n / 2] ^= 0x10;
                dg.payload = &bad;
                let v = dg.check_icrc(IcrcPolicy::RecoverId, &counters);
                assert_eq!(v, IcrcVerdict::Bad, "n {n} gro {gro_index}: corrupted");
            }
        }
    }

    #[test]
    fn out_datagram_segments() {
        let p = [0u8; 250];
        let mut d = OutDatagram::new("127.0.0.2".parse().unwrap(), 0xC000, &p);
        assert_eq!(d.segments(), 1);
        assert_eq!(d.segment(0).len(), 250);
        d.gso_size = Some(100);
        assert_eq!(d.segments(), 3);
        assert_eq!(d.segment(2).len(), 50);
        d.gso_size = Some(300);
        assert_eq!(d.segments(), 1);
    }

    #[test]
    fn recv_batch_layout() {
        let b = RecvBatch::with_layout(4, 2048, 36);
        assert_eq!(b.capacity(), 4);
        for i in 0..4 {
            let d = b.slots.data(i);
            assert_eq!(d.as_ptr() as usize % SLOT_ALIGN, 36);
            assert_eq!(d.len(), 2048);
        }
        assert_eq!(b.iter().count(), 0);
    }
}
