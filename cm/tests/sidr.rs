//! UD ids through SIDR (rdma-cm-notes §5.2): SIDR_REQ with the cma_hdr and 180 user bytes,
//! SIDR_REP status 0 with Q_Key 0x01234567 → ESTABLISHED with the UD parameters, reject →
//! UNREACHABLE with status 2, no listener → status 1, retries → -ETIMEDOUT, QP attributes.
mod common;
use common::*;
use roce_cm::{errno, ConnParam, Event, EventKind, Id, PortSpace, QpKind};
use roce_emu::{QpAttrMask, QpState};
use roce_wire::cm::Message;
use std::net::SocketAddr;

fn kinds(ev: &[Event]) -> Vec<EventKind> {
    ev.iter().map(|e| e.kind).collect()
}

fn listen_ud(net: &mut Net) -> Id {
    let l = net.b.create_id(PortSpace::Udp, QpKind::Ud);
    net.b.bind(l, sa("0.0.0.0:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    l
}

fn connect_ud(net: &mut Net, port: u16, pd: &[u8]) -> Id {
    let a = net.a.create_id(PortSpace::Udp, QpKind::Ud);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, SocketAddr::new(ip(B_IP), port), 2000)
        .unwrap();
    net.a.resolve_route(now, a, 2000).unwrap();
    let p = ConnParam {
        private_data: pd.to_vec(),
        qp_num: 0x31,
        ..Default::default()
    };
    net.a.connect(now, a, &p).unwrap();
    net.pump();
    let ev = net.take_a();
    assert_eq!(
        kinds(&ev[..2]),
        [EventKind::AddrResolved, EventKind::RouteResolved]
    );
    net.ev_a.extend_from_slice(&ev[2..]);
    a
}

#[test]
fn sidr_accept() {
    let mut net = Net::new();
    let l = listen_ud(&mut net);
    let a = connect_ud(&mut net, 7174, b"ping");
    let req = match net.sent(Side::A, SIDR_REQ)[0].parse().message {
        Message::SidrReq(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(req.service_id, 0x0000_0000_0111_1C06);
    assert_eq!(req.partition_key, 0xFFFF);
    let h = roce_wire::cma::Repr::parse_private_data(&req.private_data).unwrap();
    assert_eq!((h.src_addr, h.dst_addr), (ip(A_IP), ip(B_IP)));
    assert_eq!(&req.private_data[36..40], b"ping");

    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::ConnectRequest]);
    let e = &ev[0];
    assert_eq!((e.listen_id, e.private_data.len()), (Some(l), 180));
    assert_eq!(&e.private_data[..4], b"ping");
    let ud = e.ud.clone().unwrap();
    assert_eq!(
        (ud.remote, ud.local, ud.qp_num, ud.qkey),
        (ip(A_IP), ip(B_IP), 0, 0)
    );
    let c = e.id;
    // UD QP attributes: INIT with the rdma_cm Q_Key (`cma_ib_init_qp_attr`).
    let (init, m) = net.b.init_qp_attr(c, QpState::Init).unwrap();
    assert_eq!(
        m,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY
    );
    assert_eq!(
        (init.qkey, init.pkey_index, init.port_num),
        (0x0123_4567, 0, 1)
    );

    let now = net.now;
    let p = ConnParam {
        private_data: b"pong".to_vec(),
        qp_num: 0x42,
        ..Default::default()
    };
    assert_eq!(
        net.b
            .accept(
                now,
                c,
                &ConnParam {
                    private_data: vec![0; 137],
                    ..p.clone()
                }
            )
            .unwrap_err(),
        errno::EINVAL
    );
    net.b.accept(now, c, &p).unwrap();
    net.pump();
    let rep = match net.sent(Side::B, SIDR_REP)[0].parse().message {
        Message::SidrRep(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(
        (rep.request_id, rep.qpn, rep.qkey, rep.service_id),
        (req.request_id, 0x42, 0x0123_4567, req.service_id)
    );
    assert_eq!(
        net.sent(Side::B, SIDR_REP)[0].tid(),
        net.sent(Side::A, SIDR_REQ)[0].tid()
    );
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Established]);
    assert_eq!(
        (ev[0].id, ev[0].status, ev[0].private_data.len()),
        (a, 0, 136)
    );
    assert_eq!(&ev[0].private_data[..4], b"pong");
    let ud = ev[0].ud.clone().unwrap();
    assert_eq!(
        (ud.qp_num, ud.qkey, ud.remote, ud.local, ud.hop_limit),
        (0x42, 0x0123_4567, ip(B_IP), ip(A_IP), 64)
    );
    let port = net.a.local_addr(a).unwrap().port();
    assert_eq!(
        ud.flow_label,
        roce_wire::cma::roce_udp_flow_label(port, 7174)
    );
    // No RTU, no timewait, no timers.
    assert!(net.take_b().is_empty());
    assert_eq!((net.a.poll_timeout(), net.b.poll_timeout()), (None, None));
    assert_eq!(net.log.len(), 2);
}

#[test]
fn sidr_reject_no_listener_and_timeout() {
    let mut net = Net::new();
    listen_ud(&mut net);
    connect_ud(&mut net, 7174, b"");
    let c = net.take_b()[0].id;
    net.b.reject(net.now, c, b"no").unwrap();
    net.pump();
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Unreachable]);
    assert_eq!((ev[0].status, ev[0].private_data.len()), (2, 136));
    assert_eq!(&ev[0].private_data[..2], b"no");

    // Nobody on the port: SIDR_REP status 1.
    connect_ud(&mut net, 9, b"");
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Unreachable]);
    assert_eq!(ev[0].status, 1);
    assert_eq!(net.b.counters().no_listener, 1);

    // Nobody at all: 16 SIDR_REQs 4096 ms apart, then -ETIMEDOUT.
    net.blackhole = Some(Side::A);
    connect_ud(&mut net, 7174, b"");
    net.advance_ms(16 * 4096 - 1);
    assert!(net.take_a().is_empty());
    net.advance_ms(1);
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Unreachable]);
    assert_eq!(ev[0].status, -errno::ETIMEDOUT);
}

#[test]
fn duplicate_sidr_req_is_dropped_and_destroy_rejects() {
    let mut net = Net::new();
    listen_ud(&mut net);
    net.drop_nth(Side::B, SIDR_REP, 0);
    let a = connect_ud(&mut net, 7174, b"");
    let c = net.take_b()[0].id;
    // Retransmitted SIDR_REQ while the request is pending: dropped (by Request ID).
    net.advance_ms(4096);
    assert_eq!(net.sent(Side::A, SIDR_REQ).len(), 2);
    assert!(net.take_b().is_empty());
    assert_eq!(net.b.counters().duplicates, 1);
    // Destroying the pending child answers status 2.
    net.b.destroy_id(net.now, c);
    net.pump();
    assert_eq!(net.sent(Side::B, SIDR_REP).len(), 1);
    let _ = a;
    // (that SIDR_REP was the dropped one); the next retransmission finds no pending request
    // and makes a new CONNECT_REQUEST.
    net.advance_ms(4096);
    assert_eq!(kinds(&net.take_b()), [EventKind::ConnectRequest]);
}

#[test]
fn rc_request_to_a_ud_listener_is_refused() {
    let mut net = Net::new();
    listen_ud(&mut net);
    net.connect_a(PortSpace::Udp, QpKind::Rc, &ConnParam::default());
    net.pump();
    let ev = net.take_a();
    assert_eq!((ev[2].kind, ev[2].status), (EventKind::Rejected, 28));
}
