//! Posting through the context ops table: send and receive WRs, their SGEs and the memory
//! they may write, and the checks of a post's result.

use super::*;

impl H {
    pub(super) fn sge(&self, s: &Sge, inline: bool) -> ibv_sge {
        let mr = if s.mr == Ref::NULL || self.mrs.is_empty() {
            None
        } else {
            Some(&self.mrs[s.mr.0 as usize % self.mrs.len()])
        };
        if inline {
            // a real pointer into a harness buffer (guards included: they are only read)
            let b = mr.map_or(0, |m| m.buf);
            let o = s.off as usize % TOTAL;
            let len = (s.len as usize % 512).min(TOTAL - o);
            return ibv_sge {
                addr: (self.bufs[b].base as usize + o) as u64,
                length: len as u32,
                lkey: mr.map_or(0, |m| m.lkey),
            };
        }
        let Some(m) = mr else {
            return ibv_sge {
                addr: (s.off as u64) << 12 | 0x10,
                length: s.len as u32,
                lkey: (s.off as u32).wrapping_mul(0x9E37_79B9),
            };
        };
        let inside = |off: u16, len: u16| -> (u64, u32) {
            let o = off as u64 % (m.len as u64 + 1);
            (m.iova + o, (len as u64).min(m.len as u64 - o) as u32)
        };
        match s.mode % 8 {
            0..=4 => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.lkey,
                }
            }
            5 => ibv_sge {
                addr: m.iova.wrapping_add(s.off as u64),
                length: s.len as u32,
                lkey: m.lkey,
            },
            6 => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.lkey ^ (1 + s.off as u32),
                }
            }
            _ => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.rkey,
                }
            }
        }
    }

    /// The SGE array of a WR: `(array, num_sge, NULL list)`.
    pub(super) fn sg_list(
        &self,
        sges: &[Sge],
        mode: u8,
        inline: bool,
    ) -> (Vec<ibv_sge>, c_int, bool) {
        match mode % 16 {
            15 => (Vec::new(), -1, true),
            14 => (Vec::new(), 2, true),
            13 => (vec![ibv_sge::default(); 40], 40, false),
            _ => {
                let v: Vec<ibv_sge> = sges.iter().map(|s| self.sge(s, inline)).collect();
                let n = v.len() as c_int;
                (v, n, n == 0)
            }
        }
    }

    pub(super) fn remote(&self, r: &Remote, atomic: bool) -> (u64, u32) {
        let mr = if r.mr == Ref::NULL || self.mrs.is_empty() {
            None
        } else {
            Some(&self.mrs[r.mr.0 as usize % self.mrs.len()])
        };
        let Some(m) = mr else {
            return ((r.off as u64) << 3, r.off as u32);
        };
        let o = r.off as u64 % (m.len as u64 + 1);
        match r.mode % 4 {
            0 if atomic => ((m.iova + o) & !7, m.rkey),
            0 | 1 => (m.iova + o, m.rkey),
            2 => (m.iova.wrapping_add(r.off as u64), m.rkey),
            _ => (m.iova + o, m.rkey.wrapping_add(1 + r.off as u32)),
        }
    }

    /// Marks `[addr, addr + len)` of every MR (live or not) whose key is `key` as addressed.
    pub(super) fn mark(&mut self, key: u32, remote: bool, addr: u64, len: u64) {
        for k in 0..self.mrs.len() {
            let m = &self.mrs[k];
            if (if remote { m.rkey } else { m.lkey }) != key || addr < m.iova {
                continue;
            }
            let o = addr - m.iova;
            if o >= m.len as u64 {
                continue;
            }
            let n = len.min(m.len as u64 - o) as usize;
            let start = m.off + o as usize;
            let b = m.buf;
            self.bufs[b].addressed[start..start + n].fill(true);
        }
    }

    /// Marks what an accepted send WR may write: local SGEs of READ / atomics, the remote
    /// range of WRITE / atomics.
    pub(super) fn mark_send(&mut self, w: &ibv_send_wr, sges: &[ibv_sge], len: u64) {
        let atomic = matches!(
            w.opcode,
            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
        );
        if w.opcode == IBV_WR_RDMA_READ || atomic {
            for g in sges {
                self.mark(g.lkey, false, g.addr, g.length as u64);
            }
        }
        let (raddr, rkey) = if atomic {
            c::union_atomic(w)
        } else {
            c::union_rdma(w)
        };
        match w.opcode {
            IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => self.mark(rkey, true, raddr, len),
            _ if atomic => self.mark(rkey, true, raddr, 8),
            _ => {}
        }
    }

    pub(super) fn new_wr_id(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    pub(super) fn post_send(&mut self, r: Ref, specs: &[SendSpec], bad_null: bool) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let qp = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let live = match pk {
            Pick::Live(i) => Some(i),
            _ => None,
        };
        let ops = match live {
            Some(i) => {
                let ctx = c::peek(qp, |q| q.context);
                if ctx != self.ctxs[self.qp_ctx(i)].p {
                    fail!(self, "qp->context changed");
                }
                c::ops(ctx)
            }
            None => match self.any_ops() {
                Some(o) => o,
                None => return,
            },
        };
        let is_ud = live.is_some_and(|i| self.qps[i].qpt == IBV_QPT_UD);
        let mut arrays: Vec<Vec<ibv_sge>> = Vec::new();
        let mut list: Vec<ibv_send_wr> = Vec::new();
        let mut meta: Vec<(u64, u32, bool, u64)> = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let opcode = if s.opcode < 0xE0 {
                [
                    IBV_WR_SEND,
                    IBV_WR_SEND_WITH_IMM,
                    IBV_WR_RDMA_WRITE,
                    IBV_WR_RDMA_WRITE_WITH_IMM,
                    IBV_WR_RDMA_READ,
                    IBV_WR_ATOMIC_CMP_AND_SWP,
                    IBV_WR_ATOMIC_FETCH_AND_ADD,
                    IBV_WR_SEND_WITH_INV,
                    IBV_WR_SEND,
                ][s.opcode as usize % 9]
            } else {
                (s.opcode - 0xE0) as u32
            };
            let flags = s.flags as c_uint;
            let inline = flags & IBV_SEND_INLINE != 0;
            let (arr, n, _) = self.sg_list(&s.sges.0, s.sge_mode, inline);
            let atomic = matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            );
            let (raddr, rkey) = self.remote(&s.remote, atomic);
            let wr = if is_ud {
                let ah = match self.pick(&self.ahs, s.ah) {
                    Some(p) => ptr_of(&self.ahs, p) as *mut ibv_ah,
                    None => null_mut(),
                };
                let dest = self.dest_qpn(s.dest);
                let qkey = if s.qkey == 0 { QKEY } else { s.qkey };
                ibv_send_wr_wr {
                    ud: ibv_send_wr_ud {
                        ah,
                        remote_qpn: dest,
                        remote_qkey: qkey,
                    },
                }
            } else if atomic {
                ibv_send_wr_wr {
                    atomic: ibv_send_wr_atomic {
                        remote_addr: raddr,
                        compare_add: s.compare_add,
                        swap: s.swap,
                        rkey,
                    },
                }
            } else {
                ibv_send_wr_wr {
                    rdma: ibv_send_wr_rdma {
                        remote_addr: raddr,
                        rkey,
                    },
                }
            };
            let len = arr.iter().map(|x| x.length as u64).sum();
            arrays.push(arr);
            list.push(ibv_send_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: n,
                opcode,
                send_flags: flags,
                imm_data: s.imm,
                wr,
                qp_type: ibv_send_wr_qp_type {
                    xrc: ibv_send_wr_xrc { remote_srqn: 0 },
                },
                ext: ibv_send_wr_ext {
                    tso: ibv_send_wr_tso {
                        hdr: null_mut(),
                        hdr_sz: 0,
                        mss: 0,
                    },
                },
            });
            meta.push((id, opcode, flags & IBV_SEND_SIGNALED != 0, len));
        }
        for k in 0..list.len() {
            if !arrays[k].is_empty() {
                list[k].sg_list = arrays[k].as_mut_ptr();
            }
        }
        let base = list.as_mut_ptr();
        for k in 0..list.len().saturating_sub(1) {
            list[k].next = base.wrapping_add(k + 1);
        }
        let head = if list.is_empty() { null_mut() } else { base };
        let mut bad: *mut ibv_send_wr = null_mut();
        let badp: *mut *mut ibv_send_wr = if bad_null { null_mut() } else { &mut bad };
        let rc = c::post_send(&ops, qp, head, badp);
        let Some(i) = live else {
            self.want("ibv_post_send(dead/NULL qp)", rc, &[libc::EINVAL]);
            return;
        };
        let posted = self.posted(
            "ibv_post_send",
            rc,
            bad as usize,
            base as usize,
            list.len(),
            bad_null,
            i,
        );
        let sig_all = self.qps[i].sig_all;
        for (k, (id, opcode, signaled, len)) in meta.into_iter().enumerate() {
            let sure = k < posted.0;
            if !sure && k >= posted.1 {
                break;
            }
            self.mark_send(&list[k], &arrays[k], len);
            let signaled = signaled || sig_all;
            self.stats.posted += sure as usize;
            self.wrs.insert(
                id,
                Wr {
                    qp: i,
                    kind: Kind::Send,
                    must: sure && signaled,
                    signaled,
                    opcode,
                    len: 0,
                    seen: 0,
                    live: true,
                    cleared: Vec::new(),
                },
            );
        }
        drop(arrays);
    }

    /// Checks a post's result; returns (WRs surely posted, WRs maybe posted).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn posted(
        &self,
        verb: &str,
        rc: c_int,
        bad: usize,
        base: usize,
        n: usize,
        bad_null: bool,
        qp: usize,
    ) -> (usize, usize) {
        self.want(verb, rc, &[0, libc::EINVAL, libc::ENOMEM]);
        if qp != usize::MAX && self.qps[qp].state == IBV_QPS_RESET && n > 0 {
            if rc != libc::EINVAL {
                fail!(self, "{verb} on a QP in RESET returned {rc}");
            }
            if !bad_null && bad != base {
                fail!(self, "{verb} on a QP in RESET: bad_wr is not the first WR");
            }
        }
        if rc == 0 {
            return (n, n);
        }
        if bad_null {
            return (0, n);
        }
        let size = if verb == "ibv_post_send" {
            core::mem::size_of::<ibv_send_wr>()
        } else {
            core::mem::size_of::<ibv_recv_wr>()
        };
        let off = bad.wrapping_sub(base);
        if n == 0 || bad < base || off / size * size != off || off / size >= n {
            fail!(
                self,
                "{verb} failed ({rc}) with bad_wr {bad:#x} outside the list"
            );
        }
        let k = (bad - base) / size;
        (k, k)
    }

    /// `srq`: `Some(())` posts to an SRQ chosen by `r`, else to a QP.
    pub(super) fn post_recv(
        &mut self,
        r: Ref,
        srq: Option<()>,
        specs: &[RecvSpec],
        bad_null: bool,
    ) {
        let (pk, obj, live_ops) = if srq.is_some() {
            let Some(pk) = self.pick(&self.srqs, r) else {
                return;
            };
            let p = ptr_of(&self.srqs, pk);
            let ops = match pk {
                Pick::Live(i) => Some(c::ops(self.ctxs[self.ctx_of_pd(self.srqs[i].pd)].p)),
                _ => None,
            };
            (pk, p, ops)
        } else {
            let Some(pk) = self.pick(&self.qps, r) else {
                return;
            };
            let p = ptr_of(&self.qps, pk);
            let ops = match pk {
                Pick::Live(i) => Some(c::ops(self.ctxs[self.qp_ctx(i)].p)),
                _ => None,
            };
            (pk, p, ops)
        };
        let ops = match live_ops.or_else(|| self.any_ops()) {
            Some(o) => o,
            None => return,
        };
        let mut arrays: Vec<Vec<ibv_sge>> = Vec::new();
        let mut list: Vec<ibv_recv_wr> = Vec::new();
        let mut meta = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let (arr, n, _) = self.sg_list(&s.sges.0, s.sge_mode, false);
            meta.push((id, arr.iter().map(|x| x.length as u64).sum::<u64>()));
            arrays.push(arr);
            list.push(ibv_recv_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: n,
            });
        }
        for k in 0..list.len() {
            if !arrays[k].is_empty() {
                list[k].sg_list = arrays[k].as_mut_ptr();
            }
        }
        let base = list.as_mut_ptr();
        for k in 0..list.len().saturating_sub(1) {
            list[k].next = base.wrapping_add(k + 1);
        }
        let head = if list.is_empty() { null_mut() } else { base };
        let mut bad: *mut ibv_recv_wr = null_mut();
        let badp: *mut *mut ibv_recv_wr = if bad_null { null_mut() } else { &mut bad };
        let rc = if srq.is_some() {
            c::post_srq_recv(&ops, obj as *mut _, head, badp)
        } else {
            c::post_recv(&ops, obj as *mut _, head, badp)
        };
        let Pick::Live(i) = pk else {
            self.want("ibv_post_recv(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let qp = if srq.is_some() { usize::MAX } else { i };
        if srq.is_none() && self.qps[i].srq.is_some() && !list.is_empty() && rc != libc::EINVAL {
            fail!(self, "ibv_post_recv on a QP with an SRQ returned {rc}");
        }
        let posted = self.posted(
            "ibv_post_recv",
            rc,
            bad as usize,
            base as usize,
            list.len(),
            bad_null,
            qp,
        );
        for (k, (id, len)) in meta.into_iter().enumerate() {
            let sure = k < posted.0;
            if !sure && k >= posted.1 {
                break;
            }
            for g in &arrays[k] {
                self.mark(g.lkey, false, g.addr, g.length as u64);
            }
            self.stats.posted += sure as usize;
            let (qp, kind, must) = if srq.is_some() {
                (usize::MAX, Kind::Srq(i), false)
            } else {
                (i, Kind::Recv, sure)
            };
            self.wrs.insert(
                id,
                Wr {
                    qp,
                    kind,
                    must,
                    signaled: true,
                    opcode: 0,
                    len,
                    seen: 0,
                    live: true,
                    cleared: Vec::new(),
                },
            );
        }
        drop(arrays);
    }
}
