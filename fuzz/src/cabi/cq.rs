//! Executors for CQs: creation, notification, completion events and polling, and the checks
//! of every completion against the posted WRs.

use super::*;

impl H {
    pub(super) fn create_cq(&mut self, ctx: Ref, cqe: u16, mode: u8, ch: Ref, vec: u8) {
        let Some(pk) = self.pick(&self.ctxs, ctx) else {
            return;
        };
        if live_count(&self.cqs) >= 8 {
            return;
        }
        let n: c_int = match mode % 4 {
            0 => (cqe % 64) as c_int,
            1 => cqe as c_int,
            2 => [-1, 0, 32767, 32768, i32::MAX, i32::MIN, 1, 2][cqe as usize % 8],
            _ => 1 + (cqe % 8) as c_int,
        };
        let chp = if ch == Ref::NULL {
            Pick::Null
        } else {
            match self.pick(&self.chs, ch) {
                Some(p) => p,
                None if ch.0 < 0xF0 => Pick::Null,
                None => return,
            }
        };
        let v: c_int = match vec % 8 {
            0..=4 => 0,
            5 => 1,
            6 => -1,
            _ => vec as c_int,
        };
        let nvec = match pk {
            Pick::Live(i) => c::peek(self.ctxs[i].p, |x| x.num_comp_vectors),
            _ => 1,
        };
        let cookie = 0xC0_0000 + self.cqs.len();
        let chptr = ptr_of(&self.chs, chp) as *mut ibv_comp_channel;
        c::set_errno(0);
        let p = c::create_cq(ptr_of(&self.ctxs, pk) as *mut _, n, cookie, chptr, v);
        let ok = matches!(pk, Pick::Live(_))
            && (1..=32767).contains(&n)
            && (0..nvec).contains(&v)
            && !matches!(chp, Pick::Bad(_));
        if !self.want_ptr("ibv_create_cq", p, Some(ok), &[libc::EINVAL]) {
            return;
        }
        let Pick::Live(i) = pk else { unreachable!() };
        let (cctx, cch, ccookie, ccqe) =
            c::peek(p, |q| (q.context, q.channel, q.cq_context as usize, q.cqe));
        if cctx != self.ctxs[i].p || cch != chptr || ccookie != cookie || ccqe < n {
            fail!(self, "ibv_cq fields (cqe {ccqe} for {n})");
        }
        let ch = match chp {
            Pick::Live(k) => Some(k),
            _ => None,
        };
        self.cqs.push(CqH {
            p,
            alive: true,
            ctx: i,
            ch,
            cap: ccqe as usize,
            unacked: 0,
            arms: 0,
            events: 0,
            tainted: false,
        });
        if let Some(k) = ch {
            let users = self
                .cqs
                .iter()
                .filter(|q| q.alive && q.ch == Some(k))
                .count();
            if c::peek(self.chs[k].p, |x| x.refcnt) as usize != users {
                fail!(self, "channel refcnt is not its number of CQs ({users})");
            }
        }
    }

    pub(super) fn destroy_cq(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        let Pick::Live(i) = pk else {
            let rc = c::destroy_cq(ptr_of(&self.cqs, pk) as *mut _);
            self.want("ibv_destroy_cq(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let busy = self
            .qps
            .iter()
            .any(|q| q.alive && (q.scq == i || q.rcq == i));
        if !busy && self.cqs[i].unacked > 0 {
            c::ack_cq_events(self.cqs[i].p, self.cqs[i].unacked);
            self.cqs[i].unacked = 0;
        }
        let rc = c::destroy_cq(self.cqs[i].p);
        if busy {
            self.want("ibv_destroy_cq(busy)", rc, &[libc::EBUSY]);
        } else {
            self.want("ibv_destroy_cq", rc, &[0]);
            self.cqs[i].alive = false;
        }
    }

    pub(super) fn req_notify(&mut self, r: Ref, solicited: bool) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => {
                let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
                let rc = c::req_notify_cq(&ops, self.cqs[i].p, solicited as c_int);
                self.want("ibv_req_notify_cq", rc, &[0]);
                self.cqs[i].arms += 1;
            }
            _ => {
                let Some(ops) = self.any_ops() else { return };
                let rc = c::req_notify_cq(&ops, ptr_of(&self.cqs, pk) as *mut _, 0);
                self.want("ibv_req_notify_cq(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }

    pub(super) fn get_cq_event(&mut self, r: Ref, mode: u8) {
        let Some(pk) = self.pick(&self.chs, r) else {
            return;
        };
        let chp = ptr_of(&self.chs, pk) as *mut ibv_comp_channel;
        c::set_errno(0);
        let Pick::Live(k) = pk else {
            let rc = c::get_cq_event(chp, None);
            self.want("ibv_get_cq_event(dead/NULL)", rc, &[-1]);
            self.want(
                "ibv_get_cq_event(dead/NULL) errno",
                c::errno(),
                &[libc::EINVAL],
            );
            return;
        };
        if mode % 8 == 7 {
            let rc = c::get_cq_event(chp, None);
            self.want("ibv_get_cq_event(NULL out)", rc, &[-1]);
            self.want(
                "ibv_get_cq_event(NULL out) errno",
                c::errno(),
                &[libc::EINVAL],
            );
            return;
        }
        let mut cq: *mut ibv_cq = null_mut();
        let mut cookie: *mut c_void = null_mut();
        let rc = c::get_cq_event(chp, Some((&mut cq, &mut cookie)));
        if rc != 0 {
            self.want("ibv_get_cq_event", rc, &[-1]);
            self.want("ibv_get_cq_event errno", c::errno(), &[libc::EAGAIN]);
            return;
        }
        let Some(i) = (0..self.cqs.len()).find(|&i| self.cqs[i].alive && self.cqs[i].p == cq)
        else {
            fail!(self, "completion event for a CQ that is not live: {cq:?}");
        };
        if self.cqs[i].ch != Some(k) {
            fail!(
                self,
                "completion event for CQ {i} on a channel it does not use"
            );
        }
        if cookie as usize != 0xC0_0000 + i {
            fail!(self, "completion event with the wrong cq_context");
        }
        self.stats.events += 1;
        let q = &mut self.cqs[i];
        q.events += 1;
        if q.events > q.arms {
            fail!(
                self,
                "CQ {i}: {} completion events for {} ibv_req_notify_cq",
                self.cqs[i].events,
                self.cqs[i].arms
            );
        }
        if mode & 1 == 1 {
            c::ack_cq_events(cq, 1);
        } else {
            self.cqs[i].unacked += 1;
        }
    }

    /// One `poll_cq` of up to `num` entries on live CQ `i`; returns how many.
    pub(super) fn poll(&mut self, i: usize, num: usize) -> usize {
        let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
        let mut wc = vec![ibv_wc::default(); num];
        let ptr = if num == 0 {
            null_mut()
        } else {
            wc.as_mut_ptr()
        };
        let rc = c::poll_cq(&ops, self.cqs[i].p, num as c_int, ptr);
        if rc < 0 || rc as usize > num {
            fail!(self, "ibv_poll_cq({num}) returned {rc}");
        }
        for w in &wc[..rc as usize] {
            self.completion(i, w);
        }
        if (rc as usize) < num {
            self.cq_empty(i);
        }
        rc as usize
    }

    pub(super) fn poll_op(&mut self, r: Ref, n: u8) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => match n {
                0xFF | 0xFE => {
                    let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
                    let mut one = [ibv_wc::default(); 1];
                    let rc = if n == 0xFF {
                        c::poll_cq(&ops, self.cqs[i].p, -1, one.as_mut_ptr())
                    } else {
                        c::poll_cq(&ops, self.cqs[i].p, 1, null_mut())
                    };
                    self.want("ibv_poll_cq(bad args)", rc, &[-libc::EINVAL]);
                }
                _ => {
                    self.poll(i, (n % 20) as usize);
                }
            },
            _ => {
                let Some(ops) = self.any_ops() else { return };
                let mut one = [ibv_wc::default(); 1];
                let rc = c::poll_cq(&ops, ptr_of(&self.cqs, pk) as *mut _, 1, one.as_mut_ptr());
                self.want("ibv_poll_cq(dead/NULL)", rc, &[-libc::EINVAL]);
            }
        }
    }

    /// Polls every live CQ until it is empty.
    pub(super) fn drain_all(&mut self) {
        for i in 0..self.cqs.len() {
            if !self.cqs[i].alive {
                continue;
            }
            for _ in 0..64 {
                if self.poll(i, 16) < 16 {
                    break;
                }
            }
        }
    }

    pub(super) fn completion(&mut self, cq: usize, w: &ibv_wc) {
        let Some(wr) = self.wrs.get_mut(&w.wr_id) else {
            fail!(self, "completion for a WR never posted: {w:?}");
        };
        wr.seen += 1;
        let (kind, qp, signaled, opcode, len, seen) =
            (wr.kind, wr.qp, wr.signaled, wr.opcode, wr.len, wr.seen);
        if seen > 1 {
            fail!(self, "WR {:#x} completed twice: {w:?}", w.wr_id);
        }
        if w.status > WC_STATUS_MAX {
            fail!(self, "completion with status {}", w.status);
        }
        let ok = w.status == IBV_WC_SUCCESS;
        match (ok, kind) {
            (false, _) => self.stats.errors += 1,
            (true, Kind::Send) => self.stats.sent += 1,
            (true, _) => self.stats.received += 1,
        }
        match kind {
            Kind::Send => {
                let q = &self.qps[qp];
                if q.scq != cq || q.qpn != w.qp_num {
                    fail!(
                        self,
                        "send completion on CQ {cq} / QPN {:#x}, expected CQ {} / QPN {:#x}",
                        w.qp_num,
                        q.scq,
                        q.qpn
                    );
                }
                if ok && !signaled {
                    fail!(self, "an unsignaled send WR completed successfully: {w:?}");
                }
                let want = match opcode {
                    IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => IBV_WC_RDMA_WRITE,
                    IBV_WR_RDMA_READ => IBV_WC_RDMA_READ,
                    IBV_WR_ATOMIC_CMP_AND_SWP => IBV_WC_COMP_SWAP,
                    IBV_WR_ATOMIC_FETCH_AND_ADD => IBV_WC_FETCH_ADD,
                    _ => IBV_WC_SEND,
                };
                if ok && w.opcode != want {
                    fail!(
                        self,
                        "send completion opcode {} for WR opcode {opcode}",
                        w.opcode
                    );
                }
            }
            Kind::Recv | Kind::Srq(_) => {
                let q = match kind {
                    Kind::Recv => qp,
                    Kind::Srq(s) => match (0..self.qps.len()).find(|&k| {
                        self.qps[k].qpn == w.qp_num && self.qps[k].srq == Some(s) && self.qps[k].rcq == cq
                    }) {
                        Some(k) => k,
                        None => fail!(self, "SRQ {s} receive completed on CQ {cq} for QPN {:#x}, no QP of that SRQ and CQ", w.qp_num),
                    },
                    Kind::Send => unreachable!(),
                };
                if self.qps[q].rcq != cq || self.qps[q].qpn != w.qp_num {
                    fail!(self, "receive completion on the wrong CQ / QPN: {w:?}");
                }
                if ok && !matches!(w.opcode, IBV_WC_RECV | IBV_WC_RECV_RDMA_WITH_IMM) {
                    fail!(self, "receive completion opcode {}", w.opcode);
                }
                if ok && u64::from(w.byte_len) > len && w.opcode == IBV_WC_RECV {
                    fail!(
                        self,
                        "received {} bytes into {len} bytes of SGEs",
                        w.byte_len
                    );
                }
            }
        }
    }

    /// CQ `i` was seen empty: WRs that can no longer complete are not in it.
    pub(super) fn cq_empty(&mut self, i: usize) {
        for w in self.wrs.values_mut() {
            if !w.live && w.seen == 0 && !w.cleared.contains(&i) {
                w.cleared.push(i);
            }
        }
    }

    /// The CQs a WR's completion can go to.
    pub(super) fn wr_cqs(&self, w: &Wr) -> Vec<usize> {
        match w.kind {
            Kind::Send => vec![self.qps[w.qp].scq],
            Kind::Recv => vec![self.qps[w.qp].rcq],
            Kind::Srq(s) => {
                let mut v: Vec<usize> = self
                    .qps
                    .iter()
                    .filter(|q| q.srq == Some(s))
                    .map(|q| q.rcq)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// Marks a CQ that may have overflowed (more completions possibly queued than its size).
    pub(super) fn update_taint(&mut self) {
        let mut bound = vec![0usize; self.cqs.len()];
        for w in self.wrs.values() {
            if w.seen > 0 {
                continue;
            }
            for cq in self.wr_cqs(w) {
                if !w.cleared.contains(&cq) {
                    bound[cq] += 1;
                }
            }
        }
        for (q, b) in self.cqs.iter_mut().zip(bound) {
            if q.alive && b > q.cap {
                q.tainted = true;
            }
        }
    }
}
