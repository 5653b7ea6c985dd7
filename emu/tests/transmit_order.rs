//! The order in which one NIC's ready QPs transmit: a QP with more to send keeps the transmit
//! path for 64 KiB before the next one gets its turn (`QP_TURN_BYTES`), so a driver can put a
//! QP's consecutive packets into one GSO send; no QP is starved. And what `poll_transmit`
//! says of each datagram (its record) is that datagram's.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;

/// 96 packets at MTU 1024: under the 128-PSN limit, so the window never stops a QP.
const LEN: u32 = 96 * 1024;

#[test]
fn a_ready_qp_sends_64_kib_before_the_next_qp_gets_its_turn() {
    let o = Opts {
        mtu: Mtu::Mtu1024,
        ..Default::default()
    };
    let mut p = Pair::new(3, LinkConfig::default(), o);
    // a second connected QP pair on the same two NICs
    let init = |s: &Side| QpInitAttr {
        cap: QpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..small_rc_init(s.scq, s.rcq)
    };
    let (ia, ib) = (p.a.idx, p.b.idx);
    let qa2 = p.net.nics[ia].create_qp(p.a.pd, &init(&p.a)).unwrap();
    let qb2 = p.net.nics[ib].create_qp(p.b.pd, &init(&p.b)).unwrap();
    let twin = |s: &Side, qpn: u32| Side {
        qpn,
        mem: s.mem.clone(),
        ..*s
    };
    let (a2, b2) = (twin(&p.a, qa2), twin(&p.b, qb2));
    connect(&mut p.net.nics[ia], &a2, &b2, &o, 0x300, 0x400);
    connect(&mut p.net.nics[ib], &b2, &a2, &o, 0x400, 0x300);
    let (rkey, lkey) = (p.b.mr.rkey, p.a.mr.lkey);
    for (qpn, off) in [(p.a.qpn, 0u64), (qa2, LEN as u64)] {
        post_write(&mut p.net.nics[ia], qpn, qpn as u64, off, LEN, lkey, rkey);
    }
    // Everything A transmits, in order: the destination QP of each packet.
    let (dest1, dest2) = (p.b.qpn, qb2);
    let mut buf = vec![0u8; 4096 + 256];
    let mut order = Vec::new();
    let now = p.net.now;
    while let Some(t) = p.net.nics[ia].poll_transmit(now, &mut buf) {
        let bth = roce_wire::bth::Packet::new_checked(&buf[..t.len]).unwrap();
        order.push(bth.dest_qp());
    }
    let runs: Vec<(u32, usize)> = order
        .chunk_by(|x, y| x == y)
        .map(|r| (r[0], r.len()))
        .collect();
    assert_eq!(order.len(), 192, "both messages, whole");
    assert_eq!(
        runs,
        vec![(dest1, 63), (dest2, 63), (dest1, 33), (dest2, 33)],
        "turns of 64 KiB: 63 packets of 1 KiB + BTH + ICRC (+ RETH on the first) = 65 536 bytes"
    );
}

/// `poll_transmit` builds the record it returns after the packet, from the sending QP's path;
/// a UD QP's path comes with each work request. So each record must name its own datagram's
/// destination (not the previous WR's), and the ICRC sealed into the bytes must be the one
/// for the headers the record describes.
#[test]
fn each_ud_transmit_record_names_its_own_destination_and_matches_its_icrc() {
    let mut p = ud_pair(7);
    let (pd, bip, bq) = (p.a.pd, p.b.ip, p.b.qpn);
    let other: std::net::IpAddr = "10.0.0.77".parse().unwrap();
    let ah_b = p.nic_a().create_ah(pd, AhAttr::to_ip(bip)).unwrap();
    let ah_x = p.nic_a().create_ah(pd, AhAttr::to_ip(other)).unwrap();
    for (i, ah, len) in [(1u64, ah_b, 64u32), (2, ah_x, 128), (3, ah_b, 32)] {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, len)],
            opcode: WrOpcode::Send,
            ah: Some(ah),
            remote_qpn: bq,
            remote_qkey: 0x1111_1111,
            ..Default::default()
        });
    }
    let mut buf = vec![0u8; 4096 + 256];
    let now = p.net.now;
    let mut sent = Vec::new();
    while let Some(t) = p.nic_a().poll_transmit(now, &mut buf) {
        assert!(
            roce_emu::net::verify(&t, &buf[..t.len]),
            "the ICRC was sealed for the headers of the record returned"
        );
        assert_eq!(t.src_ip, p.a.ip);
        sent.push((t.dst_ip, t.len));
    }
    // BTH 12 + DETH 8 + payload + ICRC 4
    assert_eq!(sent, vec![(bip, 88), (other, 152), (bip, 56)]);
}
