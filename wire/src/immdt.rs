//! Immediate Data header (4 bytes). The value is opaque: it travels in network order and
//! libibverbs hands it to the application in `wc.imm_data` still in network order, so the
//! [`Repr`] keeps the raw bytes as a big-endian `u32`.
use crate::field::*;
use crate::Result;

/// Length of ImmDt.
pub const HEADER_LEN: usize = 4;

crate::field::fixed_view!(HEADER_LEN, "ImmDt header");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Immediate data, read big-endian.
    pub fn imm(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 0..4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the immediate data (written big-endian).
    pub fn set_imm(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 0..4, v)
    }
}

/// High-level ImmDt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Immediate data (the four wire bytes read big-endian).
    pub imm: u32,
}

impl Repr {
    /// Parses ImmDt.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr { imm: p.imm() }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_imm(self.imm)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        let bytes = [0, 0, 0, 1];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.imm(), 1);
        let mut out = [0u8; 4];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..3]).is_err());
    }
}
