//! Frame builders: Ethernet (+ optional 802.1Q) + IPv4/IPv6 + UDP around a transport packet.
use super::{VlanTag, ETHERNET_HEADER_LEN, VLAN_TAG_LEN};
use crate::icrc::{self, Network, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN};
use crate::ip::{ipv4, ipv6, udp, PROTOCOL_UDP};
use crate::{bth, Error, Result, ICRC_LEN, ROCE_V2_SPORT_BASE, ROCE_V2_UDP_PORT};
use pnet_packet::ethernet::{EtherType, MutableEthernetPacket};
use pnet_packet::vlan::{ClassOfService, MutableVlanPacket};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Every field of the headers [`write_ipv4_frame`] puts around a transport packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4FrameSpec {
    /// Ethernet source MAC.
    pub src_mac: [u8; 6],
    /// Ethernet destination MAC.
    pub dst_mac: [u8; 6],
    /// Optional 802.1Q tag (its `tpid` is written as given).
    pub vlan: Option<VlanTag>,
    /// IPv4 source address.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (rxe: `0xC000 | hash(qpn)`).
    pub src_port: u16,
    /// UDP destination port (4791).
    pub dst_port: u16,
    /// IPv4 identification.
    pub ip_id: u16,
    /// IPv4 TOS byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IPv4 "don't fragment" (rxe always sets it).
    pub dont_fragment: bool,
}

impl Default for Ipv4FrameSpec {
    /// Locally administered MACs 02:00:00:00:00:01 → :02, 10.0.0.1 → 10.0.0.2, source port
    /// 0xC000, destination port 4791, ID 0, TOS 0, TTL 64, DF set, no VLAN.
    fn default() -> Self {
        Ipv4FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_port: ROCE_V2_SPORT_BASE,
            dst_port: ROCE_V2_UDP_PORT,
            ip_id: 0,
            tos: 0,
            ttl: 64,
            dont_fragment: true,
        }
    }
}

/// Every field of the headers [`write_ipv6_frame`] puts around a transport packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6FrameSpec {
    /// Ethernet source MAC.
    pub src_mac: [u8; 6],
    /// Ethernet destination MAC.
    pub dst_mac: [u8; 6],
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// IPv6 source address.
    pub src_ip: Ipv6Addr,
    /// IPv6 destination address.
    pub dst_ip: Ipv6Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (4791).
    pub dst_port: u16,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits; rxe sends 0).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Default for Ipv6FrameSpec {
    /// MACs as [`Ipv4FrameSpec::default`], fe80::1 → fe80::2, source port 0xC000, destination
    /// port 4791, traffic class 0, flow label 0, hop limit 64, no VLAN.
    fn default() -> Self {
        Ipv6FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            src_ip: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
            dst_ip: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
            src_port: ROCE_V2_SPORT_BASE,
            dst_port: ROCE_V2_UDP_PORT,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        }
    }
}

impl Ipv4FrameSpec {
    /// Length of the frame around a transport packet of `transport_len` bytes (BTH .. ICRC).
    pub fn frame_len(&self, transport_len: usize) -> usize {
        l2_len(self.vlan) + IPV4_HEADER_LEN + UDP_HEADER_LEN + transport_len
    }
}

impl Ipv6FrameSpec {
    /// Length of the frame around a transport packet of `transport_len` bytes (BTH .. ICRC).
    pub fn frame_len(&self, transport_len: usize) -> usize {
        l2_len(self.vlan) + IPV6_HEADER_LEN + UDP_HEADER_LEN + transport_len
    }
}

fn l2_len(vlan: Option<VlanTag>) -> usize {
    ETHERNET_HEADER_LEN + if vlan.is_some() { VLAN_TAG_LEN } else { 0 }
}

/// Writes the Ethernet header and tag; returns where the IP header starts.
fn put_l2(
    out: &mut [u8],
    src: [u8; 6],
    dst: [u8; 6],
    vlan: Option<VlanTag>,
    ethertype: u16,
) -> usize {
    // pnet's setters take `pnet_base::MacAddr`, which pnet_packet does not re-export.
    out[0..6].copy_from_slice(&dst);
    out[6..12].copy_from_slice(&src);
    let mut eth = MutableEthernetPacket::new(out).expect("caller checked the length");
    match vlan {
        None => {
            eth.set_ethertype(EtherType(ethertype));
            ETHERNET_HEADER_LEN
        }
        Some(t) => {
            eth.set_ethertype(EtherType(t.tpid));
            let mut v = MutableVlanPacket::new(&mut out[ETHERNET_HEADER_LEN..])
                .expect("caller checked the length");
            v.set_priority_code_point(ClassOfService(t.pcp & 7));
            v.set_drop_eligible_indicator(t.dei as u8);
            v.set_vlan_identifier(t.vid & 0x0FFF);
            v.set_ethertype(EtherType(ethertype));
            ETHERNET_HEADER_LEN + VLAN_TAG_LEN
        }
    }
}

fn check_transport(transport: &[u8], out_len: usize, need: usize) -> Result<()> {
    if transport.len() < bth::HEADER_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    if out_len < need {
        return Err(Error::Truncated);
    }
    Ok(())
}

/// Writes the UDP header at `udp_at` (the IP header, 20 or 40 bytes, is at `ip_at`) and
/// `transport` after it, then seals the transport's ICRC over these headers.
fn put_udp_and_seal(
    out: &mut [u8],
    ip_at: usize,
    udp_at: usize,
    sport: u16,
    dport: u16,
    transport: &[u8],
) -> Result<()> {
    let t_at = udp_at + UDP_HEADER_LEN;
    udp::Repr {
        src_port: sport,
        dst_port: dport,
        payload_len: transport.len(),
    }
    .emit(&mut udp::Packet::new_unchecked(&mut out[udp_at..t_at]));
    out[t_at..].copy_from_slice(transport);
    let (hdr, t) = out.split_at_mut(t_at);
    let (ip, udp) = (&hdr[ip_at..udp_at], &hdr[udp_at..]);
    let net = if ip.len() == IPV4_HEADER_LEN {
        Network::Ipv4 { ip, udp }
    } else {
        Network::Ipv6 { ip, udp }
    };
    icrc::fill(net, t)?;
    Ok(())
}

/// Writes an Ethernet + IPv4 + UDP frame around `transport` (BTH .. ICRC; the last four bytes
/// are replaced by the ICRC) into `out` and returns the frame length. The UDP checksum is 0
/// and the IPv4 header checksum is correct. Allocation-free.
///
/// Errors: [`Error::Truncated`] when `transport` is shorter than BTH + ICRC or `out` is shorter
/// than [`Ipv4FrameSpec::frame_len`]; [`Error::BadLength`] when the datagram would exceed
/// 65535 bytes.
pub fn write_ipv4_frame(spec: &Ipv4FrameSpec, transport: &[u8], out: &mut [u8]) -> Result<usize> {
    let need = spec.frame_len(transport.len());
    check_transport(transport, out.len(), need)?;
    let total = IPV4_HEADER_LEN + UDP_HEADER_LEN + transport.len();
    if total > u16::MAX as usize {
        return Err(Error::BadLength);
    }
    let out = &mut out[..need];
    let ip_at = put_l2(out, spec.src_mac, spec.dst_mac, spec.vlan, 0x0800);
    let udp_at = ip_at + IPV4_HEADER_LEN;
    ipv4::Repr {
        src_addr: spec.src_ip,
        dst_addr: spec.dst_ip,
        protocol: PROTOCOL_UDP,
        payload_len: total - IPV4_HEADER_LEN,
        ident: spec.ip_id,
        dont_frag: spec.dont_fragment,
        tos: spec.tos,
        ttl: spec.ttl,
    }
    .emit(&mut ipv4::Packet::new_unchecked(&mut out[ip_at..udp_at]));
    put_udp_and_seal(out, ip_at, udp_at, spec.src_port, spec.dst_port, transport)?;
    Ok(need)
}

/// Writes an Ethernet + IPv6 + UDP frame around `transport` (BTH .. ICRC, ICRC filled in)
/// into `out` and returns its length. The UDP checksum is 0, as rxe sends it.
///
/// Errors as [`write_ipv4_frame`].
pub fn write_ipv6_frame(spec: &Ipv6FrameSpec, transport: &[u8], out: &mut [u8]) -> Result<usize> {
    let need = spec.frame_len(transport.len());
    check_transport(transport, out.len(), need)?;
    let payload = UDP_HEADER_LEN + transport.len();
    if payload > u16::MAX as usize {
        return Err(Error::BadLength);
    }
    let out = &mut out[..need];
    let ip_at = put_l2(out, spec.src_mac, spec.dst_mac, spec.vlan, 0x86DD);
    let udp_at = ip_at + IPV6_HEADER_LEN;
    ipv6::Repr {
        src_addr: spec.src_ip,
        dst_addr: spec.dst_ip,
        next_header: PROTOCOL_UDP,
        payload_len: payload,
        traffic_class: spec.traffic_class,
        flow_label: spec.flow_label,
        hop_limit: spec.hop_limit,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut out[ip_at..udp_at]));
    put_udp_and_seal(out, ip_at, udp_at, spec.src_port, spec.dst_port, transport)?;
    Ok(need)
}

/// [`write_ipv4_frame`] into a new vector.
pub fn build_ipv4_frame(spec: &Ipv4FrameSpec, transport: &[u8]) -> Result<Vec<u8>> {
    let mut v = vec![0u8; spec.frame_len(transport.len())];
    write_ipv4_frame(spec, transport, &mut v)?;
    Ok(v)
}

/// [`write_ipv6_frame`] into a new vector.
pub fn build_ipv6_frame(spec: &Ipv6FrameSpec, transport: &[u8]) -> Result<Vec<u8>> {
    let mut v = vec![0u8; spec.frame_len(transport.len())];
    write_ipv6_frame(spec, transport, &mut v)?;
    Ok(v)
}
