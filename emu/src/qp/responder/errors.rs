//! The responder's error states (rxe `rxe_resp.c`, C9-x classes): what each failed check of a
//! request does (NAK, receive completion, QP to ERR, or a silent drop for UC/UD), and the
//! diagnostic that explains each NAK sent for a mistake.
use super::super::{Ctx, Qp};
use super::Pkt;
use crate::diag::{BadRequest, Diagnostic, KeyFault};
use crate::verbs::*;
use roce_wire::aeth::Syndrome;
use roce_wire::OpFlags;

/// rxe's responder error states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RespErr {
    MissingFirst,
    MissingLastC,
    MissingLastD1e,
    Unsupported,
    UcDrop,
    Misaligned,
    TooManyRdAtomic,
    RkeyViolation,
    /// rxe `RESPST_ERR_LENGTH`, with the check that failed.
    Length(BadRequest),
    MalformedWqe,
    Rnr,
    InvalidateRkey,
}

impl RespErr {
    /// The cause of a NAK invalid request, for its diagnostic (QP access has its own).
    fn bad_request(self) -> Option<BadRequest> {
        match self {
            RespErr::MissingFirst => Some(BadRequest::MissingFirst),
            RespErr::MissingLastC => Some(BadRequest::MissingLast),
            RespErr::Misaligned => Some(BadRequest::AtomicMisaligned),
            RespErr::TooManyRdAtomic => Some(BadRequest::NoDestRdAtomic),
            RespErr::Length(b) => Some(b),
            _ => None,
        }
    }
}

use super::super::response::syndrome::{NAK_INV_REQ, NAK_REM_ACC, NAK_REM_OP};

impl Qp {
    /// Why the rkey check of this request failed (for the diagnostic).
    fn rkey_fault(&self, ctx: &Ctx<'_>, p: &Pkt<'_>) -> KeyFault {
        let flags = p.info().flags;
        let access = if let Some(f) = p.feth() {
            super::placement::flush_access(f.placement_type())
        } else if flags.contains(OpFlags::READ) {
            AccessFlags::REMOTE_READ
        } else if flags.intersects(OpFlags::WRITE | OpFlags::ATOMIC_WRITE) {
            AccessFlags::REMOTE_WRITE
        } else {
            AccessFlags::REMOTE_ATOMIC
        };
        let va = self.resp.va.wrapping_add(self.resp.offset as u64);
        let (key, len) = (self.resp.rkey, self.resp.resid as u64);
        if crate::mw::is_mw_key(key) {
            ctx.mws.classify(key, self.pd, self.qpn, access, va, len)
        } else {
            ctx.mrs.classify(key, self.pd, access, va, len)
        }
        .unwrap_or(KeyFault::Unknown)
    }

    /// rxe's error states of the responder.
    pub(super) fn resp_error(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>, e: RespErr) {
        let rc = self.qp_type == QpType::Rc;
        let psn = p.bth().psn();
        tracing::debug!(qpn = self.qpn, ?e, psn = psn.value(), "responder error");
        let class_c = |qp: &mut Qp, ctx: &mut Ctx<'_>, nak: u8, status: WcStatus| {
            qp.complete_recv(ctx, p, status);
            qp.ack(ctx, psn, nak);
            qp.to_error(ctx);
        };
        match e {
            RespErr::Rnr => {
                if rc {
                    ctx.ctr.send_rnr_err += 1;
                    ctx.diag(self.qpn, Diagnostic::RnrNoRecvPosted);
                    let syn = Syndrome::RnrNak {
                        timer: self.attr.min_rnr_timer,
                    }
                    .to_byte();
                    self.ack(ctx, psn, syn);
                } else {
                    self.resp.drop_msg = true;
                    ctx.ctr.req_dropped += 1;
                }
            }
            RespErr::Unsupported if rc => {
                let flags = p.info().flags;
                let acc = self.attr.qp_access_flags;
                let flag = if flags.contains(OpFlags::READ)
                    && !acc.contains(AccessFlags::REMOTE_READ)
                {
                    Some("IBV_ACCESS_REMOTE_READ")
                } else if flags.contains(OpFlags::WRITE) && !acc.contains(AccessFlags::REMOTE_WRITE)
                {
                    Some("IBV_ACCESS_REMOTE_WRITE")
                } else if flags.contains(OpFlags::ATOMIC)
                    && !acc.contains(AccessFlags::REMOTE_ATOMIC)
                {
                    Some("IBV_ACCESS_REMOTE_ATOMIC")
                } else {
                    super::placement::missing_qp_access(acc, p)
                };
                if let Some(flag) = flag {
                    ctx.diag(self.qpn, Diagnostic::QpAccessNotEnabled { flag });
                }
                class_c(self, ctx, NAK_INV_REQ, WcStatus::RemInvReqErr);
            }
            RespErr::MissingFirst
            | RespErr::MissingLastC
            | RespErr::Unsupported
            | RespErr::Misaligned
            | RespErr::TooManyRdAtomic => {
                if rc {
                    if let Some(b) = e.bad_request() {
                        ctx.diag(self.qpn, Diagnostic::InvalidRequest(b));
                    }
                    class_c(self, ctx, NAK_INV_REQ, WcStatus::RemInvReqErr);
                } else {
                    ctx.ctr.req_dropped += 1;
                }
            }
            RespErr::UcDrop => {
                self.resp.drop_msg = true;
                ctx.ctr.req_dropped += 1;
            }
            RespErr::MissingLastD1e => {
                if self.resp.srq_wqe.is_some() {
                    self.resp.drop_msg = true;
                    self.complete_recv(ctx, p, WcStatus::RemInvReqErr);
                } else {
                    self.abandon_partial();
                }
                ctx.ctr.req_dropped += 1;
            }
            RespErr::RkeyViolation => {
                let fault = self.rkey_fault(ctx, p);
                ctx.diag(self.qpn, Diagnostic::RemoteAccess(fault));
                if rc {
                    class_c(self, ctx, NAK_REM_ACC, WcStatus::RemAccessErr);
                } else {
                    self.resp.drop_msg = true;
                    if self.resp.srq_wqe.is_some() {
                        self.complete_recv(ctx, p, WcStatus::RemAccessErr);
                    }
                    self.abandon_partial();
                    ctx.ctr.req_dropped += 1;
                }
            }
            RespErr::Length(cause) => {
                if rc {
                    ctx.diag(self.qpn, Diagnostic::InvalidRequest(cause));
                    class_c(self, ctx, NAK_INV_REQ, WcStatus::RemInvReqErr);
                } else {
                    if self.resp.srq_wqe.is_some() {
                        self.complete_recv(ctx, p, WcStatus::RemInvReqErr);
                    }
                    self.resp.drop_msg = true;
                    self.abandon_partial();
                    ctx.ctr.req_dropped += 1;
                }
            }
            RespErr::MalformedWqe => {
                let (sges, _) = self.cur_recv_sges();
                let f = ctx
                    .mrs
                    .classify_sges(self.pd, sges, AccessFlags::LOCAL_WRITE, 0, u64::MAX);
                if let Some(f) = f {
                    ctx.diag(self.qpn, Diagnostic::LocalProtection(f));
                }
                self.complete_recv(ctx, p, WcStatus::LocQpOpErr);
                if rc {
                    self.ack(ctx, psn, NAK_REM_OP);
                }
                self.to_error(ctx);
            }
            RespErr::InvalidateRkey => {
                // class J: the requester still gets its ACK; the receiver sees the error
                self.complete_recv(ctx, p, WcStatus::RemInvReqErr);
                if rc && p.bth().ack_req() {
                    self.ack(ctx, psn, super::super::response::syndrome::ACK);
                }
                self.to_error(ctx);
            }
        }
    }
}
