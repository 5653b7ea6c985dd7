//! RC scenario tests: exact packets and completions.
mod common;
use common::*;
use roce_emu::sim::{LinkConfig, Verdict};
use roce_emu::*;
use roce_wire::aeth::Syndrome;

#[test]
fn segmented_send_uses_first_middle_last_and_one_ack() {
    let mut p = Pair::new(1, LinkConfig::default(), Opts::default());
    let data = pattern(2500, 7);
    p.a.mem.store(0, &data);
    p.recv_b(77, 0x8000, 4096);
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 2500)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC SEND_FIRST psn=256 len=1024",
            "nic0 RC SEND_MIDDLE psn=257 len=1024",
            "nic0 RC SEND_LAST psn=258 A len=452",
            "nic1 RC ACKNOWLEDGE psn=258 AETH(ACK credits=31) len=0",
        ]
    );
    let wc = p.scq_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
        (1, WcStatus::Success, WcOpcode::Send, 2500)
    );
    let rc = p.rcq_b();
    assert_eq!(rc.len(), 1);
    assert_eq!(
        (rc[0].wr_id, rc[0].status, rc[0].opcode, rc[0].byte_len),
        (77, WcStatus::Success, WcOpcode::Recv, 2500)
    );
    assert_eq!(rc[0].wc_flags, WcFlags::GRH);
    assert_eq!(rc[0].qp_num, p.b.qpn);
    assert_eq!(p.b.mem.load(0x8000, 2500), data);
    assert_eq!(p.nic_a().counters().rdma_sends, 1);
    assert_eq!(p.nic_b().counters().rdma_recvs, 1);
}

#[test]
fn segmented_write_with_imm_places_data_and_consumes_recv() {
    let mut p = Pair::new(
        2,
        LinkConfig::default(),
        Opts {
            mtu: Mtu::Mtu256,
            ..Default::default()
        },
    );
    let data = pattern(600, 3);
    p.a.mem.store(0x100, &data);
    p.recv_b(5, 0, 0);
    p.net.start_capture();
    let sg = [sge(&p.a, 0x100, 600)];
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 9,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWriteWithImm,
        send_flags: SendFlags::SIGNALED,
        imm_data: 0xdeadbeef,
        remote_addr: IOVA + 0x4000,
        rkey,
        ..Default::default()
    });
    p.run(10);
    let cap = p.net.take_capture();
    assert_eq!(
        summary(&cap),
        vec![
            "nic0 RC RDMA_WRITE_FIRST psn=256 len=256",
            "nic0 RC RDMA_WRITE_MIDDLE psn=257 len=256",
            "nic0 RC RDMA_WRITE_LAST_WITH_IMMEDIATE psn=258 A len=88",
            "nic1 RC ACKNOWLEDGE psn=258 AETH(ACK credits=31) len=0",
        ]
    );
    let reth = cap[0].repr.reth.unwrap();
    assert_eq!(
        (reth.va, reth.rkey, reth.dma_len),
        (IOVA + 0x4000, rkey, 600)
    );
    assert_eq!(cap[2].repr.immdt.unwrap().imm, 0xdeadbeef);
    assert_eq!(cap[3].repr.aeth.unwrap().msn, 1);
    assert_eq!(p.b.mem.load(0x4000, 600), data);
    let wc = p.scq_a();
    assert_eq!(
        (wc[0].opcode, wc[0].byte_len, wc[0].wc_flags),
        (WcOpcode::RdmaWrite, 600, WcFlags::WITH_IMM)
    );
    let rc = p.rcq_b();
    assert_eq!(rc.len(), 1);
    assert_eq!(
        (rc[0].wr_id, rc[0].opcode, rc[0].byte_len, rc[0].imm_data),
        (5, WcOpcode::RecvRdmaWithImm, 600, 0xdeadbeef)
    );
    assert_eq!(rc[0].wc_flags, WcFlags::GRH | WcFlags::WITH_IMM);
}

#[test]
fn read_with_lost_response_retries_from_comp_psn() {
    // 3-packet read; the MIDDLE response is lost once: after the ACK timeout the requester
    // re-requests from comp.psn with the VA advanced by one MTU and the length reduced.
    let mut p = Pair::new(
        3,
        LinkConfig::default(),
        Opts {
            timeout: 10,
            ..Default::default()
        },
    );
    let data = pattern(2100, 9);
    p.b.mem.store(0x2000, &data);
    let mut dropped = false;
    p.net.set_filter(move |c| {
        if !dropped && c.repr.bth.opcode.info().name == "RDMA_READ_RESPONSE_MIDDLE" {
            dropped = true;
            return Verdict::Drop;
        }
        Verdict::Pass
    });
    p.net.start_capture();
    let sg = [sge(&p.a, 0x3000, 2100)];
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 4,
        sg_list: &sg,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 0x2000,
        rkey,
        ..Default::default()
    });
    p.run(100);
    let cap = p.net.take_capture();
    assert_eq!(
        summary(&cap),
        vec![
            "nic0 RC RDMA_READ_REQUEST psn=256 A len=0",
            "nic1 RC RDMA_READ_RESPONSE_FIRST psn=256 AETH(ACK credits=31) len=1024",
            "nic1 RC RDMA_READ_RESPONSE_MIDDLE psn=257 len=1024",
            "nic1 RC RDMA_READ_RESPONSE_LAST psn=258 AETH(ACK credits=31) len=52",
            "nic0 RC RDMA_READ_REQUEST psn=257 A len=0",
            "nic1 RC RDMA_READ_RESPONSE_MIDDLE psn=257 len=1024",
            "nic1 RC RDMA_READ_RESPONSE_LAST psn=258 AETH(ACK credits=31) len=52",
        ]
    );
    assert!(!cap[3].dropped && cap[2].dropped);
    let reth = cap[4].repr.reth.unwrap();
    assert_eq!((reth.va, reth.dma_len), (IOVA + 0x2000 + 1024, 2100 - 1024));
    // the retry came one local ACK timeout (4.096us << 10) after the last progress
    assert!(cap[4].time.as_nanos() - cap[1].time.as_nanos() >= 4096 << 10);
    let wc = p.scq_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::RdmaRead, 2100)
    );
    assert_eq!(p.a.mem.load(0x3000, 2100), data);
    assert_eq!(p.nic_a().counters().completer_retry_err, 1);
    assert_eq!(p.nic_b().counters().duplicate_request, 1);
}

#[test]
fn rnr_nak_then_success() {
    let mut p = Pair::new(
        4,
        LinkConfig::default(),
        Opts {
            min_rnr_timer: 1,
            ..Default::default()
        },
    );
    p.a.mem.store(0, b"hello");
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 5)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.net
        .run_until(|n| n.stats.delivered >= 2, Instant::from_millis(1));
    p.recv_b(3, 0, 64);
    p.run(10);
    let cap = p.net.take_capture();
    assert_eq!(
        summary(&cap),
        vec![
            "nic0 RC SEND_ONLY psn=256 A len=5",
            "nic1 RC ACKNOWLEDGE psn=256 AETH(RNR-NAK timer=1 (10us)) len=0",
            "nic0 RC SEND_ONLY psn=256 A len=5",
            "nic1 RC ACKNOWLEDGE psn=256 AETH(ACK credits=31) len=0",
        ]
    );
    // RNR timer code 1 = 10us
    assert!(cap[2].time.as_nanos() - cap[1].time.as_nanos() >= 10_000);
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
    assert_eq!(p.rcq_b()[0].byte_len, 5);
    assert_eq!(p.nic_a().counters().rcvd_rnr_err, 1);
    assert_eq!(p.nic_b().counters().send_rnr_err, 1);
}

#[test]
fn rnr_retries_exhausted_completes_with_rnr_retry_exc_err() {
    let mut p = Pair::new(
        5,
        LinkConfig::default(),
        Opts {
            min_rnr_timer: 1,
            rnr_retry: 2,
            ..Default::default()
        },
    );
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 8)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.run(100);
    let c = summary(&p.net.take_capture());
    let rnrs = c
        .iter()
        .filter(|x| x.syndrome == Some(Syndrome::RnrNak { timer: 1 }) && x.psn == 0x100)
        .count();
    assert_eq!(rnrs, 3, "{c:?}");
    let wc = p.scq_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.qp_a().qp_state, QpState::Err);
    assert_eq!(p.nic_a().counters().retry_rnr_exceeded_err, 1);
}

#[test]
fn retry_exhausted_moves_qp_to_error_and_flushes() {
    let mut p = Pair::new(
        6,
        LinkConfig::default(),
        Opts {
            timeout: 8,
            retry_cnt: 3,
            ..Default::default()
        },
    );
    p.net.set_filter(|c| {
        if c.from == 1 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    for i in 0..3 {
        p.recv_b(i, 0, 64);
    }
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 8)];
    for i in 1..=3 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &sg,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    p.run(1000);
    let c = summary(&p.net.take_capture());
    let from_a: Vec<u32> = c.iter().filter(|x| x.from == 0).map(|x| x.psn).collect();
    // 1 transmission, then the 3 retries: a probe of the oldest PSN after one period, which
    // doubles the timer (deviation 16), then one rewind of all three PSNs after two periods,
    // which uses up the last two retries
    let want = [0x100, 0x101, 0x102, 0x100, 0x100, 0x101, 0x102];
    assert_eq!(from_a, want);
    let wc = p.scq_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![
            (1, WcStatus::RetryExcErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.qp_a().qp_state, QpState::Err);
    assert_eq!(p.nic_a().counters().retry_exceeded_err, 1);
    assert_eq!(p.nic_a().counters().completer_retry_err, 2);
    // B processed each request once, the rest were duplicates
    assert_eq!(p.nic_b().counters().duplicate_request, 4);
    // posting on an ERR QP flushes at once
    p.post_a(SendWr {
        wr_id: 9,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        ..Default::default()
    });
    assert_eq!(
        p.scq_a()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        vec![(9, WcStatus::WrFlushErr)]
    );
}

#[test]
fn psn_wraps_mid_message() {
    let o = Opts {
        a_psn: 0xFF_FFFE,
        mtu: Mtu::Mtu256,
        ..Default::default()
    };
    let mut p = Pair::new(7, LinkConfig::default(), o);
    let data = pattern(1000, 1);
    p.a.mem.store(0, &data);
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 1000)];
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &[sge(&p.a, 0x800, 8)],
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC RDMA_WRITE_FIRST psn=16777214 len=256",
            "nic0 RC RDMA_WRITE_MIDDLE psn=16777215 len=256",
            "nic0 RC RDMA_WRITE_MIDDLE psn=0 len=256",
            "nic0 RC RDMA_WRITE_LAST psn=1 A len=232",
            "nic0 RC RDMA_READ_REQUEST psn=2 A len=0",
            "nic1 RC ACKNOWLEDGE psn=1 AETH(ACK credits=31) len=0",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=2 AETH(ACK credits=31) len=8",
        ]
    );
    assert_eq!(p.b.mem.load(0, 1000), data);
    assert_eq!(p.a.mem.load(0x800, 8), data[..8]);
    assert_eq!(p.scq_a().len(), 2);
    assert_eq!(p.qp_a().sq_psn, 3);
}

#[test]
fn duplicate_read_is_replayed_from_memory() {
    let mut p = Pair::new(
        8,
        LinkConfig::default(),
        Opts {
            timeout: 10,
            ..Default::default()
        },
    );
    p.b.mem.store(0x100, &pattern(300, 4));
    // drop every response the first time: the duplicate READ must be served from the resource
    let mut n = 0;
    p.net.set_filter(move |c| {
        if c.from == 1 && n == 0 {
            n += 1;
            return Verdict::Drop;
        }
        Verdict::Pass
    });
    p.net.start_capture();
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 300)],
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 0x100,
        rkey,
        ..Default::default()
    });
    p.run(100);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC RDMA_READ_REQUEST psn=256 A len=0",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31) len=300",
            "nic0 RC RDMA_READ_REQUEST psn=256 A len=0",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31) len=300",
        ]
    );
    assert_eq!(p.nic_b().counters().duplicate_request, 1);
    assert_eq!(p.a.mem.load(0, 300), pattern(300, 4));
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
}

#[test]
fn atomics_replay_stored_result_without_reexecuting() {
    let mut p = Pair::new(
        9,
        LinkConfig::default(),
        Opts {
            timeout: 10,
            ..Default::default()
        },
    );
    p.b.mem.store(0x40, &100u64.to_ne_bytes());
    let mut n = 0;
    p.net.set_filter(move |c| {
        if c.from == 1 && n == 0 {
            n += 1;
            return Verdict::Drop;
        }
        Verdict::Pass
    });
    p.net.start_capture();
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 8)],
        opcode: WrOpcode::AtomicFetchAndAdd,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 0x40,
        rkey,
        compare_add: 5,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &[sge(&p.a, 8, 8)],
        opcode: WrOpcode::AtomicCmpAndSwp,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 0x40,
        rkey,
        compare_add: 105,
        swap: 7,
        ..Default::default()
    });
    p.run(100);
    let cap = p.net.take_capture();
    let c = summary(&cap);
    assert_eq!(
        c,
        vec![
            "nic0 RC FETCH_ADD psn=256 A len=0",
            "nic0 RC COMPARE_SWAP psn=257 A len=0",
            "nic1 RC ATOMIC_ACKNOWLEDGE psn=256 AETH(ACK credits=31) len=0",
            "nic1 RC ATOMIC_ACKNOWLEDGE psn=257 AETH(ACK credits=31) len=0",
            "nic0 RC FETCH_ADD psn=256 A len=0",
            "nic0 RC COMPARE_SWAP psn=257 A len=0",
            "nic1 RC ATOMIC_ACKNOWLEDGE psn=256 AETH(ACK credits=31) len=0",
            "nic1 RC ATOMIC_ACKNOWLEDGE psn=257 AETH(ACK credits=31) len=0",
        ]
    );
    assert_eq!(cap[6].repr.atomic_ack_eth.unwrap().orig, 100);
    assert_eq!(cap[7].repr.atomic_ack_eth.unwrap().orig, 105);
    // executed once each: 100 + 5 = 105, then 105 == 105 -> 7
    assert_eq!(p.b.mem.load(0x40, 8), 7u64.to_ne_bytes());
    assert_eq!(p.a.mem.load(0, 8), 100u64.to_ne_bytes());
    assert_eq!(p.a.mem.load(8, 8), 105u64.to_ne_bytes());
    assert_eq!(p.nic_b().counters().duplicate_request, 2);
    let wc = p.scq_a();
    assert_eq!(
        wc.iter()
            .map(|w| (w.opcode, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        vec![
            (WcOpcode::FetchAdd, WcStatus::Success, 8),
            (WcOpcode::CompSwap, WcStatus::Success, 8)
        ]
    );
}

#[test]
fn max_rd_atomic_limits_outstanding_reads() {
    // max_rd_atomic = 1: the second READ request waits for the first read's last response
    let mut p = Pair::new(
        10,
        LinkConfig::default(),
        Opts {
            max_rd_atomic: 1,
            ..Default::default()
        },
    );
    p.net.start_capture();
    let rkey = p.b.mr.rkey;
    for i in 0..2u64 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0x100 * i, 16)],
            opcode: WrOpcode::RdmaRead,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        });
    }
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 64,
        rkey,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC RDMA_READ_REQUEST psn=256 A len=0",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31) len=16",
            "nic0 RC RDMA_READ_REQUEST psn=257 A len=0",
            "nic0 RC RDMA_WRITE_ONLY psn=258 A len=4",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=257 AETH(ACK credits=31) len=16",
            "nic1 RC ACKNOWLEDGE psn=258 AETH(ACK credits=31) len=0",
        ]
    );
    assert_eq!(p.scq_a().len(), 3);
}

#[test]
fn fence_waits_for_earlier_reads_only() {
    let mut p = Pair::new(11, LinkConfig::default(), Opts::default());
    p.net.start_capture();
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 0,
        sg_list: &[sge(&p.a, 0x100, 16)],
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + 64,
        rkey,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED | SendFlags::FENCE,
        remote_addr: IOVA + 64,
        rkey,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC RDMA_READ_REQUEST psn=256 A len=0",
            "nic0 RC RDMA_WRITE_ONLY psn=257 A len=4",
            "nic1 RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31) len=16",
            "nic1 RC ACKNOWLEDGE psn=257 AETH(ACK credits=31) len=0",
            // the fenced WRITE goes only after the READ completed
            "nic0 RC RDMA_WRITE_ONLY psn=258 A len=4",
            "nic1 RC ACKNOWLEDGE psn=258 AETH(ACK credits=31) len=0",
        ]
    );
}

#[test]
fn ack_request_every_65th_non_end_packet() {
    // a 70-packet SEND: A bit on the 66th consecutive non-END packet (rxe: noack_pkts++ > 64)
    // and on the END packet
    let mut p = Pair::new(
        12,
        LinkConfig::default(),
        Opts {
            mtu: Mtu::Mtu256,
            ..Default::default()
        },
    );
    p.recv_b(1, 0, 70 * 256);
    p.net.start_capture();
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 70 * 256)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    let a: Vec<usize> = c
        .iter()
        .filter(|x| x.from == 0)
        .enumerate()
        .filter(|(_, x)| x.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(a, vec![65, 69]);
    let acks: Vec<u32> = c.iter().filter(|x| x.from == 1).map(|x| x.psn).collect();
    assert_eq!(acks, vec![0x100 + 65, 0x100 + 69]);
    assert_eq!(p.rcq_b()[0].byte_len, 70 * 256);
}
