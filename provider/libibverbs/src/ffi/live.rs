//! The registry of live objects: the address of every object we handed to the program (context,
//! PD, MR, CQ, QP, SRQ, AH, completion channel, device list) with its type tag, from creation
//! until its destroy verb frees it.
//!
//! A verb looks a pointer up here *before* dereferencing it, so a destroyed object passed back by
//! the program (a double destroy, a verb on a freed PD, a second `ibv_free_device_list`) is
//! answered with `EINVAL` without reading freed memory — the previous scheme read a magic number
//! out of the freed allocation, which valgrind rightly reported as an invalid read. It also keeps
//! every object the program has not destroyed reachable, as a real device driver's handle table
//! does. Best effort as any handle scheme: an address reused for a new object of the same type
//! passes.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLock;

/// Hashes an address: heap addresses are 16-byte aligned, so fold the low bits away and mix.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Map = HashMap<usize, u32, BuildHasherDefault<AddrHasher>>;

static LIVE: RwLock<Option<Map>> = RwLock::new(None);

/// Records `addr` as a live object of type `tag`.
pub fn register(addr: usize, tag: u32) {
    let mut g = LIVE.write().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(Map::default).insert(addr, tag);
}

/// Forgets `addr` if it is a live object of type `tag`; false if it is not (then nothing changes).
pub fn unregister(addr: usize, tag: u32) -> bool {
    let mut g = LIVE.write().unwrap_or_else(|e| e.into_inner());
    match g.as_mut() {
        Some(m) if m.get(&addr) == Some(&tag) => {
            m.remove(&addr);
            true
        }
        _ => false,
    }
}

/// Is `addr` a live object of type `tag`?
pub fn is_live(addr: usize, tag: u32) -> bool {
    let g = LIVE.read().unwrap_or_else(|e| e.into_inner());
    g.as_ref().is_some_and(|m| m.get(&addr) == Some(&tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_lookup_unregister() {
        let tag = u32::from_be_bytes(*b"tST_");
        let a = 0x7f00_dead_bee0usize;
        assert!(!is_live(a, tag));
        register(a, tag);
        assert!(is_live(a, tag));
        assert!(!is_live(a, tag ^ 1), "another type at the same address");
        assert!(!unregister(a, tag ^ 1));
        assert!(unregister(a, tag));
        assert!(!is_live(a, tag));
        assert!(!unregister(a, tag), "second unregister");
    }
}
