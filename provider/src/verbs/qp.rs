//! Queue pairs: builder → [`PreparedQueuePair`] → `handshake(remote)` → [`QueuePair`], as in
//! the `ibverbs` crate, and typed work requests.
//!
//! This file is the connected queue pair ([`QueuePair`]: queries, modify, posting); the
//! endpoint exchanged with the peer is in [`endpoint`], the builder and the prepared QP with its
//! handshake in [`builder`], the typed send requests in [`wr`].
use super::cq::{CompletionQueue, CqInner};
use super::error::{post_reason, Error, Result};
use super::mr::{LocalSlice, RemoteSlice};
use super::pd::{AddressHandle, PdInner, ProtectionDomain};
use super::srq::{SharedReceiveQueue, SrqInner};
use roce_emu::{
    AccessFlags, AhAttr, Gid, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendFlags, SendWr, Sge, WrOpcode,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

mod builder;
mod endpoint;
mod wr;

pub use builder::*;
pub use endpoint::*;
pub use wr::*;

pub(crate) struct QpInner {
    pd: Arc<PdInner>,
    #[allow(dead_code)] // keeps the CQs alive while the QP exists
    send_cq: Arc<CqInner>,
    #[allow(dead_code)]
    recv_cq: Arc<CqInner>,
    #[allow(dead_code)]
    srq: Option<Arc<SrqInner>>,
    qpn: u32,
    qp_type: QpType,
    cap: QpCap,
    psn: u32,
    qkey: u32,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        let qpn = self.qpn;
        let _ = self.pd.ctx.nic(|n| n.destroy_qp(qpn));
    }
}

const MAX_SGE: usize = 32;
/// SGEs of a work request that fit the small scratch array (most have one): zeroing all
/// [`MAX_SGE`] (512 bytes) per post was a visible part of a post's cost.
const SMALL_SGE: usize = 4;

/// A connected (RC/UC) or datagram (UD) queue pair (`struct ibv_qp`). Cheap to clone.
///
/// Posting is safe: every buffer a request names is a [`LocalSlice`] of a registered region
/// whose memory the device co-owns, so nothing a request does can reach freed memory.
#[derive(Clone)]
pub struct QueuePair {
    pub(crate) inner: Arc<QpInner>,
}

impl QueuePair {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.inner.qpn
    }
    /// Transport.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }
    /// The capabilities it was created with.
    pub fn cap(&self) -> QpCap {
        self.inner.cap
    }
    /// UD Q_Key.
    pub fn qkey(&self) -> u32 {
        self.inner.qkey
    }
    /// This QP's endpoint (QPN, first send PSN, GID index 1).
    pub fn endpoint(&self) -> QueuePairEndpoint {
        let ctx = &self.inner.pd.ctx;
        QueuePairEndpoint {
            qpn: self.inner.qpn,
            psn: self.inner.psn,
            gid: ctx.nic(|n| n.query_gid(1)),
            lid: 0,
        }
    }
    /// The connected peer (RC/UC after the handshake).
    pub fn remote(&self) -> Option<QueuePairEndpoint> {
        let a = self.query().ok()?;
        (self.inner.qp_type != QpType::Ud
            && matches!(a.qp_state, QpState::Rtr | QpState::Rts | QpState::Sqd))
        .then_some(QueuePairEndpoint {
            qpn: a.dest_qp_num,
            psn: a.rq_psn,
            gid: a.ah_attr.dgid,
            lid: 0,
        })
    }
    /// `ibv_query_qp`.
    pub fn query(&self) -> Result<QpAttr> {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.query_qp(qpn))
            .map_err(|source| Error::ModifyQp {
                qpn,
                to: QpState::Reset,
                source,
            })
    }
    /// Current state.
    pub fn state(&self) -> QpState {
        self.query().map(|a| a.qp_state).unwrap_or(QpState::Err)
    }
    /// `ibv_modify_qp`, the escape hatch for driving the state machine by hand.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.modify_qp(qpn, attr, mask))
            .map_err(|source| Error::ModifyQp {
                qpn,
                to: attr.qp_state,
                source,
            })
    }
    /// Per-QP memory in bytes: (state, queue storage).
    pub fn memory(&self) -> (usize, usize) {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.qp_memory(qpn))
            .unwrap_or((0, 0))
    }

    /// Checks `local` (count, protection domain) and converts it into `sges` (room for at
    /// least `local.len()` entries, or [`MAX_SGE`]).
    fn check_local(
        &self,
        local: &[LocalSlice<'_>],
        sges: &mut [Sge],
        what: &'static str,
    ) -> Result<usize> {
        if local.len() > MAX_SGE {
            return Err(Error::PostSend {
                qpn: self.qpn(),
                reason: format!("{} SGEs (at most {MAX_SGE})", local.len()),
            });
        }
        for (i, l) in local.iter().enumerate() {
            if !Arc::ptr_eq(&l.mr.pd, &self.inner.pd) {
                return Err(Error::WrongPd(what));
            }
            sges[i] = l.sge();
        }
        Ok(local.len())
    }

    /// Posts one send work request (`ibv_post_send`).
    pub fn post(&self, wr: &SendRequest<'_>) -> Result<()> {
        self.post_one(wr, None)
    }

    /// Posts several send work requests, then transmits once; stops at the first error.
    pub fn post_batch(&self, wrs: &[SendRequest<'_>]) -> Result<()> {
        let ctx = &self.inner.pd.ctx;
        let mut r = Ok(());
        ctx.engine.with_nic_dyn(&mut |nic| {
            r = wrs
                .iter()
                .try_for_each(|w| self.post_one(w, Some(&mut *nic)));
        });
        r
    }

    fn post_one(&self, wr: &SendRequest<'_>, locked: Option<&mut roce_emu::Nic>) -> Result<()> {
        let qpn = self.qpn();
        let qp_type = self.inner.qp_type;
        let allowed = match (qp_type, &wr.op) {
            (QpType::Ud, Opcode::Send | Opcode::SendWithImm(_)) => true,
            (QpType::Ud, _) => false,
            (
                QpType::Uc,
                Opcode::Read(_)
                | Opcode::CompareSwap { .. }
                | Opcode::FetchAdd { .. }
                | Opcode::Flush { .. }
                | Opcode::AtomicWrite { .. }
                | Opcode::SendWithInv(_)
                | Opcode::LocalInv(_),
            ) => false,
            _ => true,
        };
        if !allowed {
            return Err(Error::WrongTransport {
                op: wr.op.name(),
                qp_type,
            });
        }
        let (mut small, mut large) = ([Sge::default(); SMALL_SGE], None);
        let sges: &mut [Sge] = if wr.local.len() <= SMALL_SGE {
            &mut small
        } else {
            large.insert([Sge::default(); MAX_SGE])
        };
        let n = self.check_local(
            wr.local,
            sges,
            "post_send with a memory region of another protection domain",
        )?;
        let mut e = SendWr {
            wr_id: wr.wr_id,
            sg_list: &sges[..n],
            ..Default::default()
        };
        if wr.signaled {
            e.send_flags |= SendFlags::SIGNALED;
        }
        if wr.solicited {
            e.send_flags |= SendFlags::SOLICITED;
        }
        if wr.fence {
            e.send_flags |= SendFlags::FENCE;
        }
        let remote = |r: &RemoteSlice, e: &mut SendWr<'_>| {
            e.remote_addr = r.addr;
            e.rkey = r.rkey;
        };
        match wr.op {
            Opcode::Send => e.opcode = WrOpcode::Send,
            Opcode::SendWithImm(i) => {
                e.opcode = WrOpcode::SendWithImm;
                e.imm_data = i;
            }
            Opcode::Write(r) => {
                e.opcode = WrOpcode::RdmaWrite;
                remote(&r, &mut e);
            }
            Opcode::WriteWithImm(r, i) => {
                e.opcode = WrOpcode::RdmaWriteWithImm;
                e.imm_data = i;
                remote(&r, &mut e);
            }
            Opcode::Read(r) => {
                e.opcode = WrOpcode::RdmaRead;
                remote(&r, &mut e);
            }
            Opcode::CompareSwap {
                remote: r,
                compare,
                swap,
            } => {
                e.opcode = WrOpcode::AtomicCmpAndSwp;
                e.compare_add = compare;
                e.swap = swap;
                remote(&r, &mut e);
            }
            Opcode::FetchAdd { remote: r, add } => {
                e.opcode = WrOpcode::AtomicFetchAndAdd;
                e.compare_add = add;
                remote(&r, &mut e);
            }
            Opcode::Flush {
                remote: r,
                placement_type,
                level,
            } => {
                let length = u32::try_from(r.len).map_err(|_| Error::PostSend {
                    qpn,
                    reason: format!("a FLUSH of {} bytes (the RETH holds 32 bits)", r.len),
                })?;
                e.opcode = WrOpcode::Flush;
                e.flush = roce_emu::FlushWr {
                    length,
                    placement_type,
                    level,
                };
                remote(&r, &mut e);
            }
            Opcode::AtomicWrite { remote: r, value } => {
                e.opcode = WrOpcode::AtomicWrite;
                e.compare_add = value;
                remote(&r, &mut e);
            }
            Opcode::SendWithInv(rkey) => {
                e.opcode = WrOpcode::SendWithInv;
                e.invalidate_rkey = rkey;
            }
            Opcode::LocalInv(rkey) => {
                e.opcode = WrOpcode::LocalInv;
                e.invalidate_rkey = rkey;
            }
            Opcode::BindMw {
                mw_rkey,
                rkey,
                access,
            } => {
                let [s] = &sges[..n] else {
                    return Err(Error::PostSend {
                        qpn,
                        reason: "a bind names exactly one slice of a region".into(),
                    });
                };
                e.opcode = WrOpcode::BindMw;
                e.bind = roce_emu::MwBind {
                    mw_rkey,
                    rkey,
                    mr_lkey: s.lkey,
                    addr: s.addr,
                    length: s.length.into(),
                    access,
                };
                e.sg_list = &[];
            }
        }
        if let Opcode::CompareSwap { remote: r, .. } | Opcode::FetchAdd { remote: r, .. } = wr.op {
            let local_ok = n == 1 && sges[0].length == 8 && sges[0].addr & 7 == 0;
            if !local_ok || r.addr % 8 != 0 || r.len < 8 {
                return Err(Error::MisalignedAtomic);
            }
        }
        if let Opcode::Flush { .. } | Opcode::AtomicWrite { .. } = wr.op {
            if n != 0 || wr.inline.is_some() {
                return Err(Error::PostSend {
                    qpn,
                    reason: format!("{} takes no local buffers", wr.op.name()),
                });
            }
        }
        if let Opcode::AtomicWrite { remote: r, .. } = wr.op {
            if r.addr % 8 != 0 || r.len < 8 {
                return Err(Error::MisalignedAtomic);
            }
        }
        if let Some(d) = wr.ud {
            if !Arc::ptr_eq(&d.ah.pd, &self.inner.pd) {
                return Err(Error::WrongPd(
                    "post_send with an address handle of another protection domain",
                ));
            }
            e.ah = Some(d.ah.ah);
            e.remote_qpn = d.remote_qpn;
            e.remote_qkey = d.remote_qkey;
        } else if qp_type == QpType::Ud {
            return Err(Error::PostSend {
                qpn,
                reason: "a UD send needs a destination (SendRequest::to)".into(),
            });
        }
        let inline = match wr.inline {
            Some(d) => {
                if d.len() > self.inner.cap.max_inline_data as usize {
                    return Err(Error::InlineTooLarge {
                        len: d.len(),
                        max: self.inner.cap.max_inline_data,
                    });
                }
                e.send_flags |= SendFlags::INLINE;
                Some(d)
            }
            None => None,
        };
        let r = match locked {
            Some(nic) => nic.post_send_inline(qpn, &e, inline),
            None => self.inner.pd.ctx.engine.post_send(qpn, &e, inline),
        };
        r.map_err(|err| match err {
            roce_emu::Error::NoMem => Error::QueueFull { qpn, queue: "send" },
            other => Error::PostSend {
                qpn,
                reason: post_reason(other),
            },
        })
    }

    /// Binds `mw` to `region` (a slice of a region registered with `AccessFlags::MW_BIND`) with
    /// `access` (`ibv_bind_mw` for type 1, `IBV_WR_BIND_MW` for type 2, which ties the window to
    /// this QP): the window's rkey gets the next key byte, and the returned slice is what to give
    /// the peer. The bind's completion (`WcOpcode::BindMw`) says whether it took.
    pub fn bind_mw(
        &self,
        mw: &super::MemoryWindow,
        region: LocalSlice<'_>,
        access: AccessFlags,
        wr_id: u64,
    ) -> Result<RemoteSlice> {
        if !Arc::ptr_eq(&mw.pd, &self.inner.pd) {
            return Err(Error::WrongPd(
                "bind_mw with a window of another protection domain",
            ));
        }
        let rkey = mw.next_rkey();
        let local = [region];
        let op = Opcode::BindMw {
            mw_rkey: mw.rkey(),
            rkey,
            access,
        };
        self.post(&SendRequest {
            op,
            ..SendRequest::send(wr_id, &local)
        })?;
        mw.set_rkey(rkey);
        Ok(RemoteSlice {
            addr: region.sge().addr,
            rkey,
            len: region.len() as u64,
        })
    }

    /// Invalidates the type 2 memory window with `rkey` (`IBV_WR_LOCAL_INV`); completes with
    /// `WcOpcode::LocalInv`.
    pub fn post_local_invalidate(&self, rkey: u32, wr_id: u64) -> Result<()> {
        self.post(&SendRequest {
            op: Opcode::LocalInv(rkey),
            ..SendRequest::send(wr_id, &[])
        })
    }

    /// SEND of `local` that invalidates the peer's type 2 window `rkey` (`IBV_WR_SEND_WITH_INV`):
    /// the peer's receive completion carries `WcFlags::WITH_INV` and the rkey.
    pub fn post_send_with_invalidate(
        &self,
        local: &[LocalSlice<'_>],
        rkey: u32,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest {
            op: Opcode::SendWithInv(rkey),
            ..SendRequest::send(wr_id, local)
        })
    }

    /// SEND of `local`.
    pub fn post_send(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        self.post(&SendRequest::send(wr_id, local))
    }
    /// SEND with immediate data.
    pub fn post_send_with_imm(&self, local: &[LocalSlice<'_>], wr_id: u64, imm: u32) -> Result<()> {
        self.post(&SendRequest::send_with_imm(wr_id, local, imm))
    }
    /// SEND of `data` copied inline now.
    pub fn post_send_inline(&self, data: &[u8], wr_id: u64) -> Result<()> {
        self.post(&SendRequest::send_inline(wr_id, data))
    }
    /// UD SEND of `local` to `remote_qpn` on the device `ah` points at.
    pub fn post_send_ud(
        &self,
        local: &[LocalSlice<'_>],
        ah: &AddressHandle,
        remote_qpn: u32,
        remote_qkey: u32,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::send(wr_id, local).to(ah, remote_qpn, remote_qkey))
    }
    /// RDMA WRITE of `local` to `remote`.
    pub fn post_write(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::write(wr_id, local, remote))
    }
    /// RDMA WRITE with immediate data.
    pub fn post_write_with_imm(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
        imm: u32,
    ) -> Result<()> {
        self.post(&SendRequest::write_with_imm(wr_id, local, remote, imm))
    }
    /// RDMA READ of `remote` into `local`.
    pub fn post_read(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::read(wr_id, local, remote))
    }
    /// Atomic compare-and-swap of the 8 bytes at `remote`; the old value lands in `local`.
    pub fn post_compare_swap(
        &self,
        local: &LocalSlice<'_>,
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::compare_swap(
            wr_id,
            std::slice::from_ref(local),
            remote,
            compare,
            swap,
        ))
    }
    /// Atomic fetch-and-add on the 8 bytes at `remote`; the old value lands in `local`.
    pub fn post_fetch_add(
        &self,
        local: &LocalSlice<'_>,
        remote: RemoteSlice,
        add: u64,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::fetch_add(
            wr_id,
            std::slice::from_ref(local),
            remote,
            add,
        ))
    }

    /// IBA 1.5 RDMA FLUSH of `remote` for global visibility ([`FLUSH_GLOBAL`]), of the range
    /// or, with `whole_region`, of the region behind its rkey ([`FLUSH_MR`]); completes with
    /// `WcOpcode::Flush`. [`SendRequest::flush`] gives every placement type and level.
    pub fn post_flush(&self, remote: RemoteSlice, whole_region: bool, wr_id: u64) -> Result<()> {
        let level = if whole_region { FLUSH_MR } else { FLUSH_RANGE };
        self.post(&SendRequest::flush(wr_id, remote, FLUSH_GLOBAL, level))
    }
    /// IBA 1.5 ATOMIC WRITE: `value` lands in the 8 bytes at `remote` as one store; completes
    /// with `WcOpcode::AtomicWrite`.
    pub fn post_atomic_write(&self, remote: RemoteSlice, value: u64, wr_id: u64) -> Result<()> {
        self.post(&SendRequest::atomic_write(wr_id, remote, value))
    }

    /// Posts a receive (`ibv_post_recv`) scattering into `local`.
    pub fn post_receive(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        let qpn = self.qpn();
        if self.inner.srq.is_some() {
            return Err(Error::PostRecv {
                qpn,
                reason: "this QP takes receives from its shared receive queue; post there".into(),
            });
        }
        let (mut small, mut large) = ([Sge::default(); SMALL_SGE], None);
        let sges: &mut [Sge] = if local.len() <= SMALL_SGE {
            &mut small
        } else {
            large.insert([Sge::default(); MAX_SGE])
        };
        let n = self.check_local(
            local,
            sges,
            "post_recv with a memory region of another protection domain",
        )?;
        let wr = RecvWr {
            wr_id,
            sg_list: &sges[..n],
        };
        self.inner
            .pd
            .ctx
            .engine
            .post_recv(qpn, &wr)
            .map_err(|err| match err {
                roce_emu::Error::NoMem => Error::QueueFull {
                    qpn,
                    queue: "receive",
                },
                other => Error::PostRecv {
                    qpn,
                    reason: post_reason(other),
                },
            })
    }
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QueuePair({:?} {})", self.inner.qp_type, self.inner.qpn)
    }
}
