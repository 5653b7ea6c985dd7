//! The requester's local ACK timer against slow and lossy peers (issue 23): any response
//! re-arms it, as in rxe, so a READ whose response is still arriving is not requested again;
//! timeouts without a response back the timer off up to four times the QP's `timeout`
//! (deviation 16), so a peer that cannot ACK within one period does not get its window resent
//! every period.
mod common;
use common::*;
use roce_emu::sim::{Captured, LinkConfig, Verdict};
use roce_emu::*;
use std::collections::HashSet;
use std::sync::Arc;

const MIB: usize = 1 << 20;
/// Timeout 14: 67.1 ms, what perftest and rdma_cm use.
const T14_NS: u64 = 4096 << 14;

fn is_read_request(c: &Captured) -> bool {
    c.repr.bth.opcode == roce_wire::Opcode::RC_RDMA_READ_REQUEST
}

fn is_read_response(c: &Captured) -> bool {
    c.repr.bth.opcode.info().name.contains("READ_RESPONSE")
}

/// Registers a fresh `len`-byte region at [`IOVA`] + `MEM` on the NIC of `side`; returns it
/// with its memory.
fn big_region(p: &mut Pair, a_side: bool, len: usize) -> (Mr, VecMemory) {
    let (idx, pd) = if a_side {
        (p.a.idx, p.a.pd)
    } else {
        (p.b.idx, p.b.pd)
    };
    let mem = VecMemory::new(len);
    let mr = p.net.nics[idx]
        .reg_mr(
            pd,
            Arc::new(mem.clone()),
            IOVA + MEM as u64,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    (mr, mem)
}

struct ReadRun {
    /// Virtual time from post to completion, if it completed.
    done_after_ns: Option<u64>,
    read_requests: usize,
    response_packets: usize,
    retry_timeouts: u64,
}

/// One `len`-byte RDMA READ from B to A over a path whose responses take `response_ns` to
/// cross (bandwidth-limited), dropping the response packets at the given indexes (first
/// transmission only). Runs up to `limit_ms` of virtual time.
fn read_with_lost_responses(
    len: usize,
    response_ns: u64,
    lose: &[usize],
    limit_ms: u64,
) -> ReadRun {
    let mut p = Pair::new(23, LinkConfig::default(), Opts::default());
    let (ia, ib) = (p.a.idx, p.b.idx);
    let bytes_per_s = (len as u128 * 1_000_000_000 / response_ns as u128) as u64;
    p.net.set_link(
        ib,
        ia,
        LinkConfig {
            bandwidth_bps: Some(bytes_per_s),
            ..Default::default()
        },
    );
    let (mr_a, mem_a) = big_region(&mut p, true, len);
    let (mr_b, mem_b) = big_region(&mut p, false, len);
    let data = pattern(len, 7);
    mem_b.store(0, &data);
    let mut seen = 0usize;
    let lose: Vec<usize> = lose.to_vec();
    p.net.set_filter(move |c| {
        if c.from == 1 && is_read_response(c) {
            seen += 1;
            if lose.contains(&(seen - 1)) {
                return Verdict::Drop;
            }
        }
        Verdict::Pass
    });
    p.net.start_capture();
    let sg = [Sge {
        addr: IOVA + MEM as u64,
        length: len as u32,
        lkey: mr_a.lkey,
    }];
    let start = p.net.now;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + MEM as u64,
        rkey: mr_b.rkey,
        ..Default::default()
    });
    let limit = Instant::from_nanos(start.as_nanos() + limit_ms * 1_000_000);
    let mut done_after_ns = None;
    while p.net.now < limit && p.net.step() {
        let wc = p.scq_a();
        if let Some(w) = wc.first() {
            assert_eq!(w.status, WcStatus::Success);
            done_after_ns = Some(p.net.now.as_nanos() - start.as_nanos());
            break;
        }
    }
    if done_after_ns.is_some() {
        assert!(mem_a.load(0, len) == data, "the READ placed every byte");
    }
    let cap = p.net.take_capture();
    ReadRun {
        done_after_ns,
        read_requests: cap
            .iter()
            .filter(|c| c.from == 0 && is_read_request(c))
            .count(),
        response_packets: cap
            .iter()
            .filter(|c| c.from == 1 && is_read_response(c))
            .count(),
        retry_timeouts: p.nic_a().counters().retry_timeouts,
    }
}

#[test]
fn a_4_mib_read_losing_one_response_packet_is_re_requested_once() {
    // 4 MiB at MTU 1024: 4,096 response packets that take 250 ms to arrive, almost four local
    // ACK timeouts. Packet 100 is lost. The out-of-order packets after it are no progress, but
    // they keep the timer from firing (rxe), so the READ is requested again once, from the
    // missing PSN, a timeout after the stream has ended. The timer re-armed only on progress
    // re-requested it every 67 ms while the response still arrived, and each duplicate drew a
    // replay of the rest: the transfer never ended.
    let pkts = 4 * MIB / 1024;
    let r = read_with_lost_responses(4 * MIB, 250_000_000, &[100], 5_000);
    let done = r.done_after_ns.expect("the READ completes");
    assert_eq!(
        r.read_requests, 2,
        "the READ and one re-read from the lost PSN"
    );
    assert_eq!(r.retry_timeouts, 1);
    assert_eq!(
        r.response_packets,
        pkts + (pkts - 100),
        "the response, then its replay from the lost packet on"
    );
    // the response, one timeout, the replay (at most as long again)
    assert!(done < 2 * 250_000_000 + 2 * T14_NS, "done after {done} ns");
}

#[test]
fn a_read_losing_a_packet_of_each_replay_still_converges() {
    // A loss in the original response and in each of the next two replays: every re-read
    // starts at the first missing PSN, and no re-read goes out while a response is arriving.
    let pkts = 2 * MIB / 1024;
    let lose = [500, pkts + 300, pkts + (pkts - 500) + 200];
    let r = read_with_lost_responses(2 * MIB, 200_000_000, &lose, 5_000);
    assert!(r.done_after_ns.is_some(), "the READ completes");
    assert_eq!(r.read_requests, 4, "one re-read per lost packet");
    assert_eq!(r.retry_timeouts, 3);
}

/// `qps` RC QPs from A to B streaming `msgs` RDMA WRITEs of 64 KiB each (MTU 1024, two
/// outstanding per QP), with the UDP driver's unacknowledged-PSN limit (128, rxe's) and the
/// requests crossing a link of `bytes_per_s`. Returns (request packets sent, distinct request
/// packets, retry timeouts, virtual seconds).
fn stream_to_a_slow_peer(qps: usize, msgs: u64, bytes_per_s: u64) -> (usize, usize, u64, f64) {
    const MSG: u32 = 64 * 1024;
    let o = Opts {
        min_unacked_psns: MAX_UNACKED_PSNS,
        cqe: 4096,
        ..Default::default()
    };
    let mut p = Pair::new(5, LinkConfig::default(), o);
    let (ia, ib) = (p.a.idx, p.b.idx);
    p.net.set_link(
        ia,
        ib,
        LinkConfig {
            bandwidth_bps: Some(bytes_per_s),
            ..Default::default()
        },
    );
    let init = |cq: Cq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: QpCap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        sq_sig_all: true,
    };
    let mut qpns = Vec::new();
    for k in 0..qps {
        let (pa, pb, ca, cb) = (p.a.pd, p.b.pd, p.a.scq, p.b.rcq);
        let qa = p.nic_a().create_qp(pa, &init(ca)).unwrap();
        let qb = p.nic_b().create_qp(pb, &init(cb)).unwrap();
        let sa = Side {
            qpn: qa,
            ..p.a.clone_shallow()
        };
        let sb = Side {
            qpn: qb,
            ..p.b.clone_shallow()
        };
        let psn = 0x1000 * (k as u32 + 1);
        connect(&mut p.net.nics[ia], &sa, &sb, &o, psn, psn);
        connect(&mut p.net.nics[ib], &sb, &sa, &o, psn, psn);
        qpns.push(qa);
    }
    let (lkey, rkey) = (p.a.mr.lkey, p.b.mr.rkey);
    let mut posted = vec![0u64; qps];
    let mut done = vec![0u64; qps];
    let total = msgs * qps as u64;
    let mut completed = 0u64;
    p.net.start_capture();
    let start = p.net.now;
    let limit = Instant::from_nanos(start.as_nanos() + 60_000_000_000);
    loop {
        for (k, &qa) in qpns.iter().enumerate() {
            while posted[k] < msgs && posted[k] - done[k] < 2 {
                let off = (k as u64 % 8) * MSG as u64;
                post_write(&mut p.net.nics[ia], qa, posted[k], off, MSG, lkey, rkey);
                posted[k] += 1;
            }
        }
        let more = p.net.step();
        for w in p.scq_a() {
            assert_eq!(w.status, WcStatus::Success);
            let k = qpns.iter().position(|&q| q == w.qp_num).unwrap();
            done[k] += 1;
            completed += 1;
        }
        if completed == total || !more || p.net.now > limit {
            break;
        }
    }
    assert_eq!(completed, total, "every WRITE completes");
    let secs = (p.net.now.as_nanos() - start.as_nanos()) as f64 / 1e9;
    let cap = p.net.take_capture();
    let requests: Vec<_> = cap.iter().filter(|c| c.from == 0).collect();
    let distinct: HashSet<(u32, u32)> = requests
        .iter()
        .map(|c| (c.repr.bth.dest_qp.value(), c.repr.bth.psn.value()))
        .collect();
    let timeouts = p.nic_a().counters().retry_timeouts;
    (requests.len(), distinct.len(), timeouts, secs)
}

#[test]
fn eight_qps_toward_a_peer_slower_than_the_ack_timeout_retransmit_little() {
    // Eight QPs of 128 unacknowledged 1 KiB packets each over 6 MB/s: a round of 64 KiB per
    // QP takes about 90 ms, longer than the 67 ms timer, so each QP's ACKs come further apart
    // than one period. Each timeout resends a whole window into the same slow path; without
    // back-off that repeats every period for the whole run.
    let (sent, distinct, timeouts, secs) = stream_to_a_slow_peer(8, 24, 6_000_000);
    let share = (sent - distinct) as f64 / sent as f64;
    eprintln!(
        "slow peer: {sent} request packets, {distinct} distinct, retransmitted share {:.3}, \
         {timeouts} timeouts, {secs:.2} s",
        share
    );
    assert!(share < 0.10, "retransmitted share {share:.3}");
}
