//! The transmit path: draining `poll_transmit` into the GSO batch (fault injector, pcap, ICRC
//! patch), and the [`AckQueue`] that sends plain RC ACKs last in a burst.

use super::*;
use crate::shared::direct::Route;
use roce_emu::Unroutable;

/// Packets after which a long transmit burst flushes and receives once before it goes on: a
/// PSN-sequence NAK that arrived meanwhile rewinds the requester before it sends the rest of
/// its window (which the responder would drop, go-back-N). One 64 KiB message at MTU 4096.
/// 16 rather than 32: the responder discards about 20 packets per loss instead of 29, for a
/// better lossy rate; 8 discards 14, but its extra system calls cost as much as that saves
/// (the measurements: docs/journal.md, 2026-11-30).
const PIECE_PKTS: usize = 16;
/// How long after the engine's last retry long bursts go out in pieces. Without loss they do
/// not: the extra `sendmmsg` and `recvmmsg` per piece cost a lossless 64 KiB Write stream about
/// 13% (loss_bw --loss 0, five alternating runs); the first loss of a quiet period costs up to the
/// rest of a window, the next ones (1% loss: every ~100 packets) find pieces on.
const PIECES_NS: u64 = 100_000_000;

impl Shared {
    /// Drains `poll_transmit` into the TxBatch (fault injector, pcap) and flushes it.
    pub(super) fn transmit(&self, e: &mut Engine, now: Instant) -> usize {
        if e.tx_deferred {
            e.tx_deferred = false;
            self.tx_deferred_pending.store(false, Relaxed);
        }
        if e.doorbell.pending() {
            e.doorbell.rung();
            self.doorbell_at.store(u64::MAX, Relaxed);
        }
        let mut total = 0;
        // Pieces: recently lossy, and not inside `receive` (which holds the batch).
        let retries = e.nic.counters().completer_retry_err;
        if retries != e.retries_seen {
            e.retries_seen = retries;
            e.pieces_until = now.as_nanos().saturating_add(PIECES_NS);
        }
        let pieces = e.rx.is_some() && now.as_nanos() < e.pieces_until;
        // The direct path's tables carry the helpers' heartbeats in CLOCK_MONOTONIC.
        let wall = e.direct.as_ref().map(|_| roce_udp::os::monotonic_ns());
        loop {
            let mut piece = false;
            let Engine {
                nic,
                sock,
                tx,
                fault,
                held,
                acks,
                pcap,
                pcap_buf,
                tx_from,
                direct,
                ..
            } = e;
            let mut produced = 0;
            let gso = sock.features().gso;
            while let Some((id, space)) = tx.space_sealed(gso) {
                if produced >= PIECE_PKTS && pieces {
                    // A long burst: flush what is built and look for a NAK before going on.
                    piece = true;
                    break;
                }
                // Sealed for the ID the kernel will give it where it is written (segment k of
                // a GSO send carries ID k): no ICRC patch unless it lands elsewhere.
                nic.set_tx_ipv4_id(id);
                let Some(t) = nic.poll_transmit(now, space) else {
                    break;
                };
                let qpn = nic.last_transmit_qpn();
                if tx_from.last() != Some(&(t.dst_ip, qpn)) {
                    tx_from.push((t.dst_ip, qpn));
                }
                if t.dst_ip.is_unspecified() {
                    // GID `::`: a socket would deliver it to this host itself. Not sent.
                    self.ctr.tx_unroutable.fetch_add(1, Relaxed);
                    nic.report_unroutable(qpn, t.dst_ip, Unroutable::Unspecified);
                    continue;
                }
                produced += 1;
                let mut meta = TxMeta {
                    dst: t.dst_ip,
                    dst_port: t.dst_port,
                    src_port: t.src_port,
                    tos: Some(t.tos),
                    ttl: Some(t.ttl),
                };
                if let Some(p) = pcap.as_mut() {
                    // As it leaves: the real source port (ICRC patched to match), ID 0.
                    let wire = sock.source_port(t.src_port);
                    let b = &mut pcap_buf[..t.len];
                    b.copy_from_slice(&space[..t.len]);
                    if wire != t.src_port {
                        patch_icrc_udp_sport(b, t.dst_ip.is_ipv6(), t.src_port, wire);
                    }
                    let m = RxMeta {
                        src_ip: t.src_ip,
                        dst_ip: t.dst_ip,
                        src_port: wire,
                        ipv4_id: Some(t.ipv4_id),
                        tos: t.tos,
                        ttl: t.ttl,
                        flow_label: t.flow_label,
                    };
                    let before = p.errors;
                    p.packet_meta(now, &m, b);
                    if p.errors != before {
                        self.ctr.pcap_errors.fetch_add(1, Relaxed);
                    }
                }
                // A shared device: to a process on this host, straight to its socket (the ICRC
                // stays sealed for port 4791; the receiver checks it so).
                if let (Some(d), Some(wall)) = (direct.as_mut(), wall) {
                    if t.dst_port == roce_wire::ROCE_V2_UDP_PORT && t.len >= 12 {
                        let dqp = u32::from_be_bytes([0, space[5], space[6], space[7]]);
                        match d.route(t.dst_ip, dqp, wall) {
                            Route::Wire => {}
                            Route::Port(p) => {
                                meta.dst_port = p;
                                self.ctr.tx_direct.fetch_add(1, Relaxed);
                            }
                            Route::NoOwner => {
                                self.ctr.tx_no_owner.fetch_add(1, Relaxed);
                                continue;
                            }
                        }
                    }
                }
                match fault.decide(&space[..t.len]) {
                    FaultVerdict::Pass => {
                        match acks.offer(&space[..t.len], meta, t.ipv4_id) {
                            Offer::Commit => {
                                tx.commit_sealed(sock, meta, t.len, t.ipv4_id);
                                self.count_tx(t.len);
                            }
                            Offer::Held => {}
                            Offer::Coalesced => {
                                self.ctr.tx_acks_coalesced.fetch_add(1, Relaxed);
                            }
                            Offer::Full => {
                                // Keep the order: what is held, then this packet.
                                acks.save(&space[..t.len], meta, t.ipv4_id);
                                self.commit_acks(tx, sock, acks);
                            }
                        }
                        if let Some((b, m, id)) = held.take() {
                            Self::commit_copy(tx, sock, &b, m, id);
                            self.count_tx(b.len());
                        }
                    }
                    FaultVerdict::Drop => {
                        self.ctr.fault_dropped.fetch_add(1, Relaxed);
                    }
                    FaultVerdict::Hold => {
                        if held.is_none() {
                            *held = Some((space[..t.len].to_vec(), meta, t.ipv4_id));
                            self.ctr.fault_reordered.fetch_add(1, Relaxed);
                        } else {
                            tx.commit_sealed(sock, meta, t.len, t.ipv4_id);
                            self.count_tx(t.len);
                        }
                    }
                }
            }
            // A held datagram leaves at the end of the burst at the latest.
            if let Some((b, m, id)) = held.take() {
                Self::commit_copy(tx, sock, &b, m, id);
                self.count_tx(b.len());
            }
            // ACKs go last, behind this burst's requests: an ACK that follows a SEND of the
            // same QP joins its GSO run (one datagram through the kernel instead of two), and
            // the peer handles the request before the ACK. (The reply and the ACK in two
            // system calls, reply first, helps a ping-pong that does not wait for its send
            // completions but slows one that does, as perftest's ib_send_lat: the ACK is then
            // on its critical path. Not kept; docs/journal.md, 2026-12-02.)
            self.commit_acks(tx, sock, acks);
            total += produced;
            if tx.is_empty() {
                break;
            }
            let n = tx.len();
            let r = tx.flush(sock, Wait::Block(Some(Duration::from_millis(20))));
            let refused = if tx.has_refused() {
                self.refused(nic, tx, tx_from)
            } else {
                0
            };
            tx_from.clear();
            match r {
                Ok(sent) => {
                    bump(&self.ctr.tx_flushes, 1);
                    if sent + refused < n {
                        self.ctr
                            .tx_errors
                            .fetch_add((n - sent - refused) as u64, Relaxed);
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, "flush");
                    self.ctr
                        .tx_errors
                        .fetch_add(n.saturating_sub(refused) as u64, Relaxed);
                }
            }
            if produced == 0 {
                break;
            }
            if piece {
                // ACKs (and above all a PSN-sequence NAK) that arrived while this piece was
                // sent: a NAK rewinds the requester before it sends the rest of its window,
                // all of which the responder would drop.
                self.receive_once(e, now);
            }
        }
        // what went through a helper has left (the direct path waits for it to be forwarded)
        if let Some(d) = e.direct.as_mut() {
            d.sent(roce_udp::os::monotonic_ns);
        }
        total
    }

    /// Counts the runs the kernel refused for their destination in `tx_unroutable` and
    /// reports each to the engine for every QP that sent to that destination (a `roce:` line
    /// per QP and cause); returns the packets.
    fn refused(&self, nic: &mut Nic, tx: &mut TxBatch, from: &[(IpAddr, u32)]) -> usize {
        let mut packets = 0;
        for r in tx.take_refused() {
            packets += r.packets;
            let mut told: Vec<u32> = Vec::new();
            for &(_, qpn) in from.iter().filter(|(d, _)| *d == r.dst) {
                if !told.contains(&qpn) {
                    told.push(qpn);
                    nic.report_unroutable(qpn, r.dst, Unroutable::Refused { errno: r.errno });
                }
            }
        }
        self.ctr.tx_unroutable.fetch_add(packets as u64, Relaxed);
        packets
    }

    /// One non-blocking receive, handled without transmitting (the caller is transmitting).
    fn receive_once(&self, e: &mut Engine, now: Instant) {
        let Some(mut rx) = e.rx.take() else { return };
        match e.sock.recv_batch(&mut rx, Wait::NonBlocking) {
            Ok(n) if n > 0 => {
                self.ctr.tx_piece_receives.fetch_add(1, Relaxed);
                self.handle_batch_with(e, &rx, now, false);
            }
            Ok(_) => {}
            Err(err) => tracing::debug!(%err, "recv_batch"),
        }
        e.rx = Some(rx);
    }

    /// Commits every packet `acks` holds (then the saved one, if any), in order.
    pub(super) fn commit_acks(&self, tx: &mut TxBatch, sock: &mut Socket, acks: &mut AckQueue) {
        for (b, m, id) in acks.drain() {
            Self::commit_copy(tx, sock, b, m, id);
            self.count_tx(b.len());
        }
        acks.clear();
    }

    /// Commits a copy of `b`, whose ICRC was sealed for IPv4 identification `id`.
    pub(super) fn commit_copy(tx: &mut TxBatch, sock: &mut Socket, b: &[u8], m: TxMeta, id: u16) {
        if tx.space().is_none() {
            let _ = tx.flush(sock, Wait::Block(Some(Duration::from_millis(20))));
        }
        if let Some(space) = tx.space() {
            space[..b.len()].copy_from_slice(b);
            tx.commit_sealed(sock, m, b.len(), id);
        }
    }

    /// A post was deferred at `now`: make sure the progress thread rings the doorbell in time
    /// (wakes it when it would sleep past the deadline; not during its polling-window sleep,
    /// whose end is the bound then: the program polls, and its next poll rings it).
    pub(super) fn arm_doorbell(&self, now: Instant) {
        if self.doorbell_at.load(Relaxed) != u64::MAX {
            return;
        }
        let at = now.as_nanos() + DOORBELL_NS;
        self.doorbell_at.store(at, SeqCst);
        // Not while the thread sleeps out a look at a polling program (`thread_deadline` 0):
        // the program's next poll rings the doorbell, and the look finds a doorbell it left
        // (then the wake-ups come back, `short_looks_until`).
        let looking = self.thread_deadline.load(Relaxed) == 0
            && now.as_nanos() >= self.short_looks_until.load(Relaxed);
        if at < self.thread_until.load(SeqCst) && !looking {
            self.waker.wake();
        }
    }

    pub(super) fn count_tx(&self, len: usize) {
        bump(&self.ctr.tx_datagrams, 1);
        bump(&self.ctr.tx_bytes, len as u64);
    }
}

/// Plain RC ACKs held back to the end of a transmit burst (see [`Shared::transmit`]).
///
/// The engine produces a QP's responder packets before its requester packets, so the ACK of a
/// SEND just received would precede the reply SEND in the same burst. The reply is what the peer
/// waits for: sent first, with the ACK behind it, the two form one GSO run when they share QP
/// and destination (one datagram through the kernel instead of two, one `recvmmsg` at the peer),
/// and the peer's engine sees the request first. Only ordering *within one burst* changes, and
/// only of ACKs relative to requests (independent streams in IBA); the responder's own stream
/// keeps its order: once an ACK is held, later responder packets (read responses, atomic ACKs)
/// are held behind it. Nothing is delayed past the burst, so no timer can see a difference.
pub(super) struct AckQueue {
    /// Copies of the held packets, back to back.
    arena: Vec<u8>,
    /// `(offset, length, meta, IPv4 ID its ICRC was sealed for)` of each held packet, in order.
    held: Vec<(usize, usize, TxMeta, u16)>,
    /// Room for the held packets in `arena`.
    cap: usize,
}

/// What [`AckQueue::offer`] decided.
pub(super) enum Offer {
    /// Not held: commit it now.
    Commit,
    /// Held (copied).
    Held,
    /// It must be held but there is no room: [`AckQueue::save`] it and commit everything.
    Full,
    /// It replaced the ACK held just before it (same QP, covers it).
    Coalesced,
}

/// A positive RC ACK: opcode ACKNOWLEDGE, AETH syndrome `000` (not a NAK or an RNR NAK), no
/// payload (BTH 12 + AETH 4 + ICRC 4).
fn is_plain_ack(p: &[u8]) -> bool {
    p.len() == 20 && p[0] == OP_RC_ACK && p[12] >> 5 == 0
}

/// The BTH PSN of `a` is at or after that of `b` (24-bit serial arithmetic).
fn psn_ge(a: &[u8], b: &[u8]) -> bool {
    let psn = |p: &[u8]| u32::from_be_bytes([0, p[9], p[10], p[11]]);
    psn(a).wrapping_sub(psn(b)) & 0xFF_FFFF < 0x80_0000
}

/// RC ACKNOWLEDGE (BTH opcode of a plain ACK or NAK).
const OP_RC_ACK: u8 = 0x11;

impl AckQueue {
    pub(super) fn new() -> AckQueue {
        let cap = 16 << 10;
        AckQueue {
            arena: Vec::with_capacity(cap + MAX_PACKET),
            held: Vec::with_capacity(64),
            cap,
        }
    }

    /// Holds `p` when it is an RC ACK, or an RC responder packet behind a held ACK.
    pub(super) fn offer(&mut self, p: &[u8], meta: TxMeta, id: u16) -> Offer {
        let op = p.first().copied().unwrap_or(0);
        // RC responses: READ response first/middle/last/only 0x0D..=0x10, ACK 0x11, atomic ACK 0x12.
        let hold = op == OP_RC_ACK || (!self.held.is_empty() && (0x0D..=0x12).contains(&op));
        if !hold {
            return Offer::Commit;
        }
        // A positive ACK right behind another one to the same QP, same burst: the later one
        // acknowledges everything the earlier did (PSN and MSN only grow, its credits are the
        // newer), so it takes the earlier one's place — ACK coalescing as IBA allows it (one
        // ACK for several requests; rxe and the engine complete every WQE up to its PSN).
        if is_plain_ack(p) {
            if let Some(&mut (o, l, m, ref mut sealed)) = self.held.last_mut() {
                let prev = &self.arena[o..o + l];
                if m == meta && is_plain_ack(prev) && prev[5..8] == p[5..8] && psn_ge(p, prev) {
                    self.arena[o..o + l].copy_from_slice(p);
                    *sealed = id;
                    return Offer::Coalesced;
                }
            }
        }
        if self.arena.len() + p.len() > self.cap || self.held.len() == self.held.capacity() {
            return Offer::Full;
        }
        self.save(p, meta, id);
        Offer::Held
    }

    /// Appends `p` unconditionally (the arena has `MAX_PACKET` of slack past `cap`).
    pub(super) fn save(&mut self, p: &[u8], meta: TxMeta, id: u16) {
        let off = self.arena.len();
        self.arena.extend_from_slice(p);
        self.held.push((off, p.len(), meta, id));
    }

    pub(super) fn drain(&self) -> impl Iterator<Item = (&[u8], TxMeta, u16)> + '_ {
        self.held
            .iter()
            .map(|&(o, l, m, id)| (&self.arena[o..o + l], m, id))
    }

    pub(super) fn clear(&mut self) {
        self.arena.clear();
        self.held.clear();
    }
}
