//! The verbs objects besides QPs: protection domains, memory regions, completion queues
//! (including `ibv_poll_cq`), shared receive queues and address handles, with rxe's limits and
//! busy rules.
use super::Nic;
use crate::mem::{MemoryRegion, Mr};
use crate::queue::{CqState, RecvQueue, SrqState};
use crate::verbs::*;
use crate::{Ah, Cq, Error, Pd, Result, Srq};
use std::sync::Arc;

impl Nic {
    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> Result<Pd> {
        if self.pds.len() >= self.cfg.device_attr.max_pd as usize {
            return Err(Error::NoMem);
        }
        self.pds.insert(()).map(Pd).ok_or(Error::NoMem)
    }

    /// `ibv_dealloc_pd`: EBUSY while anything uses it.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<()> {
        self.pds.get(pd.0).ok_or(Error::NotFound)?;
        let used = self.mrs.pd_in_use(pd)
            || self.sh.mws.pd_in_use(pd)
            || self.qps.values().any(|q| q.pd == pd)
            || self.sh.ahs.iter().any(|(_, a)| a.0 == pd)
            || self.sh.srqs.iter().any(|(_, s)| s.pd == pd);
        if used {
            return Err(Error::Busy);
        }
        self.pds.remove(pd.0);
        Ok(())
    }

    /// `ibv_reg_mr_iova2`: registers `mem` at address `iova`.
    pub fn reg_mr(
        &mut self,
        pd: Pd,
        mem: Arc<dyn MemoryRegion>,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        self.pds.get(pd.0).ok_or(Error::Invalid)?;
        // IBA: remote write/atomic need local write
        if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(Error::Invalid);
        }
        // rxe refuses IBV_ACCESS_FLUSH_PERSISTENT on every page that is not persistent memory
        // (`is_pmem_page`, EINVAL); this device's regions are ordinary memory
        if access.contains(AccessFlags::FLUSH_PERSISTENT) {
            return Err(Error::Invalid);
        }
        if iova.checked_add(mem.len() as u64).is_none() {
            return Err(Error::Invalid);
        }
        if self.mrs.live() >= self.cfg.device_attr.max_mr as usize {
            return Err(Error::NoMem);
        }
        self.mrs
            .register(&mut self.rng, pd, mem, iova, access)
            .ok_or(Error::NoMem)
    }

    /// `ibv_dereg_mr`: the keys never work again. [`Error::Invalid`] while a memory window is
    /// bound to the region (IBA 10.6.7.2.6, rxe's `num_mw` check).
    pub fn dereg_mr(&mut self, mr: Mr) -> Result<()> {
        if self.mrs.get(mr.lkey).is_some() && self.sh.mws.mr_bound(mr.lkey) {
            return Err(Error::Invalid);
        }
        if self.mrs.deregister(mr.lkey) {
            Ok(())
        } else {
            Err(Error::NotFound)
        }
    }

    /// `ibv_alloc_mw`: a window of `ty` in `pd`; returns its rkey (the low byte, the key, is
    /// random; a type 1 window is valid and bound to nothing, a type 2 window free).
    pub fn alloc_mw(&mut self, pd: Pd, ty: MwType) -> Result<u32> {
        self.pds.get(pd.0).ok_or(Error::Invalid)?;
        if self.sh.mws.live() >= self.cfg.device_attr.max_mw as usize {
            return Err(Error::NoMem);
        }
        self.sh.mws.alloc(&mut self.rng, pd, ty).ok_or(Error::NoMem)
    }

    /// `ibv_dealloc_mw` of the window `rkey` names (its key byte may be out of date): bound or
    /// not, it goes, and its rkey never works again (rxe).
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<()> {
        if self.sh.mws.dealloc(rkey) {
            Ok(())
        } else {
            Err(Error::NotFound)
        }
    }

    /// The current rkey of the window `rkey` names (a bind changes its key byte).
    pub fn mw_rkey(&self, rkey: u32) -> Option<u32> {
        self.sh.mws.rkey_of(rkey)
    }

    /// `ibv_create_cq`: 1 to `max_cqe` entries asked for (else [`Error::Invalid`]); the CQ
    /// holds [`Nic::cq_depth`] of them, as rxe's.
    pub fn create_cq(&mut self, cqe: u32) -> Result<Cq> {
        if cqe == 0
            || cqe > self.cfg.device_attr.max_cqe
            || self.sh.cqs.len() >= self.cfg.device_attr.max_cq as usize
        {
            return Err(Error::Invalid);
        }
        self.sh
            .cqs
            .insert(CqState::new(rxe_queue_depth(cqe)))
            .map(Cq)
            .ok_or(Error::NoMem)
    }

    /// The entries a CQ asked for `cqe` holds, as rxe's queue rounds it (`rxe_queue_init`): up
    /// to one less than a power of two (1 → 1, 4 → 7, 100 → 127). What `ibv_create_cq` and
    /// `ibv_resize_cq` report in `cq->cqe`.
    pub fn cq_depth(cqe: u32) -> u32 {
        rxe_queue_depth(cqe)
    }

    /// `ibv_resize_cq`, as rxe's `rxe_resize_cq`: `cqe` is checked as at creation (1 to
    /// `max_cqe`, else [`Error::Invalid`]) and must be at least the number of completions
    /// queued now (else [`Error::Invalid`]: rxe's `rxe_cq_chk_attr`); the new depth is rounded
    /// as rxe's queue rounds it, up to one less than a power of two (`rxe_queue_init`), and
    /// returned (the program's `cq->cqe`). Queued completions stay, in order; the notification
    /// state (armed, solicited only) and the overflow already reported are not touched.
    pub fn resize_cq(&mut self, cq: Cq, cqe: u32) -> Result<u32> {
        let max = self.cfg.device_attr.max_cqe;
        let c = self.sh.cqs.get_mut(cq.0).ok_or(Error::NotFound)?;
        if cqe == 0 || cqe > max || (cqe as usize) < c.q.len() {
            return Err(Error::Invalid);
        }
        let depth = rxe_queue_depth(cqe);
        c.cap = depth as usize;
        if c.q.capacity() > c.cap {
            c.q.shrink_to(c.cap);
        } else {
            c.q.reserve_exact(c.cap - c.q.len());
        }
        Ok(depth)
    }

    /// `ibv_destroy_cq`: EBUSY while a QP uses it.
    pub fn destroy_cq(&mut self, cq: Cq) -> Result<()> {
        let c = self.sh.cqs.get(cq.0).ok_or(Error::NotFound)?;
        if c.users > 0 {
            return Err(Error::Busy);
        }
        self.sh.cqs.remove(cq.0);
        Ok(())
    }

    /// `ibv_req_notify_cq`: the next (solicited) completion queues a [`Nic::poll_comp_event`].
    pub fn req_notify_cq(&mut self, cq: Cq, solicited_only: bool) -> Result<()> {
        let c = self.sh.cqs.get_mut(cq.0).ok_or(Error::NotFound)?;
        c.armed = Some(solicited_only);
        Ok(())
    }

    /// `ibv_poll_cq`: moves up to `wc.len()` completions out; returns how many.
    pub fn poll_cq(&mut self, cq: Cq, wc: &mut [WorkCompletion]) -> usize {
        let Some(c) = self.sh.cqs.get_mut(cq.0) else {
            return 0;
        };
        // copied out in (at most two) contiguous runs, then dropped from the queue at once
        let n = wc.len().min(c.q.len());
        let (a, b) = c.q.as_slices();
        let na = n.min(a.len());
        wc[..na].copy_from_slice(&a[..na]);
        wc[na..n].copy_from_slice(&b[..n - na]);
        c.q.drain(..n);
        n
    }

    /// `ibv_create_srq`.
    pub fn create_srq(&mut self, pd: Pd, attr: SrqAttr) -> Result<Srq> {
        self.pds.get(pd.0).ok_or(Error::Invalid)?;
        let d = &self.cfg.device_attr;
        if attr.max_wr == 0
            || attr.max_wr > d.max_srq_wr
            || attr.max_sge > d.max_srq_sge
            || attr.srq_limit > attr.max_wr
        {
            return Err(Error::Invalid);
        }
        if self.sh.srqs.len() >= d.max_srq as usize {
            return Err(Error::NoMem);
        }
        let s = SrqState {
            pd,
            rq: RecvQueue::new(attr.max_wr, attr.max_sge),
            limit: attr.srq_limit,
            users: 0,
        };
        self.sh.srqs.insert(s).map(Srq).ok_or(Error::NoMem)
    }

    /// `ibv_modify_srq` (only `srq_attr_mask::LIMIT`; resizing is not supported).
    pub fn modify_srq(&mut self, srq: Srq, attr: SrqAttr, mask: u32) -> Result<()> {
        let s = self.sh.srqs.get_mut(srq.0).ok_or(Error::NotFound)?;
        if mask & srq_attr_mask::MAX_WR != 0 {
            return Err(Error::NotSupported);
        }
        if mask & srq_attr_mask::LIMIT != 0 {
            if attr.srq_limit > s.rq.cap() {
                return Err(Error::Invalid);
            }
            s.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// `ibv_query_srq`.
    pub fn query_srq(&self, srq: Srq) -> Result<SrqAttr> {
        let s = self.sh.srqs.get(srq.0).ok_or(Error::NotFound)?;
        Ok(SrqAttr {
            max_wr: s.rq.cap(),
            max_sge: s.rq.max_sge as u32,
            srq_limit: s.limit,
        })
    }

    /// `ibv_destroy_srq`.
    pub fn destroy_srq(&mut self, srq: Srq) -> Result<()> {
        let s = self.sh.srqs.get(srq.0).ok_or(Error::NotFound)?;
        if s.users > 0 {
            return Err(Error::Busy);
        }
        self.sh.srqs.remove(srq.0);
        Ok(())
    }

    /// `ibv_post_srq_recv`.
    pub fn post_srq_recv(&mut self, srq: Srq, wr: &RecvWr<'_>) -> Result<()> {
        let s = self.sh.srqs.get_mut(srq.0).ok_or(Error::NotFound)?;
        if wr.sg_list.len() > s.rq.max_sge {
            return Err(Error::Invalid);
        }
        if !s.rq.push(wr.wr_id, wr.sg_list) {
            return Err(Error::NoMem);
        }
        Ok(())
    }

    /// `ibv_create_ah`.
    pub fn create_ah(&mut self, pd: Pd, attr: AhAttr) -> Result<Ah> {
        self.pds.get(pd.0).ok_or(Error::Invalid)?;
        if let Err(problem) = crate::qp::Path::from_av(&attr, &self.sh.gids) {
            let d = crate::diag::av_refused("ibv_create_ah", problem, &self.sh.gids);
            self.sh.diag(crate::diag::NO_QP, d);
            return Err(problem.error());
        }
        if self.sh.ahs.len() >= self.cfg.device_attr.max_ah as usize {
            return Err(Error::NoMem);
        }
        self.sh.ahs.insert((pd, attr)).map(Ah).ok_or(Error::NoMem)
    }

    /// `ibv_destroy_ah`.
    pub fn destroy_ah(&mut self, ah: Ah) -> Result<()> {
        self.sh.ahs.remove(ah.0).map(|_| ()).ok_or(Error::NotFound)
    }
}

/// The number of entries rxe's queues hold for `n` asked for (`rxe_queue_init`): the smallest
/// power of two above `n`, less one (1 → 1, 10 → 15, 16 → 31, 32767 → 32767).
fn rxe_queue_depth(n: u32) -> u32 {
    let d = (u64::from(n) + 1).next_power_of_two() - 1;
    u32::try_from(d).unwrap_or(u32::MAX)
}
