//! SRQ, SQD, CQ notification, IPv6, ICRC policy, send-with-invalidate, UD over-MTU.
mod common;
use common::*;
use roce_emu::sim::{LinkConfig, SimNet};
use roce_emu::*;
use roce_wire::aeth::Syndrome;
use std::sync::Arc;

#[test]
fn srq_feeds_receives_and_raises_limit_event() {
    let o = Opts {
        use_srq: true,
        ..Default::default()
    };
    let mut p = Pair::new(1, LinkConfig::default(), o);
    // find B's SRQ: it is the only one; post through the QP must fail (EINVAL)
    let bq = p.b.qpn;
    assert_eq!(
        p.nic_b().post_recv(
            bq,
            &RecvWr {
                wr_id: 1,
                sg_list: &[]
            }
        ),
        Err(Error::Invalid)
    );
    let srq = Srq(0);
    for i in 0..4 {
        let sg = [sge(&p.b, 0x1000 * i, 0x1000)];
        p.nic_b()
            .post_srq_recv(
                srq,
                &RecvWr {
                    wr_id: 100 + i,
                    sg_list: &sg,
                },
            )
            .unwrap();
    }
    p.nic_b()
        .modify_srq(
            srq,
            SrqAttr {
                srq_limit: 3,
                ..Default::default()
            },
            srq_attr_mask::LIMIT,
        )
        .unwrap();
    p.a.mem.store(0, b"0123456789");
    for i in 0..2 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, 10)],
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    p.run(10);
    let rc = p.rcq_b();
    assert_eq!(
        rc.iter().map(|w| (w.wr_id, w.byte_len)).collect::<Vec<_>>(),
        vec![(100, 10), (101, 10)]
    );
    assert_eq!(
        p.nic_b().poll_event(),
        Some(AsyncEvent::SrqLimitReached(srq))
    );
    assert_eq!(p.nic_b().poll_event(), None);
    assert_eq!(p.nic_b().query_srq(srq).unwrap().srq_limit, 0);
    assert_eq!(p.b.mem.load(0x1000, 10), b"0123456789");
}

#[test]
fn sqd_stops_new_work_and_reports_drained() {
    let mut p = Pair::new(2, LinkConfig::default(), Opts::default());
    let aq = p.a.qpn;
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 8)],
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    });
    let a = QpAttr {
        qp_state: QpState::Sqd,
        en_sqd_async_notify: true,
        ..Default::default()
    };
    p.nic_a()
        .modify_qp(aq, &a, QpAttrMask::STATE | QpAttrMask::EN_SQD_ASYNC_NOTIFY)
        .unwrap();
    p.run(10);
    // nothing was started: drained at once, the WR waits
    assert_eq!(
        p.nic_a().poll_event(),
        Some(AsyncEvent::Qp {
            qpn: aq,
            event: EventType::SqDrained
        })
    );
    assert!(p.scq_a().is_empty());
    p.nic_a()
        .modify_qp(
            aq,
            &QpAttr {
                qp_state: QpState::Rts,
                ..Default::default()
            },
            QpAttrMask::STATE,
        )
        .unwrap();
    p.run(10);
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
}

#[test]
fn req_notify_cq_signals_next_completion() {
    let mut p = Pair::new(3, LinkConfig::default(), Opts::default());
    let rcq = p.b.rcq;
    p.nic_b().req_notify_cq(rcq, true).unwrap();
    p.recv_b(1, 0, 64);
    p.recv_b(2, 64, 64);
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::Send,
        ..Default::default()
    });
    p.run(10);
    // unsolicited: no notification with solicited_only
    assert_eq!(p.nic_b().poll_comp_event(), None);
    p.post_a(SendWr {
        wr_id: 2,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SOLICITED,
        ..Default::default()
    });
    p.run(10);
    assert_eq!(p.nic_b().poll_comp_event(), Some(rcq));
    assert_eq!(p.nic_b().poll_comp_event(), None);
    assert_eq!(p.rcq_b().len(), 2);
}

#[test]
fn send_with_invalidate_on_a_user_mr_fails_like_rxe() {
    // rxe only invalidates fast-registration MRs; a user MR's rkey fails (class J): the
    // requester still gets its ACK, the receiver a REM_INV_REQ_ERR and an ERR QP.
    let mut p = Pair::new(4, LinkConfig::default(), Opts::default());
    p.recv_b(1, 0, 64);
    let rkey = p.b.mr.rkey;
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 4)],
        opcode: WrOpcode::SendWithInv,
        invalidate_rkey: rkey,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    p.net.start_capture();
    p.run(10);
    let c = summary(&p.net.take_capture());
    assert_eq!(
        c[0].opcode.info().name,
        "SEND_ONLY_WITH_INVALIDATE",
        "{c:?}"
    );
    assert_eq!(c[1].syndrome, Some(Syndrome::ACK), "{c:?}");
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
    let rc = p.rcq_b();
    assert_eq!((rc[0].wr_id, rc[0].status), (1, WcStatus::RemInvReqErr));
    assert_eq!(p.qp_b().qp_state, QpState::Err);
}

#[test]
fn ud_message_larger_than_mtu_is_silently_completed() {
    let mut p = ud_pair(5);
    let (pd, bip, bq) = (p.a.pd, p.b.ip, p.b.qpn);
    let ah = p.nic_a().create_ah(pd, AhAttr::to_ip(bip)).unwrap();
    p.net.start_capture();
    p.post_a(SendWr {
        wr_id: 1,
        sg_list: &[sge(&p.a, 0, 2000)],
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ah: Some(ah),
        remote_qpn: bq,
        remote_qkey: 0x1111_1111,
        ..Default::default()
    });
    p.run(10);
    assert!(p.net.take_capture().is_empty());
    assert_eq!(p.scq_a()[0].status, WcStatus::Success);
}

#[test]
fn rc_over_ipv6() {
    let mut net = SimNet::new(6, LinkConfig::default());
    let ips = ["fd00::1", "fd00::2"];
    let mut qpn = [0; 2];
    let mut mrs = Vec::new();
    let mut mems = Vec::new();
    let mut cqs = Vec::new();
    for ip in ips {
        let i = net.add_nic(Nic::new(NicConfig::new(ip.parse().unwrap())));
        let n = &mut net.nics[i];
        let pd = n.alloc_pd().unwrap();
        let cq = n.create_cq(16).unwrap();
        let m = VecMemory::new(4096);
        mrs.push(
            n.reg_mr(
                pd,
                Arc::new(m.clone()),
                0,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap(),
        );
        mems.push(m);
        cqs.push(cq);
        qpn[i] = n
            .create_qp(
                pd,
                &QpInitAttr {
                    cap: QpCap {
                        max_inline_data: 16,
                        ..small_rc_init(cq, cq).cap
                    },
                    sq_sig_all: true,
                    ..small_rc_init(cq, cq)
                },
            )
            .unwrap();
    }
    let o = Opts::default();
    for i in 0..2 {
        let me = Side {
            idx: i,
            ip: ips[i].parse().unwrap(),
            pd: Pd(0),
            scq: cqs[i],
            rcq: cqs[i],
            qpn: qpn[i],
            mem: mems[i].clone(),
            mr: mrs[i],
        };
        let peer = Side {
            idx: 1 - i,
            ip: ips[1 - i].parse().unwrap(),
            pd: Pd(0),
            scq: cqs[1 - i],
            rcq: cqs[1 - i],
            qpn: qpn[1 - i],
            mem: mems[1 - i].clone(),
            mr: mrs[1 - i],
        };
        connect(&mut net.nics[i], &me, &peer, &o, 7, 7);
    }
    // inline data straight from the caller's bytes
    let wr = SendWr {
        wr_id: 1,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::INLINE,
        remote_addr: 100,
        rkey: mrs[1].rkey,
        ..Default::default()
    };
    net.nics[0]
        .post_send_inline(qpn[0], &wr, Some(b"over v6"))
        .unwrap();
    net.run_idle(Instant::from_millis(10));
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(net.nics[0].poll_cq(cqs[0], &mut wc), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!(mems[1].load(100, 7), b"over v6");
    // GID table: link-local first, then the address
    assert_eq!(&net.nics[1].gids()[0][..2], &[0xfe, 0x80]);
    assert_eq!(
        net.nics[1].gids()[1],
        "fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets()
    );
}

#[test]
fn icrc_policy_for_unknown_ipv4_id() {
    // (policy, the corrupted one accepted, icrc_unverified, icrc_id_assumed after both)
    for (policy, accepted, unverified, assumed) in [
        (IcrcPolicy::Strict, false, 0, 2),
        (IcrcPolicy::Trust, true, 2, 0),
        (IcrcPolicy::AssumeZeroElseAccept, true, 1, 2),
        (IcrcPolicy::RecoverId, false, 0, 2),
    ] {
        let mut cfg = NicConfig::new("10.0.0.2".parse().unwrap());
        cfg.icrc_policy = policy;
        let mut n = Nic::new(cfg);
        // an ACK to a QP that does not exist, sealed for IPv4 ID 0 but claimed sent with ID 7
        let mut t = [
            0x11u8, 0, 0xff, 0xff, 0, 0, 0, 0x40, 0, 0, 0, 1, 0x1f, 0, 0, 1, 0, 0, 0, 0,
        ];
        let tx = Transmit {
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 0xC001,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len: 20,
        };
        let mut hdr_id7 = t;
        assert!(roce_emu::net::seal(&tx, &mut t));
        let meta = RxMeta {
            src_ip: tx.src_ip,
            dst_ip: tx.dst_ip,
            src_port: 0xC001,
            ipv4_id: None,
            tos: 0,
            ttl: 64,
            flow_label: 0,
        };
        n.handle_datagram(Instant::ZERO, &meta, &t);
        // ID 0 matches under Strict; reaches the QP lookup either way
        assert_eq!(n.counters().no_qp, 1);
        // corrupt the ICRC: only Trust and AssumeZeroElseAccept let it through (to the QP
        // lookup); the engine recovers no ID, so RecoverId drops it as Strict does
        hdr_id7[..16].copy_from_slice(&t[..16]);
        hdr_id7[16..].copy_from_slice(&[1, 2, 3, 4]);
        n.handle_datagram(Instant::ZERO, &meta, &hdr_id7);
        assert_eq!(n.counters().no_qp == 2, accepted);
        assert_eq!(n.counters().icrc_errors == 1, !accepted);
        assert_eq!(n.counters().icrc_unverified, unverified, "{policy:?}");
        assert_eq!(n.counters().icrc_id_assumed, assumed, "{policy:?}");
    }
}

#[test]
fn device_and_port_attributes_are_rxe_defaults() {
    let n = Nic::new(NicConfig::new("10.1.2.3".parse().unwrap()));
    let d = n.query_device();
    assert_eq!(
        (
            d.max_qp,
            d.max_qp_wr,
            d.max_sge,
            d.max_qp_rd_atom,
            d.max_inline_data
        ),
        (0x10000, 0x4000, 32, 128, 400)
    );
    let p = n.query_port();
    assert_eq!(
        (p.max_mtu, p.active_mtu, p.link_layer, p.max_msg_sz),
        (Mtu::Mtu4096, Mtu::Mtu1024, 2, 0x800000)
    );
    assert_eq!(n.query_gid(1), gid_from_ip("10.1.2.3".parse().unwrap()));
    assert_eq!(n.query_gid(5), [0; 16]);
}

#[test]
fn qp_numbers_and_udp_source_ports_follow_rxe() {
    let mut n = Nic::new(NicConfig::new("10.1.2.3".parse().unwrap()));
    let pd = n.alloc_pd().unwrap();
    let cq = n.create_cq(4).unwrap();
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: QpCap {
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        sq_sig_all: false,
    };
    assert_eq!(n.create_qp(pd, &init).unwrap(), 17);
    assert_eq!(n.create_qp(pd, &init).unwrap(), 18);
    assert_eq!(
        roce_emu::net::rxe_udp_sport(17),
        0xC000 | ((17u32.wrapping_mul(0x61C8_8647) >> 18) & 0x3fff) as u16
    );
    assert_eq!(n.destroy_cq(cq), Err(Error::Busy));
    assert_eq!(n.dealloc_pd(pd), Err(Error::Busy));
}

#[test]
fn many_qps_share_the_timer_heap_under_loss() {
    // 40 connected RC QP pairs over a lossy link: every WR completes (the retransmit timers of
    // all QPs are found through the NIC's timer heap), and poll_timeout ends empty.
    let link = LinkConfig {
        loss: 0.15,
        latency_ns: 3_000,
        ..Default::default()
    };
    let o = Opts {
        timeout: 6,
        ..Default::default()
    };
    let mut p = Pair::new(77, link, o);
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
    let mut pairs = Vec::new();
    for _ in 0..40 {
        let (pa, pb, ca, cb) = (p.a.pd, p.b.pd, p.a.scq, p.b.rcq);
        let qa = p.nic_a().create_qp(pa, &init(ca)).unwrap();
        let qb = p.nic_b().create_qp(pb, &init(cb)).unwrap();
        let sa = Side {
            qpn: qa,
            mem: p.a.mem.clone(),
            ..p.a.clone_shallow()
        };
        let sb = Side {
            qpn: qb,
            mem: p.b.mem.clone(),
            ..p.b.clone_shallow()
        };
        let (ia, ib) = (p.a.idx, p.b.idx);
        connect(&mut p.net.nics[ia], &sa, &sb, &o, 10, 20);
        connect(&mut p.net.nics[ib], &sb, &sa, &o, 20, 10);
        pairs.push((qa, qb));
    }
    let rkey = p.b.mr.rkey;
    let lkey = p.a.mr.lkey;
    for (k, &(qa, _)) in pairs.iter().enumerate() {
        for j in 0..3u64 {
            let sg = [Sge {
                addr: IOVA + 0x1000 * k as u64,
                length: 600,
                lkey,
            }];
            let wr = SendWr {
                wr_id: j,
                sg_list: &sg,
                opcode: WrOpcode::RdmaWrite,
                remote_addr: IOVA + 0x1000 * k as u64,
                rkey,
                ..Default::default()
            };
            p.nic_a().post_send(qa, &wr).unwrap();
        }
    }
    p.run(2_000);
    let wc = p.scq_a();
    assert_eq!(wc.len(), 120);
    assert!(wc.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(p.nic_a().poll_timeout(), None);
    assert!(p.net.stats.lost > 0);
}

#[test]
fn reset_to_err_is_a_legal_modify_and_the_qp_reports_err() {
    // IBA 10.3.1: any state may go to ERR; rxe moves a RESET QP there too (found by the cabi
    // fuzz target: the modify succeeded and the QP stayed in RESET).
    let mut net = SimNet::new(3, LinkConfig::default());
    let idx = net.add_nic(Nic::new(NicConfig::new("127.0.0.1".parse().unwrap())));
    let nic = &mut net.nics[idx];
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    let qpn = nic.create_qp(pd, &small_rc_init(cq, cq)).unwrap();
    assert_eq!(nic.query_qp(qpn).unwrap().qp_state, QpState::Reset);
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..Default::default()
    };
    nic.modify_qp(qpn, &attr, QpAttrMask::STATE).unwrap();
    assert_eq!(nic.query_qp(qpn).unwrap().qp_state, QpState::Err);
    // and back to RESET, as from any ERR
    let attr = QpAttr {
        qp_state: QpState::Reset,
        ..Default::default()
    };
    nic.modify_qp(qpn, &attr, QpAttrMask::STATE).unwrap();
    assert_eq!(nic.query_qp(qpn).unwrap().qp_state, QpState::Reset);
}

#[test]
fn a_qp_on_an_srq_raises_last_wqe_reached_once_when_it_leaves_a_working_state_for_err() {
    // Found by the cabi fuzz target: its oracle expected the event for RESET → ERR too. A QP
    // that never left RESET has consumed nothing from the SRQ: as rdmavt, no event then; one
    // event when an INIT (or later) QP goes to ERR; none again for ERR → ERR.
    let mut net = SimNet::new(3, LinkConfig::default());
    let idx = net.add_nic(Nic::new(NicConfig::new("127.0.0.1".parse().unwrap())));
    let nic = &mut net.nics[idx];
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    let srq = nic
        .create_srq(
            pd,
            SrqAttr {
                max_wr: 4,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    let on_srq = QpInitAttr {
        srq: Some(srq),
        ..small_rc_init(cq, cq)
    };
    let (never, worked) = (
        nic.create_qp(pd, &on_srq).unwrap(),
        nic.create_qp(pd, &on_srq).unwrap(),
    );
    use QpAttrMask as M;
    let to = |s| QpAttr {
        qp_state: s,
        port_num: 1,
        ..Default::default()
    };
    let last_wqe = |nic: &mut Nic| {
        let mut got = Vec::new();
        while let Some(e) = nic.poll_event() {
            if let AsyncEvent::Qp {
                qpn,
                event: EventType::QpLastWqeReached,
            } = e
            {
                got.push(qpn);
            }
        }
        got
    };
    nic.modify_qp(never, &to(QpState::Err), M::STATE).unwrap();
    assert_eq!(nic.query_qp(never).unwrap().qp_state, QpState::Err);
    assert_eq!(last_wqe(nic), Vec::<u32>::new(), "RESET -> ERR");
    nic.modify_qp(
        worked,
        &to(QpState::Init),
        M::STATE | M::PORT | M::PKEY_INDEX | M::ACCESS_FLAGS,
    )
    .unwrap();
    nic.modify_qp(worked, &to(QpState::Err), M::STATE).unwrap();
    assert_eq!(last_wqe(nic), vec![worked], "INIT -> ERR");
    nic.modify_qp(worked, &to(QpState::Err), M::STATE).unwrap();
    assert_eq!(last_wqe(nic), Vec::<u32>::new(), "ERR -> ERR");
}
