//! The IP/UDP view the ICRC covers, UDP source-port entropy and the per-NIC network policy.
#[cfg(test)]
use roce_wire::icrc::Network;
use std::net::IpAddr;

/// Linux `hash_32(val, bits)`: `(val * GOLDEN_RATIO_32) >> (32 - bits)`.
pub const fn hash_32(val: u32, bits: u32) -> u32 {
    val.wrapping_mul(0x61C8_8647) >> (32 - bits)
}

/// The synthetic, locally administered MAC of an emulated NIC at `ip`: `02:00:` and the four
/// IPv4 bytes (the last four bytes of an IPv6 address). Emulated NICs resolve no neighbours:
/// a peer's MAC follows from its address ([`mac_of_gid`]).
pub fn synthetic_mac(ip: IpAddr) -> [u8; 6] {
    let o = match ip {
        IpAddr::V4(v) => v.octets(),
        IpAddr::V6(v) => {
            let b = v.octets();
            [b[12], b[13], b[14], b[15]]
        }
    };
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// The MAC behind a RoCE GID on emulated NICs: a link-local `fe80::` GID carries its MAC as
/// an EUI-64 (undone here), any other GID is an address and has [`synthetic_mac`].
pub fn mac_of_gid(gid: &[u8; 16]) -> [u8; 6] {
    let g = gid;
    if g[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0] {
        [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]
    } else {
        [0x02, 0x00, g[12], g[13], g[14], g[15]]
    }
}

/// rxe's per-QP UDP source port: `0xC000 | (hash_32(qpn, 14) & 0x3fff)` (roce-spec-notes A.2).
pub const fn rxe_udp_sport(qpn: u32) -> u16 {
    (roce_wire::ROCE_V2_SPORT_BASE as u32 | (hash_32(qpn, 14) & 0x3fff)) as u16
}

/// What the NIC does with a received IPv4 datagram that comes without its identification
/// ([`RxMeta::ipv4_id`] `None`): the workspace's one ICRC policy type, defined with the ICRC in
/// `roce-wire`, whose docs say what each variant means here.
pub use roce_wire::icrc::IcrcPolicy;

/// Metadata of a received datagram, as the driver knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// IP source.
    pub src_ip: IpAddr,
    /// IP destination.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// IPv4 identification, when the driver saw the header (raw sockets, simulation).
    pub ipv4_id: Option<u16>,
    /// IPv4 TOS / IPv6 traffic class (masked in the ICRC).
    pub tos: u8,
    /// TTL / hop limit (masked in the ICRC).
    pub ttl: u8,
    /// IPv6 flow label (masked in the ICRC).
    pub flow_label: u32,
}

/// One datagram to send: the transport bytes (BTH..ICRC) are in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// IP source (the GID the QP's path uses).
    pub src_ip: IpAddr,
    /// IP destination.
    pub dst_ip: IpAddr,
    /// UDP source port (per-QP entropy).
    pub src_port: u16,
    /// UDP destination port, 4791.
    pub dst_port: u16,
    /// TOS / traffic class.
    pub tos: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// IPv4 identification the ICRC was computed with (the driver must send exactly this;
    /// [`NicConfig::tx_ipv4_id`](crate::NicConfig::tx_ipv4_id), 0 by default). DF is always set.
    pub ipv4_id: u16,
    /// Bytes written (BTH..ICRC).
    pub len: usize,
}

impl Transmit {
    /// What the receiver's driver knows of this datagram when it arrives unchanged.
    #[inline]
    pub fn rx_meta(&self) -> RxMeta {
        RxMeta {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            ipv4_id: Some(self.ipv4_id),
            tos: self.tos,
            ttl: self.ttl,
            flow_label: self.flow_label,
        }
    }
}

/// Builds the IP+UDP header bytes the ICRC covers into `hdr` and returns the network view
/// (the reference [`icrc`] is tested against), with `roce_wire::ip`'s headers.
/// IPv4: ID = `ipv4_id`, DF set, protocol 17, checksum filled (masked). UDP checksum 0.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn pseudo_headers<'a>(
    hdr: &'a mut [u8; 48],
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    tos: u8,
    ttl: u8,
    flow_label: u32,
    ipv4_id: u16,
    transport_len: usize,
) -> Option<Network<'a>> {
    use roce_wire::ip::{ipv4, ipv6, udp, PROTOCOL_UDP};
    let ip_len = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            ipv4::Repr {
                src_addr: s,
                dst_addr: d,
                protocol: PROTOCOL_UDP,
                payload_len: udp::HEADER_LEN + transport_len,
                ident: ipv4_id,
                dont_frag: true,
                tos,
                ttl,
            }
            .emit(&mut ipv4::Packet::new_unchecked(&mut hdr[..]));
            ipv4::HEADER_LEN
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            ipv6::Repr {
                src_addr: s,
                dst_addr: d,
                next_header: PROTOCOL_UDP,
                payload_len: udp::HEADER_LEN + transport_len,
                traffic_class: tos,
                flow_label,
                hop_limit: ttl,
            }
            .emit(&mut ipv6::Packet::new_unchecked(&mut hdr[..]));
            ipv6::HEADER_LEN
        }
        _ => return None,
    };
    udp::Repr {
        src_port: sport,
        dst_port: roce_wire::ROCE_V2_UDP_PORT,
        payload_len: transport_len,
    }
    .emit(&mut udp::Packet::new_unchecked(&mut hdr[ip_len..]));
    let (ip, rest) = hdr.split_at(ip_len);
    let udp = &rest[..udp::HEADER_LEN];
    Some(if ip_len == ipv4::HEADER_LEN {
        Network::Ipv4 { ip, udp }
    } else {
        Network::Ipv6 { ip, udp }
    })
}

/// The ICRC (`roce_wire::icrc` semantics) of `body` (BTH..pad, the ICRC itself excluded) sent
/// from `src:sport` to `dst:4791` with IPv4 identification `ipv4_id` (DF set):
/// [`roce_wire::icrc::compute_udp`]. `None` for mixed IP families or a body shorter than a BTH.
#[inline]
pub(crate) fn icrc(src: IpAddr, dst: IpAddr, sport: u16, ipv4_id: u16, body: &[u8]) -> Option<u32> {
    roce_wire::icrc::compute_udp(src, dst, sport, roce_wire::ROCE_V2_UDP_PORT, ipv4_id, body)
}

/// Fills the ICRC of an outgoing datagram (IPv4 ID `t.ipv4_id`, DF).
pub(crate) fn fill_icrc(t: &Transmit, buf: &mut [u8]) -> bool {
    fill_icrc_of(t.src_ip, t.dst_ip, t.src_port, t.ipv4_id, buf)
}

/// [`fill_icrc`] with the headers' fields as values.
#[inline]
pub(crate) fn fill_icrc_of(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    ipv4_id: u16,
    buf: &mut [u8],
) -> bool {
    let n = buf.len();
    if n < 12 + 4 {
        return false;
    }
    let Some(crc) = icrc(src, dst, sport, ipv4_id, &buf[..n - 4]) else {
        return false;
    };
    buf[n - 4..].copy_from_slice(&crc.to_le_bytes());
    true
}

/// Verifies the ICRC of a received datagram (false when it could not be checked).
/// Under `cfg(fuzzing)` every ICRC passes, as in `roce_wire::icrc::verify`.
pub(crate) fn verify_icrc(m: &RxMeta, id: u16, buf: &[u8]) -> bool {
    let n = buf.len();
    if n < 12 + 4 {
        return false;
    }
    let Some(crc) = icrc(m.src_ip, m.dst_ip, m.src_port, id, &buf[..n - 4]) else {
        return false;
    };
    cfg!(fuzzing) || crc.to_le_bytes() == buf[n - 4..]
}

/// [`seal`]'s receive-side counterpart: true when the ICRC stored in `buf` (BTH..ICRC) matches
/// the headers described by `t`. For drivers, tests and the benchmark baseline.
pub fn verify(t: &Transmit, buf: &[u8]) -> bool {
    let m = t.rx_meta();
    verify_icrc(&m, t.ipv4_id, buf)
}

/// Computes and stores the ICRC of a datagram (BTH..ICRC in `buf`) for the headers described
/// by `t` (IPv4 ID `t.ipv4_id`, DF). For drivers and tests that craft packets; false for mixed IP families.
pub fn seal(t: &Transmit, buf: &mut [u8]) -> bool {
    fill_icrc(t, buf)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn synthetic_macs_and_the_mac_behind_a_gid() {
        let v4: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(synthetic_mac(v4), [0x02, 0, 127, 0, 0, 2]);
        let v6: IpAddr = "fd00::1:2:3:4".parse().unwrap();
        assert_eq!(synthetic_mac(v6), [0x02, 0, 0, 3, 0, 4]);
        let mapped = match "::ffff:127.0.0.2".parse::<std::net::Ipv6Addr>() {
            Ok(a) => a.octets(),
            Err(_) => unreachable!(),
        };
        assert_eq!(mac_of_gid(&mapped), synthetic_mac(v4));
        // fe80::(02:00:7f:00:00:02 as EUI-64) = fe80::0000:7fff:fe00:0002
        let ll = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x7f, 0xff, 0xfe, 0x00, 0x00, 0x02,
        ];
        assert_eq!(mac_of_gid(&ll), [0x02, 0, 0x7f, 0, 0, 2]);
    }

    #[test]
    fn hash_32_matches_kernel() {
        // hash_32(1, 14) = (0x61C88647 >> 18)
        assert_eq!(hash_32(1, 14), 0x61C8_8647 >> 18);
        assert_eq!(rxe_udp_sport(0x11) & 0xC000, 0xC000);
        assert_eq!(
            rxe_udp_sport(0x11),
            0xC000 | ((0x11u32.wrapping_mul(0x61C8_8647) >> 18) & 0x3fff) as u16
        );
    }

    #[test]
    fn icrc_roundtrip_through_pseudo_headers() {
        // spec-notes B.3 #4: RC ACK 192.168.1.10 -> 192.168.1.20, sport 0xd00d, ID 0, DF
        let mut t = [
            0x11, 0x00, 0xff, 0xff, 0x80, 0x00, 0x00, 0x12, 0x00, 0x00, 0x01, 0x00, 0x1f, 0x00,
            0x00, 0x01, 0, 0, 0, 0,
        ];
        let tx = Transmit {
            src_ip: "192.168.1.10".parse().unwrap(),
            dst_ip: "192.168.1.20".parse().unwrap(),
            src_port: 0xd00d,
            dst_port: 4791,
            tos: 2,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len: t.len(),
        };
        assert!(fill_icrc(&tx, &mut t));
        assert_eq!(&t[16..], &[0xab, 0xe1, 0xf3, 0xb6]);
        let m = RxMeta {
            src_ip: tx.src_ip,
            dst_ip: tx.dst_ip,
            src_port: 0xd00d,
            ipv4_id: Some(0),
            tos: 0,
            ttl: 1,
            flow_label: 0,
        };
        assert!(verify_icrc(&m, 0, &t));
        assert!(!verify_icrc(&m, 1, &t));
    }

    #[test]
    fn fast_icrc_matches_roce_wire_over_pseudo_headers() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let v4: [IpAddr; 2] = [
            "10.1.2.3".parse().unwrap(),
            "192.168.200.7".parse().unwrap(),
        ];
        let v6: [IpAddr; 2] = [
            "fe80::1:2:3:4".parse().unwrap(),
            "2001:db8::77".parse().unwrap(),
        ];
        for i in 0..2000 {
            let (s, d) = if i % 2 == 0 {
                (v4[0], v4[1])
            } else {
                (v6[1], v6[0])
            };
            let len = 12 + rng.gen_range(0..300usize);
            let body: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let (sport, id, tos, ttl, fl) = (
                rng.gen(),
                rng.gen(),
                rng.gen(),
                rng.gen(),
                rng.gen::<u32>() & 0xF_FFFF,
            );
            let mut hdr = [0u8; 48];
            let net = pseudo_headers(&mut hdr, s, d, sport, tos, ttl, fl, id, len + 4).unwrap();
            assert_eq!(
                icrc(s, d, sport, id, &body),
                Some(roce_wire::icrc::compute(net, &body).unwrap()),
                "case {i}"
            );
        }
        assert_eq!(icrc(v4[0], v6[0], 1, 0, &[0; 12]), None);
        assert_eq!(icrc(v4[0], v4[1], 1, 0, &[0; 11]), None);
    }
}
