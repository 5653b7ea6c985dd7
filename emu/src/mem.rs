//! Registered memory. The core reaches application memory only through [`MemoryRegion`], after
//! checking keys, protection domain, access flags and bounds itself (rxe `mr_check_range`), so
//! the core needs no `unsafe` and can never touch bytes outside a registered region.
//!
//! Keys are `rand(8) << 24 | generation(12) << 12 | index(12)`: the random byte makes keys
//! unpredictable, the per-slot generation makes a deregistered key fail forever (a slot whose
//! generation would wrap is retired instead of reused), the index makes lookup O(1). Indexes
//! stay below 0xF00, so bits 8..11 of a region's key are never all set: that marks a memory
//! window's key (`mw.rs`).
use crate::verbs::{AccessFlags, Sge};
use crate::Pd;
use rand::Rng;
use std::sync::{Arc, Mutex};

/// Byte-addressed memory the NIC may read and write. Offsets are relative to the region's
/// start; the core guarantees `off + len <= self.len()` on every call.
pub trait MemoryRegion: Send + Sync {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `dst.len()` bytes at `off` into `dst`.
    fn read(&self, off: usize, dst: &mut [u8]);
    /// Copies `src` to `off`.
    fn write(&self, off: usize, src: &[u8]);
    /// Atomically: `old = *off; if old == cmp { *off = swap }; old` on a host-endian u64.
    fn atomic_cmp_swap(&self, off: usize, cmp: u64, swap: u64) -> u64;
    /// Atomically: `old = *off; *off = old + add; old` on a host-endian u64.
    fn atomic_fetch_add(&self, off: usize, add: u64) -> u64;
    /// Stores the host-endian u64 `v` at `off` as one 8-byte store (IBA 1.5 ATOMIC WRITE).
    /// The default writes the 8 bytes; a region other threads read directly overrides it.
    fn atomic_write(&self, off: usize, v: u64) {
        self.write(off, &v.to_ne_bytes())
    }
}

/// Copies a scatter/gather list into WQE storage of the same length. One SGE (the common case)
/// is copied field by field: `copy_from_slice` calls `memcpy` for a run-time length, and that
/// reads the 16 bytes the caller has just written as three fields in one load, which stalls
/// on store forwarding (measured with `perf` on the engine benchmark: about 3% of a SEND).
#[inline(always)]
pub(crate) fn copy_sges(dst: &mut [Sge], src: &[Sge]) {
    if let ([d], [s]) = (&mut *dst, src) {
        // (through `black_box`: otherwise the two 4-byte fields are read as one 8-byte load)
        d.addr = s.addr;
        d.length = *std::hint::black_box(&s.length);
        d.lkey = s.lkey;
    } else {
        dst.copy_from_slice(src);
    }
}

/// Copies in pieces of at most 2 KiB: glibc's `rep movsb` path is 20–30× slower on some CPUs
/// when the destination sits a few bytes past the source modulo 4096 (glibc bug 30994), which is
/// exactly where packet payloads land relative to page-aligned buffers.
#[inline]
pub fn copy_chunked(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_mut(2048).zip(src.chunks(2048)) {
        d.copy_from_slice(s);
    }
}

/// A safe [`MemoryRegion`] over a Rust-owned buffer (tests, simulations, the Rust API).
#[derive(Clone, Default)]
pub struct VecMemory(Arc<Mutex<Vec<u8>>>);

impl VecMemory {
    /// `len` zero bytes.
    pub fn new(len: usize) -> VecMemory {
        VecMemory(Arc::new(Mutex::new(vec![0; len])))
    }
    /// Wraps existing bytes.
    pub fn from_vec(v: Vec<u8>) -> VecMemory {
        VecMemory(Arc::new(Mutex::new(v)))
    }
    /// A copy of the contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.lock().clone()
    }
    /// Overwrites `src.len()` bytes at `off` (application-side store).
    pub fn store(&self, off: usize, src: &[u8]) {
        self.lock()[off..off + src.len()].copy_from_slice(src)
    }
    /// Reads `len` bytes at `off` (application-side load).
    pub fn load(&self, off: usize, len: usize) -> Vec<u8> {
        self.lock()[off..off + len].to_vec()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MemoryRegion for VecMemory {
    fn len(&self) -> usize {
        self.lock().len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        copy_chunked(dst, &self.lock()[off..off + dst.len()])
    }
    fn write(&self, off: usize, src: &[u8]) {
        copy_chunked(&mut self.lock()[off..off + src.len()], src)
    }
    fn atomic_cmp_swap(&self, off: usize, cmp: u64, swap: u64) -> u64 {
        let mut g = self.lock();
        let b = &mut g[off..off + 8];
        let old = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
        if old == cmp {
            b.copy_from_slice(&swap.to_ne_bytes());
        }
        old
    }
    fn atomic_fetch_add(&self, off: usize, add: u64) -> u64 {
        let mut g = self.lock();
        let b = &mut g[off..off + 8];
        let old = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
        b.copy_from_slice(&old.wrapping_add(add).to_ne_bytes());
        old
    }
}

/// Handle of a registered memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mr {
    /// Local key.
    pub lkey: u32,
    /// Remote key (0 when no remote access was requested, as rxe does).
    pub rkey: u32,
}

pub(crate) struct MrEntry {
    pub pd: Pd,
    pub mem: Arc<dyn MemoryRegion>,
    pub iova: u64,
    pub len: u64,
    pub access: AccessFlags,
    pub key: u32,
}

struct Slot {
    gen: u16,
    retired: bool,
    entry: Option<MrEntry>,
}

/// Why a memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemErr {
    /// Key unknown, wrong PD, missing permission or out of bounds.
    Fault,
    /// The scatter list is too small.
    NoSpace,
}

const INDEX_BITS: u32 = 12;
const GEN_BITS: u32 = 12;
/// Slot indexes 0xF00.. would give keys with bits 8..11 set, which name memory windows.
const MAX_SLOTS: usize = 0xF00;

/// The MR table of one NIC.
#[derive(Default)]
pub(crate) struct MrTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl MrTable {
    pub fn live(&self) -> usize {
        self.live
    }

    pub fn register(
        &mut self,
        rng: &mut impl Rng,
        pd: Pd,
        mem: Arc<dyn MemoryRegion>,
        iova: u64,
        access: AccessFlags,
    ) -> Option<Mr> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < MAX_SLOTS => {
                self.slots.push(Slot {
                    gen: 0,
                    retired: false,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let slot = &mut self.slots[idx as usize];
        let key = (rng.gen::<u8>() as u32) << 24 | (slot.gen as u32) << INDEX_BITS | idx;
        let len = mem.len() as u64;
        slot.entry = Some(MrEntry {
            pd,
            mem,
            iova,
            len,
            access,
            key,
        });
        self.live += 1;
        let remote =
            AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        Some(Mr {
            lkey: key,
            rkey: if access.intersects(remote) { key } else { 0 },
        })
    }

    pub fn deregister(&mut self, lkey: u32) -> bool {
        let idx = (lkey & ((1 << INDEX_BITS) - 1)) as usize;
        let Some(slot) = self.slots.get_mut(idx) else {
            return false;
        };
        if slot.entry.as_ref().map(|e| e.key) != Some(lkey) {
            return false;
        }
        slot.entry = None;
        self.live -= 1;
        if slot.gen as u32 + 1 >= 1 << GEN_BITS {
            slot.retired = true;
        } else {
            slot.gen += 1;
            self.free.push(idx as u32);
        }
        true
    }

    /// Looks a key up; the full 32-bit key must match the live registration.
    pub fn get(&self, key: u32) -> Option<&MrEntry> {
        let idx = (key & ((1 << INDEX_BITS) - 1)) as usize;
        let e = self.slots.get(idx)?.entry.as_ref()?;
        (e.key == key).then_some(e)
    }

    pub fn pd_in_use(&self, pd: Pd) -> bool {
        self.slots
            .iter()
            .any(|s| s.entry.as_ref().is_some_and(|e| e.pd == pd))
    }

    /// Checks `key` in `pd` with `access` over `[va, va+len)`; returns the entry and the offset.
    pub fn check(
        &self,
        key: u32,
        pd: Pd,
        access: AccessFlags,
        va: u64,
        len: u64,
    ) -> Result<(&MrEntry, usize), MemErr> {
        let e = self.get(key).ok_or(MemErr::Fault)?;
        if e.pd != pd || !e.access.contains(access) {
            return Err(MemErr::Fault);
        }
        let off = va.checked_sub(e.iova).ok_or(MemErr::Fault)?;
        let end = off.checked_add(len).ok_or(MemErr::Fault)?;
        if end > e.len {
            return Err(MemErr::Fault);
        }
        Ok((e, off as usize))
    }

    /// Why [`MrTable::check`] refuses `key` (diagnostics only; `None` if it does not).
    pub fn classify(
        &self,
        key: u32,
        pd: Pd,
        access: AccessFlags,
        va: u64,
        len: u64,
    ) -> Option<crate::diag::KeyFault> {
        use crate::diag::KeyFault;
        let idx = (key & ((1 << INDEX_BITS) - 1)) as usize;
        let gen = (key >> INDEX_BITS) & ((1 << GEN_BITS) - 1);
        let Some(e) = self.get(key) else {
            return Some(match self.slots.get(idx) {
                Some(s) if gen < s.gen as u32 || (s.retired && s.entry.is_none()) => {
                    KeyFault::Stale
                }
                _ => KeyFault::Unknown,
            });
        };
        if e.pd != pd {
            return Some(KeyFault::WrongPd);
        }
        if !e.access.contains(access) {
            return Some(KeyFault::NoPermission);
        }
        let in_bounds = va
            .checked_sub(e.iova)
            .and_then(|o| o.checked_add(len))
            .is_some_and(|end| end <= e.len);
        (!in_bounds).then_some(KeyFault::OutOfBounds)
    }

    /// Why the scatter/gather list `sges` fails for `len` bytes from offset `off` (`None` if
    /// every touched entry passes its key check).
    pub fn classify_sges(
        &self,
        pd: Pd,
        sges: &[Sge],
        access: AccessFlags,
        mut off: u64,
        mut len: u64,
    ) -> Option<crate::diag::KeyFault> {
        for s in sges {
            if len == 0 {
                break;
            }
            let l = s.length as u64;
            if off >= l {
                off -= l;
                continue;
            }
            let n = (l - off).min(len);
            let va = s.addr.wrapping_add(off);
            if let Some(f) = self.classify(s.lkey, pd, access, va, n) {
                return Some(f);
            }
            len -= n;
            off = 0;
        }
        None
    }

    /// Copies `dst.len()` bytes starting `off` bytes into the gather list `sges` into `dst`.
    /// Local reads need no access flag (rxe: lkey lookup with access 0).
    pub fn gather(
        &self,
        pd: Pd,
        sges: &[Sge],
        mut off: u64,
        mut dst: &mut [u8],
    ) -> Result<(), MemErr> {
        if let [s] = sges {
            // one SGE holding the whole range: what the loop below does for it, without the loop
            if !dst.is_empty() && off.saturating_add(dst.len() as u64) <= s.length as u64 {
                let va = s.addr.checked_add(off).ok_or(MemErr::Fault)?;
                let (e, o) = self.check(s.lkey, pd, AccessFlags::EMPTY, va, dst.len() as u64)?;
                e.mem.read(o, dst);
                return Ok(());
            }
        }
        for s in sges {
            if dst.is_empty() {
                break;
            }
            let l = s.length as u64;
            if off >= l {
                off -= l;
                continue;
            }
            let n = ((l - off) as usize).min(dst.len());
            let va = s.addr.checked_add(off).ok_or(MemErr::Fault)?;
            let (e, o) = self.check(s.lkey, pd, AccessFlags::EMPTY, va, n as u64)?;
            e.mem.read(o, &mut dst[..n]);
            dst = &mut dst[n..];
            off = 0;
        }
        if dst.is_empty() {
            Ok(())
        } else {
            Err(MemErr::NoSpace)
        }
    }

    /// Copies `src` to `off` bytes into the scatter list `sges` (needs LOCAL_WRITE).
    pub fn scatter(
        &self,
        pd: Pd,
        sges: &[Sge],
        mut off: u64,
        mut src: &[u8],
    ) -> Result<(), MemErr> {
        if let [s] = sges {
            // one SGE holding the whole range: what the loop below does for it, without the loop
            if !src.is_empty() && off.saturating_add(src.len() as u64) <= s.length as u64 {
                let va = s.addr.checked_add(off).ok_or(MemErr::Fault)?;
                let (e, o) =
                    self.check(s.lkey, pd, AccessFlags::LOCAL_WRITE, va, src.len() as u64)?;
                e.mem.write(o, src);
                return Ok(());
            }
        }
        for s in sges {
            if src.is_empty() {
                break;
            }
            let l = s.length as u64;
            if off >= l {
                off -= l;
                continue;
            }
            let n = ((l - off) as usize).min(src.len());
            let va = s.addr.checked_add(off).ok_or(MemErr::Fault)?;
            let (e, o) = self.check(s.lkey, pd, AccessFlags::LOCAL_WRITE, va, n as u64)?;
            e.mem.write(o, &src[..n]);
            src = &src[n..];
            off = 0;
        }
        if src.is_empty() {
            Ok(())
        } else {
            Err(MemErr::NoSpace)
        }
    }
}

/// Total length of a scatter/gather list (saturating).
#[inline]
pub(crate) fn sge_total(sges: &[Sge]) -> u64 {
    match sges {
        // the common lists, without the unrolled loop's set-up
        [] => 0,
        [s] => s.length as u64,
        _ => sges.iter().map(|s| s.length as u64).sum(),
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use rand::SeedableRng;

    fn table() -> (MrTable, rand::rngs::SmallRng, VecMemory) {
        (
            MrTable::default(),
            rand::rngs::SmallRng::seed_from_u64(1),
            VecMemory::new(100),
        )
    }

    #[test]
    fn keys_carry_index_generation_and_random_bits() {
        let (mut t, mut rng, m) = table();
        let a = t
            .register(
                &mut rng,
                Pd(1),
                Arc::new(m.clone()),
                0x1000,
                AccessFlags::LOCAL_WRITE,
            )
            .unwrap();
        assert_eq!(a.rkey, 0, "no remote access, no rkey (rxe)");
        assert!(t.deregister(a.lkey));
        assert!(!t.deregister(a.lkey));
        let b = t
            .register(
                &mut rng,
                Pd(1),
                Arc::new(m),
                0x1000,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
            )
            .unwrap();
        assert_eq!(b.lkey, b.rkey);
        assert_eq!(b.lkey & 0xFFF, a.lkey & 0xFFF, "slot reused");
        assert_eq!((b.lkey >> 12) & 0xFFF, 1, "generation bumped");
        assert!(t.get(a.lkey).is_none(), "stale key never resolves");
    }

    #[test]
    fn generation_exhaustion_retires_the_slot() {
        let (mut t, mut rng, m) = table();
        let mut last = 0;
        for _ in 0..(1 << GEN_BITS) {
            let k = t
                .register(&mut rng, Pd(1), Arc::new(m.clone()), 0, AccessFlags::EMPTY)
                .unwrap();
            assert_eq!(k.lkey & 0xFFF, 0);
            last = k.lkey;
            t.deregister(k.lkey);
        }
        let k = t
            .register(&mut rng, Pd(1), Arc::new(m), 0, AccessFlags::EMPTY)
            .unwrap();
        assert_ne!(k.lkey & 0xFFF, last & 0xFFF, "retired slot not reused");
    }

    #[test]
    fn bounds_pd_and_access_are_checked() {
        let (mut t, mut rng, m) = table();
        let k = t
            .register(
                &mut rng,
                Pd(1),
                Arc::new(m),
                0x1000,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        assert!(t
            .check(k.rkey, Pd(1), AccessFlags::REMOTE_WRITE, 0x1000, 100)
            .is_ok());
        assert_eq!(
            t.check(k.rkey, Pd(1), AccessFlags::REMOTE_WRITE, 0x1000, 101)
                .err(),
            Some(MemErr::Fault)
        );
        assert_eq!(
            t.check(k.rkey, Pd(1), AccessFlags::REMOTE_WRITE, 0xFFF, 1)
                .err(),
            Some(MemErr::Fault)
        );
        assert_eq!(
            t.check(k.rkey, Pd(1), AccessFlags::REMOTE_WRITE, u64::MAX, 2)
                .err(),
            Some(MemErr::Fault)
        );
        assert_eq!(
            t.check(k.rkey, Pd(2), AccessFlags::REMOTE_WRITE, 0x1000, 1)
                .err(),
            Some(MemErr::Fault)
        );
        assert_eq!(
            t.check(k.rkey, Pd(1), AccessFlags::REMOTE_READ, 0x1000, 1)
                .err(),
            Some(MemErr::Fault)
        );
        // scatter over two SGEs, and running out of room
        let sg = [
            Sge {
                addr: 0x1000,
                length: 3,
                lkey: k.lkey,
            },
            Sge {
                addr: 0x1010,
                length: 3,
                lkey: k.lkey,
            },
        ];
        assert_eq!(t.scatter(Pd(1), &sg, 1, b"abcd"), Ok(()));
        let mut out = [0u8; 4];
        t.gather(Pd(1), &sg, 1, &mut out).unwrap();
        assert_eq!(&out, b"abcd");
        assert_eq!(t.scatter(Pd(1), &sg, 3, b"abcd"), Err(MemErr::NoSpace));
    }
}
