//! Reliable Datagram Extended Transport Header (4 bytes): EE-context. Decoded for display only;
//! RD is not implemented (ConnectX DC reuses the RD opcode space).
use crate::field::*;
use crate::Result;

/// Length of the RDETH.
pub const HEADER_LEN: usize = 4;

crate::field::fixed_view!(HEADER_LEN, "RDETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Reserved byte.
    pub fn resv(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    /// End-to-end context (24 bits).
    pub fn ee_context(&self) -> u32 {
        u24_at(self.buffer.as_ref(), 1..4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the reserved byte and the EE context.
    pub fn set(&mut self, resv: u8, ee_context: u32) {
        self.buffer.as_mut()[0] = resv;
        set_u24(self.buffer.as_mut(), 1..4, ee_context & 0xFF_FFFF);
    }
}

/// High-level RDETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Reserved byte.
    pub resv: u8,
    /// EE context.
    pub ee_context: u32,
}

impl Repr {
    /// Parses an RDETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr {
            resv: p.resv(),
            ee_context: p.ee_context(),
        }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set(self.resv, self.ee_context)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        let bytes = [0x00, 0x01, 0x02, 0x03];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.ee_context(), 0x010203);
        let mut out = [0u8; 4];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..3]).is_err());
    }
}
