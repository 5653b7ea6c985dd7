//! A hostile peer, requests: hand-made, ICRC-valid packets injected into B of a connected
//! pair (its RQ PSN is 0x100, MTU 1024). Each case asserts B's exact answer (NAK syndrome, or
//! silence and a drop counter) and that registered memory is untouched. Responses and floods:
//! hostile_responses.rs.
mod common;
mod hostile_util;
use common::*;
use hostile_util::*;
use roce_emu::*;
use roce_wire::transport::Repr;
use roce_wire::{Opcode, Psn};
use std::sync::Arc;

// ------------------------------------------------------------------------------ R_Keys

#[test]
fn guessed_rkeys_never_hit() {
    let mut p = pair(101);
    let before = p.b.mem.to_vec();
    let real = p.b.mr.rkey;
    let mut s = 0x1234_5678_9abc_def0u64;
    let tries = if cfg!(debug_assertions) { 2000 } else { 20000 };
    let mut guesses: Vec<u32> = (0..tries)
        .map(|_| xorshift(&mut s) as u32)
        .filter(|&k| k != real)
        .collect();
    // and every other value of the key's random byte, with its index and generation right
    guesses.extend(
        (0..=255u32)
            .map(|b| b << 24 | (real & 0xFF_FFFF))
            .filter(|&k| k != real),
    );
    for k in guesses {
        let r = write(&p, 0x100, IOVA + 64, k, 8);
        to_b(&mut p, &r, b"guessed!");
        assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC), "key {k:#x}");
        revive_b(&mut p);
    }
    assert_eq!(p.b.mem.to_vec(), before, "a guessed key wrote memory");
    // control: the real key works
    let r = write(&p, 0x100, IOVA + 64, real, 8);
    to_b(&mut p, &r, b"realkey!");
    assert_eq!(out_b(&mut p), nak(0x100, ACK));
    assert_eq!(p.b.mem.load(64, 8), b"realkey!");
}

#[test]
fn guessed_rkeys_on_uc_are_dropped_silently_and_the_qp_stays_up() {
    let o = Opts {
        qp_type: QpType::Uc,
        ..Default::default()
    };
    let mut p = Pair::new(116, roce_emu::sim::LinkConfig::ideal(), o);
    let before = p.b.mem.to_vec();
    let real = p.b.mr.rkey;
    let mut s = 0xfeed_u64;
    let mut guesses: Vec<u32> = (0..1000)
        .map(|_| xorshift(&mut s) as u32)
        .filter(|&k| k != real)
        .collect();
    // UC has no NAK: a wrong key costs the attacker nothing but the packet. With the MR's index
    // and generation known, only the 8 random bits remain (as in rxe, and mlx5's 8-bit key).
    let wrong_byte: Vec<u32> = (0..=255u32)
        .map(|b| b << 24 | (real & 0xFF_FFFF))
        .filter(|&k| k != real)
        .collect();
    guesses.extend(&wrong_byte);
    for (i, &k) in guesses.iter().enumerate() {
        let mut r = write(&p, 0x100 + i as u32, IOVA + 64, k, 8);
        r.bth.opcode = Opcode::UC_RDMA_WRITE_ONLY;
        r.bth.ack_req = false;
        to_b(&mut p, &r, b"guessed!");
    }
    assert!(out_b(&mut p).is_empty(), "UC never answers");
    assert_eq!(p.nic_b().counters().req_dropped, guesses.len() as u64);
    assert_eq!(p.qp_b().qp_state, QpState::Rts);
    assert_eq!(p.b.mem.to_vec(), before, "a guessed key wrote memory");
    assert_eq!(
        wrong_byte.len(),
        255,
        "the search space of a targeted guess is 256 keys"
    );
}

#[test]
fn stale_rkey_fails_even_after_its_slot_is_reused() {
    let mut p = pair(102);
    let pd = p.b.pd;
    let old_mem = VecMemory::new(4096);
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let old = p
        .nic_b()
        .reg_mr(pd, Arc::new(old_mem.clone()), 0x70_0000, all)
        .unwrap();
    p.nic_b().dereg_mr(old).unwrap();
    let new_mem = VecMemory::new(4096);
    let new = p
        .nic_b()
        .reg_mr(pd, Arc::new(new_mem.clone()), 0x70_0000, all)
        .unwrap();
    assert_eq!(new.rkey & 0xFFF, old.rkey & 0xFFF, "slot reused");
    assert_ne!(new.rkey, old.rkey, "generation differs");
    assert_eq!(
        p.nic_b().dereg_mr(old),
        Err(Error::NotFound),
        "stale key cannot deregister the new MR"
    );
    // write, read and atomic with the stale key: NAK remote access each time
    let r = write(&p, 0x100, 0x70_0000, old.rkey, 4);
    to_b(&mut p, &r, b"old!");
    assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC));
    revive_b(&mut p);
    let r = read(&p, 0x100, 0x70_0000, old.rkey, 16);
    to_b(&mut p, &r, &[]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC));
    revive_b(&mut p);
    let r = atomic(&p, Opcode::RC_FETCH_ADD, 0x100, 0x70_0000, old.rkey);
    to_b(&mut p, &r, &[]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC));
    assert_eq!(new_mem.to_vec(), vec![0; 4096]);
    assert_eq!(old_mem.to_vec(), vec![0; 4096]);
}

// ------------------------------------------------------------------------------ bounds

#[test]
fn accesses_past_the_end_or_across_the_start_are_naked() {
    let mut p = pair(103);
    let before = p.b.mem.to_vec();
    let rkey = p.b.mr.rkey;
    let end = IOVA + MEM as u64;
    let cases: Vec<(&str, Repr, Vec<u8>)> = vec![
        (
            "write past end",
            write(&p, 0x100, end - 4, rkey, 8),
            vec![1; 8],
        ),
        ("write at end", write(&p, 0x100, end, rkey, 4), vec![1; 4]),
        (
            "write across start",
            write(&p, 0x100, IOVA - 4, rkey, 8),
            vec![1; 8],
        ),
        (
            "write wrapping u64",
            write(&p, 0x100, u64::MAX - 3, rkey, 8),
            vec![1; 8],
        ),
        ("read past end", read(&p, 0x100, end - 4, rkey, 8), vec![]),
        (
            "read across start",
            read(&p, 0x100, IOVA - 1, rkey, 2),
            vec![],
        ),
        (
            "read wrapping u64",
            read(&p, 0x100, u64::MAX - 1, rkey, 0x10),
            vec![],
        ),
        (
            "huge read",
            read(&p, 0x100, IOVA, rkey, 0x8000_0000),
            vec![],
        ),
        (
            "atomic past end",
            atomic(&p, Opcode::RC_FETCH_ADD, 0x100, end - 4, rkey),
            vec![],
        ),
        (
            "atomic at end",
            atomic(&p, Opcode::RC_COMPARE_SWAP, 0x100, end, rkey),
            vec![],
        ),
        (
            "atomic before start",
            atomic(&p, Opcode::RC_COMPARE_SWAP, 0x100, IOVA - 8, rkey),
            vec![],
        ),
    ];
    for (name, r, payload) in cases {
        to_b(&mut p, &r, &payload);
        assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC), "{name}");
        assert_eq!(p.qp_b().qp_state, QpState::Err, "{name}");
        revive_b(&mut p);
    }
    assert_eq!(p.b.mem.to_vec(), before);
    // the last byte and the last 8-byte word are reachable (control)
    let r = write(&p, 0x100, end - 1, rkey, 1);
    to_b(&mut p, &r, b"z");
    let r = atomic(&p, Opcode::RC_FETCH_ADD, 0x101, end - 16, rkey);
    to_b(&mut p, &r, &[]);
    assert_eq!(
        out_b(&mut p),
        vec![
            pkt(Opcode::RC_ACKNOWLEDGE, 0x100, Some(ACK), 0),
            pkt(Opcode::RC_ATOMIC_ACKNOWLEDGE, 0x101, Some(ACK), 0)
        ]
    );
    assert_eq!(p.b.mem.load(MEM - 1, 1), b"z");
}

#[test]
fn zero_length_accesses_touch_nothing() {
    let mut p = pair(104);
    let before = p.b.mem.to_vec();
    // C9-88: zero-length WRITE / READ need no valid key or address; nothing is touched
    let r = write(&p, 0x100, 0xdead_beef_0000, 0x0bad_cafe, 0);
    to_b(&mut p, &r, &[]);
    let r = read(&p, 0x101, u64::MAX, 0x0bad_cafe, 0);
    to_b(&mut p, &r, &[]);
    assert_eq!(
        out_b(&mut p),
        vec![
            pkt(Opcode::RC_ACKNOWLEDGE, 0x100, Some(ACK), 0),
            pkt(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0x101, Some(ACK), 0)
        ]
    );
    // a zero-length WRITE that carries a payload anyway: invalid request
    let r = {
        let mut r = write(&p, 0x102, IOVA, p.b.mr.rkey, 4);
        r.reth.as_mut().unwrap().dma_len = 0;
        r
    };
    to_b(&mut p, &r, b"sneak");
    assert_eq!(out_b(&mut p), nak(0x102, NAK_INV));
    assert_eq!(p.b.mem.to_vec(), before);
}

#[test]
fn writes_and_atomics_to_a_read_only_region_are_naked() {
    let mut p = pair(105);
    let pd = p.b.pd;
    let ro = VecMemory::from_vec(vec![0xAA; 4096]);
    let mr = p
        .nic_b()
        .reg_mr(
            pd,
            Arc::new(ro.clone()),
            0x60_0000,
            AccessFlags::REMOTE_READ,
        )
        .unwrap();
    let r = write(&p, 0x100, 0x60_0000, mr.rkey, 16);
    to_b(&mut p, &r, &[0x55; 16]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC));
    revive_b(&mut p);
    for op in [Opcode::RC_FETCH_ADD, Opcode::RC_COMPARE_SWAP] {
        let r = atomic(&p, op, 0x100, 0x60_0000, mr.rkey);
        to_b(&mut p, &r, &[]);
        assert_eq!(out_b(&mut p), nak(0x100, NAK_ACC), "{op:?}");
        revive_b(&mut p);
    }
    assert_eq!(ro.to_vec(), vec![0xAA; 4096]);
    // reading it is fine (control)
    let r = read(&p, 0x100, 0x60_0000, mr.rkey, 4);
    to_b(&mut p, &r, &[]);
    assert_eq!(
        out_b(&mut p),
        vec![pkt(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0x100, Some(ACK), 4)]
    );
}

#[test]
fn unaligned_atomics_are_invalid_requests() {
    let mut p = pair(106);
    let rkey = p.b.mr.rkey;
    p.b.mem.store(0, &[7; 16]);
    for off in 1..8u64 {
        for op in [Opcode::RC_FETCH_ADD, Opcode::RC_COMPARE_SWAP] {
            let r = atomic(&p, op, 0x100, IOVA + off, rkey);
            to_b(&mut p, &r, &[]);
            assert_eq!(out_b(&mut p), nak(0x100, NAK_INV), "{op:?} at +{off}");
            revive_b(&mut p);
        }
    }
    assert_eq!(p.b.mem.load(0, 16), vec![7; 16]);
}

// ------------------------------------------------------------------------------ addresses

#[test]
fn packets_from_strangers_are_dropped_and_counted() {
    let mut p = pair(107);
    let before = p.b.mem.to_vec();
    let (a_ip, b_ip, bi) = (p.a.ip, p.b.ip, p.b.idx);
    let r = write(&p, 0x100, IOVA, p.b.mr.rkey, 4);
    // wrong source address
    inject_raw(&mut p, bi, ip("10.0.0.9"), b_ip, &r, b"evil");
    assert_eq!(p.nic_b().counters().bad_src, 1);
    // right source, but sent to an address that is not B's; an IPv6 destination B lacks
    inject_raw(&mut p, bi, a_ip, ip("10.0.0.77"), &r, b"evil");
    inject_raw(&mut p, bi, ip("::1"), ip("::ffff:10.0.0.2"), &r, b"evil");
    assert_eq!(p.nic_b().counters().bad_dst, 2);
    // a QPN B does not have
    let mut r2 = r;
    r2.bth.dest_qp = roce_wire::Qpn::new(0x7777);
    inject_raw(&mut p, bi, a_ip, b_ip, &r2, b"evil");
    assert_eq!(p.nic_b().counters().no_qp, 1);
    // a second RC QP on B connected to 10.0.0.3: A's address is a stranger to it
    let o = p.opts;
    let (pd, scq, rcq) = (p.b.pd, p.b.scq, p.b.rcq);
    let q2 = p.nic_b().create_qp(pd, &small_rc_init(scq, rcq)).unwrap();
    let me = Side {
        qpn: q2,
        mem: p.b.mem.clone(),
        ..side_copy(&p.b)
    };
    let other = Side {
        ip: ip("10.0.0.3"),
        qpn: 0x55,
        ..side_copy(&p.a)
    };
    connect(&mut p.net.nics[bi], &me, &other, &o, 0x500, 0x100);
    let mut r3 = r;
    r3.bth.dest_qp = roce_wire::Qpn::new(q2);
    inject_raw(&mut p, bi, a_ip, b_ip, &r3, b"evil");
    let c = *p.nic_b().counters();
    assert_eq!(c.bad_src, 2, "{c:?}");
    assert_eq!(c.rcvd_pkts, 0);
    assert!(out_b(&mut p).is_empty());
    assert_eq!(p.b.mem.to_vec(), before);
    // the source QPN of an RC/UC packet is not on the wire (no DETH): the address pair and
    // the destination QPN are all a responder can check, as in rxe's check_addr
}

// ------------------------------------------------------------------------------ PSNs

#[test]
fn psns_outside_the_window_execute_nothing() {
    let mut p = pair(108);
    let before = p.b.mem.to_vec();
    let rkey = p.b.mr.rkey;
    // far ahead: one PSN-sequence NAK at the expected PSN, then silence
    for d in [1u32, 0x100, 0x1000, 0x7F_FFFF] {
        let r = write(&p, 0x100 + d, IOVA, rkey, 4);
        to_b(&mut p, &r, b"ahed");
    }
    assert_eq!(out_b(&mut p), nak(0x100, NAK_SEQ));
    assert_eq!(p.nic_b().counters().out_of_seq_request, 4);
    // far behind (duplicates): re-ACKed with the last acknowledged PSN, not executed
    for d in [1u32, 0x1000, 0x7F_FFFF] {
        let r = write(&p, 0x100u32.wrapping_sub(d) & 0xFF_FFFF, IOVA, rkey, 4);
        to_b(&mut p, &r, b"back");
    }
    // one coalesced re-ACK of "the PSN before the last one ACKed"; nothing was ACKed yet, so
    // (as in rxe, whose ack_psn starts at 0) it names a stale PSN the requester ignores
    let o = sent_b(&mut p);
    let lines: Vec<String> = o.iter().map(line).collect();
    assert_eq!(o.len(), 1, "{lines:?}");
    let psn = o[0].bth.psn;
    assert_eq!(
        lines,
        [pkt(Opcode::RC_ACKNOWLEDGE, psn.value(), Some(ACK), 0)]
    );
    assert!(psn.diff(Psn::new(0x100)) < 0, "{lines:?}");
    assert_eq!(p.nic_b().counters().duplicate_request, 3);
    // duplicate READs / atomics outside every replay resource: dropped silently
    let r = read(&p, 0x80, IOVA, rkey, 16);
    to_b(&mut p, &r, &[]);
    let r = atomic(&p, Opcode::RC_FETCH_ADD, 0x81, IOVA, rkey);
    to_b(&mut p, &r, &[]);
    assert!(out_b(&mut p).is_empty());
    assert_eq!(p.nic_b().counters().req_dropped, 2);
    assert_eq!(p.b.mem.to_vec(), before);
    assert_eq!(p.qp_b().qp_state, QpState::Rts);
    assert_eq!(p.qp_b().rq_psn, 0x100);
}
