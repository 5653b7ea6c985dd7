//! FLUSH Extended Transport Header (4 bytes, IBA 1.5 / RDMA FLUSH): which placement the
//! FLUSH asks for and how much of the region it selects.
//!
//! One big-endian word: bits 31:6 reserved, bits 5:4 the selectivity level, bits 3:0 the
//! placement type (a bit set: global visibility, persistence). Kernel rxe's `feth_init` writes
//! `(level << 4 & 0x30) | (type & 0x0F)`; libibverbs names the values `IBV_FLUSH_GLOBAL` /
//! `IBV_FLUSH_PERSISTENT` and `IBV_FLUSH_RANGE` / `IBV_FLUSH_MR`.
use crate::field::*;
use crate::Result;

/// Length of the FETH.
pub const HEADER_LEN: usize = 4;

/// Placement type bit: make the data globally visible (`IB_FLUSH_GLOBAL`).
pub const PLACEMENT_GLOBAL: u8 = 1 << 0;
/// Placement type bit: make the data persistent (`IB_FLUSH_PERSISTENT`).
pub const PLACEMENT_PERSISTENT: u8 = 1 << 1;
/// Selectivity level: the RETH's range of the region (`IB_FLUSH_RANGE`).
pub const SELECT_RANGE: u8 = 0;
/// Selectivity level: the whole memory region the R_Key names (`IB_FLUSH_MR`).
pub const SELECT_MR: u8 = 1;

const PLT_MASK: u32 = 0x0F;
const SEL_SHIFT: u32 = 4;
const SEL_MASK: u32 = 0x30;
const RESV_SHIFT: u32 = 6;

crate::field::fixed_view!(HEADER_LEN, "FETH");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The whole word.
    pub fn raw(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 0..4)
    }
    /// Placement type (bits 3:0): [`PLACEMENT_GLOBAL`], [`PLACEMENT_PERSISTENT`] or both.
    pub fn placement_type(&self) -> u8 {
        (self.raw() & PLT_MASK) as u8
    }
    /// Selectivity level (bits 5:4): [`SELECT_RANGE`] or [`SELECT_MR`]; 2 and 3 are reserved.
    pub fn selectivity_level(&self) -> u8 {
        ((self.raw() & SEL_MASK) >> SEL_SHIFT) as u8
    }
    /// The reserved bits 31:6, shifted down.
    pub fn reserved(&self) -> u32 {
        self.raw() >> RESV_SHIFT
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_raw(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 0..4, v)
    }
    /// Sets the placement type (low four bits of `v`).
    pub fn set_placement_type(&mut self, v: u8) {
        let w = self.raw() & !PLT_MASK | (v as u32 & PLT_MASK);
        self.set_raw(w)
    }
    /// Sets the selectivity level (low two bits of `v`).
    pub fn set_selectivity_level(&mut self, v: u8) {
        let w = self.raw() & !SEL_MASK | ((v as u32) << SEL_SHIFT & SEL_MASK);
        self.set_raw(w)
    }
    /// Sets the reserved bits 31:6 (low 26 bits of `v`).
    pub fn set_reserved(&mut self, v: u32) {
        let w = self.raw() & (PLT_MASK | SEL_MASK) | v << RESV_SHIFT;
        self.set_raw(w)
    }
}

/// High-level FETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Placement type bits (3:0).
    pub placement_type: u8,
    /// Selectivity level (bits 5:4).
    pub selectivity_level: u8,
    /// Reserved bits 31:6 (0 on the wire; kept so that parse and emit give the same bytes).
    pub resv: u32,
}

impl Repr {
    /// A FETH asking for `placement_type` over `selectivity_level`, reserved bits 0.
    pub const fn new(placement_type: u8, selectivity_level: u8) -> Repr {
        Repr {
            placement_type,
            selectivity_level,
            resv: 0,
        }
    }
    /// Parses a FETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr::parse_unchecked(p))
    }
    /// [`parse`](Self::parse) without the length check, for a view the caller has checked
    /// (the transport parser checks every header's length at once).
    #[inline(always)]
    pub(crate) fn parse_unchecked<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Repr {
        Repr::from_raw(p.raw())
    }
    /// From the big-endian word's value.
    pub const fn from_raw(w: u32) -> Repr {
        Repr {
            placement_type: (w & PLT_MASK) as u8,
            selectivity_level: ((w & SEL_MASK) >> SEL_SHIFT) as u8,
            resv: w >> RESV_SHIFT,
        }
    }
    /// The word (fields masked to their widths).
    pub const fn to_raw(&self) -> u32 {
        self.resv << RESV_SHIFT
            | (self.selectivity_level as u32) << SEL_SHIFT & SEL_MASK
            | self.placement_type as u32 & PLT_MASK
    }
    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_raw(self.to_raw())
    }
}

impl core::fmt::Display for Repr {
    /// `FETH(global|persistent range)`, reserved bits shown only when set.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FETH(")?;
        let mut any = false;
        for (bit, name) in [
            (PLACEMENT_GLOBAL, "global"),
            (PLACEMENT_PERSISTENT, "persistent"),
        ] {
            if self.placement_type & bit != 0 {
                if any {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                any = true;
            }
        }
        let other = self.placement_type & !(PLACEMENT_GLOBAL | PLACEMENT_PERSISTENT);
        if other != 0 {
            write!(f, "{}plt={other:#x}", if any { "|" } else { "" })?;
        } else if !any {
            f.write_str("none")?;
        }
        match self.selectivity_level {
            SELECT_RANGE => f.write_str(" range")?,
            SELECT_MR => f.write_str(" mr")?,
            s => write!(f, " sel={s}")?,
        }
        if self.resv != 0 {
            write!(f, " resv={:#x}", self.resv)?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // What kernel rxe's feth_init(pkt, IB_FLUSH_GLOBAL | IB_FLUSH_PERSISTENT, IB_FLUSH_MR)
    // writes: (1 << 4 & 0x30) | (3 & 0x0f) = 0x13, big-endian.
    static MR_BOTH: [u8; 4] = [0x00, 0x00, 0x00, 0x13];

    #[test]
    fn test_deconstruct_construct() {
        let p = Packet::new_checked(&MR_BOTH[..]).unwrap();
        assert_eq!(p.placement_type(), PLACEMENT_GLOBAL | PLACEMENT_PERSISTENT);
        assert_eq!(p.selectivity_level(), SELECT_MR);
        assert_eq!(p.reserved(), 0);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr::new(3, SELECT_MR));
        let mut b = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, MR_BOTH);
        assert_eq!(r.to_string(), "FETH(global|persistent mr)");
        // global over a range: 0x01
        let g = Repr::new(PLACEMENT_GLOBAL, SELECT_RANGE);
        g.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, [0, 0, 0, 0x01]);
        assert_eq!(g.to_string(), "FETH(global range)");
    }

    #[test]
    fn reserved_bits_round_trip_and_setters_keep_the_others() {
        let bytes = [0x80, 0x00, 0x00, 0xF5]; // resv bit 31 and bits 7:6, sel 3, plt 5
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!((r.placement_type, r.selectivity_level), (5, 3));
        assert_eq!(r.resv, 0x0200_0003);
        let mut b = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes);
        assert_eq!(r.to_string(), "FETH(global|plt=0x4 sel=3 resv=0x2000003)");
        let mut q = Packet::new_unchecked(&mut b[..]);
        q.set_placement_type(PLACEMENT_PERSISTENT);
        q.set_selectivity_level(SELECT_RANGE);
        assert_eq!(q.reserved(), 0x0200_0003);
        q.set_reserved(0);
        assert_eq!(q.into_inner(), &[0, 0, 0, 0x02]);
    }

    #[test]
    fn test_impossible_len() {
        assert_eq!(
            Packet::new_checked(&MR_BOTH[..3]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
