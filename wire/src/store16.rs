//! One 16-byte store of two 64-bit words: the only `unsafe` in this crate.
//!
//! Why it exists: [`crate::icrc::start_udp`] lays out the masked pseudo header and hands it to
//! crc32fast at once, whose first access to each 16-byte block is one 16-byte load. The CPU
//! forwards a load from its store buffer only when a single earlier store covers it; written
//! as bytes, words or two 8-byte halves (what the compiler makes of a `u128`), each block's
//! load instead waited until those stores, and every store before them, had reached the cache.
//! Measured in the engine benchmark (SEND 64 B over SimNet): the engine 17% faster, the ICRC
//! baseline loop 58% faster, with each block written by one 16-byte store.
#![allow(unsafe_code)]

/// Writes `lo` (bytes 0..8, little-endian) and `hi` (bytes 8..16) into `dst` with one 16-byte
/// store where the target has one (x86_64), else with two 8-byte writes.
#[inline(always)]
pub(crate) fn put(dst: &mut [u8; 16], lo: u64, hi: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
        // SAFETY: SSE2 belongs to the x86_64 baseline, so both intrinsics exist on every CPU
        // this code can run on. `_mm_storeu_si128` has no alignment requirement and writes
        // exactly 16 bytes at the pointer, which `dst`, an exclusive `&mut [u8; 16]`, provides.
        unsafe {
            _mm_storeu_si128(
                dst.as_mut_ptr().cast::<__m128i>(),
                _mm_set_epi64x(hi as i64, lo as i64),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        dst[..8].copy_from_slice(&lo.to_le_bytes());
        dst[8..].copy_from_slice(&hi.to_le_bytes());
    }
}

#[cfg(test)]
mod test {
    #[test]
    fn writes_the_two_words_little_endian_and_nothing_else() {
        let mut b = [0xAAu8; 18];
        let d: &mut [u8; 16] = (&mut b[1..17]).try_into().unwrap();
        super::put(d, 0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908);
        assert_eq!(b[0], 0xAA);
        assert_eq!(b[17], 0xAA);
        assert_eq!(&b[1..17], &core::array::from_fn::<u8, 16, _>(|i| i as u8));
    }
}
