//! Malformed and unexpected input is counted, never a panic; the calls' errno values; IPv6.
mod common;
use common::*;
use roce_cm::{errno, ConnParam, Endpoint, Event, EventKind, Id, MadIn, PortSpace, QpKind};
use roce_emu::Instant;
use roce_wire::cm::{dreq, Mad, Message};

fn kinds(ev: &[Event]) -> Vec<EventKind> {
    ev.iter().map(|e| e.kind).collect()
}

fn feed(ep: &mut Endpoint, bytes: &[u8]) {
    let m = MadIn {
        src: ip(A_IP),
        dst: ip(B_IP),
        flow_label: 0,
        traffic_class: 0,
        hop_limit: 64,
        bytes,
    };
    ep.handle_mad(Instant::from_millis(5), &m);
}

fn mad(tid: u64, msg: Message) -> [u8; 256] {
    let mut b = [0u8; 256];
    Mad::new(tid, msg).emit(&mut b).unwrap();
    b
}

#[test]
fn malformed_and_unknown_mads_are_counted() {
    let mut b = Endpoint::new(config(B_IP, B_GUID, 2));
    feed(&mut b, &[]);
    feed(&mut b, &[0u8; 100]);
    feed(&mut b, &[0u8; 257]);
    let c = b.counters().clone();
    assert_eq!((c.mads_received, c.malformed), (3, 3));

    let good = mad(7, Message::Dreq(dreq::Repr::new(1, 2, 3)));
    let mut x = good;
    x[1] = 0x04; // another class
    feed(&mut b, &x);
    let mut x = good;
    x[2] = 1; // class version 1
    feed(&mut b, &x);
    let mut x = good;
    x[3] = 0x81; // GetResp
    feed(&mut b, &x);
    assert_eq!(b.counters().not_cm, 3);
    let mut x = good;
    x[16..18].copy_from_slice(&0x0019u16.to_be_bytes()); // LAP: dropped on RoCE
    feed(&mut b, &x);
    x[16..18].copy_from_slice(&0x0001u16.to_be_bytes()); // ClassPortInfo
    feed(&mut b, &x);
    assert_eq!(b.counters().unknown_attribute, 2);
    // A REJ whose Rejected Info Length exceeds 72.
    let mut x = good;
    x[16..18].copy_from_slice(&0x0012u16.to_be_bytes());
    x[24 + 9] = 73 << 1;
    feed(&mut b, &x);
    assert_eq!(b.counters().malformed, 4);
    assert!(b.poll_transmit().is_none());
    assert!(b.poll_event().is_none());
}

#[test]
fn unknown_connections() {
    let mut b = Endpoint::new(config(B_IP, B_GUID, 2));
    // A DREQ for nothing gets a DREP: comm IDs swapped, TID echoed (`cm_issue_drep`).
    feed(
        &mut b,
        &mad(0x1234, Message::Dreq(dreq::Repr::new(0xAAAA, 0xBBBB, 9))),
    );
    let out = b.poll_transmit().unwrap();
    assert_eq!((out.src, out.dst), (ip(B_IP), ip(A_IP)));
    match Mad::parse(&out.bytes).unwrap() {
        Mad {
            header,
            message: Message::Drep(d),
        } => {
            assert_eq!(
                (header.tid, d.local_comm_id, d.remote_comm_id),
                (0x1234, 0xBBBB, 0xAAAA)
            );
        }
        m => panic!("{m}"),
    }
    // REP/RTU/DREP/REJ/MRA/SIDR_REP for nothing: counted, silent.
    for attr in [0x0011u16, 0x0012, 0x0013, 0x0014, 0x0016, 0x0018] {
        let mut x = [0u8; 256];
        x[..4].copy_from_slice(&[1, 7, 2, 3]);
        x[16..18].copy_from_slice(&attr.to_be_bytes());
        x[24..28].copy_from_slice(&5u32.to_be_bytes());
        x[28..32].copy_from_slice(&6u32.to_be_bytes());
        feed(&mut b, &x);
    }
    assert_eq!(b.counters().unknown_comm_id, 7);
    assert!(b.poll_transmit().is_none());
    assert!(b.poll_event().is_none());
}

/// Random and mutated MADs, into an endpoint with a listener and live connections: no panic,
/// and every MAD accounted for.
#[test]
fn fuzzed_mads_never_panic() {
    let mut net = Net::new();
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 1000).unwrap();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 0)
        .unwrap();
    net.a.resolve_route(now, a, 0).unwrap();
    net.a.connect(now, a, &ConnParam::default()).unwrap();
    net.pump();
    let seeds: Vec<[u8; 256]> = net.log.iter().map(|s| s.out.bytes).collect();
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for i in 0..20_000u32 {
        let mut x = seeds[i as usize % seeds.len()];
        if i % 3 == 0 {
            for b in x.iter_mut() {
                *b = next() as u8;
            }
            x[..4].copy_from_slice(&[1, 7, 2, 3]);
        }
        x[16..18].copy_from_slice(&(0x10 + (next() % 11) as u16).to_be_bytes());
        for _ in 0..(next() % 8) {
            let at = 24 + (next() % 232) as usize;
            x[at] = next() as u8;
        }
        let m = MadIn {
            src: ip(A_IP),
            dst: ip(B_IP),
            flow_label: 0,
            traffic_class: 0,
            hop_limit: 64,
            bytes: &x,
        };
        net.b.handle_mad(now, &m);
        net.a.handle_mad(now, &m);
        while net.a.poll_transmit().is_some() {}
        while net.b.poll_transmit().is_some() {}
        while net.a.poll_event().is_some() {}
        while let Some(e) = net.b.poll_event() {
            if e.kind == EventKind::ConnectRequest && next() % 2 == 0 {
                let _ = net.b.accept(now, e.id, &ConnParam::default());
            }
        }
        if i % 1000 == 0 {
            net.a
                .handle_timeout(now.add_nanos(i as u64 * 1_000_000_000));
            net.b
                .handle_timeout(now.add_nanos(i as u64 * 1_000_000_000));
        }
    }
    assert_eq!(net.b.counters().mads_received, 20_000 + 1);
}

#[test]
fn call_errors() {
    let mut ep = Endpoint::new(roce_cm::Config {
        addrs: vec![ip(A_IP), ip("fd00::1")],
        ..config(A_IP, A_GUID, 3)
    });
    let now = Instant::ZERO;
    let nobody = Id(999);
    assert_eq!(
        ep.bind(nobody, sa("10.0.0.1:1")).unwrap_err(),
        errno::EINVAL
    );
    assert_eq!(ep.listen(nobody, 1).unwrap_err(), errno::EINVAL);
    assert_eq!(
        ep.connect(now, nobody, &ConnParam::default()).unwrap_err(),
        errno::EINVAL
    );
    assert_eq!(ep.disconnect(now, nobody).unwrap_err(), errno::EINVAL);
    assert!(ep.init_qp_attr(nobody, roce_emu::QpState::Init).is_err());
    ep.destroy_id(now, nobody);

    let x = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    assert_eq!(
        ep.bind(x, sa("10.9.9.9:7174")).unwrap_err(),
        errno::EADDRNOTAVAIL
    );
    ep.bind(x, sa("10.0.0.1:7174")).unwrap();
    assert_eq!(ep.bind(x, sa("10.0.0.1:7175")).unwrap_err(), errno::EINVAL);
    let y = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    assert_eq!(
        ep.bind(y, sa("10.0.0.1:7174")).unwrap_err(),
        errno::EADDRINUSE
    );
    assert_eq!(
        ep.bind(y, sa("0.0.0.0:7174")).unwrap_err(),
        errno::EADDRNOTAVAIL
    );
    ep.bind(y, sa("[fd00::1]:7174")).unwrap(); // different specific addresses share a port
    let z = ep.create_id(PortSpace::Udp, QpKind::Ud);
    ep.bind(z, sa("0.0.0.0:7174")).unwrap(); // another port space
                                             // Connecting before the route: EINVAL; too much private data: EINVAL.
    assert_eq!(
        ep.connect(now, x, &ConnParam::default()).unwrap_err(),
        errno::EINVAL
    );
    ep.resolve_addr(now, x, None, sa("10.0.0.2:1"), 0).unwrap();
    ep.resolve_route(now, x, 0).unwrap();
    let big = ConnParam {
        private_data: vec![1; 57],
        ..Default::default()
    };
    assert_eq!(ep.connect(now, x, &big).unwrap_err(), errno::EINVAL);
    assert_eq!(
        ep.accept(now, x, &ConnParam::default()).unwrap_err(),
        errno::EINVAL
    );
    assert_eq!(ep.establish(now, x).unwrap_err(), errno::EINVAL);
    assert_eq!(ep.listen(x, 1).unwrap_err(), errno::EINVAL);
    // Ephemeral ports come from 32768..=60999, and a destroyed id's port is free again.
    let e = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    ep.listen(e, 0).unwrap();
    let p = ep.local_addr(e).unwrap();
    assert!(p.ip().is_unspecified() && (32768..=60999).contains(&p.port()));
    ep.destroy_id(now, e);
    let f = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    ep.bind(f, p).unwrap();
    // No IPv6 address… on an endpoint without one: ADDR_ERROR.
    let mut v4 = Endpoint::new(config(A_IP, A_GUID, 4));
    let g = v4.create_id(PortSpace::Tcp, QpKind::Rc);
    v4.resolve_addr(now, g, None, sa("[fd00::2]:1"), 0).unwrap();
    let ev = v4.poll_event().unwrap();
    assert_eq!(
        (ev.kind, ev.status),
        (EventKind::AddrError, -errno::ENETUNREACH)
    );
    assert_eq!(EventKind::TimewaitExit.raw(), 15);
    assert_eq!(PortSpace::from_raw(0x0106), Some(PortSpace::Tcp));
    assert_eq!(PortSpace::from_raw(0x10106), None);
    assert_eq!(PortSpace::Ib.raw(), 0x013F);
}

#[test]
fn ipv6_connection() {
    let mut net = Net::with(config("fd00::1", A_GUID, 1), config("fd00::2", B_GUID, 2));
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("[::]:7174")).unwrap();
    net.b.listen(l, 1).unwrap();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("[fd00::2]:7174"), 0)
        .unwrap();
    net.a.resolve_route(now, a, 0).unwrap();
    net.a
        .connect(
            now,
            a,
            &ConnParam {
                qp_num: 7,
                ..Default::default()
            },
        )
        .unwrap();
    net.pump();
    let req = match net.sent(Side::A, REQ)[0].parse().message {
        Message::Req(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(req.private_data[1], 0x60);
    assert_eq!(
        req.primary_path.remote_port_gid,
        roce_emu::gid_from_ip(ip("fd00::2"))
    );
    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::ConnectRequest]);
    assert_eq!(net.b.peer_addr(ev[0].id).unwrap().ip(), ip("fd00::1"));
    net.b
        .accept(
            now,
            ev[0].id,
            &ConnParam {
                qp_num: 8,
                ..Default::default()
            },
        )
        .unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a())[2..], [EventKind::ConnectResponse]);
    let (rtr, _) = net.a.init_qp_attr(a, roce_emu::QpState::Rtr).unwrap();
    assert_eq!(
        (rtr.dest_qp_num, rtr.ah_attr.dgid),
        (8, roce_emu::gid_from_ip(ip("fd00::2")))
    );
    // responder resources 0: INIT without remote read/atomic
    let (init, _) = net.a.init_qp_attr(a, roce_emu::QpState::Init).unwrap();
    assert_eq!(init.qp_access_flags, roce_emu::AccessFlags::REMOTE_WRITE);
}

/// Client and server in one endpoint (one CA GUID, one address): the MADs loop back.
#[test]
fn loopback_in_one_endpoint() {
    let mut ep = Endpoint::new(config("127.0.0.1", A_GUID, 9));
    let now = Instant::ZERO;
    let run = |ep: &mut Endpoint| {
        let mut ev = Vec::new();
        loop {
            let mut moved = false;
            while let Some(m) = ep.poll_transmit() {
                moved = true;
                let mi = MadIn {
                    src: m.src,
                    dst: m.dst,
                    flow_label: 0,
                    traffic_class: 0,
                    hop_limit: 64,
                    bytes: &m.bytes,
                };
                ep.handle_mad(now, &mi);
            }
            while let Some(e) = ep.poll_event() {
                ev.push(e);
            }
            if !moved {
                return ev;
            }
        }
    };
    let l = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    ep.bind(l, sa("127.0.0.1:7174")).unwrap();
    ep.listen(l, 8).unwrap();
    let a = ep.create_id(PortSpace::Tcp, QpKind::Rc);
    ep.resolve_addr(now, a, None, sa("127.0.0.1:7174"), 0)
        .unwrap();
    ep.resolve_route(now, a, 0).unwrap();
    ep.connect(
        now,
        a,
        &ConnParam {
            qp_num: 17,
            ..Default::default()
        },
    )
    .unwrap();
    let ev = run(&mut ep);
    assert_eq!(
        kinds(&ev),
        [
            EventKind::AddrResolved,
            EventKind::RouteResolved,
            EventKind::ConnectRequest
        ]
    );
    let c = ev[2].id;
    ep.accept(
        now,
        c,
        &ConnParam {
            qp_num: 18,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(kinds(&run(&mut ep)), [EventKind::ConnectResponse]);
    ep.establish(now, a).unwrap();
    assert_eq!(kinds(&run(&mut ep)), [EventKind::Established]);
    ep.disconnect(now, c).unwrap();
    let ev = run(&mut ep);
    assert_eq!((ev[0].kind, ev[0].id), (EventKind::Disconnected, a));
    ep.disconnect(now, a).unwrap();
    let ev = run(&mut ep);
    assert_eq!((ev[0].kind, ev[0].id), (EventKind::Disconnected, c));
    ep.handle_timeout(now.add_nanos(2_048_000_000));
    assert_eq!(
        kinds(&run(&mut ep)),
        [EventKind::TimewaitExit, EventKind::TimewaitExit]
    );
    assert_eq!(
        ep.counters().duplicates + ep.counters().stale + ep.counters().unexpected,
        0
    );
}
