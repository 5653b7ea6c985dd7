use super::*;
use crate::{bth, transport, Opcode, Psn};

fn send_only(payload: &[u8]) -> Vec<u8> {
    let mut r = transport::Repr::new(bth::Repr::new(Opcode::RC_SEND_ONLY, 0x11, Psn::new(7)));
    r.bth.ack_req = true;
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    let mut p = transport::Packet::new_unchecked(&mut buf[..]);
    r.emit(&mut p);
    p.payload_mut().copy_from_slice(payload);
    buf
}

fn v4() -> Vec<u8> {
    let spec = Ipv4FrameSpec {
        ip_id: 0x1234,
        tos: 0x6a,
        ttl: 255,
        src_port: 0xd0b3,
        ..Default::default()
    };
    build_ipv4_frame(&spec, &send_only(b"hello")).unwrap()
}

#[test]
fn ipv4_build_then_parse() {
    let f = v4();
    assert_eq!(f.len(), 14 + 20 + 8 + 12 + 8 + 4);
    let r = parse(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(r.version, RoceVersion::V2);
    assert_eq!(r.l2.src_mac, Some([2, 0, 0, 0, 0, 1]));
    assert_eq!(r.l2.dst_mac, Some([2, 0, 0, 0, 0, 2]));
    assert_eq!(r.l2.ethertype, 0x0800);
    assert_eq!(r.l3.ip_id, Some(0x1234));
    assert_eq!((r.l3.tos, r.l3.ttl, r.l3.dont_fragment), (0x6a, 255, true));
    assert_eq!(r.l3.src, "10.0.0.1".parse::<IpAddr>().unwrap());
    let u = r.udp.unwrap();
    assert_eq!((u.src_port, u.dst_port, u.checksum), (0xd0b3, 4791, 0));
    assert_eq!(r.transport, &f[42..]);
    assert_eq!((r.transport_offset, r.l3_offset), (42, 14));
    assert!(!r.truncated);
    assert_eq!(r.verdict(), Verdict::IcrcValid);
    assert_eq!(r.opcode(), Some(Opcode::RC_SEND_ONLY));
    // The IPv4 header checksum is right: the one's complement sum over the header is 0xFFFF.
    let sum: u32 = f[14..34]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF);
}

#[test]
fn padding_and_fcs_are_ignored() {
    // The smallest RoCEv2 frame (58 bytes) gets padded to 60 on the wire.
    let mut f = build_ipv4_frame(&Ipv4FrameSpec::default(), &send_only(b"")).unwrap();
    assert_eq!(f.len(), 58);
    f.resize(60, 0);
    f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let r = parse(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(r.transport.len(), 12 + 4);
    assert_eq!(r.verdict(), Verdict::IcrcValid);
}

#[test]
fn snaplen_cut_is_truncated_not_bad_icrc() {
    let f = v4();
    for cut in 42..f.len() {
        let r = parse(LinkType::Ethernet, &f[..cut]).unwrap().unwrap();
        assert!(r.truncated, "cut at {cut}");
        assert_eq!(r.transport_len, f.len() - 42);
        assert_eq!(verdict(LinkType::Ethernet, &f[..cut]), Verdict::Truncated);
    }
    // Cut inside the UDP header: RoCE cannot be identified.
    assert_eq!(
        verdict(LinkType::Ethernet, &f[..40]),
        Verdict::Malformed(Error::Truncated)
    );
}

#[test]
fn bad_icrc_is_reported_with_both_values() {
    let mut f = v4();
    let n = f.len();
    f[n - 1] ^= 0xFF;
    match verdict(LinkType::Ethernet, &f) {
        Verdict::IcrcInvalid { expected, found } => assert_ne!(expected, found),
        v => panic!("{v:?}"),
    }
    // A covered header field (UDP source port) also breaks it; TTL does not.
    let mut f = v4();
    f[34] ^= 1;
    assert!(matches!(
        verdict(LinkType::Ethernet, &f),
        Verdict::IcrcInvalid { .. }
    ));
    let mut f = v4();
    f[22] = 3;
    assert_eq!(verdict(LinkType::Ethernet, &f), Verdict::IcrcValid);
}

#[test]
fn vlan_and_qinq() {
    let tag = VlanTag {
        tpid: 0x8100,
        pcp: 5,
        dei: true,
        vid: 100,
    };
    let spec = Ipv4FrameSpec {
        vlan: Some(tag),
        ..Default::default()
    };
    let f = build_ipv4_frame(&spec, &send_only(b"abcd")).unwrap();
    let r = parse(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(r.l2.vlans, [Some(tag), None]);
    assert_eq!(r.transport_offset, 46);
    assert_eq!(r.verdict(), Verdict::IcrcValid);
    // QinQ: an 802.1ad outer tag in front.
    let mut q = f[..12].to_vec();
    q.extend_from_slice(&[0x88, 0xa8, 0x00, 0x07]);
    q.extend_from_slice(&f[12..]);
    let r = parse(LinkType::Ethernet, &q).unwrap().unwrap();
    assert_eq!(r.l2.vlans[0].unwrap().vid, 7);
    assert_eq!(r.l2.vlans[1], Some(tag));
    assert_eq!(r.verdict(), Verdict::IcrcValid);
    // A third tag is refused.
    let mut t = q[..12].to_vec();
    t.extend_from_slice(&[0x91, 0x00, 0x00, 0x01]);
    t.extend_from_slice(&q[12..]);
    assert_eq!(parse(LinkType::Ethernet, &t).unwrap_err(), Error::Malformed);
}

#[test]
fn ipv6_build_then_parse() {
    let spec = Ipv6FrameSpec {
        traffic_class: 0x1a,
        flow_label: 0x12345,
        hop_limit: 3,
        ..Default::default()
    };
    let f = build_ipv6_frame(&spec, &send_only(b"hello")).unwrap();
    let r = parse(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(r.transport_offset, 62);
    assert_eq!(
        (r.l3.tos, r.l3.ttl, r.l3.flow_label),
        (0x1a, 3, Some(0x12345))
    );
    assert_eq!(r.l3.ip_id, None);
    assert_eq!(r.verdict(), Verdict::IcrcValid);
}

/// Linux cooked v1 and v2 and the raw-IP link types carry the same IP datagram.
#[test]
fn other_link_types() {
    let f = v4();
    let ip = &f[14..];
    let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(ip);
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
    ];
    sll2.extend_from_slice(ip);
    for (lt, data, mac) in [
        (LinkType::LinuxSll, &sll[..], true),
        (LinkType::LinuxSll2, &sll2[..], true),
        (LinkType::RawIp, ip, false),
        (LinkType::Ipv4, ip, false),
    ] {
        let r = parse(lt, data).unwrap().unwrap();
        assert_eq!(r.verdict(), Verdict::IcrcValid, "{lt:?}");
        assert_eq!(r.l2.src_mac.is_some(), mac, "{lt:?}");
        assert_eq!(r.transport, &f[42..]);
        assert_eq!(LinkType::from_dlt(lt.dlt()), lt);
    }
    let f6 = build_ipv6_frame(&Ipv6FrameSpec::default(), &send_only(b"")).unwrap();
    for lt in [LinkType::RawIp, LinkType::Ipv6] {
        assert_eq!(verdict(lt, &f6[14..]), Verdict::IcrcValid);
    }
    assert_eq!(verdict(LinkType::Other(147), &f), Verdict::NotRoce);
}

#[test]
fn roce_v1_grh() {
    let t = send_only(b"xy");
    let mut f = vec![0u8; 14];
    f[12] = 0x89;
    f[13] = 0x15;
    let mut grh = [0u8; 40];
    grh[0] = 0x60;
    grh[1] = 0x20;
    grh[4..6].copy_from_slice(&(t.len() as u16).to_be_bytes());
    grh[6] = 0x1b;
    grh[7] = 64;
    grh[8..24].copy_from_slice(
        &"::ffff:192.168.242.57"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    f.extend_from_slice(&grh);
    f.extend_from_slice(&t);
    let n = f.len();
    icrc::fill(Network::Grh { grh: &grh }, &mut f[54..n]).unwrap();
    let r = parse(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(r.version, RoceVersion::V1);
    assert_eq!(r.udp, None);
    assert_eq!(r.transport_offset, 54);
    assert_eq!((r.l3.tos, r.l3.ttl), (0x02, 64));
    let IpAddr::V6(src) = r.l3.src else { panic!() };
    assert_eq!(ipv4_mapped(&src), Some(Ipv4Addr::new(192, 168, 242, 57)));
    assert_eq!(r.verdict(), Verdict::IcrcValid);
    f[14 + 6] = 0x11; // next header is not a BTH
    assert_eq!(parse(LinkType::Ethernet, &f).unwrap_err(), Error::Malformed);
}

#[test]
fn not_roce_and_bad_lengths() {
    let f = v4();
    let mut other_port = f.clone();
    other_port[37] = 0x35; // dst port 4661
    assert_eq!(verdict(LinkType::Ethernet, &other_port), Verdict::NotRoce);
    let mut tcp = f.clone();
    tcp[23] = 6;
    assert_eq!(verdict(LinkType::Ethernet, &tcp), Verdict::NotRoce);
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(verdict(LinkType::Ethernet, &arp), Verdict::NotRoce);
    // UDP length beyond the IP datagram.
    let mut long = f.clone();
    long[38..40].copy_from_slice(&0x0100u16.to_be_bytes());
    assert_eq!(
        verdict(LinkType::Ethernet, &long),
        Verdict::Malformed(Error::BadLength)
    );
    // UDP length too small for a BTH and ICRC.
    let mut short = f.clone();
    short[38..40].copy_from_slice(&12u16.to_be_bytes());
    assert_eq!(
        verdict(LinkType::Ethernet, &short),
        Verdict::Malformed(Error::BadLength)
    );
    // A later fragment is not RoCE; a first fragment is malformed RoCE.
    let mut frag = f.clone();
    frag[20] = 0x20;
    assert_eq!(
        verdict(LinkType::Ethernet, &frag),
        Verdict::Malformed(Error::Malformed)
    );
    frag[21] = 1;
    assert_eq!(verdict(LinkType::Ethernet, &frag), Verdict::NotRoce);
    assert_eq!(
        verdict(LinkType::Ethernet, &f[..10]),
        Verdict::Malformed(Error::Truncated)
    );
}

#[test]
fn builders_refuse_bad_input() {
    let spec = Ipv4FrameSpec::default();
    assert_eq!(build_ipv4_frame(&spec, &[0; 15]), Err(Error::Truncated));
    let t = send_only(b"");
    let mut small = [0u8; 50];
    assert_eq!(
        write_ipv4_frame(&spec, &t, &mut small),
        Err(Error::Truncated)
    );
    let big = vec![0u8; 70_000];
    assert_eq!(build_ipv4_frame(&spec, &big), Err(Error::BadLength));
    assert_eq!(
        build_ipv6_frame(&Ipv6FrameSpec::default(), &big),
        Err(Error::BadLength)
    );
}

proptest::proptest! {
    /// No input panics the frame parser or the verdict, for any link type.
    #[test]
    fn arbitrary_frames_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..160)) {
        for lt in [1u32, 101, 113, 228, 229, 276, 0] {
            let lt = LinkType::from_dlt(lt);
            let _ = verdict(lt, &data);
        }
    }

    /// Mutating any byte of a valid frame never panics the parser.
    #[test]
    fn mutated_frames(i in 0usize..66, x in 1u8..=255) {
        let mut f = v4();
        let i = i % f.len();
        f[i] ^= x;
        let _ = verdict(LinkType::Ethernet, &f);
    }
}

#[test]
fn ipv6_and_roce_v1_truncation() {
    let f6 = build_ipv6_frame(&Ipv6FrameSpec::default(), &send_only(b"0123456789")).unwrap();
    let r = parse(LinkType::Ethernet, &f6[..70]).unwrap().unwrap();
    assert!(r.truncated);
    assert_eq!(r.transport.len(), 70 - 62);
    assert_eq!(r.verdict(), Verdict::Truncated);
    // RoCEv1: the GRH payload length decides.
    let t = send_only(b"abcdefgh");
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x89, 0x15, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(t.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0x1b, 64]);
    f.extend_from_slice(&[0u8; 32]);
    f.extend_from_slice(&t);
    assert_eq!(verdict(LinkType::Ethernet, &f[..60]), Verdict::Truncated);
    // with its ICRC zero it is complete and invalid
    assert!(matches!(
        verdict(LinkType::Ethernet, &f),
        Verdict::IcrcInvalid { .. }
    ));
}

/// rxe does not support IPv4 options, nor does the ICRC definition we follow: such a packet
/// is RoCE but malformed.
#[test]
fn ipv4_options_are_malformed_roce() {
    let f = v4();
    let mut o = f[..14].to_vec();
    o.extend_from_slice(&f[14..34]);
    o.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
    o.extend_from_slice(&f[34..]);
    o[14] = 0x46;
    let total = u16::from_be_bytes([o[16], o[17]]) + 4;
    o[16..18].copy_from_slice(&total.to_be_bytes());
    let r = parse(LinkType::Ethernet, &o).unwrap().unwrap();
    assert_eq!(r.transport_offset, 46);
    assert_eq!(r.verdict(), Verdict::Malformed(Error::Malformed));
}
