//! Loss recovery of a stream of RDMA WRITEs (the requester's deliberate deviations from rxe,
//! emu README): the limit on unacknowledged PSNs halves when a retry starts and grows back, a
//! PSN-sequence NAK that reports a new gap inside a retry starts another retry at once, and a
//! retry's first packet goes out twice, so that a lost retransmission is not left to the local
//! ACK timer. Completions stay exactly once and in order; the wire without loss stays rxe's.
mod common;
use common::*;
use roce_emu::sim::{Captured, LinkConfig, Verdict};
use roce_emu::*;
use std::cell::RefCell;
use std::rc::Rc;

const MSG: u32 = 16 * 1024;
const SLOTS: u64 = 32;

/// One measured stream.
struct Run {
    completed: Vec<u64>,
    statuses_ok: bool,
    /// Virtual seconds from the first post to the last completion.
    secs: f64,
    /// Longest virtual time without a send completion while WRITEs were outstanding (ns).
    longest_wait_ns: u64,
    /// Completions before that wait.
    longest_wait_after: usize,
}

/// Posts `total` 16 KiB RDMA WRITEs from A to B (MTU 1024: 16 packets each), keeping `depth`
/// outstanding, until all completed or `limit_ms` of virtual time passed.
fn stream(p: &mut Pair, total: u64, depth: u64, limit_ms: u64) -> Run {
    let (rkey, lkey, qa) = (p.b.mr.rkey, p.a.mr.lkey, p.a.qpn);
    let start = p.net.now;
    let limit = Instant::from_nanos(start.as_nanos() + limit_ms * 1_000_000);
    let (mut posted, mut completed) = (0u64, Vec::new());
    let mut statuses_ok = true;
    let (mut last, mut longest, mut longest_after) = (start, 0u64, 0);
    let mut wc = [WorkCompletion::default(); 64];
    loop {
        while posted < total && posted - (completed.len() as u64) < depth {
            let off = (posted % SLOTS) * MSG as u64;
            post_write(&mut p.net.nics[p.a.idx], qa, posted, off, MSG, lkey, rkey);
            posted += 1;
        }
        let more = p.net.step();
        let cq = p.a.scq;
        loop {
            let n = p.net.nics[p.a.idx].poll_cq(cq, &mut wc);
            if n == 0 {
                break;
            }
            for w in &wc[..n] {
                statuses_ok &= w.status == WcStatus::Success;
                completed.push(w.wr_id);
            }
            let now = p.net.now;
            if now.as_nanos() - last.as_nanos() > longest {
                longest = now.as_nanos() - last.as_nanos();
                longest_after = completed.len() - n;
            }
            last = now;
        }
        if completed.len() as u64 == total || !more || p.net.now > limit {
            break;
        }
    }
    Run {
        completed,
        statuses_ok,
        secs: (last.as_nanos() - start.as_nanos()) as f64 / 1e9,
        longest_wait_ns: longest,
        longest_wait_after: longest_after,
    }
}

fn opts(timeout: u8) -> Opts {
    Opts {
        timeout,
        cqe: 1024,
        ..Default::default()
    }
}

fn is_request(c: &Captured) -> bool {
    c.from == 0
}

/// Drops A's requests whose PSN is in `psns`, each listed PSN once per listed occurrence (the
/// first transmission, then the next copy, …).
fn drop_psns(p: &mut Pair, psns: &[u32]) -> Rc<RefCell<Vec<u32>>> {
    let left = Rc::new(RefCell::new(psns.to_vec()));
    let l = left.clone();
    p.net.set_filter(move |c| {
        let psn = c.repr.bth.psn.value();
        let mut l = l.borrow_mut();
        match l.iter().position(|&x| x == psn) {
            Some(i) if is_request(c) => {
                l.remove(i);
                Verdict::Drop
            }
            _ => Verdict::Pass,
        }
    });
    left
}

fn in_order(r: &Run, total: u64) {
    assert!(r.statuses_ok, "every completion successful");
    assert_eq!(
        r.completed,
        (0..total).collect::<Vec<_>>(),
        "each WRITE completes exactly once, in order"
    );
}

/// Timeout 14 = 67 ms: a stall on the local ACK timer shows up as a wait of that order.
const T14_NS: u64 = 4096 << 14;

/// Ten WRITEs whose 100th request packet is lost once: they complete in order after one
/// NAK-started retry and no timeout. Returns the pair, A's QPN and NIC index.
fn ten_writes_losing_the_100th_packet(o: Opts) -> (Pair, u32, usize) {
    let mut p = Pair::new(1, LinkConfig::default(), o);
    let (qa, ia) = (p.a.qpn, p.a.idx);
    assert_eq!(p.net.nics[ia].qp_unacked_limit(qa), Some(128));
    drop_psns(&mut p, &[0x100 + 100]);
    let r = stream(&mut p, 10, 32, 1_000);
    in_order(&r, 10);
    let c = *p.net.nics[ia].counters();
    assert_eq!(
        (c.rcvd_seq_err, c.completer_retry_err, c.retry_timeouts),
        (1, 1, 0)
    );
    (p, qa, ia)
}

#[test]
fn window_halves_after_a_sequence_nak_and_grows_back() {
    let (mut p, qa, ia) = ten_writes_losing_the_100th_packet(opts(14));
    let w = p.net.nics[ia].qp_unacked_limit(qa).unwrap();
    assert!(
        (64..70).contains(&w),
        "halved, then +1 per window acknowledged: {w}"
    );
    // lossless from here on: back to rxe's limit after enough acknowledged PSNs
    let r = stream(&mut p, 400, 32, 10_000);
    assert_eq!(r.completed.len(), 400);
    assert_eq!(p.net.nics[ia].qp_unacked_limit(qa), Some(128));
}

#[test]
fn with_a_floor_of_128_the_limit_stays_rxe_s_after_a_nak() {
    // What the UDP driver configures (it NAKs and reacts within a fraction of a window): a loss
    // costs one retry and no window, and the wire keeps rxe's AckReq cadence.
    let o = Opts {
        min_unacked_psns: MAX_UNACKED_PSNS,
        ..opts(14)
    };
    let (p, qa, ia) = ten_writes_losing_the_100th_packet(o);
    assert_eq!(p.net.nics[ia].qp_unacked_limit(qa), Some(128));
}

#[test]
fn window_never_drops_below_its_floor_and_never_exceeds_rxe() {
    let mut p = Pair::new(2, LinkConfig::default(), opts(14));
    let (qa, ia) = (p.a.qpn, p.a.idx);
    // ten separate losses: 128 → 64 → 32, then it stays at 32 (a little growth between)
    let psns: Vec<u32> = (1..=10).map(|k| 0x100 + 150 * k).collect();
    drop_psns(&mut p, &psns);
    let total = 100;
    let r = stream(&mut p, total, 32, 10_000);
    in_order(&r, total);
    let c = *p.net.nics[ia].counters();
    assert_eq!((c.completer_retry_err, c.retry_timeouts), (10, 0));
    let w = p.net.nics[ia].qp_unacked_limit(qa).unwrap();
    assert!((32..=36).contains(&w), "{w}");
    // what went on the wire never had more than the limit + 1 PSNs unacknowledged (rxe sends
    // while req.psn <= comp.psn + limit): checked on a fresh capture with a lossless link
    p.net.clear_filter();
    p.net.start_capture();
    let r = stream(&mut p, 100, 32, 10_000);
    assert_eq!(r.completed.len(), 100);
    let cap = p.net.take_capture();
    let (mut acked, mut hi, mut most) = (None::<u32>, 0u32, 0u32);
    for c in &cap {
        let psn = c.repr.bth.psn.value();
        if c.from == 1 {
            acked = Some(psn);
        } else {
            hi = hi.max(psn);
            if let Some(a) = acked {
                most = most.max(hi - a);
            }
        }
    }
    assert!(most <= 129, "{most}");
}

#[test]
fn lost_retransmission_is_not_left_to_the_ack_timer() {
    let mut p = Pair::new(3, LinkConfig::default(), opts(14));
    let x = 0x100 + 40;
    // the packet, then the first copy of its retransmission, are lost
    let left = drop_psns(&mut p, &[x, x]);
    p.net.start_capture();
    let r = stream(&mut p, 8, 32, 1_000);
    in_order(&r, 8);
    assert!(left.borrow().is_empty());
    let c = *p.net.nics[p.a.idx].counters();
    assert_eq!(c.retry_timeouts, 0, "no local ACK timeout");
    assert!(r.longest_wait_ns < T14_NS / 10, "{} ns", r.longest_wait_ns);
    // the retry sent its first packet twice, back to back
    let cap = p.net.take_capture();
    let sent: Vec<u32> = cap
        .iter()
        .filter(|c| c.from == 0)
        .map(|c| c.repr.bth.psn.value())
        .collect();
    let i = sent.iter().rposition(|&s| s == x).unwrap();
    assert_eq!(sent[i - 1], x, "{sent:x?}");
    assert_eq!(sent[i + 1], x + 1);
}

#[test]
fn second_gap_inside_a_retry_is_retried_at_once() {
    let mut p = Pair::new(4, LinkConfig::default(), opts(14));
    let x = 0x100 + 40;
    // x is lost, then x + 3 of the retransmission (rxe would ignore the second NAK while its
    // first retry is in progress and wait for the local ACK timer)
    let left = drop_psns(&mut p, &[x, x + 3]);
    // x + 3's first transmission must pass: drop it only when it comes after x's retry
    let seen_x = Rc::new(RefCell::new(0));
    let (l, s) = (left.clone(), seen_x.clone());
    p.net.set_filter(move |c| {
        if c.from != 0 {
            return Verdict::Pass;
        }
        let psn = c.repr.bth.psn.value();
        if psn == x {
            *s.borrow_mut() += 1;
        }
        let mut l = l.borrow_mut();
        let first_pass_of_x3 = psn == x + 3 && *s.borrow() < 2;
        match l.iter().position(|&v| v == psn) {
            Some(i) if !first_pass_of_x3 => {
                l.remove(i);
                Verdict::Drop
            }
            _ => Verdict::Pass,
        }
    });
    let r = stream(&mut p, 8, 32, 1_000);
    in_order(&r, 8);
    assert!(left.borrow().is_empty());
    let c = *p.net.nics[p.a.idx].counters();
    assert_eq!((c.rcvd_seq_err, c.retry_timeouts), (2, 0));
    assert!(r.longest_wait_ns < T14_NS / 10, "{} ns", r.longest_wait_ns);
    assert!(p.nic_b().counters().out_of_seq_request > 0);
}

/// Drops a seeded fraction of A's request packets (like the UDP runtime's fault injector:
/// ACKs exempt).
fn lossy_requests(p: &mut Pair, loss: f64, seed: u64) {
    let mut state = seed;
    let threshold = (loss * u64::MAX as f64) as u64;
    p.net.set_filter(move |c| {
        if c.from != 0 {
            return Verdict::Pass;
        }
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        if (z ^ (z >> 31)) < threshold {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
}

#[test]
fn one_percent_loss_completes_exactly_once_without_timer_stalls() {
    for seed in 1..=4u64 {
        let link = LinkConfig {
            latency_ns: 20_000,
            bandwidth_bps: Some(200_000_000),
            ..Default::default()
        };
        let mut p = Pair::new(seed, link, opts(14));
        let n = (SLOTS * MSG as u64) as usize;
        p.a.mem.store(0, &pattern(n, seed as u8));
        lossy_requests(&mut p, 0.01, seed);
        let total = 1_000;
        let r = stream(&mut p, total, 32, 60_000);
        in_order(&r, total);
        let c = *p.net.nics[p.a.idx].counters();
        assert!(c.rcvd_seq_err > 50, "{c:?}");
        // a stall needs both copies of a retry's first packet lost (1 in 10 000) or a loss
        // with nothing sent after it: none here
        assert_eq!(c.retry_timeouts, 0, "seed {seed}: {c:?}");
        assert!(
            r.longest_wait_ns < T14_NS / 10,
            "seed {seed}: {} ns",
            r.longest_wait_ns
        );
        // the data arrived: the 32 slots hold A's bytes
        assert!(p.b.mem.load(0, n) == p.a.mem.load(0, n), "seed {seed}");
    }
}

#[test]
fn without_loss_the_wire_is_rxe_s() {
    // no loss: the window stays at 128 and the AckReq cadence is rxe's (END packets and every
    // 65th packet without one), whatever the stream
    let mut p = Pair::new(5, LinkConfig::default(), opts(14));
    p.net.start_capture();
    let r = stream(&mut p, 64, 32, 1_000);
    in_order(&r, 64);
    assert_eq!(p.net.nics[p.a.idx].qp_unacked_limit(p.a.qpn), Some(128));
    let cap = p.net.take_capture();
    let reqs: Vec<&Captured> = cap.iter().filter(|c| c.from == 0).collect();
    assert_eq!(reqs.len(), 64 * 16);
    for (i, c) in reqs.iter().enumerate() {
        let end = i % 16 == 15;
        assert_eq!(c.repr.bth.ack_req, end, "packet {i}");
    }
    let c = *p.net.nics[p.a.idx].counters();
    assert_eq!((c.completer_retry_err, c.retry_timeouts), (0, 0));
    assert_eq!(p.nic_b().counters().duplicate_request, 0);
}

/// The figure the issue-6 target is about, on the simulated network: goodput of a WRITE
/// stream with 1% of the requests lost, against the same stream without loss, over a link
/// whose bandwidth and latency give a window-limited pipe as on loopback (16 packets in
/// flight fill it). Prints both and asserts the ratio.
#[test]
fn goodput_with_one_percent_loss_in_the_simulated_pipe() {
    let link = LinkConfig {
        latency_ns: 50_000,
        // ~150 000 packets of 1 KiB per second
        bandwidth_bps: Some(160_000_000),
        ..Default::default()
    };
    let total = 1_500;
    let mut clean = Pair::new(11, link, opts(14));
    let r0 = stream(&mut clean, total, 32, 60_000);
    in_order(&r0, total);
    let mut lossy = Pair::new(11, link, opts(14));
    lossy_requests(&mut lossy, 0.01, 11);
    let r1 = stream(&mut lossy, total, 32, 60_000);
    in_order(&r1, total);
    let c = *lossy.net.nics[lossy.a.idx].counters();
    let b = *lossy.nic_b().counters();
    let ratio = r0.secs / r1.secs;
    eprintln!(
        "sim goodput: lossless {:.3} s, 1% loss {:.3} s, ratio {ratio:.3}; rcvd_seq_err {} completer_retry_err {} retry_timeouts {}; responder out_of_seq {} duplicate {} of {} received; longest wait {} us after {} completions",
        r0.secs, r1.secs, c.rcvd_seq_err, c.completer_retry_err, c.retry_timeouts, b.out_of_seq_request, b.duplicate_request, b.rcvd_pkts, r1.longest_wait_ns / 1000, r1.longest_wait_after
    );
    // 0.758 when written (rxe's behaviour, before deviations 12–14: 0.097); a margin for
    // unrelated changes in ACK timing
    assert!(ratio >= 0.70, "{ratio}");
}

#[test]
fn a_retried_send_that_takes_a_receive_is_sent_once_so_rnr_costs_one_retry() {
    // Two one-packet SENDs, the first lost once, no receive posted at B yet. The NAK retry's
    // first packet is a SEND_ONLY: a second copy would draw a second RNR NAK and, with
    // rnr_retry 1, fail the WQE with RNR_RETRY_EXC_ERR where rxe succeeds.
    let o = Opts {
        rnr_retry: 1,
        ..opts(14)
    };
    let mut p = Pair::new(6, LinkConfig::default(), o);
    drop_psns(&mut p, &[0x100]);
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 8)];
    for id in 1..=2 {
        p.post_a(SendWr {
            wr_id: id,
            sg_list: &sg,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    // loss, NAK, retry and RNR NAK take microseconds; the RNR timer (code 12) 640 us
    let t = Instant::from_nanos(p.net.now.as_nanos() + 200_000);
    p.net.run_idle(t);
    assert_eq!(p.nic_a().counters().rcvd_rnr_err, 1);
    p.recv_b(1, 0, 64);
    p.recv_b(2, 64, 64);
    p.run(10);
    let wc = p.scq_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    let sent_100 = p
        .net
        .take_capture()
        .iter()
        .filter(|c| c.from == 0 && c.repr.bth.psn.value() == 0x100)
        .count();
    assert_eq!(sent_100, 3, "first transmission, NAK retry, RNR retry");
    assert_eq!(p.nic_a().counters().rcvd_rnr_err, 1);
}

/// One transmitted packet, kept to be delivered later.
struct Tx {
    psn: u32,
    /// Opcode and PSN as [`packet_text`].
    line: String,
    bytes: Vec<u8>,
    meta: RxMeta,
}

/// Every packet `nic` transmits now (at most `most`).
fn drain(nic: &mut Nic, now: Instant, most: usize) -> Vec<Tx> {
    let mut buf = vec![0u8; 4096 + 256];
    let mut out = Vec::new();
    while out.len() < most {
        let Some(t) = nic.poll_transmit(now, &mut buf) else {
            break;
        };
        let bytes = buf[..t.len].to_vec();
        let pkt = roce_wire::transport::Packet::new_checked(&bytes[..]).unwrap();
        let (op, psn) = (pkt.opcode(), pkt.bth().psn().value());
        let line = packet_text(op, psn, false, None, None, None);
        let meta = t.rx_meta();
        out.push(Tx {
            psn,
            line,
            bytes,
            meta,
        });
    }
    out
}

#[test]
fn a_retry_after_a_late_ack_resends_the_acked_last_packet_with_its_own_psn() {
    // W1 and W2, 4 packets each (PSNs 0x100-0x103, 0x104-0x107), all received by B; B's ACKs
    // are held. The ACK timer fires twice (a lost probe, then the rewind): A resends W1's
    // first two packets; then B's
    // ACK of 0x103 arrives (W1 is being resent, so it does not complete, but it acknowledges
    // through 0x103). A finishes resending; its timer fires again. W1 is fully acknowledged:
    // its last packet goes again with its own PSN 0x103 (a duplicate B re-ACKs), not with
    // 0x104, where B expects W2's FIRST (a LAST there is an invalid request: REM_INV_REQ_ERR).
    let mut p = Pair::new(4, LinkConfig::default(), opts(10));
    let (ia, ib, qa) = (p.a.idx, p.b.idx, p.a.qpn);
    let (lkey, rkey) = (p.a.mr.lkey, p.b.mr.rkey);
    for k in 0..2u64 {
        post_write(&mut p.net.nics[ia], qa, k, k * 4096, 4096, lkey, rkey);
    }
    let mut now = p.net.now;
    let first = drain(&mut p.net.nics[ia], now, usize::MAX);
    assert_eq!(first.len(), 8);
    let mut acks = Vec::new();
    for w in first.chunks(4) {
        for Tx {
            bytes: b, meta: m, ..
        } in w
        {
            p.net.nics[ib].handle_datagram(now, m, b);
        }
        acks.extend(drain(&mut p.net.nics[ib], now, usize::MAX));
    }
    let ack_w1 = acks
        .iter()
        .find(|a| a.psn == 0x103)
        .expect("B ACKs W1's last PSN");
    // the ACK timer fires: a probe, W1's first packet with AckReq (deviation 16), is lost
    now = p.net.nics[ia].poll_timeout().expect("ACK timer armed");
    p.net.nics[ia].handle_timeout(now);
    let probe = drain(&mut p.net.nics[ia], now, usize::MAX);
    assert_eq!(probe.iter().map(|x| x.psn).collect::<Vec<_>>(), [0x100]);
    // it fires again: two packets of the rewound W1 go out (and are lost)
    now = p.net.nics[ia].poll_timeout().expect("ACK timer armed");
    p.net.nics[ia].handle_timeout(now);
    let again = drain(&mut p.net.nics[ia], now, 2);
    assert_eq!(
        again.iter().map(|x| x.psn).collect::<Vec<_>>(),
        [0x100, 0x101]
    );
    p.net.nics[ia].handle_datagram(now, &ack_w1.meta, &ack_w1.bytes);
    // the rest of the resend is lost too; the timer fires again
    let rest = drain(&mut p.net.nics[ia], now, usize::MAX);
    assert!(!rest.is_empty());
    now = p.net.nics[ia].poll_timeout().expect("ACK timer armed");
    p.net.nics[ia].handle_timeout(now);
    let retry = drain(&mut p.net.nics[ia], now, usize::MAX);
    assert_eq!(
        retry[0].line, "RC RDMA_WRITE_LAST psn=259",
        "W1's last packet, with its own PSN (0x103)"
    );
    assert_eq!(
        retry[1].line, "RC RDMA_WRITE_FIRST psn=260",
        "then W2 from its FIRST"
    );
    // B takes it all as duplicates and re-ACKs: both WRITEs complete successfully
    for Tx {
        bytes: b, meta: m, ..
    } in &retry
    {
        p.net.nics[ib].handle_datagram(now, m, b);
    }
    for Tx {
        bytes: b, meta: m, ..
    } in drain(&mut p.net.nics[ib], now, usize::MAX)
    {
        p.net.nics[ia].handle_datagram(now, &m, &b);
    }
    for Tx {
        bytes: b, meta: m, ..
    } in &acks
    {
        p.net.nics[ia].handle_datagram(now, m, b);
    }
    let mut wc = [WorkCompletion::default(); 4];
    let n = p.net.nics[ia].poll_cq(p.a.scq, &mut wc);
    assert_eq!(n, 2, "{:?}", &wc[..n]);
    assert!(
        wc[..2].iter().all(|w| w.status == WcStatus::Success),
        "{:?}",
        &wc[..2]
    );
    assert_eq!(p.net.nics[ib].counters().out_of_seq_request, 0);
}

#[test]
fn one_ack_covering_three_writes_completes_them_in_order_and_a_read_after_them() {
    // W0, W1, W2 (one packet each, PSNs 0x100-0x102; W1 unsignaled), then R3, a READ of
    // 4096 bytes (0x103-0x106). B's ACKs of W0 and W1 are held: the ACK of W2 alone completes
    // the three WRITEs (the completer's coalesced-ACK path), in order; the held ACKs arriving
    // late complete nothing more; the READ completes with its responses.
    let mut p = Pair::new(5, LinkConfig::default(), opts(14));
    let (ia, ib, qa) = (p.a.idx, p.b.idx, p.a.qpn);
    let (lkey, rkey) = (p.a.mr.lkey, p.b.mr.rkey);
    p.b.mem.write(16384, &pattern(4096, 7));
    for k in 0..3u64 {
        let sg = [Sge {
            addr: IOVA + k * 1024,
            length: 1024,
            lkey,
        }];
        let wr = SendWr {
            wr_id: k,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: if k == 1 {
                SendFlags::EMPTY
            } else {
                SendFlags::SIGNALED
            },
            remote_addr: IOVA + k * 1024,
            rkey,
            ..Default::default()
        };
        p.net.nics[ia].post_send(qa, &wr).unwrap();
    }
    let sg = [Sge {
        addr: IOVA + 8192,
        length: 4096,
        lkey,
    }];
    let rd = SendWr {
        wr_id: 3,
        sg_list: &sg,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 16384,
        rkey,
        ..Default::default()
    };
    p.net.nics[ia].post_send(qa, &rd).unwrap();
    let now = p.net.now;
    let requests = drain(&mut p.net.nics[ia], now, usize::MAX);
    assert_eq!(
        requests.iter().map(|r| r.psn).collect::<Vec<_>>(),
        [0x100, 0x101, 0x102, 0x103]
    );
    // B answers each request before the next arrives (so its ACKs do not coalesce).
    let mut responses = Vec::new();
    for Tx {
        bytes: b, meta: m, ..
    } in &requests
    {
        p.net.nics[ib].handle_datagram(now, m, b);
        responses.extend(drain(&mut p.net.nics[ib], now, usize::MAX));
    }
    // three ACKs, then the four READ responses (PSNs 0x100-0x106)
    assert_eq!(
        responses
            .iter()
            .map(|r| r.line.as_str())
            .collect::<Vec<_>>(),
        [
            "RC ACKNOWLEDGE psn=256",
            "RC ACKNOWLEDGE psn=257",
            "RC ACKNOWLEDGE psn=258",
            "RC RDMA_READ_RESPONSE_FIRST psn=259",
            "RC RDMA_READ_RESPONSE_MIDDLE psn=260",
            "RC RDMA_READ_RESPONSE_MIDDLE psn=261",
            "RC RDMA_READ_RESPONSE_LAST psn=262"
        ]
    );
    let deliver = |p: &mut Pair, r: &Tx| {
        p.net.nics[ia].handle_datagram(now, &r.meta, &r.bytes);
    };
    deliver(&mut p, &responses[2]);
    let wcs = p.scq_a();
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [
            (0, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaWrite)
        ]
    );
    // the held ACKs are stale now
    deliver(&mut p, &responses[0]);
    deliver(&mut p, &responses[1]);
    assert!(p.scq_a().is_empty());
    for r in &responses[3..] {
        deliver(&mut p, r);
    }
    let wcs = p.scq_a();
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        [(3, WcStatus::Success, 4096)]
    );
    assert_eq!(p.a.mem.load(8192, 4096), pattern(4096, 7));
    assert_eq!(p.nic_a().counters().completer_retry_err, 0);
}
