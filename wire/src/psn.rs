//! 24-bit packet sequence numbers with serial-number arithmetic.
use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A 24-bit Packet Sequence Number.
///
/// Arithmetic wraps modulo 2^24. Comparison is *serial-number* comparison, as rxe's
/// `psn_compare(a, b) = (s32)((a - b) << 8)`: `a < b` when the 24-bit difference `a - b`,
/// read as a signed 24-bit number, is negative. The relation is only meaningful within a
/// window of ±2^23, so `Psn` implements `PartialOrd` but not `Ord`; two PSNs exactly 2^23
/// apart compare as `a > b` both ways round, like the kernel's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Mask of the 24 valid bits.
    pub const MASK: u32 = 0x00FF_FFFF;
    /// Size of the PSN space.
    pub const MODULUS: u32 = 1 << 24;

    /// Builds a PSN from the low 24 bits of `v`.
    #[inline]
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    /// The raw 24-bit value.
    #[inline]
    pub const fn value(self) -> u32 {
        self.0
    }

    /// Signed distance `self - other` in the range `-2^23 ..= 2^23 - 1`.
    #[inline]
    pub const fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0)) << 8) as i32 >> 8
    }

    /// `self + n` modulo 2^24.
    #[inline]
    pub const fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// `self - n` modulo 2^24.
    #[inline]
    pub const fn sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// rxe's `psn_compare`: the sign of the serial difference.
    #[inline]
    pub fn compare(self, other: Psn) -> Ordering {
        self.diff(other).cmp(&0)
    }

    /// True when `self` lies in the half-open serial range `[start, start + len)`.
    #[inline]
    pub fn in_window(self, start: Psn, len: u32) -> bool {
        let d = self.0.wrapping_sub(start.0) & Self::MASK;
        d < len
    }
}

impl PartialOrd for Psn {
    #[inline]
    fn partial_cmp(&self, other: &Psn) -> Option<Ordering> {
        Some(self.compare(*other))
    }
}

impl Add<u32> for Psn {
    type Output = Psn;
    #[inline]
    fn add(self, n: u32) -> Psn {
        Psn::add(self, n)
    }
}

impl AddAssign<u32> for Psn {
    #[inline]
    fn add_assign(&mut self, n: u32) {
        *self = Psn::add(*self, n);
    }
}

impl Sub<u32> for Psn {
    type Output = Psn;
    #[inline]
    fn sub(self, n: u32) -> Psn {
        Psn::sub(self, n)
    }
}

impl Sub<Psn> for Psn {
    type Output = i32;
    #[inline]
    fn sub(self, other: Psn) -> i32 {
        self.diff(other)
    }
}

impl From<u32> for Psn {
    fn from(v: u32) -> Psn {
        Psn::new(v)
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xFF_FFFF) + 1, Psn::new(0));
        assert_eq!(Psn::new(0) - 1, Psn::new(0xFF_FFFF));
        assert_eq!(Psn::new(0x1234_5678).value(), 0x34_5678);
    }

    #[test]
    fn serial_comparison_across_wrap() {
        let a = Psn::new(0xFF_FFF0);
        let b = Psn::new(0x10);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 0x20);
        assert_eq!(a - b, -0x20);
        assert_eq!(a.compare(a), Ordering::Equal);
    }

    #[test]
    fn half_space_matches_kernel() {
        // rxe: (s32)((a - b) << 8); at exactly 2^23 apart the result is negative both ways.
        let a = Psn::new(0);
        let b = Psn::new(1 << 23);
        assert_eq!(a.diff(b), -(1 << 23));
        assert_eq!(b.diff(a), -(1 << 23));
    }

    #[test]
    fn window() {
        let s = Psn::new(0xFF_FFFE);
        assert!(Psn::new(0xFF_FFFE).in_window(s, 4));
        assert!(Psn::new(1).in_window(s, 4));
        assert!(!Psn::new(2).in_window(s, 4));
        assert!(!Psn::new(0xFF_FFFD).in_window(s, 4));
    }

    proptest::proptest! {
        #[test]
        fn diff_inverts_add(a in 0u32..(1 << 24), n in 0u32..(1 << 23)) {
            let p = Psn::new(a);
            proptest::prop_assert_eq!((p + n).diff(p), n as i32);
            proptest::prop_assert!(p + n >= p);
        }
    }
}
