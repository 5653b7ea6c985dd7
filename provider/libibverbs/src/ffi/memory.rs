//! [`MrMemory`]: the engine's only way to touch application memory registered with
//! `ibv_reg_mr`.
//!
//! # Safety
//! `ibv_reg_mr(pd, addr, length, …)` is the program's promise that `[addr, addr + length)` is
//! mapped and stays mapped until `ibv_dereg_mr` returns. The engine holds an `MrMemory` only
//! between its `reg_mr` and `dereg_mr` calls (the C layer calls `dereg_mr` on the backend before
//! returning from `ibv_dereg_mr`), and every access below is bounds-checked against `length`
//! first, so every pointer we form is inside that mapping.
//!
//! The program may read or write the same bytes concurrently (that is how RDMA is used: the NIC
//! DMAs while the CPU polls). We never create Rust references to application memory — only raw
//! `copy_nonoverlapping` and atomics on raw pointers — so the Rust side never assumes the bytes are
//! unaliased; the values seen under a concurrent program write are unspecified, as with DMA.
//! Atomics require 8-byte alignment (checked; IBA requires it for atomic operations too).

use crate::backend::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Largest piece `read`/`write` copy at once (see `read`).
const COPY_PIECE: usize = 2048;

/// Serializes the engine's atomics on 8-byte words that are not 8-byte aligned in the
/// program's address space (possible when an MR's iova and address differ in their low bits).
/// They are atomic with respect to other remote atomics, not to the program's own CPU stores.
static UNALIGNED_ATOMICS: Mutex<()> = Mutex::new(());

/// A registered range of application memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrMemory {
    addr: usize,
    len: usize,
}

impl MrMemory {
    /// Only the C layer creates these, from `ibv_reg_mr*` arguments.
    pub(crate) fn new(addr: usize, len: usize) -> Result<MrMemory, Errno> {
        if addr.checked_add(len).is_none() || (addr == 0 && len != 0) {
            return Err(Errno::EINVAL);
        }
        Ok(MrMemory { addr, len })
    }

    /// The program's virtual address of the first byte.
    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, n: usize) -> Result<*mut u8, Errno> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok((self.addr + offset) as *mut u8),
            _ => Err(Errno::EFAULT),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the region.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), Errno> {
        let p = self.check(offset, dst.len())?;
        // In ≤ 2 KiB pieces: glibc's `rep movsb` path is 20-30x slower when source and
        // destination are a few bytes apart modulo 4096 (perf-facts.md), which packet payloads
        // at arbitrary offsets hit; small pieces take the vector path.
        for (i, d) in dst.chunks_mut(COPY_PIECE).enumerate() {
            // SAFETY: in bounds of the registered mapping (module docs); `dst` is our own buffer
            // and cannot overlap application memory we were handed (it is a Rust-owned slice).
            unsafe {
                core::ptr::copy_nonoverlapping(p.add(i * COPY_PIECE), d.as_mut_ptr(), d.len())
            };
        }
        Ok(())
    }

    /// Copies `src` into the region at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), Errno> {
        let p = self.check(offset, src.len())?;
        for (i, s) in src.chunks(COPY_PIECE).enumerate() {
            // SAFETY: as in `read`.
            unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), p.add(i * COPY_PIECE), s.len()) };
        }
        Ok(())
    }

    fn atomic(&self, offset: usize) -> Result<&AtomicU64, Errno> {
        let p = self.check(offset, 8)?;
        if (p as usize) & 7 != 0 {
            return Err(Errno::EINVAL);
        }
        // SAFETY: in bounds, 8-byte aligned, mapped for the MR's lifetime; `AtomicU64` has the
        // layout of `u64` and atomic access is sound under concurrent access by the program.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }

    /// IBA compare-and-swap on the 8 bytes at `offset` (host byte order as stored by the
    /// program); returns the original value.
    pub fn compare_swap(&self, offset: usize, compare: u64, swap: u64) -> Result<u64, Errno> {
        let a = self.atomic(offset)?;
        Ok(
            match a.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(v) | Err(v) => v,
            },
        )
    }

    /// IBA fetch-and-add; returns the original value.
    pub fn fetch_add(&self, offset: usize, add: u64) -> Result<u64, Errno> {
        Ok(self.atomic(offset)?.fetch_add(add, Ordering::SeqCst))
    }
}

/// The engine reaches registered application memory through this impl only; `roce_emu` checks
/// keys, PD, access and bounds before every call and guarantees `off + len <= len()`.
impl roce_emu::MemoryRegion for MrMemory {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        if MrMemory::read(self, off, dst).is_err() {
            dst.fill(0);
        }
    }
    fn write(&self, off: usize, src: &[u8]) {
        let _ = MrMemory::write(self, off, src);
    }
    fn atomic_cmp_swap(&self, off: usize, cmp: u64, swap: u64) -> u64 {
        match self.compare_swap(off, cmp, swap) {
            Ok(v) => v,
            Err(_) => {
                let _g = UNALIGNED_ATOMICS.lock().unwrap_or_else(|e| e.into_inner());
                let mut b = [0u8; 8];
                let _ = MrMemory::read(self, off, &mut b);
                let old = u64::from_ne_bytes(b);
                if old == cmp {
                    let _ = MrMemory::write(self, off, &swap.to_ne_bytes());
                }
                old
            }
        }
    }
    fn atomic_fetch_add(&self, off: usize, add: u64) -> u64 {
        match self.fetch_add(off, add) {
            Ok(v) => v,
            Err(_) => {
                let _g = UNALIGNED_ATOMICS.lock().unwrap_or_else(|e| e.into_inner());
                let mut b = [0u8; 8];
                let _ = MrMemory::read(self, off, &mut b);
                let old = u64::from_ne_bytes(b);
                let _ = MrMemory::write(self, off, &old.wrapping_add(add).to_ne_bytes());
                old
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_atomics() {
        let mut buf = vec![0u64; 4];
        let m = MrMemory::new(buf.as_mut_ptr() as usize, 32).unwrap();
        m.write(8, &7u64.to_ne_bytes()).unwrap();
        assert_eq!(m.fetch_add(8, 5).unwrap(), 7);
        assert_eq!(m.compare_swap(8, 12, 1).unwrap(), 12);
        let mut out = [0u8; 8];
        m.read(8, &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out), 1);
        assert_eq!(m.write(30, &[0; 4]), Err(Errno::EFAULT));
        assert_eq!(m.read(usize::MAX, &mut out), Err(Errno::EFAULT));
        assert_eq!(m.fetch_add(4, 1), Err(Errno::EINVAL));
        assert_eq!(MrMemory::new(0, 8), Err(Errno::EINVAL));
        drop(buf);
    }
}
