//! The MAD and CM parsers of the `decode` target: the MAD header view, every CM message view
//! and `Repr`, the REQ path, the whole-MAD parser and the `cma_hdr`, on arbitrary bytes.
//!
//! Invariants besides "no panic": a `Repr` that parses emits bytes that parse to the same
//! `Repr` (reserved bits are not kept, so the bytes themselves may differ there), and the
//! emitted bytes equal the input wherever the input's reserved bits are 0 — checked by
//! emitting twice: emit(parse(emit(parse(x)))) = emit(parse(x)).
use roce_wire::cm::{self, Mad, Message};
use roce_wire::{cma, mad, Error};
use std::fmt::Write as _;

/// Every CM attribute, the nine messages and a few the parser must refuse.
const ATTRS: [u16; 12] = [
    0x0010, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018, 0x0019, 0x0001, 0xFFFF,
];

/// `d` as a MAD, a CM payload of every attribute, a REQ path and a `cma_hdr`.
pub fn run(d: &[u8]) {
    let mut s = String::new();
    if let Ok(p) = mad::Packet::new_checked(d) {
        let _ = (p.base_version(), p.mgmt_class(), p.class_version());
        let _ = (p.response(), p.method(), p.status(), p.class_specific());
        let _ = (p.tid(), p.attr_id(), p.reserved(), p.attr_mod(), p.data());
        let r = mad::Repr::parse(&p).expect("24 bytes parse");
        let _ = write!(s, "{r}");
        let mut b = [0u8; mad::HEADER_LEN];
        r.emit(&mut mad::Packet::new_unchecked(&mut b[..]));
        let mut want = [0u8; mad::HEADER_LEN];
        want.copy_from_slice(&d[..mad::HEADER_LEN]);
        want[18..20].fill(0); // reserved
        assert_eq!(b, want, "MAD header parse → emit");
    }
    match Mad::parse(d) {
        Ok(m) => {
            let _ = write!(s, "{m}");
            let mut out = [0u8; mad::MAD_LEN];
            m.emit(&mut out).expect("256 bytes");
            let again = Mad::parse(&out).expect("emitted MAD parses");
            assert_eq!(again, m, "CM MAD emit → parse");
        }
        Err(e) => {
            let _ = write!(s, "{e}");
            if d.len() >= mad::MAD_LEN {
                assert_ne!(e, Error::Truncated, "a whole MAD is never truncated");
            }
        }
    }
    for attr in ATTRS {
        if let Ok(m) = Message::parse(attr, d) {
            message(&m, &mut s);
        }
    }
    if let Ok(p) = cm::path::Packet::new_checked(d) {
        let r = cm::path::Repr::parse(&p).expect("44 bytes parse");
        let _ = (r.is_present(), write!(s, "{r}"));
    }
    if let Ok(r) = cma::Repr::parse_private_data(d) {
        let _ = write!(s, "{r}");
        let mut b = [0u8; cma::HEADER_LEN];
        r.emit(&mut cma::Packet::new_unchecked(&mut b[..]));
        assert_eq!(
            cma::Repr::parse_private_data(&b),
            Ok(r),
            "cma_hdr emit → parse"
        );
    }
    if d.len() >= 8 {
        let sid = u64::from_be_bytes(d[..8].try_into().unwrap());
        if let Some(id) = cma::ServiceId::from_u64(sid) {
            assert_eq!(id.to_u64(), sid, "service ID round trip");
            let _ = write!(s, "{id}");
        }
    }
}

/// A parsed message: emit → parse gives it back, and emitting that gives the same bytes.
fn message(m: &Message, s: &mut String) {
    let _ = write!(s, "{m}");
    let _ = (
        m.name(),
        m.local_comm_id(),
        m.remote_comm_id(),
        m.service_id(),
    );
    let _ = m.private_data();
    let mut out = [0u8; cm::PAYLOAD_LEN];
    m.emit(&mut out).expect("232 bytes");
    let again = Message::parse(m.attr_id().to_u16(), &out).expect("emitted message parses");
    assert_eq!(&again, m, "{} emit → parse", m.name());
    let mut out2 = [0xFFu8; cm::PAYLOAD_LEN];
    again.emit(&mut out2).expect("232 bytes");
    assert_eq!(out, out2, "{} emit is a function of the Repr", m.name());
    if matches!(m, Message::Req(_) | Message::SidrReq(_)) {
        let _ = cma::Repr::parse_private_data(m.private_data());
    }
}
