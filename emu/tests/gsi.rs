//! QP1 (GSI): MADs sent by one NIC reach the other's `poll_mad` with rxe's framing, and the
//! checks rxe makes on packets to QP1 (rdma-cm-notes §1) drop the rest, counted.
use roce_emu::gsi::GsiPath;
use roce_emu::{Instant, Nic, NicConfig};
use roce_wire::transport::Packet;
use std::net::{IpAddr, Ipv4Addr};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

fn nic(ip: IpAddr, gsi: bool) -> Nic {
    let mut c = NicConfig::new(ip);
    c.gsi = gsi;
    Nic::new(c)
}

fn path() -> GsiPath {
    GsiPath {
        src_ip: A,
        dst_ip: B,
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    }
}

fn mad(tag: u8) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1; // base version
    m[1] = 7; // CM
    m[2] = 2;
    m[3] = 3;
    m[255] = tag;
    m
}

#[test]
fn a_mad_goes_out_as_rxe_sends_it_and_arrives_whole() {
    let mut a = nic(A, true);
    let mut b = nic(B, true);
    assert!(!a.may_transmit());
    assert!(a.send_mad(path(), 1, &mad(7)));
    assert!(a.send_mad(path(), 1, &mad(8)));
    assert!(a.may_transmit());
    let mut buf = vec![0u8; 4096 + 64];
    for (i, tag) in [7u8, 8].into_iter().enumerate() {
        let t = a.poll_transmit(Instant::ZERO, &mut buf).expect("a MAD");
        assert_eq!(t.len, 12 + 8 + 256 + 4, "UDP payload 280 (UDP length 288)");
        assert_eq!(t.src_port, 0xD872, "rxe's source port for QPN 1");
        assert_eq!(t.dst_port, 4791);
        assert_eq!((t.src_ip, t.dst_ip, t.ttl), (A, B, 64));
        let p = Packet::new_checked(&buf[..t.len]).unwrap();
        let bth = p.bth();
        assert_eq!(bth.opcode().0, 0x64);
        assert!(bth.ack_req(), "rxe sets AckReq on GSI sends");
        assert_eq!(bth.pkey(), 0xFFFF);
        assert_eq!(bth.dest_qp(), 1);
        assert_eq!(bth.psn().value(), i as u32, "one PSN counter from 0");
        let d = p.deth().unwrap();
        assert_eq!((d.qkey(), d.src_qp()), (0x8001_0000, 1));
        assert!(roce_emu::net::verify(&t, &buf[..t.len]), "ICRC");
        b.handle_datagram(Instant::from_millis(1), &t.rx_meta(), &buf[..t.len]);
        let m = b.poll_mad().expect("delivered");
        assert_eq!(m.bytes, mad(tag));
        assert_eq!((m.src_ip, m.dst_ip, m.src_qp, m.hop_limit), (A, B, 1, 64));
    }
    assert!(a.poll_transmit(Instant::ZERO, &mut buf).is_none());
    assert!(!a.may_transmit());
    assert_eq!(a.counters().gsi_sent, 2);
    assert_eq!(b.counters().gsi_rcvd, 2);
    assert!(b.poll_mad().is_none());
}

/// A datagram `a` sends to QP1 of `b`, with `edit` applied to its transport bytes before the
/// ICRC is sealed again.
fn deliver(b: &mut Nic, edit: impl Fn(&mut Vec<u8>)) {
    let mut a = nic(A, true);
    a.send_mad(path(), 1, &mad(1));
    let mut buf = vec![0u8; 4160];
    let t = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    let mut d = buf[..t.len].to_vec();
    edit(&mut d);
    let mut t2 = t;
    t2.len = d.len();
    assert!(roce_emu::net::seal(&t2, &mut d));
    b.handle_datagram(Instant::ZERO, &t2.rx_meta(), &d);
}

#[test]
fn qp1_refuses_what_rxe_refuses_and_counts_it() {
    let mut b = nic(B, true);
    // wrong Q_Key
    deliver(&mut b, |d| d[12] = 0x7F);
    assert_eq!(b.counters().qkey_violation, 1);
    // an RC opcode to QP1
    deliver(&mut b, |d| d[0] = 0x04);
    assert_eq!(b.counters().bad_opcode, 1);
    // a MAD cut to 128 bytes
    deliver(&mut b, |d| {
        d.truncate(12 + 8 + 128);
        d.extend_from_slice(&[0; 4]);
    });
    assert_eq!(b.counters().gsi_truncated, 1);
    assert!(b.poll_mad().is_none());
    // without GSI, QP1 is no QP
    let mut c = nic(B, false);
    deliver(&mut c, |_| {});
    assert_eq!(c.counters().no_qp, 1);
    assert!(c.poll_mad().is_none());
    // and the right one is kept
    deliver(&mut b, |_| {});
    assert!(b.poll_mad().is_some());
}
