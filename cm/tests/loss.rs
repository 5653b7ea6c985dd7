//! Loss and timers: REQ/REP/RTU/DREQ/DREP lost once, the duplicate handling that recovers
//! (MRA for a duplicate REQ before accept, RTU re-sent on a duplicate REP, DREP for an unknown
//! DREQ), and retries exhausted (UNREACHABLE / DISCONNECTED with -ETIMEDOUT). Timeouts as the
//! kernel's: REQ 6144 ms, REP 4096 ms, after MRA(24) 65536 + 2048 ms, timewait 2048 ms.
mod common;
use common::*;
use roce_cm::{errno, Event, EventKind, Id, PortSpace, QpKind};
use roce_wire::cm::Message;

fn kinds(ev: &[Event]) -> Vec<EventKind> {
    ev.iter().map(|e| e.kind).collect()
}

/// Listener on B, connect from A; the REQ delivered (or dropped) once.
fn start(net: &mut Net) -> Id {
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.connect_a(PortSpace::Tcp, QpKind::Rc, &param(0x11));
    net.pump();
    assert_eq!(
        kinds(&net.take_a()),
        [EventKind::AddrResolved, EventKind::RouteResolved]
    );
    a
}

fn child(ev: &[Event]) -> Id {
    ev.iter()
        .find(|e| e.kind == EventKind::ConnectRequest)
        .unwrap()
        .id
}

/// Accept on B, establish on A, through the network.
fn finish(net: &mut Net, a: Id, c: Id) {
    let now = net.now;
    net.b.accept(now, c, &param(0x22)).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::ConnectResponse]);
    net.a.establish(net.now, a).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_b()), [EventKind::Established]);
}

#[test]
fn req_lost_then_retransmitted() {
    let mut net = Net::new();
    net.drop_nth(Side::A, REQ, 0);
    let a = start(&mut net);
    net.advance_ms(6143);
    assert_eq!(net.sent(Side::A, REQ).len(), 1);
    assert!(net.take_b().is_empty());
    net.advance_ms(1);
    let reqs = net.sent(Side::A, REQ);
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].out, reqs[1].out,
        "a retransmission is the identical MAD"
    );
    let c = child(&net.take_b());
    finish(&mut net, a, c);
    assert_eq!(net.a.counters().retransmits, 1);
}

#[test]
fn duplicate_req_before_accept_gets_an_mra() {
    let mut net = Net::new();
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    // The application is slow: the REQ is retransmitted and B answers MRA(REQ, 24).
    net.advance_ms(6144);
    assert_eq!(net.sent(Side::A, REQ).len(), 2);
    let mra = match net.sent(Side::B, MRA)[0].parse().message {
        Message::Mra(m) => m,
        m => panic!("{m}"),
    };
    assert_eq!(
        (mra.service_timeout, mra.message_mraed),
        (24, roce_wire::cm::MsgResponse::Req)
    );
    assert_eq!(net.b.counters().duplicates, 1);
    assert!(net.take_b().is_empty(), "no second CONNECT_REQUEST");
    // The MRA stretched A's timer to 65536 + 2048 ms.
    assert_eq!(
        net.a.poll_timeout(),
        Some(net.now.add_nanos(67_584 * 1_000_000))
    );
    net.advance_ms(60_000);
    assert_eq!(net.sent(Side::A, REQ).len(), 2);
    finish(&mut net, a, c);
}

#[test]
fn rep_lost_duplicate_req_ignored_rep_retransmitted() {
    let mut net = Net::new();
    net.drop_nth(Side::B, REP, 0);
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    net.advance_ms(3000);
    let now = net.now;
    net.b.accept(now, c, &param(0x22)).unwrap();
    net.pump();
    // REQ again at 6144 ms: B is in REP_SENT, which ignores it (no MRA, no REP).
    net.advance_ms(3144);
    assert_eq!(net.sent(Side::A, REQ).len(), 2);
    assert_eq!(net.sent(Side::B, MRA).len(), 0);
    assert_eq!(net.b.counters().duplicates, 1);
    assert!(net.take_a().is_empty());
    // REP again 4096 ms after the first.
    net.advance_ms(951);
    assert_eq!(net.sent(Side::B, REP).len(), 1);
    net.advance_ms(1);
    assert_eq!(net.sent(Side::B, REP).len(), 2);
    assert_eq!(kinds(&net.take_a()), [EventKind::ConnectResponse]);
    net.a.establish(net.now, a).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_b()), [EventKind::Established]);
    net.advance_ms(100_000);
    assert_eq!(net.sent(Side::A, REQ).len(), 2);
    assert_eq!(net.sent(Side::B, REP).len(), 2);
}

#[test]
fn rtu_lost_duplicate_rep_resends_the_rtu() {
    let mut net = Net::new();
    net.drop_nth(Side::A, RTU, 0);
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    let now = net.now;
    net.b.accept(now, c, &param(0x22)).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::ConnectResponse]);
    net.a.establish(now, a).unwrap();
    net.pump();
    assert!(net.take_b().is_empty());
    net.advance_ms(4096);
    let rtus = net.sent(Side::A, RTU);
    assert_eq!(rtus.len(), 2);
    assert_eq!(rtus[0].out, rtus[1].out);
    assert_eq!(kinds(&net.take_b()), [EventKind::Established]);
    assert!(net.take_a().is_empty(), "no second CONNECT_RESPONSE");
    assert_eq!(net.a.counters().duplicates, 1);
}

#[test]
fn comm_est_establishes_before_the_rtu() {
    let mut net = Net::new();
    net.drop_nth(Side::A, RTU, 0);
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    let now = net.now;
    net.b.accept(now, c, &param(0x22)).unwrap();
    net.pump();
    net.a.establish(now, a).unwrap();
    net.pump();
    // Data arrived on the QP (IBV_EVENT_COMM_EST): rdma_notify.
    net.b.notify(now, c).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_b()), [EventKind::Established]);
    assert_eq!(net.b.poll_timeout(), None, "the REP is no longer retried");
    net.advance_ms(30_000);
    assert_eq!(net.sent(Side::B, REP).len(), 1);
}

fn connected(net: &mut Net) -> (Id, Id) {
    let a = start(net);
    net.pump();
    let c = child(&net.take_b());
    finish(net, a, c);
    (a, c)
}

#[test]
fn dreq_lost_then_retransmitted() {
    let mut net = Net::new();
    net.drop_nth(Side::A, DREQ, 0);
    let (a, c) = connected(&mut net);
    net.a.disconnect(net.now, a).unwrap();
    net.advance_ms(6143);
    assert!(net.take_b().is_empty());
    net.advance_ms(1);
    assert_eq!(kinds(&net.take_b()), [EventKind::Disconnected]);
    net.b.disconnect(net.now, c).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_a()), [EventKind::Disconnected]);
    net.advance_ms(2048);
    assert_eq!(kinds(&net.take_a()), [EventKind::TimewaitExit]);
    assert_eq!(kinds(&net.take_b()), [EventKind::TimewaitExit]);
}

#[test]
fn drep_lost_peer_destroyed_unknown_dreq_gets_a_drep() {
    let mut net = Net::new();
    net.drop_nth(Side::B, DREP, 0);
    let (a, c) = connected(&mut net);
    net.a.disconnect(net.now, a).unwrap();
    net.pump();
    assert_eq!(kinds(&net.take_b()), [EventKind::Disconnected]);
    net.b.disconnect(net.now, c).unwrap();
    net.pump();
    // B's application is done with the id.
    net.b.destroy_id(net.now, c);
    net.advance_ms(6144);
    let dreps = net.sent(Side::B, DREP);
    assert_eq!(dreps.len(), 2);
    assert_eq!(net.b.counters().unknown_comm_id, 1);
    // the DREP for the unknown connection swaps the DREQ's comm IDs and echoes its TID
    assert_eq!(dreps[1].tid(), net.sent(Side::A, DREQ)[1].tid());
    assert_eq!(dreps[0].out.bytes[24..32], dreps[1].out.bytes[24..32]);
    assert_eq!(kinds(&net.take_a()), [EventKind::Disconnected]);
    assert_eq!(net.take_a().len(), 0);
}

#[test]
fn req_retries_exhausted_is_unreachable() {
    let cfg = roce_cm::Config {
        max_cm_retries: 2,
        ..config(A_IP, A_GUID, 1)
    };
    let mut net = Net::with(cfg, config(B_IP, B_GUID, 2));
    net.blackhole = Some(Side::A);
    let a = start(&mut net);
    net.advance_ms(3 * 6144 - 1);
    assert_eq!(net.sent(Side::A, REQ).len(), 3);
    assert!(net.take_a().is_empty());
    net.advance_ms(1);
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Unreachable]);
    assert_eq!((ev[0].id, ev[0].status), (a, -errno::ETIMEDOUT));
    assert_eq!(net.a.counters().timeouts, 1);
    assert_eq!(net.a.poll_timeout(), None);
    // The REQ advertises the retry count it uses.
    match net.sent(Side::A, REQ)[0].parse().message {
        Message::Req(r) => assert_eq!(r.max_cm_retries, 2),
        m => panic!("{m}"),
    }
}

#[test]
fn default_req_gives_up_after_16_sends() {
    let mut net = Net::new();
    net.blackhole = Some(Side::A);
    start(&mut net);
    net.advance_ms(16 * 6144);
    assert_eq!(net.sent(Side::A, REQ).len(), 16);
    assert_eq!(kinds(&net.take_a()), [EventKind::Unreachable]);
}

#[test]
fn rep_retries_exhausted_is_unreachable_on_the_passive_side() {
    let cfg = roce_cm::Config {
        max_cm_retries: 1,
        ..config(A_IP, A_GUID, 1)
    };
    let mut net = Net::with(cfg, config(B_IP, B_GUID, 2));
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    net.blackhole = Some(Side::B);
    net.b.accept(net.now, c, &param(0x22)).unwrap();
    // REQ's Max CM Retries (1) governs the REP: sent at 0 and 4096, error at 8192.
    net.advance_ms(8191);
    assert_eq!(net.sent(Side::B, REP).len(), 2);
    assert!(net.take_b().is_empty());
    net.advance_ms(1);
    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::Unreachable]);
    assert_eq!((ev[0].id, ev[0].status), (c, -errno::ETIMEDOUT));
    let _ = a;
}

#[test]
fn dreq_retries_exhausted_is_disconnected_with_etimedout() {
    let cfg = roce_cm::Config {
        max_cm_retries: 1,
        ..config(A_IP, A_GUID, 1)
    };
    let mut net = Net::with(cfg, config(B_IP, B_GUID, 2));
    let (a, _) = connected(&mut net);
    net.blackhole = Some(Side::A);
    net.a.disconnect(net.now, a).unwrap();
    net.advance_ms(2 * 6144);
    let ev = net.take_a();
    assert_eq!(kinds(&ev), [EventKind::Disconnected]);
    assert_eq!(ev[0].status, -errno::ETIMEDOUT);
    net.advance_ms(2048);
    assert_eq!(kinds(&net.take_a()), [EventKind::TimewaitExit]);
}

#[test]
fn destroy_in_req_sent_sends_rej_timeout_with_our_guid() {
    let mut net = Net::new();
    let a = start(&mut net);
    net.pump();
    let c = child(&net.take_b());
    net.a.destroy_id(net.now, a);
    net.pump();
    let rej = match net.sent(Side::A, REJ)[0].parse().message {
        Message::Rej(r) => r,
        m => panic!("{m}"),
    };
    assert_eq!(rej.reason.code(), 4);
    assert_eq!(rej.ari(), &A_GUID.to_be_bytes());
    let ev = net.take_b();
    assert_eq!(kinds(&ev), [EventKind::Rejected]);
    assert_eq!((ev[0].id, ev[0].status), (c, 4));
    assert_eq!(net.a.poll_timeout(), None);
    assert_eq!(
        net.b.accept(net.now, c, &param(1)).unwrap_err(),
        errno::EINVAL
    );
}

#[test]
fn destroy_established_sends_one_dreq() {
    let mut net = Net::new();
    let (a, c) = connected(&mut net);
    net.a.destroy_id(net.now, a);
    net.advance_ms(100_000);
    assert_eq!(net.sent(Side::A, DREQ).len(), 1);
    assert_eq!(kinds(&net.take_b()), [EventKind::Disconnected]);
    net.b.disconnect(net.now, c).unwrap();
    net.advance_ms(3000);
    assert_eq!(kinds(&net.take_b()), [EventKind::TimewaitExit]);
    assert_eq!(net.a.counters().unknown_comm_id, 1, "the DREP found no id");
    assert!(net.take_a().is_empty());
}

#[test]
fn destroying_a_listener_rejects_its_unpolled_requests() {
    let mut net = Net::new();
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    net.connect_a(PortSpace::Tcp, QpKind::Rc, &param(0x11));
    let now = net.now;
    // Deliver the REQ without polling B's events.
    while let Some(m) = net.a.poll_transmit() {
        let mad = roce_cm::MadIn {
            src: m.src,
            dst: m.dst,
            flow_label: 0,
            traffic_class: 0,
            hop_limit: 64,
            bytes: &m.bytes,
        };
        net.b.handle_mad(now, &mad);
    }
    net.b.destroy_id(now, l);
    assert!(net.b.poll_event().is_none());
    net.pump();
    let ev = net.take_a();
    assert_eq!(kinds(&ev).last(), Some(&EventKind::Rejected));
    assert_eq!(ev.last().unwrap().status, 28);
}

#[test]
fn backlog_of_unpolled_requests() {
    let mut net = Net::new();
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 1).unwrap();
    let now = net.now;
    let mut ids = Vec::new();
    for q in 0..2 {
        let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
        net.a
            .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
            .unwrap();
        net.a.resolve_route(now, a, 2000).unwrap();
        net.a.connect(now, a, &param(0x11 + q)).unwrap();
        ids.push(a);
    }
    while let Some(m) = net.a.poll_transmit() {
        let mad = roce_cm::MadIn {
            src: m.src,
            dst: m.dst,
            flow_label: 0,
            traffic_class: 0,
            hop_limit: 64,
            bytes: &m.bytes,
        };
        net.b.handle_mad(now, &mad);
    }
    assert_eq!(net.b.counters().backlog_drops, 1);
    assert!(net.b.poll_transmit().is_none(), "dropped without a REJ");
    // Once polled, the retransmitted REQ gets in.
    net.pump();
    assert_eq!(kinds(&net.take_b()), [EventKind::ConnectRequest]);
    net.advance_ms(6144);
    assert_eq!(kinds(&net.take_b()), [EventKind::ConnectRequest]);
}
