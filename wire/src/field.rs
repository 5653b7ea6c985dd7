//! Byte-range helpers shared by the header views.

/// A header field: its byte range inside the header.
pub type Field = core::ops::Range<usize>;

/// The big-endian `u16` in `b[f]`.
#[inline]
pub fn u16_at(b: &[u8], f: Field) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// The big-endian 24-bit value in `b[f]`.
#[inline]
pub fn u24_at(b: &[u8], f: Field) -> u32 {
    let s = &b[f];
    u32::from_be_bytes([0, s[0], s[1], s[2]])
}

/// The big-endian `u32` in `b[f]`.
#[inline]
pub fn u32_at(b: &[u8], f: Field) -> u32 {
    let s = &b[f];
    u32::from_be_bytes([s[0], s[1], s[2], s[3]])
}

/// The big-endian `u64` in `b[f]`.
#[inline]
pub fn u64_at(b: &[u8], f: Field) -> u64 {
    let s = &b[f];
    let mut a = [0u8; 8];
    a.copy_from_slice(&s[..8]);
    u64::from_be_bytes(a)
}

/// Writes `v` big-endian into `b[f]`.
#[inline]
pub fn set_u16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v` big-endian into `b[f]`.
#[inline]
pub fn set_u24(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Writes `v` big-endian into `b[f]`.
#[inline]
pub fn set_u32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian into `b[f]`.
#[inline]
pub fn set_u64(b: &mut [u8], f: Field, v: u64) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Declares a fixed-length header view `Packet<T>` with `new_unchecked`, `new_checked`,
/// `check_len` and `into_inner`, following smoltcp's contract: once `check_len` returned `Ok`,
/// no accessor panics.
macro_rules! fixed_view {
    ($len:expr, $what:literal) => {
        #[doc = concat!("A zero-copy view of a ", $what, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Packet { buffer }
            }
            /// Wraps a buffer and checks it is long enough.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }
            /// After `Ok(())`, no accessor or setter panics.
            pub fn check_len(&self) -> $crate::Result<()> {
                if self.buffer.as_ref().len() < $len {
                    Err($crate::Error::Truncated)
                } else {
                    Ok(())
                }
            }
            /// Consumes the view, returning the buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use fixed_view;

/// Writes the big-endian `v` at `b[at..at + 2]`.
#[inline(always)]
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v`, big-endian, at `b[at..at + 3]`.
#[inline(always)]
pub fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&(v & 0xFF_FFFF).to_be_bytes()[1..]);
}

/// Writes the big-endian `v` at `b[at..at + 4]`.
#[inline(always)]
pub fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Writes the big-endian `v` at `b[at..at + 8]`.
#[inline(always)]
pub fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
