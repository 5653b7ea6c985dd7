//! Base Transport Header (12 bytes).
//!
//! ```text
//!  byte 0    | 1              | 2-3    | 4            | 5-7    | 8          | 9-11
//!  OpCode    | SE M PadCnt TVer| P_Key  | F B Resv6a   | DestQP | A Resv7    | PSN
//! ```
use crate::field::*;
use crate::opcode::Opcode;
use crate::{Error, Psn, Qpn, Result};
use core::fmt;

mod field {
    use crate::field::Field;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    pub const RESV8A: usize = 4;
    pub const DEST_QP: Field = 5..8;
    pub const ACK: usize = 8;
    pub const PSN: Field = 9..12;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;

/// Offset of the byte holding FECN, BECN and Resv6a: the BTH's only variant field (switches
/// may mark congestion in it), which the ICRC covers as all ones.
pub const VARIANT_BYTE: usize = field::RESV8A;

crate::field::fixed_view!(HEADER_LEN, "BTH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// OpCode.
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited Event.
    #[inline]
    pub fn se(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }
    /// MigReq.
    #[inline]
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }
    /// Pad count (0–3).
    #[inline]
    pub fn pad_cnt(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }
    /// Transport header version (must be 0).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0F
    }
    /// Partition key.
    #[inline]
    pub fn pkey(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PKEY)
    }
    /// FECN (RoCEv2: forward congestion notification).
    #[inline]
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::RESV8A] & 0x80 != 0
    }
    /// BECN (set in CNPs).
    #[inline]
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::RESV8A] & 0x40 != 0
    }
    /// The six reserved bits after F and B.
    #[inline]
    pub fn resv6a(&self) -> u8 {
        self.buffer.as_ref()[field::RESV8A] & 0x3F
    }
    /// Destination QP number (24 bits).
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::DEST_QP)
    }
    /// AckReq.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK] & 0x80 != 0
    }
    /// The seven reserved bits after A.
    #[inline]
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK] & 0x7F
    }
    /// Packet sequence number.
    #[inline]
    pub fn psn(&self) -> Psn {
        Psn::new(u24_at(self.buffer.as_ref(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the opcode.
    #[inline]
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.0;
    }
    /// Sets SE, MigReq, PadCnt and TVer at once.
    #[inline]
    pub fn set_flags(&mut self, se: bool, migreq: bool, pad_cnt: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] =
            (se as u8) << 7 | (migreq as u8) << 6 | (pad_cnt & 3) << 4 | (tver & 0xF);
    }
    /// Sets the partition key.
    #[inline]
    pub fn set_pkey(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PKEY, v)
    }
    /// Sets FECN, BECN and the reserved 6 bits.
    #[inline]
    pub fn set_resv8a(&mut self, fecn: bool, becn: bool, resv6a: u8) {
        self.buffer.as_mut()[field::RESV8A] =
            (fecn as u8) << 7 | (becn as u8) << 6 | (resv6a & 0x3F);
    }
    /// Sets the destination QP.
    #[inline]
    pub fn set_dest_qp(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::DEST_QP, v & 0xFF_FFFF)
    }
    /// Sets AckReq and the reserved 7 bits.
    #[inline]
    pub fn set_ack_req(&mut self, a: bool, resv7: u8) {
        self.buffer.as_mut()[field::ACK] = (a as u8) << 7 | (resv7 & 0x7F);
    }
    /// Sets the PSN.
    #[inline]
    pub fn set_psn(&mut self, v: Psn) {
        set_u24(self.buffer.as_mut(), field::PSN, v.value())
    }
}

/// High-level BTH. Reserved bits are kept so that parse→emit reproduces real traffic
/// byte for byte (Huawei NICs set a reserved bit in byte 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// OpCode.
    pub opcode: Opcode,
    /// Solicited Event.
    pub se: bool,
    /// MigReq (rxe sends 0).
    pub migreq: bool,
    /// Pad count.
    pub pad_cnt: u8,
    /// Partition key (rxe: 0xFFFF).
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
    /// Reserved 6 bits of byte 4 (masked by the ICRC).
    pub resv6a: u8,
    /// Destination QP.
    pub dest_qp: Qpn,
    /// AckReq.
    pub ack_req: bool,
    /// Reserved 7 bits of byte 8.
    pub resv7: u8,
    /// PSN.
    pub psn: Psn,
}

impl Repr {
    /// A BTH as rxe builds it: P_Key 0xFFFF, M=0, F=B=0, reserved bits 0.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> Repr {
        Repr {
            opcode,
            se: false,
            migreq: false,
            pad_cnt: 0,
            pkey: crate::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            resv6a: 0,
            dest_qp: Qpn::new(dest_qp),
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    /// Parses a BTH. Fails on TVer ≠ 0 (rxe drops those).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.tver() != 0 {
            return Err(Error::BadTver(p.tver()));
        }
        Ok(Repr::parse_unchecked(p))
    }

    /// [`parse`](Self::parse) without the length and TVer checks, for a view the caller has
    /// checked (the transport parser checks lengths and TVer once per packet).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr {
            opcode: p.opcode(),
            se: p.se(),
            migreq: p.migreq(),
            pad_cnt: p.pad_cnt(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            resv6a: p.resv6a(),
            dest_qp: Qpn::new(p.dest_qp()),
            ack_req: p.ack_req(),
            resv7: p.resv7(),
            psn: p.psn(),
        }
    }

    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_opcode(self.opcode);
        p.set_flags(self.se, self.migreq, self.pad_cnt, 0);
        p.set_pkey(self.pkey);
        p.set_resv8a(self.fecn, self.becn, self.resv6a);
        p.set_dest_qp(self.dest_qp.value());
        p.set_ack_req(self.ack_req, self.resv7);
        p.set_psn(self.psn);
    }
}

/// The BTH as two big-endian words, for senders that write a whole header with few stores.
///
/// The ICRC routine reads the BTH right after it is written, 8 and 4 bytes at a time; a load
/// inside one earlier store is forwarded from it, one spanning several narrower stores waits
/// until they reach the cache. These words write the same bytes as [`Repr::emit`] (TVer 0).
pub mod fast {
    use super::{field, HEADER_LEN};
    use crate::{Opcode, Psn};

    /// Bytes 0..8 (OpCode, SE/M/PadCnt/TVer, P_Key, F/B/Resv6a, DestQP) and 8..12 (A/Resv7,
    /// PSN) of a BTH with MigReq, FECN, BECN and the reserved bits 0.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Words {
        /// Bytes 0..8, big-endian.
        pub hi: u64,
        /// Bytes 8..12, big-endian.
        pub lo: u32,
    }

    impl Words {
        /// The words of a BTH with these fields.
        #[inline(always)]
        pub fn new(
            opcode: Opcode,
            se: bool,
            pad_cnt: u8,
            pkey: u16,
            dest_qp: u32,
            ack_req: bool,
            psn: Psn,
        ) -> Words {
            // byte i of the header lies at bit 8 * (7 - i) of `hi`, 8 * (11 - i) of `lo`
            let flags = (se as u64) << 7 | ((pad_cnt & 3) as u64) << 4;
            let hi = (opcode.0 as u64) << (8 * (7 - field::OPCODE))
                | flags << (8 * (7 - field::FLAGS))
                | (pkey as u64) << (8 * (8 - field::PKEY.end))
                | ((dest_qp & 0xFF_FFFF) as u64) << (8 * (8 - field::DEST_QP.end));
            let lo = (ack_req as u32) << (7 + 8 * (11 - field::ACK))
                | (psn.value() & 0xFF_FFFF) << (8 * (HEADER_LEN - field::PSN.end));
            Words { hi, lo }
        }

        /// Writes the header into `h`: one 8-byte and one 4-byte store.
        #[inline(always)]
        pub fn store(self, h: &mut [u8; HEADER_LEN]) {
            h[..8].copy_from_slice(&self.hi.to_be_bytes());
            h[8..].copy_from_slice(&self.lo.to_be_bytes());
        }

        /// Writes the header and, after it, `next` (the first big-endian word of the following
        /// header) into `b`: two 8-byte stores.
        #[inline(always)]
        pub fn store_with(self, b: &mut [u8; HEADER_LEN + 4], next: u32) {
            b[..8].copy_from_slice(&self.hi.to_be_bytes());
            b[8..].copy_from_slice(&((self.lo as u64) << 32 | next as u64).to_be_bytes());
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} qpn={:#x} psn={}",
            self.opcode, self.dest_qp, self.psn
        )?;
        if self.ack_req {
            write!(f, " A")?;
        }
        if self.se {
            write!(f, " SE")?;
        }
        if self.migreq {
            write!(f, " M")?;
        }
        if self.pad_cnt != 0 {
            write!(f, " pad={}", self.pad_cnt)?;
        }
        if self.fecn {
            write!(f, " FECN")?;
        }
        if self.becn {
            write!(f, " BECN")?;
        }
        if self.pkey != crate::DEFAULT_PKEY {
            write!(f, " pkey={:#06x}", self.pkey)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Huawei SEND_ONLY_WITH_IMMEDIATE (VECTORS.md V3): M=1, PadCnt=3, byte4=0x10, QP 0x48, A=1, PSN 0
    static BYTES: [u8; 12] = [
        0x05, 0x70, 0xff, 0xff, 0x10, 0x00, 0x00, 0x48, 0x80, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::RC_SEND_ONLY_WITH_IMMEDIATE);
        assert!(!p.se());
        assert!(p.migreq());
        assert_eq!(p.pad_cnt(), 3);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.pkey(), 0xFFFF);
        assert!(!p.fecn() && !p.becn());
        assert_eq!(p.resv6a(), 0x10);
        assert_eq!(p.dest_qp(), 0x48);
        assert!(p.ack_req());
        assert_eq!(p.psn(), Psn::new(0));
    }

    #[test]
    fn test_construct() {
        let mut buf = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_opcode(Opcode::RC_SEND_ONLY_WITH_IMMEDIATE);
        p.set_flags(false, true, 3, 0);
        p.set_pkey(0xFFFF);
        p.set_resv8a(false, false, 0x10);
        p.set_dest_qp(0x48);
        p.set_ack_req(true, 0);
        p.set_psn(Psn::new(0));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn test_parse_emit() {
        let r = Repr::parse(&Packet::new_unchecked(&BYTES[..])).unwrap();
        assert_eq!(r.resv6a, 0x10);
        let mut buf = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn test_impossible_len() {
        assert_eq!(
            Packet::new_checked(&BYTES[..11]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn test_bad_tver() {
        let mut b = BYTES;
        b[1] |= 0x01;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(Error::BadTver(1))
        );
    }

    #[test]
    fn fast_words_write_what_emit_writes() {
        for (k, op) in [Opcode::RC_SEND_ONLY, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE]
            .into_iter()
            .enumerate()
        {
            for pad in 0..4 {
                let mut r = Repr::new(op, 0x12_3456 + k as u32, Psn::new(0xFF_FFF0 + pad as u32));
                r.se = pad & 1 == 0;
                r.ack_req = pad & 2 == 0;
                r.pad_cnt = pad;
                r.pkey = 0x8001 + pad as u16;
                let mut a = [0u8; 12];
                r.emit(&mut Packet::new_unchecked(&mut a[..]));
                let w =
                    fast::Words::new(op, r.se, pad, r.pkey, r.dest_qp.value(), r.ack_req, r.psn);
                let mut b = [0xEEu8; 12];
                w.store(&mut b);
                assert_eq!(a, b);
                let mut c = [0xEEu8; 16];
                w.store_with(&mut c, 0x0102_0304);
                assert_eq!(c[..12], a);
                assert_eq!(c[12..], [1, 2, 3, 4]);
            }
        }
    }

    #[test]
    fn new_is_rxe_default() {
        let r = Repr::new(Opcode::RC_ACKNOWLEDGE, 0x1_0011, Psn::new(5));
        let mut buf = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x11, 0, 0xff, 0xff, 0, 0x01, 0x00, 0x11, 0, 0, 0, 5]);
    }
}
