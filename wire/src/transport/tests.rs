//! Tests of the transport packet view and `Repr`: round trips, fast paths against the views.

use super::*;
use crate::opcode::{Transport, OPCODE_TABLE};
use crate::Psn;

/// For every supported or known opcode: construct a packet with every header it needs,
/// emit, parse, and get the same Repr and bytes back.
#[test]
fn every_opcode_roundtrips() {
    for (op, info) in OPCODE_TABLE.iter().enumerate() {
        if !info.is_known() {
            continue;
        }
        let op = Opcode(op as u8);
        let mut r = Repr::new(bth::Repr::new(op, 0x12_3456, Psn::new(0xFF_FFFE)));
        let o = info.offsets();
        r.rdeth = o.rdeth.map(|_| rdeth::Repr {
            resv: 0,
            ee_context: 7,
        });
        r.deth = o.deth.map(|_| deth::Repr {
            qkey: 0x1111_1111,
            resv: 0,
            src_qp: crate::Qpn::new(0x22),
        });
        r.xrceth = o.xrceth.map(|_| 0x33);
        r.feth = o
            .feth
            .map(|_| feth::Repr::new(feth::PLACEMENT_GLOBAL, feth::SELECT_MR));
        r.reth = o.reth.map(|_| reth::Repr {
            va: 0x1000,
            rkey: 0xabcd,
            dma_len: 5,
        });
        r.atomic_eth = o.atmeth.map(|_| atomic_eth::Repr {
            va: 8,
            rkey: 9,
            swap_add: 10,
            compare: 11,
        });
        r.aeth = o.aeth.map(|_| aeth::Repr {
            syndrome: aeth::Syndrome::RnrNak { timer: 3 },
            msn: 99,
        });
        r.atomic_ack_eth = o.atmack.map(|_| atomic_ack_eth::Repr { orig: 12 });
        r.immdt = o.immdt.map(|_| immdt::Repr { imm: 0xdead_beef });
        r.ieth = o.ieth.map(|_| ieth::Repr { rkey: 0x55 });
        r.cnp_reserved = info.flags.contains(OpFlags::CNP).then_some([0; 16]);
        let plen = if info.flags.contains(OpFlags::PAYLOAD) {
            5
        } else {
            0
        };
        r.set_payload_len(plen);
        let mut buf = std::vec![0xEEu8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload_len(), plen, "{op}");
        let back = Repr::parse(&p).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert_eq!(back, r, "{op}");
        let mut again = std::vec![0u8; r.buffer_len()];
        back.emit(&mut Packet::new_unchecked(&mut again[..]));
        // payload bytes are the caller's: copy them before comparing
        let (s, e) = (p.payload_offset(), p.payload_offset() + plen);
        again[s..e].copy_from_slice(&buf[s..e]);
        let n = again.len();
        again[n - 4..].copy_from_slice(&buf[n - 4..]);
        assert_eq!(again, buf, "{op}");
        if info.transport == Transport::Ud {
            assert_eq!(p.deth().unwrap().src_qp(), 0x22);
        }
    }
}

/// The per-header views and their `Repr`s: the reference [`Repr::parse_into`] and
/// [`Repr::emit_into`] are checked against.
fn view_parse(p: &Packet<&[u8]>) -> Result<Repr> {
    p.check_len()?;
    let info = p.info();
    if info.support == Support::Unknown {
        return Err(Error::UnknownOpcode(p.opcode().0));
    }
    let bth = bth::Repr::parse(&p.bth())?;
    let body = p.buffer.len() - info.hdr_len as usize - ICRC_LEN;
    if body & 3 != 0 {
        return Err(Error::BadPad);
    }
    if !info.flags.contains(OpFlags::PAYLOAD) && body != 0 {
        return Err(Error::BadLength);
    }
    let mut r = Repr::new(bth);
    r.payload_len = body - bth.pad_cnt as usize;
    r.rdeth = p.rdeth().map(|v| rdeth::Repr::parse(&v).unwrap());
    r.deth = p.deth().map(|v| deth::Repr::parse(&v).unwrap());
    r.xrceth = p
        .offsets()
        .xrceth
        .map(|at| field::u32_at(p.buffer, at..at + 4));
    r.feth = p.feth().map(|v| feth::Repr::parse(&v).unwrap());
    r.reth = p.reth().map(|v| reth::Repr::parse(&v).unwrap());
    r.atomic_eth = p.atomic_eth().map(|v| atomic_eth::Repr::parse(&v).unwrap());
    r.aeth = p.aeth().map(|v| aeth::Repr::parse(&v).unwrap());
    r.atomic_ack_eth = p
        .atomic_ack_eth()
        .map(|v| atomic_ack_eth::Repr::parse(&v).unwrap());
    r.immdt = p.immdt().map(|v| immdt::Repr::parse(&v).unwrap());
    r.ieth = p.ieth().map(|v| ieth::Repr::parse(&v).unwrap());
    if info.flags.contains(OpFlags::CNP) {
        let mut c = [0u8; 16];
        c.copy_from_slice(&p.buffer[12..28]);
        r.cnp_reserved = Some(c);
    }
    Ok(r)
}

fn view_emit(r: &Repr, b: &mut [u8]) {
    let o = offsets_of(r.bth.opcode);
    r.bth.emit(&mut bth::Packet::new_unchecked(&mut b[..]));
    let mut put = |at: Option<usize>, f: &mut dyn FnMut(&mut [u8])| {
        if let Some(at) = at {
            f(&mut b[at..]);
        }
    };
    put(o.rdeth, &mut |s| {
        r.rdeth
            .unwrap_or_default()
            .emit(&mut rdeth::Packet::new_unchecked(s))
    });
    put(o.deth, &mut |s| {
        r.deth
            .unwrap_or_default()
            .emit(&mut deth::Packet::new_unchecked(s))
    });
    put(o.xrceth, &mut |s| {
        field::set_u32(s, 0..4, r.xrceth.unwrap_or(0))
    });
    put(o.feth, &mut |s| {
        r.feth
            .unwrap_or_default()
            .emit(&mut feth::Packet::new_unchecked(s))
    });
    put(o.reth, &mut |s| {
        r.reth
            .unwrap_or_default()
            .emit(&mut reth::Packet::new_unchecked(s))
    });
    put(o.atmeth, &mut |s| {
        r.atomic_eth
            .unwrap_or_default()
            .emit(&mut atomic_eth::Packet::new_unchecked(s))
    });
    put(o.aeth, &mut |s| {
        r.aeth
            .unwrap_or(aeth::Repr {
                syndrome: aeth::Syndrome::ACK,
                msn: 0,
            })
            .emit(&mut aeth::Packet::new_unchecked(s))
    });
    put(o.atmack, &mut |s| {
        r.atomic_ack_eth
            .unwrap_or_default()
            .emit(&mut atomic_ack_eth::Packet::new_unchecked(s))
    });
    put(o.immdt, &mut |s| {
        r.immdt
            .unwrap_or_default()
            .emit(&mut immdt::Packet::new_unchecked(s))
    });
    put(o.ieth, &mut |s| {
        r.ieth
            .unwrap_or_default()
            .emit(&mut ieth::Packet::new_unchecked(s))
    });
    if r.bth.opcode.has(OpFlags::CNP) {
        b[12..28].copy_from_slice(&r.cnp_reserved.unwrap_or([0; 16]));
    }
    let pad_at = o.payload + r.payload_len;
    b[pad_at..pad_at + r.bth.pad_cnt as usize].fill(0);
}

/// Every opcode, pseudo-random header bytes and lengths: `parse_into` (also into a dirty
/// `Repr`) gives what the per-header views give, the same error class, and `emit_into`
/// writes the bytes the views write.
#[test]
fn fast_parse_and_emit_match_the_views() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut last = Repr::new(bth::Repr::new(Opcode(0), 0, Psn::new(0)));
    last.cnp_reserved = Some([7; 16]);
    last.rdeth = Some(rdeth::Repr {
        resv: 1,
        ee_context: 2,
    });
    last.xrceth = Some(3);
    last.feth = Some(feth::Repr::from_raw(4));
    for i in 0..200_000u32 {
        let op = (i & 0xFF) as u8;
        let hdr = Opcode(op).info().hdr_len as usize;
        let extra = match rnd() % 4 {
            0 => 0,
            1 => rnd() as usize % 8,
            _ => rnd() as usize % 80,
        };
        let len = (hdr + 4 + extra).max(rnd() as usize % 20);
        let mut b: std::vec::Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        if !b.is_empty() {
            b[0] = op;
        }
        if len > 1 && rnd() % 10 < 7 {
            b[1] &= 0xF0; // mostly TVer 0
        }
        let p = Packet::new_unchecked(&b[..]);
        let want = view_parse(&p);
        assert_eq!(
            p.check_len().and_then(|()| p.check_well_formed()),
            want.map(|_| ()),
            "check_well_formed op {op:#x} case {i}"
        );
        let got = Repr::parse(&p);
        let mut dirty = last;
        let into = dirty.parse_into(&p);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(w, g, "op {op:#x} case {i}");
                assert_eq!((into, dirty), (Ok(()), *w), "into op {op:#x} case {i}");
            }
            (Err(a), Err(b)) => assert_eq!(
                core::mem::discriminant(a),
                core::mem::discriminant(b),
                "op {op:#x} case {i}"
            ),
            _ => panic!("op {op:#x} case {i}: {want:?} vs {got:?}"),
        }
        if let Ok(r) = want {
            last = r;
            for r in [r, {
                // headers the opcode carries but the Repr lacks are written as zeros
                let mut bare = Repr::new(r.bth);
                bare.set_payload_len(r.payload_len);
                bare
            }] {
                let n = r.buffer_len();
                let mut a = std::vec![0xA5u8; n + 3];
                let mut c = a.clone();
                view_emit(&r, &mut a[..n]);
                assert_eq!(r.emit_into(&mut c), Some(n));
                assert_eq!(a, c, "emit op {op:#x} case {i}");
                r.emit(&mut Packet::new_unchecked(&mut c[..n]));
                assert_eq!(a, c, "emit op {op:#x} case {i}");
                assert_eq!(r.emit_into(&mut c[..n - 1]), None);
            }
        }
    }
}

#[test]
fn rc_ack_matches_emit() {
    let mut x: u32 = 12345;
    for i in 0..20_000u32 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let (dqp, psn, msn) = (x, x.rotate_left(7), x.rotate_left(13));
        let syn = (i & 0xFF) as u8;
        let mut r = Repr::new(bth::Repr::new(Opcode::RC_ACKNOWLEDGE, dqp, Psn::new(psn)));
        r.aeth = Some(aeth::Repr {
            syndrome: aeth::Syndrome::from_byte(syn),
            msn,
        });
        let mut a = [0xA5u8; 24];
        let mut b = a;
        assert_eq!(r.emit_into(&mut a), Some(20));
        assert_eq!(emit_rc_ack(&mut b, dqp, Psn::new(psn), syn, msn), Some(20));
        assert_eq!(a, b, "case {i}");
    }
    assert_eq!(emit_rc_ack(&mut [0; 19], 1, Psn::new(1), 0, 0), None);
}

#[test]
fn impossible_lengths() {
    // RDMA WRITE ONLY needs 28 bytes of headers plus ICRC
    let mut b = [0u8; 31];
    b[0] = Opcode::RC_RDMA_WRITE_ONLY.0;
    assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    let mut b = [0u8; 32];
    b[0] = Opcode::RC_RDMA_WRITE_ONLY.0;
    assert!(Packet::new_checked(&b[..]).is_ok());
    // pad count larger than the body
    b[1] = 0x10;
    assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::BadPad);
    // unaligned body
    let mut b = [0u8; 17 + 4];
    b[0] = Opcode::RC_SEND_ONLY.0;
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadPad);
    // ACK with payload
    let mut b = [0u8; 24];
    b[0] = Opcode::RC_ACKNOWLEDGE.0;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
        Error::BadLength
    );
    // reserved opcode
    let mut b = [0u8; 16];
    b[0] = 0x15;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
        Error::UnknownOpcode(0x15)
    );
}

#[test]
fn payload_excludes_pad() {
    let mut r = Repr::new(bth::Repr::new(Opcode::RC_SEND_ONLY, 1, Psn::new(0)));
    r.set_payload_len(5);
    assert_eq!(r.bth.pad_cnt, 3);
    let mut buf = std::vec![0u8; r.buffer_len()];
    assert_eq!(buf.len(), 12 + 5 + 3 + 4);
    let mut p = Packet::new_unchecked(&mut buf[..]);
    r.emit(&mut p);
    p.payload_mut().copy_from_slice(b"hello");
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.payload(), b"hello");
}

proptest::proptest! {
    /// No input panics any view accessor once `check_len` passed, nor `Repr::parse`.
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
        if let Ok(p) = Packet::new_checked(&data[..]) {
            let _ = (p.payload(), p.icrc(), p.deth(), p.reth(), p.aeth(), p.atomic_eth(),
                     p.atomic_ack_eth(), p.immdt(), p.ieth(), p.rdeth(), p.xrc_srqn(), p.feth().map(|f| (f.placement_type(), f.selectivity_level(), f.reserved())),
                     p.atomic_write_data());
            if let Ok(r) = Repr::parse(&p) {
                let mut out = std::vec![0u8; r.buffer_len()];
                r.emit(&mut Packet::new_unchecked(&mut out[..]));
                proptest::prop_assert_eq!(out.len(), data.len());
                let _ = std::format!("{r}");
            }
        }
    }
}

/// RDMA FLUSH and ATOMIC WRITE (IBA 1.5) byte for byte: FLUSH is BTH, FETH, RETH and no
/// payload (32 bytes, rxe_opcode.c's length); ATOMIC WRITE is BTH, RETH and an 8-byte payload
/// (28 + 8), the value big-endian as the requester's `atomic_wr` bytes go on the wire.
#[test]
fn flush_and_atomic_write_golden_bytes() {
    #[rustfmt::skip]
    let flush: [u8; 36] = [
        0x1C, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x64, // BTH, A, PSN 100
        0x00, 0x00, 0x00, 0x11,                                                 // FETH: MR, global
        0x00, 0x00, 0x7F, 0x00, 0x00, 0x00, 0x10, 0x00,                         // RETH VA
        0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x40,                         // R_Key, length 64
        0xAA, 0xBB, 0xCC, 0xDD,                                                 // ICRC (not checked)
    ];
    let p = Packet::new_checked(&flush[..]).unwrap();
    p.check_well_formed().unwrap();
    let f = p.feth().unwrap();
    assert_eq!(
        (f.placement_type(), f.selectivity_level()),
        (feth::PLACEMENT_GLOBAL, feth::SELECT_MR)
    );
    let r = Repr::parse(&p).unwrap();
    assert_eq!(
        r.feth,
        Some(feth::Repr::new(feth::PLACEMENT_GLOBAL, feth::SELECT_MR))
    );
    assert_eq!(
        r.reth,
        Some(reth::Repr {
            va: 0x7F00_0000_1000,
            rkey: 0x1234,
            dma_len: 64
        })
    );
    assert_eq!((r.payload_len, p.atomic_write_data()), (0, None));
    let mut out = [0u8; 36];
    out[32..].copy_from_slice(&flush[32..]);
    assert_eq!(r.emit_into(&mut out), Some(36));
    assert_eq!(out, flush);
    assert!(r
        .to_string()
        .contains("FETH(global mr) RETH(va=0x7f0000001000 rkey=0x1234 len=64)"));
    // a FLUSH with payload is malformed (oA19-2: no payload)
    let mut long = flush.to_vec();
    long.splice(32..32, [0u8; 4]);
    assert_eq!(
        Repr::parse(&Packet::new_checked(&long[..]).unwrap()),
        Err(Error::BadLength)
    );

    #[rustfmt::skip]
    let aw: [u8; 40] = [
        0x1D, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x65, // BTH, A, PSN 101
        0x00, 0x00, 0x7F, 0x00, 0x00, 0x00, 0x10, 0x08,                         // RETH VA
        0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x08,                         // R_Key, length 8
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,                         // the value
        0xAA, 0xBB, 0xCC, 0xDD,
    ];
    let p = Packet::new_checked(&aw[..]).unwrap();
    p.check_well_formed().unwrap();
    assert_eq!(p.atomic_write_data(), Some(0x0102_0304_0506_0708));
    let r = Repr::parse(&p).unwrap();
    assert_eq!((r.payload_len, r.bth.pad_cnt, r.feth), (8, 0, None));
    assert_eq!(r.reth.unwrap().dma_len, 8);
    // only an 8-byte payload is an ATOMIC WRITE value
    let mut short = aw.to_vec();
    short.drain(32..36);
    assert_eq!(
        Packet::new_checked(&short[..]).unwrap().atomic_write_data(),
        None
    );
}
