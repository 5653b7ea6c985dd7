//! Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `IBV_WR_BIND_MW`, `IBV_WR_LOCAL_INV`): a
//! window gives a peer remote access to part of a region registered with
//! `AccessFlags::MW_BIND`, with its own rkey, access flags and bounds, and can be taken back
//! (type 2: [`QueuePair::post_local_invalidate`], or the peer's SEND with invalidate).
//!
//! [`QueuePair::post_local_invalidate`]: super::QueuePair::post_local_invalidate
use super::error::{Error, Result};
use super::pd::PdInner;
use roce_emu::MwType;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A memory window (`struct ibv_mw`). Deallocated when dropped (bound or not, as rxe allows).
pub struct MemoryWindow {
    pub(crate) pd: Arc<PdInner>,
    ty: MwType,
    /// The current rkey: each bind posted gives it the next key byte (`ibv_inc_rkey`).
    rkey: AtomicU32,
}

impl MemoryWindow {
    pub(crate) fn alloc(pd: &Arc<PdInner>, ty: MwType) -> Result<MemoryWindow> {
        let rkey = pd
            .ctx
            .nic(|n| n.alloc_mw(pd.pd, ty))
            .map_err(Error::AllocMw)?;
        Ok(MemoryWindow {
            pd: pd.clone(),
            ty,
            rkey: AtomicU32::new(rkey),
        })
    }

    /// Type 1 or type 2.
    pub fn mw_type(&self) -> MwType {
        self.ty
    }

    /// The rkey of the last bind posted (before any: the rkey it was allocated with).
    pub fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }

    /// The next bind's rkey: the key byte incremented (`ibv_inc_rkey`).
    pub(crate) fn next_rkey(&self) -> u32 {
        let k = self.rkey();
        (k & !0xFF) | (k.wrapping_add(1) & 0xFF)
    }

    pub(crate) fn set_rkey(&self, rkey: u32) {
        self.rkey.store(rkey, Ordering::Release)
    }
}

impl Drop for MemoryWindow {
    fn drop(&mut self) {
        let rkey = self.rkey();
        let _ = self.pd.ctx.nic(|n| n.dealloc_mw(rkey));
    }
}

impl std::fmt::Debug for MemoryWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWindow")
            .field("type", &self.ty)
            .field("rkey", &format_args!("{:#x}", self.rkey()))
            .finish()
    }
}
