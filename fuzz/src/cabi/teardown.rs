//! Teardown: destroying everything in a valid order, draining and checking every QP's WRs.

use super::*;

impl H {
    /// Destroys, in a valid order, every object of context `only` (all when `None`) and every
    /// object that uses one of them; QPs go to ERR and are drained and checked first.
    pub(super) fn teardown(&mut self, only: Option<usize>) {
        let mine = |c: usize| !matches!(only, Some(o) if o != c);
        let cqs: Vec<bool> = self
            .cqs
            .iter()
            .map(|q| q.alive && (mine(q.ctx) || q.ch.is_some_and(|h| mine(self.chs[h].ctx))))
            .collect();
        let srqs: Vec<bool> = self
            .srqs
            .iter()
            .map(|s| s.alive && mine(self.pds[s.pd].ctx))
            .collect();
        let qps: Vec<usize> = (0..self.qps.len())
            .filter(|&k| {
                let q = &self.qps[k];
                q.alive
                    && (mine(self.pds[q.pd].ctx)
                        || cqs[q.scq]
                        || cqs[q.rcq]
                        || q.srq.is_some_and(|s| srqs[s]))
            })
            .collect();
        // A QP on an SRQ that leaves a working state for ERR raises LAST_WQE_REACHED on its
        // context; one that went RESET → ERR raises none (as rdmavt; it never worked).
        let mut last_wqe = Vec::new();
        for &k in &qps {
            if self.qps[k].srq.is_some()
                && self.qps[k].worked
                && self.query_state(k) != IBV_QPS_RESET
            {
                last_wqe.push(k);
            }
            self.move_to_err(k);
        }
        self.drain_all();
        for c in 0..self.ctxs.len() {
            if self.ctxs[c].alive {
                self.drain_async(c);
            }
        }
        for k in last_wqe {
            if self.qps[k].last_wqe == 0 {
                fail!(
                    self,
                    "QP {k} (context {}) on an SRQ went to ERR without IBV_EVENT_QP_LAST_WQE_REACHED",
                    self.qp_ctx(k)
                );
            }
        }
        for &k in &qps {
            self.verify_qp(k);
            self.destroy_qp(k, false);
        }
        for k in 0..self.ahs.len() {
            if self.ahs[k].alive && mine(self.pds[self.ahs[k].pd].ctx) {
                let rc = c::destroy_ah(self.ahs[k].p);
                self.want("ibv_destroy_ah", rc, &[0]);
                self.ahs[k].alive = false;
            }
        }
        for (k, &is) in srqs.iter().enumerate() {
            if is {
                let rc = c::destroy_srq(self.srqs[k].p);
                self.want("ibv_destroy_srq", rc, &[0]);
                self.srqs[k].alive = false;
            }
        }
        for k in 0..self.mrs.len() {
            if self.mrs[k].alive && mine(self.pds[self.mrs[k].pd].ctx) {
                let rc = c::dereg_mr(self.mrs[k].p);
                self.want("ibv_dereg_mr", rc, &[0]);
                self.mrs[k].alive = false;
            }
        }
        for (k, &is) in cqs.iter().enumerate() {
            if is {
                if self.cqs[k].unacked > 0 {
                    c::ack_cq_events(self.cqs[k].p, self.cqs[k].unacked);
                    self.cqs[k].unacked = 0;
                }
                let rc = c::destroy_cq(self.cqs[k].p);
                self.want("ibv_destroy_cq", rc, &[0]);
                self.cqs[k].alive = false;
            }
        }
        for k in 0..self.chs.len() {
            if self.chs[k].alive && mine(self.chs[k].ctx) {
                let rc = c::destroy_channel(self.chs[k].p);
                self.want("ibv_destroy_comp_channel", rc, &[0]);
                self.chs[k].alive = false;
            }
        }
        for k in 0..self.pds.len() {
            if self.pds[k].alive && mine(self.pds[k].ctx) {
                let rc = c::dealloc_pd(self.pds[k].p);
                self.want("ibv_dealloc_pd", rc, &[0]);
                self.pds[k].alive = false;
            }
        }
    }

    pub(super) fn finish(mut self) -> Stats {
        self.op = None;
        self.teardown(None);
        for i in 0..self.ctxs.len() {
            if self.ctxs[i].alive {
                self.drain_async(i);
                let rc = c::close(self.ctxs[i].p);
                self.want("ibv_close_device", rc, &[0]);
                self.ctxs[i].alive = false;
            }
        }
        self.check_memory();
        c::free_device_list(self.list);
        self.stats
    }
}
