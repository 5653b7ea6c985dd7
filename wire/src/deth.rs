//! Datagram Extended Transport Header (8 bytes): Q_Key and source QP (UD, RD requests).
use crate::field::*;
use crate::{Qpn, Result};

mod field {
    use crate::field::Field;
    pub const QKEY: Field = 0..4;
    pub const RESV: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

/// Length of the DETH.
pub const HEADER_LEN: usize = 8;

/// Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

crate::field::fixed_view!(HEADER_LEN, "DETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::QKEY)
    }
    /// Reserved byte.
    pub fn resv(&self) -> u8 {
        self.buffer.as_ref()[field::RESV]
    }
    /// Source QP number.
    pub fn src_qp(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::SRC_QP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::QKEY, v)
    }
    /// Sets the reserved byte.
    pub fn set_resv(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESV] = v;
    }
    /// Sets the source QP.
    pub fn set_src_qp(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::SRC_QP, v & 0xFF_FFFF)
    }
}

/// High-level DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Queue key.
    pub qkey: u32,
    /// Reserved byte (kept for byte-exact round trips).
    pub resv: u8,
    /// Source QP.
    pub src_qp: Qpn,
}

impl Repr {
    /// Parses a DETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr {
            qkey: p.qkey(),
            resv: p.resv(),
            src_qp: Qpn::new(p.src_qp()),
        }
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_qkey(self.qkey);
        p.set_resv(self.resv);
        p.set_src_qp(self.src_qp.value());
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_roundtrip() {
        // CM MAD to QP1 (VECTORS.md V9): Q_Key 0x80010000, src QP 1
        let bytes = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.qkey(), GSI_QKEY);
        assert_eq!(p.src_qp(), 1);
        let mut out = [0u8; 8];
        Repr::parse(&p)
            .unwrap()
            .emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..7]).is_err());
    }
}
