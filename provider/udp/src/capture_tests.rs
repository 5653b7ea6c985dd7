//! Capture tests: what the kernel really puts on the wire for our sockets.
//!
//! They need root (`CAP_NET_RAW` for `AF_PACKET`, `CAP_SYS_ADMIN` for a private network
//! namespace). Outside CI they skip loudly without it; with `CI=true` they fail instead.
//! Only loopback addresses are used; the GSO test runs in a private network namespace.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use super::capture::{in_private_netns, Capture, Captured, PACKET_OUTGOING};
use super::headers::gso_segment_ip_id;
use super::*;

const T: Duration = Duration::from_secs(3);

/// Opens a capture keeping only UDP packets with one of `ports` (kernel BPF filter), or skips
/// loudly (fails under `CI=true`). With no ports, an unfiltered capture (private netns use).
fn capture_or_skip(what: &str, ports: &[u16]) -> Option<Capture> {
    let c = if ports.is_empty() {
        Capture::open()
    } else {
        Capture::open_ports(ports)
    };
    match c {
        Ok(c) => Some(c),
        Err(e) => {
            let need = format!("an AF_PACKET capture ({e}); run as root");
            roce_tests::prereq::require(what, &need, false);
            None
        }
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn cfg() -> SocketConfig {
    SocketConfig {
        port: 0,
        ..Default::default()
    }
}

/// A RoCE-shaped payload: a BTH (RC SEND_ONLY, PSN `psn`), `n` data bytes, 4 ICRC bytes.
pub(super) fn payload(psn: u32, n: usize) -> Vec<u8> {
    let mut p = vec![0u8; 12 + n + 4];
    p[0] = 0x04;
    p[2..4].copy_from_slice(&0xFFFFu16.to_be_bytes());
    p[5..8].copy_from_slice(&0x000011u32.to_be_bytes()[1..]);
    p[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
    for (i, b) in p[12..12 + n].iter_mut().enumerate() {
        *b = (i as u32 ^ psn) as u8;
    }
    p
}

fn between(a: SocketAddr, b: SocketAddr) -> impl FnMut(&Captured) -> bool {
    // Loopback shows each packet twice: as sent (PACKET_OUTGOING) and as received (PACKET_HOST).
    move |c: &Captured| c.src() == a && c.dst() == b && c.pkttype == PACKET_OUTGOING
}

fn describe(c: &Captured) -> String {
    format!(
        "pkttype {} id {:?} df {} totlen {} tos {:#04x} ttl {} sport {} udp_len {} udp_csum {:#06x} payload {}",
        c.pkttype,
        c.ip_id(),
        c.df(),
        c.ip_len_field(),
        c.tos(),
        c.ttl(),
        c.src().port(),
        c.udp_len(),
        c.udp_checksum(),
        c.payload.len()
    )
}

/// Unconnected DF sends from our socket: IPv4 ID 0, DF, zero UDP checksum, our source port,
/// TOS/TTL from the control messages; the headers we rebuild equal the captured ones byte for
/// byte and the ICRC verifies over the real headers. Also records what a connected socket and a
/// socket without DF send (nonzero IDs).
#[test]
fn capture_unconnected_df_sends_id_zero() {
    let mut a = Socket::bind(v4(127, 0, 0, 1), cfg()).unwrap();
    let mut b = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
    let (pa, pb) = (a.local_addr(), b.local_addr());
    // Sockets for the record at the end: one connected, one without DF.
    let conn = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    conn.bind(&SocketAddr::new(pa.ip(), 0).into()).unwrap();
    let nodf = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    nodf.bind(&SocketAddr::new(pa.ip(), 0).into()).unwrap();
    let pc = conn.local_addr().unwrap().as_socket().unwrap();
    let pn = nodf.local_addr().unwrap().as_socket().unwrap();
    let ports = [pa.port(), pb.port(), pc.port(), pn.port()];
    let Some(mut cap) = capture_or_skip("capture_unconnected_df_sends_id_zero", &ports) else {
        return;
    };
    let specs = [
        (None, None, 0usize),
        (Some(0x02u8), Some(7u8), 100),
        (Some(0xB9), Some(1), 1024),
    ];
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    for (i, &(tos, ttl, n)) in specs.iter().enumerate() {
        let mut p = payload(i as u32, n);
        let mut d = OutDatagram::new(pb.ip(), 0xC0DE, &[]);
        d.dst_port = pb.port();
        d.tos = tos;
        d.ttl = ttl;
        a.fill_icrc(&d, &mut p).unwrap();
        bufs.push(p);
    }
    let dgrams: Vec<OutDatagram<'_>> = specs
        .iter()
        .zip(&bufs)
        .map(|(&(tos, ttl, _), p)| OutDatagram {
            dst: pb.ip(),
            dst_port: pb.port(),
            src_port: 0xC0DE,
            tos,
            ttl,
            payload: p,
            gso_size: None,
        })
        .collect();
    assert_eq!(a.send_batch(&dgrams, Wait::NonBlocking).unwrap(), 3);
    let got = cap.collect(3, T, between(pa, pb)).unwrap();
    assert_eq!(got.len(), 3, "captured {got:?}");
    for (c, d) in got.iter().zip(&dgrams) {
        eprintln!("unconnected DF: {}", describe(c));
        assert_eq!(
            c.ip_id(),
            Some(0),
            "unconnected DF send must carry IPv4 ID 0"
        );
        assert!(c.df());
        assert_eq!(
            c.udp_checksum(),
            0,
            "SO_NO_CHECK must send a zero UDP checksum"
        );
        assert_eq!(
            c.src().port(),
            pa.port(),
            "SourcePorts::Fixed sends from the bound port"
        );
        assert_eq!(c.tos(), d.tos.unwrap_or(0));
        assert_eq!(c.ttl(), d.ttl.unwrap_or(64));
        assert_eq!(c.payload, d.payload);
        let h = a.wire_headers(d, 0);
        assert_eq!(
            h.ip(),
            &c.ip[..],
            "rebuilt IPv4 header differs from the wire"
        );
        assert_eq!(
            h.udp(),
            &c.udp[..],
            "rebuilt UDP header differs from the wire"
        );
        c.verify_icrc().expect("ICRC over the real headers");
    }
    // The receiver sees the same datagrams, and can verify the ICRC assuming ID 0.
    let mut batch = RecvBatch::new(8);
    let mut seen = 0;
    let counters = IcrcCounters::default();
    while seen < 3 {
        let n = b
            .recv_batch(&mut batch, Wait::Block(Some(T)))
            .expect("recv");
        assert!(n > 0, "receiver timed out");
        for d in batch.iter() {
            assert_eq!(d.src, pa);
            assert_eq!(d.dst, pb.ip());
            assert_eq!(d.tos, dgrams[seen].tos.or(Some(0)));
            assert_eq!(d.ttl, dgrams[seen].ttl.or(Some(64)));
            assert_eq!(d.payload, dgrams[seen].payload);
            let h = d.wire_headers();
            let v = check_icrc(&h, false, d.payload, IcrcPolicy::Strict, &counters);
            assert_eq!(v, IcrcVerdict::Verified);
            seen += 1;
        }
    }

    // For the record: a *connected* socket uses a per-socket ID counter, and an unconnected
    // socket without DF gets IDs from the kernel's hash generator (as kernel rxe does).
    super::sys::setsockopt_int(
        &conn,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
    .unwrap();
    conn.connect(&pb.into()).unwrap();
    conn.send(&[1, 2, 3]).unwrap();
    conn.send(&[4, 5, 6]).unwrap();
    let got = cap.collect(2, T, between(pc, pb)).unwrap();
    assert_eq!(got.len(), 2);
    let ids: Vec<_> = got.iter().map(|c| c.ip_id().unwrap()).collect();
    eprintln!("connected DF socket IDs: {ids:?}");
    assert_eq!(
        ids[1],
        ids[0].wrapping_add(1),
        "connected sockets count IDs up"
    );

    super::sys::setsockopt_int(
        &nodf,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DONT,
    )
    .unwrap();
    nodf.send_to(&[1, 2, 3], &pb.into()).unwrap();
    nodf.send_to(&[4, 5, 6], &pb.into()).unwrap();
    let got = cap.collect(2, T, between(pn, pb)).unwrap();
    assert_eq!(got.len(), 2);
    for c in &got {
        eprintln!("unconnected no-DF: {}", describe(c));
        assert!(!c.df());
    }
}

/// IPv6 with zero checksums both ways (`UDP_NO_CHECK6_TX`/`RX`): the capture shows checksum 0
/// and the receiver still gets the datagram; the ICRC is exact over IPv6.
#[test]
fn capture_ipv6_zero_checksum() {
    let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let (mut a, mut b) = match (Socket::bind(lo6, cfg()), Socket::bind(lo6, cfg())) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            roce_tests::prereq::require(
                "capture_ipv6_zero_checksum",
                &format!("IPv6 loopback ({e})"),
                false,
            );
            return;
        }
    };
    let (pa, pb) = (a.local_addr(), b.local_addr());
    let Some(mut cap) = capture_or_skip("capture_ipv6_zero_checksum", &[pa.port(), pb.port()])
    else {
        return;
    };
    let mut p = payload(9, 64);
    let mut d = OutDatagram::new(lo6, 0xC001, &[]);
    d.dst_port = pb.port();
    d.tos = Some(0x60);
    a.fill_icrc(&d, &mut p).unwrap();
    d.payload = &p;
    assert_eq!(a.send_batch(&[d], Wait::NonBlocking).unwrap(), 1);
    let c = cap.next_udp(T, between(pa, pb)).unwrap().expect("captured");
    eprintln!("ipv6: {}", describe(&c));
    assert_eq!(c.udp_checksum(), 0);
    assert_eq!(c.tos(), 0x60);
    c.verify_icrc().unwrap();
    let h = a.wire_headers(&d, 0);
    assert_eq!(h.udp(), &c.udp[..]);
    let mut batch = RecvBatch::new(2);
    assert_eq!(b.recv_batch(&mut batch, Wait::Block(Some(T))).unwrap(), 1);
    let r = batch.iter().next().unwrap();
    assert_eq!(r.payload, &p[..]);
    assert_eq!(r.tos, Some(0x60));
    r.wire_headers().verify_icrc(r.payload).unwrap();
}

/// GSO on the host's `lo`: the device takes the GSO packet whole, so taps see one large packet.
/// Recorded, not asserted beyond "the bytes arrive".
#[test]
fn capture_gso_on_host_lo() {
    let mut a = Socket::bind(v4(127, 0, 0, 1), cfg()).unwrap();
    let b = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
    if !a.features().gso {
        roce_tests::prereq::require("capture_gso_on_host_lo", "UDP GSO", false);
        return;
    }
    let (pa, pb) = (a.local_addr(), b.local_addr());
    let Some(mut cap) = capture_or_skip("capture_gso_on_host_lo", &[pa.port(), pb.port()]) else {
        return;
    };
    let seg = 500usize;
    let mut p = Vec::new();
    for k in 0..4 {
        p.extend(payload(k, if k == 3 { 200 } else { seg - 16 }));
    }
    let mut d = OutDatagram::new(pb.ip(), 0xC0DE, &[]);
    d.dst_port = pb.port();
    d.gso_size = Some(seg as u16);
    a.fill_icrc(&d, &mut p).unwrap();
    d.payload = &p;
    assert_eq!(a.send_batch(&[d], Wait::NonBlocking).unwrap(), 1);
    let got = cap
        .collect(4, Duration::from_millis(500), between(pa, pb))
        .unwrap();
    let total: usize = got.iter().map(|c| c.payload.len()).sum();
    for (k, c) in got.iter().enumerate() {
        eprintln!("GSO on host lo: {}", describe(c));
        // One whole GSO packet (ID 0) on kernels whose lo takes GSO, else segments 0, 1, ...
        assert_eq!(c.ip_id(), Some(k as u16));
    }
    assert_eq!(total, p.len());
}

/// GSO segment headers, made visible: in a private network namespace whose `lo` has
/// `gso_max_segs 1`, the kernel segments GSO sends in software before the tap. Records the IPv4
/// ID of each segment and checks that [`Socket::fill_icrc`] (which uses
/// [`gso_segment_ip_id`]) produced an ICRC that verifies over every segment's real headers.
#[test]
fn capture_gso_segment_ids() {
    if capture_or_skip("capture_gso_segment_ids", &[]).is_none() {
        return;
    }
    let r = in_private_netns(true, || {
        let mut cap = Capture::open().unwrap();
        let mut a = Socket::bind(v4(127, 0, 0, 1), cfg()).unwrap();
        let b = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
        if !a.features().gso {
            return None;
        }
        let (pa, pb) = (a.local_addr(), b.local_addr());
        let seg = 300usize;
        let mut p = Vec::new();
        for k in 0..5 {
            p.extend(payload(k, if k == 4 { 50 } else { seg - 16 }));
        }
        let mut d = OutDatagram::new(pb.ip(), 0xC0DE, &[]);
        d.dst_port = pb.port();
        d.gso_size = Some(seg as u16);
        a.fill_icrc(&d, &mut p).unwrap();
        d.payload = &p;
        assert_eq!(a.send_batch(&[d], Wait::NonBlocking).unwrap(), 1);
        let got = cap.collect(5, T, between(pa, pb)).unwrap();
        Some((got, p))
    });
    let (got, p) = match r {
        Ok(Some(x)) => x,
        Ok(None) => {
            roce_tests::prereq::require("capture_gso_segment_ids", "UDP GSO", false);
            return;
        }
        Err(e) => {
            let what = format!("a private network namespace ({e})");
            roce_tests::prereq::require("capture_gso_segment_ids", &what, false);
            return;
        }
    };
    for c in &got {
        eprintln!("GSO segment: {}", describe(c));
    }
    assert_eq!(got.len(), 5, "expected 5 software-segmented datagrams");
    let mut off = 0;
    for (k, c) in got.iter().enumerate() {
        assert_eq!(c.payload, &p[off..off + c.payload.len()]);
        off += c.payload.len();
        assert!(c.df());
        assert_eq!(c.ip_id(), Some(gso_segment_ip_id(k)), "segment {k}");
        c.verify_icrc()
            .unwrap_or_else(|e| panic!("segment {k}: ICRC over the real headers: {e:?}"));
    }
}

/// The raw sender writes the IPv4 ID, TOS (ECN included), TTL and source port verbatim. A UDP
/// socket receiver cannot verify the ICRC of a nonzero-ID packet (the kernel-rxe situation) and
/// counts it as not verifiable; the capture, which sees the real header, verifies it.
#[test]
fn capture_raw_sender_full_header_control() {
    let mut b = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
    let pb = b.local_addr();
    let Some(mut cap) = capture_or_skip(
        "capture_raw_sender_full_header_control",
        &[pb.port(), 0xC0DE],
    ) else {
        return;
    };
    let mut raw = match super::raw::RawSender::open() {
        Ok(r) => r,
        Err(e) => {
            let what = format!("a raw socket ({e})");
            roce_tests::prereq::require("capture_raw_sender_full_header_control", &what, false);
            return;
        }
    };
    let mut arriving = Capture::open_ports(&[pb.port()]).unwrap();
    let src = v4(127, 0, 0, 1);
    let mut bufs = Vec::new();
    let mut hdrs = Vec::new();
    for (i, id) in [0x1234u16, 0].into_iter().enumerate() {
        let mut p = payload(i as u32, 40);
        let h = WireHeaders::new(&HeaderFacts {
            src,
            dst: pb.ip(),
            sport: 0xC0DE,
            dport: pb.port(),
            payload_len: p.len(),
            ip_id: id,
            tos: 0x03,
            ttl: 9,
        });
        h.fill_icrc(&mut p).unwrap();
        bufs.push(p);
        hdrs.push(h);
    }
    let pkts: Vec<_> = hdrs
        .iter()
        .zip(&bufs)
        .map(|(h, p)| super::raw::RawDatagram {
            headers: *h,
            payload: p,
        })
        .collect();
    assert_eq!(raw.send_batch(&pkts).unwrap(), 2);
    let from = SocketAddr::new(src, 0xC0DE);
    let got = cap.collect(2, T, between(from, pb)).unwrap();
    assert_eq!(got.len(), 2);
    for (c, h) in got.iter().zip(&hdrs) {
        eprintln!("raw sender: {}", describe(c));
        assert_eq!(&c.ip[..], h.ip(), "raw header sent verbatim");
        assert_eq!(&c.udp[..], h.udp());
        c.verify_icrc().unwrap();
    }
    // The full-header receive path sees the arriving copies with their real IDs.
    for h in &hdrs {
        let c = arriving.recv_for(pb, T).unwrap().expect("arriving copy");
        assert_eq!(&c.ip[4..6], &h.ip()[4..6]);
        c.verify_icrc().unwrap();
    }
    let counters = IcrcCounters::default();
    let mut batch = RecvBatch::new(4);
    let mut verdicts = Vec::new();
    while verdicts.len() < 2 {
        assert!(b.recv_batch(&mut batch, Wait::Block(Some(T))).unwrap() > 0);
        for d in batch.iter() {
            assert_eq!(d.src, from);
            assert_eq!((d.tos, d.ttl), (Some(3), Some(9)));
            let v = check_icrc(
                &d.wire_headers(),
                false,
                d.payload,
                IcrcPolicy::AssumeZeroElseAccept,
                &counters,
            );
            verdicts.push(v);
        }
    }
    assert_eq!(
        verdicts,
        [IcrcVerdict::NotVerifiable, IcrcVerdict::Verified],
        "ID 0x1234 is invisible to a UDP socket; ID 0 verifies"
    );
    assert_eq!(counters.snapshot(), (1, 0, 1));
    // Solving the ICRC for the identification recovers 0x1234 without seeing the IP header.
    let h = WireHeaders::new(&HeaderFacts {
        src,
        dst: pb.ip(),
        sport: 0xC0DE,
        dport: pb.port(),
        payload_len: bufs[0].len(),
        ip_id: 0,
        tos: 0,
        ttl: 64,
    });
    assert_eq!(
        check_icrc(&h, false, &bufs[0], IcrcPolicy::RecoverId, &counters),
        IcrcVerdict::RecoveredId(0x1234)
    );
}

/// The kernel-side BPF filter of `Capture::open_ports` keeps exactly the packets with one of the
/// ports (checked with an accept-everything closure).
#[test]
fn capture_bpf_filter_keeps_only_ports() {
    let mut a = Socket::bind(v4(127, 0, 0, 1), cfg()).unwrap();
    let other = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
    let wanted = Socket::bind(v4(127, 0, 0, 2), cfg()).unwrap();
    let Some(mut cap) = capture_or_skip(
        "capture_bpf_filter_keeps_only_ports",
        &[wanted.local_addr().port()],
    ) else {
        return;
    };
    for (dst, n) in [(other.local_addr(), 20u32), (wanted.local_addr(), 1)] {
        for i in 0..n {
            let p = payload(i, 8);
            let mut d = OutDatagram::new(dst.ip(), 0, &p);
            d.dst_port = dst.port();
            assert_eq!(a.send_batch(&[d], Wait::Block(Some(T))).unwrap(), 1);
        }
    }
    let c = cap
        .next_udp(T, |_| true)
        .unwrap()
        .expect("the wanted packet");
    assert_eq!(c.dst(), wanted.local_addr());
    // IPv6 and IPv4 programs assemble; too many ports are refused.
    assert!(super::capture::udp_port_filter(&[1; 50]).is_ok());
    assert!(super::capture::udp_port_filter(&[1; 200]).is_err());
    assert!(super::capture::udp_port_filter(&[]).is_err());
}
