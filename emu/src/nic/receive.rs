//! Datagram dispatch (rxe `rxe_recv.c`): the checks a received datagram passes, each failure a
//! counted drop (supported opcode, destination address, ICRC, header sanity, P_Key; QP1 to the
//! GSI; then the QP, its transport, its state, the source path or Q_Key) before the QP's
//! responder (requests) or completer (responses) sees it.
use super::Nic;
use crate::net::{IcrcPolicy, RxMeta};
use crate::qp::{Ctx, Qp};
use crate::time::Instant;
use crate::verbs::*;
use roce_wire::opcode::Transport;
use roce_wire::transport::Packet;
use roce_wire::{OpFlags, Support};

impl Nic {
    /// Feeds one received datagram (BTH..ICRC) with what the driver knows of its IP/UDP headers.
    pub fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, data: &[u8]) {
        if self.span.is_disabled() {
            self.datagram(now, meta, data)
        } else {
            let span = self.span.clone();
            let _d = span.enter();
            self.datagram(now, meta, data)
        }
    }

    #[inline(always)]
    fn datagram(&mut self, now: Instant, meta: &RxMeta, data: &[u8]) {
        let Ok(p) = Packet::new_checked(data) else {
            self.sh.ctr.malformed += 1;
            return;
        };
        let info = p.info();
        if info.support != Support::Supported || info.flags.contains(OpFlags::CNP) {
            self.sh.ctr.bad_opcode += 1;
            return;
        }
        if meta.dst_ip != self.cfg.ip && !self.sh.gids.iter().any(|g| ip_from_gid(g) == meta.dst_ip)
        {
            self.sh.ctr.bad_dst += 1;
            return;
        }
        // ICRC first: a corrupted packet must not move any state or counter but icrc_errors.
        // (matched field by field: a tuple of the three copied the 17-byte address per packet)
        let verified = match meta.ipv4_id {
            Some(id) if meta.src_ip.is_ipv4() => crate::net::verify_icrc(meta, id, data),
            _ if meta.src_ip.is_ipv6() => crate::net::verify_icrc(meta, 0, data),
            _ => match self.cfg.icrc_policy {
                IcrcPolicy::Trust => {
                    self.sh.ctr.icrc_unverified += 1;
                    true
                }
                // no solver here: an ID not recovered by the driver is a mismatch as under Strict
                IcrcPolicy::Strict | IcrcPolicy::RecoverId => {
                    self.sh.ctr.icrc_id_assumed += 1;
                    crate::net::verify_icrc(meta, 0, data)
                }
                IcrcPolicy::AssumeZeroElseAccept => {
                    self.sh.ctr.icrc_id_assumed += 1;
                    crate::net::verify_icrc(meta, 0, data) || {
                        self.sh.ctr.icrc_unverified += 1;
                        true
                    }
                }
            },
        };
        if !verified {
            self.sh.ctr.icrc_errors += 1;
            return;
        }
        // `Packet::check_well_formed` without its first test (the opcode is known and
        // supported: checked above) and without a second table lookup: TVer 0, payload + pad a
        // multiple of four, no payload unless the opcode has one.
        let body = data.len() - info.hdr_len as usize - roce_wire::ICRC_LEN;
        if p.bth().tver() != 0
            || body & 3 != 0
            || (body != 0 && !info.flags.contains(OpFlags::PAYLOAD))
        {
            debug_assert!(p.check_well_formed().is_err());
            self.sh.ctr.malformed += 1;
            return;
        }
        debug_assert!(p.check_well_formed().is_ok());
        let bth = p.bth();
        if bth.pkey() & 0x7FFF != 0x7FFF {
            self.sh.ctr.bad_pkey += 1;
            return;
        }
        let qpn = bth.dest_qp();
        if qpn == roce_wire::mad::GSI_QPN {
            if let Some(g) = self.gsi.as_mut() {
                match g.receive(now, meta, &p) {
                    Ok(()) => self.sh.ctr.gsi_rcvd += 1,
                    Err(crate::gsi::Refused::Opcode) => self.sh.ctr.bad_opcode += 1,
                    Err(crate::gsi::Refused::Qkey) => self.sh.ctr.qkey_violation += 1,
                    Err(crate::gsi::Refused::Truncated) => self.sh.ctr.gsi_truncated += 1,
                    Err(crate::gsi::Refused::Dropped) => self.sh.ctr.gsi_dropped += 1,
                }
                return;
            }
        }
        let Some(qp) = self.qps.get_mut(qpn) else {
            self.sh.ctr.no_qp += 1;
            return;
        };
        let want = match qp.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        };
        if info.transport != want {
            self.sh.ctr.bad_opcode += 1;
            return;
        }
        let is_req = info.flags.contains(OpFlags::REQ);
        let state_ok = if is_req {
            matches!(
                qp.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            )
        } else {
            matches!(qp.state, QpState::Rts | QpState::Sqd)
        };
        if !state_ok {
            self.sh.ctr.bad_state += 1;
            return;
        }
        if qp.qp_type != QpType::Ud {
            match &qp.tx {
                Some(path) if path.dst_ip == meta.src_ip && path.src_ip == meta.dst_ip => {}
                _ => {
                    self.sh.ctr.bad_src += 1;
                    return;
                }
            }
        } else if p.deth().map(|d| d.qkey()) != Some(qp.attr.qkey) {
            self.sh.ctr.qkey_violation += 1;
            return;
        }
        self.sh.ctr.rcvd_pkts += 1;
        let before = qp.deadline();
        let mut ctx = ctx!(self);
        let dispatch = |qp: &mut Qp, ctx: &mut Ctx<'_>| {
            if is_req {
                qp.on_request(ctx, meta, &p);
            } else {
                qp.on_response(ctx, now, &p);
            }
        };
        if tracing::enabled!(tracing::Level::TRACE) {
            let _q = tracing::trace_span!("qp", qpn).entered();
            dispatch(qp, &mut ctx);
        } else {
            dispatch(qp, &mut ctx);
        }
        if !qp.in_ready && qp.may_transmit() {
            qp.in_ready = true;
            self.ready.push_back(qpn);
        }
        // An unchanged deadline leaves the heap as it was (its top live): nothing to sync.
        if qp.deadline() != before {
            self.sync_timer(qpn, before);
        }
    }
}
