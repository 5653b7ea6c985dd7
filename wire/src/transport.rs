//! A whole RoCE transport packet: BTH, extension headers, payload, pad and ICRC.
//!
//! The view ([`Packet`]) locates every header through the [opcode table](crate::opcode); the
//! [`Repr`] is the parsed meaning of a well-formed packet and can emit it again byte for byte.
use crate::opcode::{offsets_of, Offsets, OpFlags, OpInfo, Opcode, Support};
use crate::{aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, rdeth, reth};
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
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the BTH, every extension header the opcode calls for, the pad
    /// the BTH announces and the ICRC. After `Ok(())`, no accessor panics.
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

    fn at(&self, off: Option<usize>) -> Option<&[u8]> {
        off.map(|o| &self.buffer.as_ref()[o..])
    }

    /// DETH, when the opcode carries one.
    pub fn deth(&self) -> Option<deth::Packet<&[u8]>> {
        self.at(self.offsets().deth)
            .map(deth::Packet::new_unchecked)
    }
    /// RDETH, when the opcode carries one.
    pub fn rdeth(&self) -> Option<rdeth::Packet<&[u8]>> {
        self.at(self.offsets().rdeth)
            .map(rdeth::Packet::new_unchecked)
    }
    /// RETH, when the opcode carries one.
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        self.at(self.offsets().reth)
            .map(reth::Packet::new_unchecked)
    }
    /// AtomicETH, when the opcode carries one.
    pub fn atomic_eth(&self) -> Option<atomic_eth::Packet<&[u8]>> {
        self.at(self.offsets().atmeth)
            .map(atomic_eth::Packet::new_unchecked)
    }
    /// AETH, when the opcode carries one.
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        self.at(self.offsets().aeth)
            .map(aeth::Packet::new_unchecked)
    }
    /// AtomicAckETH, when the opcode carries one.
    pub fn atomic_ack_eth(&self) -> Option<atomic_ack_eth::Packet<&[u8]>> {
        self.at(self.offsets().atmack)
            .map(atomic_ack_eth::Packet::new_unchecked)
    }
    /// ImmDt, when the opcode carries one.
    pub fn immdt(&self) -> Option<immdt::Packet<&[u8]>> {
        self.at(self.offsets().immdt)
            .map(immdt::Packet::new_unchecked)
    }
    /// IETH, when the opcode carries one.
    pub fn ieth(&self) -> Option<ieth::Packet<&[u8]>> {
        self.at(self.offsets().ieth)
            .map(ieth::Packet::new_unchecked)
    }
    /// XRCETH (the XRC SRQ number), when the opcode carries one.
    pub fn xrc_srqn(&self) -> Option<u32> {
        self.offsets()
            .xrceth
            .map(|o| field::u24_at(self.buffer.as_ref(), o + 1..o + 4))
    }
    /// FETH, when the opcode carries one.
    pub fn feth(&self) -> Option<u32> {
        self.offsets()
            .feth
            .map(|o| field::u32_at(self.buffer.as_ref(), o..o + 4))
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
    /// FETH, the raw 32-bit word (FLUSH).
    pub feth: Option<u32>,
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
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let info = p.info();
        if info.support == Support::Unknown {
            return Err(Error::UnknownOpcode(p.opcode().0));
        }
        let bth = bth::Repr::parse(&p.bth())?;
        let hdr = info.hdr_len as usize;
        let body = p.buffer.as_ref().len() - hdr - ICRC_LEN; // payload + pad
        if body & 3 != 0 {
            return Err(Error::BadPad);
        }
        if !info.flags.contains(OpFlags::PAYLOAD) && body != 0 {
            return Err(Error::BadLength);
        }
        let mut r = Repr::new(bth);
        r.payload_len = body - bth.pad_cnt as usize;
        // One table lookup for all offsets; each header read straight from its slice.
        let o = offsets_of(p.opcode());
        let b = p.buffer.as_ref();
        let h = |at: Option<usize>| at.map(|at| &b[at..]);
        r.rdeth = h(o.rdeth)
            .map(|s| rdeth::Repr::parse(&rdeth::Packet::new_unchecked(s)))
            .transpose()?;
        r.deth = h(o.deth)
            .map(|s| deth::Repr::parse(&deth::Packet::new_unchecked(s)))
            .transpose()?;
        r.xrceth = o.xrceth.map(|at| field::u32_at(b, at..at + 4));
        r.feth = o.feth.map(|at| field::u32_at(b, at..at + 4));
        r.reth = h(o.reth)
            .map(|s| reth::Repr::parse(&reth::Packet::new_unchecked(s)))
            .transpose()?;
        r.atomic_eth = h(o.atmeth)
            .map(|s| atomic_eth::Repr::parse(&atomic_eth::Packet::new_unchecked(s)))
            .transpose()?;
        r.aeth = h(o.aeth)
            .map(|s| aeth::Repr::parse(&aeth::Packet::new_unchecked(s)))
            .transpose()?;
        r.atomic_ack_eth = h(o.atmack)
            .map(|s| atomic_ack_eth::Repr::parse(&atomic_ack_eth::Packet::new_unchecked(s)))
            .transpose()?;
        r.immdt = h(o.immdt)
            .map(|s| immdt::Repr::parse(&immdt::Packet::new_unchecked(s)))
            .transpose()?;
        r.ieth = h(o.ieth)
            .map(|s| ieth::Repr::parse(&ieth::Packet::new_unchecked(s)))
            .transpose()?;
        if info.flags.contains(OpFlags::CNP) {
            let mut c = [0u8; 16];
            c.copy_from_slice(&p.buffer.as_ref()[bth::HEADER_LEN..bth::HEADER_LEN + 16]);
            r.cnp_reserved = Some(c);
        }
        Ok(r)
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
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let o = offsets_of(self.bth.opcode);
        let len = self.buffer_len();
        let b = &mut p.buffer.as_mut()[..len];
        self.bth.emit(&mut bth::Packet::new_unchecked(&mut b[..]));
        if let Some(at) = o.rdeth {
            self.rdeth
                .unwrap_or_default()
                .emit(&mut rdeth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.deth {
            self.deth
                .unwrap_or_default()
                .emit(&mut deth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.xrceth {
            field::set_u32(b, at..at + 4, self.xrceth.unwrap_or(0));
        }
        if let Some(at) = o.feth {
            field::set_u32(b, at..at + 4, self.feth.unwrap_or(0));
        }
        if let Some(at) = o.reth {
            self.reth
                .unwrap_or_default()
                .emit(&mut reth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.atmeth {
            self.atomic_eth
                .unwrap_or_default()
                .emit(&mut atomic_eth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.aeth {
            let a = self.aeth.unwrap_or(aeth::Repr {
                syndrome: aeth::Syndrome::ACK,
                msn: 0,
            });
            a.emit(&mut aeth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.atmack {
            self.atomic_ack_eth
                .unwrap_or_default()
                .emit(&mut atomic_ack_eth::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.immdt {
            self.immdt
                .unwrap_or_default()
                .emit(&mut immdt::Packet::new_unchecked(&mut b[at..]));
        }
        if let Some(at) = o.ieth {
            self.ieth
                .unwrap_or_default()
                .emit(&mut ieth::Packet::new_unchecked(&mut b[at..]));
        }
        if self.bth.opcode.info().flags.contains(OpFlags::CNP) {
            b[bth::HEADER_LEN..bth::HEADER_LEN + 16]
                .copy_from_slice(&self.cnp_reserved.unwrap_or([0; 16]));
        }
        let pad_at = o.payload + self.payload_len;
        b[pad_at..pad_at + self.bth.pad_cnt as usize].fill(0);
    }
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
            write!(f, " FETH({x:#x})")?;
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
mod test {
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
                src_qp: 0x22,
            });
            r.xrceth = o.xrceth.map(|_| 0x33);
            r.feth = o.feth.map(|_| 0x11);
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
                         p.atomic_ack_eth(), p.immdt(), p.ieth(), p.rdeth(), p.xrc_srqn(), p.feth());
                if let Ok(r) = Repr::parse(&p) {
                    let mut out = std::vec![0u8; r.buffer_len()];
                    r.emit(&mut Packet::new_unchecked(&mut out[..]));
                    proptest::prop_assert_eq!(out.len(), data.len());
                    let _ = std::format!("{r}");
                }
            }
        }
    }
}
