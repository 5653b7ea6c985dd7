//! `completer`: a requester with outstanding SEND / WRITE / READ / atomic WRs (from the input)
//! fed arbitrary responses: ACK, NAK, RNR NAK, read responses and atomic ACKs with PSNs taken
//! from what was sent, near it or anywhere, arbitrary MSNs, syndromes and payload lengths;
//! plus time steps (retries), more posts and raw bytes.
//!
//! Invariants: no panic; no region call outside its bounds; responses only land in the
//! sink SGEs of READ / atomic WRs (every other byte of the local region is unchanged);
//! no WR completes twice or out of order; a WR completes successfully only after all its
//! request packets were transmitted (a forged ACK for a PSN never sent completes nothing);
//! an ERR QP has completed every WR; per-QP storage never grows.
use crate::harness::*;
use crate::responder::connect;
use arbitrary::Unstructured;
use roce_emu::*;
use roce_wire::transport::Repr;
use roce_wire::{aeth, atomic_ack_eth, bth, OpFlags, Opcode, Psn};
use std::net::IpAddr;
use std::sync::Arc;

const IOVA: u64 = 0x1_0000;
const LEN: usize = 16384;
/// Sinks of READ / atomic WRs: slot `i` at `SINK + i * 1024`.
const SINK: usize = 8192;
const SQ: u32 = 8;

struct Wr {
    opcode: WrOpcode,
    signaled: bool,
    sink: Option<(usize, usize)>,
}

struct Completer {
    nic: Nic,
    me: IpAddr,
    peer: IpAddr,
    qpn: u32,
    lkey: u32,
    cq: Cq,
    mem: Arc<Guarded>,
    wrs: Vec<Wr>,
    /// PSNs transmitted so far, with the opcode and the end-of-message flag.
    sent: Vec<(Psn, Opcode)>,
    /// Message-ending PSNs in order of first transmission (WR k is fully sent once this has
    /// more than k entries).
    ends: Vec<Psn>,
    completed: Vec<(u64, WcStatus)>,
    now: Instant,
}

impl Completer {
    fn post(&mut self, u: &mut Unstructured<'_>) {
        let k = self.wrs.len();
        let opcode = pick(
            u,
            &[
                WrOpcode::Send,
                WrOpcode::RdmaWrite,
                WrOpcode::RdmaRead,
                WrOpcode::AtomicCmpAndSwp,
                WrOpcode::AtomicFetchAndAdd,
                WrOpcode::SendWithImm,
                WrOpcode::RdmaWriteWithImm,
                WrOpcode::RdmaRead,
            ],
        );
        let len = if opcode.is_atomic() {
            8
        } else {
            pick(u, &[0u32, 1, 255, 256, 257, 700, 1024])
        };
        let slot = k % 8;
        let (addr, sink) = if opcode.is_rd_atomic() {
            let at = SINK + slot * 1024;
            (at, Some((at, len as usize)))
        } else {
            (slot * 1024, None)
        };
        let sg = [Sge {
            addr: IOVA + addr as u64,
            length: len,
            lkey: self.lkey,
        }];
        let signaled = chance(u, 3, 4);
        let wr = SendWr {
            wr_id: k as u64,
            sg_list: &sg,
            opcode,
            send_flags: if signaled {
                SendFlags::SIGNALED
            } else {
                SendFlags::EMPTY
            },
            remote_addr: 0x2_0000 + 8 * range(u, 0, 64) as u64,
            rkey: 0x1234,
            compare_add: any(u),
            swap: any(u),
            imm_data: 7,
            ..Default::default()
        };
        if self.nic.post_send(self.qpn, &wr).is_ok() {
            self.wrs.push(Wr {
                opcode,
                signaled,
                sink,
            });
        }
    }

    fn pump(&mut self, buf: &mut [u8]) {
        let now = self.now;
        for o in drain(&mut self.nic, now, buf, 4096) {
            let op = o.repr.bth.opcode;
            assert_eq!(o.t.dst_ip, self.peer);
            assert_eq!(o.repr.bth.dest_qp, 0x200);
            if !op.flags().contains(OpFlags::REQ) {
                // the QP's responder answering an injected request
                continue;
            }
            let psn = o.repr.bth.psn;
            let end = op.flags().contains(OpFlags::END) || op.flags().contains(OpFlags::READ);
            // a READ request occupies one PSN per response packet
            let last = if op.flags().contains(OpFlags::READ) {
                let n = o.repr.reth.map_or(0, |r| r.dma_len).div_ceil(256).max(1);
                psn.add(n - 1)
            } else {
                psn
            };
            let mut p = psn;
            loop {
                if !self.sent.iter().any(|(x, _)| *x == p) {
                    self.sent.push((p, op));
                }
                if p == last {
                    break;
                }
                p = p.add(1);
            }
            if end && !self.ends.contains(&psn) {
                self.ends.push(psn);
            }
        }
        let mut wc = [WorkCompletion::default(); 16];
        loop {
            let n = self.nic.poll_cq(self.cq, &mut wc);
            if n == 0 {
                break;
            }
            for w in &wc[..n] {
                let k = w.wr_id as usize;
                assert!(k < self.wrs.len(), "completion for a WR never posted");
                assert!(
                    !self.completed.iter().any(|(id, _)| *id == w.wr_id),
                    "WR {k} completed twice"
                );
                if let Some((last, _)) = self.completed.last() {
                    assert!(*last < w.wr_id, "completions out of order");
                }
                if w.status == WcStatus::Success {
                    assert!(
                        k < self.ends.len(),
                        "WR {k} ({:?}) completed before all its packets were sent (sent ends {:?})",
                        self.wrs[k].opcode,
                        self.ends
                    );
                }
                self.completed.push((w.wr_id, w.status));
            }
        }
        while self.nic.poll_event().is_some() {}
    }

    fn response(&mut self, u: &mut Unstructured<'_>) -> (Repr, u8) {
        let op = match range(u, 0, 12) {
            0 => Opcode(any(u)),
            1..=4 => Opcode::RC_ACKNOWLEDGE,
            5 => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            6 => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            7 => Opcode::RC_RDMA_READ_RESPONSE_LAST,
            8..=9 => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            _ => Opcode::RC_ATOMIC_ACKNOWLEDGE,
        };
        let f = op.flags();
        let psn = match range(u, 0, 7) {
            0 => Psn::new(any(u)),
            1 => self
                .sent
                .last()
                .map_or(Psn::new(0x200), |p| p.0)
                .add(range(u, 1, 300)),
            2 => Psn::new(0x200).add(range(u, 0, 40)).sub(8),
            _ if self.sent.is_empty() => Psn::new(0x200),
            _ => {
                let i = range(u, 0, self.sent.len() as u32 - 1) as usize;
                self.sent[i].0
            }
        };
        let mut r = Repr::new(bth::Repr::new(op, self.qpn, psn));
        if f.contains(OpFlags::AETH) {
            let syn = match range(u, 0, 9) {
                0 => any(u),
                1 => 0x20 | range(u, 0, 31) as u8,
                2 => 0x60 | range(u, 0, 4) as u8,
                3 => 0x40 | range(u, 0, 31) as u8,
                _ => aeth::CREDITS_INVALID,
            };
            r.aeth = Some(aeth::Repr {
                syndrome: aeth::Syndrome::from_byte(syn),
                msn: range(u, 0, 0xFF_FFFF),
            });
        }
        if f.contains(OpFlags::ATMACK) {
            r.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: any(u) });
        }
        let plen = if f.contains(OpFlags::PAYLOAD) {
            match range(u, 0, 4) {
                0 => range(u, 0, 600) as usize,
                1 => 0,
                _ => pick(u, &[256usize, 1, 255, 188, 4, 8]),
            }
        } else {
            0
        };
        r.set_payload_len(plen);
        (r, any(u))
    }
}

/// The target body.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let me: IpAddr = "10.0.0.1".parse().unwrap();
    let peer: IpAddr = "10.0.0.2".parse().unwrap();
    let mut nic = Nic::new(NicConfig::new(me));
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(64).unwrap();
    let mem = Arc::new(Guarded::new(LEN, 0x3C));
    let mr = nic
        .reg_mr(pd, mem.clone(), IOVA, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: QpCap {
            max_send_wr: SQ,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        sq_sig_all: false,
    };
    let qpn = nic.create_qp(pd, &init).unwrap();
    connect(&mut nic, qpn, QpType::Rc, peer, 0x200, 4);
    // the fake peer's QPN is 0x200 and its PSNs start at 0x200 too (connect sets sq_psn 0x200)
    let _ = nic.modify_qp(
        qpn,
        &QpAttr {
            retry_cnt: range(&mut u, 0, 7) as u8,
            rnr_retry: range(&mut u, 0, 7) as u8,
            max_rd_atomic: pick(&mut u, &[1u8, 2, 4]),
            ..Default::default()
        },
        QpAttrMask::RETRY_CNT | QpAttrMask::RNR_RETRY | QpAttrMask::MAX_QP_RD_ATOMIC,
    );
    let mut s = Completer {
        nic,
        me,
        peer,
        qpn,
        lkey: mr.lkey,
        cq,
        mem,
        wrs: Vec::new(),
        sent: Vec::new(),
        ends: Vec::new(),
        completed: Vec::new(),
        now: Instant::ZERO,
    };
    for _ in 0..range(&mut u, 1, SQ) {
        s.post(&mut u);
    }
    let mem0 = s.nic.qp_memory(qpn).unwrap();
    let mut buf = vec![0u8; 8192];
    let mut pkt = Vec::with_capacity(8192);
    s.pump(&mut buf);
    for _ in 0..256 {
        if u.is_empty() {
            break;
        }
        match range(&mut u, 0, 15) {
            0 => {
                s.now = s.now.add_nanos(range(&mut u, 0, 1 << 16) as u64 * 256);
                let now = s.now;
                s.nic.handle_timeout(now);
            }
            1 if s.wrs.len() < 64 => s.post(&mut u),
            2 => {
                let n = range(&mut u, 0, 300) as usize;
                let mut raw = u.bytes(n.min(u.len())).unwrap_or(&[]).to_vec();
                if raw.len() >= 12 {
                    raw[5..8].copy_from_slice(&s.qpn.to_be_bytes()[1..]);
                }
                if raw.len() >= 16 {
                    seal(s.peer, s.me, 0xC000, &mut raw);
                }
                let m = meta(s.peer, s.me, 0xC000);
                let now = s.now;
                s.nic.handle_datagram(now, &m, &raw);
            }
            _ => {
                let (r, fill) = s.response(&mut u);
                emit(&r, fill, &mut pkt);
                seal(s.peer, s.me, 0xC000, &mut pkt);
                let m = meta(s.peer, s.me, 0xC000);
                let now = s.now;
                // a response for a PSN this QP never sent must change nothing
                let hi = s
                    .sent
                    .iter()
                    .map(|x| x.0)
                    .reduce(|a, b| if b.diff(a) > 0 { b } else { a });
                let never_sent = hi.is_some_and(|h| {
                    let d = r.bth.psn.diff(h);
                    d > 0 && d < 1 << 22
                });
                let before = (s.completed.len(), s.nic.query_qp(qpn).unwrap().qp_state);
                s.nic.handle_datagram(now, &m, &pkt);
                if never_sent {
                    s.pump(&mut buf);
                    let after = (s.completed.len(), s.nic.query_qp(qpn).unwrap().qp_state);
                    assert_eq!(
                        before, after,
                        "a response for PSN {:?} (never sent; highest sent {hi:?}) was acted on",
                        r.bth.psn
                    );
                }
            }
        }
        s.pump(&mut buf);
        assert_eq!(s.nic.qp_memory(qpn).unwrap(), mem0, "per-QP storage grew");
    }
    // let every timer run out: the QP either completes everything or errors and flushes
    for _ in 0..64 {
        let Some(t) = s.nic.poll_timeout() else { break };
        s.now = s.now.max(t);
        let now = s.now;
        s.nic.handle_timeout(now);
        s.pump(&mut buf);
    }
    let st = s.nic.query_qp(qpn).unwrap().qp_state;
    if st == QpState::Err {
        for (k, w) in s.wrs.iter().enumerate() {
            assert!(
                !w.signaled || s.completed.iter().any(|c| c.0 == k as u64),
                "WR {k} never completed on an ERR QP"
            );
        }
    }
    // nothing but the READ / atomic sinks changed
    let now_mem = s.mem.snapshot();
    for (i, b) in now_mem.iter().enumerate() {
        let in_sink = s
            .wrs
            .iter()
            .any(|w| w.sink.is_some_and(|(a, l)| i >= a && i < a + l));
        if !in_sink {
            assert_eq!(*b, 0x3C, "byte {i} outside every sink changed");
        }
    }
}
