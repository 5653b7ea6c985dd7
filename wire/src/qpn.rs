//! 24-bit queue pair numbers.
use core::fmt;

/// A queue pair number: the 24 bits the BTH's DestQP, the DETH's SrcQP and the CM messages
/// carry. QP0 is the subnet management QP (absent on RoCE) and QP1 the general services QP
/// (the CM's).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qpn(u32);

impl Qpn {
    /// Mask of the 24 valid bits.
    pub const MASK: u32 = 0x00FF_FFFF;
    /// QP0, the subnet management QP.
    pub const SMI: Qpn = Qpn(0);
    /// QP1, the general services QP (MADs, the CM).
    pub const GSI: Qpn = Qpn(1);

    /// The QPN in the low 24 bits of `v` (what a 24-bit wire field keeps of it).
    #[inline]
    pub const fn new(v: u32) -> Qpn {
        Qpn(v & Self::MASK)
    }

    /// `v` when it fits in 24 bits.
    #[inline]
    pub const fn checked(v: u32) -> Option<Qpn> {
        if v & !Self::MASK == 0 {
            Some(Qpn(v))
        } else {
            None
        }
    }

    /// The 24-bit value.
    #[inline]
    pub const fn value(self) -> u32 {
        self.0
    }
}

impl PartialEq<u32> for Qpn {
    /// Equal to the number it holds, so a `Qpn` field compares with a plain QPN.
    #[inline]
    fn eq(&self, v: &u32) -> bool {
        self.0 == *v
    }
}

impl PartialEq<Qpn> for u32 {
    #[inline]
    fn eq(&self, q: &Qpn) -> bool {
        *self == q.0
    }
}

impl From<Qpn> for u32 {
    #[inline]
    fn from(q: Qpn) -> u32 {
        q.0
    }
}

impl fmt::Display for Qpn {
    /// Hexadecimal, as the BTH's display and rxe's logs print QPNs: `0x11`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl fmt::Debug for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Qpn({:#x})", self.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_qpn_is_24_bits() {
        assert_eq!(Qpn::new(0x1234_5678).value(), 0x34_5678);
        assert_eq!(Qpn::checked(0xFF_FFFF), Some(Qpn::new(0xFF_FFFF)));
        assert_eq!(Qpn::checked(0x100_0000), None);
        assert_eq!(u32::from(Qpn::GSI), 1);
        assert_eq!(Qpn::new(0x48) == 0x48, 0x48 == Qpn::new(0x48));
        extern crate std;
        use std::format;
        assert_eq!(
            format!("{} {:?}", Qpn::new(0x11), Qpn::SMI),
            "0x11 Qpn(0x0)"
        );
    }
}
