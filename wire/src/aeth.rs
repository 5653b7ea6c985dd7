//! ACK Extended Transport Header (4 bytes): syndrome and MSN.
//!
//! Syndrome bits 7:5 select ACK (000, bits 4:0 = credit count), RNR NAK (001, bits 4:0 = RNR
//! timer code) or NAK (011, bits 4:0 = NAK code). 010 is reserved.
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

/// Length of the AETH.
pub const HEADER_LEN: usize = 4;

/// Credit count meaning "invalid / unlimited", which rxe always sends.
pub const CREDITS_INVALID: u8 = 0x1F;

/// RNR NAK timer (5-bit code) to delay in microseconds, per the IBA table (code 0 = 655.36 ms).
pub const RNR_TIMER_USEC: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// Microseconds an RNR NAK with timer `code` asks the requester to wait.
pub const fn rnr_timer_usec(code: u8) -> u32 {
    RNR_TIMER_USEC[(code & kind::VALUE) as usize]
}

/// The syndrome byte: bits 7:5 say what kind of acknowledgement it is, bits 4:0 carry the
/// credit count, RNR timer code or NAK code.
mod kind {
    /// Shift of the kind bits.
    pub const SHIFT: u32 = 5;
    /// Mask of the value bits (credits, timer or NAK code).
    pub const VALUE: u8 = 0x1F;
    /// 000: ACK.
    pub const ACK: u8 = 0b000;
    /// 001: RNR NAK.
    pub const RNR_NAK: u8 = 0b001;
    /// 011: NAK.
    pub const NAK: u8 = 0b011;
}

/// NAK codes (syndrome 011xxxxx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSeqError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5–31: reserved.
    Reserved(u8),
}

impl NakCode {
    /// From the low five bits.
    pub const fn from_bits(v: u8) -> NakCode {
        match v & kind::VALUE {
            0 => NakCode::PsnSeqError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            v => NakCode::Reserved(v),
        }
    }
    /// To the low five bits.
    pub const fn bits(self) -> u8 {
        match self {
            NakCode::PsnSeqError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(v) => v & kind::VALUE,
        }
    }
}

/// The decoded syndrome byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a credit count (0x1F = invalid).
    Ack {
        /// Credit count.
        credits: u8,
    },
    /// Receiver not ready: retry after the time [`rnr_timer_usec`] gives for `timer`.
    RnrNak {
        /// 5-bit RNR timer code.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// Syndrome 010xxxxx (reserved); the raw byte.
    Reserved(u8),
}

impl Syndrome {
    /// Decodes a syndrome byte.
    pub const fn from_byte(b: u8) -> Syndrome {
        match b >> kind::SHIFT {
            kind::ACK => Syndrome::Ack {
                credits: b & kind::VALUE,
            },
            kind::RNR_NAK => Syndrome::RnrNak {
                timer: b & kind::VALUE,
            },
            kind::NAK => Syndrome::Nak(NakCode::from_bits(b)),
            _ => Syndrome::Reserved(b),
        }
    }
    /// Encodes a syndrome byte.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => kind::ACK << kind::SHIFT | credits & kind::VALUE,
            Syndrome::RnrNak { timer } => kind::RNR_NAK << kind::SHIFT | timer & kind::VALUE,
            Syndrome::Nak(c) => kind::NAK << kind::SHIFT | c.bits(),
            Syndrome::Reserved(b) => b,
        }
    }
    /// rxe's ACK: unlimited credits.
    pub const ACK: Syndrome = Syndrome::Ack {
        credits: CREDITS_INVALID,
    };
    /// Whether this is a positive acknowledgement (syndrome 000xxxxx).
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Syndrome::Ack { credits } => write!(f, "ACK credits={credits}"),
            Syndrome::RnrNak { timer } => {
                write!(f, "RNR-NAK timer={timer} ({}us)", rnr_timer_usec(*timer))
            }
            Syndrome::Nak(c) => write!(f, "NAK {c:?}"),
            Syndrome::Reserved(b) => write!(f, "reserved-syndrome {b:#04x}"),
        }
    }
}

crate::field::fixed_view!(HEADER_LEN, "AETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// Decoded syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_byte())
    }
    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.to_byte();
    }
    /// Sets the MSN.
    pub fn set_msn(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::MSN, v & 0xFF_FFFF)
    }
}

/// The AETH as one big-endian word (syndrome byte, MSN), for senders that write it together
/// with the BTH before it (see [`crate::bth::fast`]).
#[inline(always)]
pub const fn word(syndrome: u8, msn: u32) -> u32 {
    (syndrome as u32) << (8 * (3 - field::SYNDROME))
        | (msn & 0xFF_FFFF) << (8 * (4 - field::MSN.end))
}

/// High-level AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number.
    pub msn: u32,
}

impl Repr {
    /// Parses an AETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr {
            syndrome: p.syndrome(),
            msn: p.msn(),
        }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_syndrome(self.syndrome);
        p.set_msn(self.msn);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn word_is_the_emitted_header() {
        let r = Repr {
            syndrome: Syndrome::from_byte(0x61),
            msn: 0x12_3456,
        };
        let mut b = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(word(0x61, 0xAB12_3456).to_be_bytes(), b);
    }

    #[test]
    fn syndrome_roundtrip_all_bytes() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b);
        }
        assert_eq!(Syndrome::from_byte(0x1F), Syndrome::ACK);
        assert_eq!(Syndrome::from_byte(0x2C), Syndrome::RnrNak { timer: 12 });
        for b in 0..=255u8 {
            // an ACK is 000xxxxx
            assert_eq!(Syndrome::from_byte(b).is_ack(), b >> 5 == 0, "{b:#x}");
        }
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSeqError)
        );
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(Syndrome::from_byte(0x45), Syndrome::Reserved(0x45));
    }

    #[test]
    fn rnr_table() {
        assert_eq!(rnr_timer_usec(0), 655_360);
        assert_eq!(rnr_timer_usec(1), 10);
        assert_eq!(rnr_timer_usec(12), 640); // ibv_rc_pingpong's min_rnr_timer
        assert_eq!(rnr_timer_usec(25), 61_440);
        assert_eq!(rnr_timer_usec(31), 491_520);
    }

    #[test]
    fn test_deconstruct_construct() {
        let bytes = [0x1f, 0x00, 0x00, 0x01];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.syndrome(), Syndrome::ACK);
        assert_eq!(p.msn(), 1);
        let mut b = [0u8; 4];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes);
        assert_eq!(
            Packet::new_checked(&bytes[..3]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
