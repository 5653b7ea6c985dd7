//! [`TxBatch`]: turns a stream of finished RoCE packets into as few GSO sends as possible.
//!
//! The engine writes each packet (BTH .. ICRC, sealed for IPv4 ID 0 and the source port it chose)
//! straight into [`TxBatch::space`] and calls [`TxBatch::commit`]. Consecutive packets to the same
//! destination with the same source port, TOS, TTL and size land back to back in one 64-byte
//! aligned 64 KiB buffer and leave as one UDP GSO send (a shorter packet may close a run). The
//! ICRC of each packet is patched in place (no CRC recomputation, see
//! [`super::headers::patch_icrc_ipv4_id`]) for what the kernel will really send: IPv4 ID *k* for
//! segment *k* and the socket's real source port. A packet that cannot join the current run and
//! was written at its tail is copied to a fresh buffer (in ≤ 2 KiB pieces, which avoids the glibc
//! misaligned-`memcpy` cliff).

use std::io;
use std::net::IpAddr;

use super::cmsg::AlignedBuf;
use super::datagram::{OutDatagram, GRO_SLOT};
use super::headers::{gso_segment_ip_id, patch_icrc_ipv4_id, patch_icrc_udp_sport};
use super::socket::{Socket, Wait, MAX_GSO_SEGMENTS, MAX_UDP_PAYLOAD};

/// How a packet written into [`TxBatch::space`] was addressed and sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxMeta {
    /// Destination IP.
    pub dst: IpAddr,
    /// Destination UDP port (4791).
    pub dst_port: u16,
    /// The UDP source port the ICRC was sealed with.
    pub src_port: u16,
    /// TOS / traffic class (`None`: socket default).
    pub tos: Option<u8>,
    /// TTL / hop limit (`None`: socket default).
    pub ttl: Option<u8>,
}

/// Runs the kernel refused for their destination (see [`TxBatch::take_refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The destination.
    pub dst: IpAddr,
    /// The errno of the send (ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EINVAL, …).
    pub errno: i32,
    /// Packets in the run.
    pub packets: usize,
}

/// Errors of a send that concern the datagram or its destination, not the socket: the other
/// datagrams of the flush can still go.
fn refuses_destination(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::EADDRNOTAVAIL
                | libc::EAFNOSUPPORT
                | libc::EINVAL
                | libc::EPERM
                | libc::EACCES
        )
    )
}

#[derive(Debug, Clone, Copy)]
struct Group {
    meta: TxMeta,
    wire_sport: u16,
    seg: usize,
    len: usize,
    count: usize,
    closed: bool,
}

/// A reusable set of GSO buffers being filled (see the module docs).
#[derive(Debug)]
pub struct TxBatch {
    bufs: Vec<AlignedBuf>,
    groups: Vec<Group>,
    max_packet: usize,
    pending: Option<(usize, usize)>,
    packets: usize,
    refused: Vec<Refused>,
}

impl TxBatch {
    /// `buffers` GSO buffers of 64 KiB (plus one spare, for moving a packet that cannot join
    /// its run) for packets of at most `max_packet` bytes.
    pub fn new(buffers: usize, max_packet: usize) -> Self {
        TxBatch {
            bufs: (0..buffers.max(1) + 1)
                .map(|_| AlignedBuf::new(GRO_SLOT, 64))
                .collect(),
            groups: Vec::with_capacity(buffers.max(1)),
            max_packet: max_packet.clamp(16, GRO_SLOT),
            pending: None,
            packets: 0,
            refused: Vec::new(),
        }
    }

    /// The runs flushes since the last call skipped because the kernel refused their
    /// destination (they are not in the flushes' counts).
    pub fn take_refused(&mut self) -> Vec<Refused> {
        std::mem::take(&mut self.refused)
    }

    /// True when a flush skipped a run for its destination since the last
    /// [`TxBatch::take_refused`].
    pub fn has_refused(&self) -> bool {
        !self.refused.is_empty()
    }

    /// Packets committed and not yet flushed.
    pub fn len(&self) -> usize {
        self.packets
    }

    /// Runs (future GSO sends) committed and not yet flushed.
    pub fn runs(&self) -> usize {
        self.groups.len()
    }

    /// True when nothing is waiting to be flushed.
    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// Room for the next packet (`max_packet` bytes): the tail of the current run when it has
    /// room, else the start of a free buffer. `None` when every buffer is in use: flush first.
    pub fn space(&mut self) -> Option<&mut [u8]> {
        self.space_sealed(false).map(|(_, b)| b)
    }

    /// [`TxBatch::space`], with the IPv4 identification a packet written there will carry if
    /// it joins the run it is written at: segment *k* of a GSO send carries ID *k* (`gso`: the
    /// socket sends with kernel GSO, [`super::Features::gso`]); 0 at the start of a buffer. A
    /// packet sealed for it needs no ICRC patch: commit it with [`TxBatch::commit_sealed`].
    #[inline]
    pub fn space_sealed(&mut self, gso: bool) -> Option<(u16, &mut [u8])> {
        // A free buffer must remain while offering a run's tail, in case the packet cannot join.
        if self.groups.len() >= self.bufs.len() {
            return None;
        }
        let (g, off, id) = match self.groups.last() {
            Some(l)
                if !l.closed
                    && l.count < MAX_GSO_SEGMENTS
                    && l.len + self.max_packet <= MAX_UDP_PAYLOAD =>
            {
                let id = if gso { gso_segment_ip_id(l.count) } else { 0 };
                (self.groups.len() - 1, l.len, id)
            }
            _ => (self.groups.len(), 0, 0),
        };
        self.pending = Some((g, off));
        Some((
            id,
            &mut self.bufs[g].as_mut_slice()[off..off + self.max_packet],
        ))
    }

    /// Records the packet of `len` bytes just written into the last [`TxBatch::space`], patching
    /// its ICRC for the IPv4 ID and source port `sock` will really send.
    pub fn commit(&mut self, sock: &mut Socket, meta: TxMeta, len: usize) {
        self.commit_sealed(sock, meta, len, 0)
    }

    /// [`TxBatch::commit`] for a packet whose ICRC was sealed for IPv4 identification
    /// `sealed_id` (see [`TxBatch::space_sealed`]); patched only if it lands elsewhere.
    pub fn commit_sealed(&mut self, sock: &mut Socket, meta: TxMeta, len: usize, sealed_id: u16) {
        let (g, off) = self
            .pending
            .take()
            .expect("TxBatch::commit without TxBatch::space");
        assert!(
            len <= self.max_packet && len >= 16,
            "bad packet length {len}"
        );
        let wire_sport = sock.source_port(meta.src_port);
        let v6 = meta.dst.is_ipv6();
        let gso = sock.features().gso;
        let joins = off > 0 && {
            let l = &self.groups[g];
            l.meta == meta && len <= l.seg
        };
        let (g, off) = if joins || off == 0 {
            (g, off)
        } else {
            // Move the packet from the tail of run `g` to a fresh buffer.
            let ng = self.groups.len();
            assert!(
                ng < self.bufs.len(),
                "TxBatch::space promised a free buffer"
            );
            let (a, b) = self.bufs.split_at_mut(ng);
            let src = &a[g].as_slice()[off..off + len];
            let dst = &mut b[0].as_mut_slice()[..len];
            for (d, s) in dst.chunks_mut(2048).zip(src.chunks(2048)) {
                d.copy_from_slice(s);
            }
            (ng, 0)
        };
        let p = &mut self.bufs[g].as_mut_slice()[off..off + len];
        if wire_sport != meta.src_port {
            patch_icrc_udp_sport(p, v6, meta.src_port, wire_sport);
        }
        // What the kernel will give this packet: ID k as segment k of a GSO send.
        let id = if off > 0 && gso {
            gso_segment_ip_id(self.groups[g].count)
        } else {
            0
        };
        if !v6 && id != sealed_id {
            patch_icrc_ipv4_id(p, sealed_id, id);
        }
        if off == 0 {
            self.groups.push(Group {
                meta,
                wire_sport,
                seg: len,
                len,
                count: 1,
                closed: false,
            });
        } else {
            let l = &mut self.groups[g];
            l.len += len;
            l.count += 1;
            l.closed = len < l.seg;
        }
        self.packets += 1;
    }

    /// Sends everything committed (one GSO send per run) and empties the batch. Returns the
    /// number of packets sent. A run whose destination the kernel refuses (no route, address
    /// not available, …: [`TxBatch::take_refused`]) is skipped and the rest still go; on any
    /// other partial send the unsent runs are dropped (like a full NIC queue), and counted out
    /// of the return value.
    pub fn flush(&mut self, sock: &mut Socket, wait: Wait) -> io::Result<usize> {
        self.pending = None;
        if self.groups.is_empty() {
            return Ok(0);
        }
        let mut sent_packets = 0;
        let mut start = 0;
        let mut result = Ok(());
        // After a partial send, one more call without waiting says why it stopped: the error
        // of the next run (then skipped if it is its destination's), or a full socket.
        let mut probing = false;
        // Build datagrams in chunks to keep a fixed-size array on the stack (no allocation); a
        // small one for the common flush of one or two runs (a latency-bound ping-pong flushes
        // one run per message: filling 64 entries each time would cost more than the rest).
        const CHUNK: usize = 64;
        const SMALL: usize = 4;
        while start < self.groups.len() {
            let end = (start + CHUNK).min(self.groups.len());
            let blank = OutDatagram::new(IpAddr::from([0u8; 4]), 0, &[]);
            let mut small = [blank; SMALL];
            let mut large;
            let d: &mut [OutDatagram<'_>] = if end - start <= SMALL {
                &mut small
            } else {
                large = [blank; CHUNK];
                &mut large
            };
            for (i, gr) in self.groups[start..end].iter().enumerate() {
                d[i] = OutDatagram {
                    dst: gr.meta.dst,
                    dst_port: gr.meta.dst_port,
                    src_port: gr.wire_sport,
                    tos: gr.meta.tos,
                    ttl: gr.meta.ttl,
                    payload: &self.bufs[start + i].as_slice()[..gr.len],
                    gso_size: (gr.count > 1).then_some(gr.seg as u16),
                };
            }
            let w = if probing { Wait::NonBlocking } else { wait };
            match sock.send_batch(&d[..end - start], w) {
                Ok(n) => {
                    sent_packets += self.groups[start..start + n]
                        .iter()
                        .map(|g| g.count)
                        .sum::<usize>();
                    let all = n == end - start;
                    start += n;
                    if !all {
                        if probing && n == 0 {
                            break;
                        }
                        probing = true;
                        continue;
                    }
                    probing = false;
                }
                Err(e) if refuses_destination(&e) => {
                    let g = &self.groups[start];
                    self.refused.push(Refused {
                        dst: g.meta.dst,
                        errno: e.raw_os_error().unwrap_or(0),
                        packets: g.count,
                    });
                    start += 1;
                    probing = false;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.groups.clear();
        self.packets = 0;
        result.map(|_| sent_packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture_tests::payload;
    use crate::headers::{HeaderFacts, WireHeaders};
    use crate::{IcrcCounters, IcrcPolicy, IcrcVerdict, RecvBatch, SocketConfig};
    use std::time::Duration;

    /// Engine packets sealed as `emu` seals them (ID 0, per-QP source port) are coalesced into
    /// GSO runs, patched for the real ID and source port, and all verify strictly at a receiver.
    #[test]
    fn coalesced_engine_packets_verify() {
        let cfg = SocketConfig {
            port: 0,
            ..Default::default()
        };
        let mut a = Socket::bind("127.0.0.1".parse().unwrap(), cfg).unwrap();
        let mut b = Socket::bind("127.0.0.2".parse().unwrap(), cfg).unwrap();
        let (pa, pb) = (a.local_addr(), b.local_addr());
        let mut tx = TxBatch::new(8, 1100);
        // (size, tos, count): a long run, a short closer, a TOS change, a run over 64 segments.
        let plan = [
            (1040usize, None, 100usize),
            (500, None, 1),
            (300, Some(0x02u8), 3),
            (272, None, 70),
        ];
        let mut sent = Vec::new();
        let mut psn = 0u32;
        for &(size, tos, count) in &plan {
            for _ in 0..count {
                let meta = TxMeta {
                    dst: pb.ip(),
                    dst_port: pb.port(),
                    src_port: 0xC123,
                    tos,
                    ttl: None,
                };
                let mut p = payload(psn, size - 16);
                psn += 1;
                WireHeaders::new(&HeaderFacts {
                    src: pa.ip(),
                    dst: pb.ip(),
                    sport: 0xC123,
                    dport: pb.port(),
                    payload_len: p.len(),
                    ip_id: 0,
                    tos: 0,
                    ttl: 64,
                })
                .fill_icrc(&mut p)
                .unwrap();
                let space = match tx.space() {
                    Some(s) => s,
                    None => {
                        tx.flush(&mut a, Wait::Block(Some(Duration::from_secs(5))))
                            .unwrap();
                        tx.space().unwrap()
                    }
                };
                space[..p.len()].copy_from_slice(&p);
                tx.commit(&mut a, meta, p.len());
                sent.push(p);
            }
        }
        // 100 × 1040 B: runs of 62 (64 KiB) and 38 closed by the 500 B packet; 3 with TOS 2;
        // 70 × 272 B: 64 + 6.
        assert_eq!(tx.runs(), 5);
        assert_eq!(tx.len(), 174);
        tx.flush(&mut a, Wait::Block(Some(Duration::from_secs(5))))
            .unwrap();
        assert!(tx.is_empty());
        let mut max_gro_index = 0;
        let c = IcrcCounters::default();
        let mut batch = RecvBatch::new(16);
        let mut got = 0;
        while got < sent.len() {
            let n = b
                .recv_batch(&mut batch, Wait::Block(Some(Duration::from_secs(5))))
                .unwrap();
            assert!(n > 0, "timed out after {got}");
            for d in batch.iter() {
                // The payload differs from what the engine sealed only in the patched ICRC.
                let want = &sent[got];
                assert_eq!(d.payload.len(), want.len());
                assert_eq!(&d.payload[..want.len() - 4], &want[..want.len() - 4]);
                assert_eq!(d.src, pa, "sent from the socket's own port");
                assert_eq!(
                    d.check_icrc(IcrcPolicy::Strict, &c),
                    IcrcVerdict::Verified,
                    "packet {got} (GRO index {})",
                    d.gro_index
                );
                max_gro_index = max_gro_index.max(d.gro_index);
                got += 1;
            }
        }
        assert_eq!(c.snapshot(), (sent.len() as u64, 0, 0));
        if a.features().gso && b.features().gro {
            assert_eq!(
                max_gro_index, 63,
                "a 64-segment GSO run arrived as one GRO buffer"
            );
        }
    }

    /// A run whose destination the kernel refuses (192.0.2.1, TEST-NET-1, from a socket on
    /// loopback: ENETUNREACH without a default route, EINVAL with one) is skipped and reported,
    /// and the runs behind it in the same flush still go (they used to be dropped with it).
    #[test]
    fn a_refused_destination_does_not_take_the_rest_of_the_flush_with_it() {
        let cfg = SocketConfig {
            port: 0,
            ..Default::default()
        };
        let mut a = Socket::bind("127.0.0.1".parse().unwrap(), cfg).unwrap();
        let mut b = Socket::bind("127.0.0.2".parse().unwrap(), cfg).unwrap();
        let pb = b.local_addr();
        let far: IpAddr = "192.0.2.1".parse().unwrap();
        let mut tx = TxBatch::new(8, 1100);
        let mut psn = 0;
        for (dst, count) in [(pb.ip(), 2), (far, 3), (pb.ip(), 2)] {
            for _ in 0..count {
                let p = payload(psn, 200);
                psn += 1;
                let space = tx.space().unwrap();
                space[..p.len()].copy_from_slice(&p);
                let meta = TxMeta {
                    dst,
                    dst_port: pb.port(),
                    src_port: 0xC123,
                    tos: None,
                    ttl: None,
                };
                tx.commit(&mut a, meta, p.len());
            }
        }
        assert_eq!(tx.runs(), 3);
        let sent = tx
            .flush(&mut a, Wait::Block(Some(Duration::from_secs(5))))
            .unwrap();
        assert_eq!(sent, 4);
        let r = tx.take_refused();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].dst, r[0].packets), (far, 3));
        assert!(
            [libc::ENETUNREACH, libc::EINVAL, libc::EHOSTUNREACH].contains(&r[0].errno),
            "errno {}",
            r[0].errno
        );
        assert!(!tx.has_refused());
        let mut batch = RecvBatch::new(16);
        let mut got = 0;
        while got < 4 {
            let n = b
                .recv_batch(&mut batch, Wait::Block(Some(Duration::from_secs(5))))
                .unwrap();
            assert!(n > 0, "timed out after {got}");
            got += batch.iter().count();
        }
        assert_eq!(got, 4);
    }

    /// Random sizes, TOS values and two destinations through a small batch (frequent moves,
    /// closes and flushes): every packet arrives in order per destination and verifies strictly.
    /// Packets are sealed for ID 0 (`commit`), for the ID [`TxBatch::space_sealed`] predicts
    /// (`commit_sealed`: moved packets need a patch back), or for an unrelated ID (a packet held
    /// and committed later): each is patched to what the kernel sends.
    #[test]
    fn random_mix_through_small_batch() {
        let cfg = SocketConfig {
            port: 0,
            ..Default::default()
        };
        let mut a = Socket::bind("127.0.0.1".parse().unwrap(), cfg).unwrap();
        let mut rx = [
            Socket::bind("127.0.0.2".parse().unwrap(), cfg).unwrap(),
            Socket::bind("127.0.0.3".parse().unwrap(), cfg).unwrap(),
        ];
        let pa = a.local_addr();
        let mut tx = TxBatch::new(3, 1100);
        let mut seed = 0x1234_5678u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let mut sent: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
        let wait = Wait::Block(Some(Duration::from_secs(5)));
        for psn in 0..600u32 {
            let r = rnd();
            let which = if r % 7 == 0 { 1 } else { 0 };
            let dst = rx[which].local_addr();
            let size = [64usize, 300, 1040, 1040, 1040][(r >> 3) % 5];
            let tos = if (r >> 6) % 11 == 0 { Some(2u8) } else { None };
            let sport = if (r >> 9) % 13 == 0 { 0xC001 } else { 0xC002 };
            let mut p = payload(psn, size - 16);
            if tx.space().is_none() {
                tx.flush(&mut a, wait).unwrap();
            }
            let gso = a.features().gso;
            let (predicted, _) = tx.space_sealed(gso).unwrap();
            let sealed = match (r >> 12) % 3 {
                0 => 0,
                1 => predicted,
                _ => (r >> 16) as u16,
            };
            WireHeaders::new(&HeaderFacts {
                src: pa.ip(),
                dst: dst.ip(),
                sport,
                dport: dst.port(),
                payload_len: p.len(),
                ip_id: sealed,
                tos: 0,
                ttl: 64,
            })
            .fill_icrc(&mut p)
            .unwrap();
            let (_, sp) = tx.space_sealed(gso).unwrap();
            sp[..p.len()].copy_from_slice(&p);
            let meta = TxMeta {
                dst: dst.ip(),
                dst_port: dst.port(),
                src_port: sport,
                tos,
                ttl: None,
            };
            tx.commit_sealed(&mut a, meta, p.len(), sealed);
            sent[which].push(p);
        }
        tx.flush(&mut a, wait).unwrap();
        let c = IcrcCounters::default();
        for (k, s) in rx.iter_mut().enumerate() {
            let mut batch = RecvBatch::new(16);
            let mut got = 0;
            while got < sent[k].len() {
                assert!(s.recv_batch(&mut batch, wait).unwrap() > 0, "timed out");
                for d in batch.iter() {
                    let want = &sent[k][got];
                    assert_eq!(&d.payload[..d.payload.len() - 4], &want[..want.len() - 4]);
                    assert_eq!(d.check_icrc(IcrcPolicy::Strict, &c), IcrcVerdict::Verified);
                    got += 1;
                }
            }
        }
        assert_eq!(c.snapshot(), (600, 0, 0));
    }
}
