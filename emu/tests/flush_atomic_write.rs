//! IBA 1.5 RDMA FLUSH and ATOMIC WRITE between two NICs and hand-built into one: the answer
//! is one zero-length RDMA READ response; the access rules (QP and region flags, per FLUSH
//! placement type; ATOMIC WRITE needs remote write); the 8-byte alignment and length of an
//! ATOMIC WRITE; duplicates answered again without executing again; completions
//! `IBV_WC_FLUSH` (8) and `IBV_WC_ATOMIC_WRITE` (9); and both under loss with one initiator
//! depth credit (they hold one each, and give it back when a later ACK completes them).
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{bth, feth, reth, Opcode, Psn};
use std::sync::Arc;

/// QP access of both sides: everything, FLUSH for global visibility included.
fn opts() -> Opts {
    Opts {
        access: AccessFlags::ALL_REMOTE | AccessFlags::FLUSH_GLOBAL,
        ..Default::default()
    }
}

/// A second region over B's memory that allows FLUSH (global) and remote write.
fn flushable_mr(p: &mut Pair) -> Mr {
    let (pd, mem) = (p.b.pd, p.b.mem.clone());
    p.nic_b()
        .reg_mr(
            pd,
            Arc::new(mem),
            IOVA,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::FLUSH_GLOBAL,
        )
        .unwrap()
}

fn flush_wr(wr_id: u64, rkey: u32, off: u64, len: u32, ty: u8, level: u8) -> SendWr<'static> {
    SendWr {
        wr_id,
        opcode: WrOpcode::Flush,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + off,
        rkey,
        flush: FlushWr {
            length: len,
            placement_type: ty,
            level,
        },
        ..Default::default()
    }
}

fn atomic_write_wr(wr_id: u64, rkey: u32, off: u64, value: u64) -> SendWr<'static> {
    SendWr {
        wr_id,
        opcode: WrOpcode::AtomicWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA + off,
        rkey,
        compare_add: value,
        ..Default::default()
    }
}

fn one(v: Vec<WorkCompletion>) -> WorkCompletion {
    assert_eq!(v.len(), 1, "{v:?}");
    v[0]
}

#[test]
fn write_then_flush_completes_with_ibv_wc_flush() {
    let mut p = Pair::new(1, LinkConfig::default(), opts());
    let mr = flushable_mr(&mut p);
    p.a.mem.store(0, b"persist me");
    let sge = [sge(&p.a, 0, 10)];
    p.post_a(SendWr {
        wr_id: 1,
        opcode: WrOpcode::RdmaWrite,
        sg_list: &sge,
        remote_addr: IOVA + 100,
        rkey: mr.rkey,
        ..Default::default()
    });
    p.post_a(flush_wr(
        2,
        mr.rkey,
        100,
        10,
        feth::PLACEMENT_GLOBAL,
        feth::SELECT_RANGE,
    ));
    p.post_a(flush_wr(
        3,
        mr.rkey,
        0,
        0,
        feth::PLACEMENT_GLOBAL,
        feth::SELECT_MR,
    ));
    p.run(10);
    let wcs = p.scq_a();
    assert_eq!(wcs.len(), 2, "{wcs:?}");
    for (wc, id) in wcs.iter().zip([2, 3]) {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (id, WcStatus::Success, WcOpcode::Flush)
        );
        assert_eq!(wc.opcode as u32, 8);
    }
    assert_eq!(wcs[0].byte_len, 10);
    assert_eq!(p.b.mem.load(100, 10), b"persist me");
    assert!(p.rcq_b().is_empty(), "a FLUSH consumes no receive WR");
}

#[test]
fn atomic_write_lands_its_eight_bytes_with_ibv_wc_atomic_write() {
    let mut p = Pair::new(2, LinkConfig::default(), opts());
    let rkey = p.b.mr.rkey;
    let v = 0x1122_3344_5566_7788u64;
    p.post_a(atomic_write_wr(7, rkey, 64, v));
    p.run(10);
    let wc = one(p.scq_a());
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
        (7, WcStatus::Success, WcOpcode::AtomicWrite, 8)
    );
    assert_eq!(wc.opcode as u32, 9);
    assert_eq!(p.b.mem.load(64, 8), v.to_ne_bytes());
    assert_eq!(p.b.mem.load(72, 8), [0; 8]);
}

#[test]
fn flush_without_the_region_flag_is_a_remote_access_error() {
    let mut p = Pair::new(3, LinkConfig::default(), opts());
    let rkey = p.b.mr.rkey; // registered without IBV_ACCESS_FLUSH_GLOBAL
    p.post_a(flush_wr(
        1,
        rkey,
        0,
        64,
        feth::PLACEMENT_GLOBAL,
        feth::SELECT_RANGE,
    ));
    p.run(10);
    let wc = one(p.scq_a());
    assert_eq!(wc.status, WcStatus::RemAccessErr);
    let q = p.b.qpn;
    assert_eq!(p.nic_b().query_qp(q).unwrap().qp_state, QpState::Err);
}

#[test]
fn flush_or_atomic_write_without_the_qp_flag_is_an_invalid_request() {
    for (k, wr) in [
        flush_wr(1, 0, 0, 8, feth::PLACEMENT_GLOBAL, feth::SELECT_RANGE),
        atomic_write_wr(1, 0, 0, 5),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = Pair::new(
            4,
            LinkConfig::default(),
            Opts {
                // FLUSH without FLUSH_GLOBAL; ATOMIC WRITE without REMOTE_WRITE
                access: if k == 0 {
                    AccessFlags::ALL_REMOTE
                } else {
                    AccessFlags::LOCAL_WRITE | AccessFlags::FLUSH_GLOBAL
                },
                ..Default::default()
            },
        );
        let mr = flushable_mr(&mut p);
        p.post_a(SendWr {
            rkey: mr.rkey,
            ..wr
        });
        p.run(10);
        assert_eq!(one(p.scq_a()).status, WcStatus::RemInvReqErr, "case {k}");
        assert_eq!(p.b.mem.load(0, 8), [0; 8]);
    }
}

#[test]
fn persistent_regions_are_refused_as_rxe_refuses_them_on_ordinary_memory() {
    let mut p = Pair::new(5, LinkConfig::default(), opts());
    let (pd, mem) = (p.b.pd, p.b.mem.clone());
    let r = p.nic_b().reg_mr(
        pd,
        Arc::new(mem),
        IOVA,
        AccessFlags::LOCAL_WRITE | AccessFlags::FLUSH_PERSISTENT,
    );
    assert_eq!(r.err(), Some(Error::Invalid));
    // so a FLUSH for persistence finds no region that allows it: remote access error
    let rkey = flushable_mr(&mut p).rkey;
    p.post_a(flush_wr(
        1,
        rkey,
        0,
        8,
        feth::PLACEMENT_PERSISTENT,
        feth::SELECT_RANGE,
    ));
    p.run(10);
    // (the QP lacks IBV_ACCESS_FLUSH_PERSISTENT too: checked first, invalid request)
    assert_eq!(one(p.scq_a()).status, WcStatus::RemInvReqErr);
}

#[test]
fn misaligned_atomic_write_is_naked_and_writes_nothing() {
    let mut p = Pair::new(6, LinkConfig::default(), opts());
    let rkey = p.b.mr.rkey;
    p.post_a(atomic_write_wr(1, rkey, 4, u64::MAX));
    p.run(10);
    assert_eq!(one(p.scq_a()).status, WcStatus::RemInvReqErr);
    assert_eq!(p.b.mem.load(0, 16), vec![0; 16]);
    assert_eq!(p.nic_b().counters().diag_atomic_misaligned, 1);
}

// ---- hand-built requests into B: the exact answers

fn inject(p: &mut Pair, r: Repr, payload: &[u8]) {
    let mut r = r;
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let h = r.header_len();
    buf[h..h + payload.len()].copy_from_slice(payload);
    p.deliver_to_b(&mut buf, 0xC123);
}

/// B's responses (each with an AETH) as [`packet_text`]: opcode, PSN, AETH syndrome and MSN,
/// payload length.
fn drain_b(p: &mut Pair) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    let now = p.net.now;
    while let Some(t) = p.nic_b().poll_transmit(now, &mut buf) {
        let r = Repr::parse(&Packet::new_checked(&buf[..t.len]).unwrap()).unwrap();
        let a = r.aeth.unwrap();
        let (op, psn, len) = (r.bth.opcode, r.bth.psn.value(), r.payload_len);
        out.push(packet_text(
            op,
            psn,
            false,
            Some(a.syndrome),
            Some(a.msn),
            Some(len),
        ));
    }
    out
}

fn request(p: &Pair, op: Opcode, psn: u32, va: u64, rkey: u32, len: u32) -> Repr {
    let mut b = bth::Repr::new(op, p.b.qpn, Psn::new(psn));
    b.ack_req = true;
    let mut r = Repr::new(b);
    r.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: len,
    });
    r
}

#[test]
fn duplicates_are_answered_again_and_not_executed_again() {
    let mut p = Pair::new(7, LinkConfig::default(), opts());
    let mr = flushable_mr(&mut p);
    let aw = |p: &Pair, v: u64| {
        (
            request(p, Opcode::RC_ATOMIC_WRITE, 0x100, IOVA + 8, mr.rkey, 8),
            v.to_be_bytes(),
        )
    };
    let (r, v) = aw(&p, 0x0102_0304_0506_0708);
    inject(&mut p, r, &v);
    let mut f = request(&p, Opcode::RC_FLUSH, 0x101, IOVA, mr.rkey, 64);
    f.feth = Some(feth::Repr::new(feth::PLACEMENT_GLOBAL, feth::SELECT_RANGE));
    inject(&mut p, f, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec![
            "RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31 msn=1) len=0",
            "RC RDMA_READ_RESPONSE_ONLY psn=257 AETH(ACK credits=31 msn=2) len=0"
        ]
    );
    assert_eq!(p.b.mem.load(8, 8), [1, 2, 3, 4, 5, 6, 7, 8]);
    // the program changes the word; a duplicate of the ATOMIC WRITE must not undo that
    p.b.mem.store(8, &[9; 8]);
    let (r, v) = aw(&p, 0xAAAA_AAAA_AAAA_AAAA);
    inject(&mut p, r, &v);
    inject(&mut p, f, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec![
            "RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31 msn=2) len=0",
            "RC RDMA_READ_RESPONSE_ONLY psn=257 AETH(ACK credits=31 msn=2) len=0"
        ]
    );
    assert_eq!(p.b.mem.load(8, 8), [9; 8]);
    assert_eq!(p.nic_b().counters().duplicate_request, 2);
}

#[test]
fn atomic_write_of_other_than_eight_bytes_is_an_invalid_request() {
    let mut p = Pair::new(8, LinkConfig::default(), opts());
    let rkey = p.b.mr.rkey;
    let r = request(&p, Opcode::RC_ATOMIC_WRITE, 0x100, IOVA, rkey, 16);
    inject(&mut p, r, &[7; 16]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=256 AETH(NAK InvalidRequest msn=0) len=0"]
    );
    assert_eq!(p.b.mem.load(0, 16), vec![0; 16]);
    assert_eq!(p.nic_b().counters().diag_atomic_write_length, 1);
}

#[test]
fn flush_of_the_whole_region_checks_no_range_but_a_range_must_fit() {
    let mut p = Pair::new(9, LinkConfig::default(), opts());
    let mr = flushable_mr(&mut p);
    let mut f = request(&p, Opcode::RC_FLUSH, 0x100, 0, mr.rkey, u32::MAX >> 1);
    f.feth = Some(feth::Repr::new(feth::PLACEMENT_GLOBAL, feth::SELECT_MR));
    inject(&mut p, f, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31 msn=1) len=0"]
    );
    let mut f = request(
        &p,
        Opcode::RC_FLUSH,
        0x101,
        IOVA + MEM as u64 - 8,
        mr.rkey,
        16,
    );
    f.feth = Some(feth::Repr::new(feth::PLACEMENT_GLOBAL, feth::SELECT_RANGE));
    inject(&mut p, f, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=257 AETH(NAK RemoteAccessError msn=1) len=0"]
    );
}

#[test]
fn flush_and_atomic_write_on_uc_or_ud_are_refused_at_post() {
    for qp_type in [QpType::Uc, QpType::Ud] {
        let mut p = Pair::new(10, LinkConfig::default(), Opts { qp_type, ..opts() });
        let q = p.a.qpn;
        for wr in [flush_wr(1, 0, 0, 8, 1, 0), atomic_write_wr(1, 0, 0, 1)] {
            assert_eq!(
                p.nic_a().post_send(q, &wr),
                Err(Error::Invalid),
                "{qp_type:?}"
            );
        }
    }
}

/// WRITE, ATOMIC WRITE and FLUSH in turn over a link losing 10 % each way, one initiator
/// depth credit: every WQE completes once, in order, successfully, and the words land.
#[test]
fn under_loss_with_one_credit_everything_completes_in_order() {
    for seed in 0..4u64 {
        let link = LinkConfig {
            loss: 0.10,
            ..Default::default()
        };
        let mut p = Pair::new(
            100 + seed,
            link,
            Opts {
                max_rd_atomic: 1,
                timeout: 10,
                ..opts()
            },
        );
        let mr = flushable_mr(&mut p);
        p.a.mem.store(0, &pattern(4096, 3));
        let mut expect = Vec::new();
        let mut id = 0u64;
        for round in 0..40u64 {
            let off = round * 8;
            let sge = [sge(&p.a, off * 8, 64)];
            p.post_a(SendWr {
                wr_id: id,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                sg_list: &sge,
                remote_addr: IOVA + 8192 + off * 8,
                rkey: mr.rkey,
                ..Default::default()
            });
            p.post_a(atomic_write_wr(id + 1, mr.rkey, off, round * 0x0101_0101));
            p.post_a(flush_wr(
                id + 2,
                mr.rkey,
                8192,
                4096,
                feth::PLACEMENT_GLOBAL,
                feth::SELECT_RANGE,
            ));
            expect.extend([
                (id, WcOpcode::RdmaWrite),
                (id + 1, WcOpcode::AtomicWrite),
                (id + 2, WcOpcode::Flush),
            ]);
            id += 3;
            if round % 10 == 9 {
                p.run(3_000);
            }
        }
        p.run(10_000);
        let got: Vec<(u64, WcOpcode)> = p
            .scq_a()
            .iter()
            .map(|w| {
                assert_eq!(w.status, WcStatus::Success, "seed {seed}: {w:?}");
                (w.wr_id, w.opcode)
            })
            .collect();
        assert_eq!(got, expect, "seed {seed}");
        for round in 0..40u64 {
            assert_eq!(
                p.b.mem.load(round as usize * 8, 8),
                (round * 0x0101_0101).to_ne_bytes()
            );
        }
        assert!(
            p.nic_a().counters().completer_retry_err > 0,
            "seed {seed}: no loss hit"
        );
    }
}
