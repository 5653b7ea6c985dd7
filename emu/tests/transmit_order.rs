//! The order in which one NIC's ready QPs transmit: a QP with more to send keeps the transmit
//! path for 64 KiB before the next one gets its turn (`QP_TURN_BYTES`), so a driver can put a
//! QP's consecutive packets into one GSO send; no QP is starved.
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
        let b = &buf[..t.len];
        order.push(u32::from_be_bytes([0, b[5], b[6], b[7]]));
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
