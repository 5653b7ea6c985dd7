//! A one-minute flood: random, ICRC-valid packets at full rate into one NIC (RC, UC and UD QPs
//! in RTS with a registered region), its answers drained and dropped, its QPs revived when a
//! packet errors them. Prints packets per second and the peak RSS (VmHWM).
//!
//! ```text
//! cargo run --release -p roce-emu --example flood            # 60 s
//! ROCE_FLOOD_SECS=5 cargo run --release -p roce-emu --example flood
//! ```
//!
//! A pool of 65 536 packets is generated first (requests and responses of every transport,
//! PSNs near and far from the expected ones, right and wrong keys, payloads up to beyond the
//! MTU, nonexistent QPNs, 1 in 32 with a bad ICRC), so the figure is the NIC's rate, not the
//! generator's.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use roce_emu::*;
use roce_wire::transport::Packet;
use roce_wire::{Opcode, Psn};

#[path = "../tests/common/random_repr.rs"]
mod random_repr;
use random_repr::random_repr;
use std::net::IpAddr;
use std::sync::Arc;

const IOVA: u64 = 0x1_0000;
const LEN: usize = 1 << 20;

fn connect(nic: &mut Nic, q: u32, t: QpType, peer: IpAddr, peer_qpn: u32) {
    let c = sim::ConnectAttr {
        qp_type: t,
        reset_first: true,
        qkey: 0x1111,
        sq_psn: 0x100,
        rq_psn: 0x100,
        timeout: 10,
        ..Default::default()
    };
    sim::connect_qp(nic, q, peer, peer_qpn, &c).unwrap();
}

fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let secs: f64 = std::env::var("ROCE_FLOOD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60.0);
    let me: IpAddr = "10.0.0.2".parse().unwrap();
    let peer: IpAddr = "10.0.0.1".parse().unwrap();
    let mut nic = Nic::new(NicConfig::new(me));
    let pd = nic.alloc_pd().unwrap();
    let scq = nic.create_cq(1024).unwrap();
    let rcq = nic.create_cq(1024).unwrap();
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = nic
        .reg_mr(pd, Arc::new(VecMemory::new(LEN)), IOVA, all)
        .unwrap();
    let types = [QpType::Rc, QpType::Uc, QpType::Ud];
    let mut qpns = [0u32; 3];
    for (i, t) in types.into_iter().enumerate() {
        let init = QpInitAttr {
            send_cq: scq,
            recv_cq: rcq,
            srq: None,
            cap: QpCap {
                max_send_wr: 256,
                max_recv_wr: 256,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: t,
            sq_sig_all: false,
        };
        qpns[i] = nic.create_qp(pd, &init).unwrap();
        connect(&mut nic, qpns[i], t, peer, 0x100 + i as u32);
    }
    // the packet pool
    let mut rng = SmallRng::seed_from_u64(0xF100D);
    let mut pool: Vec<Vec<u8>> = Vec::with_capacity(65536);
    for _ in 0..65536 {
        let i = rng.gen_range(0..4);
        let (dest, t) = if i == 3 {
            (rng.gen_range(0..0x100_0000), 0)
        } else {
            (qpns[i], [0x00, 0x20, 0x60][i])
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
        let psn = if rng.gen_bool(0.7) {
            0x100 + rng.gen_range(0..64)
        } else {
            rng.gen_range(0..0x100_0000)
        };
        let r = random_repr(
            &mut rng,
            op,
            dest,
            Psn::new(psn),
            mr.rkey,
            IOVA,
            LEN as u64,
            4096,
        );
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        let t = Transmit {
            src_ip: peer,
            dst_ip: me,
            src_port: 0xC000,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len: buf.len(),
        };
        assert!(net::seal(&t, &mut buf));
        if rng.gen_ratio(1, 32) {
            let k = rng.gen_range(0..buf.len());
            buf[k] ^= 0x10;
        }
        pool.push(buf);
    }
    let bytes: usize = pool.iter().map(|p| p.len()).sum();
    let hwm0 = vm_hwm_kib();
    eprintln!(
        "pool: {} packets, {} bytes; VmHWM before the flood {hwm0} KiB; flooding for {secs} s",
        pool.len(),
        bytes
    );
    let m = RxMeta {
        src_ip: peer,
        dst_ip: me,
        src_port: 0xC000,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    };
    let mut out = vec![0u8; 8192];
    let mut wc = [WorkCompletion::default(); 64];
    let sge = [Sge {
        addr: IOVA,
        length: 4096,
        lkey: mr.lkey,
    }];
    let start = std::time::Instant::now();
    let mut n: u64 = 0;
    let mut sent: u64 = 0;
    let mut revived = 0u64;
    let mut now = Instant::ZERO;
    'outer: loop {
        for p in &pool {
            nic.handle_datagram(now, &m, p);
            while nic.poll_transmit(now, &mut out).is_some() {
                sent += 1;
            }
            n += 1;
            if n & 255 == 0 {
                now = now.add_nanos(256 * 100);
                nic.handle_timeout(now);
                for cq in [scq, rcq] {
                    while nic.poll_cq(cq, &mut wc) > 0 {}
                }
                while nic.poll_event().is_some() {}
                while nic.poll_comp_event().is_some() {}
                for &q in &qpns {
                    // (an ERR QP flushes each receive at once: post a bounded number)
                    let wr = RecvWr {
                        wr_id: n,
                        sg_list: &sge,
                    };
                    for _ in 0..64 {
                        if nic.post_recv(q, &wr).is_err() {
                            break;
                        }
                    }
                }
                if n & 4095 == 0 {
                    for (i, &q) in qpns.iter().enumerate() {
                        if nic.query_qp(q).unwrap().qp_state == QpState::Err {
                            connect(&mut nic, q, types[i], peer, 0x100 + i as u32);
                            revived += 1;
                        }
                    }
                    if start.elapsed().as_secs_f64() >= secs {
                        break 'outer;
                    }
                }
            }
        }
    }
    let el = start.elapsed().as_secs_f64();
    let c = nic.counters();
    println!(
        "flood: {n} packets in {el:.1} s = {:.0} packets/s ({:.2} M/s) on one core; {sent} answers sent; {revived} QP revivals",
        n as f64 / el,
        n as f64 / el / 1e6
    );
    println!(
        "peak RSS (VmHWM): {} KiB (before the flood: {hwm0} KiB, the packet pool is {} KiB of it)",
        vm_hwm_kib(),
        bytes / 1024
    );
    println!(
        "counters: rcvd_pkts {} icrc_errors {} malformed {} bad_opcode {} no_qp {} bad_state {} qkey_violation {} out_of_seq {} duplicate {} req_dropped {} resp_ignored {} resp_queue_full {}",
        c.rcvd_pkts, c.icrc_errors, c.malformed, c.bad_opcode, c.no_qp, c.bad_state, c.qkey_violation, c.out_of_seq_request, c.duplicate_request, c.req_dropped, c.resp_ignored, c.resp_queue_full
    );
}
