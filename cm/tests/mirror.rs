//! The connection mirror of a shared device's process (`Endpoint::poll_mirror`) and the MAD
//! its steering helper sends for a dead process's connection (`roce_cm::farewell`): for every
//! state, byte for byte what `destroy_id` sends for the same connection (DREQ when
//! established, REJ 28 mid-handshake, REJ 4 for an unanswered REQ, DREP after a DREQ,
//! SIDR_REP 2); no record once the connection has nothing to send.
mod common;
use common::*;
use roce_cm::{farewell, ConnMirror, Endpoint, Id, MirrorChange, MirrorState};
use roce_cm::{PortSpace, QpKind};
use roce_wire::cm::{Message, MsgResponse, RejReason, SidrStatus};
use std::collections::BTreeMap;

/// What the helper holds for one process: the changes applied, keyed by local comm ID; each
/// change also travels as its text form (one control line) and must come back equal.
#[derive(Default)]
struct Held(BTreeMap<u32, ConnMirror>);

impl Held {
    fn drain(&mut self, ep: &mut Endpoint) -> Vec<MirrorChange> {
        let mut v = Vec::new();
        while let Some(c) = ep.poll_mirror() {
            assert_eq!(c.to_string().parse::<MirrorChange>(), Ok(c), "{c}");
            match c {
                MirrorChange::Set(m) => {
                    self.0.insert(m.local_comm_id, m);
                }
                MirrorChange::Removed(id) => {
                    assert!(self.0.remove(&id).is_some(), "removed {id:x} never set");
                }
            }
            v.push(c);
        }
        v
    }
    fn only(&self) -> ConnMirror {
        assert_eq!(self.0.len(), 1, "{:?}", self.0);
        *self.0.values().next().unwrap()
    }
}

/// B listens on 10.0.0.2:7174; A resolves and connects. Returns (A's id, B's child).
fn request(net: &mut Net) -> (Id, Id) {
    let l = net.b.create_id(PortSpace::Tcp, QpKind::Rc);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.connect_a(PortSpace::Tcp, QpKind::Rc, &param(0x11));
    net.pump();
    let child = net.take_b()[0].id;
    net.take_a();
    (a, child)
}

/// Destroys `id` on `ep` and checks that the MAD it sends is `farewell` of the record held for
/// it, and that the record goes. Returns the MAD.
fn destroy_matches(ep: &mut Endpoint, held: &mut Held, guid: u64, id: Id) -> roce_cm::MadOut {
    held.drain(ep);
    let m = held.only();
    let now = roce_cm::Instant::from_millis(5000);
    ep.destroy_id(now, id);
    let sent = ep.poll_transmit().expect("destroy_id sent nothing");
    assert!(ep.poll_transmit().is_none());
    assert_eq!(farewell(&m, guid), sent, "{m}");
    assert_eq!(held.drain(ep), [MirrorChange::Removed(m.local_comm_id)]);
    assert!(held.0.is_empty());
    sent
}

fn message(m: &roce_cm::MadOut) -> Message {
    roce_wire::cm::Mad::parse(&m.bytes).unwrap().message
}

/// [`request`], then B accepts and A establishes. Returns (A's id, B's child).
fn established(net: &mut Net) -> (Id, Id) {
    let (a, child) = request(net);
    let now = net.now;
    net.b.accept(now, child, &param(0x22)).unwrap();
    net.pump();
    net.a.establish(now, a).unwrap();
    net.pump();
    (a, child)
}

#[test]
fn established_farewell_is_destroy_ids_dreq() {
    for passive in [false, true] {
        let mut net = Net::new();
        let (a, child) = established(&mut net);
        let (mut ha, mut hb) = (Held::default(), Held::default());
        ha.drain(&mut net.a);
        hb.drain(&mut net.b);
        assert_eq!(ha.only().state, MirrorState::Established);
        assert_eq!(hb.only().state, MirrorState::Established);
        let (ep, h, guid, id, qpn) = if passive {
            (&mut net.b, &mut hb, B_GUID, child, 0x11)
        } else {
            (&mut net.a, &mut ha, A_GUID, a, 0x22)
        };
        let sent = destroy_matches(ep, h, guid, id);
        match message(&sent) {
            Message::Dreq(d) => assert_eq!(d.remote_qpn_eecn, qpn),
            m => panic!("{m}"),
        }
    }
}

#[test]
fn handshake_farewells_are_destroy_ids_rejs() {
    // B with the request unanswered (REQ_RCVD/MRA_REQ_SENT): REJ 28, message REQ.
    let mut net = Net::new();
    let (_, child) = request(&mut net);
    let mut hb = Held::default();
    hb.drain(&mut net.b);
    assert_eq!(hb.only().state, MirrorState::ReqRcvd);
    match message(&destroy_matches(&mut net.b, &mut hb, B_GUID, child)) {
        Message::Rej(r) => assert_eq!(
            (r.reason, r.message_rejected),
            (RejReason::ConsumerDefined, MsgResponse::Req)
        ),
        m => panic!("{m}"),
    }

    // B after its REP (REP_SENT) and A after it (REP_RCVD, no RTU yet): REJ 28.
    for (passive, msg) in [(true, MsgResponse::Other), (false, MsgResponse::Rep)] {
        let mut net = Net::new();
        let (a, child) = request(&mut net);
        let now = net.now;
        net.b.accept(now, child, &param(0x22)).unwrap();
        net.pump();
        let (ep, guid, id, state) = if passive {
            (&mut net.b, B_GUID, child, MirrorState::RepSent)
        } else {
            (&mut net.a, A_GUID, a, MirrorState::RepRcvd)
        };
        let mut h = Held::default();
        h.drain(ep);
        assert_eq!(h.only().state, state);
        match message(&destroy_matches(ep, &mut h, guid, id)) {
            Message::Rej(r) => assert_eq!(
                (r.reason, r.message_rejected),
                (RejReason::ConsumerDefined, msg)
            ),
            m => panic!("{m}"),
        }
    }

    // A with its REQ unanswered (REQ_SENT): REJ 4 with A's GUID as ARI.
    let mut net = Net::new();
    net.blackhole = Some(Side::A);
    let a = net.connect_a(PortSpace::Tcp, QpKind::Rc, &param(0x11));
    net.pump();
    let mut ha = Held::default();
    ha.drain(&mut net.a);
    assert_eq!(ha.only().state, MirrorState::ReqSent);
    match message(&destroy_matches(&mut net.a, &mut ha, A_GUID, a)) {
        Message::Rej(r) => {
            assert_eq!(r.reason, RejReason::Timeout);
            assert_eq!(&r.ari[..8], &A_GUID.to_be_bytes());
        }
        m => panic!("{m}"),
    }
}

#[test]
fn dreq_received_and_sidr_farewells() {
    // B received A's DREQ and has not answered: DREP.
    let mut net = Net::new();
    let (a, child) = request(&mut net);
    let now = net.now;
    net.b.accept(now, child, &param(0x22)).unwrap();
    net.pump();
    net.a.establish(now, a).unwrap();
    net.a.disconnect(now, a).unwrap();
    net.pump();
    let mut hb = Held::default();
    hb.drain(&mut net.b);
    assert_eq!(hb.only().state, MirrorState::DreqRcvd);
    assert!(matches!(
        message(&destroy_matches(&mut net.b, &mut hb, B_GUID, child)),
        Message::Drep(_)
    ));

    // B with a SIDR_REQ unanswered: SIDR_REP status 2.
    let mut net = Net::new();
    let l = net.b.create_id(PortSpace::Udp, QpKind::Ud);
    net.b.bind(l, sa("0.0.0.0:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.a.create_id(PortSpace::Udp, QpKind::Ud);
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
        .unwrap();
    net.a.resolve_route(now, a, 2000).unwrap();
    net.a.connect(now, a, &param(0x31)).unwrap();
    net.pump();
    let child = net.take_b()[0].id;
    let mut hb = Held::default();
    hb.drain(&mut net.b);
    assert_eq!(hb.only().state, MirrorState::SidrReqRcvd);
    match message(&destroy_matches(&mut net.b, &mut hb, B_GUID, child)) {
        Message::SidrRep(r) => assert_eq!(r.status, SidrStatus::Reject),
        m => panic!("{m}"),
    }
    // A's SIDR_REQ side sends nothing when destroyed: no record.
    let mut ha = Held::default();
    ha.drain(&mut net.a);
    assert!(ha.0.is_empty());
}

#[test]
fn no_record_once_the_connection_has_nothing_to_send() {
    let mut net = Net::new();
    let (a, child) = established(&mut net);
    let now = net.now;
    let (mut ha, mut hb) = (Held::default(), Held::default());
    ha.drain(&mut net.a);
    hb.drain(&mut net.b);
    let (ma, mb) = (ha.only(), hb.only());
    // A disconnects (DREQ_SENT: its destroy would send nothing), B answers (timewait).
    net.a.disconnect(now, a).unwrap();
    net.pump();
    assert_eq!(
        ha.drain(&mut net.a),
        [MirrorChange::Removed(ma.local_comm_id)]
    );
    net.b.disconnect(now, child).unwrap();
    net.pump();
    hb.drain(&mut net.b);
    assert!(ha.0.is_empty() && hb.0.is_empty(), "{:?} {:?}", ha.0, hb.0);
    assert_eq!(mb.state, MirrorState::Established);
    // Timewait ends, the ids are destroyed: no change, nothing sent.
    net.advance_ms(5000);
    let now = net.now;
    net.a.destroy_id(now, a);
    net.b.destroy_id(now, child);
    assert!(net.a.poll_transmit().is_none() && net.b.poll_transmit().is_none());
    assert!(ha.drain(&mut net.a).is_empty() && hb.drain(&mut net.b).is_empty());
}

#[test]
fn text_form() {
    let m = ConnMirror {
        state: MirrorState::Established,
        local_comm_id: 0x0300_1234,
        remote_comm_id: 0xdead_beef,
        remote_qpn: 0x11,
        service_id: 0x0000_0000_0106_1C06,
        tid: 0x0000_0042_3412_0003,
        local: ip(A_IP),
        peer: "fd00::2".parse().unwrap(),
    };
    assert_eq!(
        m.to_string(),
        "established 3001234 deadbeef 11 1061c06 4234120003 10.0.0.1 fd00::2"
    );
    for c in [MirrorChange::Set(m), MirrorChange::Removed(0x0300_1234)] {
        assert_eq!(c.to_string().parse::<MirrorChange>(), Ok(c));
    }
    for bad in [
        "",
        "set",
        "removed",
        "removed xyz",
        "set established 1 2 3 4 5 10.0.0.1",
        "set gone 1 2 3 4 5 10.0.0.1 10.0.0.2",
        "set established 1 2 3 4 5 10.0.0.1 nowhere",
        "set established 100000000 2 3 4 5 10.0.0.1 10.0.0.2",
    ] {
        assert!(bad.parse::<MirrorChange>().is_err(), "{bad}");
    }
}
