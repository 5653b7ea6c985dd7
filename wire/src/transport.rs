//! A whole RoCE transport packet: BTH, extension headers, payload, pad and ICRC.
//!
//! The view ([`Packet`]) locates every header through the [opcode table](crate::opcode); the
//! [`Repr`] is the parsed meaning of a well-formed packet and can emit it again byte for byte.
use crate::field::{put16, put24, put32, put64};
use crate::opcode::{hdr_len, offsets_of, Offsets, OpFlags, OpInfo, Opcode, Support};
use crate::{aeth, atomic_ack_eth, atomic_eth, bth, deth, feth, ieth, immdt, rdeth, reth};
use crate::{field, Error, Result, ICRC_LEN};
use core::fmt;

/// Pad needed to bring `payload_len` to a multiple of four.
#[inline]
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - (payload_len & 3)) & 3) as u8
}

/// A view of BTH .. ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps and runs [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the BTH, every extension header the opcode calls for, the pad
    /// the BTH announces and the ICRC. After `Ok(())`, no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < bth::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hdr = self.info().hdr_len as usize;
        if b.len() < hdr + ICRC_LEN {
            return Err(Error::Truncated);
        }
        if (self.bth().pad_cnt() as usize) > b.len() - hdr - ICRC_LEN {
            return Err(Error::BadPad);
        }
        Ok(())
    }

    /// After [`check_len`](Self::check_len), checks everything else [`Repr::parse`] checks,
    /// without building a `Repr`: the opcode is defined ([`Error::UnknownOpcode`]), TVer is 0
    /// ([`Error::BadTver`]), payload + pad is a multiple of four ([`Error::BadPad`]) and an
    /// opcode without payload has none ([`Error::BadLength`]). After `Ok(())`, `Repr::parse`
    /// succeeds; receive paths that read fields through the views need nothing more.
    #[inline]
    pub fn check_well_formed(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let info = self.info();
        if info.support == Support::Unknown {
            return Err(Error::UnknownOpcode(b[0]));
        }
        let tver = b[1] & 0x0F;
        if tver != 0 {
            return Err(Error::BadTver(tver));
        }
        let body = b.len() - info.hdr_len as usize - ICRC_LEN;
        if body & 3 != 0 {
            return Err(Error::BadPad);
        }
        if !info.flags.contains(OpFlags::PAYLOAD) && body != 0 {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The BTH.
    #[inline]
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(self.buffer.as_ref())
    }

    /// The opcode.
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[0])
    }

    /// The opcode's table entry.
    #[inline]
    pub fn info(&self) -> &'static OpInfo {
        self.opcode().info()
    }

    /// Header offsets from the opcode table.
    #[inline]
    pub fn offsets(&self) -> Offsets {
        *offsets_of(self.opcode())
    }

    #[inline]
    fn at(&self, off: Option<usize>) -> Option<&[u8]> {
        off.map(|o| &self.buffer.as_ref()[o..])
    }

    /// DETH, when the opcode carries one.
    #[inline]
    pub fn deth(&self) -> Option<deth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).deth)
            .map(deth::Packet::new_unchecked)
    }
    /// RDETH, when the opcode carries one.
    #[inline]
    pub fn rdeth(&self) -> Option<rdeth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).rdeth)
            .map(rdeth::Packet::new_unchecked)
    }
    /// RETH, when the opcode carries one.
    #[inline]
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).reth)
            .map(reth::Packet::new_unchecked)
    }
    /// AtomicETH, when the opcode carries one.
    #[inline]
    pub fn atomic_eth(&self) -> Option<atomic_eth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).atmeth)
            .map(atomic_eth::Packet::new_unchecked)
    }
    /// AETH, when the opcode carries one.
    #[inline]
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).aeth)
            .map(aeth::Packet::new_unchecked)
    }
    /// AtomicAckETH, when the opcode carries one.
    #[inline]
    pub fn atomic_ack_eth(&self) -> Option<atomic_ack_eth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).atmack)
            .map(atomic_ack_eth::Packet::new_unchecked)
    }
    /// ImmDt, when the opcode carries one.
    #[inline]
    pub fn immdt(&self) -> Option<immdt::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).immdt)
            .map(immdt::Packet::new_unchecked)
    }
    /// IETH, when the opcode carries one.
    #[inline]
    pub fn ieth(&self) -> Option<ieth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).ieth)
            .map(ieth::Packet::new_unchecked)
    }
    /// XRCETH (the XRC SRQ number), when the opcode carries one.
    #[inline]
    pub fn xrc_srqn(&self) -> Option<u32> {
        offsets_of(self.opcode())
            .xrceth
            .map(|o| field::u24_at(self.buffer.as_ref(), o + 1..o + 4))
    }
    /// FETH, when the opcode carries one (FLUSH).
    #[inline]
    pub fn feth(&self) -> Option<feth::Packet<&[u8]>> {
        self.at(offsets_of(self.opcode()).feth)
            .map(feth::Packet::new_unchecked)
    }
    /// The 8-byte value an ATOMIC WRITE carries as its payload, when this is one and its
    /// payload is exactly 8 bytes (IBA 1.5: an ATOMIC WRITE always carries 8 bytes; anything
    /// else is a malformed request, `None` here).
    #[inline]
    pub fn atomic_write_data(&self) -> Option<u64> {
        if !self.info().flags.contains(OpFlags::ATOMIC_WRITE) || self.payload_len() != 8 {
            return None;
        }
        let o = self.payload_offset();
        Some(field::u64_at(self.buffer.as_ref(), o..o + 8))
    }

    /// Offset of the payload.
    #[inline]
    pub fn payload_offset(&self) -> usize {
        self.info().hdr_len as usize
    }

    /// Payload length (without pad).
    #[inline]
    pub fn payload_len(&self) -> usize {
        self.buffer.as_ref().len()
            - self.payload_offset()
            - ICRC_LEN
            - self.bth().pad_cnt() as usize
    }

    /// The ICRC as stored (little-endian).
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let t = &b[b.len() - ICRC_LEN..];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }

    /// Everything the ICRC covers after the pseudo-header (BTH .. pad).
    pub fn without_icrc(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[..b.len() - ICRC_LEN]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (without pad), borrowing the underlying buffer.
    pub fn payload(&self) -> &'a [u8] {
        let b = self.buffer.as_ref();
        let off = self.opcode().info().hdr_len as usize;
        let pad = (b[1] >> 4 & 3) as usize;
        &b[off..b.len() - ICRC_LEN - pad]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let off = self.payload_offset();
        let len = self.payload_len();
        &mut self.buffer.as_mut()[off..off + len]
    }
}

/// The parsed meaning of a transport packet. The payload itself is not part of the `Repr`
/// (the packet view lends it); only its length is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Base transport header.
    pub bth: bth::Repr,
    /// RDETH (RD/DC only).
    pub rdeth: Option<rdeth::Repr>,
    /// DETH (UD, RD requests).
    pub deth: Option<deth::Repr>,
    /// XRCETH, the raw 32-bit word (XRC requests).
    pub xrceth: Option<u32>,
    /// FETH (FLUSH).
    pub feth: Option<feth::Repr>,
    /// RETH.
    pub reth: Option<reth::Repr>,
    /// AtomicETH.
    pub atomic_eth: Option<atomic_eth::Repr>,
    /// AETH.
    pub aeth: Option<aeth::Repr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// ImmDt.
    pub immdt: Option<immdt::Repr>,
    /// IETH.
    pub ieth: Option<ieth::Repr>,
    /// The 16 reserved bytes of a CNP.
    pub cnp_reserved: Option<[u8; 16]>,
    /// Payload length in bytes, without pad.
    pub payload_len: usize,
}

impl Repr {
    /// A packet with only a BTH; set the extension headers the opcode needs, then
    /// [`set_payload_len`](Self::set_payload_len).
    pub fn new(bth: bth::Repr) -> Repr {
        Repr {
            bth,
            rdeth: None,
            deth: None,
            xrceth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            cnp_reserved: None,
            payload_len: 0,
        }
    }

    /// Sets the payload length and the matching pad count.
    pub fn set_payload_len(&mut self, len: usize) {
        self.payload_len = len;
        self.bth.pad_cnt = pad_for(len);
    }

    /// Parses a transport packet (BTH .. ICRC). The ICRC is *not* checked here (it needs the
    /// network header; see [`crate::icrc`]).
    ///
    /// Errors: [`Error::Truncated`] for short buffers, [`Error::UnknownOpcode`] for reserved
    /// opcodes, [`Error::BadTver`], [`Error::BadPad`] when the pad count does not align the
    /// payload to four bytes, and [`Error::BadLength`] when an opcode without payload has some.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        let mut r = Repr::new(bth::Repr::new(Opcode(0), 0, crate::Psn::new(0)));
        r.parse_into(p)?;
        Ok(r)
    }

    /// [`Repr::parse`] into `self`: on `Ok` every field is overwritten, on `Err` `self` is
    /// unspecified (but valid). For receive loops that keep one `Repr` per device instead of
    /// building and moving one per packet.
    ///
    /// One opcode-table lookup per packet; the lengths are checked once up front (as
    /// [`Packet::check_len`] does), then every header is read at the offset the table fixes.
    #[inline]
    pub fn parse_into<T: AsRef<[u8]> + ?Sized>(&mut self, p: &Packet<&T>) -> Result<()> {
        let b: &[u8] = p.buffer.as_ref();
        if b.len() < bth::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let info = Opcode(b[0]).info();
        let f = info.flags;
        let hdr = info.hdr_len as usize;
        if b.len() < hdr + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let fl = b[1];
        let pad = (fl >> 4) & 3;
        let body = b.len() - hdr - ICRC_LEN; // payload + pad
        if pad as usize > body {
            return Err(Error::BadPad);
        }
        if info.support == Support::Unknown {
            return Err(Error::UnknownOpcode(b[0]));
        }
        if fl & 0x0F != 0 {
            return Err(Error::BadTver(fl & 0x0F));
        }
        if body & 3 != 0 {
            return Err(Error::BadPad);
        }
        if !f.contains(OpFlags::PAYLOAD) && body != 0 {
            return Err(Error::BadLength);
        }
        // every header lies within b[..hdr] (the table's hdr_len is their sum)
        let h = &b[..hdr];
        self.bth = bth::Repr {
            opcode: Opcode(h[0]),
            se: fl & 0x80 != 0,
            migreq: fl & 0x40 != 0,
            pad_cnt: pad,
            pkey: be16(h, 2),
            fecn: h[4] & 0x80 != 0,
            becn: h[4] & 0x40 != 0,
            resv6a: h[4] & 0x3F,
            dest_qp: be24(h, 5),
            ack_req: h[8] & 0x80 != 0,
            resv7: h[8] & 0x7F,
            psn: crate::Psn::new(be24(h, 9)),
        };
        self.payload_len = body - pad as usize;
        // In the order the IBA fixes them (as `OpInfo::offsets` lays them out).
        let mut at = bth::HEADER_LEN;
        self.rdeth = if f.contains(OpFlags::RDETH) {
            at += hdr_len::RDETH;
            Some(rdeth::Repr {
                resv: h[at - 4],
                ee_context: be24(h, at - 3),
            })
        } else {
            None
        };
        self.deth = if f.contains(OpFlags::DETH) {
            at += hdr_len::DETH;
            Some(deth::Repr {
                qkey: be32(h, at - 8),
                resv: h[at - 4],
                src_qp: be24(h, at - 3),
            })
        } else {
            None
        };
        self.xrceth = if f.contains(OpFlags::XRCETH) {
            at += hdr_len::XRCETH;
            Some(be32(h, at - 4))
        } else {
            None
        };
        self.feth = if f.contains(OpFlags::FETH) {
            at += hdr_len::FETH;
            Some(feth::Repr::from_raw(be32(h, at - 4)))
        } else {
            None
        };
        self.reth = if f.contains(OpFlags::RETH) {
            at += hdr_len::RETH;
            Some(reth::Repr {
                va: be64(h, at - 16),
                rkey: be32(h, at - 8),
                dma_len: be32(h, at - 4),
            })
        } else {
            None
        };
        self.atomic_eth = if f.contains(OpFlags::ATMETH) {
            at += hdr_len::ATMETH;
            Some(atomic_eth::Repr {
                va: be64(h, at - 28),
                rkey: be32(h, at - 20),
                swap_add: be64(h, at - 16),
                compare: be64(h, at - 8),
            })
        } else {
            None
        };
        self.aeth = if f.contains(OpFlags::AETH) {
            at += hdr_len::AETH;
            Some(aeth::Repr {
                syndrome: aeth::Syndrome::from_byte(h[at - 4]),
                msn: be24(h, at - 3),
            })
        } else {
            None
        };
        self.atomic_ack_eth = if f.contains(OpFlags::ATMACK) {
            at += hdr_len::ATMACK;
            Some(atomic_ack_eth::Repr {
                orig: be64(h, at - 8),
            })
        } else {
            None
        };
        self.immdt = if f.contains(OpFlags::IMMDT) {
            at += hdr_len::IMMDT;
            Some(immdt::Repr {
                imm: be32(h, at - 4),
            })
        } else {
            None
        };
        self.ieth = if f.contains(OpFlags::IETH) {
            at += hdr_len::IETH;
            Some(ieth::Repr {
                rkey: be32(h, at - 4),
            })
        } else {
            None
        };
        self.cnp_reserved = if f.contains(OpFlags::CNP) {
            let mut c = [0u8; 16];
            c.copy_from_slice(&h[at..at + hdr_len::CNP_PAD]);
            Some(c)
        } else {
            None
        };
        Ok(())
    }

    /// Length of the headers (the payload offset), from the opcode table.
    #[inline]
    pub fn header_len(&self) -> usize {
        self.bth.opcode.info().hdr_len as usize
    }

    /// Total length: headers, payload, pad and ICRC.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len + self.bth.pad_cnt as usize + ICRC_LEN
    }

    /// Writes the BTH, the extension headers the opcode calls for (a header missing from the
    /// `Repr` is written as zeros; headers the opcode does not carry are ignored) and zero pad
    /// bytes. The payload and ICRC are left for the caller. Never panics when the buffer is
    /// exactly [`buffer_len`](Self::buffer_len) long.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let len = self.buffer_len();
        self.emit_headers(&mut p.buffer.as_mut()[..len]);
    }

    /// [`emit`](Self::emit) into the front of `buf`; returns
    /// [`buffer_len`](Self::buffer_len), or `None` (nothing written) when `buf` is shorter.
    #[inline]
    pub fn emit_into(&self, buf: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        self.emit_headers(buf.get_mut(..len)?);
        Some(len)
    }

    /// Writes headers and pad into `b`, which is exactly `buffer_len()` long.
    #[inline]
    fn emit_headers(&self, b: &mut [u8]) {
        let info = self.bth.opcode.info();
        let f = info.flags;
        let hdr = info.hdr_len as usize;
        {
            let t = &self.bth;
            let h = &mut b[..hdr];
            h[0] = t.opcode.0;
            h[1] = (t.se as u8) << 7 | (t.migreq as u8) << 6 | (t.pad_cnt & 3) << 4;
            put16(h, 2, t.pkey);
            h[4] = (t.fecn as u8) << 7 | (t.becn as u8) << 6 | (t.resv6a & 0x3F);
            put24(h, 5, t.dest_qp);
            h[8] = (t.ack_req as u8) << 7 | (t.resv7 & 0x7F);
            put24(h, 9, t.psn.value());
            let mut at = bth::HEADER_LEN;
            if f.contains(OpFlags::RDETH) {
                let x = self.rdeth.unwrap_or_default();
                h[at] = x.resv;
                put24(h, at + 1, x.ee_context);
                at += hdr_len::RDETH;
            }
            if f.contains(OpFlags::DETH) {
                let x = self.deth.unwrap_or_default();
                put32(h, at, x.qkey);
                h[at + 4] = x.resv;
                put24(h, at + 5, x.src_qp);
                at += hdr_len::DETH;
            }
            if f.contains(OpFlags::XRCETH) {
                put32(h, at, self.xrceth.unwrap_or(0));
                at += hdr_len::XRCETH;
            }
            if f.contains(OpFlags::FETH) {
                put32(h, at, self.feth.unwrap_or_default().to_raw());
                at += hdr_len::FETH;
            }
            if f.contains(OpFlags::RETH) {
                let x = self.reth.unwrap_or_default();
                put64(h, at, x.va);
                put32(h, at + 8, x.rkey);
                put32(h, at + 12, x.dma_len);
                at += hdr_len::RETH;
            }
            if f.contains(OpFlags::ATMETH) {
                let x = self.atomic_eth.unwrap_or_default();
                put64(h, at, x.va);
                put32(h, at + 8, x.rkey);
                put64(h, at + 12, x.swap_add);
                put64(h, at + 20, x.compare);
                at += hdr_len::ATMETH;
            }
            if f.contains(OpFlags::AETH) {
                let x = self.aeth.unwrap_or(aeth::Repr {
                    syndrome: aeth::Syndrome::ACK,
                    msn: 0,
                });
                h[at] = x.syndrome.to_byte();
                put24(h, at + 1, x.msn);
                at += hdr_len::AETH;
            }
            if f.contains(OpFlags::ATMACK) {
                put64(h, at, self.atomic_ack_eth.unwrap_or_default().orig);
                at += hdr_len::ATMACK;
            }
            if f.contains(OpFlags::IMMDT) {
                put32(h, at, self.immdt.unwrap_or_default().imm);
                at += hdr_len::IMMDT;
            }
            if f.contains(OpFlags::IETH) {
                put32(h, at, self.ieth.unwrap_or_default().rkey);
                at += hdr_len::IETH;
            }
            if f.contains(OpFlags::CNP) {
                h[at..at + hdr_len::CNP_PAD].copy_from_slice(&self.cnp_reserved.unwrap_or([0; 16]));
            }
        }
        let pad_at = hdr + self.payload_len;
        b[pad_at..pad_at + self.bth.pad_cnt as usize].fill(0);
    }
}

/// Writes an RC ACKNOWLEDGE (BTH + AETH, no payload) into the front of `buf`: exactly the
/// bytes [`Repr::emit`] writes for `Repr::new(bth::Repr::new(Opcode::RC_ACKNOWLEDGE, dest_qp,
/// psn))` with `aeth = (Syndrome::from_byte(syndrome), msn)`. Returns the packet length
/// including the (unwritten) ICRC, or `None` when `buf` is shorter.
#[inline]
pub fn emit_rc_ack(
    buf: &mut [u8],
    dest_qp: u32,
    psn: crate::Psn,
    syndrome: u8,
    msn: u32,
) -> Option<usize> {
    const LEN: usize = bth::HEADER_LEN + aeth::HEADER_LEN + ICRC_LEN;
    let b: &mut [u8; LEN] = buf.get_mut(..LEN)?.try_into().ok()?;
    // Two 8-byte stores: opcode, flags (0), P_Key, resv (0), destination QP | AckReq/resv (0),
    // PSN, syndrome, MSN. The ICRC routine reads the BTH right away, 8 and 4 bytes at a time;
    // a load inside one earlier store is forwarded from it, one spanning several narrower
    // stores waits until they reach the cache.
    let w0 = (Opcode::RC_ACKNOWLEDGE.0 as u64) << 56
        | (crate::DEFAULT_PKEY as u64) << 32
        | (dest_qp & 0xFF_FFFF) as u64;
    // Syndrome::from_byte(s).to_byte() == s for every byte
    let w1 = ((psn.value() & 0xFF_FFFF) as u64) << 32
        | (syndrome as u64) << 24
        | (msn & 0xFF_FFFF) as u64;
    b[0..8].copy_from_slice(&w0.to_be_bytes());
    b[8..16].copy_from_slice(&w1.to_be_bytes());
    Some(LEN)
}

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
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
#[inline(always)]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        if let Some(d) = self.deth {
            write!(f, " DETH(qkey={:#x} srcqp={:#x})", d.qkey, d.src_qp)?;
        }
        if let Some(d) = self.rdeth {
            write!(f, " RDETH(eec={:#x})", d.ee_context)?;
        }
        if let Some(x) = self.xrceth {
            write!(f, " XRCETH(srqn={:#x})", x & 0xFF_FFFF)?;
        }
        if let Some(x) = self.feth {
            write!(f, " {x}")?;
        }
        if let Some(r) = self.reth {
            write!(
                f,
                " RETH(va={:#x} rkey={:#x} len={})",
                r.va, r.rkey, r.dma_len
            )?;
        }
        if let Some(a) = self.atomic_eth {
            write!(
                f,
                " AtomicETH(va={:#x} rkey={:#x} swap_add={:#x} cmp={:#x})",
                a.va, a.rkey, a.swap_add, a.compare
            )?;
        }
        if let Some(a) = self.aeth {
            write!(f, " AETH({} msn={})", a.syndrome, a.msn)?;
        }
        if let Some(a) = self.atomic_ack_eth {
            write!(f, " AtomicAckETH(orig={:#x})", a.orig)?;
        }
        if let Some(i) = self.immdt {
            write!(f, " ImmDt({:#010x})", i.imm)?;
        }
        if let Some(i) = self.ieth {
            write!(f, " IETH(rkey={:#x})", i.rkey)?;
        }
        write!(f, " len={}", self.payload_len)
    }
}

#[cfg(test)]
mod tests;
