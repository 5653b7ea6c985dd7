//! Shared receive queues.
use super::error::{post_reason, Error, Result};
use super::mr::LocalSlice;
use super::pd::{PdInner, ProtectionDomain};
use roce_emu::{RecvWr, Sge, SrqAttr};
use std::sync::Arc;

/// Builder for a [`SharedReceiveQueue`] (`ibv_create_srq`).
pub struct SrqBuilder<'a> {
    pd: &'a ProtectionDomain,
    attr: SrqAttr,
}

impl<'a> SrqBuilder<'a> {
    pub(crate) fn new(pd: &'a ProtectionDomain, max_wr: u32) -> Self {
        SrqBuilder {
            pd,
            attr: SrqAttr {
                max_wr,
                max_sge: 4,
                srq_limit: 0,
            },
        }
    }
    /// Scatter/gather entries per receive (default 4).
    pub fn set_max_sge(mut self, n: u32) -> Self {
        self.attr.max_sge = n;
        self
    }
    /// Raise `SrqLimitReached` when fewer than `n` receives remain (0 = off).
    pub fn set_limit(mut self, n: u32) -> Self {
        self.attr.srq_limit = n;
        self
    }
    /// Creates the SRQ.
    pub fn build(self) -> Result<SharedReceiveQueue> {
        let pd = &self.pd.inner;
        let attr = self.attr;
        let srq = pd
            .ctx
            .nic(|n| n.create_srq(pd.pd, attr))
            .map_err(Error::CreateSrq)?;
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqInner {
                pd: pd.clone(),
                srq,
            }),
        })
    }
}

/// A shared receive queue (`struct ibv_srq`): receives that any QP built with
/// `set_srq(&srq)` consumes. Cheap to clone; QPs keep it alive.
#[derive(Clone)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<SrqInner>,
}

pub(crate) struct SrqInner {
    pub(crate) pd: Arc<PdInner>,
    pub(crate) srq: roce_emu::Srq,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        let srq = self.srq;
        let _ = self.pd.ctx.nic(|n| n.destroy_srq(srq));
    }
}

impl SharedReceiveQueue {
    /// Posts a receive (`ibv_post_srq_recv`).
    pub fn post_receive(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        let mut sges = [Sge::default(); 32];
        if local.len() > sges.len() {
            return Err(Error::PostRecv {
                qpn: 0,
                reason: format!("{} SGEs (at most 32)", local.len()),
            });
        }
        for (i, l) in local.iter().enumerate() {
            if !Arc::ptr_eq(&l.mr.pd, &self.inner.pd) {
                return Err(Error::WrongPd(
                    "post_srq_recv with a memory region of another protection domain",
                ));
            }
            sges[i] = l.sge();
        }
        let wr = RecvWr {
            wr_id,
            sg_list: &sges[..local.len()],
        };
        let srq = self.inner.srq;
        self.inner
            .pd
            .ctx
            .engine
            .post_srq_recv(srq, &wr)
            .map_err(|e| match e {
                roce_emu::Error::NoMem => Error::QueueFull {
                    qpn: 0,
                    queue: "shared receive",
                },
                other => Error::PostRecv {
                    qpn: 0,
                    reason: post_reason(other),
                },
            })
    }
    /// `ibv_query_srq`.
    pub fn query(&self) -> Result<SrqAttr> {
        let srq = self.inner.srq;
        self.inner
            .pd
            .ctx
            .nic(|n| n.query_srq(srq))
            .map_err(Error::ModifySrq)
    }
    /// Arms the limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`).
    pub fn set_limit(&self, n: u32) -> Result<()> {
        let srq = self.inner.srq;
        let attr = SrqAttr {
            srq_limit: n,
            ..Default::default()
        };
        self.inner
            .pd
            .ctx
            .nic(|nic| nic.modify_srq(srq, attr, roce_emu::srq_attr_mask::LIMIT))
            .map_err(Error::ModifySrq)
    }
}

impl std::fmt::Debug for SharedReceiveQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedReceiveQueue({})", self.inner.srq.0)
    }
}
