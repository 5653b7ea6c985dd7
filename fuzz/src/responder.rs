//! `responder`: one NIC with RC, UC, UD and RC-on-SRQ QPs in RTS, guarded regions (full access,
//! read-only, receive buffers) and a stale key, fed a sequence of packets built from the input:
//! opcode, PSN offset, RETH / AtomicETH / DETH fields, payload length, pad, source address;
//! ICRC-valid (mostly), plus raw bytes and time steps.
//!
//! Invariants: no panic; no region call outside its bounds (the [`Guarded`] regions panic);
//! the read-only region and the bytes no request may reach never change; every datagram the
//! NIC sends parses, is an RC response to a connected peer, and carries a PSN at or behind its
//! QP's expected PSN, which itself only moves forward; per-QP storage never grows.
use crate::harness::*;
use arbitrary::Unstructured;
use roce_emu::*;
use roce_wire::transport::Repr;
use roce_wire::{aeth, atomic_eth, bth, deth, ieth, immdt, reth, OpFlags, Opcode, Psn};
use std::net::IpAddr;
use std::sync::Arc;

/// The NIC under test and everything the target knows about it.
pub struct Responder {
    /// The NIC (10.0.0.2).
    pub nic: Nic,
    /// Its peer's address (10.0.0.1).
    pub peer: IpAddr,
    /// Its own address.
    pub me: IpAddr,
    /// QPNs: RC, UC, UD, RC on an SRQ.
    pub qpns: [u32; 4],
    /// The peer QPNs of the connected QPs (UD: 0).
    pub peer_qpns: [u32; 4],
    /// Full-access region at [`MAIN_IOVA`].
    pub main: Arc<Guarded>,
    /// Read-only (REMOTE_READ) region at [`RO_IOVA`].
    pub ro: Arc<Guarded>,
    /// Receive buffers at [`RECV_IOVA`] (LOCAL_WRITE only).
    pub recv: Arc<Guarded>,
    /// Keys: main rkey, read-only rkey, a deregistered rkey, the receive region's lkey.
    pub keys: [u32; 4],
    recv_lkey: u32,
    srq: Srq,
    cqs: [Cq; 2],
    /// Current virtual time.
    pub now: Instant,
    wr_id: u64,
}

/// IOVA of the full-access region.
pub const MAIN_IOVA: u64 = 0x1_0000;
/// Its length.
pub const MAIN_LEN: usize = 8192;
/// IOVA of the read-only region.
pub const RO_IOVA: u64 = 0x4_0000;
/// Its length.
pub const RO_LEN: usize = 1024;
/// IOVA of the receive buffers.
pub const RECV_IOVA: u64 = 0x8_0000;
/// Their length (8 slots of 512).
pub const RECV_LEN: usize = 4096;
/// Path MTU of the connected QPs.
pub const MTU: u32 = 256;
/// Q_Key of the UD QP.
pub const QKEY: u32 = 0x1111_1111;

const ALL: AccessFlags = AccessFlags(1 | 2 | 4 | 8);

impl Responder {
    /// Builds the NIC; `max_dest_rd_atomic` of the RC QPs is `rd` (1..=16).
    pub fn new(rd: u8, seed: u64) -> Responder {
        let me: IpAddr = "10.0.0.2".parse().unwrap();
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let mut cfg = NicConfig::new(me);
        cfg.seed = seed;
        let mut nic = Nic::new(cfg);
        let pd = nic.alloc_pd().unwrap();
        let scq = nic.create_cq(64).unwrap();
        let rcq = nic.create_cq(16).unwrap();
        let main = Arc::new(Guarded::new(MAIN_LEN, 0));
        let ro = Arc::new(Guarded::new(RO_LEN, 0xA5));
        let recv = Arc::new(Guarded::new(RECV_LEN, 0));
        let m = nic.reg_mr(pd, main.clone(), MAIN_IOVA, ALL).unwrap();
        let r = nic
            .reg_mr(pd, ro.clone(), RO_IOVA, AccessFlags::REMOTE_READ)
            .unwrap();
        // a region registered then deregistered; the next registration reuses its slot
        let stale = nic
            .reg_mr(pd, Arc::new(Guarded::new(64, 0)), 0x9_0000, ALL)
            .unwrap();
        nic.dereg_mr(stale).unwrap();
        let rv = nic
            .reg_mr(pd, recv.clone(), RECV_IOVA, AccessFlags::LOCAL_WRITE)
            .unwrap();
        assert_ne!(rv.lkey, stale.lkey);
        let srq = nic
            .create_srq(
                pd,
                SrqAttr {
                    max_wr: 8,
                    max_sge: 2,
                    srq_limit: 2,
                },
            )
            .unwrap();
        let mut qpns = [0; 4];
        let peer_qpns = [0x100, 0x101, 0, 0x103];
        for (i, t) in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Rc]
            .into_iter()
            .enumerate()
        {
            let init = QpInitAttr {
                send_cq: scq,
                recv_cq: rcq,
                srq: (i == 3).then_some(srq),
                cap: QpCap {
                    max_send_wr: 4,
                    max_recv_wr: 8,
                    max_send_sge: 1,
                    max_recv_sge: 2,
                    max_inline_data: 0,
                },
                qp_type: t,
                sq_sig_all: false,
            };
            let q = nic.create_qp(pd, &init).unwrap();
            connect(&mut nic, q, t, peer, peer_qpns[i], rd);
            qpns[i] = q;
        }
        let mut s = Responder {
            nic,
            peer,
            me,
            qpns,
            peer_qpns,
            main,
            ro,
            recv,
            keys: [m.rkey, r.rkey, stale.rkey, rv.lkey],
            recv_lkey: rv.lkey,
            srq,
            cqs: [scq, rcq],
            now: Instant::ZERO,
            wr_id: 0,
        };
        for q in 0..4 {
            for _ in 0..4 {
                s.post_recv(q);
            }
        }
        s
    }

    /// Posts one receive (two SGEs over a 512-byte slot) to QP `q` (the SRQ for `q == 3`).
    pub fn post_recv(&mut self, q: usize) {
        let slot = (self.wr_id % 8) * 512;
        let sg = [
            Sge {
                addr: RECV_IOVA + slot,
                length: 100,
                lkey: self.recv_lkey,
            },
            Sge {
                addr: RECV_IOVA + slot + 100,
                length: 412,
                lkey: self.recv_lkey,
            },
        ];
        let wr = RecvWr {
            wr_id: self.wr_id,
            sg_list: &sg,
        };
        self.wr_id += 1;
        let _ = if q == 3 {
            self.nic.post_srq_recv(self.srq, &wr)
        } else {
            self.nic.post_recv(self.qpns[q], &wr)
        };
    }

    /// Delivers `buf` as sent by `src`.
    pub fn feed(&mut self, src: IpAddr, sport: u16, buf: &[u8]) {
        let m = meta(src, self.me, sport);
        let now = self.now;
        self.nic.handle_datagram(now, &m, buf);
    }

    fn rq_psn(&self, q: usize) -> Psn {
        Psn::new(self.nic.query_qp(self.qpns[q]).unwrap().rq_psn)
    }

    fn drain_cqs(&mut self) {
        let mut wc = [WorkCompletion::default(); 16];
        for cq in self.cqs {
            while self.nic.poll_cq(cq, &mut wc) > 0 {}
        }
        while self.nic.poll_event().is_some() {}
        while self.nic.poll_comp_event().is_some() {}
    }
}

/// RESET → INIT → RTR → RTS for a QP toward `peer` (RQ PSN 0x100, SQ PSN 0x200, timeout 1).
pub fn connect(nic: &mut Nic, q: u32, t: QpType, peer: IpAddr, peer_qpn: u32, rd: u8) {
    connect_with(nic, q, t, peer, peer_qpn, rd, (0x200, 0x100), 1);
}

/// RESET → INIT → RTR → RTS with explicit `(sq_psn, rq_psn)` and local ACK timeout
/// ([`roce_emu::sim::connect_qp`] with MTU 256 and Q_Key [`QKEY`]).
#[allow(clippy::too_many_arguments)]
pub fn connect_with(
    nic: &mut Nic,
    q: u32,
    t: QpType,
    peer: IpAddr,
    peer_qpn: u32,
    rd: u8,
    psns: (u32, u32),
    timeout: u8,
) {
    let c = roce_emu::sim::ConnectAttr {
        qp_type: t,
        qkey: QKEY,
        mtu: Mtu::Mtu256,
        sq_psn: psns.0,
        rq_psn: psns.1,
        max_rd_atomic: rd,
        max_dest_rd_atomic: rd,
        timeout,
        ..Default::default()
    };
    roce_emu::sim::connect_qp(nic, q, peer, peer_qpn, &c).unwrap();
}

/// Request opcodes (low five bits) per transport.
const RC_REQ: [u8; 21] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x16,
    0x17, 0x04, 0x0A, 0x0C, 0x13,
];
const UC_REQ: [u8; 12] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B,
];

/// Builds one request from the input for QP index `q` (4 = a QPN nobody has).
pub fn craft(u: &mut Unstructured<'_>, s: &Responder, q: usize) -> (Repr, u8) {
    let (dest, base) = if q < 4 {
        (s.qpns[q], s.rq_psn(q))
    } else {
        (range(u, 0, 0xFF_FFFF), Psn::new(0))
    };
    let t = if q < 4 {
        [0x00, 0x20, 0x60, 0x00][q]
    } else {
        0
    };
    let op = match range(u, 0, 15) {
        0 => Opcode(any(u)),
        1 => {
            Opcode(pick(u, &[0x00u8, 0x20, 0x40, 0x60, 0x80, 0xA0, 0xC0, 0xE0]) | pick(u, &RC_REQ))
        }
        _ if t == 0x60 => Opcode(pick(u, &[0x64u8, 0x65])),
        _ if t == 0x20 => Opcode(0x20 | pick(u, &UC_REQ)),
        _ => Opcode(t | pick(u, &RC_REQ)),
    };
    let f = op.flags();
    let psn = match range(u, 0, 7) {
        0 => Psn::new(any(u)),
        1 => base.sub(range(u, 1, 200)),
        2..=3 => base.add(range(u, 0, 8)).sub(4),
        _ => base,
    };
    let mut b = bth::Repr::new(op, dest, psn);
    b.ack_req = chance(u, 3, 4);
    b.se = chance(u, 1, 8);
    if chance(u, 1, 32) {
        b.pkey = any(u);
    }
    let mut r = Repr::new(b);
    let key = pick(u, &[0usize, 0, 0, 0, 1, 2, 3, 4]);
    let key = if key == 4 { any(u) } else { s.keys[key] };
    let (base_va, len) = match pick(u, &[0u8, 0, 0, 1, 2]) {
        0 => (MAIN_IOVA, MAIN_LEN as u64),
        1 => (RO_IOVA, RO_LEN as u64),
        _ => (RECV_IOVA, RECV_LEN as u64),
    };
    let va = match range(u, 0, 9) {
        0 => any(u),
        1 => base_va + len - range(u, 0, 300) as u64,
        2 => base_va.wrapping_sub(range(u, 0, 300) as u64),
        3 => base_va + len,
        _ => base_va + range(u, 0, len as u32 - 1) as u64,
    };
    let va = if chance(u, 1, 2) { va & !7 } else { va };
    if f.contains(OpFlags::RETH) {
        let dma_len = match range(u, 0, 7) {
            0 => any(u),
            1 => 0,
            2 => MTU * range(u, 1, 4),
            3 => 1 << 31,
            _ => range(u, 1, 3 * MTU),
        };
        r.reth = Some(reth::Repr {
            va,
            rkey: key,
            dma_len,
        });
    }
    if f.contains(OpFlags::ATMETH) {
        r.atomic_eth = Some(atomic_eth::Repr {
            va,
            rkey: key,
            swap_add: any(u),
            compare: if chance(u, 1, 2) { 0 } else { any(u) },
        });
    }
    if f.contains(OpFlags::IMMDT) {
        r.immdt = Some(immdt::Repr { imm: any(u) });
    }
    if f.contains(OpFlags::IETH) {
        r.ieth = Some(ieth::Repr { rkey: key });
    }
    if f.contains(OpFlags::DETH) {
        let qkey = if chance(u, 7, 8) { QKEY } else { any(u) };
        r.deth = Some(deth::Repr {
            qkey,
            resv: 0,
            src_qp: roce_wire::Qpn::new(range(u, 0, 0xFF_FFFF)),
        });
    }
    if f.contains(OpFlags::AETH) {
        r.aeth = Some(aeth::Repr {
            syndrome: aeth::Syndrome::from_byte(any(u)),
            msn: range(u, 0, 0xFF_FFFF),
        });
    }
    let plen = if f.contains(OpFlags::PAYLOAD) {
        match range(u, 0, 5) {
            0 => 0,
            1 => range(u, 0, 2 * MTU) as usize,
            2 => r.reth.map_or(MTU, |x| x.dma_len.min(MTU)) as usize,
            3 => range(u, 0, 600) as usize,
            _ => MTU as usize,
        }
    } else {
        0
    };
    r.set_payload_len(plen);
    if chance(u, 1, 16) {
        // a pad count that disagrees with the payload (the length stays 4-aligned)
        r.bth.pad_cnt = range(u, 0, 3) as u8;
    }
    (r, any(u))
}

/// The target body.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let rd = pick(&mut u, &[1u8, 2, 4, 16]);
    let mut s = Responder::new(rd, 0x5eed);
    let mem0 = [s.qpns.map(|q| s.nic.qp_memory(q).unwrap())];
    let ro0 = s.ro.snapshot();
    let mut rq: [Psn; 4] = std::array::from_fn(|q| s.rq_psn(q));
    let mut buf = Vec::with_capacity(8192);
    let mut out = vec![0u8; 8192];
    let wrong: IpAddr = "10.0.0.9".parse().unwrap();
    for _ in 0..256 {
        if u.is_empty() {
            break;
        }
        match range(&mut u, 0, 31) {
            0 => {
                // raw bytes, sealed or not
                let n = range(&mut u, 0, 600) as usize;
                let raw = u.bytes(n.min(u.len())).unwrap_or(&[]).to_vec();
                let mut raw = raw;
                if raw.len() >= 12 && chance(&mut u, 1, 2) {
                    let q = s.qpns[range(&mut u, 0, 3) as usize];
                    raw[5..8].copy_from_slice(&q.to_be_bytes()[1..]);
                }
                if raw.len() >= 16 && chance(&mut u, 3, 4) {
                    seal(s.peer, s.me, 0xC000, &mut raw);
                }
                let p = s.peer;
                s.feed(p, 0xC000, &raw);
            }
            1 => {
                s.now = s.now.add_nanos(range(&mut u, 0, 1 << 20) as u64 * 64);
                let now = s.now;
                s.nic.handle_timeout(now);
            }
            2 => {
                let q = range(&mut u, 0, 3) as usize;
                s.post_recv(q);
            }
            3 => s.drain_cqs(),
            4 => {
                // the same request several times (duplicate flood)
                let q = pick(&mut u, &[0usize, 3]);
                let (r, fill) = craft(&mut u, &s, q);
                emit(&r, fill, &mut buf);
                seal(s.peer, s.me, 0xC001, &mut buf);
                let p = s.peer;
                for _ in 0..range(&mut u, 1, 100) {
                    s.feed(p, 0xC001, &buf);
                }
            }
            _ => {
                let q = pick(&mut u, &[0usize, 0, 0, 1, 2, 3, 3, 4]);
                let (r, fill) = craft(&mut u, &s, q);
                emit(&r, fill, &mut buf);
                let src = if chance(&mut u, 1, 16) { wrong } else { s.peer };
                if !chance(&mut u, 1, 32) {
                    seal(src, s.me, 0xC002, &mut buf);
                }
                s.feed(src, 0xC002, &buf);
            }
        }
        check_output(&mut s, &mut out, &mut rq);
        let mem = [s.qpns.map(|q| s.nic.qp_memory(q).unwrap())];
        assert_eq!(mem, mem0, "per-QP storage grew");
    }
    s.now = s.now.add_nanos(1 << 30);
    let now = s.now;
    s.nic.handle_timeout(now);
    check_output(&mut s, &mut out, &mut rq);
    assert_eq!(s.ro.snapshot(), ro0, "the read-only region changed");
}

fn check_output(s: &mut Responder, buf: &mut [u8], rq: &mut [Psn; 4]) {
    let now = s.now;
    let outs = drain(&mut s.nic, now, buf, 4096);
    for q in [0, 3] {
        let cur = s.rq_psn(q);
        let st = s.nic.query_qp(s.qpns[q]).unwrap().qp_state;
        if st != QpState::Err {
            assert!(
                cur.diff(rq[q]) >= 0,
                "expected PSN of QP {q} went back: {rq:?} -> {cur:?}"
            );
        }
        rq[q] = cur;
    }
    for o in outs {
        let op = o.repr.bth.opcode;
        assert!(
            !op.flags().contains(OpFlags::REQ) && op.0 >> 5 == 0,
            "responder sent {op:?}"
        );
        assert_eq!(o.t.dst_ip, s.peer, "response to a stranger");
        let q = s
            .peer_qpns
            .iter()
            .position(|&p| p == o.repr.bth.dest_qp && p != 0)
            .expect("response to an unconnected QPN");
        assert!(q == 0 || q == 3, "a UC/UD QP answered");
        let d = o.repr.bth.psn.diff(rq[q]);
        assert!(
            d <= 0,
            "response PSN {:?} ahead of the expected PSN {:?}",
            o.repr.bth.psn,
            rq[q]
        );
    }
}
