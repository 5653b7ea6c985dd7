//! The responder (rxe `rxe_resp.c`): PSN check (in order / duplicate / out of sequence, one
//! NAK per gap), opcode sequence, access checks with the right NAK, receive-WQE resources and
//! RNR, length checks, R_Key checks, execution (placement, READ resources, atomics), receive
//! completions, ACK generation and duplicate replay (C.2, C.5–C.9, C.12, C.13).
use super::{Ctx, Job, Qp, Resource};
use crate::diag::BadRequest;
use crate::mem::{MemErr, MrEntry};
use crate::net::RxMeta;
use crate::verbs::*;
use roce_wire::transport::Packet;

/// A received transport packet (BTH..ICRC), well-formed: `check_len` and `check_repr` passed.
pub(crate) type Pkt<'a> = Packet<&'a [u8]>;
use roce_wire::{OpFlags, Opcode, Psn};
use std::net::IpAddr;

mod errors;
mod placement;
use super::response::syndrome::{self, NAK_PSN_SEQ};
use errors::RespErr;

/// A SEND FIRST or MIDDLE: a SEND message is still open after it.
fn is_send_mid(op: Opcode) -> bool {
    op.has(OpFlags::SEND) && !op.has(OpFlags::END)
}
/// An RDMA WRITE FIRST or MIDDLE: a WRITE message is still open after it.
fn is_write_mid(op: Opcode) -> bool {
    op.has(OpFlags::WRITE) && !op.has(OpFlags::END)
}

impl Qp {
    /// Handles one request packet (REQ flag set), QP state already checked.
    pub(crate) fn on_request(&mut self, ctx: &mut Ctx<'_>, meta: &RxMeta, p: &Pkt<'_>) {
        let psn = p.bth().psn();
        let flags = p.info().flags;
        match self.qp_type {
            QpType::Rc => {
                let d = psn.diff(self.resp.psn);
                if d > 0 {
                    ctx.ctr.out_of_seq_request += 1;
                    if !self.resp.sent_psn_nak {
                        self.resp.sent_psn_nak = true;
                        ctx.ctr.send_seq_err += 1;
                        let e = self.resp.psn;
                        self.ack(ctx, e, NAK_PSN_SEQ);
                    }
                    return;
                }
                if d < 0 {
                    ctx.ctr.duplicate_request += 1;
                    self.duplicate_request(ctx, p);
                    return;
                }
                self.resp.sent_psn_nak = false;
            }
            QpType::Uc => {
                if self.resp.drop_msg || psn != self.resp.psn {
                    if flags.contains(OpFlags::START) {
                        self.resp.drop_msg = false;
                        self.abandon_partial();
                    } else {
                        self.resp.drop_msg = true;
                        self.abandon_partial();
                        ctx.ctr.req_dropped += 1;
                        return;
                    }
                }
            }
            QpType::Ud => {}
        }
        if let Err(e) = self.process_request(ctx, meta, p) {
            self.resp_error(ctx, p, e);
        }
    }

    /// UC class D1: forget a partly received message; its receive WQE is reused.
    fn abandon_partial(&mut self) {
        self.resp.opcode = None;
        self.resp.send_off = 0;
    }

    fn process_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        meta: &RxMeta,
        p: &Pkt<'_>,
    ) -> Result<(), RespErr> {
        let op = p.opcode();
        let flags = p.info().flags;
        let rc = self.qp_type == QpType::Rc;
        // check_op_seq
        match self.resp.opcode {
            Some(prev) if is_send_mid(prev) && self.qp_type != QpType::Ud => {
                if !flags.contains(OpFlags::SEND) || flags.contains(OpFlags::START) {
                    return Err(if rc {
                        RespErr::MissingLastC
                    } else {
                        RespErr::MissingLastD1e
                    });
                }
            }
            Some(prev) if is_write_mid(prev) => {
                if !flags.contains(OpFlags::WRITE) || flags.contains(OpFlags::START) {
                    return Err(if rc {
                        RespErr::MissingLastC
                    } else {
                        RespErr::MissingLastD1e
                    });
                }
            }
            _ => {
                if flags.contains(OpFlags::MIDDLE)
                    || (flags.contains(OpFlags::END) && !flags.contains(OpFlags::START))
                {
                    return Err(if rc {
                        RespErr::MissingFirst
                    } else {
                        RespErr::UcDrop
                    });
                }
            }
        }
        // check_op_valid
        let acc = self.attr.qp_access_flags;
        if rc {
            if (flags.contains(OpFlags::READ) && !acc.contains(AccessFlags::REMOTE_READ))
                || (flags.contains(OpFlags::WRITE) && !acc.contains(AccessFlags::REMOTE_WRITE))
                || (flags.contains(OpFlags::ATOMIC) && !acc.contains(AccessFlags::REMOTE_ATOMIC))
            {
                return Err(RespErr::Unsupported);
            }
            if flags.intersects(OpFlags::FLUSH | OpFlags::ATOMIC_WRITE)
                && placement::missing_qp_access(acc, p).is_some()
            {
                return Err(RespErr::Unsupported);
            }
        } else if self.qp_type == QpType::Uc
            && flags.contains(OpFlags::WRITE)
            && !acc.contains(AccessFlags::REMOTE_WRITE)
        {
            return Err(RespErr::UcDrop);
        }
        // check_resource
        // (FLUSH too: it takes a responder resource here; rxe does not check it for a FLUSH)
        if flags
            .intersects(OpFlags::READ | OpFlags::ATOMIC | OpFlags::FLUSH | OpFlags::ATOMIC_WRITE)
        {
            if self.attr.max_dest_rd_atomic == 0 {
                return Err(RespErr::TooManyRdAtomic);
            }
        } else if flags.contains(OpFlags::RWR) {
            self.take_recv_wqe(ctx)?;
        }
        // check_length
        let payload = p.payload_len() as u32;
        if flags.contains(OpFlags::PAYLOAD) && self.qp_type != QpType::Ud {
            let mtu = self.mtu;
            let start = flags.contains(OpFlags::START);
            let end = flags.contains(OpFlags::END);
            let bad = if start && end {
                payload > mtu
            } else if start || flags.contains(OpFlags::MIDDLE) {
                payload != mtu
            } else {
                payload == 0 || payload > mtu
            };
            if bad {
                let mtu = self.mtu;
                return Err(RespErr::Length(BadRequest::PacketSize { mtu }));
            }
        }
        if let Some(reth) = p.reth() {
            if reth.dma_len() > 1 << 31 {
                return Err(RespErr::Length(BadRequest::MessageTooLong));
            }
        }
        if flags.intersects(OpFlags::FLUSH | OpFlags::ATOMIC_WRITE) {
            return self.placement_request(ctx, p);
        }
        let mrs = ctx.mrs;
        let mr = if flags.intersects(OpFlags::READ | OpFlags::WRITE | OpFlags::ATOMIC) {
            self.check_rkey(mrs, &ctx.s.mws, p, payload)?
        } else {
            None
        };
        // execute
        if flags.contains(OpFlags::SEND) {
            self.send_data_in(ctx, meta, p)?;
        } else if flags.contains(OpFlags::WRITE) {
            if let Some((e, off)) = mr {
                e.mem.write(off, p.payload());
            }
            self.resp.offset += payload;
            self.resp.resid -= payload;
        } else if flags.contains(OpFlags::READ) {
            self.execute_read(ctx, p);
            return Ok(());
        } else if flags.contains(OpFlags::ATOMIC) {
            return self.execute_atomic(ctx, p, mr);
        }
        let bth = p.bth();
        let psn = bth.psn();
        if flags.contains(OpFlags::END) {
            self.resp.msn = (self.resp.msn + 1) & Psn::MASK;
        }
        self.resp.psn = psn + 1;
        self.resp.ack_psn = self.resp.psn;
        self.resp.opcode = Some(op);
        if flags.contains(OpFlags::COMP) {
            if let Some(i) = p.ieth() {
                // a type 2 memory window's rkey is invalidated; rxe invalidates no user MR
                // (only fast-registration MRs, which this device has not): class J.
                if !ctx.s.mws.invalidate(i.rkey(), self.pd, self.qpn, true) {
                    return Err(RespErr::InvalidateRkey);
                }
            }
            // UD: `wc.sl` carries the packet's L3 type as ConnectX reports it (deviation 19).
            let sl = if self.qp_type == QpType::Ud {
                ud_packet_type(meta)
            } else {
                0
            };
            self.complete_recv_sl(ctx, p, WcStatus::Success, sl);
        }
        if rc && bth.ack_req() && self.state != QpState::Err {
            self.ack(ctx, psn, syndrome::ACK);
        }
        Ok(())
    }

    fn take_recv_wqe(&mut self, ctx: &mut Ctx<'_>) -> Result<(), RespErr> {
        if let Some(srq) = self.srq {
            if self.resp.srq_wqe.is_some() {
                return Ok(());
            }
            let Some(s) = ctx.srqs.get_mut(srq.0) else {
                return Err(RespErr::Rnr);
            };
            let Some((w, sges)) = s.rq.front() else {
                return Err(RespErr::Rnr);
            };
            self.resp.srq_wqe = Some((w.wr_id, w.length));
            self.resp.srq_sges.clear();
            self.resp.srq_sges.extend_from_slice(sges);
            s.rq.pop();
            if s.limit > 0 && s.rq.len() < s.limit {
                s.limit = 0;
                ctx.events.push_back(AsyncEvent::SrqLimitReached(srq));
            }
            Ok(())
        } else {
            match &self.rq {
                Some(rq) if rq.len() > 0 => {
                    self.resp.wqe_held = true;
                    Ok(())
                }
                _ => Err(RespErr::Rnr),
            }
        }
    }

    /// rxe `check_rkey`; returns the MR and the region offset of the bytes this packet touches
    /// (through a memory window's rkey: the region it is bound to).
    fn check_rkey<'m>(
        &mut self,
        mrs: &'m crate::mem::MrTable,
        mws: &crate::mw::MwTable,
        p: &Pkt<'_>,
        payload: u32,
    ) -> Result<Option<(&'m MrEntry, usize)>, RespErr> {
        let flags = p.info().flags;
        let access;
        if flags.intersects(OpFlags::READ | OpFlags::WRITE) {
            if let Some(reth) = p.reth() {
                let dma_len = reth.dma_len();
                self.resp.va = reth.va();
                self.resp.offset = 0;
                self.resp.resid = dma_len;
                self.resp.length = dma_len;
                self.resp.rkey = reth.rkey();
                if dma_len == 0 {
                    // C9-88: a zero-length READ/WRITE need not carry a valid address or key
                    return if payload == 0 {
                        Ok(None)
                    } else {
                        Err(RespErr::Length(BadRequest::WriteLength))
                    };
                }
            }
            access = if flags.contains(OpFlags::READ) {
                AccessFlags::REMOTE_READ
            } else {
                AccessFlags::REMOTE_WRITE
            };
        } else {
            let a = atomic_eth_of(p);
            self.resp.va = a.va;
            self.resp.offset = 0;
            self.resp.rkey = a.rkey;
            self.resp.resid = 8;
            self.resp.length = 8;
            access = AccessFlags::REMOTE_ATOMIC;
        }
        let va = self.resp.va.wrapping_add(self.resp.offset as u64);
        let (e, off) = resolve_rkey(
            mrs,
            mws,
            self.resp.rkey,
            self.pd,
            self.qpn,
            access,
            va,
            self.resp.resid,
        )
        .map_err(|_| RespErr::RkeyViolation)?;
        if flags.contains(OpFlags::WRITE) {
            let resid = self.resp.resid;
            let pad = p.bth().pad_cnt() as u32;
            // A packet before the last carries one MTU; the last (ONLY or LAST) carries exactly
            // what remains of the RETH length. rxe accepts a last packet of one MTU while more
            // remains, so a WRITE_ONLY of one MTU could announce any length (deviation 17).
            let bad = if resid > self.mtu && !flags.contains(OpFlags::END) {
                payload != self.mtu || pad != 0
            } else {
                payload != resid || pad != (resid.wrapping_neg() & 3)
            };
            if bad {
                return Err(RespErr::Length(BadRequest::WriteLength));
            }
        }
        Ok(Some((e, off)))
    }

    fn send_data_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        meta: &RxMeta,
        p: &Pkt<'_>,
    ) -> Result<(), RespErr> {
        let mrs = ctx.mrs;
        let ud = self.qp_type == QpType::Ud;
        let res = {
            let (sges, _) = self.cur_recv_sges();
            let mut res = Ok(());
            if ud {
                let mut grh = [0u8; 40];
                build_grh(&mut grh, meta, p.into_inner().len());
                res = mrs.scatter(self.pd, sges, 0, &grh);
            }
            if res.is_ok() {
                let off = if ud { 40 } else { self.resp.send_off as u64 };
                res = mrs.scatter(self.pd, sges, off, p.payload());
            }
            res
        };
        match res {
            Ok(()) => {
                if ud {
                    self.resp.send_off = 40;
                }
                self.resp.send_off += p.payload_len() as u32;
                Ok(())
            }
            Err(MemErr::NoSpace) => Err(RespErr::Length(BadRequest::RecvTooSmall)),
            Err(MemErr::Fault) => Err(RespErr::MalformedWqe),
        }
    }

    fn cur_recv_sges(&self) -> (&[Sge], u64) {
        if let Some((_, len)) = self.resp.srq_wqe {
            (&self.resp.srq_sges, len)
        } else if let Some((w, s)) = self.rq.as_ref().and_then(|q| q.front()) {
            (s, w.length)
        } else {
            (&[], 0)
        }
    }

    fn alloc_resource(&mut self, res: Resource) {
        let n = self.resp.resources.len();
        if n == 0 {
            return;
        }
        self.resp.resources[self.resp.res_head] = res;
        self.resp.res_head = (self.resp.res_head + 1) % n;
    }

    /// Response packets of an RDMA READ of `len` bytes (a zero-length READ has one): the
    /// PSNs it takes, for a new READ and for the check on a duplicate's replay alike.
    fn read_pkts(&self, len: u32) -> u32 {
        len.div_ceil(self.mtu).max(1)
    }

    fn execute_read(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>) {
        let reth = reth_of(p);
        let psn = p.bth().psn();
        let last = psn + (self.read_pkts(reth.dma_len) - 1);
        // C9-148: MSN counts the READ when it starts executing
        self.resp.msn = (self.resp.msn + 1) & Psn::MASK;
        self.alloc_resource(Resource {
            valid: true,
            atomic: false,
            ack_only: false,
            first_psn: psn,
            last_psn: last,
            va: reth.va,
            rkey: reth.rkey,
            length: reth.dma_len,
            orig: 0,
        });
        let msn = self.resp.msn;
        self.push_job(
            ctx,
            Job::Read {
                psn,
                va: reth.va,
                rkey: reth.rkey,
                resid: reth.dma_len,
                first: true,
                msn,
            },
        );
        self.resp.psn = last + 1;
        self.resp.opcode = None;
    }

    fn execute_atomic(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &Pkt<'_>,
        mr: Option<(&MrEntry, usize)>,
    ) -> Result<(), RespErr> {
        let a = atomic_eth_of(p);
        if a.va & 7 != 0 {
            return Err(RespErr::Misaligned);
        }
        let (e, off) = mr.ok_or(RespErr::RkeyViolation)?;
        let op = p.opcode();
        // atomics are RC only
        let orig = if op == Opcode::RC_COMPARE_SWAP {
            e.mem.atomic_cmp_swap(off, a.compare, a.swap_add)
        } else {
            e.mem.atomic_fetch_add(off, a.swap_add)
        };
        let psn = p.bth().psn();
        self.resp.msn = (self.resp.msn + 1) & Psn::MASK;
        self.alloc_resource(Resource {
            valid: true,
            atomic: true,
            ack_only: false,
            first_psn: psn,
            last_psn: psn,
            va: a.va,
            rkey: a.rkey,
            length: 8,
            orig,
        });
        self.resp.psn = psn + 1;
        self.resp.ack_psn = self.resp.psn;
        self.resp.opcode = Some(op);
        let msn = self.resp.msn;
        self.push_job(ctx, Job::AtomicAck { psn, orig, msn });
        Ok(())
    }

    /// rxe `duplicate_request` (C9-105, C9-106).
    fn duplicate_request(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>) {
        let flags = p.info().flags;
        let psn = p.bth().psn();
        if flags.intersects(OpFlags::SEND | OpFlags::WRITE) {
            let prev = self.resp.ack_psn - 1;
            self.ack(ctx, prev, syndrome::ACK);
            return;
        }
        let found =
            self.resp.resources.iter().copied().find(|res| {
                res.valid && psn.diff(res.first_psn) >= 0 && psn.diff(res.last_psn) <= 0
            });
        let Some(res) = found else {
            ctx.ctr.req_dropped += 1;
            return;
        };
        if flags.intersects(OpFlags::FLUSH | OpFlags::ATOMIC_WRITE) && res.ack_only {
            // oA19-14, oA19-15: answered again, not executed again
            self.zero_length_read_response(ctx, psn);
        } else if flags.contains(OpFlags::READ) && !res.atomic && !res.ack_only {
            let reth = reth_of(p);
            let (va, len) = (reth.va, reth.dma_len as u64);
            let end = va.checked_add(len);
            let within =
                va >= res.va && end.is_some_and(|e| e <= res.va.saturating_add(res.length as u64));
            // The replay must also end within the original's PSNs: a duplicate that starts
            // mid-way but asks for more bytes than its remaining packets carry would answer
            // with PSNs past the original's last, at or ahead of the expected PSN (found by
            // the responder fuzz target). A requester that re-reads from packet k asks for the
            // original's bytes from k on, which always fit.
            let fits = (psn + (self.read_pkts(reth.dma_len) - 1)).diff(res.last_psn) <= 0;
            if !within || !fits || reth.rkey != res.rkey {
                ctx.ctr.req_dropped += 1;
                return;
            }
            let msn = self.resp.msn;
            let first = psn == res.first_psn;
            self.push_job(
                ctx,
                Job::Read {
                    psn,
                    va,
                    rkey: reth.rkey,
                    resid: reth.dma_len,
                    first,
                    msn,
                },
            );
        } else if flags.contains(OpFlags::ATOMIC) && res.atomic {
            // replay the stored result; the operation is not executed again
            let msn = self.resp.msn;
            self.push_job(
                ctx,
                Job::AtomicAck {
                    psn,
                    orig: res.orig,
                    msn,
                },
            );
        } else {
            ctx.ctr.req_dropped += 1;
        }
    }

    /// Posts the receive completion for the current message and releases its WQE.
    fn complete_recv(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>, status: WcStatus) {
        self.complete_recv_sl(ctx, p, status, 0)
    }

    /// [`Self::complete_recv`] with `wc.sl` = `sl`.
    fn complete_recv_sl(&mut self, ctx: &mut Ctx<'_>, p: &Pkt<'_>, status: WcStatus, sl: u8) {
        let wr_id = if let Some((id, _)) = self.resp.srq_wqe.take() {
            id
        } else if self.resp.wqe_held {
            let Some(rq) = self.rq.as_mut() else { return };
            let Some((w, _)) = rq.front() else { return };
            let id = w.wr_id;
            rq.pop();
            id
        } else {
            return;
        };
        self.resp.wqe_held = false;
        let mut wc = WorkCompletion {
            wr_id,
            status,
            qp_num: self.qpn,
            sl,
            ..Default::default()
        };
        if status == WcStatus::Success {
            let flags = p.info().flags;
            wc.wc_flags = WcFlags::GRH;
            if flags.contains(OpFlags::WRITE) {
                wc.opcode = WcOpcode::RecvRdmaWithImm;
                wc.byte_len = self.resp.length;
            } else {
                wc.opcode = WcOpcode::Recv;
                wc.byte_len = self.resp.send_off;
                ctx.ctr.rdma_recvs += 1;
            }
            // (the flags say which headers the opcode has: no table walk for absent ones)
            if flags.intersects(OpFlags::IMMDT | OpFlags::IETH | OpFlags::DETH) {
                if let Some(i) = p.immdt() {
                    wc.wc_flags |= WcFlags::WITH_IMM;
                    wc.imm_data = i.imm();
                }
                if let Some(i) = p.ieth() {
                    wc.wc_flags |= WcFlags::WITH_INV;
                    wc.imm_data = i.rkey();
                }
                if let Some(d) = p.deth() {
                    wc.src_qp = d.src_qp();
                }
            }
        }
        self.resp.send_off = 0;
        if !ctx.cq_post(self.recv_cq, wc, p.bth().se()) {
            // class G: CQ overflow moves the QP to error
            self.to_error(ctx);
        }
    }
}

/// ConnectX's `wc.sl` of a UD receive on a RoCE port: the L3 header type of the packet (2 IPv4,
/// 1 IPv6; mlx5 CQE `flags_rqpn` bits 24..26, which libmlx5 reports as `sl`). UCX 1.13's
/// `ud_verbs` reads it (`wc.sl & 7`) to find the destination address in the GRH, and drops
/// every packet when it is 0, which is what rxe reports. `UCT_IB_CQE_SL_PKTYPE_MASK`,
/// `uct_ud_iface_check_grh`.
fn ud_packet_type(m: &RxMeta) -> u8 {
    if m.src_ip.is_ipv4() {
        2
    } else {
        1
    }
}

/// The 40 bytes rxe writes ahead of a UD receive buffer (`union rdma_network_hdr`): the IPv6
/// header, or 20 unused bytes and the IPv4 header (checksum filled, DF set, the identification
/// the driver saw or 0).
fn build_grh(out: &mut [u8; 40], m: &RxMeta, transport_len: usize) {
    use roce_wire::ip::{ipv4, ipv6, PROTOCOL_UDP};
    let udp_len = 8 + transport_len;
    match (m.src_ip, m.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => ipv4::Repr {
            src_addr: s,
            dst_addr: d,
            protocol: PROTOCOL_UDP,
            payload_len: udp_len,
            ident: m.ipv4_id.unwrap_or(0),
            dont_frag: true,
            tos: m.tos,
            ttl: m.ttl,
        }
        .emit(&mut ipv4::Packet::new_unchecked(&mut out[20..40])),
        (IpAddr::V6(s), IpAddr::V6(d)) => ipv6::Repr {
            src_addr: s,
            dst_addr: d,
            next_header: PROTOCOL_UDP,
            payload_len: udp_len,
            traffic_class: m.tos,
            flow_label: m.flow_label,
            hop_limit: m.ttl,
        }
        .emit(&mut ipv6::Packet::new_unchecked(&mut out[..])),
        _ => {}
    }
}

/// The region and offset of `[va, va + len)` for a remote access with `rkey` on QP `qpn`: a
/// memory region's key, or a memory window's (`mw.rs`).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve_rkey<'m>(
    mrs: &'m crate::mem::MrTable,
    mws: &crate::mw::MwTable,
    rkey: u32,
    pd: crate::Pd,
    qpn: u32,
    access: AccessFlags,
    va: u64,
    len: u32,
) -> Result<(&'m MrEntry, usize), MemErr> {
    if crate::mw::is_mw_key(rkey) {
        mws.resolve(mrs, rkey, pd, qpn, access, va, len as u64)
    } else {
        mrs.check(rkey, pd, access, va, len as u64)
    }
}

/// The RETH of `p` as a `Repr` (zeros when the opcode has none).
fn reth_of(p: &Pkt<'_>) -> roce_wire::reth::Repr {
    p.reth()
        .map_or_else(Default::default, |v| roce_wire::reth::Repr {
            va: v.va(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        })
}

/// The AtomicETH of `p` as a `Repr` (zeros when the opcode has none).
fn atomic_eth_of(p: &Pkt<'_>) -> roce_wire::atomic_eth::Repr {
    p.atomic_eth()
        .map_or_else(Default::default, |v| roce_wire::atomic_eth::Repr {
            va: v.va(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        })
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn open_message_opcodes_are_the_first_and_middle_ones() {
        for t in [roce_wire::Transport::Rc, roce_wire::Transport::Uc] {
            for low in 0..0x20u8 {
                let op = Opcode::with_transport(t, low);
                if op.info().support != roce_wire::Support::Supported {
                    continue;
                }
                // SEND FIRST/MIDDLE are operations 0x00/0x01, RDMA WRITE FIRST/MIDDLE 0x06/0x07
                assert_eq!(is_send_mid(op), matches!(low, 0x00 | 0x01), "{op:?}");
                assert_eq!(is_write_mid(op), matches!(low, 0x06 | 0x07), "{op:?}");
            }
        }
    }
}
