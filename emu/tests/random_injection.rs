//! Arbitrary (but ICRC-valid) packet sequences fed to a responder and a completer: nothing
//! panics, memory is only touched inside registered regions, and what the NIC sends back has
//! sane PSNs. Seeds: `ROCE_INJECT_SEEDS` (default 300 debug / 3000 release).
mod common;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth, OpFlags, Opcode, Psn,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A region that counts accesses and asserts the core's bounds contract.
struct Guarded {
    inner: VecMemory,
    touched: AtomicU64,
}

impl MemoryRegion for Guarded {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len(), "read outside the region");
        self.touched.fetch_add(1, Ordering::Relaxed);
        self.inner.read(off, dst)
    }
    fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len(), "write outside the region");
        self.touched.fetch_add(1, Ordering::Relaxed);
        self.inner.write(off, src)
    }
    fn atomic_cmp_swap(&self, off: usize, c: u64, s: u64) -> u64 {
        assert!(off + 8 <= self.len() && off.is_multiple_of(8));
        self.touched.fetch_add(1, Ordering::Relaxed);
        self.inner.atomic_cmp_swap(off, c, s)
    }
    fn atomic_fetch_add(&self, off: usize, a: u64) -> u64 {
        assert!(off + 8 <= self.len() && off.is_multiple_of(8));
        self.touched.fetch_add(1, Ordering::Relaxed);
        self.inner.atomic_fetch_add(off, a)
    }
}

const RC_OPS: [u8; 23] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17,
];

fn random_packet(
    rng: &mut SmallRng,
    dest_qp: u32,
    base_psn: u32,
    keys: &[(u32, u64, u64)],
    mtu: usize,
) -> (Repr, Vec<u8>) {
    const WHOLE: [u8; 6] = [0x04, 0x0A, 0x0C, 0x13, 0x14, 0x0B];
    let op = if rng.gen_bool(0.5) {
        Opcode(WHOLE[rng.gen_range(0..WHOLE.len())])
    } else {
        Opcode(RC_OPS[rng.gen_range(0..RC_OPS.len())])
    };
    let f = op.flags();
    let psn = if rng.gen_bool(0.6) {
        base_psn
    } else {
        base_psn.wrapping_add(rng.gen_range(0..8)).wrapping_sub(2)
    };
    let mut b = bth::Repr::new(op, dest_qp, Psn::new(psn));
    b.ack_req = rng.gen_bool(0.5);
    b.se = rng.gen_bool(0.1);
    let mut r = Repr::new(b);
    let (key, base, len) = keys[rng.gen_range(0..keys.len())];
    let key = if rng.gen_bool(0.9) { key } else { rng.gen() };
    // mostly inside the region, sometimes straddling its ends, sometimes anywhere
    let va = match rng.gen_range(0..10) {
        0 => rng.gen(),
        1 => base + len - rng.gen_range(0..64),
        2 => base.wrapping_sub(rng.gen_range(0..64)),
        _ => base + rng.gen_range(0..len),
    };
    let va = if rng.gen_bool(0.5) { va & !7 } else { va };
    if f.contains(OpFlags::RETH) {
        let len = if rng.gen_bool(0.8) {
            rng.gen_range(0..3 * mtu as u32)
        } else {
            rng.gen()
        };
        r.reth = Some(reth::Repr {
            va,
            rkey: key,
            dma_len: len,
        });
    }
    if f.contains(OpFlags::ATMETH) {
        r.atomic_eth = Some(atomic_eth::Repr {
            va,
            rkey: key,
            swap_add: rng.gen(),
            compare: rng.gen(),
        });
    }
    if f.contains(OpFlags::AETH) {
        let syn =
            [0x1F, 0x00, 0x21, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x45][rng.gen_range(0..10)];
        r.aeth = Some(aeth::Repr {
            syndrome: aeth::Syndrome::from_byte(syn),
            msn: rng.gen_range(0..1 << 24),
        });
    }
    if f.contains(OpFlags::ATMACK) {
        r.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: rng.gen() });
    }
    if f.contains(OpFlags::IMMDT) {
        r.immdt = Some(immdt::Repr { imm: rng.gen() });
    }
    if f.contains(OpFlags::IETH) {
        r.ieth = Some(ieth::Repr { rkey: key });
    }
    if f.contains(OpFlags::DETH) {
        r.deth = Some(deth::Repr {
            qkey: rng.gen(),
            resv: 0,
            src_qp: roce_wire::Qpn::new(rng.gen_range(0..1 << 24)),
        });
    }
    let plen = if f.contains(OpFlags::PAYLOAD) {
        match rng.gen_range(0..4) {
            0 => mtu,
            1 => 0,
            _ => rng.gen_range(0..=mtu + 8),
        }
    } else {
        0
    };
    r.set_payload_len(plen);
    let payload: Vec<u8> = (0..plen).map(|_| rng.gen()).collect();
    (r, payload)
}

static ACCEPTED: AtomicU64 = AtomicU64::new(0);
static TOUCHED: AtomicU64 = AtomicU64::new(0);

fn run(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut p = Pair::new(
        seed,
        LinkConfig::ideal(),
        Opts {
            mtu: Mtu::Mtu256,
            timeout: 4,
            retry_cnt: 7,
            rnr_retry: 7,
            ..Default::default()
        },
    );
    // an extra guarded region on each side
    let mut keys = vec![
        (p.b.mr.rkey, IOVA, MEM as u64),
        (p.a.mr.rkey, IOVA, MEM as u64),
    ];
    let mut guards = Vec::new();
    for idx in [p.a.idx, p.b.idx] {
        let g = Arc::new(Guarded {
            inner: VecMemory::new(4096),
            touched: AtomicU64::new(0),
        });
        let pd = if idx == p.a.idx { p.a.pd } else { p.b.pd };
        let gbase = IOVA + 2 * MEM as u64;
        let mr = p.net.nics[idx]
            .reg_mr(
                pd,
                g.clone(),
                gbase,
                AccessFlags::LOCAL_WRITE
                    | AccessFlags::REMOTE_WRITE
                    | AccessFlags::REMOTE_READ
                    | AccessFlags::REMOTE_ATOMIC,
            )
            .unwrap();
        keys.push((mr.rkey, gbase, 4096));
        keys.push((mr.rkey, gbase, 4096));
        guards.push(g);
    }
    for i in 0..8 {
        p.recv_b(i, 0x1000 * i, 0x1000);
    }
    // outstanding work on A so that its completer has something to chew on
    let rkey = p.b.mr.rkey;
    for i in 0..6u64 {
        let op = [
            WrOpcode::Send,
            WrOpcode::RdmaRead,
            WrOpcode::RdmaWrite,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp,
        ][i as usize];
        let len = if op.is_atomic() {
            8
        } else {
            rng.gen_range(0..900)
        };
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0x100 * i, len)],
            opcode: op,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        });
    }
    let (a_ip, b_ip, a_qpn, b_qpn) = (p.a.ip, p.b.ip, p.a.qpn, p.b.qpn);
    let mut buf = vec![0u8; 8192];
    for _ in 0..150 {
        // inject into A (responses) or B (requests), as if sent by the peer
        let to_b = rng.gen_bool(0.5);
        let (dst_idx, dst_qp, src_ip, dst_ip) = if to_b {
            (p.b.idx, b_qpn, a_ip, b_ip)
        } else {
            (p.a.idx, a_qpn, b_ip, a_ip)
        };
        let base = p.net.nics[dst_idx].query_qp(dst_qp).unwrap();
        let base_psn = if to_b {
            base.rq_psn
        } else {
            base.sq_psn.wrapping_sub(rng.gen_range(0..4))
        };
        let (r, payload) = random_packet(&mut rng, dst_qp, base_psn, &keys, 256);
        let len = r.buffer_len();
        r.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        let h = r.header_len();
        buf[h..h + payload.len()].copy_from_slice(&payload);
        let t = Transmit {
            src_ip,
            dst_ip,
            src_port: 0xC000,
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len,
        };
        assert!(roce_emu::net::seal(&t, &mut buf[..len]));
        let meta = RxMeta {
            src_ip,
            dst_ip,
            src_port: 0xC000,
            ipv4_id: Some(0),
            tos: 0,
            ttl: 64,
            flow_label: 0,
        };
        let now = p.net.now;
        p.net.nics[dst_idx].handle_datagram(now, &meta, &buf[..len]);
        // let both NICs talk and time pass a little
        p.net
            .run_until(|_| false, now.add_nanos(rng.gen_range(0..50_000)));
    }
    p.run(1000);
    ACCEPTED.fetch_add(
        p.net.nics[0].counters().rcvd_pkts + p.net.nics[1].counters().rcvd_pkts,
        Ordering::Relaxed,
    );
    TOUCHED.fetch_add(
        guards
            .iter()
            .map(|g| g.touched.load(Ordering::Relaxed))
            .sum(),
        Ordering::Relaxed,
    );
    // whatever happened, every posted WR completed exactly once (success, error or flush) or
    // is still legitimately outstanding on a live QP; no duplicates
    let wc = p.scq_a();
    let mut ids: Vec<u64> = wc.iter().map(|w| w.wr_id).collect();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate completion: {wc:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order: {wc:?}");
    if p.qp_a().qp_state == QpState::Err {
        assert_eq!(n, 6, "an ERR QP has flushed everything");
    }
}

#[test]
fn arbitrary_icrc_valid_packets_never_break_the_nic() {
    let default = if cfg!(debug_assertions) { 300 } else { 3000 };
    let n: u64 = std::env::var("ROCE_INJECT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    for seed in 0..n {
        let r = std::panic::catch_unwind(|| run(seed));
        assert!(r.is_ok(), "{}", seed_msg(seed));
    }
    // the injections reach the engines, including the guarded regions
    let (acc, touched) = (
        ACCEPTED.load(Ordering::Relaxed),
        TOUCHED.load(Ordering::Relaxed),
    );
    eprintln!("accepted {acc} packets, {touched} guarded-region accesses");
    assert!(
        n < 50 || (acc > n * 30 && touched > n / 60),
        "accepted {acc}, touched {touched}"
    );
}
