//! Hand-crafted packets injected into one NIC: responder checks and exact responses.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{aeth, atomic_eth, bth, reth, Opcode, Psn};

fn inject(p: &mut Pair, r: Repr, payload: &[u8]) {
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let h = r.header_len();
    buf[h..h + payload.len()].copy_from_slice(payload);
    p.deliver_to_b(&mut buf, 0xC123);
}

/// B's responses, parsed.
fn sent_b(p: &mut Pair) -> Vec<Repr> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    let now = p.net.now;
    while let Some(t) = p.nic_b().poll_transmit(now, &mut buf) {
        let pk = Packet::new_checked(&buf[..t.len]).unwrap();
        out.push(Repr::parse(&pk).unwrap());
    }
    out
}

/// B's responses as [`packet_text`]: opcode, PSN, AETH syndrome and MSN.
fn drain_b(p: &mut Pair) -> Vec<String> {
    let v = sent_b(p);
    v.iter()
        .map(|r| {
            let (syn, msn) = (r.aeth.map(|a| a.syndrome), r.aeth.map(|a| a.msn));
            packet_text(r.bth.opcode, r.bth.psn.value(), false, syn, msn, None)
        })
        .collect()
}

fn req(p: &Pair, op: Opcode, psn: u32, ack: bool) -> Repr {
    let mut b = bth::Repr::new(op, p.b.qpn, Psn::new(psn));
    b.ack_req = ack;
    Repr::new(b)
}

fn write_only(p: &Pair, psn: u32, off: u64, data: &[u8]) -> Repr {
    let mut r = req(p, Opcode::RC_RDMA_WRITE_ONLY, psn, true);
    r.reth = Some(reth::Repr {
        va: IOVA + off,
        rkey: p.b.mr.rkey,
        dma_len: data.len() as u32,
    });
    r.set_payload_len(data.len());
    r
}

#[test]
fn psn_gap_is_naked_once_and_duplicates_are_reacked() {
    let mut p = Pair::new(1, LinkConfig::default(), Opts::default());
    // expected PSN at B is 0x100
    let r = write_only(&p, 0x100, 0, b"aaaa");
    inject(&mut p, r, b"aaaa");
    for psn in [0x102, 0x103, 0x104] {
        let r = write_only(&p, psn, 0, b"bbbb");
        inject(&mut p, r, b"bbbb");
    }
    assert_eq!(
        drain_b(&mut p),
        vec![
            "RC ACKNOWLEDGE psn=256 AETH(ACK credits=31 msn=1)",
            "RC ACKNOWLEDGE psn=257 AETH(NAK PsnSeqError msn=1)"
        ]
    );
    assert_eq!(p.nic_b().counters().out_of_seq_request, 3);
    // the missing packet arrives, then a new gap: NAKed again
    let r = write_only(&p, 0x101, 8, b"cccc");
    inject(&mut p, r, b"cccc");
    let r = write_only(&p, 0x105, 8, b"dddd");
    inject(&mut p, r, b"dddd");
    // a duplicate is re-ACKed with the last in-order PSN
    let r = write_only(&p, 0x100, 0, b"zzzz");
    inject(&mut p, r, b"zzzz");
    assert_eq!(
        drain_b(&mut p),
        vec![
            "RC ACKNOWLEDGE psn=257 AETH(ACK credits=31 msn=2)",
            "RC ACKNOWLEDGE psn=258 AETH(NAK PsnSeqError msn=2)",
            "RC ACKNOWLEDGE psn=257 AETH(ACK credits=31 msn=2)"
        ]
    );
    assert_eq!(p.b.mem.load(0, 4), b"aaaa");
    assert_eq!(p.nic_b().counters().duplicate_request, 1);
}

#[test]
fn ack_coalescing_only_acks_packets_with_the_a_bit() {
    let mut p = Pair::new(
        2,
        LinkConfig::default(),
        Opts {
            mtu: Mtu::Mtu256,
            ..Default::default()
        },
    );
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_FIRST, 0x100, false);
    r.reth = Some(reth::Repr {
        va: IOVA,
        rkey: p.b.mr.rkey,
        dma_len: 512,
    });
    r.set_payload_len(256);
    inject(&mut p, r, &[1; 256]);
    assert_eq!(drain_b(&mut p), Vec::<String>::new());
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_LAST, 0x101, true);
    r.set_payload_len(256);
    inject(&mut p, r, &[2; 256]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=257 AETH(ACK credits=31 msn=1)"]
    );
}

#[test]
fn middle_without_first_is_invalid_request() {
    let mut p = Pair::new(3, LinkConfig::default(), Opts::default());
    p.recv_b(1, 0, 4096);
    let mut r = req(&p, Opcode::RC_SEND_LAST, 0x100, true);
    r.set_payload_len(4);
    inject(&mut p, r, b"oops");
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=256 AETH(NAK InvalidRequest msn=0)"]
    );
    assert_eq!(p.qp_b().qp_state, QpState::Err);
    // the receive WQE is flushed
    let wc = p.rcq_b();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::WrFlushErr)]
    );
}

#[test]
fn misaligned_atomic_from_the_wire_is_invalid_request() {
    let mut p = Pair::new(4, LinkConfig::default(), Opts::default());
    let mut r = req(&p, Opcode::RC_FETCH_ADD, 0x100, true);
    r.atomic_eth = Some(atomic_eth::Repr {
        va: IOVA + 4,
        rkey: p.b.mr.rkey,
        swap_add: 1,
        compare: 0,
    });
    inject(&mut p, r, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=256 AETH(NAK InvalidRequest msn=0)"]
    );
    assert_eq!(p.b.mem.load(0, 16), vec![0; 16]);
}

#[test]
fn wrong_write_length_is_invalid_request() {
    let mut p = Pair::new(5, LinkConfig::default(), Opts::default());
    let mut r = write_only(&p, 0x100, 0, b"abcd");
    r.reth.as_mut().unwrap().dma_len = 8; // says 8, carries 4
    inject(&mut p, r, b"abcd");
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=256 AETH(NAK InvalidRequest msn=0)"]
    );
}

#[test]
fn zero_length_write_needs_no_valid_rkey() {
    let mut p = Pair::new(6, LinkConfig::default(), Opts::default());
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_ONLY, 0x100, true);
    r.reth = Some(reth::Repr {
        va: 0xdead_0000,
        rkey: 0x1234_5678,
        dma_len: 0,
    });
    inject(&mut p, r, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC ACKNOWLEDGE psn=256 AETH(ACK credits=31 msn=1)"]
    );
}

#[test]
fn garbage_never_panics_and_is_counted() {
    let mut p = Pair::new(7, LinkConfig::default(), Opts::default());
    let meta = RxMeta {
        src_ip: p.a.ip,
        dst_ip: p.b.ip,
        src_port: 1,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 1,
        flow_label: 0,
    };
    let mut rng = 0x1234_5678_u64;
    for len in 0..200usize {
        let mut v = vec![0u8; len];
        for b in v.iter_mut() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *b = rng as u8;
        }
        if len > 8 {
            v[0] = (rng % 0x18) as u8; // mostly RC opcodes
            v[5..8].copy_from_slice(&p.b.qpn.to_be_bytes()[1..]);
        }
        let now = p.net.now;
        p.nic_b().handle_datagram(now, &meta, &v);
    }
    let c = *p.nic_b().counters();
    assert_eq!(c.rcvd_pkts, 0);
    assert_eq!(c.malformed + c.icrc_errors + c.bad_opcode, 200);
    assert!(drain_b(&mut p).is_empty());
}

#[test]
fn duplicate_atomic_outside_resources_is_dropped() {
    let mut p = Pair::new(8, LinkConfig::default(), Opts::default());
    // a duplicate atomic (PSN below expected) with no matching resource: class D drop
    let mut r = req(&p, Opcode::RC_COMPARE_SWAP, 0x0FF, true);
    r.atomic_eth = Some(atomic_eth::Repr {
        va: IOVA,
        rkey: p.b.mr.rkey,
        swap_add: 1,
        compare: 0,
    });
    inject(&mut p, r, &[]);
    assert!(drain_b(&mut p).is_empty());
    assert_eq!(p.nic_b().counters().duplicate_request, 1);
    assert_eq!(p.b.mem.load(0, 8), vec![0; 8]);
    let _ = aeth::CREDITS_INVALID;
}

#[test]
fn hostile_addresses_do_not_overflow() {
    let mut p = Pair::new(9, LinkConfig::default(), Opts::default());
    // SGE at the top of the address space
    let q = p.a.qpn;
    let sg = [Sge {
        addr: u64::MAX - 2,
        length: 16,
        lkey: p.a.mr.lkey,
    }];
    let rkey = p.b.mr.rkey;
    p.nic_a()
        .post_send(
            q,
            &SendWr {
                wr_id: 1,
                sg_list: &sg,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                remote_addr: IOVA,
                rkey,
                ..Default::default()
            },
        )
        .unwrap();
    p.run(10);
    assert_eq!(p.scq_a()[0].status, WcStatus::LocProtErr);
    // a zero-length READ at the top of the address space, then its duplicate with a length
    let mut p = Pair::new(10, LinkConfig::default(), Opts::default());
    let mut r = req(&p, Opcode::RC_RDMA_READ_REQUEST, 0x100, true);
    r.reth = Some(reth::Repr {
        va: u64::MAX - 1,
        rkey: 1,
        dma_len: 0,
    });
    inject(&mut p, r, &[]);
    let mut r = req(&p, Opcode::RC_RDMA_READ_REQUEST, 0x100, true);
    r.reth = Some(reth::Repr {
        va: u64::MAX,
        rkey: 1,
        dma_len: 0x7000_0000,
    });
    inject(&mut p, r, &[]);
    assert_eq!(
        drain_b(&mut p),
        vec!["RC RDMA_READ_RESPONSE_ONLY psn=256 AETH(ACK credits=31 msn=1)"]
    );
}

#[test]
fn duplicate_read_must_end_within_the_original_psns() {
    // Found by the responder fuzz target: a duplicate READ that starts at the original's last
    // packet but asks for all its bytes passed the byte-range check (as in rxe) and was
    // answered with PSNs past the original's, ahead of the expected PSN. A proper re-read
    // from packet k (the original's bytes from k on) is replayed; the other is dropped.
    let mut p = Pair::new(3, LinkConfig::default(), Opts::default());
    let mtu = 1024u32;
    p.b.mem.store(0, &pattern(3 * mtu as usize, 7));
    let read = |p: &Pair, psn: u32, off: u64, len: u32| {
        let mut r = req(p, Opcode::RC_RDMA_READ_REQUEST, psn, true);
        r.reth = Some(reth::Repr {
            va: IOVA + off,
            rkey: p.b.mr.rkey,
            dma_len: len,
        });
        r
    };
    let r = read(&p, 0x100, 0, 3 * mtu);
    inject(&mut p, r, &[]);
    // opcode and PSN only
    let names = |v: Vec<Repr>| -> Vec<String> {
        v.iter()
            .map(|r| packet_text(r.bth.opcode, r.bth.psn.value(), false, None, None, None))
            .collect()
    };
    assert_eq!(
        names(sent_b(&mut p)),
        vec![
            "RC RDMA_READ_RESPONSE_FIRST psn=256",
            "RC RDMA_READ_RESPONSE_MIDDLE psn=257",
            "RC RDMA_READ_RESPONSE_LAST psn=258",
        ]
    );
    // a re-read from the second packet: replayed with the original's PSNs (and opcodes: it
    // continues the original response)
    let r = read(&p, 0x101, mtu as u64, 2 * mtu);
    inject(&mut p, r, &[]);
    assert_eq!(
        names(sent_b(&mut p)),
        vec![
            "RC RDMA_READ_RESPONSE_MIDDLE psn=257",
            "RC RDMA_READ_RESPONSE_LAST psn=258",
        ]
    );
    // from the last packet, all three packets' bytes: would need PSNs 0x102..0x104
    let dropped = p.nic_b().counters().req_dropped;
    let r = read(&p, 0x102, 0, 3 * mtu);
    inject(&mut p, r, &[]);
    assert_eq!(names(sent_b(&mut p)), Vec::<String>::new());
    assert_eq!(p.nic_b().counters().req_dropped, dropped + 1);
    assert_eq!(p.nic_b().counters().duplicate_request, 2);
}

#[test]
fn write_only_must_carry_its_whole_reth_length() {
    // Deviation 17: rxe accepts a WRITE_ONLY of exactly one MTU whatever its RETH length says
    // beyond it (and a LAST packet of one MTU that ends a longer WRITE early). A requester
    // always sends the RETH length of a WRITE_ONLY as its payload; anything else is refused.
    let mtu = 1024usize;
    let acked = |p: &mut Pair, psn: u32| {
        assert_eq!(
            sent_b(p)
                .last()
                .map(|r| (r.bth.psn.value(), r.aeth.map(|a| a.syndrome))),
            Some((psn, Some(aeth::Syndrome::ACK)))
        )
    };
    let naked = |p: &mut Pair, psn: u32| {
        assert_eq!(
            drain_b(p),
            vec![format!(
                "RC ACKNOWLEDGE psn={} AETH(NAK InvalidRequest msn=0)",
                Psn::new(psn)
            )]
        );
        assert_eq!(p.qp_b().qp_state, QpState::Err);
        assert_eq!(
            p.b.mem.load(0, 2 * mtu),
            vec![0; 2 * mtu],
            "nothing written"
        );
    };
    // WRITE_ONLY: one MTU of payload, a RETH length of two
    let mut p = Pair::new(11, LinkConfig::default(), Opts::default());
    let mut r = write_only(&p, 0x100, 0, &[5; 1024]);
    r.reth.as_mut().unwrap().dma_len = 2 * mtu as u32;
    inject(&mut p, r, &[5; 1024]);
    naked(&mut p, 0x100);
    // WRITE_ONLY_WITH_IMMEDIATE: the receive would complete with byte_len 2048
    let mut p = Pair::new(12, LinkConfig::default(), Opts::default());
    p.recv_b(1, 0, 16);
    let mut r = write_only(&p, 0x100, 0, &[5; 1024]);
    r.bth.opcode = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
    r.immdt = Some(roce_wire::immdt::Repr { imm: 7 });
    r.reth.as_mut().unwrap().dma_len = 2 * mtu as u32;
    inject(&mut p, r, &[5; 1024]);
    naked(&mut p, 0x100);
    let wc = p.rcq_b();
    assert_eq!(wc.len(), 1);
    assert_ne!(wc[0].status, WcStatus::Success);
    // also shorter than one MTU with a longer RETH length (refused before, as in rxe)
    let mut p = Pair::new(13, LinkConfig::default(), Opts::default());
    let mut r = write_only(&p, 0x100, 0, &[5; 512]);
    r.reth.as_mut().unwrap().dma_len = 2 * mtu as u32;
    inject(&mut p, r, &[5; 512]);
    naked(&mut p, 0x100);
    // a LAST packet of one MTU that ends a three-MTU WRITE after two
    let mut p = Pair::new(14, LinkConfig::default(), Opts::default());
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_FIRST, 0x100, false);
    r.reth = Some(reth::Repr {
        va: IOVA,
        rkey: p.b.mr.rkey,
        dma_len: 3 * mtu as u32,
    });
    r.set_payload_len(mtu);
    inject(&mut p, r, &[0; 1024]);
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_LAST, 0x101, true);
    r.set_payload_len(mtu);
    inject(&mut p, r, &[0; 1024]);
    naked(&mut p, 0x101);
    // what a requester sends is accepted: ONLY of one MTU, FIRST + LAST of two
    let mut p = Pair::new(15, LinkConfig::default(), Opts::default());
    let r = write_only(&p, 0x100, 0, &[5; 1024]);
    inject(&mut p, r, &[5; 1024]);
    acked(&mut p, 0x100);
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_FIRST, 0x101, false);
    r.reth = Some(reth::Repr {
        va: IOVA + 1024,
        rkey: p.b.mr.rkey,
        dma_len: 2 * mtu as u32 - 3,
    });
    r.set_payload_len(mtu);
    inject(&mut p, r, &[6; 1024]);
    let mut r = req(&p, Opcode::RC_RDMA_WRITE_LAST, 0x102, true);
    r.set_payload_len(mtu - 3);
    inject(&mut p, r, &[6; 1021]);
    acked(&mut p, 0x102);
    assert_eq!(p.b.mem.load(0, 1024), vec![5; 1024]);
    assert_eq!(p.b.mem.load(1024, 2045), vec![6; 2045]);
}
