//! Invalidate Extended Transport Header (4 bytes): the R_Key the responder must invalidate.
use crate::field::*;
use crate::Result;

/// Length of the IETH.
pub const HEADER_LEN: usize = 4;

crate::field::fixed_view!(HEADER_LEN, "IETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 0..4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 0..4, v)
    }
}

/// High-level IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// R_Key to invalidate.
    pub rkey: u32,
}

impl Repr {
    /// Parses an IETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr { rkey: p.rkey() }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_rkey(self.rkey)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        let bytes = [0xde, 0xad, 0xbe, 0xef];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.rkey(), 0xdead_beef);
        let mut out = [0u8; 4];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..2]).is_err());
    }
}
