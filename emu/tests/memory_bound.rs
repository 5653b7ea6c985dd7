//! Memory stays bounded under any packet stream: a counting global allocator (per thread, so
//! parallel tests do not disturb each other) measures what two NICs allocate while 1M random
//! but ICRC-valid, valid-looking packets (requests and responses for RC, UC and UD QPs,
//! PSNs near the expected ones, keys right and wrong, nonexistent QPNs) go into B and
//! everything either NIC answers is delivered to the other. `ROCE_FLOOD_PACKETS` overrides
//! the count.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use roce_emu::sim::{connect_qp, ConnectAttr};
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{bth, Opcode, Psn};

#[path = "common/random_repr.rs"]
mod random_repr;
use random_repr::random_repr;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::IpAddr;
use std::sync::Arc;

struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note(delta: i64) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
    if delta > 0 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size() as i64);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as i64));
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note(n as i64 - l.size() as i64);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> i64 {
    LIVE.with(|l| l.get())
}

const IOVA: u64 = 0x1_0000;
const LEN: usize = 64 * 1024;

struct Dev {
    nic: Nic,
    ip: IpAddr,
    qpns: [u32; 3],
    rkey: u32,
    cqs: [Cq; 2],
}

fn dev(ip: &str, seed: u64) -> Dev {
    let ip: IpAddr = ip.parse().unwrap();
    let mut cfg = NicConfig::new(ip);
    cfg.seed = seed;
    let mut nic = Nic::new(cfg);
    let pd = nic.alloc_pd().unwrap();
    let scq = nic.create_cq(256).unwrap();
    let rcq = nic.create_cq(256).unwrap();
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = nic
        .reg_mr(pd, Arc::new(VecMemory::new(LEN)), IOVA, all)
        .unwrap();
    let mut qpns = [0; 3];
    for (i, t) in [QpType::Rc, QpType::Uc, QpType::Ud].into_iter().enumerate() {
        let init = QpInitAttr {
            send_cq: scq,
            recv_cq: rcq,
            srq: None,
            cap: QpCap {
                max_send_wr: 64,
                max_recv_wr: 64,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: t,
            sq_sig_all: true,
        };
        qpns[i] = nic.create_qp(pd, &init).unwrap();
    }
    Dev {
        nic,
        ip,
        qpns,
        rkey: mr.rkey,
        cqs: [scq, rcq],
    }
}

fn connect(d: &mut Dev, peer: &Dev, i: usize) {
    let c = ConnectAttr {
        qp_type: [QpType::Rc, QpType::Uc, QpType::Ud][i],
        reset_first: true,
        qkey: 0x1111,
        sq_psn: 0x100,
        rq_psn: 0x100,
        timeout: 2,
        ..ConnectAttr::default()
    };
    connect_qp(&mut d.nic, d.qpns[i], peer.ip, peer.qpns[i], &c).unwrap();
}

/// One random, valid-looking packet for B (no allocation: `buf` is reused).
fn random_packet(rng: &mut SmallRng, b: &Dev, buf: &mut Vec<u8>) -> usize {
    let i = rng.gen_range(0..4);
    let (dest, t, base) = if i == 3 {
        (rng.gen_range(0..0x100_0000), 0x00, 0)
    } else {
        let a = b.nic.query_qp(b.qpns[i]).unwrap();
        (
            b.qpns[i],
            [0x00, 0x20, 0x60][i],
            if rng.gen_bool(0.5) {
                a.rq_psn
            } else {
                a.sq_psn
            },
        )
    };
    let low = if t == 0x60 {
        [0x04, 0x05][rng.gen_range(0..2)]
    } else {
        rng.gen_range(0..0x18)
    };
    let op = if rng.gen_ratio(1, 16) {
        Opcode(rng.gen())
    } else {
        Opcode(t | low)
    };
    let psn = Psn::new(base.wrapping_add(rng.gen_range(0..6)).wrapping_sub(2));
    let r = random_repr(rng, op, dest, psn, b.rkey, IOVA, LEN as u64, 3000);
    let len = r.buffer_len();
    buf.resize(len.max(buf.len()), 0);
    r.emit(&mut Packet::new_unchecked(&mut buf[..len]));
    len
}

#[test]
fn a_million_packets_leave_memory_bounded() {
    let n: u64 = std::env::var("ROCE_FLOOD_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let mut a = dev("10.0.0.1", 1);
    let mut b = dev("10.0.0.2", 2);
    for i in 0..3 {
        connect(&mut a, &b, i);
        connect(&mut b, &a, i);
    }
    let mut rng = SmallRng::seed_from_u64(0xF100D);
    let mut pkt = vec![0u8; 8192];
    let mut out = vec![0u8; 8192];
    let mut wc = [WorkCompletion::default(); 64];
    let recv_sge = [Sge {
        addr: IOVA,
        length: 4096,
        lkey: b.rkey,
    }];
    let per_qp: Vec<_> = b
        .qpns
        .iter()
        .map(|&q| b.nic.qp_memory(q).unwrap())
        .collect();
    let mut now = Instant::ZERO;
    let mut baseline = 0;
    let mut max_growth = 0;
    let mut revived = 0;
    let warmup = n.min(20_000);
    for i in 0..n {
        if i == warmup {
            baseline = live();
            PEAK.with(|p| p.set(baseline));
        }
        let len = random_packet(&mut rng, &b, &mut pkt);
        let t = Transmit {
            src_ip: a.ip,
            dst_ip: b.ip,
            src_port: 0xC000,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len,
        };
        assert!(net::seal(&t, &mut pkt[..len]));
        let m = RxMeta {
            src_ip: a.ip,
            dst_ip: b.ip,
            src_port: 0xC000,
            ipv4_id: Some(0),
            tos: 0,
            ttl: 64,
            flow_label: 0,
        };
        b.nic.handle_datagram(now, &m, &pkt[..len]);
        // the NICs talk to each other
        for _ in 0..4 {
            let mut moved = false;
            for (from, to) in [(0, 1), (1, 0)] {
                let (src, dst) = if from == 0 {
                    (&mut a, &mut b)
                } else {
                    (&mut b, &mut a)
                };
                while let Some(t) = src.nic.poll_transmit(now, &mut out) {
                    let m = t.rx_meta();
                    dst.nic.handle_datagram(now, &m, &out[..t.len]);
                    moved = true;
                    let _ = to;
                }
            }
            if !moved {
                break;
            }
        }
        if i % 64 == 0 {
            now = now.add_nanos(50_000);
            for d in [&mut a, &mut b] {
                d.nic.handle_timeout(now);
                for cq in d.cqs {
                    while d.nic.poll_cq(cq, &mut wc) > 0 {}
                }
                while d.nic.poll_event().is_some() {}
                while d.nic.poll_comp_event().is_some() {}
            }
            for q in 0..3 {
                let _ = b.nic.post_recv(
                    b.qpns[q],
                    &RecvWr {
                        wr_id: i,
                        sg_list: &recv_sge,
                    },
                );
            }
        }
        if i % 4096 == 0 {
            // bring errored QPs back (a real peer would reconnect)
            for q in 0..3 {
                if b.nic.query_qp(b.qpns[q]).unwrap().qp_state == QpState::Err {
                    connect(&mut b, &a, q);
                    revived += 1;
                }
            }
        }
        if i > warmup {
            max_growth = max_growth.max(live() - baseline);
        }
    }
    let peak = PEAK.with(|p| p.get()) - baseline;
    let c = *b.nic.counters();
    eprintln!(
        "{n} packets: live growth max {max_growth} B, peak above baseline {peak} B, {} allocations in total, {revived} QP revivals; B rcvd_pkts {} no_qp {} out_of_seq {} dup {} resp_queue_full {}",
        ALLOCS.with(|x| x.get()),
        c.rcvd_pkts,
        c.no_qp,
        c.out_of_seq_request,
        c.duplicate_request,
        c.resp_queue_full
    );
    assert!(c.rcvd_pkts > n / 10, "the packets must reach the engines");
    assert!(
        max_growth < 64 * 1024,
        "NIC memory grew by {max_growth} bytes under the flood"
    );
    for (k, &q) in b.qpns.iter().enumerate() {
        assert_eq!(
            b.nic.qp_memory(q).unwrap(),
            per_qp[k],
            "per-QP storage of QP {k} grew"
        );
    }
}

#[test]
fn a_flood_to_nonexistent_qpns_allocates_nothing() {
    let mut b = dev("10.0.0.2", 3);
    let a = dev("10.0.0.1", 4);
    connect(&mut b, &a, 0);
    let mut pkt = [0u8; 64];
    let mut r = Repr::new(bth::Repr::new(Opcode::RC_SEND_ONLY, 0, Psn::new(0)));
    r.set_payload_len(16);
    let len = r.buffer_len();
    let m = RxMeta {
        src_ip: a.ip,
        dst_ip: b.ip,
        src_port: 0xC000,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    };
    let mut out = vec![0u8; 8192];
    let before = ALLOCS.with(|x| x.get());
    let live0 = live();
    for q in 0..100_000u32 {
        r.bth.dest_qp = roce_wire::Qpn::new((q * 7919) & 0xFF_FFFF);
        if r.bth.dest_qp == b.qpns[0] {
            continue;
        }
        r.emit(&mut Packet::new_unchecked(&mut pkt[..len]));
        let t = Transmit {
            src_ip: a.ip,
            dst_ip: b.ip,
            src_port: 0xC000,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len,
        };
        assert!(net::seal(&t, &mut pkt[..len]));
        b.nic.handle_datagram(Instant::ZERO, &m, &pkt[..len]);
        assert!(b.nic.poll_transmit(Instant::ZERO, &mut out).is_none());
    }
    assert_eq!(
        ALLOCS.with(|x| x.get()) - before,
        0,
        "allocations during the flood"
    );
    assert_eq!(live(), live0);
    assert!(b.nic.counters().no_qp >= 99_990);
}
