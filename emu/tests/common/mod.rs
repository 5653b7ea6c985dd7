//! Shared scenario-test harness: two NICs on a SimNet with one connected QP each.
#![allow(dead_code)]
use roce_emu::sim::{connect_qp, ConnectAttr, LinkConfig, SimNet};
use roce_emu::*;
use std::net::IpAddr;
use std::sync::Arc;

pub const IOVA: u64 = 0x1_0000;

/// A small RC QP's init attributes: 4 send and 4 receive WRs, one SGE, no inline data, no SRQ,
/// only signaled WRs complete.
pub fn small_rc_init(send_cq: Cq, recv_cq: Cq) -> QpInitAttr {
    QpInitAttr {
        send_cq,
        recv_cq,
        srq: None,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        sq_sig_all: false,
    }
}
pub const MEM: usize = 1 << 20;

pub struct Side {
    pub idx: usize,
    pub ip: IpAddr,
    pub pd: Pd,
    pub scq: Cq,
    pub rcq: Cq,
    pub qpn: u32,
    pub mem: VecMemory,
    pub mr: Mr,
}

#[derive(Clone, Copy)]
pub struct Opts {
    pub qp_type: QpType,
    pub mtu: Mtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub a_psn: u32,
    pub b_psn: u32,
    pub max_rd_atomic: u8,
    /// Responder resources for READ/atomic (`max_dest_rd_atomic`, default 16).
    pub max_dest_rd_atomic: u8,
    pub cqe: u32,
    pub access: AccessFlags,
    pub use_srq: bool,
    pub sq_sig_all: bool,
    /// `NicConfig::min_unacked_psns` of both NICs.
    pub min_unacked_psns: u32,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            qp_type: QpType::Rc,
            mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            a_psn: 0x100,
            b_psn: 0x200,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            cqe: 256,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            use_srq: false,
            sq_sig_all: false,
            min_unacked_psns: MIN_UNACKED_PSNS,
        }
    }
}

pub struct Pair {
    pub seed: u64,
    pub net: SimNet,
    pub a: Side,
    pub b: Side,
    pub opts: Opts,
}

fn side(net: &mut SimNet, ip: &str, o: &Opts, seed: u64) -> Side {
    let ip: IpAddr = ip.parse().unwrap();
    let mut cfg = NicConfig::new(ip);
    cfg.seed = seed;
    cfg.min_unacked_psns = o.min_unacked_psns;
    let idx = net.add_nic(Nic::new(cfg));
    let nic = &mut net.nics[idx];
    let pd = nic.alloc_pd().unwrap();
    let scq = nic.create_cq(o.cqe).unwrap();
    let rcq = nic.create_cq(o.cqe).unwrap();
    let mem = VecMemory::new(MEM);
    let mr = nic
        .reg_mr(
            pd,
            Arc::new(mem.clone()),
            IOVA,
            AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
        )
        .unwrap();
    let srq = o.use_srq.then(|| {
        nic.create_srq(
            pd,
            SrqAttr {
                max_wr: 64,
                max_sge: 4,
                srq_limit: 0,
            },
        )
        .unwrap()
    });
    let init = QpInitAttr {
        send_cq: scq,
        recv_cq: rcq,
        srq,
        cap: QpCap {
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        },
        qp_type: o.qp_type,
        sq_sig_all: o.sq_sig_all,
    };
    let qpn = nic.create_qp(pd, &init).unwrap();
    Side {
        idx,
        ip,
        pd,
        scq,
        rcq,
        qpn,
        mem,
        mr,
    }
}

/// `me`'s QP to RTS toward `peer`'s with `o`'s settings ([`roce_emu::sim::connect_qp`]).
pub fn connect(nic: &mut Nic, me: &Side, peer: &Side, o: &Opts, sq_psn: u32, rq_psn: u32) {
    let c = ConnectAttr {
        qp_type: o.qp_type,
        reset_first: false,
        access: o.access,
        qkey: 0x1111_1111,
        mtu: o.mtu,
        sq_psn,
        rq_psn,
        max_rd_atomic: o.max_rd_atomic,
        max_dest_rd_atomic: o.max_dest_rd_atomic,
        min_rnr_timer: o.min_rnr_timer,
        timeout: o.timeout,
        retry_cnt: o.retry_cnt,
        rnr_retry: o.rnr_retry,
    };
    connect_qp(nic, me.qpn, peer.ip, peer.qpn, &c).unwrap();
}

/// A [`Pair`] of UD QPs on the default link.
pub fn ud_pair(seed: u64) -> Pair {
    Pair::new(
        seed,
        LinkConfig::default(),
        Opts {
            qp_type: QpType::Ud,
            ..Default::default()
        },
    )
}

impl Pair {
    pub fn new(seed: u64, link: LinkConfig, o: Opts) -> Pair {
        let mut net = SimNet::new(seed, link);
        let a = side(&mut net, "10.0.0.1", &o, seed ^ 0xA);
        let b = side(&mut net, "10.0.0.2", &o, seed ^ 0xB);
        connect(&mut net.nics[a.idx], &a, &b, &o, o.a_psn, o.b_psn);
        connect(&mut net.nics[b.idx], &b, &a, &o, o.b_psn, o.a_psn);
        Pair {
            seed,
            net,
            a,
            b,
            opts: o,
        }
    }

    pub fn nic_a(&mut self) -> &mut Nic {
        &mut self.net.nics[self.a.idx]
    }
    pub fn nic_b(&mut self) -> &mut Nic {
        &mut self.net.nics[self.b.idx]
    }

    /// Hands `buf` (BTH .. ICRC, hand-built) to B as a datagram from A's address and UDP port
    /// `src_port`, its ICRC sealed first (IPv4 ID 0, as the driver reports it).
    pub fn deliver_to_b(&mut self, buf: &mut [u8], src_port: u16) {
        let t = Transmit {
            src_ip: self.a.ip,
            dst_ip: self.b.ip,
            src_port,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len: buf.len(),
        };
        assert!(roce_emu::net::seal(&t, buf));
        let meta = RxMeta {
            src_ip: self.a.ip,
            dst_ip: self.b.ip,
            src_port,
            ipv4_id: Some(0),
            tos: 0,
            ttl: 64,
            flow_label: 0,
        };
        let now = self.net.now;
        self.nic_b().handle_datagram(now, &meta, buf);
    }

    /// A SendWr gathering `len` bytes at `off` of A's memory.
    pub fn post_a(&mut self, wr: SendWr<'_>) {
        let q = self.a.qpn;
        self.net.nics[self.a.idx].post_send(q, &wr).unwrap();
    }

    pub fn recv_b(&mut self, wr_id: u64, off: u64, len: u32) {
        let sge = [Sge {
            addr: IOVA + off,
            length: len,
            lkey: self.b.mr.lkey,
        }];
        let q = self.b.qpn;
        self.net.nics[self.b.idx]
            .post_recv(
                q,
                &RecvWr {
                    wr_id,
                    sg_list: &sge,
                },
            )
            .unwrap();
    }

    pub fn run(&mut self, ms: u64) {
        let d = Instant::from_millis(self.net.now.as_nanos() / 1_000_000 + ms);
        self.net.run_idle(d);
    }

    pub fn poll(nic: &mut Nic, cq: Cq) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        let mut wc = [WorkCompletion::default(); 16];
        loop {
            let n = nic.poll_cq(cq, &mut wc);
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&wc[..n]);
        }
    }
    pub fn scq_a(&mut self) -> Vec<WorkCompletion> {
        let cq = self.a.scq;
        Self::poll(&mut self.net.nics[self.a.idx], cq)
    }
    pub fn rcq_b(&mut self) -> Vec<WorkCompletion> {
        let cq = self.b.rcq;
        Self::poll(&mut self.net.nics[self.b.idx], cq)
    }
}

impl Side {
    /// A copy of the handles (memory shared).
    pub fn clone_shallow(&self) -> Side {
        Side {
            idx: self.idx,
            ip: self.ip,
            pd: self.pd,
            scq: self.scq,
            rcq: self.rcq,
            qpn: self.qpn,
            mem: self.mem.clone(),
            mr: self.mr,
        }
    }
}

pub fn sge(s: &Side, off: u64, len: u32) -> Sge {
    Sge {
        addr: IOVA + off,
        length: len,
        lkey: s.mr.lkey,
    }
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A packet as the tests compare it, each part in `roce_wire`'s own notation:
/// `RC ACKNOWLEDGE psn=256 A AETH(NAK InvalidRequest msn=1) len=0`. The AckReq mark shows when
/// `ack_req`, the AETH when there is one, its MSN and the payload length when given.
pub fn packet_text(
    op: roce_wire::Opcode,
    psn: u32,
    ack_req: bool,
    aeth: Option<roce_wire::aeth::Syndrome>,
    msn: Option<u32>,
    len: Option<usize>,
) -> String {
    use std::fmt::Write;
    let mut s = format!("{op} psn={}", roce_wire::Psn::new(psn));
    if ack_req {
        s.push_str(" A");
    }
    if let Some(a) = aeth {
        match msn {
            Some(m) => write!(s, " AETH({a} msn={m})"),
            None => write!(s, " AETH({a})"),
        }
        .unwrap();
    }
    if let Some(l) = len {
        write!(s, " len={l}").unwrap();
    }
    s
}

/// What the scenario tests compare of a captured packet. It compares equal to (and prints as)
/// one line of text in `roce_wire`'s own notation: the sending NIC, opcode, PSN, AckReq, AETH
/// syndrome and payload length, e.g. `nic1 RC ACKNOWLEDGE psn=258 AETH(ACK credits=31) len=0`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Index of the sending NIC (0 = A, 1 = B in a [`Pair`]).
    pub from: usize,
    pub opcode: roce_wire::Opcode,
    pub psn: u32,
    pub ack_req: bool,
    pub syndrome: Option<roce_wire::aeth::Syndrome>,
    /// Payload length, without pad.
    pub len: usize,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = packet_text(
            self.opcode,
            self.psn,
            self.ack_req,
            self.syndrome,
            None,
            Some(self.len),
        );
        write!(f, "nic{} {p}", self.from)
    }
}

/// As its text, so a failed comparison prints readable packets.
impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl PartialEq<&str> for Seen {
    fn eq(&self, text: &&str) -> bool {
        let line = self.to_string();
        line == *text
    }
}

/// [`Seen`] of each captured packet.
pub fn summary(c: &[roce_emu::sim::Captured]) -> Vec<Seen> {
    c.iter()
        .map(|p| Seen {
            from: p.from,
            opcode: p.repr.bth.opcode,
            psn: p.repr.bth.psn.value(),
            ack_req: p.repr.bth.ack_req,
            syndrome: p.repr.aeth.map(|a| a.syndrome),
            len: p.repr.payload_len,
        })
        .collect()
}

pub fn seed_msg(seed: u64) -> String {
    format!("seed = {seed:#x} (replay with this seed)")
}

impl Pair {
    pub fn qp_a(&self) -> QpAttr {
        self.net.nics[self.a.idx].query_qp(self.a.qpn).unwrap()
    }
    pub fn qp_b(&self) -> QpAttr {
        self.net.nics[self.b.idx].query_qp(self.b.qpn).unwrap()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "sim {} at {:?}; stats {:?}",
                seed_msg(self.seed),
                self.net.now,
                self.net.stats
            );
        }
    }
}

/// The seeds of a property test: `ROCE_PROPTEST_SEEDS` of them (default `debug` in debug builds,
/// `release` in release builds) from `ROCE_PROPTEST_SEED0` (default 0).
pub fn prop_seeds(debug: u64, release: u64) -> std::ops::Range<u64> {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let n = env("ROCE_PROPTEST_SEEDS").unwrap_or(if cfg!(debug_assertions) {
        debug
    } else {
        release
    });
    let s0 = env("ROCE_PROPTEST_SEED0").unwrap_or(0);
    s0..s0 + n
}

/// Runs `run` for each seed, prints every failure with its seed, stops after three; returns
/// the failing seeds.
pub fn failing_seeds(
    seeds: std::ops::Range<u64>,
    mut run: impl FnMut(u64) -> std::result::Result<(), String>,
) -> Vec<u64> {
    let mut failures = Vec::new();
    for seed in seeds {
        if let Err(e) = run(seed) {
            eprintln!("FAILED {}: {e}", seed_msg(seed));
            failures.push(seed);
            if failures.len() >= 3 {
                break;
            }
        }
    }
    failures
}

/// A message length for random tests: 0, ≤ 64, ≤ 1500 or ≤ 6000 bytes (10/40/30/20 %).
pub fn gen_msg_len(rng: &mut impl rand::Rng) -> u32 {
    match rng.gen_range(0..10) {
        0 => 0,
        1..=4 => rng.gen_range(1..=64),
        5..=7 => rng.gen_range(65..=1500),
        _ => rng.gen_range(1501..=6000),
    }
}

/// Posts a signaled RDMA WRITE of `len` bytes from `IOVA + off` (local `lkey`) to `IOVA + off`
/// behind `rkey` on `qpn`.
pub fn post_write(nic: &mut Nic, qpn: u32, wr_id: u64, off: u64, len: u32, lkey: u32, rkey: u32) {
    let sg = [Sge {
        addr: IOVA + off,
        length: len,
        lkey,
    }];
    let wr = SendWr {
        wr_id,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + off,
        rkey,
        ..Default::default()
    };
    nic.post_send(qpn, &wr).unwrap();
}
