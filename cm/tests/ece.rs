//! ECE on the wire, as kernel 6.1's cm.c puts it (`cm_format_mad_ece_hdr`, `cm_format_req`,
//! `cm_format_rep`, `cm_format_sidr_rep`): a REQ, REP or SIDR_REP carries the `attr_mod` in
//! the MAD header's AttributeModifier (bytes 20–23) and the Vendor ID in its body (REQ bytes
//! 5–7, REP bytes 15/19/23, SIDR_REP bytes 6–7/11 with only 16 bits); every other message
//! carries 0. The receiver's CONNECT_REQUEST / CONNECT_RESPONSE hands the peer's ECE up; no
//! ECE offered (rxe) → zeros. `rdma_reject_ece` → REJ reason 35 with private data.
mod common;
use common::*;
use roce_cm::{errno, Ece, EventKind, Id, PortSpace, QpKind, RejReason};

/// MAD header AttributeModifier.
const ATTR_MOD: core::ops::Range<usize> = 20..24;
/// Start of the CM message after the 24-byte MAD header.
const BODY: usize = 24;

/// B listens (RC or UD) on 10.0.0.2:7174; A connects offering `ece` (none: `connect`).
/// Returns (A's id, B's child, B's CONNECT_REQUEST's ECE).
fn request(net: &mut Net, kind: QpKind, ece: Option<Ece>) -> (Id, Id, Ece) {
    let ps = if kind == QpKind::Rc {
        PortSpace::Tcp
    } else {
        PortSpace::Udp
    };
    let l = net.b.create_id(ps, kind);
    net.b.bind(l, sa("10.0.0.2:7174")).unwrap();
    net.b.listen(l, 3).unwrap();
    let a = net.a.create_id(ps, kind);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
        .unwrap();
    net.a.resolve_route(now, a, 2000).unwrap();
    match ece {
        Some(e) => net.a.connect_ece(now, a, &param(0x11), e).unwrap(),
        None => net.a.connect(now, a, &param(0x11)).unwrap(),
    }
    net.pump();
    net.take_a();
    let ev = net.take_b();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, EventKind::ConnectRequest);
    (a, ev[0].id, ev[0].ece)
}

#[test]
fn req_and_rep_carry_vendor_id_and_attribute_modifier() {
    let mut net = Net::new();
    let offer = Ece {
        vendor_id: 0x1a2b3c,
        attr_mod: 0x1234_5678,
    };
    let (a, child, got) = request(&mut net, QpKind::Rc, Some(offer));
    assert_eq!(got, offer, "CONNECT_REQUEST carries the REQ's ECE");
    let req = &net.sent(Side::A, REQ)[0].out.bytes;
    assert_eq!(req[ATTR_MOD], [0x12, 0x34, 0x56, 0x78]);
    assert_eq!(req[BODY + 4..BODY + 8], [0x00, 0x1a, 0x2b, 0x3c]);

    // librdmacm's REP: the REQ's Vendor ID echoed, this side's options.
    let answer = Ece {
        vendor_id: 0x1a2b3c,
        attr_mod: 0xabcd,
    };
    let now = net.now;
    net.b.accept_ece(now, child, &param(0x22), answer).unwrap();
    net.pump();
    let rep = &net.sent(Side::B, REP)[0].out.bytes;
    assert_eq!(rep[ATTR_MOD], [0, 0, 0xab, 0xcd]);
    // Local QPN 12–14 with Vendor ID 23:16 in byte 15, 15:8 in byte 19, 7:0 in byte 23.
    assert_eq!(rep[BODY + 12..BODY + 16], [0, 0, 0x22, 0x1a]);
    assert_eq!(rep[BODY + 19], 0x2b);
    assert_eq!(rep[BODY + 23], 0x3c);
    let ev = net.take_a();
    assert_eq!(ev[0].kind, EventKind::ConnectResponse);
    assert_eq!(ev[0].ece, answer, "CONNECT_RESPONSE carries the REP's ECE");
    assert_eq!(ev[0].param.qp_num, 0x22);

    // The RTU (and everything else) carries AttributeModifier 0.
    net.a.establish(now, a).unwrap();
    net.pump();
    assert_eq!(net.sent(Side::A, RTU)[0].out.bytes[ATTR_MOD], [0; 4]);
    // A re-sent REQ is the same bytes: the ECE is part of the outstanding MAD.
    let mut net = Net::new();
    let a = net.a.create_id(PortSpace::Tcp, QpKind::Rc);
    let now = net.now;
    net.a
        .resolve_addr(now, a, None, sa("10.0.0.2:7174"), 2000)
        .unwrap();
    net.a.resolve_route(now, a, 2000).unwrap();
    net.blackhole = Some(Side::A);
    net.a.connect_ece(now, a, &param(0x11), offer).unwrap();
    net.advance_ms(7000);
    let reqs = net.sent(Side::A, REQ);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].out.bytes, reqs[1].out.bytes);
    assert_eq!(reqs[1].out.bytes[ATTR_MOD], [0x12, 0x34, 0x56, 0x78]);
}

/// What librdmacm sends over rxe: `ibv_query_ece` fails, so nothing is offered, and the peer's
/// events report zeros (the kernel's `rdma_cm_event.ece` when none was received).
#[test]
fn no_ece_means_zeros_on_the_wire_and_in_events() {
    let mut net = Net::new();
    let (_, child, got) = request(&mut net, QpKind::Rc, None);
    assert_eq!(got, Ece::default());
    let req = &net.sent(Side::A, REQ)[0].out.bytes;
    assert_eq!(req[ATTR_MOD], [0; 4]);
    assert_eq!(req[BODY + 4..BODY + 8], [0; 4]);
    let now = net.now;
    net.b.accept(now, child, &param(0x22)).unwrap();
    net.pump();
    let rep = &net.sent(Side::B, REP)[0].out.bytes;
    assert_eq!(rep[ATTR_MOD], [0; 4]);
    assert_eq!((rep[BODY + 15], rep[BODY + 19], rep[BODY + 23]), (0, 0, 0));
    assert_eq!(net.take_a()[0].ece, Ece::default());
}

/// `rdma_reject_ece`: REJ reason 35 with the same private-data rules as `rdma_reject` (148
/// bytes at most); ucma refuses any reason other than 28 and 35.
#[test]
fn reject_with_reason_35() {
    let mut net = Net::new();
    let (a, child, _) = request(&mut net, QpKind::Rc, None);
    let now = net.now;
    let vendor = RejReason::VendorOptionNotSupported;
    assert_eq!(
        net.b.reject_reason(now, child, &[7; 149], vendor),
        Err(errno::EINVAL)
    );
    assert_eq!(
        net.b.reject_reason(now, child, b"", RejReason::StaleConn),
        Err(errno::EINVAL)
    );
    net.b
        .reject_reason(now, child, b"no such option", vendor)
        .unwrap();
    net.pump();
    let rej = &net.sent(Side::B, REJ)[0].out.bytes;
    assert_eq!(rej[ATTR_MOD], [0; 4]);
    assert_eq!(rej[BODY + 10..BODY + 12], [0, 35], "Reason 35");
    assert_eq!(&rej[BODY + 84..BODY + 98], b"no such option");
    let ev = net.take_a();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].id, ev[0].kind, ev[0].status),
        (a, EventKind::Rejected, 35)
    );
    assert_eq!(ev[0].private_data.len(), 148);
    assert_eq!(&ev[0].private_data[..14], b"no such option");
}

/// A SIDR_REP (success) carries the `attr_mod` and 16 bits of the Vendor ID as
/// `cm_format_sidr_rep` writes them: bits 15:8 in the 16-bit field at 6, 7:0 at 11. A
/// SIDR_REQ carries none; a reject's SIDR_REP neither.
#[test]
fn sidr_rep_carries_ece() {
    let mut net = Net::new();
    let (_, child, got) = request(
        &mut net,
        QpKind::Ud,
        Some(Ece {
            vendor_id: 0x1a2b3c,
            attr_mod: 9,
        }),
    );
    assert_eq!(got, Ece::default(), "a SIDR_REQ has no ECE");
    assert_eq!(net.sent(Side::A, SIDR_REQ)[0].out.bytes[ATTR_MOD], [0; 4]);
    let now = net.now;
    let e = Ece {
        vendor_id: 0x1a2b3c,
        attr_mod: 0x0102_0304,
    };
    net.b.accept_ece(now, child, &param(0x33), e).unwrap();
    net.pump();
    let rep = &net.sent(Side::B, SIDR_REP)[0].out.bytes;
    assert_eq!(rep[ATTR_MOD], [1, 2, 3, 4]);
    assert_eq!(rep[BODY + 6..BODY + 12], [0, 0x2b, 0, 0, 0x33, 0x3c]);

    let mut net = Net::new();
    let (_, child, _) = request(&mut net, QpKind::Ud, None);
    let now = net.now;
    net.b
        .reject_reason(now, child, b"", RejReason::VendorOptionNotSupported)
        .unwrap();
    net.pump();
    let rep = &net.sent(Side::B, SIDR_REP)[0].out.bytes;
    assert_eq!(rep[BODY + 4], 2, "status 2 (rejected) whatever the reason");
    assert_eq!(rep[ATTR_MOD], [0; 4]);
}
