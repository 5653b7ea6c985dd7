//! Engine throughput over the simulated network with zero latency, against a baseline loop that
//! only does the unavoidable per-packet work (copy the payload in, compute the ICRC, verify the
//! ICRC, copy the payload out). Also counts heap allocations in the steady-state loop and
//! reports per-QP memory. Plain `main`, not a timed test:
//!
//!     cargo bench -p roce-emu --bench engine
//!     ROCE_BENCH_SECS=3 cargo bench -p roce-emu --bench engine
use roce_emu::sim::{LinkConfig, SimNet};
use roce_emu::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant as WallClock;

struct Counting;
static COUNT: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static DIRECT: AtomicBool = AtomicBool::new(false);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNT.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNT.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const IOVA: u64 = 0x10_0000;
const DEPTH: u32 = 64;

struct Side {
    qpn: u32,
    scq: Cq,
    rcq: Cq,
    lkey: u32,
    rkey: u32,
}

fn side(net: &mut SimNet, ip: &str) -> (usize, Side) {
    let mut cfg = NicConfig::new(ip.parse().unwrap());
    cfg.netdev_mtu = 9000;
    let i = net.add_nic(Nic::new(cfg));
    let n = &mut net.nics[i];
    let pd = n.alloc_pd().unwrap();
    let scq = n.create_cq(4096).unwrap();
    let rcq = n.create_cq(4096).unwrap();
    let mem = VecMemory::new(1 << 20);
    let mr = n
        .reg_mr(pd, Arc::new(mem), IOVA, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ)
        .unwrap();
    let init = QpInitAttr {
        send_cq: scq,
        recv_cq: rcq,
        srq: None,
        cap: QpCap { max_send_wr: 256, max_recv_wr: 256, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        qp_type: QpType::Rc,
        sq_sig_all: false,
    };
    let qpn = n.create_qp(pd, &init).unwrap();
    (i, Side { qpn, scq, rcq, lkey: mr.lkey, rkey: mr.rkey })
}

fn connect(n: &mut Nic, me: u32, peer: u32, peer_ip: &str) {
    use QpAttrMask as M;
    let acc = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mut a = QpAttr { qp_state: QpState::Init, port_num: 1, qp_access_flags: acc, ..Default::default() };
    n.modify_qp(me, &a, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS).unwrap();
    a.qp_state = QpState::Rtr;
    a.ah_attr = AhAttr::to_ip(peer_ip.parse().unwrap());
    a.path_mtu = Mtu::Mtu4096;
    a.dest_qp_num = peer;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    n.modify_qp(me, &a, M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER).unwrap();
    a.qp_state = QpState::Rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    n.modify_qp(me, &a, M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC).unwrap();
}

struct Rig {
    net: SimNet,
    a: Side,
    b: Side,
}

fn rig() -> Rig {
    let mut net = SimNet::new(1, LinkConfig::ideal());
    let (ia, a) = side(&mut net, "10.0.0.1");
    let (ib, b) = side(&mut net, "10.0.0.2");
    connect(&mut net.nics[ia], a.qpn, b.qpn, "10.0.0.2");
    connect(&mut net.nics[ib], b.qpn, a.qpn, "10.0.0.1");
    Rig { net, a, b }
}

/// Moves every datagram between the two NICs directly (no SimNet scheduling) until quiet.
fn direct_exchange(r: &mut Rig, buf: &mut [u8]) {
    let now = r.net.now;
    loop {
        let mut moved = false;
        for (from, to) in [(0usize, 1usize), (1, 0)] {
            while let Some(t) = r.net.nics[from].poll_transmit(now, buf) {
                let meta = RxMeta { src_ip: t.src_ip, dst_ip: t.dst_ip, src_port: t.src_port, ipv4_id: Some(t.ipv4_id), tos: t.tos, ttl: t.ttl, flow_label: t.flow_label };
                r.net.nics[to].handle_datagram(now, &meta, &buf[..t.len]);
                r.net.stats.delivered += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

/// One round: DEPTH work requests, run to idle, reap completions. Returns data packets.
fn round(r: &mut Rig, op: WrOpcode, len: u32, wc: &mut [WorkCompletion]) -> u64 {
    for i in 0..DEPTH {
        let off = (i as u64 % 64) * 8192;
        if op == WrOpcode::Send {
            let sg = [Sge { addr: IOVA + off, length: len, lkey: r.b.lkey }];
            r.net.nics[1].post_recv(r.b.qpn, &RecvWr { wr_id: i as u64, sg_list: &sg }).unwrap();
        }
        let sg = [Sge { addr: IOVA + off, length: len, lkey: r.a.lkey }];
        let flags = if i == DEPTH - 1 { SendFlags::SIGNALED } else { SendFlags::EMPTY };
        let wr = SendWr { wr_id: i as u64, sg_list: &sg, opcode: op, send_flags: flags, remote_addr: IOVA + off, rkey: r.b.rkey, ..Default::default() };
        r.net.nics[0].post_send(r.a.qpn, &wr).unwrap();
    }
    if DIRECT.load(Ordering::Relaxed) {
        let mut buf = [0u8; 4200];
        direct_exchange(r, &mut buf);
    } else {
        let d = r.net.now.add_nanos(1_000_000_000);
        r.net.run_idle(d);
    }
    let n = r.net.nics[0].poll_cq(r.a.scq, wc);
    assert_eq!(n, 1, "one signaled completion per round");
    assert_eq!(wc[0].status, WcStatus::Success);
    if op == WrOpcode::Send {
        let mut got = 0;
        while got < DEPTH as usize {
            got += r.net.nics[1].poll_cq(r.b.rcq, &mut wc[..]);
        }
    }
    DEPTH as u64
}

struct Slice {
    data_pps: f64,
    all_pps: f64,
    allocs: u64,
    pkts: u64,
}

/// Runs the engine on a warmed-up rig for `secs`.
fn engine_slice(r: &mut Rig, op: WrOpcode, len: u32, secs: f64, wc: &mut [WorkCompletion]) -> Slice {
    let d0 = r.net.stats.delivered;
    ALLOCS.store(0, Ordering::Relaxed);
    COUNT.store(true, Ordering::Relaxed);
    let t0 = WallClock::now();
    let mut data = 0;
    while t0.elapsed().as_secs_f64() < secs {
        for _ in 0..4 {
            data += round(r, op, len, wc);
        }
    }
    let el = t0.elapsed().as_secs_f64();
    COUNT.store(false, Ordering::Relaxed);
    let all = r.net.stats.delivered - d0;
    Slice { data_pps: data as f64 / el, all_pps: all as f64 / el, allocs: ALLOCS.load(Ordering::Relaxed), pkts: all }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// The unavoidable work per data packet (with the same chunked copy the engine's memory uses):
/// copy payload from the source region into the packet,
/// ICRC over it (sender), ICRC verify (receiver), copy payload into the destination region.
fn run_baseline(len: usize, secs: f64, both_ends: bool) -> f64 {
    let src = vec![0x5Au8; 1 << 20];
    let mut dst = vec![0u8; 1 << 20];
    let hdr = 28; // RETH-bearing WRITE ONLY
    let mut pkt = vec![0u8; hdr + len + 4];
    pkt[0] = 0x0A;
    let ip = [0x45u8, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    let udp = [0xC0u8, 0, 0x12, 0xB7, 0, 0, 0, 0];
    let net = roce_wire::icrc::Network::Ipv4 { ip: &ip, udp: &udp };
    let t0 = WallClock::now();
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        for i in 0..1000u64 {
            let off = ((i % 64) * 8192) as usize;
            roce_emu::mem::copy_chunked(&mut pkt[hdr..hdr + len], &src[off..off + len]);
            roce_wire::icrc::fill(net, &mut pkt).unwrap();
            if both_ends {
                roce_wire::icrc::verify(net, &pkt).unwrap();
                roce_emu::mem::copy_chunked(&mut dst[off..off + len], &pkt[hdr..hdr + len]);
            }
            n += 1;
        }
    }
    std::hint::black_box(&dst);
    n as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let secs: f64 = std::env::var("ROCE_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(2.0);
    println!("roce-emu engine benchmark (one thread = one core; both NICs and the zero-latency sim net on it)");
    println!("each data packet is transmitted by NIC A and received by NIC B; ACKs are extra packets\n");
    let only = std::env::var("ROCE_BENCH_ONLY").unwrap_or_default();
    let nobase = std::env::var("ROCE_BENCH_NOBASE").is_ok();
    // The machine is shared: interleave short slices of each loop and compare neighbours, so a
    // load change hits both sides of a ratio. Report medians over the slices.
    let slices = 15;
    let t = secs / slices as f64 / 4.0;
    for (name, op, len) in [("RDMA WRITE 4 KiB", WrOpcode::RdmaWrite, 4096u32), ("SEND 64 B", WrOpcode::Send, 64)] {
        if only == "write" && op != WrOpcode::RdmaWrite || only == "send" && op != WrOpcode::Send {
            continue;
        }
        let mut wc = vec![WorkCompletion::default(); 256];
        let (mut sim, mut wired) = (rig(), rig());
        for _ in 0..50 {
            round(&mut sim, op, len, &mut wc);
            DIRECT.store(true, Ordering::Relaxed);
            round(&mut wired, op, len, &mut wc);
            DIRECT.store(false, Ordering::Relaxed);
        }
        let (mut es, mut ew, mut all, mut allw, mut b2, mut b1, mut rs, mut rw, mut r1) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut allocs, mut pkts) = (0u64, 0u64);
        for _ in 0..slices {
            let e = engine_slice(&mut sim, op, len, t, &mut wc);
            DIRECT.store(true, Ordering::Relaxed);
            let w = engine_slice(&mut wired, op, len, t, &mut wc);
            DIRECT.store(false, Ordering::Relaxed);
            allocs += e.allocs + w.allocs;
            pkts += e.pkts + w.pkts;
            let (x2, x1) = if nobase { (1.0, 1.0) } else { (run_baseline(len as usize, t, true), run_baseline(len as usize, t, false)) };
            rs.push(e.data_pps / x2);
            rw.push(w.data_pps / x2);
            r1.push(e.data_pps / x1);
            es.push(e.data_pps);
            ew.push(w.data_pps);
            all.push(e.all_pps);
            allw.push(w.all_pps);
            b2.push(x2);
            b1.push(x1);
        }
        let e = median(&mut es);
        println!("{name}:   (medians of {slices} interleaved slices)");
        println!("  engine over SimNet {:>10.0} data pkts/s   ({:.0} pkts/s incl. ACKs, {:.2} Gbit/s payload)", e, median(&mut all), e * len as f64 * 8e-9);
        println!(
            "  engine, NICs wired {:>10.0} data pkts/s   ({:.0} pkts/s incl. ACKs; no scheduler, so ACKs queued behind a burst coalesce)",
            median(&mut ew),
            median(&mut allw)
        );
        println!("  baseline tx+rx     {:>10.0} pkts/s        (copy in + ICRC + ICRC verify + copy out)", median(&mut b2));
        println!("  baseline tx        {:>10.0} pkts/s        (copy in + ICRC only)", median(&mut b1));
        println!("  ratio SimNet engine / baseline tx+rx = {:.2}   (target >= 0.60)", median(&mut rs));
        println!("  ratio wired engine  / baseline tx+rx = {:.2}", median(&mut rw));
        println!("  ratio SimNet engine / baseline tx    = {:.2}", median(&mut r1));
        println!("  heap allocations in the measured loops: {allocs} for {pkts} packets (target 0)\n");
    }
    let r = rig();
    let (state, queues) = r.net.nics[0].qp_memory(r.a.qpn).unwrap();
    println!("per-QP memory: {state} bytes of state + {queues} bytes of queue storage");
    println!("  (queues for max_send_wr=256, max_recv_wr=256, 1 SGE, no inline, max_dest_rd_atomic=16)");
}
