//! XRC Extended Transport Header (4 bytes): 8 reserved bits, then the XRC SRQ number.
use crate::field::*;

mod field {
    use crate::field::Field;
    pub const WORD: Field = 0..4;
    pub const SRQN: Field = 1..4;
}

/// Length of the XRCETH.
pub const HEADER_LEN: usize = 4;

crate::field::fixed_view!(HEADER_LEN, "XRCETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The whole header as one big-endian word (reserved bits included).
    #[inline]
    pub fn raw(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::WORD)
    }
    /// XRC SRQ number (24 bits).
    #[inline]
    pub fn srqn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::SRQN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the whole header from one big-endian word.
    #[inline]
    pub fn set_raw(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::WORD, v)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn srqn_is_the_low_24_bits() {
        let b = [0xAB, 0x01, 0x02, 0x03];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.raw(), 0xAB01_0203);
        assert_eq!(p.srqn(), 0x01_0203);
        let mut c = [0u8; 4];
        Packet::new_unchecked(&mut c[..]).set_raw(0xAB01_0203);
        assert_eq!(c, b);
    }
}
