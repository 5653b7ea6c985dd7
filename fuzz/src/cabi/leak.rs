//! Leak accounting: a counting global allocator ([`CountingAlloc`]) and open file descriptors.

use super::*;

thread_local! {
    /// (live allocations, live bytes) made by this thread.
    static HEAP: Cell<(i64, i64)> = const { Cell::new((0, 0)) };
}

pub(super) fn bump(n: i64, bytes: i64) {
    let _ = HEAP.try_with(|c| {
        let (a, b) = c.get();
        c.set((a + n, b + bytes));
    });
}

/// A global allocator that counts each thread's live allocations (for the leak check of
/// [`run`]). The `cabi` fuzz target and the tests that run it install it; without it only file
/// descriptors are checked.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the same arguments; the bookkeeping touches a
// const-initialised thread-local `Cell` only (no allocation, no destructor).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            bump(1, l.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            bump(1, l.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) };
        bump(-1, -(l.size() as i64));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            bump(0, new as i64 - l.size() as i64);
        }
        q
    }
}

pub(super) fn heap() -> (i64, i64) {
    HEAP.try_with(|c| c.get()).unwrap_or((0, 0))
}

/// Whether [`CountingAlloc`] is the global allocator.
pub(super) fn counting() -> bool {
    let before = heap();
    let b = std::hint::black_box(Box::new(0u64));
    let after = heap();
    drop(b);
    after.0 == before.0 + 1
}

pub(super) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}
