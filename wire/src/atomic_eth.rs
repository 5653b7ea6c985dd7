//! Atomic Extended Transport Header (28 bytes, packed): VA, R_Key, Swap/Add data, Compare data.
use crate::field::*;
use crate::Result;

mod field {
    use crate::field::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
}

/// Length of the AtomicETH (28, not 32: the kernel's struct is packed).
pub const HEADER_LEN: usize = 28;

crate::field::fixed_view!(HEADER_LEN, "AtomicETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address (must be 8-byte aligned for the responder to execute it).
    pub fn va(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::VA)
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RKEY)
    }
    /// Swap value (CMP_SWAP) or addend (FETCH_ADD).
    pub fn swap_add(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SWAP_ADD)
    }
    /// Compare value (CMP_SWAP; unspecified for FETCH_ADD).
    pub fn compare(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the VA.
    pub fn set_va(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VA, v)
    }
    /// Sets the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RKEY, v)
    }
    /// Sets the swap/add value.
    pub fn set_swap_add(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SWAP_ADD, v)
    }
    /// Sets the compare value.
    pub fn set_compare(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::COMPARE, v)
    }
}

/// High-level AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl Repr {
    /// Parses an AtomicETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr {
            va: p.va(),
            rkey: p.rkey(),
            swap_add: p.swap_add(),
            compare: p.compare(),
        }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_va(self.va);
        p.set_rkey(self.rkey);
        p.set_swap_add(self.swap_add);
        p.set_compare(self.compare);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        let mut bytes = [0u8; 28];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.va(), 0x0102_0304_0506_0708);
        assert_eq!(p.rkey(), 0x090a_0b0c);
        assert_eq!(p.swap_add(), 0x0d0e_0f10_1112_1314);
        assert_eq!(p.compare(), 0x1516_1718_191a_1b1c);
        let mut out = [0u8; 28];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..27]).is_err());
    }
}
