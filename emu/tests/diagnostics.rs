//! Diagnostics that teach: each classic verbs mistake is reported once per (QP, cause), on the
//! side where it happens, with its exact message, and counted every time.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use std::sync::Arc;

fn drain(nic: &mut Nic) -> Vec<(u32, Diagnostic)> {
    std::iter::from_fn(|| nic.poll_diagnostic()).collect()
}

fn write(p: &mut Pair, wr_id: u64, remote_addr: u64, rkey: u32, len: u32) {
    let sg = [sge(&p.a, 0, len)];
    p.post_a(SendWr {
        wr_id,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr,
        rkey,
        ..Default::default()
    });
    p.run(50);
}

fn remote_case(
    seed: u64,
    f: impl FnOnce(&mut Pair) -> (u64, u32, u32),
) -> (Pair, Vec<(u32, Diagnostic)>) {
    let mut p = Pair::new(seed, LinkConfig::default(), Opts::default());
    let (addr, rkey, len) = f(&mut p);
    write(&mut p, 1, addr, rkey, len);
    assert_eq!(p.scq_a()[0].status, WcStatus::RemAccessErr);
    let d = drain(p.nic_b());
    assert!(
        drain(p.nic_a()).is_empty(),
        "reported on the responder only"
    );
    (p, d)
}

#[test]
fn rnr_is_reported_once_on_the_receiver_and_counted_every_time() {
    let o = Opts {
        rnr_retry: 2,
        min_rnr_timer: 1,
        ..Default::default()
    };
    let mut p = Pair::new(71, LinkConfig::default(), o);
    let sg = [sge(&p.a, 0, 8)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.run(200);
    let bq = p.b.qpn;
    let d = drain(p.nic_b());
    assert_eq!(d, vec![(bq, Diagnostic::RnrNoRecvPosted)]);
    assert_eq!(
        d[0].1.message(bq),
        format!(
            "QP {bq:#x}: a SEND arrived but no receive WR was posted (RNR NAK sent). Post receive work \
             requests before the peer sends, e.g. pre-post ibv_post_recv for every expected message."
        )
    );
    assert_eq!(p.nic_b().counters().diag_rnr_no_recv, 3);
    assert_eq!(p.nic_b().counters().send_rnr_err, 3);
    // The sender ran out of RNR retries: said once, on its side (issue 20 item 3).
    let (aq, bip) = (p.a.qpn, p.b.ip);
    assert_eq!(
        drain(p.nic_a()),
        vec![(
            aq,
            Diagnostic::RnrRetryExceeded {
                peer: bip,
                dest_qpn: bq,
                rnr_retry: 2
            }
        )]
    );
}

#[test]
fn bad_rkey() {
    let (mut p, d) = remote_case(72, |p| (IOVA, p.b.mr.rkey ^ 0x0100_0000, 16));
    let bq = p.b.qpn;
    assert_eq!(d, vec![(bq, Diagnostic::RemoteAccess(KeyFault::Unknown))]);
    assert!(d[0].1.message(bq).contains(
        "an incoming RDMA READ/WRITE/atomic was refused with an rkey that no memory region of this device has"
    ));
    assert_eq!(p.nic_b().counters().diag_bad_rkey, 1);
}

#[test]
fn stale_rkey() {
    let (mut p, d) = remote_case(73, |p| {
        let pd = p.b.pd;
        let m = VecMemory::new(64);
        let acc = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let mr = p
            .nic_b()
            .reg_mr(pd, Arc::new(m.clone()), 0x7000, acc)
            .unwrap();
        p.nic_b().dereg_mr(mr).unwrap();
        (0x7000, mr.rkey, 8)
    });
    let bq = p.b.qpn;
    assert_eq!(d, vec![(bq, Diagnostic::RemoteAccess(KeyFault::Stale))]);
    assert!(d[0]
        .1
        .message(bq)
        .contains("with the rkey of a memory region that was deregistered"));
    assert_eq!(p.nic_b().counters().diag_stale_rkey, 1);
}

#[test]
fn out_of_bounds() {
    let (mut p, d) = remote_case(74, |p| (IOVA + MEM as u64 - 8, p.b.mr.rkey, 16));
    let bq = p.b.qpn;
    assert_eq!(
        d,
        vec![(bq, Diagnostic::RemoteAccess(KeyFault::OutOfBounds))]
    );
    assert!(d[0]
        .1
        .message(bq)
        .contains("outside the bounds of the memory region of its rkey"));
    assert_eq!(p.nic_b().counters().diag_remote_out_of_bounds, 1);
}

#[test]
fn no_permission() {
    let (mut p, d) = remote_case(75, |p| {
        let pd = p.b.pd;
        let ro = VecMemory::new(4096);
        let mr = p
            .nic_b()
            .reg_mr(pd, Arc::new(ro), 0x9000_0000, AccessFlags::REMOTE_READ)
            .unwrap();
        (0x9000_0000, mr.rkey, 16)
    });
    let bq = p.b.qpn;
    assert_eq!(
        d,
        vec![(bq, Diagnostic::RemoteAccess(KeyFault::NoPermission))]
    );
    assert!(d[0]
        .1
        .message(bq)
        .contains("on a memory region registered without the remote access it needs"));
    assert_eq!(p.nic_b().counters().diag_remote_no_permission, 1);
}

#[test]
fn lkey_of_another_pd() {
    let mut p = Pair::new(76, LinkConfig::default(), Opts::default());
    let pd2 = p.nic_a().alloc_pd().unwrap();
    let m = VecMemory::new(64);
    let mr2 = p
        .nic_a()
        .reg_mr(pd2, Arc::new(m), 0x5000, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let sg = [Sge {
        addr: 0x5000,
        length: 16,
        lkey: mr2.lkey,
    }];
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
    assert_eq!(p.scq_a()[0].status, WcStatus::LocProtErr);
    let aq = p.a.qpn;
    let d = drain(p.nic_a());
    assert_eq!(
        d,
        vec![(aq, Diagnostic::LocalProtection(KeyFault::WrongPd))]
    );
    assert_eq!(
        d[0].1.message(aq),
        format!(
            "QP {aq:#x}: a work request's scatter/gather entry uses the lkey of a memory region in another \
             protection domain than this QP (IBV_WC_LOC_PROT_ERR, QP moved to ERR). Register the buffer in \
             the QP's PD: the QP, its memory regions and address handles must all come from the same \
             ibv_alloc_pd."
        )
    );
    assert_eq!(p.nic_a().counters().diag_lkey_wrong_pd, 1);
    assert!(drain(p.nic_b()).is_empty());
}

#[test]
fn wrong_state_once_per_verb() {
    let mut p = Pair::new(77, LinkConfig::default(), Opts::default());
    let (pd, cq) = (p.a.pd, p.a.scq);
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        qp_type: QpType::Rc,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        srq: None,
        sq_sig_all: false,
    };
    let q = p.nic_a().create_qp(pd, &init).unwrap();
    let sg = [sge(&p.a, 0, 8)];
    for _ in 0..3 {
        let wr = SendWr {
            sg_list: &sg,
            ..Default::default()
        };
        assert_eq!(p.nic_a().post_send(q, &wr), Err(Error::Invalid));
        let rwr = RecvWr {
            wr_id: 0,
            sg_list: &sg,
        };
        assert_eq!(p.nic_a().post_recv(q, &rwr), Err(Error::Invalid));
    }
    let d = drain(p.nic_a());
    let st = QpState::Reset;
    assert_eq!(
        d,
        vec![
            (
                q,
                Diagnostic::WrongState {
                    verb: "ibv_post_send",
                    state: st
                }
            ),
            (
                q,
                Diagnostic::WrongState {
                    verb: "ibv_post_recv",
                    state: st
                }
            ),
        ]
    );
    assert_eq!(
        d[0].1.message(q),
        format!(
            "QP {q:#x}: ibv_post_send was called while the QP is in state RESET, which does not allow it. \
             Move the QP to INIT (ibv_modify_qp) before posting receives, and to RTS before posting sends."
        )
    );
    assert_eq!(p.nic_a().counters().diag_wrong_state, 6);
}

#[test]
fn cq_overflow_once_per_qp() {
    let o = Opts {
        cqe: 2,
        ..Default::default()
    };
    let mut p = Pair::new(78, LinkConfig::default(), o);
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
    let bq = p.b.qpn;
    let d = drain(p.nic_b());
    assert_eq!(d, vec![(bq, Diagnostic::CqOverflow)]);
    assert!(d[0]
        .1
        .message(bq)
        .contains("a completion was lost because its CQ was full"));
    assert_eq!(p.nic_b().counters().diag_cq_overflow, 2);
}

#[test]
fn qp_without_remote_write_access() {
    let o = Opts {
        access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
        ..Default::default()
    };
    let mut p = Pair::new(79, LinkConfig::default(), o);
    let rkey = p.b.mr.rkey;
    write(&mut p, 1, IOVA, rkey, 16);
    assert_eq!(p.scq_a()[0].status, WcStatus::RemInvReqErr);
    let bq = p.b.qpn;
    let d = drain(p.nic_b());
    let flag = "IBV_ACCESS_REMOTE_WRITE";
    assert_eq!(d, vec![(bq, Diagnostic::QpAccessNotEnabled { flag })]);
    assert_eq!(
        d[0].1.message(bq),
        format!(
            "QP {bq:#x}: an incoming RDMA READ/WRITE/atomic was refused because this QP's \
             qp_access_flags lack IBV_ACCESS_REMOTE_WRITE (NAK invalid request sent, QP moved to \
             ERR). Set qp_access_flags (IBV_QP_ACCESS_FLAGS) with IBV_ACCESS_REMOTE_WRITE when \
             moving the QP to INIT."
        )
    );
    assert_eq!(p.nic_b().counters().diag_qp_access, 1);
    assert!(drain(p.nic_a()).is_empty());
}

#[test]
fn retrying_forever_is_said_once_per_stall_after_a_minute() {
    // retry_cnt 7 retries forever (rxe): the QP keeps retrying toward a dead peer, and after
    // a minute without progress says so, once per stall, naming the peer.
    let mut p = Pair::new(80, LinkConfig::default(), Opts::default());
    assert_eq!(p.opts.retry_cnt, 7);
    let (aq, rkey) = (p.a.qpn, p.b.mr.rkey);
    let link = LinkConfig::default();
    let dead = LinkConfig { loss: 1.0, ..link };
    let expected = vec![(
        aq,
        Diagnostic::RetryingForever {
            peer: p.b.ip,
            dest_qpn: p.b.qpn,
        },
    )];
    // progress at t ≈ 0, then the QP idles for 100 s: idling is no stall
    write(&mut p, 1, IOVA, rkey, 16);
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
    p.net.now = Instant::from_millis(100_000);
    // the peer dies with a WRITE outstanding
    p.net.set_default_link(dead);
    write(&mut p, 2, IOVA, rkey, 16);
    p.run(59_850);
    assert!(drain(p.nic_a()).is_empty(), "said before a minute");
    assert_eq!(p.nic_a().counters().diag_retrying_forever, 0);
    assert!(p.nic_a().counters().retry_timeouts > 100, "still retrying");
    p.run(1_100); // 61 s after the WRITE
    let d = drain(p.nic_a());
    assert_eq!(d, expected);
    assert_eq!(
        d[0].1.message(aq),
        format!(
            "QP {aq:#x}: no response from the peer 10.0.0.2 QP {:#x} has acknowledged anything for \
             a minute; retry_cnt 7 retries forever, so this QP keeps retrying and its work requests \
             wait. Check that the peer is running and reachable, or use a retry_cnt below 7 so \
             that the work fails with IBV_WC_RETRY_EXC_ERR.",
            p.b.qpn
        )
    );
    // the same stall is not reported again
    p.run(120_000);
    assert!(drain(p.nic_a()).is_empty());
    assert_eq!(p.nic_a().counters().diag_retrying_forever, 1);
    assert!(drain(p.nic_b()).is_empty());
    // the peer comes back: the WRITE completes, the stall is over
    p.net.set_default_link(link);
    p.run(2_000);
    let wc = p.scq_a();
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::Success));
    // a second stall is a second report
    p.net.set_default_link(dead);
    write(&mut p, 3, IOVA, rkey, 16);
    p.run(59_000);
    assert!(drain(p.nic_a()).is_empty());
    p.run(2_000);
    assert_eq!(drain(p.nic_a()), expected);
    assert_eq!(p.nic_a().counters().diag_retrying_forever, 2);
}
