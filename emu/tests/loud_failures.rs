//! Failing as rxe fails, loudly (issue 20 item 3): address vectors the kernel refuses on a RoCE
//! port are refused here with the same errno and a diagnostic; the link-local GID is refused
//! instead of sending nothing (deviation 18); UD receive completions carry the packet's L3 type
//! in `wc.sl` as ConnectX reports it (deviation 19); retries and RNR retries running out are
//! diagnosed once per QP and counted in rxe's counters.
mod common;
use common::*;
use roce_emu::diag::NO_QP;
use roce_emu::sim::{LinkConfig, SimNet};
use roce_emu::*;
use std::net::IpAddr;
use std::sync::Arc;

fn drain(nic: &mut Nic) -> Vec<(u32, Diagnostic)> {
    std::iter::from_fn(|| nic.poll_diagnostic()).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A NIC on 10.0.0.1 with an RC QP in INIT.
fn nic_with_init_qp() -> (Nic, Pd, u32) {
    let mut n = Nic::new(NicConfig::new(ip("10.0.0.1")));
    let pd = n.alloc_pd().unwrap();
    let cq = n.create_cq(16).unwrap();
    let qpn = n.create_qp(pd, &small_rc_init(cq, cq)).unwrap();
    let a = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..Default::default()
    };
    use QpAttrMask as M;
    n.modify_qp(
        qpn,
        &a,
        M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
    )
    .unwrap();
    (n, pd, qpn)
}

fn to_rtr(n: &mut Nic, qpn: u32, av: AhAttr) -> Result<()> {
    use QpAttrMask as M;
    let a = QpAttr {
        qp_state: QpState::Rtr,
        ah_attr: av,
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: qpn,
        ..Default::default()
    };
    n.modify_qp(
        qpn,
        &a,
        M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER,
    )
}

#[test]
fn address_vectors_the_kernel_refuses_are_refused_with_its_errno_and_said_once() {
    let (mut n, pd, qpn) = nic_with_init_qp();
    let gids = n.gids().to_vec();
    let good = AhAttr::to_ip(ip("10.0.0.2"));
    let cases: [(AhAttr, Error, AvProblem); 6] = [
        (
            AhAttr {
                is_global: false,
                ..good
            },
            Error::Invalid,
            AvProblem::NoGrh,
        ),
        (
            AhAttr {
                port_num: 0,
                ..good
            },
            Error::Invalid,
            AvProblem::BadPort { port: 0 },
        ),
        (
            AhAttr {
                sgid_index: 5,
                ..good
            },
            Error::NoData,
            AvProblem::EmptySourceGid { index: 5 },
        ),
        (
            AhAttr {
                sgid_index: 0,
                ..good
            },
            Error::Invalid,
            AvProblem::LinkLocalSource { index: 0 },
        ),
        (
            AhAttr {
                sgid_index: 0,
                dgid: gids[0],
                ..good
            },
            Error::Invalid,
            AvProblem::LinkLocalSource { index: 0 },
        ),
        (
            AhAttr {
                dgid: [0; 16],
                ..good
            },
            Error::Invalid,
            AvProblem::FamilyMismatch {
                index: 1,
                sgid: gids[1],
                dgid: [0; 16],
            },
        ),
    ];
    for (av, err, problem) in cases {
        assert_eq!(to_rtr(&mut n, qpn, av), Err(err), "{problem:?}");
        assert_eq!(n.create_ah(pd, av), Err(err), "{problem:?}");
        let d = drain(&mut n);
        let want = |verb| Diagnostic::AddressVector {
            verb,
            problem,
            ip_gid: gids[1],
        };
        // (the second link-local case is the same cause: said once per QP / per device)
        if av.dgid == gids[0] {
            assert!(d.is_empty(), "{d:?}");
        } else {
            assert_eq!(
                d,
                vec![(qpn, want("ibv_modify_qp")), (NO_QP, want("ibv_create_ah"))]
            );
        }
        assert_eq!(n.query_qp(qpn).unwrap().qp_state, QpState::Init);
    }
    assert_eq!(n.counters().diag_bad_av, 12);
    // The message names the rule and the GID to use; an AH's has no QP.
    let m = want_msg(NO_QP, AvProblem::NoGrh, gids[1]);
    assert_eq!(
        m,
        "ibv_create_ah refused the address vector: ah_attr.is_global is 0, and on a RoCE port every \
         address vector needs a GRH (EINVAL, as the kernel's rdma_check_ah_attr). Set \
         ah_attr.is_global = 1, ah_attr.grh.dgid to the peer's GID and ah_attr.grh.sgid_index = 1 \
         (GID ::ffff:10.0.0.1): ibv_*_pingpong need -g 1, perftest -x 1."
    );
    assert!(
        want_msg(qpn, AvProblem::LinkLocalSource { index: 0 }, gids[1]).starts_with(&format!(
            "QP {qpn:#x}: ibv_create_ah refused the address vector: ah_attr.grh.sgid_index 0 is \
             the port's link-local GID (fe80::), which this emulated NIC lists as rxe does but \
             cannot send from"
        ))
    );
    assert_eq!(to_rtr(&mut n, qpn, good), Ok(()));
    assert!(n.create_ah(pd, good).is_ok());
    assert!(drain(&mut n).is_empty());
}

fn want_msg(qpn: u32, problem: AvProblem, ip_gid: Gid) -> String {
    Diagnostic::AddressVector {
        verb: "ibv_create_ah",
        problem,
        ip_gid,
    }
    .message(qpn)
}

/// A UD SEND from a NIC on `addr` to itself: the receive completion.
fn ud_to_self(addr: &str) -> WorkCompletion {
    let mut net = SimNet::new(9, LinkConfig::default());
    let i = net.add_nic(Nic::new(NicConfig::new(ip(addr))));
    let n = &mut net.nics[i];
    let pd = n.alloc_pd().unwrap();
    let cq = n.create_cq(16).unwrap();
    let mem = VecMemory::new(4096);
    let mr = n
        .reg_mr(pd, Arc::new(mem.clone()), IOVA, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let qpn = n
        .create_qp(
            pd,
            &QpInitAttr {
                qp_type: QpType::Ud,
                ..small_rc_init(cq, cq)
            },
        )
        .unwrap();
    let me = Side {
        idx: i,
        ip: ip(addr),
        pd,
        scq: cq,
        rcq: cq,
        qpn,
        mem,
        mr,
    };
    let o = Opts {
        qp_type: QpType::Ud,
        ..Default::default()
    };
    connect(n, &me, &me, &o, 1, 1);
    let rs = [sge(&me, 0, 256)];
    n.post_recv(
        qpn,
        &RecvWr {
            wr_id: 7,
            sg_list: &rs,
        },
    )
    .unwrap();
    let ah = n.create_ah(pd, AhAttr::to_ip(ip(addr))).unwrap();
    let ss = [sge(&me, 1024, 8)];
    n.post_send(
        qpn,
        &SendWr {
            wr_id: 1,
            sg_list: &ss,
            opcode: WrOpcode::Send,
            ah: Some(ah),
            remote_qpn: qpn,
            remote_qkey: 0x1111_1111,
            ..Default::default()
        },
    )
    .unwrap();
    net.run_idle(Instant::from_millis(10));
    let mut wc = [WorkCompletion::default(); 4];
    let k = net.nics[i].poll_cq(cq, &mut wc);
    let r: Vec<_> = wc[..k].iter().filter(|w| w.wr_id == 7).collect();
    assert_eq!(r.len(), 1, "{:?}", &wc[..k]);
    *r[0]
}

#[test]
fn ud_receive_completions_carry_the_l3_type_in_sl_as_connectx() {
    let v4 = ud_to_self("10.0.0.1");
    assert_eq!(v4.status, WcStatus::Success);
    // UCX 1.13 ud_verbs: (wc.sl & 7) == 2 means an IPv4 header at offset 20 of the GRH area
    assert_eq!(
        (v4.sl, v4.pkey_index, v4.slid, v4.dlid_path_bits),
        (2, 0, 0, 0)
    );
    assert_eq!((v4.byte_len, v4.wc_flags), (48, WcFlags::GRH));
    let v6 = ud_to_self("fd00::1");
    assert_eq!((v6.status, v6.sl), (WcStatus::Success, 1));
    // RC receives keep rxe's 0
    let mut p = Pair::new(3, LinkConfig::default(), Opts::default());
    p.recv_b(1, 0, 64);
    let sg = [sge(&p.a, 0, 8)];
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        ..Default::default()
    });
    p.run(10);
    let r = p.rcq_b();
    assert_eq!((r[0].status, r[0].sl), (WcStatus::Success, 0));
}

#[test]
fn retries_running_out_are_said_once_per_qp_and_counted() {
    let o = Opts {
        retry_cnt: 1,
        timeout: 8,
        ..Default::default()
    };
    let mut p = Pair::new(21, LinkConfig::default(), o);
    // The peer QP is gone: nothing is ever acknowledged.
    let bq = p.b.qpn;
    p.nic_b().destroy_qp(bq).unwrap();
    for id in 1..=2 {
        let sg = [sge(&p.a, 0, 8)];
        p.post_a(SendWr {
            wr_id: id,
            sg_list: &sg,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    p.run(200);
    let s = p.scq_a();
    assert_eq!(s[0].status, WcStatus::RetryExcErr);
    assert_eq!(s[1].status, WcStatus::WrFlushErr);
    let (aq, bip) = (p.a.qpn, p.b.ip);
    let d = drain(p.nic_a());
    let want = Diagnostic::RetryExceeded {
        peer: bip,
        dest_qpn: bq,
        retry_cnt: 1,
    };
    assert_eq!(d, vec![(aq, want)]);
    assert_eq!(
        want.message(aq),
        format!(
            "QP {aq:#x}: no ACK came from the peer 10.0.0.2 QP {bq:#x} through retry_cnt 1 \
             retransmissions (IBV_WC_RETRY_EXC_ERR, QP moved to ERR). Check that the peer is \
             running and reachable at that address, that its QP is in RTR or RTS, and that each \
             side was given the other's QPN, GID and PSNs."
        )
    );
    assert_eq!(p.nic_a().counters().retry_exceeded_err, 1);
    assert_eq!(want.counter(), "retry_exceeded_err");
}

#[test]
fn an_unroutable_datagram_reported_by_the_driver_is_said_once_per_qp_and_cause() {
    let (mut n, _, qpn) = nic_with_init_qp();
    let dst = ip("192.0.2.1");
    for errno in [22, 101] {
        n.report_unroutable(qpn, dst, Unroutable::Refused { errno });
    }
    n.report_unroutable(qpn, ip("0.0.0.0"), Unroutable::Unspecified);
    let d = drain(&mut n);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(n.counters().diag_unroutable, 3);
    assert_eq!(
        d[0].1.message(qpn),
        format!(
            "QP {qpn:#x}: a datagram to 192.0.2.1 could not leave the host: sendmmsg failed with \
             EINVAL (Invalid argument), and every datagram to it is lost. Check that the address \
             vector's dgid is the peer's GID and that this host has a route to it (ip route get \
             192.0.2.1)."
        )
    );
}
