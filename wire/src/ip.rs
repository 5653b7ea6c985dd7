//! The IPv4, IPv6 and UDP headers a RoCEv2 datagram travels in: one module per header
//! ([`ipv4`], [`ipv6`], [`udp`]), each a zero-copy view with its `field` offsets and a `Repr`
//! whose `emit` writes the header as Linux and rxe send it. The ICRC's masks ([`crate::icrc`]),
//! the frame builders and parsers ([`crate::frame`], with `std`), the headers the UDP datapath
//! rebuilds for the ICRC and the GRH the engine writes ahead of a UD receive all use these.
//!
//! ```text
//! IPv4 (20 bytes, no options)
//!  0        | 1   | 2-3       | 4-5   | 6-7            | 8   | 9        | 10-11    | 12-15 | 16-19
//!  Ver IHL  | TOS | Total len | Ident | Flags FragOff  | TTL | Protocol | Checksum | Src   | Dst
//! IPv6 (40 bytes)
//!  0-3                          | 4-5         | 6        | 7         | 8-23 | 24-39
//!  Ver TrafficClass FlowLabel   | Payload len | Next hdr | Hop limit | Src  | Dst
//! UDP (8 bytes)
//!  0-1      | 2-3      | 4-5    | 6-7
//!  Src port | Dst port | Length | Checksum
//! ```

/// IP protocol number (IPv4) / next header (IPv6) of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// IPv4 header (RFC 791) without options, as RoCEv2 uses it.
pub mod ipv4 {
    use crate::field::*;
    use crate::{Error, Result};
    use core::net::Ipv4Addr;

    /// Byte offsets of the IPv4 header's fields.
    pub mod field {
        use crate::field::Field;
        /// Version (high nibble) and header length in 32-bit words (low nibble).
        pub const VER_IHL: usize = 0;
        /// Type of service (DSCP and ECN); masked by the ICRC.
        pub const TOS: usize = 1;
        /// Total length (header and payload).
        pub const TOTAL_LEN: Field = 2..4;
        /// Identification; covered by the ICRC.
        pub const IDENT: Field = 4..6;
        /// Flags (reserved, DF, MF) and fragment offset.
        pub const FLAGS_FRAG: Field = 6..8;
        /// Time to live; masked by the ICRC.
        pub const TTL: usize = 8;
        /// Protocol.
        pub const PROTOCOL: usize = 9;
        /// Header checksum; masked by the ICRC.
        pub const CHECKSUM: Field = 10..12;
        /// Source address.
        pub const SRC_ADDR: Field = 12..16;
        /// Destination address.
        pub const DST_ADDR: Field = 16..20;
    }

    /// Length of the header without options (the only one RoCEv2 senders use; rxe assumes it).
    pub const HEADER_LEN: usize = 20;
    /// The first byte of a header without options: version 4, IHL 5.
    pub const VER_IHL_NO_OPTIONS: u8 = 0x45;
    /// The flags byte (the high byte of [`field::FLAGS_FRAG`]) with DF set and offset 0, as
    /// rxe and Linux send every RoCEv2 datagram.
    pub const FLAGS_DF: u8 = 0x40;
    const DF: u16 = 0x4000;
    const MF: u16 = 0x2000;

    crate::field::fixed_view!(HEADER_LEN, "IPv4 header");

    impl<T: AsRef<[u8]>> Packet<T> {
        /// IP version (4).
        #[inline]
        pub fn version(&self) -> u8 {
            self.buffer.as_ref()[field::VER_IHL] >> 4
        }
        /// Header length in bytes (IHL × 4).
        #[inline]
        pub fn header_len(&self) -> usize {
            (self.buffer.as_ref()[field::VER_IHL] & 0x0F) as usize * 4
        }
        /// Type of service.
        #[inline]
        pub fn tos(&self) -> u8 {
            self.buffer.as_ref()[field::TOS]
        }
        /// Total length.
        #[inline]
        pub fn total_len(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::TOTAL_LEN)
        }
        /// Identification.
        #[inline]
        pub fn ident(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::IDENT)
        }
        /// Don't fragment.
        #[inline]
        pub fn dont_frag(&self) -> bool {
            u16_at(self.buffer.as_ref(), field::FLAGS_FRAG) & DF != 0
        }
        /// More fragments.
        #[inline]
        pub fn more_frags(&self) -> bool {
            u16_at(self.buffer.as_ref(), field::FLAGS_FRAG) & MF != 0
        }
        /// Fragment offset in 8-byte units.
        #[inline]
        pub fn frag_offset(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x1FFF
        }
        /// Time to live.
        #[inline]
        pub fn ttl(&self) -> u8 {
            self.buffer.as_ref()[field::TTL]
        }
        /// Protocol.
        #[inline]
        pub fn protocol(&self) -> u8 {
            self.buffer.as_ref()[field::PROTOCOL]
        }
        /// Header checksum as stored.
        #[inline]
        pub fn checksum(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::CHECKSUM)
        }
        /// Source address.
        #[inline]
        pub fn src_addr(&self) -> Ipv4Addr {
            Ipv4Addr::from(u32_at(self.buffer.as_ref(), field::SRC_ADDR))
        }
        /// Destination address.
        #[inline]
        pub fn dst_addr(&self) -> Ipv4Addr {
            Ipv4Addr::from(u32_at(self.buffer.as_ref(), field::DST_ADDR))
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        /// Sets version 4 and IHL 5 (no options).
        #[inline]
        pub fn set_ver_ihl_no_options(&mut self) {
            self.buffer.as_mut()[field::VER_IHL] = VER_IHL_NO_OPTIONS;
        }
        /// Sets the type of service.
        #[inline]
        pub fn set_tos(&mut self, v: u8) {
            self.buffer.as_mut()[field::TOS] = v;
        }
        /// Sets the total length.
        #[inline]
        pub fn set_total_len(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::TOTAL_LEN, v)
        }
        /// Sets the identification.
        #[inline]
        pub fn set_ident(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::IDENT, v)
        }
        /// Sets DF (MF clear, fragment offset 0: a whole datagram).
        #[inline]
        pub fn set_unfragmented(&mut self, dont_frag: bool) {
            set_u16(
                self.buffer.as_mut(),
                field::FLAGS_FRAG,
                if dont_frag { DF } else { 0 },
            )
        }
        /// Sets the time to live.
        #[inline]
        pub fn set_ttl(&mut self, v: u8) {
            self.buffer.as_mut()[field::TTL] = v;
        }
        /// Sets the protocol.
        #[inline]
        pub fn set_protocol(&mut self, v: u8) {
            self.buffer.as_mut()[field::PROTOCOL] = v;
        }
        /// Sets the stored checksum.
        #[inline]
        pub fn set_checksum(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::CHECKSUM, v)
        }
        /// Sets the source address.
        #[inline]
        pub fn set_src_addr(&mut self, a: Ipv4Addr) {
            self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
        }
        /// Sets the destination address.
        #[inline]
        pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
            self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
        }
        /// Computes and stores the header checksum of the first [`HEADER_LEN`] bytes.
        #[inline]
        pub fn fill_checksum(&mut self) {
            let c = checksum(&self.buffer.as_ref()[..HEADER_LEN]);
            self.set_checksum(c);
        }
    }

    /// The header checksum (RFC 791) of `header` (any length; an odd last byte is padded with
    /// zero) with its checksum field taken as zero.
    pub fn checksum(header: &[u8]) -> u16 {
        let mut s = 0u32;
        for (i, w) in header.chunks(2).enumerate() {
            if i == field::CHECKSUM.start / 2 {
                continue;
            }
            s += u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)]) as u32;
        }
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        !(s as u16)
    }

    /// High-level IPv4 header of a whole (unfragmented) datagram without options.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Source address.
        pub src_addr: Ipv4Addr,
        /// Destination address.
        pub dst_addr: Ipv4Addr,
        /// Protocol ([`PROTOCOL_UDP`](super::PROTOCOL_UDP) for RoCEv2).
        pub protocol: u8,
        /// Bytes after the header (the UDP datagram); the total length is 20 more, written as
        /// 16 bits.
        pub payload_len: usize,
        /// Identification.
        pub ident: u16,
        /// Don't fragment.
        pub dont_frag: bool,
        /// Type of service.
        pub tos: u8,
        /// Time to live.
        pub ttl: u8,
    }

    impl Repr {
        /// Parses a header: [`Error::Malformed`] unless it is version 4 without options and
        /// not a fragment. The checksum is not judged.
        pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
            p.check_len()?;
            if p.version() != 4 || p.header_len() != HEADER_LEN {
                return Err(Error::Malformed);
            }
            if p.more_frags() || p.frag_offset() != 0 {
                return Err(Error::Malformed);
            }
            let total = p.total_len() as usize;
            if total < HEADER_LEN {
                return Err(Error::BadLength);
            }
            Ok(Repr {
                src_addr: p.src_addr(),
                dst_addr: p.dst_addr(),
                protocol: p.protocol(),
                payload_len: total - HEADER_LEN,
                ident: p.ident(),
                dont_frag: p.dont_frag(),
                tos: p.tos(),
                ttl: p.ttl(),
            })
        }
        /// Always [`HEADER_LEN`].
        pub const fn buffer_len(&self) -> usize {
            HEADER_LEN
        }
        /// Writes the header, its checksum included.
        #[inline]
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
            p.set_ver_ihl_no_options();
            p.set_tos(self.tos);
            p.set_total_len((HEADER_LEN + self.payload_len) as u16);
            p.set_ident(self.ident);
            p.set_unfragmented(self.dont_frag);
            p.set_ttl(self.ttl);
            p.set_protocol(self.protocol);
            p.set_src_addr(self.src_addr);
            p.set_dst_addr(self.dst_addr);
            p.fill_checksum();
        }
    }
}

/// IPv6 header (RFC 8200); its layout is also the InfiniBand GRH's (RoCEv1).
pub mod ipv6 {
    use crate::field::*;
    use crate::{Error, Result};
    use core::net::Ipv6Addr;

    /// Byte offsets of the IPv6 header's fields.
    pub mod field {
        use crate::field::Field;
        /// Version (4 bits), traffic class (8) and flow label (20); traffic class and flow
        /// label are masked by the ICRC.
        pub const VER_TC_FLOW: Field = 0..4;
        /// Payload length (bytes after this header).
        pub const PAYLOAD_LEN: Field = 4..6;
        /// Next header.
        pub const NEXT_HEADER: usize = 6;
        /// Hop limit; masked by the ICRC.
        pub const HOP_LIMIT: usize = 7;
        /// Source address.
        pub const SRC_ADDR: Field = 8..24;
        /// Destination address.
        pub const DST_ADDR: Field = 24..40;
    }

    /// Length of the header (and of the GRH).
    pub const HEADER_LEN: usize = 40;

    crate::field::fixed_view!(HEADER_LEN, "IPv6 header");

    impl<T: AsRef<[u8]>> Packet<T> {
        #[inline]
        fn word0(&self) -> u32 {
            u32_at(self.buffer.as_ref(), field::VER_TC_FLOW)
        }
        /// IP version (6).
        #[inline]
        pub fn version(&self) -> u8 {
            (self.word0() >> 28) as u8
        }
        /// Traffic class.
        #[inline]
        pub fn traffic_class(&self) -> u8 {
            (self.word0() >> 20) as u8
        }
        /// Flow label (20 bits).
        #[inline]
        pub fn flow_label(&self) -> u32 {
            self.word0() & 0xF_FFFF
        }
        /// Payload length.
        #[inline]
        pub fn payload_len(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::PAYLOAD_LEN)
        }
        /// Next header.
        #[inline]
        pub fn next_header(&self) -> u8 {
            self.buffer.as_ref()[field::NEXT_HEADER]
        }
        /// Hop limit.
        #[inline]
        pub fn hop_limit(&self) -> u8 {
            self.buffer.as_ref()[field::HOP_LIMIT]
        }
        /// Source address.
        #[inline]
        pub fn src_addr(&self) -> Ipv6Addr {
            let mut a = [0u8; 16];
            a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
            Ipv6Addr::from(a)
        }
        /// Destination address.
        #[inline]
        pub fn dst_addr(&self) -> Ipv6Addr {
            let mut a = [0u8; 16];
            a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
            Ipv6Addr::from(a)
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        /// Sets version 6, the traffic class and the flow label (its low 20 bits).
        #[inline]
        pub fn set_ver_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
            let w = 6u32 << 28 | (traffic_class as u32) << 20 | (flow_label & 0xF_FFFF);
            set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w)
        }
        /// Sets the payload length.
        #[inline]
        pub fn set_payload_len(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, v)
        }
        /// Sets the next header.
        #[inline]
        pub fn set_next_header(&mut self, v: u8) {
            self.buffer.as_mut()[field::NEXT_HEADER] = v;
        }
        /// Sets the hop limit.
        #[inline]
        pub fn set_hop_limit(&mut self, v: u8) {
            self.buffer.as_mut()[field::HOP_LIMIT] = v;
        }
        /// Sets the source address.
        #[inline]
        pub fn set_src_addr(&mut self, a: Ipv6Addr) {
            self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
        }
        /// Sets the destination address.
        #[inline]
        pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
            self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
        }
    }

    /// High-level IPv6 header (no extension headers).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Source address.
        pub src_addr: Ipv6Addr,
        /// Destination address.
        pub dst_addr: Ipv6Addr,
        /// Next header ([`PROTOCOL_UDP`](super::PROTOCOL_UDP) for RoCEv2).
        pub next_header: u8,
        /// Bytes after the header, written as 16 bits.
        pub payload_len: usize,
        /// Traffic class.
        pub traffic_class: u8,
        /// Flow label (20 bits; Linux sends 0 for an unlabelled socket).
        pub flow_label: u32,
        /// Hop limit.
        pub hop_limit: u8,
    }

    impl Repr {
        /// Parses a header: [`Error::Malformed`] unless it is version 6.
        pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
            p.check_len()?;
            if p.version() != 6 {
                return Err(Error::Malformed);
            }
            Ok(Repr {
                src_addr: p.src_addr(),
                dst_addr: p.dst_addr(),
                next_header: p.next_header(),
                payload_len: p.payload_len() as usize,
                traffic_class: p.traffic_class(),
                flow_label: p.flow_label(),
                hop_limit: p.hop_limit(),
            })
        }
        /// Always [`HEADER_LEN`].
        pub const fn buffer_len(&self) -> usize {
            HEADER_LEN
        }
        /// Writes the header.
        #[inline]
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
            p.set_ver_tc_flow(self.traffic_class, self.flow_label);
            p.set_payload_len(self.payload_len as u16);
            p.set_next_header(self.next_header);
            p.set_hop_limit(self.hop_limit);
            p.set_src_addr(self.src_addr);
            p.set_dst_addr(self.dst_addr);
        }
    }
}

/// UDP header (RFC 768).
pub mod udp {
    use crate::field::*;
    use crate::{Error, Result};

    /// Byte offsets of the UDP header's fields.
    pub mod field {
        use crate::field::Field;
        /// Source port; covered by the ICRC.
        pub const SRC_PORT: Field = 0..2;
        /// Destination port (4791 for RoCEv2).
        pub const DST_PORT: Field = 2..4;
        /// Length (header and payload).
        pub const LENGTH: Field = 4..6;
        /// Checksum; masked by the ICRC.
        pub const CHECKSUM: Field = 6..8;
    }

    /// Length of the header.
    pub const HEADER_LEN: usize = 8;

    crate::field::fixed_view!(HEADER_LEN, "UDP header");

    impl<T: AsRef<[u8]>> Packet<T> {
        /// Source port.
        #[inline]
        pub fn src_port(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::SRC_PORT)
        }
        /// Destination port.
        #[inline]
        pub fn dst_port(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::DST_PORT)
        }
        /// Length (header and payload).
        #[inline]
        pub fn length(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::LENGTH)
        }
        /// Checksum as stored (0: none).
        #[inline]
        pub fn checksum(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::CHECKSUM)
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        /// Sets the source port.
        #[inline]
        pub fn set_src_port(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::SRC_PORT, v)
        }
        /// Sets the destination port.
        #[inline]
        pub fn set_dst_port(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::DST_PORT, v)
        }
        /// Sets the length.
        #[inline]
        pub fn set_length(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::LENGTH, v)
        }
        /// Sets the checksum.
        #[inline]
        pub fn set_checksum(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::CHECKSUM, v)
        }
    }

    /// High-level UDP header. Its checksum is not kept: [`Repr::emit`] writes 0 (none), what
    /// rxe and a `SO_NO_CHECK` socket send; the ICRC masks it anyway.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Source port.
        pub src_port: u16,
        /// Destination port.
        pub dst_port: u16,
        /// Bytes after the header (BTH .. ICRC for RoCEv2); the length is 8 more, written as
        /// 16 bits.
        pub payload_len: usize,
    }

    impl Repr {
        /// Parses a header: [`Error::BadLength`] when its length is below 8.
        pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
            p.check_len()?;
            let len = p.length() as usize;
            if len < HEADER_LEN {
                return Err(Error::BadLength);
            }
            Ok(Repr {
                src_port: p.src_port(),
                dst_port: p.dst_port(),
                payload_len: len - HEADER_LEN,
            })
        }
        /// Always [`HEADER_LEN`].
        pub const fn buffer_len(&self) -> usize {
            HEADER_LEN
        }
        /// Writes the header, checksum 0.
        #[inline]
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
            p.set_src_port(self.src_port);
            p.set_dst_port(self.dst_port);
            p.set_length((HEADER_LEN + self.payload_len) as u16);
            p.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::test_hex as hex;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// roce-spec-notes B.3 #4 (an RC ACK, 192.168.1.10 → 192.168.1.20): the IPv4 and UDP
    /// headers parse to their fields and emit back byte for byte, checksum included.
    #[test]
    fn ipv4_and_udp_round_trip_a_real_datagram() {
        let d = hex("45020030000040004011b74cc0a8010ac0a80114 d00d12b7001c0000");
        let p = ipv4::Packet::new_checked(&d[..20]).unwrap();
        let r = ipv4::Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            ipv4::Repr {
                src_addr: Ipv4Addr::new(192, 168, 1, 10),
                dst_addr: Ipv4Addr::new(192, 168, 1, 20),
                protocol: PROTOCOL_UDP,
                payload_len: 0x30 - 20,
                ident: 0,
                dont_frag: true,
                tos: 2,
                ttl: 64,
            }
        );
        assert_eq!(p.checksum(), ipv4::checksum(&d[..20]));
        let mut out = [0xAAu8; 28];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut out[..20]));
        let u = udp::Repr::parse(&udp::Packet::new_checked(&d[20..28]).unwrap()).unwrap();
        assert_eq!((u.src_port, u.dst_port, u.payload_len), (0xd00d, 4791, 20));
        u.emit(&mut udp::Packet::new_unchecked(&mut out[20..]));
        assert_eq!(&out[..], &d[..]);
        // what parse refuses
        let mut m = d.clone();
        m[0] = 0x46;
        let p = ipv4::Packet::new_checked(&m[..24]).unwrap();
        assert_eq!(ipv4::Repr::parse(&p), Err(crate::Error::Malformed));
        let mut m = d.clone();
        m[6] = 0x20; // MF
        let p = ipv4::Packet::new_checked(&m[..20]).unwrap();
        assert_eq!(ipv4::Repr::parse(&p), Err(crate::Error::Malformed));
        assert!(ipv4::Packet::new_checked(&d[..19]).is_err());
        assert!(udp::Packet::new_checked(&d[20..27]).is_err());
        let short = hex("d00d12b700070000");
        let p = udp::Packet::new_checked(&short[..]).unwrap();
        assert_eq!(udp::Repr::parse(&p), Err(crate::Error::BadLength));
    }

    /// roce-spec-notes B.3 #3 (IPv6, traffic class 0x1A, flow label 0x12345): the header
    /// parses to its fields and emits back byte for byte.
    #[test]
    fn ipv6_round_trips_a_real_header() {
        let d = hex(
            "61a1234500201140 fe800000000000000000000000000001 fe800000000000000000000000000002",
        );
        let p = ipv6::Packet::new_checked(&d[..]).unwrap();
        let r = ipv6::Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            ipv6::Repr {
                src_addr: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
                dst_addr: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
                next_header: PROTOCOL_UDP,
                payload_len: 0x20,
                traffic_class: 0x1A,
                flow_label: 0x12345,
                hop_limit: 64,
            }
        );
        let mut out = [0u8; 40];
        r.emit(&mut ipv6::Packet::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &d[..]);
        let mut m = d.clone();
        m[0] = 0x41;
        let p = ipv6::Packet::new_checked(&m[..]).unwrap();
        assert_eq!(ipv6::Repr::parse(&p), Err(crate::Error::Malformed));
        assert!(ipv6::Packet::new_checked(&d[..39]).is_err());
    }

    /// The checksum of a known header (RFC 1071's example style: a TCP SYN's IPv4 header), and
    /// of an odd length (the last byte padded with zero).
    #[test]
    fn ipv4_checksum_known_values() {
        let h = hex("4500003c1c4640004006b1e6ac100a63ac100a0c");
        assert_eq!(ipv4::checksum(&h), 0xb1e6);
        assert_eq!(ipv4::checksum(&[0x12, 0x34, 0x56]), !(0x1234u16 + 0x5600));
    }
}
