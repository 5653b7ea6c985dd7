//! A hostile peer: hand-made, ICRC-valid packets injected into one NIC of a connected pair.
//! Each case asserts the NIC's exact answer (NAK syndrome, or silence and a drop counter) and
//! that registered memory is untouched. Requests go to B (RQ PSN 0x100); responses to A
//! (its requests start at PSN 0x100). MTU 1024.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, bth, reth, Opcode, Psn};
use std::net::IpAddr;
use std::sync::Arc;

const ACK: u8 = 0x1F;
const NAK_SEQ: u8 = 0x60;
const NAK_INV: u8 = 0x61;
const NAK_ACC: u8 = 0x62;

fn pair(seed: u64) -> Pair {
    Pair::new(seed, LinkConfig::ideal(), Opts::default())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Emits `r` with `payload`, seals it as sent `src → dst` and hands it to NIC `to`.
fn inject_raw(p: &mut Pair, to: usize, src: IpAddr, dst: IpAddr, r: &Repr, payload: &[u8]) {
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let h = r.header_len();
    buf[h..h + payload.len()].copy_from_slice(payload);
    let t = Transmit {
        src_ip: src,
        dst_ip: dst,
        src_port: 0xC123,
        dst_port: 4791,
        tos: 0,
        ttl: 64,
        flow_label: 0,
        ipv4_id: 0,
        len: buf.len(),
    };
    assert!(roce_emu::net::seal(&t, &mut buf));
    let meta = RxMeta {
        src_ip: src,
        dst_ip: dst,
        src_port: 0xC123,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    };
    let now = p.net.now;
    p.net.nics[to].handle_datagram(now, &meta, &buf);
}

/// A request to B from A's address.
fn to_b(p: &mut Pair, r: &Repr, payload: &[u8]) {
    let (a, b, i) = (p.a.ip, p.b.ip, p.b.idx);
    inject_raw(p, i, a, b, r, payload);
}

/// A response to A from B's address.
fn to_a(p: &mut Pair, r: &Repr, payload: &[u8]) {
    let (a, b, i) = (p.a.ip, p.b.ip, p.a.idx);
    inject_raw(p, i, b, a, r, payload);
}

/// `(opcode, psn, syndrome, payload length)` of everything NIC `i` wants to send now.
fn out(p: &mut Pair, i: usize) -> Vec<(Opcode, u32, Option<u8>, usize)> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 8192];
    let now = p.net.now;
    while let Some(t) = p.net.nics[i].poll_transmit(now, &mut buf) {
        let r = Repr::parse(&Packet::new_checked(&buf[..t.len]).unwrap()).unwrap();
        v.push((
            r.bth.opcode,
            r.bth.psn.value(),
            r.aeth.map(|a| a.syndrome.to_byte()),
            r.payload_len,
        ));
    }
    v
}

fn out_b(p: &mut Pair) -> Vec<(Opcode, u32, Option<u8>, usize)> {
    let i = p.b.idx;
    out(p, i)
}

fn nak(psn: u32, syn: u8) -> Vec<(Opcode, u32, Option<u8>, usize)> {
    vec![(Opcode::RC_ACKNOWLEDGE, psn, Some(syn), 0)]
}

fn req(p: &Pair, op: Opcode, psn: u32) -> Repr {
    let mut b = bth::Repr::new(op, p.b.qpn, Psn::new(psn));
    b.ack_req = true;
    Repr::new(b)
}

fn write(p: &Pair, psn: u32, va: u64, rkey: u32, len: usize) -> Repr {
    let mut r = req(p, Opcode::RC_RDMA_WRITE_ONLY, psn);
    r.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: len as u32,
    });
    r.set_payload_len(len);
    r
}

fn read(p: &Pair, psn: u32, va: u64, rkey: u32, len: u32) -> Repr {
    let mut r = req(p, Opcode::RC_RDMA_READ_REQUEST, psn);
    r.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: len,
    });
    r
}

fn atomic(p: &Pair, op: Opcode, psn: u32, va: u64, rkey: u32) -> Repr {
    let mut r = req(p, op, psn);
    r.atomic_eth = Some(atomic_eth::Repr {
        va,
        rkey,
        swap_add: 0x1111,
        compare: 0,
    });
    r
}

/// Puts B's QP back to RTS with RQ PSN 0x100 after a NAK moved it to ERR.
fn revive_b(p: &mut Pair) {
    let (o, q) = (p.opts, p.b.qpn);
    let reset = QpAttr {
        qp_state: QpState::Reset,
        ..Default::default()
    };
    p.nic_b().modify_qp(q, &reset, QpAttrMask::STATE).unwrap();
    let (bs, as_) = (side_copy(&p.b), side_copy(&p.a));
    let i = p.b.idx;
    connect(&mut p.net.nics[i], &bs, &as_, &o, o.b_psn, o.a_psn);
    Pair::poll(&mut p.net.nics[i], bs.rcq);
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

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
            (Opcode::RC_ACKNOWLEDGE, 0x100, Some(ACK), 0),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 0x101, Some(ACK), 0)
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
            (Opcode::RC_ACKNOWLEDGE, 0x100, Some(ACK), 0),
            (Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0x101, Some(ACK), 0)
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
        vec![(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0x100, Some(ACK), 4)]
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
    r2.bth.dest_qp = 0x7777;
    inject_raw(&mut p, bi, a_ip, b_ip, &r2, b"evil");
    assert_eq!(p.nic_b().counters().no_qp, 1);
    // a second RC QP on B connected to 10.0.0.3: A's address is a stranger to it
    let o = p.opts;
    let (pd, scq, rcq) = (p.b.pd, p.b.scq, p.b.rcq);
    let init = QpInitAttr {
        send_cq: scq,
        recv_cq: rcq,
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
    };
    let q2 = p.nic_b().create_qp(pd, &init).unwrap();
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
    r3.bth.dest_qp = q2;
    inject_raw(&mut p, bi, a_ip, b_ip, &r3, b"evil");
    let c = *p.nic_b().counters();
    assert_eq!(c.bad_src, 2, "{c:?}");
    assert_eq!(c.rcvd_pkts, 0);
    assert!(out_b(&mut p).is_empty());
    assert_eq!(p.b.mem.to_vec(), before);
    // the source QPN of an RC/UC packet is not on the wire (no DETH): the address pair and
    // the destination QPN are all a responder can check, as in rxe's check_addr
}

fn side_copy(s: &Side) -> Side {
    Side {
        idx: s.idx,
        ip: s.ip,
        pd: s.pd,
        scq: s.scq,
        rcq: s.rcq,
        qpn: s.qpn,
        mem: s.mem.clone(),
        mr: s.mr,
    }
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
    let o = out_b(&mut p);
    assert_eq!(o.len(), 1, "{o:?}");
    assert_eq!((o[0].0, o[0].2), (Opcode::RC_ACKNOWLEDGE, Some(ACK)));
    assert!(Psn::new(o[0].1).diff(Psn::new(0x100)) < 0, "{o:?}");
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

// ------------------------------------------------------------------------------ forged responses

/// A posts `wr` and transmits it (the packets go nowhere); returns what A sent.
fn a_sends(p: &mut Pair, wr: SendWr<'_>) -> Vec<(Opcode, u32, Option<u8>, usize)> {
    p.post_a(wr);
    let i = p.a.idx;
    out(p, i)
}

fn ack_to_a(p: &Pair, op: Opcode, psn: u32, syn: u8) -> Repr {
    let mut r = Repr::new(bth::Repr::new(op, p.a.qpn, Psn::new(psn)));
    r.aeth = Some(aeth::Repr {
        syndrome: aeth::Syndrome::from_byte(syn),
        msn: 1,
    });
    r
}

#[test]
fn forged_acks_and_naks_for_psns_never_sent_are_ignored() {
    let mut p = pair(109);
    let sg = [sge(&p.a, 0, 16)];
    let rkey = p.b.mr.rkey;
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    };
    let sent = a_sends(&mut p, wr);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1, 0x100);
    // ACK / NAKs for PSNs A never sent: nothing happens
    for (psn, syn) in [
        (0x101, ACK),
        (0x140, ACK),
        (0x7F_0000, ACK),
        (0x120, NAK_ACC),
        (0x101, NAK_INV),
        (0x110, NAK_SEQ),
        (0x105, 0x21),
    ] {
        let r = ack_to_a(&p, Opcode::RC_ACKNOWLEDGE, psn, syn);
        to_a(&mut p, &r, &[]);
        assert!(p.scq_a().is_empty(), "{psn:#x} {syn:#x} completed the WR");
        assert_eq!(p.qp_a().qp_state, QpState::Rts, "{psn:#x} {syn:#x}");
    }
    assert_eq!(p.nic_a().counters().resp_ignored, 7);
    assert_eq!(p.nic_a().counters().rcvd_seq_err, 0);
    // the genuine ACK completes it
    let r = ack_to_a(&p, Opcode::RC_ACKNOWLEDGE, 0x100, ACK);
    to_a(&mut p, &r, &[]);
    let wc = p.scq_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success)]
    );
}

#[test]
fn responses_when_nothing_is_outstanding_are_ignored() {
    let mut p = pair(110);
    let before = p.a.mem.to_vec();
    for op in [
        Opcode::RC_ACKNOWLEDGE,
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
    ] {
        let mut r = ack_to_a(&p, op, 0x100, ACK);
        if op == Opcode::RC_ATOMIC_ACKNOWLEDGE {
            r.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: 42 });
        }
        let payload = if op == Opcode::RC_RDMA_READ_RESPONSE_ONLY
            || op == Opcode::RC_RDMA_READ_RESPONSE_FIRST
        {
            vec![9u8; 1024]
        } else {
            vec![]
        };
        r.set_payload_len(payload.len());
        to_a(&mut p, &r, &payload);
    }
    assert_eq!(p.nic_a().counters().resp_ignored, 4);
    assert!(p.scq_a().is_empty());
    assert_eq!(p.a.mem.to_vec(), before);
    assert_eq!(p.qp_a().qp_state, QpState::Rts);
}

#[test]
fn read_responses_nobody_asked_for_are_ignored() {
    let mut p = pair(111);
    let before = p.a.mem.to_vec();
    // A has a WRITE outstanding (PSN 0x100); read responses at PSNs it never sent
    let sg = [sge(&p.a, 0, 16)];
    let rkey = p.b.mr.rkey;
    a_sends(
        &mut p,
        SendWr {
            wr_id: 1,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        },
    );
    for psn in [0x101, 0x180, 0x10_0000] {
        let mut r = ack_to_a(&p, Opcode::RC_RDMA_READ_RESPONSE_ONLY, psn, ACK);
        r.set_payload_len(64);
        to_a(&mut p, &r, &[0xEE; 64]);
    }
    assert_eq!(p.nic_a().counters().resp_ignored, 3);
    assert!(p.scq_a().is_empty());
    assert_eq!(p.qp_a().qp_state, QpState::Rts);
    assert_eq!(p.a.mem.to_vec(), before);
}

#[test]
fn read_response_longer_than_the_read_is_a_local_error() {
    let mut p = pair(112);
    p.a.mem.store(0, &[0x11; 64]);
    let sg = [sge(&p.a, 0, 16)];
    let rkey = p.b.mr.rkey;
    a_sends(
        &mut p,
        SendWr {
            wr_id: 1,
            sg_list: &sg,
            opcode: WrOpcode::RdmaRead,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        },
    );
    let mut r = ack_to_a(&p, Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0x100, ACK);
    r.set_payload_len(32);
    to_a(&mut p, &r, &[0xEE; 32]);
    assert_eq!(
        p.scq_a()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        vec![(1, WcStatus::LocProtErr)]
    );
    assert_eq!(
        p.a.mem.load(0, 64),
        vec![0x11; 64],
        "no byte of the oversized response landed"
    );
}

// ------------------------------------------------------------------------------ lengths

#[test]
fn oversized_payloads_and_bad_pad_counts_are_rejected() {
    let mut p = pair(113);
    let before = p.b.mem.to_vec();
    let rkey = p.b.mr.rkey;
    p.recv_b(1, 0, 8192);
    // SEND_ONLY and WRITE_ONLY above the 1024-byte path MTU: invalid request
    let mut r = req(&p, Opcode::RC_SEND_ONLY, 0x100);
    r.set_payload_len(1028);
    to_b(&mut p, &r, &[3; 1028]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_INV));
    let wc = p.rcq_b();
    assert_eq!(
        wc.iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::RemInvReqErr]
    );
    revive_b(&mut p);
    let r = write(&p, 0x100, IOVA, rkey, 2048);
    to_b(&mut p, &r, &[3; 2048]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_INV));
    revive_b(&mut p);
    // a 6-byte WRITE whose pad count says 0 (8 bytes of payload): length mismatch
    let mut r = write(&p, 0x100, IOVA, rkey, 6);
    r.payload_len = 8;
    r.bth.pad_cnt = 0;
    to_b(&mut p, &r, &[4; 8]);
    assert_eq!(out_b(&mut p), nak(0x100, NAK_INV));
    revive_b(&mut p);
    // a pad count larger than the payload, and a body that is not a multiple of 4: malformed
    let mut r = write(&p, 0x100, IOVA, rkey, 0);
    r.bth.pad_cnt = 3;
    to_b(&mut p, &r, &[]);
    let mut r = req(&p, Opcode::RC_SEND_ONLY, 0x100);
    r.set_payload_len(4);
    let mut buf = vec![0u8; r.buffer_len() + 1];
    r.emit(&mut Packet::new_unchecked(&mut buf[..r.buffer_len()]));
    let t = Transmit {
        src_ip: p.a.ip,
        dst_ip: p.b.ip,
        src_port: 1,
        dst_port: 4791,
        tos: 0,
        ttl: 64,
        flow_label: 0,
        ipv4_id: 0,
        len: buf.len(),
    };
    assert!(roce_emu::net::seal(&t, &mut buf));
    let meta = RxMeta {
        src_ip: p.a.ip,
        dst_ip: p.b.ip,
        src_port: 1,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    };
    let now = p.net.now;
    p.nic_b().handle_datagram(now, &meta, &buf);
    assert_eq!(p.nic_b().counters().malformed, 2);
    assert!(out_b(&mut p).is_empty());
    assert_eq!(p.b.mem.to_vec(), before);
}

// ------------------------------------------------------------------------------ floods

#[test]
fn duplicate_request_floods_keep_replay_state_bounded() {
    let mut p = pair(114);
    let rkey = p.b.mr.rkey;
    p.b.mem.store(0, &pattern(4096, 9));
    let mem0 = p.net.nics[p.b.idx].qp_memory(p.b.qpn).unwrap();
    // 20 READs of 2 KiB (2 PSNs each) and 20 atomics; B keeps max_dest_rd_atomic = 16 resources
    let mut psn = 0x100;
    for i in 0..20u64 {
        let r = read(&p, psn, IOVA + 64 * i, rkey, 2048);
        to_b(&mut p, &r, &[]);
        psn += 2;
        let r = atomic(&p, Opcode::RC_FETCH_ADD, psn, IOVA + 8192 + 8 * i, rkey);
        to_b(&mut p, &r, &[]);
        psn += 1;
        out_b(&mut p);
    }
    let after = p.b.mem.to_vec();
    // flood: every old READ and atomic 500 times without draining the output
    let mut s = 7u64;
    for _ in 0..20_000 {
        let i = xorshift(&mut s) % 20;
        let base = 0x100 + 3 * i as u32;
        let r = if xorshift(&mut s) % 2 == 0 {
            read(&p, base, IOVA + 64 * i, rkey, 2048)
        } else {
            atomic(
                &p,
                Opcode::RC_FETCH_ADD,
                base + 2,
                IOVA + 8192 + 8 * i,
                rkey,
            )
        };
        to_b(&mut p, &r, &[]);
    }
    let c = *p.nic_b().counters();
    assert_eq!(c.duplicate_request, 20_000);
    assert!(
        c.req_dropped > 0,
        "requests older than the 16 resources are dropped"
    );
    assert!(c.resp_queue_full > 0, "the response queue is bounded");
    assert_eq!(
        p.net.nics[p.b.idx].qp_memory(p.b.qpn).unwrap(),
        mem0,
        "replay state grew"
    );
    let o = out_b(&mut p);
    assert!(o.len() <= 64 * 2, "{} responses queued", o.len());
    assert_eq!(p.b.mem.to_vec(), after, "replayed atomics executed again");
    assert_eq!(p.qp_b().rq_psn, psn);
}

#[test]
fn floods_to_nonexistent_qpns_are_counted() {
    let mut p = pair(115);
    let before = p.b.mem.to_vec();
    let mut s = 99u64;
    let n = 20_000;
    let qp_mem = p.net.nics[p.b.idx].qp_memory(p.b.qpn).unwrap();
    for _ in 0..n {
        let mut r = write(&p, 0x100, IOVA, p.b.mr.rkey, 4);
        let mut q = (xorshift(&mut s) as u32) & 0xFF_FFFF;
        if q == p.b.qpn {
            q ^= 1;
        }
        r.bth.dest_qp = q;
        to_b(&mut p, &r, b"flod");
    }
    let c = *p.nic_b().counters();
    assert_eq!(c.no_qp, n);
    assert_eq!(c.rcvd_pkts, 0);
    assert!(out_b(&mut p).is_empty());
    assert_eq!(p.net.nics[p.b.idx].qp_memory(p.b.qpn).unwrap(), qp_mem);
    assert_eq!(p.b.mem.to_vec(), before);
    // (allocation counts under floods: tests/memory_bound.rs)
}
