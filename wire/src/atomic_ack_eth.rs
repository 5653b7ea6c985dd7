//! Atomic Acknowledge Extended Transport Header (8 bytes): the original remote value.
use crate::field::*;
use crate::Result;

/// Length of the AtomicAckETH.
pub const HEADER_LEN: usize = 8;

crate::field::fixed_view!(HEADER_LEN, "AtomicAckETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The value at the target address before the atomic executed.
    pub fn orig(&self) -> u64 {
        u64_at(self.buffer.as_ref(), 0..8)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the original value.
    pub fn set_orig(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), 0..8, v)
    }
}

/// High-level AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Original remote data.
    pub orig: u64,
}

impl Repr {
    /// Parses an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr { orig: p.orig() }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_orig(self.orig)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        let bytes = [0, 0, 0, 0, 0, 0, 0x12, 0x34];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.orig(), 0x1234);
        let mut out = [0xAAu8; 8];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..7]).is_err());
    }
}
