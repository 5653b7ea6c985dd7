//! Guard-byte memory: the harness buffers MRs register parts of, and the check that no byte
//! changed that may not have.

use super::*;

pub(super) const NBUF: usize = 3;
pub(super) const BUF: usize = 4096;
pub(super) const GUARD: usize = 64;
pub(super) const TOTAL: usize = GUARD + BUF + GUARD;

pub(super) fn buf_layout() -> Layout {
    Layout::from_size_align(TOTAL, 64).expect("layout")
}

/// Harness memory that MRs register parts of: 64 guard bytes, 4096 bytes, 64 guard bytes.
pub(super) struct Buf {
    pub(super) base: *mut u8,
    pub(super) orig: Vec<u8>,
    /// Interior bytes that were inside an MR with a write permission.
    pub(super) writable: Vec<bool>,
    /// Interior bytes that an accepted WR addressed for writing (a receive or READ / atomic
    /// SGE through its lkey, a WRITE / atomic target through its rkey).
    pub(super) addressed: Vec<bool>,
}

impl Buf {
    pub(super) fn new(k: usize) -> Buf {
        let base = c::alloc(buf_layout());
        assert!(!base.is_null(), "out of memory");
        let orig: Vec<u8> = (0..TOTAL)
            .map(|i| (i as u8).wrapping_mul(7) ^ (0x5A + 13 * k as u8))
            .collect();
        c::fill(base, &orig);
        Buf {
            base,
            orig,
            writable: vec![false; BUF],
            addressed: vec![false; BUF],
        }
    }
    pub(super) fn interior(&self) -> usize {
        self.base as usize + GUARD
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // After a violation the library may still hold MRs on it: leak it then.
        if !std::thread::panicking() {
            c::free(self.base, buf_layout());
        }
    }
}

impl H {
    pub(super) fn check_memory(&self) {
        for (k, b) in self.bufs.iter().enumerate() {
            let now = c::bytes(b.base, TOTAL);
            if now == &b.orig[..] {
                continue;
            }
            for (i, (n, o)) in now.iter().zip(&b.orig).enumerate() {
                if n == o {
                    continue;
                }
                if !(GUARD..GUARD + BUF).contains(&i) {
                    fail!(
                        self,
                        "write outside the registered buffers: buffer {k} guard byte {i}"
                    );
                }
                if !b.writable[i - GUARD] {
                    fail!(
                        self,
                        "write to buffer {k} offset {} that no writable MR ever covered",
                        i - GUARD
                    );
                }
                if !b.addressed[i - GUARD] {
                    fail!(
                        self,
                        "write to buffer {k} offset {} that no accepted WR addressed",
                        i - GUARD
                    );
                }
            }
        }
    }
}
