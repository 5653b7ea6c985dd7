//! A whole RoCE transport packet: BTH, extension headers, payload, pad and ICRC.
//!
//! The view ([`Packet`]) locates every header through the [opcode table](crate::opcode); the
//! [`Repr`] is the parsed meaning of a well-formed packet and can emit it again byte for byte.
use crate::opcode::{hdr_len, offsets_of, Offsets, OpFlags, OpInfo, Opcode, Support};
use crate::{aeth, atomic_ack_eth, atomic_eth, bth, deth, feth, ieth, immdt, rdeth, reth};
use crate::{field, xrceth, Error, Result, ICRC_LEN};
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
            return Err(Error::UnknownOpcode(self.opcode().0));
        }
        let tver = self.bth().tver();
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
        self.bth().opcode()
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
            .map(|o| xrceth::Packet::new_unchecked(&self.buffer.as_ref()[o..]).srqn())
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
        let b: &'a [u8] = self.buffer.as_ref();
        let off = self.opcode().info().hdr_len as usize;
        let pad = self.bth().pad_cnt() as usize;
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
        let bth = bth::Packet::new_unchecked(b);
        let info = bth.opcode().info();
        let f = info.flags;
        let hdr = info.hdr_len as usize;
        if b.len() < hdr + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let pad = bth.pad_cnt();
        let body = b.len() - hdr - ICRC_LEN; // payload + pad
        if pad as usize > body {
            return Err(Error::BadPad);
        }
        if info.support == Support::Unknown {
            return Err(Error::UnknownOpcode(bth.opcode().0));
        }
        if bth.tver() != 0 {
            return Err(Error::BadTver(bth.tver()));
        }
        if body & 3 != 0 {
            return Err(Error::BadPad);
        }
        if !f.contains(OpFlags::PAYLOAD) && body != 0 {
            return Err(Error::BadLength);
        }
        // every header lies within b[..hdr] (the table's hdr_len is their sum); each is read
        // by its own module
        let h = &b[..hdr];
        self.bth = bth::Repr::parse_unchecked(&bth);
        self.payload_len = body - pad as usize;
        // In the order the IBA fixes them (as `OpInfo::offsets` lays them out).
        let mut at = bth::HEADER_LEN;
        /// The next header of the opcode, when it carries one: read at `at`, which moves past it.
        macro_rules! next {
            ($flag:ident, $len:expr, |$p:ident| $read:expr) => {
                if f.contains(OpFlags::$flag) {
                    let $p = &h[at..at + $len];
                    at += $len;
                    Some($read)
                } else {
                    None
                }
            };
        }
        self.rdeth = next!(RDETH, hdr_len::RDETH, |x| rdeth::Repr::parse_unchecked(
            &rdeth::Packet::new_unchecked(x)
        ));
        self.deth = next!(DETH, hdr_len::DETH, |x| deth::Repr::parse_unchecked(
            &deth::Packet::new_unchecked(x)
        ));
        self.xrceth = next!(XRCETH, hdr_len::XRCETH, |x| xrceth::Packet::new_unchecked(
            x
        )
        .raw());
        self.feth = next!(FETH, hdr_len::FETH, |x| feth::Repr::parse_unchecked(
            &feth::Packet::new_unchecked(x)
        ));
        self.reth = next!(RETH, hdr_len::RETH, |x| reth::Repr::parse_unchecked(
            &reth::Packet::new_unchecked(x)
        ));
        self.atomic_eth = next!(ATMETH, hdr_len::ATMETH, |x| {
            atomic_eth::Repr::parse_unchecked(&atomic_eth::Packet::new_unchecked(x))
        });
        self.aeth = next!(AETH, hdr_len::AETH, |x| aeth::Repr::parse_unchecked(
            &aeth::Packet::new_unchecked(x)
        ));
        self.atomic_ack_eth = next!(ATMACK, hdr_len::ATMACK, |x| {
            atomic_ack_eth::Repr::parse_unchecked(&atomic_ack_eth::Packet::new_unchecked(x))
        });
        self.immdt = next!(IMMDT, hdr_len::IMMDT, |x| immdt::Repr::parse_unchecked(
            &immdt::Packet::new_unchecked(x)
        ));
        self.ieth = next!(IETH, hdr_len::IETH, |x| ieth::Repr::parse_unchecked(
            &ieth::Packet::new_unchecked(x)
        ));
        self.cnp_reserved = next!(CNP, hdr_len::CNP_PAD, |x| {
            let mut c = [0u8; hdr_len::CNP_PAD];
            c.copy_from_slice(x);
            c
        });
        let _ = at;
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
            let h = &mut b[..hdr];
            self.bth.emit(&mut bth::Packet::new_unchecked(&mut *h));
            let mut at = bth::HEADER_LEN;
            /// The next header of the opcode, when it carries one: written at `at` by its own
            /// module, and `at` moves past it.
            macro_rules! next {
                ($flag:ident, $len:expr, |$p:ident| $write:expr) => {
                    if f.contains(OpFlags::$flag) {
                        let $p = &mut h[at..at + $len];
                        $write;
                        at += $len;
                    }
                };
            }
            next!(RDETH, hdr_len::RDETH, |x| self
                .rdeth
                .unwrap_or_default()
                .emit(&mut rdeth::Packet::new_unchecked(x)));
            next!(DETH, hdr_len::DETH, |x| self
                .deth
                .unwrap_or_default()
                .emit(&mut deth::Packet::new_unchecked(x)));
            next!(XRCETH, hdr_len::XRCETH, |x| xrceth::Packet::new_unchecked(
                x
            )
            .set_raw(self.xrceth.unwrap_or(0)));
            next!(FETH, hdr_len::FETH, |x| self
                .feth
                .unwrap_or_default()
                .emit(&mut feth::Packet::new_unchecked(x)));
            next!(RETH, hdr_len::RETH, |x| self
                .reth
                .unwrap_or_default()
                .emit(&mut reth::Packet::new_unchecked(x)));
            next!(ATMETH, hdr_len::ATMETH, |x| self
                .atomic_eth
                .unwrap_or_default()
                .emit(&mut atomic_eth::Packet::new_unchecked(x)));
            next!(AETH, hdr_len::AETH, |x| self
                .aeth
                .unwrap_or(aeth::Repr {
                    syndrome: aeth::Syndrome::ACK,
                    msn: 0,
                })
                .emit(&mut aeth::Packet::new_unchecked(x)));
            next!(ATMACK, hdr_len::ATMACK, |x| self
                .atomic_ack_eth
                .unwrap_or_default()
                .emit(&mut atomic_ack_eth::Packet::new_unchecked(x)));
            next!(IMMDT, hdr_len::IMMDT, |x| self
                .immdt
                .unwrap_or_default()
                .emit(&mut immdt::Packet::new_unchecked(x)));
            next!(IETH, hdr_len::IETH, |x| self
                .ieth
                .unwrap_or_default()
                .emit(&mut ieth::Packet::new_unchecked(x)));
            next!(CNP, hdr_len::CNP_PAD, |x| x.copy_from_slice(
                &self.cnp_reserved.unwrap_or([0; hdr_len::CNP_PAD])
            ));
            let _ = at;
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
    // Two 8-byte stores (see `bth::fast`): the ICRC routine reads the BTH right away.
    let w = bth::fast::Words::new(
        Opcode::RC_ACKNOWLEDGE,
        false,
        0,
        crate::DEFAULT_PKEY,
        dest_qp,
        false,
        psn,
    );
    // Syndrome::from_byte(s).to_byte() == s for every byte
    let first = (&mut b[..bth::HEADER_LEN + aeth::HEADER_LEN])
        .try_into()
        .ok()?;
    w.store_with(first, aeth::word(syndrome, msn));
    Some(LEN)
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
