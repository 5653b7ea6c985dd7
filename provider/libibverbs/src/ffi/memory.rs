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
        // SAFETY: in bounds of the registered mapping (module docs); `dst` is our own buffer and
        // cannot overlap application memory we were handed (it is a Rust-owned slice).
        unsafe { core::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copies `src` into the region at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), Errno> {
        let p = self.check(offset, src.len())?;
        // SAFETY: as in `read`.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
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
        Ok(match a.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        })
    }

    /// IBA fetch-and-add; returns the original value.
    pub fn fetch_add(&self, offset: usize, add: u64) -> Result<u64, Errno> {
        Ok(self.atomic(offset)?.fetch_add(add, Ordering::SeqCst))
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
