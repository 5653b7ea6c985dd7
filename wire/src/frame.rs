//! Finding RoCE inside a captured link-layer frame, and building frames around transport
//! packets.
//!
//! [`parse`] takes the bytes of one captured frame and its pcap link type and returns the
//! [`RoceFrame`] inside it, if any. Ethernet (with up to two 802.1Q / 802.1ad / QinQ tags),
//! Linux cooked captures (SLL and SLL2) and raw IP are understood; the link-layer headers
//! (Ethernet, VLAN, SLL) are read with `pnet_packet`, the IPv4, IPv6 and UDP headers (and the
//! GRH) with [`crate::ip`]'s views.
//!
//! * **RoCEv2** is UDP with destination port [`ROCE_V2_UDP_PORT`] over IPv4 or IPv6.
//! * **RoCEv1** is EtherType [`ROCE_V1_ETHERTYPE`]: a 40-byte GRH (next header `0x1B`) and the
//!   BTH.
//!
//! Lengths always come from the IP total/payload length, the UDP length and the GRH payload
//! length, never from the frame length: Ethernet padding and a trailing FCS are ignored, and a
//! frame that ends before its IP datagram does (a capture snap length) is reported as
//! [`truncated`](RoceFrame::truncated), never as a bad ICRC. No input makes anything here panic.
//!
//! The builders ([`build_ipv4_frame`], [`build_ipv6_frame`], [`write_ipv4_frame`],
//! [`write_ipv6_frame`]) do the reverse: they wrap a transport packet (BTH .. ICRC) in
//! Ethernet, IP and UDP headers with explicit field values and fill in the ICRC.
use crate::icrc::{self, Network, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN};
use crate::ip::{ipv4, ipv6, udp as udp_header, PROTOCOL_UDP as IP_PROTO_UDP};
use crate::{Error, Result, ROCE_V1_ETHERTYPE, ROCE_V2_UDP_PORT};
use core::fmt;
use pnet_packet::ethernet::EthernetPacket;
use pnet_packet::sll::SLLPacket;
use pnet_packet::sll2::SLL2Packet;
use pnet_packet::vlan::VlanPacket;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod build;
pub use build::{
    build_ipv4_frame, build_ipv6_frame, write_ipv4_frame, write_ipv6_frame, Ipv4FrameSpec,
    Ipv6FrameSpec,
};

/// Length of an untagged Ethernet II header.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Length of the RoCEv1 global route header.
pub const GRH_LEN: usize = 40;
/// GRH next header value announcing a BTH (IBA "IBA transport").
pub const GRH_NEXT_HEADER_BTH: u8 = 0x1B;
/// How many VLAN tags [`parse`] accepts (QinQ).
pub const MAX_VLAN_TAGS: usize = 2;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88A8;
const TPID_QINQ: u16 = 0x9100;
const SLL_HEADER_LEN: usize = 16;
const SLL2_HEADER_LEN: usize = 20;

/// A pcap link type (`LINKTYPE_*` value), as far as RoCE decoding cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// `LINKTYPE_ETHERNET` (1).
    Ethernet,
    /// `LINKTYPE_RAW` (101): raw IPv4 or IPv6, told apart by the version nibble.
    RawIp,
    /// `LINKTYPE_LINUX_SLL` (113): Linux cooked capture v1.
    LinuxSll,
    /// `LINKTYPE_IPV4` (228).
    Ipv4,
    /// `LINKTYPE_IPV6` (229).
    Ipv6,
    /// `LINKTYPE_LINUX_SLL2` (276): Linux cooked capture v2.
    LinuxSll2,
    /// Any other link type; frames of it are never RoCE to us.
    Other(u32),
}

impl LinkType {
    /// From a pcap/pcapng link type number.
    pub const fn from_dlt(v: u32) -> LinkType {
        match v {
            1 => LinkType::Ethernet,
            101 => LinkType::RawIp,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            v => LinkType::Other(v),
        }
    }

    /// The pcap link type number.
    pub const fn dlt(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Other(v) => v,
        }
    }
}

/// RoCE version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoceVersion {
    /// RoCEv1: GRH + BTH directly over Ethernet (EtherType 0x8915).
    V1,
    /// RoCEv2: BTH over UDP port 4791 over IPv4 or IPv6.
    V2,
}

impl fmt::Display for RoceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoceVersion::V1 => "RoCEv1",
            RoceVersion::V2 => "RoCEv2",
        })
    }
}

/// One 802.1Q / 802.1ad tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100, 0x88A8 or 0x9100).
    pub tpid: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

/// Link-layer summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct L2Summary {
    /// Source MAC (Ethernet), or the link-layer address of a cooked capture when it is 6 bytes.
    pub src_mac: Option<[u8; 6]>,
    /// Destination MAC (Ethernet only).
    pub dst_mac: Option<[u8; 6]>,
    /// VLAN tags, outermost first.
    pub vlans: [Option<VlanTag>; MAX_VLAN_TAGS],
    /// The EtherType after the tags (0x0800, 0x86DD or 0x8915); 0 for raw-IP link types.
    pub ethertype: u16,
}

/// Network-layer summary (IPv4, IPv6, or the RoCEv1 GRH, whose GIDs show as IPv6 addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3Summary {
    /// Source address (source GID for RoCEv1).
    pub src: IpAddr,
    /// Destination address (destination GID for RoCEv1).
    pub dst: IpAddr,
    /// IPv4 identification; `None` for IPv6 and GRH.
    pub ip_id: Option<u16>,
    /// IPv4 TOS byte, or IPv6/GRH traffic class.
    pub tos: u8,
    /// IPv4 TTL, or IPv6/GRH hop limit.
    pub ttl: u8,
    /// IPv6/GRH flow label; `None` for IPv4.
    pub flow_label: Option<u32>,
    /// IPv4 "don't fragment" flag (false for IPv6/GRH).
    pub dont_fragment: bool,
    /// IPv4 header checksum as found; `None` for IPv6/GRH.
    pub ip_checksum: Option<u16>,
}

/// UDP summary (RoCEv2 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSummary {
    /// Source port.
    pub src_port: u16,
    /// Destination port (4791).
    pub dst_port: u16,
    /// UDP length field.
    pub length: u16,
    /// UDP checksum as found (0 from rxe and ConnectX).
    pub checksum: u16,
}

/// A RoCE packet found in a frame. Borrows the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    /// RoCEv1 or RoCEv2.
    pub version: RoceVersion,
    /// The headers the ICRC covers (IP + UDP, or GRH), borrowed from the frame.
    pub network: Network<'a>,
    /// Link layer.
    pub l2: L2Summary,
    /// Network layer.
    pub l3: L3Summary,
    /// UDP (RoCEv2 only).
    pub udp: Option<UdpSummary>,
    /// BTH .. ICRC, as far as the capture holds it (shorter than `transport_len` when
    /// `truncated`).
    pub transport: &'a [u8],
    /// Length of BTH .. ICRC that the IP/UDP (or GRH) lengths announce.
    pub transport_len: usize,
    /// Offset of the IP header / GRH in the frame.
    pub l3_offset: usize,
    /// Offset of the BTH in the frame.
    pub transport_offset: usize,
    /// The capture ends before the packet does (snap length): the ICRC cannot be checked.
    pub truncated: bool,
}

/// What a frame amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A complete RoCE packet whose ICRC is right.
    IcrcValid,
    /// A complete RoCE packet whose ICRC is wrong.
    IcrcInvalid {
        /// ICRC computed over the packet.
        expected: u32,
        /// ICRC found in the trailer.
        found: u32,
    },
    /// A RoCE packet cut short by the capture: its ICRC cannot be checked.
    Truncated,
    /// Not RoCE (other EtherType, protocol or port).
    NotRoce,
    /// RoCE (or possibly RoCE) but its headers are inconsistent or cut before they could be
    /// identified.
    Malformed(Error),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::IcrcValid => f.write_str("ICRC ok"),
            Verdict::IcrcInvalid { expected, found } => {
                write!(
                    f,
                    "ICRC BAD (computed {expected:#010x}, found {found:#010x})"
                )
            }
            Verdict::Truncated => f.write_str("truncated"),
            Verdict::NotRoce => f.write_str("not RoCE"),
            Verdict::Malformed(e) => write!(f, "malformed ({e})"),
        }
    }
}

impl RoceFrame<'_> {
    /// Checks the ICRC. A truncated packet is [`Verdict::Truncated`]; a transport too short to
    /// hold a BTH and an ICRC, or an IPv4 header with options, is [`Verdict::Malformed`].
    pub fn verdict(&self) -> Verdict {
        if self.truncated {
            return Verdict::Truncated;
        }
        match icrc::verify(self.network, self.transport) {
            Ok(()) => Verdict::IcrcValid,
            Err(Error::BadIcrc { expected, found }) => Verdict::IcrcInvalid { expected, found },
            Err(Error::Truncated) => Verdict::Malformed(Error::BadLength),
            Err(e) => Verdict::Malformed(e),
        }
    }

    /// The BTH opcode, when the capture holds it.
    pub fn opcode(&self) -> Option<crate::Opcode> {
        self.transport.first().map(|&b| crate::Opcode(b))
    }
}

/// Parses a frame and returns its verdict in one step.
pub fn verdict(link: LinkType, frame: &[u8]) -> Verdict {
    match parse(link, frame) {
        Ok(Some(f)) => f.verdict(),
        Ok(None) => Verdict::NotRoce,
        Err(e) => Verdict::Malformed(e),
    }
}

/// Finds the RoCE packet in `frame`.
///
/// Returns `Ok(None)` when the frame is not RoCE, and an error when it is (or may be) RoCE but
/// its headers are inconsistent: [`Error::Truncated`] when the capture ends before the headers
/// that identify RoCE, [`Error::BadLength`] for length fields that contradict each other,
/// [`Error::Malformed`] for too many VLAN tags, IPv4 fragments of RoCE, or a GRH whose next
/// header is not a BTH.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<Option<RoceFrame<'_>>> {
    let mut l2 = L2Summary::default();
    match link {
        LinkType::Ethernet => {
            let Some(eth) = EthernetPacket::new(frame) else {
                return Err(Error::Truncated);
            };
            l2.dst_mac = Some(eth.get_destination().octets());
            l2.src_mac = Some(eth.get_source().octets());
            let ethertype = eth.get_ethertype().0;
            ethertype_payload(frame, ETHERNET_HEADER_LEN, ethertype, l2)
        }
        LinkType::LinuxSll => {
            // pnet's minimum size for SLL/SLL2 leaves out the 8-byte address field: check here.
            if frame.len() < SLL_HEADER_LEN {
                return Err(Error::Truncated);
            }
            let Some(sll) = SLLPacket::new(frame) else {
                return Err(Error::Truncated);
            };
            if sll.get_link_layer_address_len() == 6 {
                let a = sll.get_link_layer_address_raw();
                l2.src_mac = Some([a[0], a[1], a[2], a[3], a[4], a[5]]);
            }
            let ethertype = sll.get_protocol().0;
            ethertype_payload(frame, SLL_HEADER_LEN, ethertype, l2)
        }
        LinkType::LinuxSll2 => {
            if frame.len() < SLL2_HEADER_LEN {
                return Err(Error::Truncated);
            }
            let Some(sll) = SLL2Packet::new(frame) else {
                return Err(Error::Truncated);
            };
            if sll.get_link_layer_address_length() == 6 {
                let a = sll.get_link_layer_address_raw();
                l2.src_mac = Some([a[0], a[1], a[2], a[3], a[4], a[5]]);
            }
            let ethertype = sll.get_protocol_type().0;
            ethertype_payload(frame, SLL2_HEADER_LEN, ethertype, l2)
        }
        LinkType::RawIp => match frame.first().map(|b| b >> 4) {
            Some(4) => ipv4(frame, 0, l2),
            Some(6) => ipv6(frame, 0, l2),
            Some(_) => Ok(None),
            None => Err(Error::Truncated),
        },
        LinkType::Ipv4 => ipv4(frame, 0, l2),
        LinkType::Ipv6 => ipv6(frame, 0, l2),
        LinkType::Other(_) => Ok(None),
    }
}

/// Continues after an EtherType field: VLAN tags, then IPv4, IPv6 or RoCEv1.
fn ethertype_payload(
    frame: &[u8],
    mut at: usize,
    mut ethertype: u16,
    mut l2: L2Summary,
) -> Result<Option<RoceFrame<'_>>> {
    let mut tags = 0;
    while matches!(ethertype, TPID_8021Q | TPID_8021AD | TPID_QINQ) {
        if tags == MAX_VLAN_TAGS {
            return Err(Error::Malformed);
        }
        let Some(tag) = frame.get(at..).and_then(VlanPacket::new) else {
            return Err(Error::Truncated);
        };
        l2.vlans[tags] = Some(VlanTag {
            tpid: ethertype,
            pcp: tag.get_priority_code_point().0,
            dei: tag.get_drop_eligible_indicator() != 0,
            vid: tag.get_vlan_identifier(),
        });
        ethertype = tag.get_ethertype().0;
        at += VLAN_TAG_LEN;
        tags += 1;
    }
    l2.ethertype = ethertype;
    match ethertype {
        ETHERTYPE_IPV4 => ipv4(frame, at, l2),
        ETHERTYPE_IPV6 => ipv6(frame, at, l2),
        ROCE_V1_ETHERTYPE => grh(frame, at, l2),
        _ => Ok(None),
    }
}

/// Reads the UDP header at `at` and decides whether the datagram is RoCEv2. `ip_end` is where
/// the IP datagram ends according to the IP header (possibly beyond the captured bytes).
fn udp(frame: &[u8], at: usize, ip_end: usize) -> Result<Option<(UdpSummary, usize)>> {
    let Some(rest) = frame.get(at..) else {
        return Err(Error::Truncated);
    };
    // The destination port alone decides; it sits in bytes 2..4.
    if rest.len() >= 4 && u16::from_be_bytes([rest[2], rest[3]]) != ROCE_V2_UDP_PORT {
        return Ok(None);
    }
    let Ok(u) = udp_header::Packet::new_checked(rest) else {
        return Err(Error::Truncated);
    };
    let summary = UdpSummary {
        src_port: u.src_port(),
        dst_port: u.dst_port(),
        length: u.length(),
        checksum: u.checksum(),
    };
    let len = summary.length as usize;
    if len < UDP_HEADER_LEN || at + len > ip_end {
        return Err(Error::BadLength);
    }
    Ok(Some((summary, len - UDP_HEADER_LEN)))
}

fn ipv4(frame: &[u8], at: usize, l2: L2Summary) -> Result<Option<RoceFrame<'_>>> {
    let Some(ip) = frame
        .get(at..)
        .and_then(|b| ipv4::Packet::new_checked(b).ok())
    else {
        return Err(Error::Truncated);
    };
    let ihl = ip.header_len();
    // Only a first-fragment UDP datagram with a sane header length can be RoCEv2.
    if ip.version() != 4
        || ihl < IPV4_HEADER_LEN
        || ip.protocol() != IP_PROTO_UDP
        || ip.frag_offset() != 0
    {
        return Ok(None);
    }
    let total = ip.total_len() as usize;
    let more_fragments = ip.more_frags();
    let udp_at = at + ihl;
    let Some((udp, transport_len)) = udp(frame, udp_at, at + total)? else {
        return Ok(None);
    };
    if more_fragments {
        return Err(Error::Malformed);
    }
    let l3 = L3Summary {
        src: IpAddr::V4(ip.src_addr()),
        dst: IpAddr::V4(ip.dst_addr()),
        ip_id: Some(ip.ident()),
        tos: ip.tos(),
        ttl: ip.ttl(),
        flow_label: None,
        dont_fragment: ip.dont_frag(),
        ip_checksum: Some(ip.checksum()),
    };
    Ok(Some(over_udp(
        frame,
        false,
        l2,
        l3,
        udp,
        at,
        udp_at,
        transport_len,
    )))
}

fn ipv6(frame: &[u8], at: usize, l2: L2Summary) -> Result<Option<RoceFrame<'_>>> {
    let Some(ip) = frame
        .get(at..)
        .and_then(|b| ipv6::Packet::new_checked(b).ok())
    else {
        return Err(Error::Truncated);
    };
    if ip.version() != 6 || ip.next_header() != IP_PROTO_UDP {
        return Ok(None);
    }
    let udp_at = at + IPV6_HEADER_LEN;
    let end = udp_at + ip.payload_len() as usize;
    let Some((udp, transport_len)) = udp(frame, udp_at, end)? else {
        return Ok(None);
    };
    let l3 = L3Summary {
        src: IpAddr::V6(ip.src_addr()),
        dst: IpAddr::V6(ip.dst_addr()),
        ip_id: None,
        tos: ip.traffic_class(),
        ttl: ip.hop_limit(),
        flow_label: Some(ip.flow_label()),
        dont_fragment: false,
        ip_checksum: None,
    };
    Ok(Some(over_udp(
        frame,
        true,
        l2,
        l3,
        udp,
        at,
        udp_at,
        transport_len,
    )))
}

/// The RoCEv2 frame whose IP header (IPv6 when `ipv6`, else IPv4) is at `at` and whose UDP
/// header, summarised in `udp`, is at `udp_at`.
#[allow(clippy::too_many_arguments)]
fn over_udp(
    frame: &[u8],
    ipv6: bool,
    l2: L2Summary,
    l3: L3Summary,
    udp: UdpSummary,
    at: usize,
    udp_at: usize,
    transport_len: usize,
) -> RoceFrame<'_> {
    let ip = &frame[at..udp_at];
    let udp_header = &frame[udp_at..udp_at + UDP_HEADER_LEN];
    let network = if ipv6 {
        Network::Ipv6 {
            ip,
            udp: udp_header,
        }
    } else {
        Network::Ipv4 {
            ip,
            udp: udp_header,
        }
    };
    finish(
        RoceVersion::V2,
        frame,
        network,
        l2,
        l3,
        Some(udp),
        at,
        udp_at + UDP_HEADER_LEN,
        transport_len,
    )
}

fn grh(frame: &[u8], at: usize, l2: L2Summary) -> Result<Option<RoceFrame<'_>>> {
    // The GRH has the layout of an IPv6 header (IP version 6 in the first nibble).
    let Some(g) = frame
        .get(at..)
        .and_then(|b| ipv6::Packet::new_checked(b).ok())
    else {
        return Err(Error::Truncated);
    };
    if g.version() != 6 || g.next_header() != GRH_NEXT_HEADER_BTH {
        return Err(Error::Malformed);
    }
    let l3 = L3Summary {
        src: IpAddr::V6(g.src_addr()),
        dst: IpAddr::V6(g.dst_addr()),
        ip_id: None,
        tos: g.traffic_class(),
        ttl: g.hop_limit(),
        flow_label: Some(g.flow_label()),
        dont_fragment: false,
        ip_checksum: None,
    };
    let network = Network::Grh {
        grh: &frame[at..at + GRH_LEN],
    };
    let transport_len = g.payload_len() as usize;
    Ok(Some(finish(
        RoceVersion::V1,
        frame,
        network,
        l2,
        l3,
        None,
        at,
        at + GRH_LEN,
        transport_len,
    )))
}

#[allow(clippy::too_many_arguments)]
fn finish<'a>(
    version: RoceVersion,
    frame: &'a [u8],
    network: Network<'a>,
    l2: L2Summary,
    l3: L3Summary,
    udp: Option<UdpSummary>,
    l3_offset: usize,
    transport_offset: usize,
    transport_len: usize,
) -> RoceFrame<'a> {
    let avail = frame.len().saturating_sub(transport_offset);
    let truncated = avail < transport_len;
    let end = transport_offset + transport_len.min(avail);
    RoceFrame {
        version,
        network,
        l2,
        l3,
        udp,
        transport: frame.get(transport_offset..end).unwrap_or(&[]),
        transport_len,
        l3_offset,
        transport_offset,
        truncated,
    }
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), as RoCE GIDs of
/// IPv4 interfaces are.
pub fn ipv4_mapped(a: &Ipv6Addr) -> Option<Ipv4Addr> {
    a.to_ipv4_mapped()
}

#[cfg(test)]
mod test;
