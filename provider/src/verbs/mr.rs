//! Memory regions over Rust-owned memory.
//!
//! A [`MemoryRegion`] owns its buffer through an `Arc` that the device's MR table shares, so the
//! bytes stay allocated for as long as the NIC can reach them: dropping the region deregisters
//! it first (its keys never work again) and the memory goes away only when the NIC has let go.
//! A work request that still names a dropped region's key fails with a protection or access
//! error completion; it never touches freed memory.
//!
//! The NIC reads and writes the buffer concurrently with the program, as DMA does. The safe
//! accessors ([`MemoryRegion::read_at`], [`MemoryRegion::write_at`], [`MemoryRegion::to_vec`],
//! the atomic [`MemoryRegion::load_u64`] / [`MemoryRegion::store_u64`]) copy with raw pointers
//! and never form Rust references to the shared bytes; what a copy sees while the NIC writes the
//! same bytes is unspecified (as with real hardware), so synchronise through completions.
#![allow(unsafe_code)] // memory, not syscalls: the buffer the NIC reaches (lib.rs docs)
use super::error::{Error, Result};
use super::pd::PdInner;
use roce_emu::AccessFlags;
use serde::{Deserialize, Serialize};
use std::alloc::Layout;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Alignment of buffers from [`super::ProtectionDomain::allocate`]: a cache line, so payload
/// copies start aligned (see the glibc misaligned-`memcpy` trap in the performance notes).
pub const ALLOC_ALIGN: usize = 64;

enum Owner {
    Vec { cap: usize },
    Aligned { layout: Layout },
    Empty,
}

/// A heap buffer the NIC and the program share (only raw-pointer access, see module docs).
pub(crate) struct DmaBuf {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
}

// SAFETY: the buffer is a plain heap allocation owned by this value; all access goes through raw
// pointer copies and atomics (module docs), never through references, so sharing it between
// threads cannot create aliasing `&mut`.
unsafe impl Send for DmaBuf {}
// SAFETY: as above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    pub(crate) fn from_vec(v: Vec<u8>) -> DmaBuf {
        let mut v = std::mem::ManuallyDrop::new(v);
        let (len, cap) = (v.len(), v.capacity());
        let ptr = NonNull::new(v.as_mut_ptr()).expect("Vec pointer is non-null");
        DmaBuf {
            ptr,
            len,
            owner: Owner::Vec { cap },
        }
    }

    pub(crate) fn zeroed(len: usize) -> DmaBuf {
        if len == 0 {
            return DmaBuf {
                ptr: NonNull::dangling(),
                len: 0,
                owner: Owner::Empty,
            };
        }
        let layout = Layout::from_size_align(len, ALLOC_ALIGN).expect("buffer size fits a Layout");
        // SAFETY: `layout` has a nonzero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        DmaBuf {
            ptr,
            len,
            owner: Owner::Aligned { layout },
        }
    }

    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    fn check(&self, off: usize, n: usize) -> *mut u8 {
        let end = off.checked_add(n).expect("offset overflow");
        assert!(
            end <= self.len,
            "range {off}..{end} outside the {}-byte region",
            self.len
        );
        // SAFETY: in bounds of the allocation (checked above).
        unsafe { self.ptr.as_ptr().add(off) }
    }

    fn atomic(&self, off: usize) -> &AtomicU64 {
        let p = self.check(off, 8);
        assert!(
            (p as usize).trailing_zeros() >= 3,
            "atomic access at an address that is not 8-byte aligned"
        );
        // SAFETY: in bounds, aligned, alive as long as `self`; every access to these bytes is
        // either atomic or a raw copy (never a reference), as with DMA.
        unsafe { AtomicU64::from_ptr(p.cast()) }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        match self.owner {
            // SAFETY: rebuilt from exactly the parts `from_vec` took apart.
            Owner::Vec { cap } => unsafe {
                drop(Vec::from_raw_parts(self.ptr.as_ptr(), self.len, cap))
            },
            // SAFETY: allocated in `zeroed` with this layout.
            Owner::Aligned { layout } => unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) },
            Owner::Empty => {}
        }
    }
}

/// Copies in pieces of at most 2 KiB: glibc's `rep movsb` path is 20-30x slower on this
/// project's CPUs when the destination sits a few bytes past the source modulo 4096, and short
/// copies take the vector path instead (see the performance notes).
///
/// # Safety
/// As `copy_nonoverlapping`.
unsafe fn chunked_copy(src: *const u8, dst: *mut u8, len: usize) {
    const CHUNK: usize = 2048;
    let mut off = 0;
    while off < len {
        let n = CHUNK.min(len - off);
        std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), n);
        off += n;
    }
}

impl roce_emu::MemoryRegion for DmaBuf {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        let p = self.check(off, dst.len());
        // SAFETY: `p..p+len` is inside the allocation; `dst` is a distinct Rust buffer.
        unsafe { chunked_copy(p, dst.as_mut_ptr(), dst.len()) }
    }
    fn write(&self, off: usize, src: &[u8]) {
        let p = self.check(off, src.len());
        // SAFETY: as in `read`.
        unsafe { chunked_copy(src.as_ptr(), p, src.len()) }
    }
    fn atomic_cmp_swap(&self, off: usize, cmp: u64, swap: u64) -> u64 {
        match self
            .atomic(off)
            .compare_exchange(cmp, swap, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(v) | Err(v) => v,
        }
    }
    fn atomic_fetch_add(&self, off: usize, add: u64) -> u64 {
        self.atomic(off).fetch_add(add, Ordering::AcqRel)
    }
}

/// A registered memory region that owns its buffer (`struct ibv_mr`).
///
/// ```
/// use roce_provider::verbs::{sim::SimFabric, AccessFlags, DeviceConfig};
/// let ctx = SimFabric::new(1, Default::default()).open(DeviceConfig::new("10.0.0.1".parse().unwrap()))?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.register(vec![7u8; 4096], AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)?;
/// assert_eq!(mr.len(), 4096);
/// assert_ne!(mr.rkey(), 0);
/// mr.write_at(0, b"hello");
/// assert_eq!(&mr.to_vec()[..6], b"hello\x07");
/// let sge = mr.slice(0..64); // what a work request names
/// assert_eq!(sge.len(), 64);
/// # Ok::<(), roce_provider::verbs::Error>(())
/// ```
pub struct MemoryRegion {
    pub(crate) pd: Arc<PdInner>,
    buf: Arc<DmaBuf>,
    mr: roce_emu::Mr,
    access: AccessFlags,
}

impl MemoryRegion {
    pub(crate) fn register(
        pd: &Arc<PdInner>,
        buf: DmaBuf,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        let buf = Arc::new(buf);
        let len = buf.len;
        let dynbuf: Arc<dyn roce_emu::MemoryRegion> = buf.clone();
        let mr = pd
            .ctx
            .nic(|n| n.reg_mr(pd.pd, dynbuf, buf.addr(), access))
            .map_err(|source| Error::RegisterMr { len, source })?;
        Ok(MemoryRegion {
            pd: pd.clone(),
            buf,
            mr,
            access,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len
    }
    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }
    /// Local key (work requests on this side name it through [`MemoryRegion::slice`]).
    pub fn lkey(&self) -> u32 {
        self.mr.lkey
    }
    /// Remote key (0 without remote access), for the peer's WRITE / READ / atomics.
    pub fn rkey(&self) -> u32 {
        self.mr.rkey
    }
    /// The region's address (iova): the buffer's virtual address, as with `ibv_reg_mr`.
    pub fn addr(&self) -> u64 {
        self.buf.addr()
    }
    /// The access flags it was registered with.
    pub fn access(&self) -> AccessFlags {
        self.access
    }

    fn bounds(&self, range: impl RangeBounds<usize>) -> Result<(usize, usize)> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len(),
        };
        if start > end || end > self.len() {
            return Err(Error::OutOfBounds {
                offset: start,
                end,
                len: self.len(),
            });
        }
        Ok((start, end - start))
    }

    /// A scatter/gather element over `range` of this region, for work requests.
    ///
    /// # Panics
    /// When `range` is outside the region (like slice indexing); see [`MemoryRegion::try_slice`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> LocalSlice<'_> {
        self.try_slice(range).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`MemoryRegion::slice`] returning an error instead of panicking.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Result<LocalSlice<'_>> {
        let (offset, len) = self.bounds(range)?;
        Ok(LocalSlice {
            mr: self,
            offset,
            len,
        })
    }

    /// What the peer needs to access `range` of this region remotely (send it out of band).
    pub fn remote_slice(&self, range: impl RangeBounds<usize>) -> RemoteSlice {
        let (offset, len) = self.bounds(range).unwrap_or_else(|e| panic!("{e}"));
        RemoteSlice {
            addr: self.addr() + offset as u64,
            rkey: self.rkey(),
            len: len as u64,
        }
    }

    /// The whole region, for the peer ([`MemoryRegion::remote_slice`] over `..`).
    pub fn remote(&self) -> RemoteSlice {
        self.remote_slice(..)
    }

    /// Copies `dst.len()` bytes at `offset` out of the region. Panics when out of bounds.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) {
        roce_emu::MemoryRegion::read(&*self.buf, offset, dst)
    }
    /// Copies `src` into the region at `offset`. Panics when out of bounds.
    pub fn write_at(&self, offset: usize, src: &[u8]) {
        roce_emu::MemoryRegion::write(&*self.buf, offset, src)
    }
    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.read_at(0, &mut v);
        v
    }
    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) {
        // SAFETY: the whole allocation; raw write, no reference formed.
        unsafe { std::ptr::write_bytes(self.buf.ptr.as_ptr(), byte, self.buf.len) }
    }
    /// Atomically loads the native-endian `u64` at `offset` (8-byte aligned), as the NIC's
    /// atomics see it.
    pub fn load_u64(&self, offset: usize) -> u64 {
        self.buf.atomic(offset).load(Ordering::Acquire)
    }
    /// Atomically stores a native-endian `u64` at `offset` (8-byte aligned).
    pub fn store_u64(&self, offset: usize, v: u64) {
        self.buf.atomic(offset).store(v, Ordering::Release)
    }

    /// The bytes as a slice, without copying.
    ///
    /// # Safety
    /// No work request or remote peer may write the region while the slice lives (no posted
    /// receive or READ into it, no peer WRITE/atomic with its rkey): the NIC writes without
    /// regard to Rust borrows.
    pub unsafe fn as_slice(&self) -> &[u8] {
        std::slice::from_raw_parts(self.buf.ptr.as_ptr(), self.buf.len)
    }

    /// The bytes as a mutable slice, without copying.
    ///
    /// # Safety
    /// As [`MemoryRegion::as_slice`], and additionally the NIC must not read the region while
    /// the slice lives (no posted SEND/WRITE from it, no peer READ).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        std::slice::from_raw_parts_mut(self.buf.ptr.as_ptr(), self.buf.len)
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let mr = self.mr;
        let _ = self.pd.ctx.nic(|n| n.dereg_mr(mr));
    }
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .field("lkey", &format_args!("{:#x}", self.lkey()))
            .field("rkey", &format_args!("{:#x}", self.rkey()))
            .finish()
    }
}

/// A range of a local [`MemoryRegion`] (`struct ibv_sge`), borrowed so the region outlives the
/// post that names it.
#[derive(Clone, Copy, Debug)]
pub struct LocalSlice<'a> {
    pub(crate) mr: &'a MemoryRegion,
    offset: usize,
    len: usize,
}

impl<'a> LocalSlice<'a> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Offset inside the region.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The region.
    pub fn region(&self) -> &'a MemoryRegion {
        self.mr
    }
    /// The `ibv_sge` it stands for.
    pub fn sge(&self) -> roce_emu::Sge {
        roce_emu::Sge {
            addr: self.mr.addr() + self.offset as u64,
            length: self.len as u32,
            lkey: self.mr.lkey(),
        }
    }
}

/// A range of a peer's memory region: address, rkey and length (exchange it out of band; it
/// serialises with serde).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSlice {
    /// Remote virtual address (iova).
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u64,
}

impl RemoteSlice {
    /// A sub-range. Panics when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<u64>) -> RemoteSlice {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        assert!(
            start <= end && end <= self.len,
            "range {start}..{end} outside the {}-byte remote slice",
            self.len
        );
        RemoteSlice {
            addr: self.addr + start,
            rkey: self.rkey,
            len: end - start,
        }
    }
}
