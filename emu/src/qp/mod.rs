//! Queue pairs: state, attributes and the modify-QP state machine (IBA 11.2.5 / kernel
//! `qp_state_table`, rxe `rxe_qp_from_attr`). The three transport engines live beside this file,
//! one idea each, as in rxe: [`requester`] turns WQEs into packets, [`responder`] executes inbound
//! requests and produces ACKs / read responses, [`completer`] consumes responses, retries and
//! completes send WQEs.
pub(crate) mod completer;
mod ctx;
mod jobs;
mod modify;
mod packet;
mod path;
pub(crate) mod requester;
pub(crate) mod responder;
mod response;
pub(crate) mod table;
mod timers;

pub(crate) use ctx::{Ctx, Shared};
use modify::modify_is_ok;
pub(crate) use path::Path;

use crate::queue::{RecvQueue, SendQueue};
use crate::time::Instant;
use crate::verbs::*;
use crate::{Cq, Error, Pd, Result, Srq};
use roce_wire::{Opcode, Psn};

/// RXE_MAX_UNACKED_PSNS.
pub const MAX_UNACKED_PSNS: u32 = 128;
/// RXE_MAX_PKT_PER_ACK.
pub(crate) const MAX_PKT_PER_ACK: u32 = 64;
/// Smallest limit on unacknowledged PSNs the requester's loss response goes down to
/// ([`ReqState::window`]), unless [`NicConfig::min_unacked_psns`](crate::NicConfig) says
/// otherwise.
pub const MIN_UNACKED_PSNS: u32 = 32;
/// Depth of the per-QP responder output queue (ACK/NAK, read and atomic responses).
pub(crate) const RESP_JOBS: usize = 64;

/// Requester variables (rxe `qp->req`).
#[derive(Debug)]
pub(crate) struct ReqState {
    pub psn: Psn,
    pub noack_pkts: u32,
    /// Free initiator-depth credits.
    pub rd_atomic: u32,
    pub need_retry: bool,
    pub wait_rnr: bool,
    /// One past the highest PSN ever transmitted (`psn` rewinds on retry; this does not).
    /// Responses at or beyond it answer nothing we sent and are ignored.
    pub psn_hi: Psn,
    /// Limit on unacknowledged PSNs (RC). rxe always uses [`MAX_UNACKED_PSNS`]; we halve it
    /// when a retry starts (PSN-sequence NAK or local ACK timeout), down to `floor`
    /// ([`MIN_UNACKED_PSNS`] by default), and grow it back by one per `window` PSNs acknowledged, so that
    /// go-back-N after a loss resends a smaller window (a deliberate deviation, emu README).
    pub window: u32,
    /// The lowest `window` goes (`MAX_UNACKED_PSNS`: never below rxe's fixed limit).
    pub floor: u32,
    /// PSNs acknowledged since the window last grew.
    pub window_acked: u32,
    /// The pending retry answers a PSN-sequence NAK (not the local ACK timer, not an RNR
    /// NAK): its first packet goes out twice (see [`ReqState::dup_head`]).
    pub dup_next_retry: bool,
    /// The first packet of the retry in progress, to be sent a second time right after the
    /// first copy when it is a SEND/WRITE packet: the responder NAKs a gap only once, so a
    /// lost retransmission would otherwise leave it silent until the local ACK timer fires;
    /// a copy that arrives as a duplicate costs one packet and one re-ACK.
    pub dup_head: Option<Psn>,
    /// A local ACK timeout asked for a probe: one copy of the oldest unacknowledged packet,
    /// with AckReq, sent without rewinding the requester (deviation 16).
    pub probe_due: bool,
    /// After a local ACK timeout: `psn_hi` at that moment. Until everything up to it is
    /// acknowledged, a further timeout rewinds the whole window (go-back-N, as rxe on every
    /// timeout) instead of probing.
    pub probe_hi: Option<Psn>,
    /// The packet being built is a probe: set AckReq.
    pub force_ack_req: bool,
}

impl Default for ReqState {
    fn default() -> Self {
        ReqState {
            psn: Psn::default(),
            noack_pkts: 0,
            rd_atomic: 0,
            need_retry: false,
            wait_rnr: false,
            psn_hi: Psn::default(),
            window: MAX_UNACKED_PSNS,
            floor: MIN_UNACKED_PSNS,
            window_acked: 0,
            dup_next_retry: false,
            dup_head: None,
            probe_due: false,
            probe_hi: None,
            force_ack_req: false,
        }
    }
}

impl ReqState {
    /// A retry starts: halve the window (not below `floor`).
    pub(crate) fn window_cut(&mut self) {
        self.window = (self.window / 2).max(self.floor);
        self.window_acked = 0;
    }

    /// `n` more PSNs were acknowledged: grow by one per window's worth, up to rxe's limit.
    pub(crate) fn window_grow(&mut self, n: u32) {
        if self.window >= MAX_UNACKED_PSNS {
            return;
        }
        self.window_acked += n;
        while self.window_acked >= self.window && self.window < MAX_UNACKED_PSNS {
            self.window_acked -= self.window;
            self.window += 1;
        }
    }
}

/// Completer variables (rxe `qp->comp`).
#[derive(Debug, Default)]
pub(crate) struct CompState {
    pub psn: Psn,
    pub opcode: Option<Opcode>,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub started_retry: bool,
    /// The local ACK and RNR NAK timers.
    pub timers: Timers,
    /// Local ACK timer back-off: the timer runs `timeout_ns << backoff`, 0 ..=
    /// [`MAX_RETRANS_BACKOFF`] (deviation 16, emu README).
    pub backoff: u8,
    /// When a response last acknowledged something, in virtual nanoseconds.
    pub last_progress: u64,
    /// When the requester last sent a new packet while nothing was outstanding (the wait for a
    /// response began), in virtual nanoseconds. A stall is measured from the later of this and
    /// `last_progress`.
    pub busy_since: u64,
    /// The current stall has been reported ([`Diagnostic::RetryingForever`](crate::Diagnostic));
    /// cleared by progress.
    pub stall_reported: bool,
    /// A response for a PSN this QP sent arrived since the last local ACK timeout.
    pub answered: bool,
}

/// Most doublings of the local ACK timer after timeouts without a response: 2, so the timer
/// runs at most four times the QP's `timeout`, the range IBA allows the transport timer.
pub(crate) const MAX_RETRANS_BACKOFF: u8 = 2;

pub(crate) use timers::{Timers, NEVER};

/// A responder resource: what a duplicate READ, atomic, FLUSH or ATOMIC WRITE needs to be
/// replayed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Resource {
    pub valid: bool,
    pub atomic: bool,
    /// A FLUSH or ATOMIC WRITE: replayed as a zero-length READ response, never re-executed.
    pub ack_only: bool,
    pub first_psn: Psn,
    pub last_psn: Psn,
    pub va: u64,
    pub rkey: u32,
    pub length: u32,
    pub orig: u64,
}

/// One queued responder output.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Job {
    Ack {
        psn: Psn,
        syndrome: u8,
        msn: u32,
    },
    AtomicAck {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
    Read {
        psn: Psn,
        va: u64,
        rkey: u32,
        resid: u32,
        first: bool,
        msn: u32,
    },
}

/// Responder variables (rxe `qp->resp`).
#[derive(Debug, Default)]
pub(crate) struct RespState {
    pub psn: Psn,
    pub ack_psn: Psn,
    pub msn: u32,
    pub opcode: Option<Opcode>,
    pub sent_psn_nak: bool,
    pub drop_msg: bool,
    /// Bytes of the current inbound SEND placed so far (including the UD GRH).
    pub send_off: u32,
    /// A receive WQE taken from the SRQ for the current message.
    pub srq_wqe: Option<(u64, u64)>,
    pub srq_sges: Vec<Sge>,
    /// The RQ head WQE belongs to the current message (RWR seen).
    pub wqe_held: bool,
    /// RDMA WRITE context.
    pub va: u64,
    pub rkey: u32,
    pub resid: u32,
    pub offset: u32,
    pub length: u32,
    pub resources: Vec<Resource>,
    pub res_head: usize,
    pub jobs: jobs::JobRing,
}

/// A queue pair.
pub(crate) struct Qp {
    pub qpn: u32,
    pub qp_type: QpType,
    pub state: QpState,
    pub pd: Pd,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub srq: Option<Srq>,
    pub sq_sig_all: bool,
    pub cap: QpCap,
    pub attr: QpAttr,
    pub mtu: u32,
    /// The path of a connected QP, as the transmit record (length 0) of every datagram on it.
    pub tx: Option<crate::net::Transmit>,
    pub src_port: u16,
    pub timeout_ns: Option<u64>,
    pub sq: SendQueue,
    pub rq: Option<RecvQueue>,
    pub req: ReqState,
    pub comp: CompState,
    pub resp: RespState,
    pub in_ready: bool,
    pub sq_drained_pending: bool,
}

impl Qp {
    pub fn new(qpn: u32, pd: Pd, init: &QpInitAttr, src_port: u16) -> Qp {
        let cap = init.cap;
        Qp {
            qpn,
            qp_type: init.qp_type,
            state: QpState::Reset,
            pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: init.srq,
            sq_sig_all: init.sq_sig_all,
            cap,
            attr: QpAttr {
                port_num: 1,
                ..Default::default()
            },
            mtu: 256,
            tx: None,
            src_port,
            timeout_ns: None,
            sq: SendQueue::new(cap.max_send_wr, cap.max_send_sge, cap.max_inline_data),
            rq: init
                .srq
                .is_none()
                .then(|| RecvQueue::new(cap.max_recv_wr, cap.max_recv_sge)),
            req: ReqState::default(),
            comp: CompState::default(),
            resp: RespState {
                jobs: jobs::JobRing::with_capacity(RESP_JOBS),
                ..Default::default()
            },
            in_ready: false,
            sq_drained_pending: false,
        }
    }

    /// Effective MTU for segmentation (rxe `get_mtu`: path MTU for RC/UC, port MTU for UD).
    pub fn seg_mtu(&self, port_mtu: u32) -> u32 {
        if self.qp_type == QpType::Ud {
            port_mtu
        } else {
            self.mtu
        }
    }

    pub fn set_state(&mut self, s: QpState) {
        if self.state != s {
            tracing::trace!(qpn = self.qpn, from = ?self.state, to = ?s, "qp state");
        }
        self.state = s;
    }

    /// Applies `attr` under `mask` (already validated). rxe `rxe_qp_from_attr`.
    pub fn modify(
        &mut self,
        ctx: &mut Ctx<'_>,
        attr: &QpAttr,
        mask: QpAttrMask,
        max_mtu: Mtu,
    ) -> Result<()> {
        use QpAttrMask as M;
        let cur = if mask.contains(M::CUR_STATE) {
            attr.cur_qp_state
        } else {
            self.state
        };
        let next = if mask.contains(M::STATE) {
            attr.qp_state
        } else {
            cur
        };
        if !modify_is_ok(cur, next, self.qp_type, mask) {
            return Err(Error::Invalid);
        }
        // rxe_qp_chk_attr
        if mask.contains(M::PORT) && attr.port_num != 1 {
            return Err(Error::Invalid);
        }
        if mask.contains(M::PATH_MTU) && attr.path_mtu > max_mtu {
            return Err(Error::Invalid);
        }
        if mask.contains(M::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > 128 {
            return Err(Error::Invalid);
        }
        if mask.contains(M::MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > 128 {
            return Err(Error::Invalid);
        }
        if mask.contains(M::TIMEOUT) && attr.timeout > 31 {
            return Err(Error::Invalid);
        }
        if mask.contains(M::RETRY_CNT) && attr.retry_cnt > 7
            || mask.contains(M::RNR_RETRY) && attr.rnr_retry > 7
        {
            return Err(Error::Invalid);
        }
        if mask.contains(M::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
            return Err(Error::Invalid);
        }
        if mask.contains(M::PKEY_INDEX) && attr.pkey_index != 0 {
            return Err(Error::Invalid);
        }
        let path = if mask.contains(M::AV) {
            match Path::from_av(&attr.ah_attr, &ctx.gids) {
                Ok(p) => Some(p),
                Err(problem) => {
                    let d = crate::diag::av_refused("ibv_modify_qp", problem, &ctx.gids);
                    ctx.diag(self.qpn, d);
                    return Err(problem.error());
                }
            }
        } else {
            None
        };
        // apply
        let a = &mut self.attr;
        if mask.contains(M::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if mask.contains(M::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if mask.contains(M::PORT) {
            a.port_num = attr.port_num;
        }
        if mask.contains(M::QKEY) {
            a.qkey = attr.qkey;
        }
        if mask.contains(M::AV) {
            a.ah_attr = attr.ah_attr;
            self.tx = path.map(|p| requester::transmit_on(&p, self.src_port));
        }
        if mask.contains(M::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
            self.mtu = attr.path_mtu.bytes();
        }
        if mask.contains(M::TIMEOUT) {
            a.timeout = attr.timeout;
            self.timeout_ns = crate::time::local_ack_timeout_ns(attr.timeout);
        }
        if mask.contains(M::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt;
            self.comp.retry_cnt = attr.retry_cnt;
        }
        if mask.contains(M::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
            self.comp.rnr_retry = attr.rnr_retry;
        }
        if mask.contains(M::RQ_PSN) {
            a.rq_psn = attr.rq_psn & Psn::MASK;
            self.resp.psn = Psn::new(attr.rq_psn);
        }
        if mask.contains(M::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(M::SQ_PSN) {
            a.sq_psn = attr.sq_psn & Psn::MASK;
            self.req.psn = Psn::new(attr.sq_psn);
            self.req.psn_hi = self.req.psn;
            self.comp.psn = self.req.psn;
        }
        if mask.contains(M::MAX_QP_RD_ATOMIC) {
            let v = if attr.max_rd_atomic == 0 {
                0
            } else {
                (attr.max_rd_atomic as u32).next_power_of_two()
            };
            a.max_rd_atomic = v as u8;
            self.req.rd_atomic = v;
        }
        if mask.contains(M::MAX_DEST_RD_ATOMIC) {
            let v = if attr.max_dest_rd_atomic == 0 {
                0
            } else {
                (attr.max_dest_rd_atomic as u32).next_power_of_two()
            };
            a.max_dest_rd_atomic = v as u8;
            self.resp.resources = vec![Resource::default(); v as usize];
            self.resp.res_head = 0;
        }
        if mask.contains(M::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num & Psn::MASK;
        }
        if mask.contains(M::EN_SQD_ASYNC_NOTIFY) {
            a.en_sqd_async_notify = attr.en_sqd_async_notify;
        }
        if mask.contains(M::STATE) {
            match next {
                QpState::Reset => self.reset(),
                QpState::Err => {
                    self.resp.jobs.clear();
                    if self.state == QpState::Reset {
                        // RESET → ERR is legal (IBA 10.3.1, rxe too); nothing to flush. (A
                        // packet or a timer never moves a RESET QP: `to_error` ignores it.)
                        self.set_state(QpState::Err);
                    } else {
                        self.to_error(ctx);
                    }
                }
                QpState::Sqd => {
                    self.set_state(QpState::Sqd);
                    self.sq_drained_pending = true;
                    self.check_sq_drained(ctx);
                }
                s => self.set_state(s),
            }
        }
        Ok(())
    }

    /// rxe `rxe_qp_reset`: queues emptied without completions, transport state cleared.
    pub fn reset(&mut self) {
        self.set_state(QpState::Reset);
        self.sq.clear();
        if let Some(rq) = &mut self.rq {
            rq.clear();
        }
        let psn = self.req.psn;
        self.req = ReqState {
            psn,
            psn_hi: psn,
            rd_atomic: self.attr.max_rd_atomic as u32,
            ..Default::default()
        };
        self.comp = CompState {
            psn,
            retry_cnt: self.attr.retry_cnt,
            rnr_retry: self.attr.rnr_retry,
            ..Default::default()
        };
        let jobs = std::mem::take(&mut self.resp.jobs);
        let mut resources = std::mem::take(&mut self.resp.resources);
        resources.iter_mut().for_each(|r| *r = Resource::default());
        let srq_sges = std::mem::take(&mut self.resp.srq_sges);
        self.resp = RespState {
            psn: self.resp.psn,
            resources,
            srq_sges,
            jobs,
            ..Default::default()
        };
        self.resp.jobs.clear();
    }

    /// Moves to ERR and flushes every outstanding WQE (rxe `rxe_qp_error` + flush).
    #[allow(clippy::wrong_self_convention)]
    pub fn to_error(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Reset {
            return;
        }
        let was = self.state;
        self.set_state(QpState::Err);
        self.comp.timers.disarm_all();
        self.flush(ctx);
        if was != QpState::Err && self.srq.is_some() {
            ctx.events.push_back(AsyncEvent::Qp {
                qpn: self.qpn,
                event: EventType::QpLastWqeReached,
            });
        }
    }

    /// In ERR: completes every SQ and RQ WQE with WR_FLUSH_ERR (or the WQE's own error).
    pub fn flush(&mut self, ctx: &mut Ctx<'_>) {
        while self.sq.head != self.sq.tail {
            let h = self.sq.head;
            let w = self.sq.get_mut(h);
            if w.status == WcStatus::Success {
                w.status = WcStatus::WrFlushErr;
            }
            self.complete_head(ctx);
        }
        self.sq.req = self.sq.head;
        if let Some(rq) = &mut self.rq {
            while let Some((w, _)) = rq.front() {
                let wc = WorkCompletion {
                    wr_id: w.wr_id,
                    status: WcStatus::WrFlushErr,
                    qp_num: self.qpn,
                    ..Default::default()
                };
                rq.pop();
                ctx.cq_post(self.recv_cq, wc, false);
            }
        }
        if let Some((wr_id, _)) = self.resp.srq_wqe.take() {
            let wc = WorkCompletion {
                wr_id,
                status: WcStatus::WrFlushErr,
                qp_num: self.qpn,
                ..Default::default()
            };
            ctx.cq_post(self.recv_cq, wc, false);
        }
    }

    /// rxe `do_complete` for the head of the SQ: posts a CQE when signaled or failed.
    pub fn complete_head(&mut self, ctx: &mut Ctx<'_>) {
        let h = self.sq.head;
        // (the fields the completion needs, not a copy of the whole WQE)
        let w = self.sq.get(h);
        let (status, opcode) = (w.status, w.opcode);
        if w.has_rd_atomic {
            // a FLUSH or ATOMIC WRITE completed by a later ACK (implicitly, as rxe completes
            // it) still holds its initiator depth credit (rxe leaks it)
            self.sq.get_mut(h).has_rd_atomic = false;
            self.req.rd_atomic += 1;
        }
        let w = self.sq.get(h);
        let post =
            self.sq_sig_all || w.flags.contains(SendFlags::SIGNALED) || status != WcStatus::Success;
        if post {
            let mut wc = WorkCompletion {
                wr_id: w.wr_id,
                status,
                qp_num: self.qpn,
                ..Default::default()
            };
            if status == WcStatus::Success {
                wc.opcode = opcode.wc_opcode();
                wc.byte_len = w.length;
                if opcode.has_imm() {
                    wc.wc_flags = WcFlags::WITH_IMM;
                }
            }
            // on error rxe leaves opcode/byte_len zero (the uverbs WC is zeroed)
            ctx.cq_post(self.send_cq, wc, false);
        }
        self.sq.head = h.wrapping_add(1);
        if self.sq.req.wrapping_sub(self.sq.head) > self.sq.cap() {
            self.sq.req = self.sq.head;
        }
        if status == WcStatus::Success && opcode.is_send() {
            ctx.ctr.rdma_sends += 1;
        }
    }

    /// SQD: raise SQ_DRAINED once nothing is outstanding.
    pub fn check_sq_drained(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Sqd && self.sq_drained_pending && self.sq.req == self.sq.head {
            let started = self.sq.req == self.sq.tail
                || self.sq.get(self.sq.req).state == crate::queue::WqeState::Posted;
            if started {
                self.sq_drained_pending = false;
                if self.attr.en_sqd_async_notify {
                    ctx.events.push_back(AsyncEvent::Qp {
                        qpn: self.qpn,
                        event: EventType::SqDrained,
                    });
                }
            }
        }
    }

    /// Live attributes (`query_qp`).
    pub fn query(&self) -> QpAttr {
        let mut a = self.attr;
        a.qp_state = self.state;
        a.cur_qp_state = self.state;
        a.sq_psn = self.req.psn.value();
        a.rq_psn = self.resp.psn.value();
        a.cap = self.cap;
        a.sq_draining = self.state == QpState::Sqd && self.sq_drained_pending;
        a
    }

    /// False only when both [`Qp::responder_next`] and [`Qp::requester_next`] would return
    /// `None` without touching any state: no queued response, no retry pending, no WQE left
    /// for the requester. Lets `poll_transmit` drop an idle QP from the ready queue cheaply.
    #[inline]
    pub fn may_transmit(&self) -> bool {
        !self.resp.jobs.is_empty()
            || self.req.need_retry
            || self.req.dup_head.is_some()
            || self.req.probe_due
            || self.sq.req != self.sq.tail
    }

    /// Earliest armed timer, in virtual nanoseconds ([`NEVER`] when none is armed).
    #[inline]
    pub fn deadline(&self) -> u64 {
        self.comp.timers.deadline()
    }

    /// Earliest armed timer.
    #[inline]
    pub fn next_timeout(&self) -> Option<Instant> {
        self.comp.timers.next()
    }

    /// Bytes of per-QP state, excluding queue storage.
    pub fn state_bytes(&self) -> usize {
        std::mem::size_of::<Qp>()
    }

    /// Bytes of queue storage (SQ, RQ, responder resources and response queue).
    pub fn queue_bytes(&self) -> usize {
        use std::mem::size_of;
        let sq = self.sq.wqes.len() * size_of::<crate::queue::SendWqe>()
            + self.sq.sges.len() * size_of::<Sge>()
            + self.sq.inline.len();
        let rq = self.rq.as_ref().map_or(0, |r| {
            r.wqes.len() * size_of::<crate::queue::RecvWqe>() + r.sges.len() * size_of::<Sge>()
        });
        sq + rq
            + self.resp.resources.capacity() * size_of::<Resource>()
            + self.resp.jobs.capacity() * size_of::<Job>()
            + self.resp.srq_sges.capacity() * size_of::<Sge>()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn qp_state_is_small() {
        assert!(
            std::mem::size_of::<Qp>() <= 4096,
            "{}",
            std::mem::size_of::<Qp>()
        );
    }
}
