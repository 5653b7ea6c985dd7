//! Memory windows (IBA 10.6.7, rxe `rxe_mw.c`): type 1 windows bound by `ibv_bind_mw` and type
//! 2 (rxe's 2B) windows bound by a BIND_MW work request to the QP that posted it; the bind
//! checks, the lookup of a window's rkey for a remote access, and invalidation.
//!
//! Keys are `rand(8) << 24 | slot(12) << 12 | 0xF << 8 | key(8)`: the low byte is the consumer's
//! key (type 1: incremented by `ibv_bind_mw`, type 2: chosen at each bind, as `ibv_inc_rkey`
//! and rxe do), the random byte is drawn at each allocation, and bits 8..11 all set mark a
//! window's key: no memory region's key has them (MR slot indexes stay below 0xF00, `mem.rs`),
//! so a key names a region or a window, never both.
use crate::mem::{MemErr, MrEntry, MrTable};
use crate::verbs::{AccessFlags, MwBind, MwType};
use crate::Pd;
use rand::Rng;

const SLOTS: usize = 1 << 12;
const MARK: u32 = 0xF << 8;

/// True when `key` is a memory window's (bits 8..11 set).
#[inline]
pub(crate) fn is_mw_key(key: u32) -> bool {
    key & MARK == MARK
}

fn slot_of(key: u32) -> usize {
    ((key >> 12) & 0xFFF) as usize
}

/// rxe `enum rxe_mw_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MwState {
    /// Type 2, not bound (after allocation or invalidation).
    Free,
    /// Bound (a type 1 window is "valid" from allocation on, with length 0).
    Valid,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct MwEntry {
    pd: Pd,
    ty: MwType,
    state: MwState,
    rkey: u32,
    /// The region the window is bound to (its lkey), when bound with a length.
    mr: Option<u32>,
    /// Type 2: the QP it is bound to; `None` once that QP is destroyed (no access matches).
    qpn: Option<u32>,
    addr: u64,
    length: u64,
    access: AccessFlags,
}

/// Why a bind failed (every cause completes the WQE with `IBV_WC_MW_BIND_ERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BindErr;

/// The device's windows.
#[derive(Default)]
pub(crate) struct MwTable {
    slots: Vec<Option<MwEntry>>,
    /// Free slots, oldest first: a slot is reused as late as possible.
    free: std::collections::VecDeque<u16>,
    live: usize,
}

/// Access flags a window may grant (rxe `RXE_ACCESS_SUPPORTED_MW` without ZERO_BASED, which
/// rdma-core's rxe provider refuses for type 1 and this device does not implement).
const MW_ACCESS: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0
        | AccessFlags::MW_BIND.0,
);

impl MwTable {
    pub fn live(&self) -> usize {
        self.live
    }

    /// `ibv_alloc_mw`: a type 1 window is valid (bound to nothing), a type 2 window free.
    pub fn alloc(&mut self, rng: &mut impl Rng, pd: Pd, ty: MwType) -> Option<u32> {
        let slot = match self.free.pop_front() {
            Some(s) => s as usize,
            None if self.slots.len() < SLOTS => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => return None,
        };
        let rkey =
            (rng.gen::<u8>() as u32) << 24 | (slot as u32) << 12 | MARK | rng.gen::<u8>() as u32;
        self.slots[slot] = Some(MwEntry {
            pd,
            ty,
            state: if ty == MwType::Type2 {
                MwState::Free
            } else {
                MwState::Valid
            },
            rkey,
            mr: None,
            qpn: None,
            addr: 0,
            length: 0,
            access: AccessFlags::EMPTY,
        });
        self.live += 1;
        Some(rkey)
    }

    fn entry(&self, key: u32) -> Option<&MwEntry> {
        self.slots.get(slot_of(key))?.as_ref()
    }

    fn entry_mut(&mut self, key: u32) -> Option<&mut MwEntry> {
        self.slots.get_mut(slot_of(key))?.as_mut()
    }

    /// `ibv_dealloc_mw` of the window whose rkey is (or was, before binds changed its key
    /// byte) `rkey`: always succeeds for a live window, bound or not (rxe).
    pub fn dealloc(&mut self, rkey: u32) -> bool {
        let s = slot_of(rkey);
        match self.slots.get(s) {
            Some(Some(e)) if is_mw_key(rkey) && e.rkey >> 8 == rkey >> 8 => {}
            _ => return false,
        }
        self.slots[s] = None;
        self.free.push_back(s as u16);
        self.live -= 1;
        true
    }

    /// The window's current rkey (its key byte changes with each bind).
    pub fn rkey_of(&self, rkey: u32) -> Option<u32> {
        self.entry(rkey)
            .filter(|e| e.rkey >> 8 == rkey >> 8)
            .map(|e| e.rkey)
    }

    pub fn pd_in_use(&self, pd: Pd) -> bool {
        self.slots.iter().flatten().any(|e| e.pd == pd)
    }

    /// True while a window is bound to the region with lkey `lkey` (IBA 10.6.7.2.6: it cannot
    /// be deregistered then; rxe `num_mw`).
    pub fn mr_bound(&self, lkey: u32) -> bool {
        self.slots.iter().flatten().any(|e| e.mr == Some(lkey))
    }

    /// A destroyed QP's type 2 windows: no access matches them any more (they can still be
    /// invalidated and deallocated).
    pub fn qp_destroyed(&mut self, qpn: u32) {
        for e in self.slots.iter_mut().flatten() {
            if e.qpn == Some(qpn) {
                e.qpn = None;
            }
        }
    }

    /// rxe `rxe_bind_mw` + `rxe_check_bind_mw` for a BIND_MW WQE posted on QP `qpn` in `pd`.
    pub fn bind(&mut self, mrs: &MrTable, pd: Pd, qpn: u32, b: &MwBind) -> Result<(), BindErr> {
        let mr = if b.length > 0 {
            Some(mrs.get(b.mr_lkey).ok_or(BindErr)?)
        } else {
            None
        };
        let e = self.entry_mut(b.mw_rkey).ok_or(BindErr)?;
        if e.rkey != b.mw_rkey || !is_mw_key(b.mw_rkey) {
            return Err(BindErr);
        }
        if b.access.0 & !MW_ACCESS.0 != 0 {
            return Err(BindErr);
        }
        match e.ty {
            // o10-36.2.2 (a zero-based access is outside MW_ACCESS already)
            MwType::Type1 if e.state != MwState::Valid => return Err(BindErr),
            // o10-37.2.30, C10-72, o10-37.2.40
            MwType::Type2 if e.state != MwState::Free || e.pd != pd || mr.is_none() => {
                return Err(BindErr)
            }
            _ => {}
        }
        if let Some(mr) = mr {
            check_mr(mr, b)?;
            // the region is in the window's PD (libibverbs' ibv_bind_mw refuses another with
            // EPERM before the provider sees it; C10-72 checked the QP's PD for type 2 above)
            if mr.pd != e.pd {
                return Err(BindErr);
            }
        }
        e.rkey = (e.rkey & !0xFF) | (b.rkey & 0xFF);
        e.access = b.access;
        e.state = MwState::Valid;
        e.addr = b.addr;
        e.length = b.length;
        e.mr = (b.length > 0).then_some(b.mr_lkey);
        if e.ty == MwType::Type2 {
            e.qpn = Some(qpn);
        }
        Ok(())
    }

    /// rxe `rxe_invalidate_mw`, from LOCAL_INV (`remote` false) or a SEND with invalidate
    /// received on QP `qpn` (`remote`): the window must be a bound type 2 window with exactly
    /// this rkey, in the QP's PD, and for SEND with invalidate bound to that QP (emu README,
    /// deviations). It becomes free.
    pub fn invalidate(&mut self, rkey: u32, pd: Pd, qpn: u32, remote: bool) -> bool {
        let Some(e) = self.entry_mut(rkey) else {
            return false;
        };
        let ok = is_mw_key(rkey)
            && e.rkey == rkey
            && e.ty == MwType::Type2
            && e.state == MwState::Valid
            && e.pd == pd
            && (!remote || e.qpn == Some(qpn));
        if ok {
            e.state = MwState::Free;
            e.mr = None;
            e.qpn = None;
            e.addr = 0;
            e.length = 0;
            e.access = AccessFlags::EMPTY;
        }
        ok
    }

    /// rxe `rxe_lookup_mw` + `mr_check_range` for a remote access through window `rkey` on QP
    /// `qpn` in `pd`: the region and the offset in it of `[va, va + len)`, which must lie inside
    /// the window (rxe checks only the region's bounds: emu README, deviations).
    #[allow(clippy::too_many_arguments)]
    pub fn resolve<'m>(
        &self,
        mrs: &'m MrTable,
        rkey: u32,
        pd: Pd,
        qpn: u32,
        access: AccessFlags,
        va: u64,
        len: u64,
    ) -> Result<(&'m MrEntry, usize), MemErr> {
        let e = self.entry(rkey).ok_or(MemErr::Fault)?;
        let usable = e.rkey == rkey
            && e.pd == pd
            && e.state == MwState::Valid
            && (e.ty == MwType::Type1 || e.qpn == Some(qpn))
            && e.length > 0
            && e.access.contains(access);
        if !usable {
            return Err(MemErr::Fault);
        }
        let end = va.checked_add(len).ok_or(MemErr::Fault)?;
        if va < e.addr || end > e.addr + e.length {
            return Err(MemErr::Fault);
        }
        let mr = mrs.get(e.mr.ok_or(MemErr::Fault)?).ok_or(MemErr::Fault)?;
        let off = va.checked_sub(mr.iova).ok_or(MemErr::Fault)?;
        if off + len > mr.len {
            return Err(MemErr::Fault);
        }
        Ok((mr, off as usize))
    }

    /// Why [`MwTable::resolve`] refuses (diagnostics only; `None` if it does not).
    pub fn classify(
        &self,
        rkey: u32,
        pd: Pd,
        qpn: u32,
        access: AccessFlags,
        va: u64,
        len: u64,
    ) -> Option<crate::diag::KeyFault> {
        use crate::diag::KeyFault;
        let Some(e) = self.entry(rkey).filter(|e| e.rkey >> 8 == rkey >> 8) else {
            return Some(KeyFault::Unknown);
        };
        if e.rkey != rkey || e.state != MwState::Valid || e.length == 0 {
            return Some(KeyFault::StaleWindow);
        }
        if e.pd != pd {
            return Some(KeyFault::WrongPd);
        }
        if e.ty == MwType::Type2 && e.qpn != Some(qpn) {
            return Some(KeyFault::WindowOfAnotherQp);
        }
        if !e.access.contains(access) {
            return Some(KeyFault::NoPermission);
        }
        let inside = va >= e.addr
            && va
                .checked_add(len)
                .is_some_and(|end| end <= e.addr + e.length);
        (!inside).then_some(KeyFault::OutOfBounds)
    }
}

/// rxe `rxe_check_bind_mw`'s checks of the region (C10-73, C10-74, C10-75).
fn check_mr(mr: &MrEntry, b: &MwBind) -> Result<(), BindErr> {
    if mr.access.contains(AccessFlags::ZERO_BASED) || !mr.access.contains(AccessFlags::MW_BIND) {
        return Err(BindErr);
    }
    if b.access
        .intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !mr.access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(BindErr);
    }
    let end = b.addr.checked_add(b.length).ok_or(BindErr)?;
    if b.addr < mr.iova || end > mr.iova + mr.len {
        return Err(BindErr);
    }
    Ok(())
}
