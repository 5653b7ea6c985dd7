//! One random, mostly plausible RoCE request or response header set: shared by
//! `tests/memory_bound.rs` and `examples/flood.rs` (included with `#[path]`, so neither pulls in
//! the scenario harness of `common/mod.rs`).
use rand::rngs::SmallRng;
use rand::Rng;
use roce_wire::transport::Repr;
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, bth, deth, immdt, reth, OpFlags, Opcode, Psn};

/// Headers for `op` to `dest` at `psn`: AckReq 70 %, `rkey` 80 % (else random), addresses in
/// and just around `[iova, iova + len)`, RETH lengths below `max_dma`, AETH syndromes among ACK,
/// RNR and the NAK codes, Q_Key right 90 %, payload 1024 bytes half the time.
#[allow(clippy::too_many_arguments)]
pub fn random_repr(
    rng: &mut SmallRng,
    op: Opcode,
    dest: u32,
    psn: Psn,
    rkey: u32,
    iova: u64,
    len: u64,
    max_dma: u32,
) -> Repr {
    let f = op.flags();
    let mut bt = bth::Repr::new(op, dest, psn);
    bt.ack_req = rng.gen_bool(0.7);
    let mut r = Repr::new(bt);
    let key = if rng.gen_bool(0.8) { rkey } else { rng.gen() };
    let va = iova + rng.gen_range(0..len + 64) - 32;
    if f.contains(OpFlags::RETH) {
        r.reth = Some(reth::Repr {
            va,
            rkey: key,
            dma_len: rng.gen_range(0..max_dma),
        });
    }
    if f.contains(OpFlags::ATMETH) {
        r.atomic_eth = Some(atomic_eth::Repr {
            va: va & !7,
            rkey: key,
            swap_add: 1,
            compare: 0,
        });
    }
    if f.contains(OpFlags::AETH) {
        let syn = [0x1F, 0x20, 0x60, 0x61, 0x62, 0x63][rng.gen_range(0..6)];
        r.aeth = Some(aeth::Repr {
            syndrome: aeth::Syndrome::from_byte(syn),
            msn: 0,
        });
    }
    if f.contains(OpFlags::ATMACK) {
        r.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: 0 });
    }
    if f.contains(OpFlags::IMMDT) {
        r.immdt = Some(immdt::Repr { imm: 1 });
    }
    if f.contains(OpFlags::IETH) {
        r.ieth = Some(roce_wire::ieth::Repr { rkey: key });
    }
    if f.contains(OpFlags::DETH) {
        r.deth = Some(deth::Repr {
            qkey: if rng.gen_bool(0.9) { 0x1111 } else { 1 },
            resv: 0,
            src_qp: roce_wire::Qpn::new(5),
        });
    }
    if f.contains(OpFlags::PAYLOAD) {
        r.set_payload_len(if rng.gen_bool(0.5) {
            1024
        } else {
            rng.gen_range(0..1100)
        });
    }
    r
}
