//! RDMA Extended Transport Header (16 bytes): VA, R_Key, DMA length.
use crate::field::*;
use crate::Result;

mod field {
    use crate::field::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

/// Length of the RETH.
pub const HEADER_LEN: usize = 16;

crate::field::fixed_view!(HEADER_LEN, "RETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::VA)
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RKEY)
    }
    /// DMA length (whole remaining message length).
    pub fn dma_len(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::DMA_LEN)
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
    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::DMA_LEN, v)
    }
}

/// High-level RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl Repr {
    /// Parses a RETH.
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
            dma_len: p.dma_len(),
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
        p.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    // ConnectX READ REQUEST RETH (VECTORS.md V5 style): VA, rkey, length
    static BYTES: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x9a, 0x00, 0x01, 0x02, 0x03, 0x00, 0x00, 0x10,
        0x00,
    ];

    #[test]
    fn test_deconstruct_construct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.va(), 0x7f12_3456_789a);
        assert_eq!(p.rkey(), 0x0001_0203);
        assert_eq!(p.dma_len(), 4096);
        let r = Repr::parse(&p).unwrap();
        let mut b = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, BYTES);
    }

    #[test]
    fn test_impossible_len() {
        assert_eq!(
            Packet::new_checked(&BYTES[..15]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
