//! Hot-path header parse and emit: the same [`Repr`] `roce_wire` produces and the same bytes it
//! writes, with the opcode table consulted once per packet (the generic accessors recompute every
//! header offset per header). Opcodes with headers the engine never speaks (RDETH, XRCETH, FETH,
//! CNP) go through `roce_wire` unchanged.
use roce_wire::aeth::{self, Syndrome};
use roce_wire::opcode::{OpFlags, OpInfo};
use roce_wire::transport::{Packet, Repr};
use roce_wire::{atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth, Psn, ICRC_LEN};

const SLOW: OpFlags =
    OpFlags(OpFlags::RDETH.0 | OpFlags::XRCETH.0 | OpFlags::FETH.0 | OpFlags::CNP.0);

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline(always)]
fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline(always)]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// `Repr::parse` for a packet that already passed `Packet::new_checked`.
#[cfg(test)]
pub(crate) fn parse(p: &Packet<&[u8]>, info: &'static OpInfo) -> roce_wire::Result<Repr> {
    let mut r = Repr::new(bth::Repr::new(roce_wire::Opcode(0), 0, Psn::new(0)));
    parse_into(p, info, &mut r).map(|()| r)
}

/// [`parse`] into `r` (every field overwritten; on error `r` is unspecified): no `Repr` is
/// built and moved per packet.
#[inline(always)]
pub(crate) fn parse_into(
    p: &Packet<&[u8]>,
    info: &'static OpInfo,
    r: &mut Repr,
) -> roce_wire::Result<()> {
    let f = info.flags;
    if f.intersects(SLOW) || !info.is_known() {
        *r = Repr::parse(p)?;
        return Ok(());
    }
    let b: &[u8] = p.into_inner();
    let hdr = info.hdr_len as usize;
    if b.len() < hdr + ICRC_LEN {
        *r = Repr::parse(p)?;
        return Ok(());
    }
    let fl = b[1];
    if fl & 0x0F != 0 {
        return Err(roce_wire::Error::BadTver(fl & 0x0F));
    }
    let pad = (fl >> 4) & 3;
    let body = b.len() - hdr - ICRC_LEN;
    if (pad as usize) > body {
        return Err(roce_wire::Error::BadPad);
    }
    if body & 3 != 0 {
        return Err(roce_wire::Error::BadPad);
    }
    if !f.contains(OpFlags::PAYLOAD) && body != 0 {
        return Err(roce_wire::Error::BadLength);
    }
    r.bth = bth::Repr {
        opcode: roce_wire::Opcode(b[0]),
        se: fl & 0x80 != 0,
        migreq: fl & 0x40 != 0,
        pad_cnt: pad,
        pkey: be16(b, 2),
        fecn: b[4] & 0x80 != 0,
        becn: b[4] & 0x40 != 0,
        resv6a: b[4] & 0x3F,
        dest_qp: be24(b, 5),
        ack_req: b[8] & 0x80 != 0,
        resv7: b[8] & 0x7F,
        psn: Psn::new(be24(b, 9)),
    };
    r.payload_len = body - pad as usize;
    r.rdeth = None;
    r.xrceth = None;
    r.feth = None;
    r.cnp_reserved = None;
    let mut at = bth::HEADER_LEN;
    r.deth = if f.contains(OpFlags::DETH) {
        at += 8;
        Some(deth::Repr {
            qkey: be32(b, at - 8),
            resv: b[at - 4],
            src_qp: be24(b, at - 3),
        })
    } else {
        None
    };
    r.reth = if f.contains(OpFlags::RETH) {
        at += 16;
        Some(reth::Repr {
            va: be64(b, at - 16),
            rkey: be32(b, at - 8),
            dma_len: be32(b, at - 4),
        })
    } else {
        None
    };
    r.atomic_eth = if f.contains(OpFlags::ATMETH) {
        at += 28;
        Some(atomic_eth::Repr {
            va: be64(b, at - 28),
            rkey: be32(b, at - 20),
            swap_add: be64(b, at - 16),
            compare: be64(b, at - 8),
        })
    } else {
        None
    };
    r.aeth = if f.contains(OpFlags::AETH) {
        at += 4;
        Some(aeth::Repr {
            syndrome: Syndrome::from_byte(b[at - 4]),
            msn: be24(b, at - 3),
        })
    } else {
        None
    };
    r.atomic_ack_eth = if f.contains(OpFlags::ATMACK) {
        at += 8;
        Some(atomic_ack_eth::Repr {
            orig: be64(b, at - 8),
        })
    } else {
        None
    };
    r.immdt = if f.contains(OpFlags::IMMDT) {
        at += 4;
        Some(immdt::Repr {
            imm: be32(b, at - 4),
        })
    } else {
        None
    };
    r.ieth = if f.contains(OpFlags::IETH) {
        Some(ieth::Repr { rkey: be32(b, at) })
    } else {
        None
    };
    Ok(())
}

/// `repr.emit` into `buf[..repr.buffer_len()]`; returns that length (`None` when `buf` is too
/// small). Writes exactly the bytes `Repr::emit` writes.
#[inline]
pub(crate) fn emit(r: &Repr, buf: &mut [u8]) -> Option<usize> {
    let info = r.bth.opcode.info();
    let f = info.flags;
    let hdr = info.hdr_len as usize;
    let len = hdr + r.payload_len + r.bth.pad_cnt as usize + ICRC_LEN;
    if buf.len() < len {
        return None;
    }
    if f.intersects(SLOW) {
        r.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        return Some(len);
    }
    let b = &mut buf[..len];
    let t = &r.bth;
    b[0] = t.opcode.0;
    b[1] = (t.se as u8) << 7 | (t.migreq as u8) << 6 | (t.pad_cnt & 3) << 4;
    b[2..4].copy_from_slice(&t.pkey.to_be_bytes());
    b[4] = (t.fecn as u8) << 7 | (t.becn as u8) << 6 | (t.resv6a & 0x3F);
    b[5..8].copy_from_slice(&(t.dest_qp & 0xFF_FFFF).to_be_bytes()[1..]);
    b[8] = (t.ack_req as u8) << 7 | (t.resv7 & 0x7F);
    b[9..12].copy_from_slice(&t.psn.value().to_be_bytes()[1..]);
    let mut at = bth::HEADER_LEN;
    if f.contains(OpFlags::DETH) {
        let d = r.deth.unwrap_or_default();
        b[at..at + 4].copy_from_slice(&d.qkey.to_be_bytes());
        b[at + 4] = d.resv;
        b[at + 5..at + 8].copy_from_slice(&(d.src_qp & 0xFF_FFFF).to_be_bytes()[1..]);
        at += 8;
    }
    if f.contains(OpFlags::RETH) {
        let x = r.reth.unwrap_or_default();
        b[at..at + 8].copy_from_slice(&x.va.to_be_bytes());
        b[at + 8..at + 12].copy_from_slice(&x.rkey.to_be_bytes());
        b[at + 12..at + 16].copy_from_slice(&x.dma_len.to_be_bytes());
        at += 16;
    }
    if f.contains(OpFlags::ATMETH) {
        let x = r.atomic_eth.unwrap_or_default();
        b[at..at + 8].copy_from_slice(&x.va.to_be_bytes());
        b[at + 8..at + 12].copy_from_slice(&x.rkey.to_be_bytes());
        b[at + 12..at + 20].copy_from_slice(&x.swap_add.to_be_bytes());
        b[at + 20..at + 28].copy_from_slice(&x.compare.to_be_bytes());
        at += 28;
    }
    if f.contains(OpFlags::AETH) {
        let x = r.aeth.unwrap_or(aeth::Repr {
            syndrome: Syndrome::ACK,
            msn: 0,
        });
        b[at] = x.syndrome.to_byte();
        b[at + 1..at + 4].copy_from_slice(&(x.msn & 0xFF_FFFF).to_be_bytes()[1..]);
        at += 4;
    }
    if f.contains(OpFlags::ATMACK) {
        let x = r.atomic_ack_eth.unwrap_or_default();
        b[at..at + 8].copy_from_slice(&x.orig.to_be_bytes());
        at += 8;
    }
    if f.contains(OpFlags::IMMDT) {
        b[at..at + 4].copy_from_slice(&r.immdt.unwrap_or_default().imm.to_be_bytes());
        at += 4;
    }
    if f.contains(OpFlags::IETH) {
        b[at..at + 4].copy_from_slice(&r.ieth.unwrap_or_default().rkey.to_be_bytes());
    }
    let pad_at = hdr + r.payload_len;
    b[pad_at..pad_at + t.pad_cnt as usize].fill(0);
    Some(len)
}

/// An RC ACKNOWLEDGE (BTH + AETH): exactly what emitting `Repr::new(bth::Repr::new(
/// RC_ACKNOWLEDGE, dest_qp, psn))` with `aeth = (Syndrome::from_byte(syndrome), msn)` writes.
#[inline]
pub(crate) fn emit_ack(
    buf: &mut [u8],
    dest_qp: u32,
    psn: Psn,
    syndrome: u8,
    msn: u32,
) -> Option<usize> {
    const LEN: usize = bth::HEADER_LEN + 4 + ICRC_LEN;
    let b = buf.get_mut(..LEN)?;
    b[0] = roce_wire::Opcode::RC_ACKNOWLEDGE.0;
    b[1] = 0;
    b[2..4].copy_from_slice(&roce_wire::DEFAULT_PKEY.to_be_bytes());
    b[4] = 0;
    b[5..8].copy_from_slice(&(dest_qp & 0xFF_FFFF).to_be_bytes()[1..]);
    b[8] = 0;
    b[9..12].copy_from_slice(&psn.value().to_be_bytes()[1..]);
    b[12] = syndrome; // Syndrome::from_byte(s).to_byte() == s for every byte
    b[13..16].copy_from_slice(&(msn & 0xFF_FFFF).to_be_bytes()[1..]);
    Some(LEN)
}

#[cfg(test)]
mod test {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn emit_ack_matches_repr_emit() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        for i in 0..20_000u32 {
            let (dqp, psn, msn): (u32, u32, u32) = (rng.gen(), rng.gen(), rng.gen());
            let syn = (i & 0xFF) as u8;
            let mut r = Repr::new(bth::Repr::new(
                roce_wire::Opcode::RC_ACKNOWLEDGE,
                dqp,
                Psn::new(psn),
            ));
            r.aeth = Some(aeth::Repr {
                syndrome: Syndrome::from_byte(syn),
                msn,
            });
            let mut x = [0xA5u8; 24];
            let mut y = x;
            assert_eq!(emit(&r, &mut x), Some(20));
            assert_eq!(emit_ack(&mut y, dqp, Psn::new(psn), syn, msn), Some(20));
            assert_eq!(x, y, "case {i}");
        }
        assert_eq!(emit_ack(&mut [0; 19], 1, Psn::new(1), 0, 0), None);
    }

    /// Every opcode, random header bytes and lengths: the same `Repr` (or the same error
    /// class) as `roce_wire`, and the same emitted bytes.
    #[test]
    fn parse_and_emit_match_roce_wire() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut last = Repr::new(bth::Repr::new(roce_wire::Opcode(0), 0, Psn::new(0)));
        last.cnp_reserved = Some([7; 16]);
        last.rdeth = Some(roce_wire::rdeth::Repr {
            resv: 1,
            ee_context: 2,
        });
        last.xrceth = Some(3);
        last.feth = Some(4);
        for i in 0..200_000u32 {
            let op = (i & 0xFF) as u8;
            let info = roce_wire::Opcode(op).info();
            let hdr = info.hdr_len as usize;
            let extra = match rng.gen_range(0..4) {
                0 => 0,
                1 => rng.gen_range(0..8),
                _ => rng.gen_range(0..80),
            };
            let len = (hdr + 4 + extra).max(12 + rng.gen_range(0..6));
            let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            b[0] = op;
            if rng.gen_bool(0.7) {
                b[1] &= 0xF0; // mostly TVer 0
            }
            let Ok(p) = Packet::new_checked(&b[..]) else {
                continue;
            };
            let want = Repr::parse(&p);
            let got = parse(&p, info);
            // into the Repr of an earlier packet: every field overwritten
            let mut dirty = last;
            if parse_into(&p, info, &mut dirty).is_ok() {
                assert_eq!(Ok(dirty), got, "into op {op:#x} case {i}");
            }
            if let Ok(w) = want {
                last = w;
            }
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "op {op:#x} case {i}"),
                (Err(_), Err(_)) => {}
                _ => panic!("op {op:#x} case {i}: {want:?} vs {got:?}"),
            }
            if let Ok(r) = want {
                let n = r.buffer_len();
                let mut x = vec![0xA5u8; n + 3];
                let mut y = x.clone();
                r.emit(&mut Packet::new_unchecked(&mut x[..n]));
                assert_eq!(emit(&r, &mut y), Some(n));
                assert_eq!(x, y, "emit op {op:#x} case {i}");
                assert_eq!(emit(&r, &mut y[..n - 1]), None);
                // headers the opcode carries but the Repr lacks are written as roce_wire does
                let mut bare = Repr::new(r.bth);
                bare.set_payload_len(r.payload_len);
                let n = bare.buffer_len();
                let mut x = vec![0x5Au8; n];
                let mut y = x.clone();
                bare.emit(&mut Packet::new_unchecked(&mut x[..]));
                assert_eq!(emit(&bare, &mut y), Some(n));
                assert_eq!(x, y, "bare emit op {op:#x} case {i}");
            }
        }
    }
}
