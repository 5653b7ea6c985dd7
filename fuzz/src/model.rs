//! `model`: model-based sequences of verbs calls and network events on two NICs joined by
//! [`SimNet`]: SEND (with a receive posted first), WRITE, READ, compare-and-swap and
//! fetch-and-add on one RC QP pair, interleaved with changes of the link's loss, duplication,
//! reordering and corruption and with virtual time passing.
//!
//! The model applies every WR at post time, in post order (the order an RC responder executes
//! them): WRITEs and SENDs into B's memory, READ data and atomic originals into A's sinks. The
//! regions are laid out so that this order is the only one that matters: READs read a zone
//! nothing writes, WRITEs / SENDs / atomics each have their own zone.
//!
//! Invariants: no panic, no region call outside its bounds, no leftover work past the retry
//! budget (the network goes idle), every signaled WR completes exactly once and in order;
//! when every completion is a success, A's and B's memories equal the model's byte for byte
//! and B's receive completions match the SENDs.
use crate::harness::*;
use crate::responder::connect_with;
use arbitrary::Unstructured;
use roce_emu::sim::{LinkConfig, SimNet};
use roce_emu::*;
use std::sync::Arc;

const IOVA: u64 = 0x1_0000;
const LEN: usize = 16384;
// B's zones
const W_ZONE: usize = 0;
const R_ZONE: usize = 4096;
const ATOMIC_ZONE: usize = 8192;
const RECV_ZONE: usize = 12288;
// A's zones
const SRC_ZONE: usize = 0;
const SINK_ZONE: usize = 4096;

struct Posted {
    signaled: bool,
    send: Option<u32>,
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// The target body.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let seed: u64 = any(&mut u);
    let mut net = SimNet::new(seed, LinkConfig::default());
    let ips = ["10.0.0.1", "10.0.0.2"].map(|s| s.parse::<std::net::IpAddr>().unwrap());
    let init_a = pattern(LEN, 1);
    let mut init_b = pattern(LEN, 2);
    init_b[RECV_ZONE..].fill(0);
    let mems = [
        Arc::new(Guarded::new(LEN, 0)),
        Arc::new(Guarded::new(LEN, 0)),
    ];
    mems[0].store(0, &init_a);
    mems[1].store(0, &init_b);
    let mut model = [init_a, init_b];
    let mut side = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        let mut cfg = NicConfig::new(*ip);
        cfg.seed = seed ^ i as u64;
        let mut nic = Nic::new(cfg);
        let pd = nic.alloc_pd().unwrap();
        let scq = nic.create_cq(256).unwrap();
        let rcq = nic.create_cq(256).unwrap();
        let all = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mr = nic.reg_mr(pd, mems[i].clone(), IOVA, all).unwrap();
        let init = QpInitAttr {
            send_cq: scq,
            recv_cq: rcq,
            srq: None,
            cap: QpCap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
            qp_type: QpType::Rc,
            sq_sig_all: false,
        };
        let qpn = nic.create_qp(pd, &init).unwrap();
        let idx = net.add_nic(nic);
        side.push((idx, qpn, mr, scq, rcq));
    }
    let (a, b) = (side[0], side[1]);
    let rd = pick(&mut u, &[1u8, 2, 4, 16]);
    connect_with(
        &mut net.nics[a.0],
        a.1,
        QpType::Rc,
        ips[1],
        b.1,
        rd,
        (0xFF_FFF0, 0x10),
        6,
    );
    connect_with(
        &mut net.nics[b.0],
        b.1,
        QpType::Rc,
        ips[0],
        a.1,
        rd,
        (0x10, 0xFF_FFF0),
        6,
    );
    let mut posted: Vec<Posted> = Vec::new();
    let mut recvs_posted = 0u32;
    let mut spare = std::collections::VecDeque::new();
    let mut done: Vec<WorkCompletion> = Vec::new();
    let mut rdone: Vec<WorkCompletion> = Vec::new();
    let mut wc = [WorkCompletion::default(); 32];
    let poll = |net: &mut SimNet,
                cq: (usize, Cq),
                out: &mut Vec<WorkCompletion>,
                wc: &mut [WorkCompletion]| loop {
        let n = net.nics[cq.0].poll_cq(cq.1, wc);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&wc[..n]);
    };
    for _ in 0..64 {
        if u.is_empty() {
            break;
        }
        match range(&mut u, 0, 9) {
            0 => {
                let loss = range(&mut u, 0, 15) as f64 / 100.0;
                let corrupt = if cfg!(fuzzing) {
                    // under cfg(fuzzing) the ICRC check accepts anything
                    0.0
                } else {
                    range(&mut u, 0, 5) as f64 / 100.0
                };
                net.set_default_link(LinkConfig {
                    latency_ns: range(&mut u, 0, 5000) as u64,
                    jitter_ns: range(&mut u, 0, 2000) as u64,
                    loss,
                    duplicate: range(&mut u, 0, 10) as f64 / 100.0,
                    reorder: range(&mut u, 0, 20) as f64 / 100.0,
                    reorder_delay_ns: range(&mut u, 0, 20_000) as u64,
                    corrupt,
                    bandwidth_bps: None,
                });
            }
            1 => {
                let t = net.now.add_nanos(range(&mut u, 0, 1 << 20) as u64 * 16);
                net.run_until(|_| false, t);
            }
            2 => poll(&mut net, (a.0, a.3), &mut done, &mut wc),
            _ => {
                let k = posted.len() as u64;
                let opcode = pick(
                    &mut u,
                    &[
                        WrOpcode::Send,
                        WrOpcode::RdmaWrite,
                        WrOpcode::RdmaRead,
                        WrOpcode::AtomicCmpAndSwp,
                        WrOpcode::AtomicFetchAndAdd,
                        WrOpcode::RdmaWriteWithImm,
                        WrOpcode::SendWithImm,
                    ],
                );
                let len = if opcode.is_atomic() {
                    8
                } else {
                    range(&mut u, 0, 1024)
                };
                let signaled = chance(&mut u, 7, 8);
                let inline = !opcode.is_rd_atomic() && len <= 64 && chance(&mut u, 1, 4);
                let src_off = range(&mut u, 0, 4096 - len) as usize;
                let (local, remote) = match opcode {
                    WrOpcode::RdmaRead => (
                        SINK_ZONE + range(&mut u, 0, 8192 - len) as usize,
                        R_ZONE + range(&mut u, 0, 4096 - len) as usize,
                    ),
                    o if o.is_atomic() => (
                        SINK_ZONE + 8 * range(&mut u, 0, 1023) as usize,
                        ATOMIC_ZONE + 8 * range(&mut u, 0, 511) as usize,
                    ),
                    WrOpcode::Send | WrOpcode::SendWithImm => (SRC_ZONE + src_off, 0),
                    _ => (
                        SRC_ZONE + src_off,
                        W_ZONE + range(&mut u, 0, 4096 - len) as usize,
                    ),
                };
                let len = len as usize;
                let split = range(&mut u, 0, len as u32) as usize;
                let sg = [
                    Sge {
                        addr: IOVA + local as u64,
                        length: split as u32,
                        lkey: a.2.lkey,
                    },
                    Sge {
                        addr: IOVA + (local + split) as u64,
                        length: (len - split) as u32,
                        lkey: a.2.lkey,
                    },
                ];
                let compare_add: u64 = any(&mut u);
                let swap: u64 = any(&mut u);
                // SENDs and WRITE with immediate each consume a receive at B
                let is_send = opcode.is_send() || opcode == WrOpcode::RdmaWriteWithImm;
                if is_send && spare.is_empty() {
                    if net.nics[b.0].query_qp(b.1).unwrap().qp_state != QpState::Rts {
                        continue;
                    }
                    let slot = (recvs_posted % 3) as usize * 1024;
                    let rsg = [Sge {
                        addr: IOVA + (RECV_ZONE + slot) as u64,
                        length: 1024,
                        lkey: b.2.lkey,
                    }];
                    let r = RecvWr {
                        wr_id: recvs_posted as u64,
                        sg_list: &rsg,
                    };
                    if net.nics[b.0].post_recv(b.1, &r).is_err() {
                        continue;
                    }
                    recvs_posted += 1;
                    spare.push_back(slot);
                }
                let mut flags = if signaled {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::EMPTY
                };
                if inline {
                    flags |= SendFlags::INLINE;
                }
                if chance(&mut u, 1, 8) {
                    flags |= SendFlags::FENCE;
                }
                let wr = SendWr {
                    wr_id: k,
                    sg_list: if opcode.is_atomic() { &sg[..1] } else { &sg },
                    opcode,
                    send_flags: flags,
                    imm_data: k as u32,
                    remote_addr: IOVA + remote as u64,
                    rkey: b.2.rkey,
                    compare_add,
                    swap,
                    ..Default::default()
                };
                let sg_atomic = [Sge {
                    addr: IOVA + local as u64,
                    length: 8,
                    lkey: a.2.lkey,
                }];
                let wr = if opcode.is_atomic() {
                    SendWr {
                        sg_list: &sg_atomic,
                        ..wr
                    }
                } else {
                    wr
                };
                if net.nics[a.0].post_send(a.1, &wr).is_err() {
                    // SQ full: a receive posted for this SEND waits for the next one
                    continue;
                }
                // apply to the model
                let [ma, mb] = &mut model;
                match opcode {
                    WrOpcode::RdmaRead => {
                        let d = mb[remote..remote + len].to_vec();
                        ma[local..local + len].copy_from_slice(&d);
                    }
                    WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                        let t = &mut mb[remote..remote + 8];
                        let old = u64::from_ne_bytes(t.try_into().unwrap());
                        let new = if opcode == WrOpcode::AtomicFetchAndAdd {
                            old.wrapping_add(compare_add)
                        } else if old == compare_add {
                            swap
                        } else {
                            old
                        };
                        t.copy_from_slice(&new.to_ne_bytes());
                        ma[local..local + 8].copy_from_slice(&old.to_ne_bytes());
                    }
                    WrOpcode::Send | WrOpcode::SendWithImm => {
                        let slot = RECV_ZONE + spare.pop_front().expect("a receive was posted");
                        let d = ma[local..local + len].to_vec();
                        mb[slot..slot + len].copy_from_slice(&d);
                    }
                    _ => {
                        let d = ma[local..local + len].to_vec();
                        mb[remote..remote + len].copy_from_slice(&d);
                        if is_send {
                            spare.pop_front().expect("a receive was posted");
                        }
                    }
                }
                let send = if is_send { Some(len as u32) } else { None };
                posted.push(Posted { signaled, send });
            }
        }
    }
    // drain: everything completes within the retry budget
    let deadline = net.now.add_nanos(10_000_000_000);
    let idle = net.run_idle(deadline);
    assert!(
        idle,
        "still busy at {:?} (seed {seed:#x}): A {:?} {:?}, B {:?} {:?}, next {:?}",
        net.now,
        net.nics[a.0].query_qp(a.1).unwrap().qp_state,
        net.nics[a.0].counters(),
        net.nics[b.0].query_qp(b.1).unwrap().qp_state,
        net.nics[b.0].counters(),
        net.next_event()
    );
    poll(&mut net, (a.0, a.3), &mut done, &mut wc);
    poll(&mut net, (b.0, b.4), &mut rdone, &mut wc);
    let ids: Vec<u64> = done.iter().map(|w| w.wr_id).collect();
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "completions repeated or out of order: {ids:?}");
    }
    let all_ok = done.iter().all(|w| w.status == WcStatus::Success)
        && net.nics[a.0].query_qp(a.1).unwrap().qp_state == QpState::Rts
        && net.nics[b.0].query_qp(b.1).unwrap().qp_state == QpState::Rts;
    for (k, p) in posted.iter().enumerate() {
        let n = ids.iter().filter(|&&i| i == k as u64).count();
        if p.signaled || !all_ok {
            // a signaled WR completes exactly once; on an errored QP every WR does
            assert!(
                n == 1 || (!p.signaled && !all_ok && n <= 1),
                "WR {k} completed {n} times (seed {seed:#x})"
            );
        } else {
            assert_eq!(n, 0, "unsignaled WR {k} completed");
        }
    }
    if all_ok {
        assert_eq!(
            mems[1].snapshot(),
            model[1],
            "B's memory differs from the model"
        );
        assert_eq!(
            mems[0].snapshot(),
            model[0],
            "A's memory differs from the model"
        );
        let lens: Vec<u32> = posted.iter().filter_map(|p| p.send).collect();
        let got: Vec<u32> = rdone.iter().map(|w| w.byte_len).collect();
        assert_eq!(got, lens, "receive completions");
    }
}
