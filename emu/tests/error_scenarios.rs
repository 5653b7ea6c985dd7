//! Remote access errors, UC, UD, CQ overflow, ICRC: exact packets and completions.
mod common;
use common::*;
use roce_emu::sim::{LinkConfig, Verdict};
use roce_emu::*;
use std::sync::Arc;

type Summary = Vec<Seen>;

fn write_error_case(
    seed: u64,
    rkey_of: impl Fn(&Pair) -> u32,
    remote_off: u64,
    len: u32,
    opcode: WrOpcode,
) -> (Pair, Summary) {
    let mut p = Pair::new(seed, LinkConfig::default(), Opts::default());
    p.net.start_capture();
    let rkey = rkey_of(&p);
    let sg = [sge(&p.a, 0, len)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + remote_off,
        rkey,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey: p.b.mr.rkey,
        ..Default::default()
    });
    p.run(50);
    let c = summary(&p.net.take_capture());
    (p, c)
}

#[test]
fn bad_rkey_gets_nak_remote_access_and_rem_access_err() {
    let (mut p, c) = write_error_case(
        11,
        |p| p.b.mr.rkey ^ 0x0100_0000,
        0,
        16,
        WrOpcode::RdmaWrite,
    );
    assert_eq!(c[0], "nic0 RC RDMA_WRITE_ONLY psn=256 A len=16");
    assert!(
        c.iter()
            .any(|x| *x == "nic1 RC ACKNOWLEDGE psn=256 AETH(NAK RemoteAccessError) len=0"),
        "{c:?}"
    );
    let wc = p.scq_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.qp_a().qp_state, QpState::Err);
    assert_eq!(p.qp_b().qp_state, QpState::Err);
    assert_eq!(p.b.mem.load(0, 16), vec![0; 16]);
}

#[test]
fn out_of_bounds_write_gets_nak_remote_access() {
    let (mut p, c) = write_error_case(
        12,
        |p| p.b.mr.rkey,
        (MEM as u64) - 8,
        16,
        WrOpcode::RdmaWrite,
    );
    assert!(
        c.iter()
            .any(|x| *x == "nic1 RC ACKNOWLEDGE psn=256 AETH(NAK RemoteAccessError) len=0"),
        "{c:?}"
    );
    assert_eq!(p.scq_a()[0].status, WcStatus::RemAccessErr);
    assert_eq!(p.b.mem.load(MEM - 8, 8), vec![0; 8]);
}

#[test]
fn read_out_of_bounds_gets_nak_remote_access() {
    let (mut p, c) = write_error_case(
        13,
        |p| p.b.mr.rkey,
        (MEM as u64) - 8,
        16,
        WrOpcode::RdmaRead,
    );
    assert_eq!(c[0], "nic0 RC RDMA_READ_REQUEST psn=256 A len=0");
    assert!(
        c.iter()
            .any(|x| *x == "nic1 RC ACKNOWLEDGE psn=256 AETH(NAK RemoteAccessError) len=0"),
        "{c:?}"
    );
    assert_eq!(p.scq_a()[0].status, WcStatus::RemAccessErr);
}

#[test]
fn missing_qp_permission_gets_nak_invalid_request() {
    // B's QP allows no remote write: NAK 0x61, REM_INV_REQ_ERR
    let o = Opts {
        access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
        ..Default::default()
    };
    let mut p = Pair::new(14, LinkConfig::default(), o);
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 16)];
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
    p.run(50);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 RC RDMA_WRITE_ONLY psn=256 A len=16",
            "nic1 RC ACKNOWLEDGE psn=256 AETH(NAK InvalidRequest) len=0"
        ]
    );
    assert_eq!(p.scq_a()[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.qp_b().qp_state, QpState::Err);
}

#[test]
fn missing_mr_permission_gets_nak_remote_access() {
    let mut p = Pair::new(15, LinkConfig::default(), Opts::default());
    // a read-only MR on B
    let ro = VecMemory::new(4096);
    let pd = p.b.pd;
    let mr = p
        .nic_b()
        .reg_mr(
            pd,
            Arc::new(ro.clone()),
            0x9000_0000,
            AccessFlags::REMOTE_READ,
        )
        .unwrap();
    p.net.start_capture();
    let sg = [sge(&p.a, 0, 16)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: 0x9000_0000,
        rkey: mr.rkey,
        ..Default::default()
    });
    p.run(50);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c[1],
        "nic1 RC ACKNOWLEDGE psn=256 AETH(NAK RemoteAccessError) len=0"
    );
    assert_eq!(p.scq_a()[0].status, WcStatus::RemAccessErr);
    assert_eq!(ro.load(0, 16), vec![0; 16]);
}

#[test]
fn deregistered_rkey_never_works_again() {
    let mut p = Pair::new(16, LinkConfig::default(), Opts::default());
    let pd = p.b.pd;
    let m = VecMemory::new(64);
    let mr = p
        .nic_b()
        .reg_mr(
            pd,
            Arc::new(m.clone()),
            0x7000,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    p.nic_b().dereg_mr(mr).unwrap();
    // the slot is reused by the next registration, with a different key
    let mr2 = p
        .nic_b()
        .reg_mr(
            pd,
            Arc::new(m.clone()),
            0x7000,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    assert_ne!(mr.rkey, mr2.rkey);
    assert_eq!(mr.rkey & 0xFFF, mr2.rkey & 0xFFF);
    let sg = [sge(&p.a, 0, 8)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: 0x7000,
        rkey: mr.rkey,
        ..Default::default()
    });
    p.run(50);
    assert_eq!(p.scq_a()[0].status, WcStatus::RemAccessErr);
}

#[test]
fn misaligned_atomic_rejected_at_post_send() {
    let mut p = Pair::new(17, LinkConfig::default(), Opts::default());
    let q = p.a.qpn;
    let rkey = p.b.mr.rkey;
    let sg = [sge(&p.a, 0, 8)];
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::AtomicFetchAndAdd,
        remote_addr: IOVA + 4,
        rkey,
        ..Default::default()
    };
    assert_eq!(p.nic_a().post_send(q, &wr), Err(Error::Invalid));
}

#[test]
fn uc_message_with_a_gap_is_dropped_and_next_message_delivered() {
    let o = Opts {
        qp_type: QpType::Uc,
        mtu: Mtu::Mtu256,
        ..Default::default()
    };
    let mut p = Pair::new(21, LinkConfig::default(), o);
    p.a.mem.store(0, &pattern(2048, 5));
    p.recv_b(1, 0, 4096);
    p.recv_b(2, 0x4000, 4096);
    p.net.set_filter(|c| {
        if c.repr.bth.psn.value() == 0x101 {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    p.net.start_capture();
    p.post_a(SendWr {
        wr_id: 10,
        sg_list: &[sge(&p.a, 0, 600)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 11,
        sg_list: &[sge(&p.a, 0, 300)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c,
        vec![
            "nic0 UC SEND_FIRST psn=256 len=256",
            "nic0 UC SEND_MIDDLE psn=257 len=256",
            "nic0 UC SEND_LAST psn=258 len=88",
            "nic0 UC SEND_FIRST psn=259 len=256",
            "nic0 UC SEND_LAST psn=260 len=44",
        ]
    );
    // UC completes on transmission
    assert_eq!(
        p.scq_a()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        vec![(10, WcStatus::Success), (11, WcStatus::Success)]
    );
    // the first message is lost; the second lands in the first receive WQE (it was reused)
    let rc = p.rcq_b();
    assert_eq!(
        rc.iter().map(|w| (w.wr_id, w.byte_len)).collect::<Vec<_>>(),
        vec![(1, 300)]
    );
    assert_eq!(p.b.mem.load(0, 300), pattern(300, 5));
}

#[test]
fn ud_send_writes_grh_and_src_qp() {
    let mut p = ud_pair(31);
    p.a.mem.store(0, b"datagram!");
    p.recv_b(1, 0, 256);
    let pd = p.a.pd;
    let bip = p.b.ip;
    let ah = p.nic_a().create_ah(pd, AhAttr::to_ip(bip)).unwrap();
    p.net.start_capture();
    let (bq, aq) = (p.b.qpn, p.a.qpn);
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 9)],
        opcode: WrOpcode::SendWithImm,
        imm_data: 0x1234,
        send_flags: SendFlags::SIGNALED,
        ah: Some(ah),
        remote_qpn: bq,
        remote_qkey: 0x1111_1111,
        ..Default::default()
    });
    p.run(10);
    let cap = p.net.take_capture();
    assert_eq!(
        summary(&cap),
        vec!["nic0 UD SEND_ONLY_WITH_IMMEDIATE psn=256 len=9"]
    );
    let d = cap[0].repr.deth.unwrap();
    assert_eq!((d.qkey, d.src_qp.value()), (0x1111_1111, aq));
    let rc = p.rcq_b();
    assert_eq!(rc.len(), 1);
    assert_eq!(
        (rc[0].byte_len, rc[0].src_qp, rc[0].imm_data),
        (49, aq, 0x1234)
    );
    assert_eq!(rc[0].wc_flags, WcFlags::GRH | WcFlags::WITH_IMM);
    let grh = p.b.mem.load(0, 49);
    assert_eq!(&grh[..20], &[0; 20]);
    assert_eq!(grh[20], 0x45);
    assert_eq!(&grh[32..36], &[10, 0, 0, 1]);
    assert_eq!(&grh[36..40], &[10, 0, 0, 2]);
    assert_eq!(&grh[40..49], b"datagram!");
}

#[test]
fn ud_wrong_qkey_is_dropped_and_counted() {
    let mut p = ud_pair(32);
    p.recv_b(1, 0, 256);
    let pd = p.a.pd;
    let bip = p.b.ip;
    let ah = p.nic_a().create_ah(pd, AhAttr::to_ip(bip)).unwrap();
    let bq = p.b.qpn;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 9)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ah: Some(ah),
        remote_qpn: bq,
        remote_qkey: 0x2222,
        ..Default::default()
    });
    p.run(10);
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
    assert!(p.rcq_b().is_empty());
    assert_eq!(p.nic_b().counters().qkey_violation, 1);
    assert_eq!(p.nic_b().query_port().qkey_viol_cntr, 1);
}

#[test]
fn cq_overflow_raises_cq_error_and_moves_qp_to_error() {
    let o = Opts {
        cqe: 2,
        ..Default::default()
    };
    let mut p = Pair::new(41, LinkConfig::default(), o);
    // a CQ asked for 2 holds 3 (rxe's rounding): the fourth receive completion overflows
    for i in 0..5 {
        p.recv_b(i, 0x100 * i, 64);
    }
    for i in 0..4 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, 4)],
            opcode: WrOpcode::Send,
            ..Default::default()
        });
    }
    p.run(10);
    let mut events = Vec::new();
    while let Some(e) = p.nic_b().poll_event() {
        events.push(e);
    }
    assert_eq!(events, vec![AsyncEvent::CqErr(p.b.rcq)]);
    assert_eq!(p.qp_b().qp_state, QpState::Err);
    assert_eq!(p.nic_b().counters().cq_overflow, 2);
    assert_eq!(p.rcq_b().len(), 3);
}

#[test]
fn corrupted_packet_is_dropped_by_icrc_and_retransmitted() {
    let mut p = Pair::new(
        51,
        LinkConfig::default(),
        Opts {
            timeout: 8,
            ..Default::default()
        },
    );
    p.recv_b(1, 0, 64);
    p.a.mem.store(0, b"abcd");
    // flip one payload bit of the first transmission only
    p.net.set_default_link(LinkConfig {
        corrupt: 1.0,
        ..Default::default()
    });
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.net
        .run_until(|n| n.stats.delivered >= 1, Instant::from_millis(1));
    p.net.set_default_link(LinkConfig::default());
    assert_eq!(p.nic_b().counters().icrc_errors, 1);
    assert_eq!(p.nic_b().counters().rcvd_pkts, 0);
    assert!(p.rcq_b().is_empty());
    p.run(100);
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
    assert_eq!(p.b.mem.load(0, 4), b"abcd");
    assert_eq!(p.nic_b().counters().icrc_errors, 1);
}

#[test]
fn modify_qp_rejects_missing_and_extra_attributes() {
    let mut net = roce_emu::sim::SimNet::new(1, LinkConfig::default());
    let i = net.add_nic(Nic::new(NicConfig::new("10.0.0.9".parse().unwrap())));
    let n = &mut net.nics[i];
    let pd = n.alloc_pd().unwrap();
    let cq = n.create_cq(4).unwrap();
    let qpn = n.create_qp(pd, &small_rc_init(cq, cq)).unwrap();
    assert_eq!(qpn, 17);
    use QpAttrMask as M;
    let a = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..Default::default()
    };
    assert_eq!(
        n.modify_qp(qpn, &a, M::STATE | M::PORT),
        Err(Error::Invalid)
    ); // missing
    assert_eq!(
        n.modify_qp(
            qpn,
            &a,
            M::STATE | M::PORT | M::PKEY_INDEX | M::ACCESS_FLAGS | M::QKEY
        ),
        Err(Error::Invalid)
    ); // extra
    n.modify_qp(
        qpn,
        &a,
        M::STATE | M::PORT | M::PKEY_INDEX | M::ACCESS_FLAGS,
    )
    .unwrap();
    let rts = QpAttr {
        qp_state: QpState::Rts,
        ..Default::default()
    };
    assert_eq!(n.modify_qp(qpn, &rts, M::STATE), Err(Error::Invalid)); // INIT -> RTS is illegal
    assert_eq!(n.query_qp(qpn).unwrap().qp_state, QpState::Init);
    // post_recv in RESET is EINVAL
    n.modify_qp(
        qpn,
        &QpAttr {
            qp_state: QpState::Reset,
            ..Default::default()
        },
        M::STATE,
    )
    .unwrap();
    assert_eq!(
        n.post_recv(
            qpn,
            &RecvWr {
                wr_id: 1,
                sg_list: &[]
            }
        ),
        Err(Error::Invalid)
    );
}
