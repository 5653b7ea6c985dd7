//! Executors for QPs: creation, state changes (modify, connect), query and destruction.

use super::*;

impl H {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn create_qp(
        &mut self,
        pd: Ref,
        scq: Ref,
        rcq: Ref,
        srq: Ref,
        qpt: u8,
        caps: [u8; 4],
        inline: u16,
        sig_all: bool,
        (ex, ops): (u8, u16),
    ) {
        if live_count(&self.qps) >= 12 {
            return;
        }
        let Some(ppd) = self.pick(&self.pds, pd) else {
            return;
        };
        if qpt == 0xFF {
            c::set_errno(0);
            let p = c::create_qp(ptr_of(&self.pds, ppd) as *mut _, None);
            self.want_ptr("ibv_create_qp(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let (Some(ps), Some(pr)) = (self.pick(&self.cqs, scq), self.pick(&self.cqs, rcq)) else {
            return;
        };
        let psrq = match srq.0 {
            0..=0x7F => Pick::Null,
            0x80..=0xEF => match self.pick(&self.srqs, Ref(srq.0 - 0x80)) {
                Some(p) => p,
                None => return,
            },
            _ => match self.pick(&self.srqs, srq) {
                Some(p) => p,
                None => return,
            },
        };
        let t = match qpt % 8 {
            2 => IBV_QPT_UC,
            3 | 5 => IBV_QPT_UD,
            6 => [
                IBV_QPT_RAW_PACKET,
                IBV_QPT_XRC_SEND,
                IBV_QPT_XRC_RECV,
                IBV_QPT_DRIVER,
                0,
                1,
                5,
                7,
            ][(qpt >> 3) as usize % 8],
            _ => IBV_QPT_RC,
        };
        let wr = |v: u8| -> u32 {
            if v >= 0xF8 {
                [0x4000, 0x4001, 0x10000, u32::MAX, 256, 0x3FFF, 1000, 0][(v - 0xF8) as usize]
            } else {
                (v % 64) as u32
            }
        };
        let cap = ibv_qp_cap {
            max_send_wr: wr(caps[0]),
            max_recv_wr: wr(caps[1]),
            max_send_sge: (caps[2] % 40) as u32,
            max_recv_sge: (caps[3] % 40) as u32,
            max_inline_data: if inline >= 0xFFF0 {
                u32::MAX - (inline & 0xF) as u32
            } else {
                (inline % 512) as u32
            },
        };
        let srq_ptr = ptr_of(&self.srqs, psrq) as *mut ibv_srq;
        let cookie = 0x9900_0000 + self.qps.len();
        let mut ia = ibv_qp_init_attr {
            qp_context: cookie as *mut c_void,
            send_cq: ptr_of(&self.cqs, ps) as *mut _,
            recv_cq: ptr_of(&self.cqs, pr) as *mut _,
            srq: srq_ptr,
            cap,
            qp_type: t,
            sq_sig_all: sig_all as c_int,
        };
        let pdp = ptr_of(&self.pds, ppd) as *mut ibv_pd;
        c::set_errno(0);
        let via_op = ex % 8 >= 5;
        let send_ops = match ex % 8 {
            6 => Some(wr_ops(t)),
            7 => Some(ops as u64),
            _ => None,
        };
        let p = if via_op {
            // the inline ibv_create_qp_ex: any live context's op (it reads the PD's)
            let ctx = match ppd {
                Pick::Live(k) => self.ctxs[self.pds[k].ctx].p,
                _ => match self.ctxs.iter().find(|x| x.alive) {
                    Some(x) => x.p,
                    None => return,
                },
            };
            let mut iax = c::zeroed_init_attr_ex();
            iax.qp_context = ia.qp_context;
            iax.send_cq = ia.send_cq;
            iax.recv_cq = ia.recv_cq;
            iax.srq = ia.srq;
            iax.cap = ia.cap;
            iax.qp_type = t;
            iax.sq_sig_all = ia.sq_sig_all;
            iax.pd = pdp;
            iax.comp_mask = IBV_QP_INIT_ATTR_PD
                | if send_ops.is_some() {
                    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
                } else {
                    IBV_QP_INIT_ATTR_CREATE_FLAGS
                };
            iax.send_ops_flags = send_ops.unwrap_or(0);
            let p = c::create_qp_ex(ctx, &mut iax);
            ia.cap = iax.cap;
            p
        } else {
            c::create_qp(pdp, Some(&mut ia))
        };
        if send_ops.is_some_and(|o| o & !wr_ops(t) != 0) {
            self.want_ptr(
                "ibv_create_qp_ex(unsupported send ops)",
                p,
                Some(false),
                &[libc::EOPNOTSUPP],
            );
            return;
        }
        let refs_ok = matches!(ppd, Pick::Live(_))
            && matches!(ps, Pick::Live(_))
            && matches!(pr, Pick::Live(_))
            && !matches!(psrq, Pick::Bad(_));
        let type_ok = matches!(t, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD);
        let caps_ok = cap.max_send_wr <= 0x4000
            && cap.max_send_sge <= 32
            && cap.max_inline_data <= 400
            && (psrq != Pick::Null || (cap.max_recv_wr <= 0x4000 && cap.max_recv_sge <= 32));
        let errs: &[i32] = if !refs_ok || (type_ok && !caps_ok) {
            &[libc::EINVAL]
        } else {
            &[libc::EOPNOTSUPP]
        };
        if !self.want_ptr(
            "ibv_create_qp",
            p,
            Some(refs_ok && type_ok && caps_ok),
            errs,
        ) {
            return;
        }
        let (Pick::Live(pdi), Pick::Live(si), Pick::Live(ri)) = (ppd, ps, pr) else {
            unreachable!()
        };
        let got = ia.cap;
        if got.max_send_wr < cap.max_send_wr
            || got.max_send_sge < cap.max_send_sge
            || got.max_inline_data < cap.max_inline_data
            || (psrq == Pick::Null
                && (got.max_recv_wr < cap.max_recv_wr || got.max_recv_sge < cap.max_recv_sge))
        {
            fail!(
                self,
                "ibv_create_qp reported capacities {got:?} below the request {cap:?}"
            );
        }
        let (qctx, qpd, qs, qr, qsrq, qpn, st, qt, qc) = c::peek(p, |q| {
            (
                q.context,
                q.pd,
                q.send_cq,
                q.recv_cq,
                q.srq,
                q.qp_num,
                q.state,
                q.qp_type,
                q.qp_context as usize,
            )
        });
        if qctx != self.ctxs[self.pds[pdi].ctx].p
            || qpd != self.pds[pdi].p
            || qs != self.cqs[si].p
            || qr != self.cqs[ri].p
            || qsrq != srq_ptr
            || qpn == 0
            || st != IBV_QPS_RESET
            || qt != t
            || qc != cookie
        {
            fail!(self, "ibv_qp fields differ from the creation");
        }
        if self.qps.iter().any(|q| q.alive && q.qpn == qpn) {
            fail!(self, "QPN {qpn:#x} given out twice");
        }
        self.qps.push(QpH {
            p,
            alive: true,
            pd: pdi,
            scq: si,
            rcq: ri,
            srq: match psrq {
                Pick::Live(k) => Some(k),
                _ => None,
            },
            qpt: t,
            qpn,
            state: IBV_QPS_RESET,
            sig_all,
            cap: got,
            qkey: 0,
            ex: send_ops.is_some(),
            last_wqe: 0,
            worked: false,
        });
        let qpx = c::qp_to_qp_ex(p);
        if std::ptr::eq(qpx.cast::<ibv_qp>(), p) != send_ops.is_some()
            || (send_ops.is_none() && !qpx.is_null())
        {
            fail!(
                self,
                "ibv_qp_to_qp_ex gave {qpx:?} for a QP with send ops {send_ops:?}"
            );
        }
    }

    pub(super) fn ah_attr(&self, s: &AhSpec) -> (ibv_ah_attr, bool) {
        let dgid = match s.gid % 4 {
            0 | 1 => self.gid,
            2 => mapped(Ipv4Addr::new(127, 255, 255, 254)),
            _ => [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        };
        let v4 = is_v4_mapped(&dgid);
        let sgid = match s.sgid % 8 {
            _ if !v4 => 1,
            0..=5 => 1,
            6 => 0,
            _ => s.sgid,
        };
        let attr = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: dgid },
                flow_label: s.flow & 0xF_FFFF,
                sgid_index: sgid,
                hop_limit: s.hop,
                traffic_class: s.tclass,
            },
            dlid: 0,
            sl: s.sl,
            src_path_bits: 0,
            static_rate: 0,
            is_global: s.is_global,
            port_num: if s.port >= 0x80 { s.port } else { 1 },
        };
        // A RoCE AV needs a GRH and port 1 (rdma_check_ah_attr), as on rxe.
        let valid = v4 && sgid == 1 && s.is_global != 0 && s.port < 0x80;
        (attr, valid)
    }

    pub(super) fn query_state(&self, i: usize) -> u32 {
        let mut a = ibv_qp_attr::default();
        let mut ia = ibv_qp_init_attr {
            qp_context: null_mut(),
            send_cq: null_mut(),
            recv_cq: null_mut(),
            srq: null_mut(),
            cap: Default::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        let rc = c::query_qp(self.qps[i].p, Some(&mut a), IBV_QP_STATE, Some(&mut ia));
        self.want("ibv_query_qp", rc, &[0]);
        a.qp_state
    }

    /// `ibv_modify_qp` on live QP `i` with the model updated; returns the result.
    pub(super) fn modify(&mut self, i: usize, attr: &mut ibv_qp_attr, mask: c_int) -> c_int {
        let rc = c::modify_qp(self.qps[i].p, Some(attr), mask);
        // (ENODATA: an AV whose source GID index is an empty entry, as the kernel's GID cache)
        self.want("ibv_modify_qp", rc, &[0, libc::EINVAL, libc::ENODATA]);
        if rc != 0 {
            return rc;
        }
        if mask & IBV_QP_QKEY != 0 {
            self.qps[i].qkey = attr.qkey;
        }
        if mask & IBV_QP_STATE != 0 {
            let before = self.qps[i].state;
            let to = attr.qp_state;
            self.qps[i].state = to;
            if c::peek(self.qps[i].p, |q| q.state) != to {
                fail!(self, "qp->state is not the state just set ({to})");
            }
            let now = self.query_state(i);
            // (RESET → ERR: the engine stays in RESET, see fuzz/README.md)
            let quirk = to == IBV_QPS_ERR
                && now == IBV_QPS_RESET
                && matches!(before, IBV_QPS_RESET | IBV_QPS_ERR);
            // moving to RTS (or SQD) sends what was posted before; a WR that fails there moves
            // the QP to ERR (UC/UD: SQE) before the verb returns
            let failed_at_once =
                matches!(to, IBV_QPS_RTS | IBV_QPS_SQD) && matches!(now, IBV_QPS_ERR | IBV_QPS_SQE);
            if now != to && !quirk && !failed_at_once {
                fail!(
                    self,
                    "ibv_query_qp says state {now} right after a modify to {to}"
                );
            }
            if to == IBV_QPS_RESET {
                self.retire_qp(i);
                self.qps[i].worked = false;
            } else if matches!(
                now,
                IBV_QPS_INIT | IBV_QPS_RTR | IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_SQE
            ) {
                self.qps[i].worked = true;
            }
        }
        0
    }

    /// QP `i` was reset or destroyed: its WRs can no longer complete (but may sit in a CQ).
    pub(super) fn retire_qp(&mut self, i: usize) {
        for w in self.wrs.values_mut() {
            if w.qp == i && !matches!(w.kind, Kind::Srq(_)) {
                w.live = false;
            }
        }
    }

    pub(super) fn dest_qpn(&self, r: Ref) -> u32 {
        if r.0 < 0xC0 && !self.qps.is_empty() {
            self.qps[r.0 as usize % self.qps.len()].qpn
        } else {
            (r.0 as u32).wrapping_mul(0x10101) & 0xFF_FFFF
        }
    }

    pub(super) fn modify_op(&mut self, op: &Op) {
        let Op::ModifyQp {
            qp,
            tmpl,
            mask,
            state,
            cur,
            mtu,
            qkey,
            rq_psn,
            sq_psn,
            dest,
            access,
            pkey,
            port,
            timeout,
            retry,
            rnr,
            min_rnr,
            rd,
            dest_rd,
            sqd,
            ref ah,
        } = *op
        else {
            unreachable!()
        };
        let Some(pk) = self.pick(&self.qps, qp) else {
            return;
        };
        let st = |v: u8| -> u32 {
            if v >= 0xF8 {
                (v as u32).wrapping_mul(0x0101_0101)
            } else {
                (v % 8) as u32
            }
        };
        let Pick::Live(i) = pk else {
            let mut a = ibv_qp_attr::default();
            let rc = c::modify_qp(ptr_of(&self.qps, pk) as *mut _, Some(&mut a), IBV_QP_STATE);
            self.want("ibv_modify_qp(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        if tmpl == 0xFF {
            let rc = c::modify_qp(self.qps[i].p, None, IBV_QP_STATE);
            self.want("ibv_modify_qp(NULL attr)", rc, &[libc::EINVAL]);
            return;
        }
        let t = self.qps[i].qpt;
        let (m_init, m_rtr, m_rts) = masks(t);
        let (mask, to) = match tmpl % 8 {
            0 => (mask & 0x03FF_FFFF, st(state)),
            1 => (m_init, IBV_QPS_INIT),
            2 => (m_rtr, IBV_QPS_RTR),
            3 => (m_rts, IBV_QPS_RTS),
            4 => (IBV_QP_STATE as u32, st(state)),
            5 => (m_rts | (mask & 0x001F_FFFF), st(state)),
            6 => (mask, st(state)),
            _ => (IBV_QP_STATE as u32 | (mask & 0x001F_FFFF), st(state)),
        };
        let (ah_attr, _) = self.ah_attr(ah);
        let mut a = ibv_qp_attr {
            qp_state: to,
            cur_qp_state: st(cur),
            path_mtu: if mtu >= 0xF0 {
                mtu as u32
            } else {
                1 + (mtu % 5) as u32
            },
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num: self.dest_qpn(dest),
            qp_access_flags: access as u32,
            ah_attr,
            pkey_index: if pkey >= 0x80 { pkey as u16 } else { 0 },
            en_sqd_async_notify: sqd,
            max_rd_atomic: rd,
            max_dest_rd_atomic: dest_rd,
            min_rnr_timer: min_rnr,
            port_num: if port >= 0x80 { port } else { 1 },
            timeout,
            retry_cnt: retry,
            rnr_retry: rnr,
            ..Default::default()
        };
        self.modify(i, &mut a, mask as c_int);
    }

    pub(super) fn connect(&mut self, a: Ref, b: Ref, p: [u8; 6], psn: u32) {
        let (Some(Pick::Live(i)), Some(Pick::Live(j))) =
            (self.pick(&self.qps, a), self.pick(&self.qps, b))
        else {
            return;
        };
        self.bring_up(i, j, p, psn);
        if j != i {
            self.bring_up(j, i, p, psn);
        }
    }

    /// RESET → INIT → RTR → RTS toward `peer`, each step with a valid attribute set for the
    /// QP's state as `ibv_query_qp` reports it; each must succeed.
    pub(super) fn bring_up(&mut self, i: usize, peer: usize, p: [u8; 6], psn: u32) {
        let [access, mtu, timeout, retry, rnr, rd] = p;
        let t = self.qps[i].qpt;
        let (m_init, m_rtr, m_rts) = masks(t);
        for _ in 0..3 {
            let now = self.query_state(i);
            let model = self.qps[i].state;
            if now != model {
                if model == IBV_QPS_ERR && now == IBV_QPS_RESET {
                    // RESET → ERR leaves the engine in RESET (see fuzz/README.md)
                    self.qps[i].state = IBV_QPS_RESET;
                } else if now == IBV_QPS_ERR || now == IBV_QPS_SQE {
                    // an asynchronous error
                    return;
                } else {
                    fail!(self, "QP {i} is in state {now}, the model says {model}");
                }
            }
            let mut a = ibv_qp_attr {
                pkey_index: 0,
                port_num: 1,
                qkey: QKEY,
                qp_access_flags: if access & 0x80 != 0 {
                    (access & 0xF) as u32
                } else {
                    0xF
                },
                path_mtu: 1 + (mtu % 5) as u32,
                dest_qp_num: self.qps[peer].qpn,
                rq_psn: psn & 0xFF_FFFF,
                sq_psn: psn & 0xFF_FFFF,
                max_dest_rd_atomic: 1 << (rd % 5),
                max_rd_atomic: 1 << (rd % 5),
                min_rnr_timer: rd % 32,
                timeout: timeout % 32,
                retry_cnt: retry % 8,
                rnr_retry: rnr % 8,
                // hop limit 0 (TTL 0) makes every datagram fail in sendmsg (see README.md)
                ah_attr: self
                    .ah_attr(&AhSpec {
                        hop: 64,
                        is_global: 1,
                        ..AhSpec::default()
                    })
                    .0,
                ..Default::default()
            };
            let (mask, to) = match now {
                IBV_QPS_RESET => (m_init, IBV_QPS_INIT),
                IBV_QPS_INIT => (m_rtr, IBV_QPS_RTR),
                IBV_QPS_RTR => (m_rts, IBV_QPS_RTS),
                _ => return,
            };
            a.qp_state = to;
            let rc = self.modify(i, &mut a, mask as c_int);
            if rc != 0 {
                fail!(
                    self,
                    "QP {i} (type {t}) {now} → {to} with a valid attribute set: {rc}"
                );
            }
        }
    }

    pub(super) fn query_op(&mut self, r: Ref, mode: u8, mask: u32) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let mut a = ibv_qp_attr::default();
        let mut ia = ibv_qp_init_attr {
            qp_context: null_mut(),
            send_cq: null_mut(),
            recv_cq: null_mut(),
            srq: null_mut(),
            cap: Default::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        let p = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let Pick::Live(i) = pk else {
            let rc = c::query_qp(p, Some(&mut a), mask as c_int, Some(&mut ia));
            self.want("ibv_query_qp(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let rc = match mode % 4 {
            1 => c::query_qp(p, None, mask as c_int, Some(&mut ia)),
            2 => c::query_qp(p, Some(&mut a), mask as c_int, None),
            _ => c::query_qp(p, Some(&mut a), mask as c_int, Some(&mut ia)),
        };
        if matches!(mode % 4, 1 | 2) {
            self.want("ibv_query_qp(NULL out)", rc, &[libc::EINVAL]);
            return;
        }
        self.want("ibv_query_qp", rc, &[0]);
        let q = &self.qps[i];
        let srq = q.srq.map_or(null_mut(), |s| self.srqs[s].p);
        if ia.send_cq != self.cqs[q.scq].p
            || ia.recv_cq != self.cqs[q.rcq].p
            || ia.srq != srq
            || ia.qp_type != q.qpt
            || (ia.sq_sig_all != 0) != q.sig_all
            || ia.cap != q.cap
        {
            fail!(self, "ibv_query_qp init_attr differs from the creation");
        }
        let model = q.state;
        let now = a.qp_state;
        let fine = now == model
            || (model == IBV_QPS_ERR && now == IBV_QPS_RESET)
            || (model != IBV_QPS_RESET && matches!(now, IBV_QPS_ERR | IBV_QPS_SQE));
        if !fine || now > IBV_QPS_ERR {
            fail!(self, "ibv_query_qp state {now}, model {model}");
        }
    }

    pub(super) fn move_to_err(&mut self, i: usize) {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_ERR,
            ..Default::default()
        };
        let rc = self.modify(i, &mut a, IBV_QP_STATE);
        if rc != 0 {
            fail!(self, "modify QP {i} to ERR: {rc}");
        }
    }

    /// After ERR and a drain: every signaled WR of QP `i` completed.
    pub(super) fn verify_qp(&self, i: usize) {
        for (id, w) in &self.wrs {
            if w.qp != i || matches!(w.kind, Kind::Srq(_)) || !w.must || !w.live || w.seen > 0 {
                continue;
            }
            let cq = if w.kind == Kind::Send {
                self.qps[i].scq
            } else {
                self.qps[i].rcq
            };
            if !self.cqs[cq].tainted {
                fail!(self, "signaled WR {id:#x} ({w:?}) of QP {i} never completed (QP in ERR, CQ {cq} drained)");
            }
        }
    }

    pub(super) fn destroy_qp(&mut self, i: usize, drain: bool) {
        if drain {
            self.move_to_err(i);
            self.drain_all();
            self.verify_qp(i);
        }
        let rc = c::destroy_qp(self.qps[i].p);
        self.want("ibv_destroy_qp", rc, &[0]);
        self.qps[i].alive = false;
        self.retire_qp(i);
    }

    pub(super) fn destroy_qp_op(&mut self, r: Ref, drain: u8) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => self.destroy_qp(i, drain & 1 == 1),
            _ => {
                let rc = c::destroy_qp(ptr_of(&self.qps, pk) as *mut _);
                self.want("ibv_destroy_qp(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }
}

/// The INIT, RTR and RTS masks of a QP type (required attributes only).
fn masks(t: u32) -> (u32, u32, u32) {
    let s = IBV_QP_STATE;
    let m = match t {
        IBV_QPT_UD => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
            s,
            s | IBV_QP_SQ_PSN,
        ),
        IBV_QPT_UC => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            s | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
            s | IBV_QP_SQ_PSN,
        ),
        _ => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            s | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER,
            s | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_SQ_PSN
                | IBV_QP_MAX_QP_RD_ATOMIC,
        ),
    };
    (m.0 as u32, m.1 as u32, m.2 as u32)
}
