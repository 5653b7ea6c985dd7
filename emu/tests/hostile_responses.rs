//! A hostile peer, responses, lengths and floods: forged ACKs / NAKs / read responses into A
//! (its requests start at PSN 0x100), oversized payloads and bad pad counts, duplicate-request
//! and nonexistent-QPN floods into B. Each case asserts the exact answer or drop counter and
//! untouched memory.
mod common;
mod hostile_util;
use common::*;
use hostile_util::*;
use roce_emu::*;
use roce_wire::aeth::Syndrome;
use roce_wire::transport::Packet;
use roce_wire::{atomic_ack_eth, Opcode, Psn};

// ------------------------------------------------------------------------------ forged responses

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
    assert_eq!(sent[0].bth.psn, Psn::new(0x100), "{}", line(&sent[0]));
    // ACK / NAKs for PSNs A never sent: nothing happens
    for (psn, syn) in [
        (0x101, ACK),
        (0x140, ACK),
        (0x7F_0000, ACK),
        (0x120, NAK_ACC),
        (0x101, NAK_INV),
        (0x110, NAK_SEQ),
        (0x105, Syndrome::RnrNak { timer: 1 }.to_byte()),
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
    p.deliver_to_b(&mut buf, 1);
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
        let r = if xorshift(&mut s) & 1 == 0 {
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
        r.bth.dest_qp = roce_wire::Qpn::new(q);
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
