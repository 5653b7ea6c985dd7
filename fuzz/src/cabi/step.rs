//! The harness core: creating it, shared checks, and dispatching one [`Op`] per step.

use super::*;

impl H {
    pub(super) fn new(_: &Setup) -> H {
        let mut n = -1;
        let list = c::device_list(&mut n);
        assert!(!list.is_null() && n == 1, "ibv_get_device_list: {n}");
        let dev = c::peek(list, |l| *l);
        assert!(!dev.is_null());
        assert!(
            c::peek(list.wrapping_add(1), |l| l.is_null()),
            "device list not NULL-terminated"
        );
        let mut h = H {
            stats: Stats::default(),
            step: 0,
            op: None,
            list,
            dev,
            gid: [0; 16],
            bufs: (0..NBUF).map(Buf::new).collect(),
            ctxs: Vec::new(),
            pds: Vec::new(),
            mrs: Vec::new(),
            chs: Vec::new(),
            cqs: Vec::new(),
            qps: Vec::new(),
            srqs: Vec::new(),
            ahs: Vec::new(),
            wrs: HashMap::new(),
            next_wr: 0x1000,
        };
        h.open_ctx(0);
        h
    }

    // ------------------------------------------------------------------ helpers

    /// The addresses of every live handle.
    pub(super) fn live_addrs(&self) -> Vec<usize> {
        fn add<T: Handle>(out: &mut Vec<usize>, v: &[T]) {
            out.extend(v.iter().filter(|h| h.alive()).map(|h| h.addr()));
        }
        let mut out = Vec::new();
        add(&mut out, &self.ctxs);
        add(&mut out, &self.pds);
        add(&mut out, &self.mrs);
        add(&mut out, &self.chs);
        add(&mut out, &self.cqs);
        add(&mut out, &self.qps);
        add(&mut out, &self.srqs);
        add(&mut out, &self.ahs);
        out
    }

    /// No live handle lives at `addr` (a destroyed object's address reused by a new object
    /// would reach that object).
    pub(super) fn unaliased(&self, addr: usize) -> bool {
        !self.live_addrs().contains(&addr)
    }

    pub(super) fn pick<T: Handle>(&self, v: &[T], r: Ref) -> Option<Pick> {
        pick_in(v, r, |a| self.unaliased(a), || self.live_addrs())
    }

    /// Some live context's ops table (to call an ops entry with a NULL / destroyed object).
    pub(super) fn any_ops(&self) -> Option<ibv_context_ops> {
        self.ctxs.iter().find(|c| c.alive).map(|c| c::ops(c.p))
    }

    pub(super) fn want(&self, verb: &str, got: c_int, allowed: &[c_int]) {
        if !allowed.contains(&got) {
            fail!(self, "{verb} returned {got}, expected one of {allowed:?}");
        }
    }

    /// A NULL-returning verb's result: `Some(true)` must succeed, `Some(false)` must fail with
    /// an errno in `errs`, `None` either.
    pub(super) fn want_ptr<T>(
        &self,
        verb: &str,
        p: *mut T,
        ok: Option<bool>,
        errs: &[i32],
    ) -> bool {
        let e = c::errno();
        match (p.is_null(), ok) {
            (false, Some(false)) => fail!(self, "{verb} succeeded, expected errno {errs:?}"),
            (true, Some(true)) => fail!(self, "{verb} failed with errno {e}, expected success"),
            (true, _) if !errs.contains(&e) => {
                fail!(
                    self,
                    "{verb} failed with errno {e}, expected one of {errs:?}"
                )
            }
            _ => {}
        }
        !p.is_null()
    }

    pub(super) fn ctx_of_pd(&self, pd: usize) -> usize {
        self.pds[pd].ctx
    }

    pub(super) fn qp_ctx(&self, q: usize) -> usize {
        self.ctx_of_pd(self.qps[q].pd)
    }

    pub(super) fn step(&mut self, op: Op) {
        self.op = Some(op.clone());
        match op {
            Op::OpenCtx { mode } => self.open_ctx(mode),
            Op::CloseCtx { ctx } => self.close_ctx(ctx),
            Op::AllocPd { ctx } => self.alloc_pd(ctx),
            Op::DeallocPd { pd } => self.dealloc_pd(pd),
            Op::RegMr {
                pd,
                buf,
                off,
                len,
                access,
                variant,
                iova,
            } => self.reg_mr(pd, buf, off, len, access, variant, iova),
            Op::DeregMr { mr } => self.dereg_mr(mr),
            Op::CreateChannel { ctx } => self.create_channel(ctx),
            Op::DestroyChannel { ch } => self.destroy_channel(ch),
            Op::CreateCq {
                ctx,
                cqe,
                mode,
                ch,
                vec,
            } => self.create_cq(ctx, cqe, mode, ch, vec),
            Op::DestroyCq { cq } => self.destroy_cq(cq),
            Op::ReqNotify { cq, solicited } => self.req_notify(cq, solicited),
            Op::GetCqEvent { ch, mode } => self.get_cq_event(ch, mode),
            Op::PollCq { cq, n } => self.poll_op(cq, n),
            Op::CreateQp {
                pd,
                scq,
                rcq,
                srq,
                qpt,
                swr,
                rwr,
                ssge,
                rsge,
                inline,
                sig_all,
                ex,
                ops,
            } => self.create_qp(
                pd,
                scq,
                rcq,
                srq,
                qpt,
                [swr, rwr, ssge, rsge],
                inline,
                sig_all,
                (ex, ops),
            ),
            op @ Op::ModifyQp { .. } => self.modify_op(&op),
            Op::Connect {
                a,
                b,
                access,
                mtu,
                timeout,
                retry,
                rnr,
                rd,
                psn,
            } => self.connect(a, b, [access, mtu, timeout, retry, rnr, rd], psn),
            Op::QueryQp { qp, mode, mask } => self.query_op(qp, mode, mask),
            Op::DestroyQp { qp, drain } => self.destroy_qp_op(qp, drain),
            Op::CreateSrq {
                pd,
                max_wr,
                max_sge,
                limit,
                null,
            } => self.create_srq(pd, max_wr, max_sge, limit, null),
            Op::ModifySrq {
                srq,
                mask,
                max_wr,
                limit,
                null,
            } => self.modify_srq(srq, mask, max_wr, limit, null),
            Op::QuerySrq { srq, null } => self.query_srq(srq, null),
            Op::DestroySrq { srq } => self.destroy_srq(srq),
            Op::CreateAh { pd, spec, null } => self.create_ah(pd, &spec, null),
            Op::DestroyAh { ah } => self.destroy_ah(ah),
            Op::PostSend { qp, wrs, bad_null } => self.post_send(qp, &wrs.0, bad_null),
            Op::PostWr { qp, wrs, mode } => self.post_wr(qp, &wrs.0, mode),
            Op::PostRecv { qp, wrs, bad_null } => self.post_recv(qp, None, &wrs.0, bad_null),
            Op::PostSrqRecv { srq, wrs, bad_null } => {
                self.post_recv(srq, Some(()), &wrs.0, bad_null)
            }
            Op::Pump { rounds } => {
                for _ in 0..1 + rounds % 8 {
                    self.drain_all();
                }
            }
            Op::AsyncEvents { ctx } => self.async_op(ctx),
        }
        self.update_taint();
        self.check_memory();
        self.step += 1;
    }
}
