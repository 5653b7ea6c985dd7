//! The requester (rxe `rxe_req.c`): turns send WQEs into request packets. Segmentation by MTU
//! with FIRST/MIDDLE/LAST/ONLY (A.8), one PSN per packet and `ceil(len/MTU)` PSNs per READ,
//! the AckReq cadence (A.9), the window (128 PSNs as rxe, adaptive under loss), initiator-depth
//! credits, fences, and the retry rewind to `comp.psn` (C.4), whose first packet a NAK retry
//! sends twice.
use super::packet::RequestHeaders;
use super::{Ctx, Path, Qp, MAX_PKT_PER_ACK, MAX_UNACKED_PSNS};
use crate::net::Transmit;
use crate::queue::WqeState;
use crate::time::Instant;
use crate::verbs::*;
use roce_wire::opcode::Transport;
use roce_wire::transport::Repr;
use roce_wire::{OpFlags, Opcode};

/// Writes `repr`'s headers into `buf`; `None` when the buffer is too small.
#[inline]
pub(crate) fn emit_headers(repr: &Repr, buf: &mut [u8]) -> Option<usize> {
    repr.emit_into(buf)
}

/// The transmit record of a datagram on `path` from UDP port `sport` (length and IPv4 ID are
/// [`seal`]'s to fill in).
pub(crate) fn transmit_on(path: &Path, sport: u16) -> Transmit {
    Transmit {
        ipv4_id: 0,
        src_ip: path.src_ip,
        dst_ip: path.dst_ip,
        src_port: sport,
        dst_port: roce_wire::ROCE_V2_UDP_PORT,
        tos: path.tos,
        ttl: path.ttl,
        flow_label: path.flow_label,
        len: 0,
    }
}

/// Fills the ICRC over `buf[..len]` for a datagram on the path of `t`, sent with IPv4
/// identification `ipv4_id`; returns `len` (`None` when it cannot be sealed).
///
/// The engine's per-packet functions return only the length: the caller builds the
/// [`Transmit`] at the end from the QP's record (`Qp::tx`, or the UD one), written long
/// before. Building it here and handing it up by value meant copying a record just written
/// field by field, and those copies stalled on store forwarding (measured with `perf`: the
/// largest single costs of the SimNet hand-off and of sealing).
#[inline(always)]
pub(crate) fn seal(t: &Transmit, ipv4_id: u16, buf: &mut [u8], len: usize) -> Option<usize> {
    crate::net::fill_icrc_of(t.src_ip, t.dst_ip, t.src_port, ipv4_id, &mut buf[..len])
        .then_some(len)
}

fn transport_of(t: QpType) -> Transport {
    match t {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud => Transport::Ud,
    }
}

/// rxe `next_opcode`: the request opcode for a packet of `op` that continues (`cont`) a
/// message or starts it, and whether the rest `fits` in this packet.
fn next_opcode(t: QpType, op: WrOpcode, cont: bool, fits: bool) -> Opcode {
    let low: u8 = match op {
        WrOpcode::RdmaWrite => match (cont, fits) {
            (false, true) => 0x0A,
            (false, false) => 0x06,
            (true, true) => 0x08,
            (true, false) => 0x07,
        },
        WrOpcode::RdmaWriteWithImm => match (cont, fits) {
            (false, true) => 0x0B,
            (false, false) => 0x06,
            (true, true) => 0x09,
            (true, false) => 0x07,
        },
        WrOpcode::Send => match (cont, fits) {
            (false, true) => 0x04,
            (false, false) => 0x00,
            (true, true) => 0x02,
            (true, false) => 0x01,
        },
        WrOpcode::SendWithImm => match (cont, fits) {
            (false, true) => 0x05,
            (false, false) => 0x00,
            (true, true) => 0x03,
            (true, false) => 0x01,
        },
        WrOpcode::SendWithInv => match (cont, fits) {
            (false, true) => 0x17,
            (false, false) => 0x00,
            (true, true) => 0x16,
            (true, false) => 0x01,
        },
        WrOpcode::RdmaRead => 0x0C,
        WrOpcode::AtomicCmpAndSwp => 0x13,
        WrOpcode::AtomicFetchAndAdd => 0x14,
        WrOpcode::Flush => 0x1C,
        WrOpcode::AtomicWrite => 0x1D,
        // local operations never become packets (`Qp::local_op`)
        WrOpcode::LocalInv | WrOpcode::BindMw => unreachable!("local operation"),
    };
    Opcode::with_transport(transport_of(t), low)
}

impl Qp {
    /// rxe `req_retry`: rewind to the oldest uncompleted WQE and `comp.psn`.
    pub(crate) fn req_retry(&mut self) {
        self.sq.req = self.sq.head;
        self.req.psn = self.comp.psn;
        let mut first = true;
        let mut resend_last = false;
        let mut i = self.sq.head;
        while i != self.sq.tail {
            let mtu = self.mtu;
            let comp_psn = self.comp.psn;
            let w = self.sq.get_mut(i);
            if w.state == WqeState::Posted {
                break;
            }
            if w.state != WqeState::Done {
                w.sent = 0;
                if first {
                    first = false;
                    let from = if w.opcode == WrOpcode::RdmaRead {
                        w.orig_first_psn
                    } else {
                        w.first_psn
                    };
                    let npsn = comp_psn.diff(from);
                    if (w.opcode.is_send() || w.opcode.is_write() || w.opcode == WrOpcode::RdmaRead)
                        && npsn > 0
                    {
                        w.sent = (npsn as u64 * mtu as u64).min(w.length as u64) as u32;
                        if w.sent == w.length && w.opcode != WrOpcode::RdmaRead {
                            // Every packet was acknowledged (an ACK of the last one arrived
                            // after the WQE had been rewound and partly resent, so it did not
                            // complete it): resend the last one, with its own PSN. From
                            // `comp.psn` it went out with the next message's first PSN, and
                            // the responder NAKed it as an invalid request (a LAST with no
                            // FIRST): REM_INV_REQ_ERR under loss + reordering (tools matrix).
                            w.sent = w.length.saturating_sub(1) / mtu * mtu;
                            resend_last = true;
                        }
                    }
                }
                w.state = WqeState::Posted;
            }
            i = i.wrapping_add(1);
        }
        if resend_last {
            self.req.psn = self.comp.psn - 1;
        }
    }

    /// Produces the next request packet into `buf`, or `None` when the requester must wait.
    pub(crate) fn requester_next(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<usize> {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || self.req.wait_rnr {
            return None;
        }
        if self.req.probe_due {
            self.req.probe_due = false;
            if !self.req.need_retry {
                if let Some(n) = self.send_probe(ctx, now, buf) {
                    return Some(n);
                }
            }
        }
        let mut dup = false;
        if self.req.need_retry || self.req.dup_head.is_some() {
            dup = self.rewind();
        }
        loop {
            if self.sq.req == self.sq.tail {
                return None;
            }
            let i = self.sq.req;
            let w = self.sq.get(i);
            let (opcode, length, sent) = (w.opcode, w.length, w.sent);
            if w.state == WqeState::Posted && w.sent == 0 {
                if self.state == QpState::Sqd {
                    return None;
                }
                // IBA 10.8.3.3: wait until every *earlier* READ/atomic has completed. (rxe
                // compares the free credit count with max_rd_atomic, which after a retry also
                // counts credits held by later WQEs and can deadlock; we look at the WQEs.)
                if w.flags.contains(SendFlags::FENCE) && self.earlier_rd_atomic_outstanding(i) {
                    return None;
                }
            }
            if opcode.is_local() {
                if w.state == WqeState::Posted {
                    self.local_op(ctx, i);
                    if self.state == QpState::Err {
                        return None;
                    }
                } else {
                    // executed before a retry rewound the requester over it
                    self.sq.req = i.wrapping_add(1);
                }
                continue;
            }
            if opcode.takes_rd_atomic_credit() && !w.has_rd_atomic {
                if self.req.rd_atomic == 0 {
                    return None;
                }
                self.req.rd_atomic -= 1;
                self.sq.get_mut(i).has_rd_atomic = true;
            }
            if self.qp_type == QpType::Rc && self.req.psn.diff(self.comp.psn + self.req.window) > 0
            {
                return None;
            }
            let mtu = self.seg_mtu(ctx.port_mtu);
            if self.qp_type == QpType::Ud && length > mtu {
                self.skip_oversized(ctx, i);
                continue;
            }
            let psn = self.req.psn;
            let t = self.build_request(ctx, now, i, mtu, buf);
            // Not a packet that takes a receive WQE (SEND FIRST/ONLY, WRITE LAST/ONLY with
            // immediate): with none posted, each copy would draw an RNR NAK and spend an RNR
            // retry.
            let takes_rwr = (opcode.is_send() && sent == 0)
                || (opcode == WrOpcode::RdmaWriteWithImm && length - sent <= mtu);
            if dup
                && t.is_some()
                && psn == self.comp.psn
                && (opcode.is_send() || opcode.is_write())
                && !takes_rwr
            {
                self.req.dup_head = Some(psn);
            }
            return t;
        }
    }

    /// The probe a local ACK timeout asked for (deviation 16): the oldest unacknowledged
    /// packet once more, with AckReq, as a rewind would send it first, after which the
    /// requester goes on from where it was. A duplicate is re-ACKed by the responder (C9-105),
    /// so a peer that is only slow answers with how far it got and nothing else is resent; a
    /// loss shows as a NAK or as a second timeout, which rewinds the whole window.
    #[cold]
    #[inline(never)]
    fn send_probe(&mut self, ctx: &mut Ctx<'_>, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.sq.head == self.sq.req && self.sq.get(self.sq.head).state == WqeState::Posted
            || self.sq.get(self.sq.head).opcode.is_local()
        {
            return None;
        }
        let (req, psn, noack) = (self.sq.req, self.req.psn, self.req.noack_pkts);
        // what req_retry changes: the WQEs from the head up to the first one not yet sent
        let mut saved = Vec::new();
        let mut i = self.sq.head;
        while i != self.sq.tail && self.sq.get(i).state != WqeState::Posted {
            saved.push((i, *self.sq.get(i)));
            i = i.wrapping_add(1);
        }
        self.req_retry();
        self.req.force_ack_req = true;
        let mtu = self.seg_mtu(ctx.port_mtu);
        let t = self.build_request(ctx, now, self.sq.head, mtu, buf);
        self.req.force_ack_req = false;
        for (i, w) in saved {
            *self.sq.get_mut(i) = w;
        }
        self.sq.req = req;
        self.req.psn = psn;
        self.req.noack_pkts = noack;
        t
    }

    /// rxe `rxe_do_local_ops`: executes the BIND_MW or LOCAL_INV WQE `i` when the requester
    /// reaches it (no packet, no PSN) and completes it in order. A failed bind completes with
    /// `IBV_WC_MW_BIND_ERR`, a failed invalidate with `IBV_WC_LOC_QP_OP_ERR`, and the QP
    /// moves to ERR, as in rxe.
    #[cold]
    #[inline(never)]
    fn local_op(&mut self, ctx: &mut Ctx<'_>, i: u32) {
        let w = *self.sq.get(i);
        let status = if w.opcode == WrOpcode::BindMw {
            let mrs = ctx.mrs;
            match ctx.s.mws.bind(mrs, self.pd, self.qpn, &w.bind()) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::MwBindErr,
            }
        } else if ctx.s.mws.invalidate(w.inv_rkey, self.pd, self.qpn, false) {
            WcStatus::Success
        } else {
            WcStatus::LocQpOpErr
        };
        self.sq.req = i.wrapping_add(1);
        let e = self.sq.get_mut(i);
        if status == WcStatus::Success {
            e.state = WqeState::Done;
            self.complete_done(ctx);
        } else {
            e.status = status;
            e.state = WqeState::Error;
            self.local_error(ctx);
        }
    }

    /// A retry (or the second copy of its first packet) is due: rewind the requester. True
    /// when the packet about to be built may have to go out twice (deviation 14).
    #[cold]
    #[inline(never)]
    fn rewind(&mut self) -> bool {
        if self.req.need_retry {
            self.req_retry();
            self.req.need_retry = false;
            self.req.dup_head = None;
            std::mem::take(&mut self.req.dup_next_retry)
        } else {
            if let Some(p) = self.req.dup_head.take() {
                // The second copy of a retry's first packet, if nothing moved since the first.
                if self.comp.psn == p && self.req.psn == p + 1 {
                    self.req_retry();
                }
            }
            false
        }
    }

    /// C10-93.1.1: a UD WQE longer than the MTU is silently "sent".
    #[cold]
    #[inline(never)]
    fn skip_oversized(&mut self, ctx: &mut Ctx<'_>, i: u32) {
        self.sq.get_mut(i).state = WqeState::Done;
        self.sq.req = i.wrapping_add(1);
        self.complete_done(ctx);
    }

    /// The local gather for WQE `i` failed: diagnose, fail the WQE, QP to error.
    #[cold]
    #[inline(never)]
    fn gather_failed(&mut self, ctx: &mut Ctx<'_>, i: u32, sent: u32, payload: u32) {
        let f = ctx.mrs.classify_sges(
            self.pd,
            self.sq.sges_of(i),
            AccessFlags::EMPTY,
            sent as u64,
            payload as u64,
        );
        if let Some(f) = f {
            ctx.diag(self.qpn, crate::diag::Diagnostic::LocalProtection(f));
        }
        let e = self.sq.get_mut(i);
        e.status = WcStatus::LocProtErr;
        e.state = WqeState::Error;
        self.sq.req = i.wrapping_add(1);
        self.local_error(ctx);
    }

    fn build_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        i: u32,
        mtu: u32,
        buf: &mut [u8],
    ) -> Option<usize> {
        let w = self.sq.get(i);
        let (wop, length, sent) = (w.opcode, w.length, w.sent);
        let resid = length - sent;
        let cont = sent > 0 && !wop.is_rd_atomic();
        let fits = resid <= mtu;
        let op = next_opcode(self.qp_type, wop, cont, fits);
        let info = op.info();
        let flags = info.flags;
        // connected QPs send on their path's transmit record; UD on each WQE's AH
        let (ud_path, dest_qp) = if self.qp_type == QpType::Ud {
            let av = w.av?;
            (Some(Path::from_av(&av, &ctx.gids).ok()?), w.remote_qpn)
        } else {
            self.tx.as_ref()?;
            (None, self.attr.dest_qp_num)
        };
        let end = flags.contains(OpFlags::END);
        let se = end
            && w.flags.contains(SendFlags::SOLICITED)
            && (wop.is_send() || wop == WrOpcode::RdmaWriteWithImm);
        let mut ack_req = false;
        if self.qp_type == QpType::Rc {
            if end || self.req.force_ack_req {
                ack_req = true;
            } else {
                let n = self.req.noack_pkts;
                self.req.noack_pkts += 1;
                // rxe: every 65th packet without one. With a reduced window, also every
                // quarter window, so that ACKs slide the window before the requester runs into
                // its edge: the pipe stays full, and a loss is followed by packets that reveal
                // it (NAK) instead of a silence only the local ACK timer ends.
                let w = self.req.window;
                ack_req = n > MAX_PKT_PER_ACK || (w < MAX_UNACKED_PSNS && n + 1 >= w / 4);
            }
            if ack_req {
                self.req.noack_pkts = 0;
            }
        }
        let payload = if flags.contains(OpFlags::PAYLOAD) {
            resid.min(mtu)
        } else {
            0
        };
        let w = self.sq.get(i);
        let hdr = RequestHeaders {
            op,
            se,
            ack_req,
            dest_qp,
            psn: self.req.psn,
            src_qp: self.qpn,
            wqe: w,
            resid,
            payload,
        };
        let len = hdr.emit(buf)?;
        if payload > 0 {
            let off = info.hdr_len as usize;
            let dst = &mut buf[off..off + payload as usize];
            let ok = if wop == WrOpcode::AtomicWrite {
                // the value's 8 bytes as the program's buffer held them (rxe copies them)
                dst.copy_from_slice(&w.compare_add.to_ne_bytes());
                true
            } else if w.inline {
                let src = self.sq.inline_of(i);
                dst.copy_from_slice(&src[sent as usize..(sent + payload) as usize]);
                true
            } else {
                ctx.mrs
                    .gather(self.pd, self.sq.sges_of(i), sent as u64, dst)
                    .is_ok()
            };
            if !ok {
                self.gather_failed(ctx, i, sent, payload);
                return None;
            }
        }
        // rxe update_wqe_psn / update_wqe_state / update_state
        let psn = self.req.psn;
        let e = self.sq.get_mut(i);
        if flags.contains(OpFlags::START) {
            let num_pkt = if wop == WrOpcode::RdmaRead || wop.is_send() || wop.is_write() {
                resid.div_ceil(mtu).max(1)
            } else {
                1
            };
            e.first_psn = psn;
            e.last_psn = psn + (num_pkt - 1);
            if sent == 0 {
                e.orig_first_psn = psn;
            }
        }
        if flags.contains(OpFlags::READ) {
            self.req.psn = e.last_psn + 1;
            e.sent = length;
        } else {
            self.req.psn = psn + 1;
            e.sent = sent + payload;
        }
        e.state = if end {
            if self.qp_type == QpType::Rc {
                WqeState::Pending
            } else {
                WqeState::Done
            }
        } else {
            WqeState::Processing
        };
        if self.req.psn.diff(self.req.psn_hi) > 0 {
            if self.comp.psn.diff(self.req.psn_hi) >= 0 {
                // nothing was outstanding: the wait for a response starts now
                self.comp.busy_since = now.0;
            }
            self.req.psn_hi = self.req.psn;
        }
        if end {
            self.sq.req = i.wrapping_add(1);
        }
        if self.qp_type == QpType::Rc && !self.comp.timers.retrans_armed() {
            self.arm_retrans(now);
        }
        let t = match &ud_path {
            Some(path) => {
                let t = transmit_on(path, self.src_port);
                let sealed = seal(&t, ctx.tx_ipv4_id, buf, len);
                ctx.ud_tx = Some(t);
                sealed
            }
            None => seal(self.tx.as_ref()?, ctx.tx_ipv4_id, buf, len),
        };
        if t.is_some() && self.qp_type != QpType::Rc && end {
            self.complete_done(ctx);
        }
        t
    }

    fn earlier_rd_atomic_outstanding(&self, i: u32) -> bool {
        let mut j = self.sq.head;
        while j != i {
            if self.sq.get(j).opcode.takes_rd_atomic_credit() {
                return true;
            }
            j = j.wrapping_add(1);
        }
        false
    }

    /// Completes `Done` WQEs at the head (UC/UD complete on transmission).
    pub(crate) fn complete_done(&mut self, ctx: &mut Ctx<'_>) {
        while self.sq.head != self.sq.req && self.sq.get(self.sq.head).state == WqeState::Done {
            self.complete_head(ctx);
        }
        self.check_sq_drained(ctx);
    }

    /// A local error on the send side: complete what precedes, fail this WQE, flush the rest.
    pub(crate) fn local_error(&mut self, ctx: &mut Ctx<'_>) {
        self.to_error(ctx);
    }
}
