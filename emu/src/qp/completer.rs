//! The completer (rxe `rxe_comp.c`): consumes ACKs, NAKs, read responses and atomic ACKs for
//! the oldest outstanding send WQE, handles implicit acknowledgement, the retry and RNR
//! timers and their counters, and maps NAK codes to completion statuses (C.3, C.4, C.9).
use super::responder::Pkt;
use super::{Ctx, Qp, MAX_RETRANS_BACKOFF};
use crate::diag::Diagnostic;
use crate::queue::WqeState;
use crate::time::Instant;
use crate::verbs::*;
use roce_wire::aeth::{NakCode, Syndrome};
use roce_wire::{OpFlags, Opcode, Psn};

/// How long a QP with `retry_cnt` 7 (retry forever) waits without progress before it says so
/// ([`Diagnostic::RetryingForever`]): a minute of virtual time.
pub(crate) const STALL_REPORT_NS: u64 = 60_000_000_000;

/// rxe `enum comp_state`, reduced to the states that carry decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompSt {
    GetWqe,
    CheckAck,
    Read,
    Atomic,
    WriteSend,
    CompAck,
    CompWqe,
    UpdateComp,
    ErrorRetry,
    /// A PSN-sequence NAK that acknowledged PSNs the completer had not seen acknowledged.
    NakRetry,
    RnrRetry,
    Error,
    Done,
}

/// What sent the completer to `COMPST_ERROR_RETRY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// A PSN-sequence NAK at or below `comp.psn`.
    Nak,
    /// A PSN-sequence NAK beyond `comp.psn` (it acknowledged new PSNs).
    NakProgress,
    /// The local ACK timer.
    Timeout,
}

impl Qp {
    fn reset_retry_counters(&mut self) {
        self.comp.retry_cnt = self.attr.retry_cnt;
        self.comp.rnr_retry = self.attr.rnr_retry;
        self.comp.started_retry = false;
    }

    /// The local ACK timer's period now: the QP's `timeout`, doubled per back-off step.
    #[inline]
    fn retrans_period(&self) -> Option<u64> {
        self.timeout_ns.map(|t| t << self.comp.backoff)
    }

    /// Arms the local ACK timer one period from `now` (no-op with `timeout` 0).
    #[inline]
    pub(crate) fn arm_retrans(&mut self, now: Instant) {
        if let Some(t) = self.retrans_period() {
            self.comp.timers.arm_retrans(now, t);
        }
    }

    /// After a response: re-arms the local ACK timer while PSNs are outstanding, disarms it
    /// otherwise. rxe re-arms it at the end of every completer run, so any response keeps a
    /// transfer alive, including the out-of-order packets of a READ response after a loss,
    /// which are no progress: a timer re-armed only on progress re-requested a READ whose
    /// response was still arriving every `timeout` (issue 23). On `progress`, one back-off
    /// step is undone when it came within half the next shorter period of the previous
    /// progress: the peer keeps up again.
    #[inline]
    fn rearm(&mut self, now: Instant, progress: bool) {
        if progress {
            if self.comp.backoff > 0 {
                if let Some(t) = self.timeout_ns {
                    let gap = now.0.saturating_sub(self.comp.last_progress);
                    if gap < (t << (self.comp.backoff - 1)) / 2 {
                        self.comp.backoff -= 1;
                    }
                }
            }
            self.comp.last_progress = now.0;
            self.comp.stall_reported = false;
        }
        if self.req.psn.diff(self.comp.psn) > 0 {
            self.arm_retrans(now);
        } else {
            self.comp.timers.disarm_retrans();
        }
    }

    /// Handles one response packet (ACK flag set in the opcode table).
    pub(crate) fn on_response(&mut self, ctx: &mut Ctx<'_>, now: Instant, p: &Pkt<'_>) {
        let psn = p.bth().psn();
        // A response for a PSN this QP never transmitted (at or beyond the highest PSN sent)
        // acknowledges nothing: it is forged or misrouted. rxe's check_psn would complete the
        // oldest WQE on it (a "ghost" ACK / NAK / read response); we drop it.
        if psn.diff(self.req.psn_hi) >= 0 {
            ctx.ctr.resp_ignored += 1;
            return;
        }
        self.comp.answered = true;
        let comp_psn_before = self.comp.psn;
        let head_before = self.sq.head;
        // A coalesced ACK first completes the WQEs it covers whole: for each the walk goes
        // GetWqe → check_psn (PSN past its last: `reset_retry_counters`) → CompWqe.
        let fast = self.plain_ack(p, psn)
            && (self.head_ends_at(psn) || {
                self.complete_covered(ctx, psn);
                self.head_ends_at(psn)
            });
        if fast {
            // What GetWqe → check_psn → check_ack → WriteSend → CompAck → UpdateComp do for
            // it, without the walk (the WQE holds no rd/atomic credit: it is no READ/atomic).
            self.reset_retry_counters();
            self.complete_head(ctx);
            self.comp.opcode = None; // an ACKNOWLEDGE is an END packet
            self.comp.psn = psn + 1;
        } else if !self.walk_states(ctx, now, p, psn) {
            return;
        }
        let progress = self.comp.psn != comp_psn_before || self.sq.head != head_before;
        if let Some(hi) = self.req.probe_hi {
            if self.comp.psn.diff(hi) >= 0 {
                self.req.probe_hi = None;
            }
        }
        if progress && !self.req.need_retry {
            let acked = self.comp.psn.diff(comp_psn_before);
            if acked > 0 {
                self.req.window_grow(acked as u32);
            }
        }
        self.rearm(now, progress);
        if self.sq.head != self.sq.req && self.sq.get(self.sq.head).state == WqeState::Done {
            // local operations executed behind the WQEs just completed (rxe's completer
            // completes them on its next pass)
            self.complete_done(ctx);
        }
        self.check_sq_drained(ctx);
    }

    /// rxe's completer state machine from `COMPST_GET_WQE` for response `p` (PSN `psn`); false
    /// when it ended in the error state (WQE completed in error, QP moved to ERR).
    #[inline(never)]
    fn walk_states(&mut self, ctx: &mut Ctx<'_>, now: Instant, p: &Pkt<'_>, psn: Psn) -> bool {
        let op = p.opcode();
        let flags = p.info().flags;
        let syn = p.aeth().map(|a| a.syndrome());
        let mut st = CompSt::GetWqe;
        loop {
            tracing::trace!(qpn = self.qpn, state = ?st, psn = psn.value(), "completer");
            st = match st {
                CompSt::GetWqe => {
                    if self.sq.head == self.sq.tail {
                        ctx.ctr.resp_ignored += 1;
                        CompSt::Done
                    } else {
                        let w = self.sq.get(self.sq.head);
                        match w.state {
                            WqeState::Posted => {
                                ctx.ctr.resp_ignored += 1;
                                CompSt::Done
                            }
                            WqeState::Done => CompSt::CompWqe,
                            WqeState::Error => CompSt::Error,
                            _ => self.check_psn(ctx, p, syn),
                        }
                    }
                }
                CompSt::CheckAck => self.check_ack(ctx, p, syn),
                CompSt::Read => self.do_read(ctx, p),
                CompSt::Atomic => self.do_atomic(ctx, p),
                CompSt::WriteSend => {
                    let w = self.sq.get(self.sq.head);
                    if w.opcode.is_rd_atomic() {
                        // Deviation from rxe: a plain ACK inside a READ/atomic's PSN range (a
                        // responder re-ACKing a duplicate SEND after executing the atomic, then
                        // reordered) must not complete it without its data.
                        ctx.ctr.resp_ignored += 1;
                        CompSt::Done
                    } else if w.state == WqeState::Pending && w.last_psn == psn {
                        CompSt::CompAck
                    } else {
                        CompSt::UpdateComp
                    }
                }
                CompSt::CompAck => {
                    let h = self.sq.head;
                    let w = self.sq.get_mut(h);
                    if w.has_rd_atomic {
                        w.has_rd_atomic = false;
                        self.req.rd_atomic += 1;
                    }
                    self.complete_head(ctx);
                    if psn.diff(self.comp.psn) >= 0 {
                        CompSt::UpdateComp
                    } else {
                        CompSt::Done
                    }
                }
                CompSt::CompWqe => {
                    let w = *self.sq.get(self.sq.head);
                    if w.state == WqeState::Pending && w.last_psn.diff(self.comp.psn) >= 0 {
                        self.comp.psn = w.last_psn + 1;
                        self.comp.opcode = None;
                    }
                    self.complete_head(ctx);
                    CompSt::GetWqe
                }
                CompSt::UpdateComp => {
                    self.comp.opcode = if flags.contains(OpFlags::END) {
                        None
                    } else {
                        Some(op)
                    };
                    if psn.diff(self.comp.psn) >= 0 {
                        self.comp.psn = psn + 1;
                    }
                    CompSt::Done
                }
                CompSt::ErrorRetry => self.error_retry(ctx, Trigger::Nak),
                CompSt::NakRetry => self.error_retry(ctx, Trigger::NakProgress),
                CompSt::RnrRetry => {
                    let code = match syn {
                        Some(Syndrome::RnrNak { timer }) => timer,
                        _ => 0,
                    };
                    if self.comp.rnr_retry > 0 {
                        if self.comp.rnr_retry != 7 {
                            self.comp.rnr_retry -= 1;
                        }
                        self.req.wait_rnr = true;
                        let us = roce_wire::aeth::rnr_timer_usec(code) as u64;
                        self.comp.timers.arm_rnr(now, us);
                        CompSt::Done
                    } else {
                        // (counted in retry_rnr_exceeded_err by the diagnostic)
                        let d = Diagnostic::RnrRetryExceeded {
                            peer: self.peer_ip(),
                            dest_qpn: self.attr.dest_qp_num,
                            rnr_retry: self.attr.rnr_retry,
                        };
                        ctx.diag(self.qpn, d);
                        let h = self.sq.head;
                        self.sq.get_mut(h).status = WcStatus::RnrRetryExcErr;
                        CompSt::Error
                    }
                }
                CompSt::Error => {
                    let h = self.sq.head;
                    if self.sq.get(h).status == WcStatus::Success {
                        self.sq.get_mut(h).status = WcStatus::BadRespErr;
                    }
                    self.complete_head(ctx);
                    self.to_error(ctx);
                    return false;
                }
                CompSt::Done => return true,
            };
        }
    }

    /// A positive ACK at or beyond `comp.psn`, outside a read response.
    #[inline]
    fn plain_ack(&self, p: &Pkt<'_>, psn: Psn) -> bool {
        p.opcode() == Opcode::RC_ACKNOWLEDGE
            && self.comp.opcode.is_none()
            && psn.diff(self.comp.psn) >= 0
            && matches!(p.aeth(), Some(a) if a.syndrome().is_ack())
    }

    /// For a [`plain_ack`](Self::plain_ack) at `psn`: completes the oldest WQEs while they are
    /// SENDs or WRITEs all of whose packets were sent and their last PSN is before `psn`, as
    /// the state machine does (GetWqe → check_psn → CompWqe for each).
    #[inline]
    fn complete_covered(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        while self.sq.head != self.sq.tail {
            let w = self.sq.get(self.sq.head);
            if w.state != WqeState::Pending || w.opcode.is_rd_atomic() || psn.diff(w.last_psn) <= 0
            {
                return;
            }
            let last = w.last_psn;
            self.reset_retry_counters();
            if last.diff(self.comp.psn) >= 0 {
                self.comp.psn = last + 1;
                self.comp.opcode = None;
            }
            self.complete_head(ctx);
        }
    }

    /// The common response: a [`plain_ack`](Self::plain_ack) carrying the last PSN of the
    /// oldest WQE, a SEND or WRITE all of whose packets were sent. For it the state machine
    /// goes GetWqe → check_psn → check_ack (`reset_retry_counters`) → WriteSend → CompAck; true
    /// when the WQE part of that holds.
    #[inline]
    fn head_ends_at(&self, psn: Psn) -> bool {
        if self.sq.head == self.sq.tail {
            return false;
        }
        let w = self.sq.get(self.sq.head);
        w.state == WqeState::Pending && !w.opcode.is_rd_atomic() && w.last_psn == psn
    }

    /// rxe `check_psn`.
    fn check_psn(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>, syn: Option<Syndrome>) -> CompSt {
        let psn = p.bth().psn();
        let w = *self.sq.get(self.sq.head);
        if psn.diff(w.last_psn) > 0 {
            return if w.state == WqeState::Pending {
                if w.opcode.is_rd_atomic() {
                    CompSt::ErrorRetry
                } else {
                    self.reset_retry_counters();
                    CompSt::CompWqe
                }
            } else {
                ctx.ctr.resp_ignored += 1;
                CompSt::Done
            };
        }
        let d = psn.diff(self.comp.psn);
        let is_ack_syn = matches!(syn, Some(Syndrome::Ack { .. }) | None);
        if d < 0 {
            // A stale response. rxe completes the WQE when it carries the WQE's last PSN; we
            // additionally require a positive syndrome (a stale NAK must not complete work).
            if psn == w.last_psn
                && is_ack_syn
                && w.state == WqeState::Pending
                && !w.opcode.is_rd_atomic()
            {
                return CompSt::CompAck;
            }
            let mid_read = matches!(
                self.comp.opcode,
                Some(Opcode::RC_RDMA_READ_RESPONSE_FIRST)
                    | Some(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE)
            );
            // rxe lets any stale NAK reach check_ack mid-read; only a PSN-sequence NAK has a
            // meaning there (retry). A stale RNR NAK would fail the sequence check and error the
            // QP, so it is ignored like any other stale response.
            let seq_nak = matches!(syn, Some(Syndrome::Nak(NakCode::PsnSeqError)));
            if p.opcode() == Opcode::RC_ACKNOWLEDGE && mid_read && seq_nak {
                return CompSt::CheckAck;
            }
            ctx.ctr.resp_ignored += 1;
            CompSt::Done
        } else if d > 0 && w.opcode.is_rd_atomic() {
            ctx.ctr.resp_ignored += 1;
            CompSt::Done
        } else {
            CompSt::CheckAck
        }
    }

    /// rxe `check_ack`: opcode sequence, then the syndrome.
    fn check_ack(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>, syn: Option<Syndrome>) -> CompSt {
        let op = p.opcode();
        let flags = p.info().flags;
        let psn = p.bth().psn();
        let h = self.sq.head;
        let w = *self.sq.get(h);
        match self.comp.opcode {
            None if !flags.contains(OpFlags::START) => return CompSt::Error,
            Some(Opcode::RC_RDMA_READ_RESPONSE_FIRST)
            | Some(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE) => {
                if op == Opcode::RC_ACKNOWLEDGE {
                    if let Some(Syndrome::Nak(NakCode::PsnSeqError)) = syn {
                        return CompSt::ErrorRetry;
                    }
                }
                if op != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE
                    && op != Opcode::RC_RDMA_READ_RESPONSE_LAST
                {
                    let restart = (psn == w.first_psn && op == Opcode::RC_RDMA_READ_RESPONSE_FIRST)
                        || (w.first_psn == w.last_psn && op == Opcode::RC_RDMA_READ_RESPONSE_ONLY);
                    if !restart {
                        return CompSt::Error;
                    }
                }
            }
            _ => {}
        }
        let is_ack = matches!(syn, Some(Syndrome::Ack { .. }));
        match op {
            Opcode::RC_RDMA_READ_RESPONSE_FIRST
            | Opcode::RC_RDMA_READ_RESPONSE_LAST
            | Opcode::RC_RDMA_READ_RESPONSE_ONLY
            | Opcode::RC_RDMA_READ_RESPONSE_MIDDLE => {
                if op != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE && !is_ack {
                    return CompSt::Error;
                }
                if w.opcode.is_flush_or_atomic_write() {
                    // IBA 1.5: a FLUSH or ATOMIC WRITE is answered by one zero-length READ
                    // response (rxe's completer: COMPST_READ for a FLUSH, WRITE_SEND for an
                    // ATOMIC WRITE, both ending in COMP_ACK). Any other read response is not
                    // one of its answers.
                    if op != Opcode::RC_RDMA_READ_RESPONSE_ONLY || p.payload_len() != 0 {
                        self.sq.get_mut(h).status = WcStatus::FatalErr;
                        return CompSt::Error;
                    }
                    self.reset_retry_counters();
                    return if w.state == WqeState::Pending && w.last_psn == psn {
                        CompSt::CompAck
                    } else {
                        CompSt::UpdateComp
                    };
                }
                if w.opcode != WrOpcode::RdmaRead {
                    self.sq.get_mut(h).status = WcStatus::FatalErr;
                    return CompSt::Error;
                }
                self.reset_retry_counters();
                CompSt::Read
            }
            Opcode::RC_ATOMIC_ACKNOWLEDGE => {
                if !is_ack || !w.opcode.is_atomic() {
                    return CompSt::Error;
                }
                self.reset_retry_counters();
                CompSt::Atomic
            }
            Opcode::RC_ACKNOWLEDGE => match syn {
                Some(Syndrome::Ack { .. }) => {
                    self.reset_retry_counters();
                    CompSt::WriteSend
                }
                Some(Syndrome::RnrNak { .. }) => {
                    ctx.ctr.rcvd_rnr_err += 1;
                    CompSt::RnrRetry
                }
                Some(Syndrome::Nak(code)) => {
                    let status = match code {
                        NakCode::PsnSeqError => {
                            if psn.diff(self.comp.psn) > 0 {
                                ctx.ctr.rcvd_seq_err += 1;
                                self.comp.psn = psn;
                                return CompSt::NakRetry;
                            }
                            return CompSt::ErrorRetry;
                        }
                        NakCode::InvalidRequest => WcStatus::RemInvReqErr,
                        NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                        _ => WcStatus::RemOpErr,
                    };
                    self.sq.get_mut(h).status = status;
                    CompSt::Error
                }
                _ => CompSt::Error,
            },
            _ => CompSt::Error,
        }
    }

    /// rxe `do_read`: place read-response payload by PSN; done on the last response.
    fn do_read(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>) -> CompSt {
        let h = self.sq.head;
        let w = *self.sq.get(h);
        let psn = p.bth().psn();
        let off = psn.diff(w.orig_first_psn).max(0) as u64 * self.mtu as u64;
        let data = p.payload();
        let end = off + data.len() as u64;
        let ok = end <= w.length as u64
            && ctx
                .mrs
                .scatter(self.pd, self.sq.sges_of(h), off, data)
                .is_ok();
        if !ok {
            let f = ctx.mrs.classify_sges(
                self.pd,
                self.sq.sges_of(h),
                AccessFlags::LOCAL_WRITE,
                off,
                data.len() as u64,
            );
            if let Some(f) = f {
                ctx.diag(self.qpn, crate::diag::Diagnostic::LocalProtection(f));
            }
            self.sq.get_mut(h).status = WcStatus::LocProtErr;
            return CompSt::Error;
        }
        if p.info().flags.contains(OpFlags::END) && end == w.length as u64 {
            CompSt::CompAck
        } else {
            CompSt::UpdateComp
        }
    }

    /// rxe `do_atomic`: the original value (host order) goes to the 8-byte local SGE.
    fn do_atomic(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>) -> CompSt {
        let h = self.sq.head;
        let orig = p.atomic_ack_eth().map_or(0, |a| a.orig());
        if ctx
            .mrs
            .scatter(self.pd, self.sq.sges_of(h), 0, &orig.to_ne_bytes())
            .is_err()
        {
            let f =
                ctx.mrs
                    .classify_sges(self.pd, self.sq.sges_of(h), AccessFlags::LOCAL_WRITE, 0, 8);
            if let Some(f) = f {
                ctx.diag(self.qpn, crate::diag::Diagnostic::LocalProtection(f));
            }
            self.sq.get_mut(h).status = WcStatus::LocProtErr;
            return CompSt::Error;
        }
        CompSt::CompAck
    }

    /// rxe `COMPST_ERROR_RETRY`.
    fn error_retry(&mut self, ctx: &mut Ctx<'_>, why: Trigger) -> CompSt {
        if self.sq.head == self.sq.tail || self.sq.get(self.sq.head).state == WqeState::Posted {
            return CompSt::Done;
        }
        // rxe starts no second retry before a positive response ends the first, except on a
        // timeout. Deviation: a PSN-sequence NAK that acknowledges new PSNs reports a new gap
        // (the responder NAKs once per gap, and this one lies in what the retry resent), so it
        // starts a retry from there too; rxe ignores it and waits for the local ACK timer.
        if self.comp.started_retry && why == Trigger::Nak {
            return CompSt::Done;
        }
        if self.comp.retry_cnt > 0 {
            if self.comp.retry_cnt != 7 {
                // A timeout uses one retry per period of the QP's `timeout` it waited, so a
                // backed-off timer does not stretch the time a dead peer takes to fail.
                let used = match why {
                    Trigger::Timeout => 1u8 << self.comp.backoff,
                    _ => 1,
                };
                self.comp.retry_cnt = self.comp.retry_cnt.saturating_sub(used);
            }
            if why == Trigger::Timeout && self.may_probe() {
                // Deviation 16: the first timeout sends one probe instead of the whole window.
                ctx.ctr.completer_retry_err += 1;
                ctx.ctr.retry_timeouts += 1;
                self.back_off();
                self.req.probe_due = true;
                self.req.probe_hi = Some(self.req.psn_hi);
                return CompSt::Done;
            }
            if why == Trigger::Timeout && self.req.probe_hi.is_none() {
                self.req.probe_hi = Some(self.req.psn_hi);
            }
            if self.req.psn.diff(self.comp.psn) > 0 {
                ctx.ctr.completer_retry_err += 1;
                if why == Trigger::Timeout {
                    ctx.ctr.retry_timeouts += 1;
                    self.back_off();
                }
                self.req.need_retry = true;
                self.req.dup_next_retry = why != Trigger::Timeout;
                self.comp.started_retry = true;
                self.req.window_cut();
            }
            CompSt::Done
        } else {
            // (counted in retry_exceeded_err by the diagnostic)
            let d = Diagnostic::RetryExceeded {
                peer: self.peer_ip(),
                dest_qpn: self.attr.dest_qp_num,
                retry_cnt: self.attr.retry_cnt,
            };
            ctx.diag(self.qpn, d);
            let h = self.sq.head;
            self.sq.get_mut(h).status = WcStatus::RetryExcErr;
            CompSt::Error
        }
    }

    /// A local ACK timeout doubles the timer, up to four periods, when it is the first since
    /// everything sent was last acknowledged, or when the peer answered anything since the
    /// previous timeout: it is alive but slower than one period. Silence keeps the period.
    /// Each timeout uses up one retry per period waited (`error_retry`), so a finite
    /// `retry_cnt` still ends a dead connection after about `timeout × (retry_cnt + 1)`, as in
    /// rxe (deviation 16).
    fn back_off(&mut self) {
        if std::mem::take(&mut self.comp.answered) || self.req.probe_hi.is_none() {
            self.comp.backoff = (self.comp.backoff + 1).min(MAX_RETRANS_BACKOFF);
        }
    }

    /// A local ACK timeout may be answered with a probe (deviation 16): no probe since the
    /// last time everything sent was acknowledged, no retry under way, and the oldest
    /// outstanding WQE is a SEND or WRITE (a READ's probe would be a re-read, whose response
    /// replays the rest anyway) all of whose packets the requester still has in order.
    fn may_probe(&self) -> bool {
        if self.req.probe_hi.is_some()
            || self.req.need_retry
            || self.req.psn != self.req.psn_hi
            || self.sq.head == self.sq.tail
        {
            return false;
        }
        let w = self.sq.get(self.sq.head);
        matches!(w.state, WqeState::Pending | WqeState::Processing)
            && (w.opcode.is_send() || w.opcode.is_write())
    }

    /// Timer expiry: the local ACK timeout and the RNR NAK timer.
    pub(crate) fn on_timeout(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let expired = self.comp.timers.take_expired(now);
        if expired.rnr {
            self.req.wait_rnr = false;
            self.req.need_retry = true;
        }
        if expired.retrans
            && self.qp_type == QpType::Rc
            && matches!(self.state, QpState::Rts | QpState::Sqd)
        {
            if self.error_retry(ctx, Trigger::Timeout) == CompSt::Error {
                let h = self.sq.head;
                self.complete_head(ctx);
                let _ = h;
                self.to_error(ctx);
            } else {
                if self.req.psn.diff(self.comp.psn) > 0 && !self.req.need_retry {
                    self.arm_retrans(now);
                }
                self.report_stall(ctx, now);
            }
        }
    }

    /// `retry_cnt` 7 retries forever, as in rxe, so a dead peer would leave the QP's work
    /// waiting without a word: once a stall has lasted [`STALL_REPORT_NS`] (no response
    /// acknowledged anything since the later of the last progress and the moment the wait
    /// began), say so, once per stall.
    fn report_stall(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        if self.attr.retry_cnt != 7 || self.comp.stall_reported {
            return;
        }
        let since = self.comp.last_progress.max(self.comp.busy_since);
        if now.0.saturating_sub(since) < STALL_REPORT_NS {
            return;
        }
        if self.tx.is_none() {
            return;
        }
        let peer = self.peer_ip();
        self.comp.stall_reported = true;
        let dest_qpn = self.attr.dest_qp_num;
        ctx.diag(self.qpn, Diagnostic::RetryingForever { peer, dest_qpn });
    }

    /// The address this connected QP sends to (unspecified before it has a path).
    fn peer_ip(&self) -> std::net::IpAddr {
        self.tx
            .as_ref()
            .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |t| {
                t.dst_ip
            })
    }
}
