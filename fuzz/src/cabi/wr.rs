//! Posting through the `ibv_wr_*` API of `ibv_qp_ex` (all of a batch or none of it).

use super::*;

impl H {
    /// Maps an opcode byte as [`SendSpec`] documents it.
    pub(super) fn opcode_of(b: u8) -> u32 {
        if b < 0xE0 {
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
            ][b as usize % 9]
        } else {
            (b - 0xE0) as u32
        }
    }

    /// The `ibv_wr_*` API: all of a batch is posted by `ibv_wr_complete` or none of it
    /// (man ibv_wr_post: "the entire posting will be aborted").
    pub(super) fn post_wr(&mut self, r: Ref, specs: &[SendSpec], mode: u8) {
        use c::WrCall as W;
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let qp = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let qpx = c::qp_to_qp_ex(qp);
        let i = match pk {
            Pick::Live(i) if self.qps[i].ex => i,
            _ => {
                if !qpx.is_null() {
                    fail!(
                        self,
                        "ibv_qp_to_qp_ex of a QP without send ops (or not live) is {qpx:?}"
                    );
                }
                return;
            }
        };
        if !std::ptr::eq(qpx.cast::<ibv_qp>(), qp) {
            fail!(self, "ibv_qp_to_qp_ex is not the QP");
        }
        let is_ud = self.qps[i].qpt == IBV_QPT_UD;
        c::wr(qpx, None, W::Start);
        if mode & 2 != 0 {
            c::wr(qpx, None, W::Sge(0, 0, 0));
        }
        let mut batch = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let opcode = Self::opcode_of(s.opcode);
            let flags = s.flags as u32;
            let atomic = matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            );
            let (ra, rk) = self.remote(&s.remote, atomic);
            let value = if s.imm & 1 == 0 {
                self.bufs[0].interior() as *const c_void
            } else {
                core::ptr::null()
            };
            let build = match opcode {
                IBV_WR_SEND_WITH_IMM => W::SendImm(s.imm),
                IBV_WR_SEND_WITH_INV => W::SendInv(s.imm),
                IBV_WR_RDMA_WRITE => W::Write(rk, ra),
                IBV_WR_RDMA_WRITE_WITH_IMM => W::WriteImm(rk, ra, s.imm),
                IBV_WR_RDMA_READ => W::Read(rk, ra),
                IBV_WR_ATOMIC_CMP_AND_SWP => W::Cas(rk, ra, s.compare_add, s.swap),
                IBV_WR_ATOMIC_FETCH_AND_ADD => W::Faa(rk, ra, s.compare_add),
                IBV_WR_LOCAL_INV => W::LocalInv(s.imm),
                IBV_WR_ATOMIC_WRITE => W::AtomicWrite(rk, ra, value),
                _ => W::Send,
            };
            let opcode = match build {
                W::Send => IBV_WR_SEND,
                _ => opcode,
            };
            c::wr(qpx, Some((id, flags)), build);
            if is_ud {
                let ah = match self.pick(&self.ahs, s.ah) {
                    Some(p) => ptr_of(&self.ahs, p) as *mut ibv_ah,
                    None => null_mut(),
                };
                let qkey = if s.qkey == 0 { QKEY } else { s.qkey };
                c::wr(qpx, None, W::UdAddr(ah, self.dest_qpn(s.dest), qkey));
            }
            let inline = flags & IBV_SEND_INLINE != 0;
            let (arr, n, null) = self.sg_list(&s.sges.0, s.sge_mode, inline);
            let mut len: u64 = arr.iter().map(|g| g.length as u64).sum();
            if mode & 8 == 0 {
                if inline {
                    if mode & 4 != 0 {
                        let (a, l) = arr.first().map_or((0, 0), |g| (g.addr, g.length));
                        len = l as u64;
                        c::wr(qpx, None, W::Inline(a as *mut c_void, l as usize));
                    } else {
                        let bufs: Vec<ibv_data_buf> = arr
                            .iter()
                            .map(|g| ibv_data_buf {
                                addr: g.addr as *mut c_void,
                                length: g.length as usize,
                            })
                            .collect();
                        let p = if null {
                            core::ptr::null()
                        } else {
                            bufs.as_ptr()
                        };
                        c::wr(qpx, None, W::InlineList(n.max(0) as usize, p));
                    }
                } else if mode & 4 != 0 && !arr.is_empty() {
                    len = arr[0].length as u64;
                    c::wr(qpx, None, W::Sge(arr[0].lkey, arr[0].addr, arr[0].length));
                } else {
                    let p = if null {
                        core::ptr::null()
                    } else {
                        arr.as_ptr()
                    };
                    c::wr(qpx, None, W::SgeList(n.max(0) as usize, p));
                }
            }
            batch.push((id, opcode, flags, arr, len, ra, rk));
        }
        if mode & 1 != 0 {
            c::wr(qpx, None, W::Abort);
            return;
        }
        let rc = c::wr(qpx, None, W::Complete);
        self.want("ibv_wr_complete", rc, &[0, libc::EINVAL, libc::ENOMEM]);
        // EINVAL: none of the batch is posted. ENOMEM (the SQ filled up): the engine cannot
        // post a batch atomically yet, so a prefix may have been posted (fuzz/README.md).
        let sure = rc == 0;
        if rc == libc::EINVAL {
            return;
        }
        if sure && mode & 2 != 0 {
            fail!(
                self,
                "ibv_wr_complete succeeded after a setter without a work request"
            );
        }
        if sure && self.qps[i].state == IBV_QPS_RESET && !specs.is_empty() {
            fail!(self, "ibv_wr_complete succeeded on a QP in RESET");
        }
        let sig_all = self.qps[i].sig_all;
        for (id, opcode, flags, arr, len, ra, rk) in batch {
            let mut w = ibv_send_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: 0,
                opcode,
                send_flags: flags,
                imm_data: 0,
                wr: ibv_send_wr_wr {
                    rdma: ibv_send_wr_rdma {
                        remote_addr: ra,
                        rkey: rk,
                    },
                },
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
            };
            if matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            ) {
                w.wr = ibv_send_wr_wr {
                    atomic: ibv_send_wr_atomic {
                        remote_addr: ra,
                        compare_add: 0,
                        swap: 0,
                        rkey: rk,
                    },
                };
            }
            self.mark_send(&w, &arr, len);
            let signaled = flags & IBV_SEND_SIGNALED != 0 || sig_all;
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
    }
}
