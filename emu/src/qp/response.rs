//! The responder's output: its per-QP job queue (ACK/NAK, atomic ACK, READ response; a backlog
//! of positive ACKs coalesces, NAKs never do) and the packets built from it when the QP is
//! polled for transmission. READ responses read memory when each packet is built.
use super::{Ctx, Job, Qp};
use crate::verbs::*;
use roce_wire::aeth::{self, Syndrome};
use roce_wire::transport::Repr;
use roce_wire::{atomic_ack_eth, bth, OpFlags, Opcode, Psn};

/// The syndrome bytes the responder queues (a [`Job`] keeps the byte, as the packet carries it).
pub(super) mod syndrome {
    use roce_wire::aeth::{NakCode, Syndrome};
    /// rxe's ACK (credits invalid).
    pub const ACK: u8 = Syndrome::ACK.to_byte();
    /// NAK PSN sequence error.
    pub const NAK_PSN_SEQ: u8 = Syndrome::Nak(NakCode::PsnSeqError).to_byte();
    /// NAK invalid request.
    pub const NAK_INV_REQ: u8 = Syndrome::Nak(NakCode::InvalidRequest).to_byte();
    /// NAK remote access error.
    pub const NAK_REM_ACC: u8 = Syndrome::Nak(NakCode::RemoteAccessError).to_byte();
    /// NAK remote operational error.
    pub const NAK_REM_OP: u8 = Syndrome::Nak(NakCode::RemoteOperationalError).to_byte();
}

impl Qp {
    // Always inlined: an out-of-line call takes the job by reference, and reading it back as
    // two 16-byte loads right after the caller's narrower stores stalls on store forwarding
    // (measured: 3.5% of the engine benchmark's time on one load).
    #[inline(always)]
    pub(super) fn push_job(&mut self, ctx: &mut Ctx<'_>, job: Job) {
        if let (Job::Ack { syndrome: s, .. }, Some(Job::Ack { syndrome: t, .. })) =
            (job, self.resp.jobs.back())
        {
            if s == syndrome::ACK && *t == syndrome::ACK {
                // coalesce a backlog of positive ACKs: the later one acknowledges everything
                *self.resp.jobs.back_mut().expect("non-empty") = job;
                return;
            }
        }
        if !self.resp.jobs.push_back(job) {
            ctx.ctr.resp_queue_full += 1;
        }
    }

    #[inline(always)]
    pub(super) fn ack(&mut self, ctx: &mut Ctx<'_>, psn: Psn, syndrome: u8) {
        let msn = self.resp.msn;
        self.push_job(ctx, Job::Ack { psn, syndrome, msn });
    }

    /// Produces the next queued response packet (ACK/NAK, read response, atomic ACK).
    #[inline]
    pub(crate) fn responder_next(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<usize> {
        // ACK/NAK, the common job: BTH + AETH written in place, nothing else to look at
        if let Some(&Job::Ack { psn, syndrome, msn }) = self.resp.jobs.front() {
            let tx = self.tx?;
            let dqp = self.attr.dest_qp_num;
            let len = roce_wire::transport::emit_rc_ack(buf, dqp, psn, syndrome, msn)?;
            self.resp.jobs.pop_front();
            return super::requester::seal(&tx, ctx.tx_ipv4_id, buf, len);
        }
        self.responder_next_other(ctx, buf)
    }

    /// [`Qp::responder_next`] for the other jobs (atomic ACK, READ response).
    #[inline(never)]
    fn responder_next_other(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<usize> {
        loop {
            let job = *self.resp.jobs.front()?;
            let tx = self.tx?;
            let dqp = self.attr.dest_qp_num;
            let mut r;
            match job {
                Job::Ack { psn, syndrome, msn } => {
                    let len = roce_wire::transport::emit_rc_ack(buf, dqp, psn, syndrome, msn)?;
                    self.resp.jobs.pop_front();
                    return super::requester::seal(&tx, ctx.tx_ipv4_id, buf, len);
                }
                Job::AtomicAck { psn, orig, msn } => {
                    r = Repr::new(bth::Repr::new(Opcode::RC_ATOMIC_ACKNOWLEDGE, dqp, psn));
                    r.aeth = Some(aeth::Repr {
                        syndrome: Syndrome::ACK,
                        msn,
                    });
                    r.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig });
                    let len = super::requester::emit_headers(&r, buf)?;
                    self.resp.jobs.pop_front();
                    return super::requester::seal(&tx, ctx.tx_ipv4_id, buf, len);
                }
                Job::Read {
                    psn,
                    va,
                    rkey,
                    resid,
                    first,
                    msn,
                } => {
                    let mtu = self.mtu;
                    let fits = resid <= mtu;
                    let op = match (first, fits) {
                        (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                        (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                        (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                        (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                    };
                    let payload = resid.min(mtu);
                    r = Repr::new(bth::Repr::new(op, dqp, psn));
                    if op.has(OpFlags::AETH) {
                        r.aeth = Some(aeth::Repr {
                            syndrome: Syndrome::ACK,
                            msn,
                        });
                    }
                    r.set_payload_len(payload as usize);
                    let len = super::requester::emit_headers(&r, buf)?;
                    if payload > 0 {
                        match super::responder::resolve_rkey(
                            ctx.mrs,
                            &ctx.s.mws,
                            rkey,
                            self.pd,
                            self.qpn,
                            AccessFlags::REMOTE_READ,
                            va,
                            payload,
                        ) {
                            Ok((e, off)) => {
                                let h = r.header_len();
                                e.mem.read(off, &mut buf[h..h + payload as usize]);
                            }
                            Err(_) => {
                                // the MR went away under a (replayed) read: NAK, QP to error
                                self.resp.jobs.pop_front();
                                let msn = self.resp.msn;
                                // (room: one job just left)
                                self.resp.jobs.push_front(Job::Ack {
                                    psn,
                                    syndrome: syndrome::NAK_REM_ACC,
                                    msn,
                                });
                                self.to_error(ctx);
                                continue;
                            }
                        }
                    }
                    let left = resid - payload;
                    if left == 0 {
                        self.resp.jobs.pop_front();
                    } else {
                        *self.resp.jobs.front_mut().expect("job") = Job::Read {
                            psn: psn + 1,
                            va: va + payload as u64,
                            rkey,
                            resid: left,
                            first: false,
                            msn,
                        };
                    }
                    return super::requester::seal(&tx, ctx.tx_ipv4_id, buf, len);
                }
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::syndrome::*;
    use roce_wire::aeth::{NakCode, Syndrome};

    #[test]
    fn queued_syndromes_are_the_iba_bytes() {
        // IBA 9.7.5.2.1: 000xxxxx ACK (credits 0x1F = invalid), 011xxxxx NAK with its code
        assert_eq!(ACK, 0x1F);
        assert_eq!(NAK_PSN_SEQ, 0x60);
        assert_eq!(NAK_INV_REQ, 0x61);
        assert_eq!(NAK_REM_ACC, 0x62);
        assert_eq!(NAK_REM_OP, 0x63);
        assert_eq!(
            Syndrome::from_byte(NAK_REM_ACC),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert!(Syndrome::from_byte(ACK).is_ack());
    }
}
