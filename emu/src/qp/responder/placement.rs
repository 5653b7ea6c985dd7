//! The IBA 1.5 memory placement operations on the responder, as kernel rxe has them since
//! Linux 6.2 (`rxe_resp.c`: `check_qp_attr_access`, `check_rkey`, `process_flush`,
//! `atomic_write_reply`, `duplicate_request`): RDMA FLUSH and ATOMIC WRITE. Both are answered
//! by one zero-length RDMA READ response (rxe `send_read_response_ack`), both are recorded in
//! a responder resource so that a duplicate is answered again without executing again.
//!
//! FLUSH on this device is a barrier and nothing more: every earlier request of the QP was
//! executed when it arrived (memory is written synchronously) and every earlier response is
//! ahead of it in the QP's response queue, so its response says exactly what IBA asks of it.
use super::super::{Ctx, Job, Qp, Resource};
use super::{resolve_rkey, Pkt, RespErr};
use crate::diag::BadRequest;
use crate::verbs::*;
use roce_wire::{feth, OpFlags, Psn};

/// The memory access a FLUSH of `placement_type` needs, of the QP and of the region (rxe
/// `check_qp_attr_access`, `check_rkey`): global visibility needs `IBV_ACCESS_FLUSH_GLOBAL`,
/// persistence `IBV_ACCESS_FLUSH_PERSISTENT`.
pub(super) fn flush_access(placement_type: u8) -> AccessFlags {
    let mut a = AccessFlags::EMPTY;
    if placement_type & feth::PLACEMENT_GLOBAL != 0 {
        a |= AccessFlags::FLUSH_GLOBAL;
    }
    if placement_type & feth::PLACEMENT_PERSISTENT != 0 {
        a |= AccessFlags::FLUSH_PERSISTENT;
    }
    a
}

/// The QP access flag a FLUSH or ATOMIC WRITE needs and this QP lacks (its
/// `qp_access_flags`), by libibverbs name; `None` when it has them.
pub(super) fn missing_qp_access(acc: AccessFlags, p: &Pkt<'_>) -> Option<&'static str> {
    let flags = p.info().flags;
    if flags.contains(OpFlags::ATOMIC_WRITE) && !acc.contains(AccessFlags::REMOTE_WRITE) {
        return Some("IBV_ACCESS_REMOTE_WRITE");
    }
    if let Some(f) = p.feth() {
        let need = flush_access(f.placement_type());
        if need.contains(AccessFlags::FLUSH_GLOBAL) && !acc.contains(AccessFlags::FLUSH_GLOBAL) {
            return Some("IBV_ACCESS_FLUSH_GLOBAL");
        }
        if need.contains(AccessFlags::FLUSH_PERSISTENT)
            && !acc.contains(AccessFlags::FLUSH_PERSISTENT)
        {
            return Some("IBV_ACCESS_FLUSH_PERSISTENT");
        }
    }
    None
}

impl Qp {
    /// A new FLUSH or ATOMIC WRITE that passed the PSN, sequence, QP access, resource and
    /// length checks: the R_Key check, execution, the responder resource and the response.
    pub(super) fn placement_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &Pkt<'_>,
    ) -> Result<(), RespErr> {
        let reth = super::reth_of(p);
        self.resp.va = reth.va;
        self.resp.offset = 0;
        self.resp.rkey = reth.rkey;
        self.resp.resid = reth.dma_len;
        self.resp.length = reth.dma_len;
        let psn = p.bth().psn();
        let mrs = ctx.mrs;
        if let Some(f) = p.feth() {
            let access = flush_access(f.placement_type());
            // A whole-region FLUSH checks no range (rxe skips `mr_check_range` for it).
            let (va, len) = if f.selectivity_level() == feth::SELECT_MR {
                let base = if crate::mw::is_mw_key(reth.rkey) {
                    reth.va
                } else {
                    mrs.get(reth.rkey).map_or(reth.va, |e| e.iova)
                };
                (base, 0)
            } else {
                (reth.va, reth.dma_len)
            };
            let mws = &ctx.s.mws;
            resolve_rkey(mrs, mws, reth.rkey, self.pd, self.qpn, access, va, len)
                .map_err(|_| RespErr::RkeyViolation)?;
        } else {
            // ATOMIC WRITE: the region must allow remote write over the RETH's range, and the
            // packet must carry exactly the 8 bytes that range is (IBA 1.5; rxe checks only
            // that the payload matches the RETH length: deviation in the emu README).
            let mws = &ctx.s.mws;
            let (e, off) = resolve_rkey(
                mrs,
                mws,
                reth.rkey,
                self.pd,
                self.qpn,
                AccessFlags::REMOTE_WRITE,
                reth.va,
                reth.dma_len,
            )
            .map_err(|_| RespErr::RkeyViolation)?;
            let value = p
                .atomic_write_data()
                .filter(|_| reth.dma_len == 8 && p.bth().pad_cnt() == 0)
                .ok_or(RespErr::Length(BadRequest::AtomicWriteLength))?;
            if reth.va & 7 != 0 {
                return Err(RespErr::Misaligned);
            }
            // the 8 bytes land as one store, in the order the requester's buffer held them
            e.mem
                .atomic_write(off, u64::from_ne_bytes(value.to_be_bytes()));
            self.resp.resid = 0;
        }
        self.resp.msn = (self.resp.msn + 1) & Psn::MASK;
        self.alloc_resource(Resource {
            valid: true,
            atomic: false,
            ack_only: true,
            first_psn: psn,
            last_psn: psn,
            va: reth.va,
            rkey: reth.rkey,
            length: 0,
            orig: 0,
        });
        self.resp.psn = psn + 1;
        self.resp.ack_psn = self.resp.psn;
        self.resp.opcode = Some(p.opcode());
        self.zero_length_read_response(ctx, psn);
        Ok(())
    }

    /// The answer to a FLUSH or ATOMIC WRITE: one RDMA READ response ONLY without payload
    /// at its PSN, behind every response queued before it.
    pub(super) fn zero_length_read_response(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        let msn = self.resp.msn;
        self.push_job(
            ctx,
            Job::Read {
                psn,
                va: 0,
                rkey: 0,
                resid: 0,
                first: true,
                msn,
            },
        );
    }
}
