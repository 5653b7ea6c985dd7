//! Every NAK invalid request the responder sends has a cause: one diagnostic per (QP, cause)
//! that says what the peer did wrong, and a `diag_*` counter that counts every occurrence.
//! (Remote access, remote operational and RNR NAKs: tests/diagnostics.rs.) A PSN-sequence NAK
//! reports a loss, no mistake: counted in `send_seq_err`, never diagnosed.
mod common;
mod hostile_util;
use common::*;
use hostile_util::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::Opcode;

fn drain(nic: &mut Nic) -> Vec<(u32, Diagnostic)> {
    std::iter::from_fn(|| nic.poll_diagnostic()).collect()
}

fn counter(nic: &mut Nic, name: &str) -> u64 {
    nic.counters()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// Sum of every `diag_*` counter.
fn all_diags(nic: &mut Nic) -> u64 {
    nic.counters()
        .iter()
        .filter(|(n, _)| n.starts_with("diag_"))
        .map(|(_, v)| v)
        .sum()
}

/// Sends what `provoke` sends to B twice, B's QP revived in between: each time exactly the
/// expected NAK invalid request at `nak_psn`; one diagnostic with `cause`, its counter at 2,
/// no other diagnostic counter moved; its message says a NAK was sent and what to do.
fn case(seed: u64, o: Opts, cause: BadRequest, provoke: impl Fn(&mut Pair) -> u32) {
    let mut p = Pair::new(seed, LinkConfig::ideal(), o);
    let bq = p.b.qpn;
    let name = Diagnostic::InvalidRequest(cause).counter();
    for round in 1..=2 {
        let nak_psn = provoke(&mut p);
        let sent = out_b(&mut p);
        assert_eq!(
            sent.last(),
            nak(nak_psn, NAK_INV).last(),
            "{cause:?}: {sent:?}"
        );
        assert_eq!(p.qp_b().qp_state, QpState::Err, "{cause:?}");
        let d = drain(p.nic_b());
        if round == 1 {
            assert_eq!(d, vec![(bq, Diagnostic::InvalidRequest(cause))]);
            let m = d[0].1.message(bq);
            assert!(m.starts_with(&format!("QP {bq:#x}: ")), "{m}");
            assert!(
                m.contains("(NAK invalid request sent, QP moved to ERR)"),
                "{m}"
            );
        } else {
            assert_eq!(d, vec![], "{cause:?}: reported once per QP and cause");
        }
        assert_eq!(counter(p.nic_b(), name), round, "{name}");
        assert_eq!(all_diags(p.nic_b()), round, "{cause:?}: only {name} moved");
        assert!(drain(p.nic_a()).is_empty());
        revive_b(&mut p);
    }
}

fn send(p: &Pair, op: Opcode, psn: u32, len: usize) -> roce_wire::transport::Repr {
    let mut r = req(p, op, psn);
    r.set_payload_len(len);
    r
}

#[test]
fn middle_or_last_without_first() {
    case(1, Opts::default(), BadRequest::MissingFirst, |p| {
        p.recv_b(1, 0, 4096);
        let r = send(p, Opcode::RC_SEND_LAST, 0x100, 4);
        to_b(p, &r, b"oops");
        0x100
    });
}

#[test]
fn new_message_before_the_last_packet() {
    case(2, Opts::default(), BadRequest::MissingLast, |p| {
        p.recv_b(1, 0, 4096);
        let r = send(p, Opcode::RC_SEND_FIRST, 0x100, 1024);
        to_b(p, &r, &[1; 1024]);
        let r = send(p, Opcode::RC_SEND_ONLY, 0x101, 4);
        to_b(p, &r, b"next");
        0x101
    });
}

#[test]
fn payload_the_path_mtu_does_not_allow() {
    // a FIRST packet of half an MTU: the peer segments with 512 bytes, this QP with 1024
    let cause = BadRequest::PacketSize { mtu: 1024 };
    case(3, Opts::default(), cause, |p| {
        p.recv_b(1, 0, 4096);
        let r = send(p, Opcode::RC_SEND_FIRST, 0x100, 512);
        to_b(p, &r, &[1; 512]);
        0x100
    });
    let m = Diagnostic::InvalidRequest(cause).message(0x11);
    assert!(
        m.contains("path MTU of 1024 bytes") && m.contains("same path_mtu"),
        "{m}"
    );
}

#[test]
fn write_payload_other_than_its_reth_length() {
    case(4, Opts::default(), BadRequest::WriteLength, |p| {
        let mut r = write(p, 0x100, IOVA, p.b.mr.rkey, 4);
        r.reth.as_mut().unwrap().dma_len = 8; // says 8, carries 4
        to_b(p, &r, b"abcd");
        0x100
    });
}

#[test]
fn read_of_more_than_2_gib() {
    case(5, Opts::default(), BadRequest::MessageTooLong, |p| {
        let r = read(p, 0x100, IOVA, p.b.mr.rkey, 0x8000_0004);
        to_b(p, &r, &[]);
        0x100
    });
}

#[test]
fn send_longer_than_the_receive_wr() {
    case(6, Opts::default(), BadRequest::RecvTooSmall, |p| {
        p.recv_b(1, 0, 16);
        let r = send(p, Opcode::RC_SEND_ONLY, 0x100, 64);
        to_b(p, &r, &[7; 64]);
        0x100
    });
}

#[test]
fn misaligned_atomic() {
    case(7, Opts::default(), BadRequest::AtomicMisaligned, |p| {
        let r = atomic(p, Opcode::RC_FETCH_ADD, 0x100, IOVA + 4, p.b.mr.rkey);
        to_b(p, &r, &[]);
        0x100
    });
}

#[test]
fn read_to_a_qp_without_responder_resources() {
    let o = Opts {
        max_dest_rd_atomic: 0,
        ..Default::default()
    };
    case(8, o, BadRequest::NoDestRdAtomic, |p| {
        let r = read(p, 0x100, IOVA, p.b.mr.rkey, 16);
        to_b(p, &r, &[]);
        0x100
    });
    let m = Diagnostic::InvalidRequest(BadRequest::NoDestRdAtomic).message(0x11);
    assert!(m.contains("max_dest_rd_atomic"), "{m}");
}

#[test]
fn psn_sequence_naks_are_counted_once_per_gap_and_never_diagnosed() {
    let mut p = pair(9);
    let rkey = p.b.mr.rkey;
    for psn in [0x102, 0x103, 0x104] {
        let r = write(&p, psn, IOVA, rkey, 4);
        to_b(&mut p, &r, b"gap1");
    }
    assert_eq!(out_b(&mut p), nak(0x100, NAK_SEQ));
    for psn in [0x100, 0x101, 0x105] {
        let r = write(&p, psn, IOVA, rkey, 4);
        to_b(&mut p, &r, b"gap2");
    }
    let c = *p.nic_b().counters();
    assert_eq!((c.send_seq_err, c.out_of_seq_request), (2, 4));
    assert!(drain(p.nic_b()).is_empty());
    assert_eq!(all_diags(p.nic_b()), 0);
}
