//! RC connection setup and teardown between two endpoints: the events on both sides, the QP
//! attributes, the MADs (TIDs, PSNs, QPNs), and a REQ compared byte for byte with the layout of
//! the kernel REQ the notes captured (rdma-cm-notes §3, §8 row 1).
mod common;
use common::*;
use roce_cm::{ConnParam, EventKind, Id, PortSpace, QpKind};
use roce_emu::{AccessFlags, Mtu, QpAttrMask, QpState};
use roce_wire::cm::Message;

fn rping_param(qpn: u32, pd: &[u8]) -> ConnParam {
    ConnParam {
        private_data: pd.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: qpn,
        ..Default::default()
    }
}

/// B listens on 10.0.0.2:7174; A resolves and connects with `pd`. Returns (A's id, B's
/// listener, B's child) after the CONNECT_REQUEST.
fn setup(net: &mut Net, pd: &[u8]) -> (Id, Id, Id) {
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
        .unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::AddrResolved]);
    net.a.resolve_route(now, a, 2000).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::RouteResolved]);
    net.a.connect(now, a, &rping_param(0x11, pd)).unwrap();
    net.pump();
    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::ConnectRequest]);
    assert_eq!(ev[0].listen_id, Some(l));
    (a, l, ev[0].id)
}

pub fn kinds(ev: &[roce_cm::Event]) -> Vec<EventKind> {
    ev.iter().map(|e| e.kind).collect()
}

#[test]
fn connect_accept_establish_disconnect() {
    let mut net = Net::new();
    let (a, l, child) = setup(&mut net, b"hello");
    let local_a = net.a.local_addr(a).unwrap();
    assert_eq!(local_a.ip(), ip(A_IP));
    assert!((32768..=60999).contains(&local_a.port()));
    assert_eq!(net.a.peer_addr(a), Some(sa("10.0.0.2:7174")));
    assert_eq!(net.b.local_addr(child), Some(sa("10.0.0.2:7174")));
    assert_eq!(net.b.peer_addr(child), Some(local_a));

    // The REQ and the passive side's CONNECT_REQUEST.
    let req = match net.sent(Side::A, REQ)[0].parse().message {
        Message::Req(r) => r,
        m => panic!("{m}"),
    };
    let now = net.now;
    let a_init = net.a.init_qp_attr(a, QpState::Init).unwrap();
    assert_eq!(
        a_init.1,
        QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT
    );
    assert_eq!(
        a_init.0.qp_access_flags,
        AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
    );
    let b_init = net.b.init_qp_attr(child, QpState::Init).unwrap();
    assert_eq!((b_init.0.pkey_index, b_init.0.port_num), (0, 1));

    net.b
        .accept(now, child, &rping_param(0x22, b"world"))
        .unwrap();
    net.pump();
    let rep = match net.sent(Side::B, REP)[0].parse().message {
        Message::Rep(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(
        (rep.local_qpn, rep.remote_comm_id),
        (0x22, req.local_comm_id)
    );
    assert_eq!(
        (rep.target_ack_delay, rep.rnr_retry_count, rep.local_ca_guid),
        (15, 7, B_GUID)
    );
    assert_ne!(rep.starting_psn, req.starting_psn);

    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::ConnectResponse]);
    let e = &ev[0];
    assert_eq!((e.id, e.status, e.private_data.len()), (a, 0, 196));
    assert_eq!(&e.private_data[..5], b"world");
    assert!(e.private_data[5..].iter().all(|&b| b == 0));
    assert_eq!(
        (
            e.param.qp_num,
            e.param.responder_resources,
            e.param.initiator_depth,
            e.param.rnr_retry_count
        ),
        (0x22, 1, 1, 7)
    );

    // QP attributes: each side's RTR receives at the PSN it advertised and sends to the peer's
    // QPN; its RTS sends from the PSN the peer advertised (notes §6 PSN rule).
    let (rtr, m) = net.a.init_qp_attr(a, QpState::Rtr).unwrap();
    assert_eq!(
        m,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER
    );
    assert_eq!(
        (rtr.dest_qp_num, rtr.rq_psn),
        (0x22, req.starting_psn.value())
    );
    assert_eq!(
        (rtr.path_mtu, rtr.max_dest_rd_atomic, rtr.min_rnr_timer),
        (Mtu::Mtu1024, 1, 0)
    );
    assert_eq!(rtr.ah_attr.dgid, roce_emu::gid_from_ip(ip(B_IP)));
    let fl = roce_wire::cma::roce_udp_flow_label(local_a.port(), 7174);
    assert_eq!(
        (
            rtr.ah_attr.flow_label,
            rtr.ah_attr.hop_limit,
            rtr.ah_attr.traffic_class,
            rtr.ah_attr.sgid_index
        ),
        (fl, 64, 0, 0)
    );
    assert!(rtr.ah_attr.is_global);
    assert_eq!(rtr.ah_attr.port_num, 1);
    let (rts, m) = net.a.init_qp_attr(a, QpState::Rts).unwrap();
    assert_eq!(
        m,
        QpAttrMask::STATE
            | QpAttrMask::SQ_PSN
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MAX_QP_RD_ATOMIC
            | QpAttrMask::TIMEOUT
    );
    assert_eq!(
        (
            rts.sq_psn,
            rts.retry_cnt,
            rts.rnr_retry,
            rts.max_rd_atomic,
            rts.timeout
        ),
        (rep.starting_psn.value(), 7, 7, 1, 19)
    );
    let (brtr, _) = net.b.init_qp_attr(child, QpState::Rtr).unwrap();
    assert_eq!(
        (brtr.dest_qp_num, brtr.rq_psn),
        (0x11, rep.starting_psn.value())
    );
    assert_eq!(brtr.ah_attr.dgid, roce_emu::gid_from_ip(ip(A_IP)));
    assert_eq!(
        brtr.ah_attr.flow_label, fl,
        "the passive side copies the REQ's flow label"
    );
    let (brts, _) = net.b.init_qp_attr(child, QpState::Rts).unwrap();
    assert_eq!(
        (brts.sq_psn, brts.timeout, brts.rnr_retry),
        (req.starting_psn.value(), 19, 7)
    );
    assert_eq!(
        net.a.init_qp_attr(a, QpState::Sqd).unwrap_err(),
        roce_cm::errno::EINVAL
    );

    // RTU: no event on the active side (librdmacm reports ESTABLISHED), ESTABLISHED on B.
    net.a.establish(now, a).unwrap();
    assert_eq!(net.a.establish(now, a).unwrap_err(), roce_cm::errno::EINVAL);
    net.pump();
    assert!(net.take_a().is_empty());
    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::Established]);
    assert_eq!((ev[0].id, ev[0].private_data.len()), (child, 0));
    assert_eq!(
        net.b.notify(now, child).unwrap_err(),
        roce_cm::errno::EISCONN
    );

    // A disconnects: DREQ → B DISCONNECTED; B disconnects: DREP → A DISCONNECTED; both exit
    // timewait after IBA_time(19) = 2048 ms.
    net.a.disconnect(now, a).unwrap();
    net.pump();
    assert!(net.take_a().is_empty());
    assert_eq!(kinds(&net.take_b()), [EventKind::Disconnected]);
    net.b.disconnect(now, child).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::Disconnected]);
    assert!(net.take_b().is_empty());
    net.advance_ms(2047);
    assert!(net.take_a().is_empty() && net.take_b().is_empty());
    net.advance_ms(1);
    assert_eq!(kinds(&net.take_a()), [EventKind::TimewaitExit]);
    assert_eq!(kinds(&net.take_b()), [EventKind::TimewaitExit]);
    assert_eq!(net.a.poll_timeout(), None);
    assert_eq!(net.b.poll_timeout(), None);

    // TIDs (notes §2): the active side's REQ, RTU and DREQ share its TID; the REP echoes the
    // REQ's, the DREP the DREQ's.
    let t = |s: Side, at: u16| net.sent(s, at)[0].tid();
    assert_eq!(t(Side::A, RTU), t(Side::A, REQ));
    assert_eq!(t(Side::A, DREQ), t(Side::A, REQ));
    assert_eq!(t(Side::B, REP), t(Side::A, REQ));
    assert_eq!(t(Side::B, DREP), t(Side::A, DREQ));
    // low 32 bits: the Local Comm ID byte-reversed (a little-endian kernel's raw __be32)
    assert_eq!(t(Side::A, REQ) as u32, req.local_comm_id.swap_bytes());
    assert!(t(Side::A, REQ) >> 32 != 0 && t(Side::A, REQ) >> 32 < 256);
    let dreq = match net.sent(Side::A, DREQ)[0].parse().message {
        Message::Dreq(d) => d,
        m => panic!("{m}"),
    };
    assert_eq!(
        (dreq.remote_qpn_eecn, dreq.remote_comm_id),
        (0x22, rep.local_comm_id)
    );
    // Each MAD exactly once, no loss, nothing else on the wire.
    let attrs: Vec<(Side, u16)> = net.log.iter().map(|s| (s.from, s.attr)).collect();
    assert_eq!(
        attrs,
        [
            (Side::A, REQ),
            (Side::B, REP),
            (Side::A, RTU),
            (Side::A, DREQ),
            (Side::B, DREP)
        ]
    );
    for s in &net.log {
        let m = s.parse();
        let src = if s.from == Side::A {
            ip(A_IP)
        } else {
            ip(B_IP)
        };
        assert_eq!(
            (s.out.src, m.header.method, m.header.class_version),
            (src, 3, 2)
        );
    }
    assert_eq!(net.a.counters().mads_sent, 3);
    assert_eq!(net.b.counters().mads_received, 3);
    let _ = l;
}

/// The REQ of an rping-like connect (resp res 1, init depth 1, retry 7, RNR 7, no private data,
/// MTU 1024, IPv4) laid out from the notes' field table (§3) with the values the capture shows
/// (§8 row 1); only the comm ID, starting PSN, QPN, GUID and source port are this run's.
#[test]
fn req_matches_the_captured_kernel_req() {
    let mut net = Net::new();
    let (a, _, _) = setup(&mut net, b"");
    let s = &net.sent(Side::A, REQ)[0];
    let b = &s.out.bytes;
    let port = net.a.local_addr(a).unwrap().port();
    // MAD header (notes §2)
    assert_eq!(&b[..8], &[0x01, 0x07, 0x02, 0x03, 0, 0, 0, 0]);
    assert_eq!(&b[16..24], &[0x00, 0x10, 0, 0, 0, 0, 0, 0]);
    let p = &b[24..];
    let lcid = &p[0..4];
    let psn = &p[44..47];
    let mut want = [0u8; 232];
    let mut put = |at: usize, v: &[u8]| want[at..at + v.len()].copy_from_slice(v);
    put(0, lcid);
    put(8, &0x0000_0000_0106_1C06u64.to_be_bytes()); // service ID: TCP port 7174
    put(16, &A_GUID.to_be_bytes());
    put(32, &[0x00, 0x00, 0x11]); // QPN
    put(35, &[1]); // responder resources
    put(39, &[1]); // initiator depth
    put(43, &[20 << 3]); // remote CM response timeout 20, RC, no flow control
    put(44, psn);
    put(47, &[20 << 3 | 7]); // local CM response timeout 20, retry 7
    put(48, &[0xFF, 0xFF]); // P_Key
    put(50, &[3 << 4 | 7]); // MTU 1024, RNR retry 7
    put(51, &[15 << 4]); // max CM retries 15
    put(52, &[0xFF, 0xFF, 0xFF, 0xFF]); // permissive LIDs
    put(56, &roce_emu::gid_from_ip(ip(A_IP)));
    put(72, &roce_emu::gid_from_ip(ip(B_IP)));
    let fl = (port as u32 * 31 + 7174) & 0xF_FFFF;
    put(88, &(fl << 12).to_be_bytes()); // flow label, rate 0
    put(93, &[64]); // hop limit; TC 0, SL 0, not subnet-local around it
    put(95, &[19 << 3]); // local ACK timeout 19
                         // alternate path all zero; cma_hdr: v0, IPv4, source port, addresses; 56 zero user bytes
    put(140, &[0x00, 0x40]);
    put(142, &port.to_be_bytes());
    put(156, &[10, 0, 0, 1]);
    put(172, &[10, 0, 0, 2]);
    assert_eq!(p, &want[..]);
    assert_ne!(lcid, &[0, 0, 0, 0]);
    // The TID's high word is the small agent number; the BTH/IP are the caller's.
    assert!(s.tid() >> 32 < 256);
}

#[test]
fn reject_with_private_data() {
    let mut net = Net::new();
    let (a, _, child) = setup(&mut net, b"");
    let now = net.now;
    assert_eq!(
        net.b.reject(now, child, &[7u8; 149]).unwrap_err(),
        roce_cm::errno::EINVAL
    );
    net.b.reject(now, child, b"go away").unwrap();
    net.pump();
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Rejected]);
    assert_eq!(
        (ev[0].id, ev[0].status, ev[0].private_data.len()),
        (a, 28, 148)
    );
    assert_eq!(&ev[0].private_data[..7], b"go away");
    let rej = match net.sent(Side::B, REJ)[0].parse().message {
        Message::Rej(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(rej.message_rejected, roce_wire::cm::MsgResponse::Req);
    assert_ne!(
        rej.local_comm_id, 0,
        "after the delayed MRA the REJ carries the passive id"
    );
    assert_eq!(
        net.sent(Side::B, REJ)[0].tid(),
        net.sent(Side::A, REQ)[0].tid()
    );
    // Nothing left running: the REQ timer is gone.
    assert_eq!(net.a.poll_timeout(), None);
    net.advance_ms(200_000);
    assert_eq!(net.sent(Side::A, REQ).len(), 1);
    assert!(net.take_a().is_empty());
}

#[test]
fn no_listener_is_rejected_with_reason_8() {
    let mut net = Net::new();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:9999"), 2000)
        .unwrap();
    net.a.resolve_route(now, a, 2000).unwrap();
    net.a.connect(now, a, &rping_param(5, b"")).unwrap();
    net.pump();
    let ev = net.take_a();
    assert_eq!(
        kinds(&ev),
        [
            EventKind::AddrResolved,
            EventKind::RouteResolved,
            EventKind::Rejected
        ]
    );
    assert_eq!((ev[2].status, ev[2].private_data.len()), (8, 148));
    let rej = match net.sent(Side::B, REJ)[0].parse().message {
        Message::Rej(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(rej.local_comm_id, 0);
    assert_eq!(net.b.counters().no_listener, 1);
    assert_eq!(net.a.poll_timeout(), None);
}

#[test]
fn cma_hdr_mismatch_is_rejected_with_reason_28() {
    let mut net = Net::with(
        config(A_IP, A_GUID, 1),
        roce_cm::Config {
            addrs: vec![ip(B_IP), ip("10.0.0.3")],
            ..config(B_IP, B_GUID, 2)
        },
    );
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.3:7174")).unwrap();
    net.b.listen(l, 0).unwrap();
    net.connect_a(PortSpace::Tcp, QpKind::Rc, &rping_param(5, b""));
    net.pump();
    assert_eq!(
        net.take_a().last().map(|e| (e.kind, e.status)),
        Some((EventKind::Rejected, 28))
    );
    assert!(net.take_b().is_empty());
    assert_eq!(net.b.counters().bad_cma_hdr, 1);
}

/// `rdma_set_option` RDMA_OPTION_ID_TOS before route resolution puts the traffic class in the
/// route, the REQ's path and both sides' address vectors; RDMA_OPTION_ID_ACK_TIMEOUT on either
/// side's id replaces the path's timeout at RTS (rdma-core's test_rdmacm_async_traffic sets 21
/// on the passive child and checks the QP), and is refused on a UD id, as the kernel does.
#[test]
fn tos_and_ack_timeout_options() {
    let mut net = Net::new();
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a.set_tos(a, 0x68).unwrap();
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
        .unwrap();
    net.pump();
    net.a.resolve_route(now, a, 2000).unwrap();
    net.pump();
    net.take_a();
    net.a.connect(now, a, &rping_param(0x11, b"")).unwrap();
    net.pump();
    let child = net.take_b()[0].id;
    let req = match net.sent(Side::A, REQ)[0].parse().message {
        Message::Req(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(req.primary_path.traffic_class, 0x68);
    net.b.set_ack_timeout(child, 21).unwrap();
    net.b.accept(now, child, &rping_param(0x22, b"")).unwrap();
    net.pump();
    let (brtr, _) = net.b.init_qp_attr(child, QpState::Rtr).unwrap();
    assert_eq!(brtr.ah_attr.traffic_class, 0x68);
    let (brts, m) = net.b.init_qp_attr(child, QpState::Rts).unwrap();
    assert!(m.contains(QpAttrMask::TIMEOUT));
    assert_eq!(brts.timeout, 21);
    let (artr, _) = net.a.init_qp_attr(a, QpState::Rtr).unwrap();
    assert_eq!(artr.ah_attr.traffic_class, 0x68);
    let (arts, _) = net.a.init_qp_attr(a, QpState::Rts).unwrap();
    assert_eq!(arts.timeout, 19, "A set no ACK timeout: the path's");
    let u = net.a.create_id(PortSpace::Udp, QpKind::Ud);
    assert_eq!(net.a.set_ack_timeout(u, 21), Err(libc_einval()));
}

fn libc_einval() -> i32 {
    22
}
