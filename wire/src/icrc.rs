//! The RoCE invariant CRC (ICRC), generation and verification.
//!
//! CRC-32 (IEEE 802.3, the zlib/`crc32fast` one, *not* CRC-32C) over:
//!
//! 1. eight `0xFF` bytes standing in for the masked InfiniBand LRH;
//! 2. the IP header (RoCEv2) or GRH (RoCEv1) with the variant fields set to ones —
//!    IPv4: TOS (byte 1), TTL (byte 8), header checksum (bytes 10–11); IPv6/GRH: traffic class and
//!    flow label (low nibble of byte 0 and bytes 1–3) and hop limit (byte 7);
//! 3. (RoCEv2) the UDP header with its checksum set to `0xFFFF`;
//! 4. the BTH with byte 4 (FECN, BECN, reserved 6 bits) set to `0xFF`;
//! 5. every remaining transport header, the payload and the pad bytes.
//!
//! The IPv4 identification, total length and flags, the UDP ports and length, and every other
//! BTH bit **are** covered. The CRC value is stored least-significant byte first (like the
//! Ethernet FCS): the trailer bytes read as a little-endian `u32` equal the value computed here.
//! This matches kernel rxe (`rxe_icrc.c`) and ConnectX hardware on every real capture we hold.
use crate::ip::{ipv4, ipv6, udp};
use crate::{Error, Result, ICRC_LEN};

/// Length of the masked IPv4 header we support (no options, as rxe assumes): [`ipv4::HEADER_LEN`].
pub const IPV4_HEADER_LEN: usize = ipv4::HEADER_LEN;
/// Length of the IPv6 header / GRH: [`ipv6::HEADER_LEN`].
pub const IPV6_HEADER_LEN: usize = ipv6::HEADER_LEN;
/// Length of the UDP header: [`udp::HEADER_LEN`].
pub const UDP_HEADER_LEN: usize = udp::HEADER_LEN;
const BTH_LEN: usize = crate::bth::HEADER_LEN;

/// The network header the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network<'a> {
    /// RoCEv2 over IPv4: the 20-byte IPv4 header and the 8-byte UDP header.
    Ipv4 {
        /// IPv4 header (IHL 5).
        ip: &'a [u8],
        /// UDP header.
        udp: &'a [u8],
    },
    /// RoCEv2 over IPv6: the 40-byte IPv6 header and the 8-byte UDP header.
    Ipv6 {
        /// IPv6 header.
        ip: &'a [u8],
        /// UDP header.
        udp: &'a [u8],
    },
    /// RoCEv1: the 40-byte GRH, no UDP.
    Grh {
        /// Global route header.
        grh: &'a [u8],
    },
}

/// Computes the ICRC of `transport`, the bytes from the BTH up to (not including) the ICRC.
///
/// Fails with [`Error::Truncated`] when a header is shorter than it must be, and with
/// [`Error::Malformed`] for IPv4 headers with options (rxe does not support those either).
pub fn compute(net: Network<'_>, transport: &[u8]) -> Result<u32> {
    if transport.len() < BTH_LEN {
        return Err(Error::Truncated);
    }
    // 8 (LRH) + 40 (largest IP/GRH) + 8 (UDP) + 12 (BTH)
    let mut pseudo = [0xFFu8; 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN];
    let mut at = 8;
    match net {
        Network::Ipv4 { ip, udp } => {
            if ip.len() < IPV4_HEADER_LEN || udp.len() < UDP_HEADER_LEN {
                return Err(Error::Truncated);
            }
            if ip.len() != IPV4_HEADER_LEN || ip[ipv4::field::VER_IHL] != ipv4::VER_IHL_NO_OPTIONS {
                return Err(Error::Malformed);
            }
            let h = &mut pseudo[at..at + IPV4_HEADER_LEN];
            h.copy_from_slice(ip);
            mask_ipv4(h);
            at += IPV4_HEADER_LEN;
            at = put_udp(&mut pseudo, at, udp);
        }
        Network::Ipv6 { ip, udp } => {
            if ip.len() < IPV6_HEADER_LEN || udp.len() < UDP_HEADER_LEN {
                return Err(Error::Truncated);
            }
            at = put_grh(&mut pseudo, at, &ip[..IPV6_HEADER_LEN]);
            at = put_udp(&mut pseudo, at, udp);
        }
        Network::Grh { grh } => {
            if grh.len() < IPV6_HEADER_LEN {
                return Err(Error::Truncated);
            }
            at = put_grh(&mut pseudo, at, &grh[..IPV6_HEADER_LEN]);
        }
    }
    let b = &mut pseudo[at..at + BTH_LEN];
    b.copy_from_slice(&transport[..BTH_LEN]);
    b[crate::bth::VARIANT_BYTE] = 0xFF; // FECN, BECN, resv6a
    at += BTH_LEN;
    let mut h = hasher();
    h.update(&pseudo[..at]);
    h.update(&transport[BTH_LEN..]);
    Ok(h.finalize())
}

fn put_udp(pseudo: &mut [u8], at: usize, udp: &[u8]) -> usize {
    let u = &mut pseudo[at..at + UDP_HEADER_LEN];
    u.copy_from_slice(&udp[..UDP_HEADER_LEN]);
    mask_udp(u);
    at + UDP_HEADER_LEN
}

fn put_grh(pseudo: &mut [u8], at: usize, ip: &[u8]) -> usize {
    let h = &mut pseudo[at..at + IPV6_HEADER_LEN];
    h.copy_from_slice(ip);
    mask_ipv6(h);
    at + IPV6_HEADER_LEN
}

/// Sets the IPv4 header's variant fields to ones: TOS, TTL, header checksum.
fn mask_ipv4(h: &mut [u8]) {
    h[ipv4::field::TOS] = 0xFF;
    h[ipv4::field::TTL] = 0xFF;
    h[ipv4::field::CHECKSUM].fill(0xFF);
}

/// Sets the IPv6 header's (or GRH's) variant fields to ones: traffic class and flow label
/// (all of the first word but the version nibble) and hop limit.
fn mask_ipv6(h: &mut [u8]) {
    let w = &mut h[ipv6::field::VER_TC_FLOW];
    w[0] |= 0x0F;
    w[1..].fill(0xFF);
    h[ipv6::field::HOP_LIMIT] = 0xFF;
}

/// Sets the UDP checksum to ones.
fn mask_udp(u: &mut [u8]) {
    u[udp::field::CHECKSUM].fill(0xFF);
}

/// The ICRC of a RoCEv2 datagram sent from `src:sport` to `dst:dport` (IPv4: identification
/// `ipv4_id`, DF set, no options; IPv6: the masked fields need no value), computed from these
/// facts without building the headers: the masked pseudo header and the masked BTH are laid out
/// once in one stack buffer, then one CRC pass covers the rest of `transport` (BTH .. pad, the
/// ICRC itself excluded). The UDP and IP lengths follow from `transport.len()`. Equal to
/// [`compute`] over the headers Linux sends (tested); `None` for mixed address families or a
/// `transport` shorter than a BTH. [`start_udp`] is the same in two steps.
#[inline]
pub fn compute_udp(
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    sport: u16,
    dport: u16,
    ipv4_id: u16,
    transport: &[u8],
) -> Option<u32> {
    let rest = transport.get(BTH_LEN..)?;
    if let (core::net::IpAddr::V4(s), core::net::IpAddr::V4(d), true) = (src, dst, rest.len() < 16)
    {
        // an ACK and the like: what follows the BTH joins the pseudo header's blocks, one CRC
        // pass instead of a second call for a few bytes
        let h = ipv4_start(
            s,
            d,
            sport,
            dport,
            ipv4_id,
            transport.len(),
            transport,
            rest,
        );
        return Some(h.finish());
    }
    let mut p = start_udp(src, dst, sport, dport, ipv4_id, transport.len(), transport)?;
    p.update(rest);
    Some(p.finish())
}

/// An ICRC in progress: the CRC-32 over the masked pseudo header and BTH, to be continued with
/// the bytes after the BTH ([`Partial::update`]) and finished ([`Partial::finish`]).
#[derive(Clone)]
pub struct Partial(crc32fast::Hasher);

impl Partial {
    /// Continues over `bytes` (the packet's bytes after the BTH, in order, ICRC excluded).
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// The ICRC (store it little-endian).
    #[inline]
    pub fn finish(self) -> u32 {
        self.0.finalize()
    }
}

/// The first step of [`compute_udp`] for a datagram whose BTH .. pad will be `transport_len`
/// bytes and whose BTH is `bth[..12]` (the rest of `bth` is not read): everything but the bytes
/// after the BTH, for a caller that has the headers before the payload. (The engine started
/// its ICRC this way before copying the payload in, to keep the CRC's loads of the pseudo
/// header from waiting for the copy's stores; since the pseudo header is written in 16-byte
/// stores, see `store16`, the order made no measurable difference and the engine seals after
/// the copy again.) `None` as [`compute_udp`].
#[inline]
pub fn start_udp(
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    sport: u16,
    dport: u16,
    ipv4_id: u16,
    transport_len: usize,
    bth: &[u8],
) -> Option<Partial> {
    use core::net::IpAddr;
    if transport_len < BTH_LEN || bth.len() < BTH_LEN {
        return None;
    }
    let udp_len = (UDP_HEADER_LEN + transport_len + ICRC_LEN) as u16;
    if let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) {
        return Some(ipv4_start(
            s,
            d,
            sport,
            dport,
            ipv4_id,
            transport_len,
            bth,
            &[],
        ));
    }
    let mut p = [0xFFu8; 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN];
    let at = match (src, dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            // version 6 with traffic class and flow label masked: 6F FF FF FF | len 11 FF
            let ip = &mut p[8..8 + IPV6_HEADER_LEN];
            ipv6::Repr {
                src_addr: s,
                dst_addr: d,
                next_header: crate::ip::PROTOCOL_UDP,
                payload_len: udp_len as usize,
                traffic_class: 0,
                flow_label: 0,
                hop_limit: 0,
            }
            .emit(&mut ipv6::Packet::new_unchecked(&mut *ip));
            mask_ipv6(ip);
            8 + IPV6_HEADER_LEN
        }
        _ => return None,
    };
    // sport dport len FFFF
    let u = &mut p[at..at + UDP_HEADER_LEN];
    udp::Repr {
        src_port: sport,
        dst_port: dport,
        payload_len: transport_len + ICRC_LEN,
    }
    .emit(&mut udp::Packet::new_unchecked(&mut *u));
    mask_udp(u);
    let b = at + UDP_HEADER_LEN;
    p[b..b + BTH_LEN].copy_from_slice(&bth[..BTH_LEN]);
    p[b + 4] = 0xFF; // FECN, BECN, resv6a
    let mut h = hasher();
    h.update(&p[..b + BTH_LEN]);
    Some(Partial(h))
}

// `ipv4_start` writes the BTH's variant byte as 0xFF in place of `bth[4]`, and the IPv4 and
// UDP headers' fields at these offsets (the `ip` module's layout).
const _: () = {
    use ipv4::field as f4;
    use udp::field as fu;
    assert!(crate::bth::VARIANT_BYTE == 4);
    assert!(f4::VER_IHL == 0 && f4::TOS == 1 && f4::TOTAL_LEN.start == 2);
    assert!(f4::IDENT.start == 4 && f4::FLAGS_FRAG.start == 6 && f4::TTL == 8);
    assert!(f4::PROTOCOL == 9 && f4::CHECKSUM.start == 10);
    assert!(f4::SRC_ADDR.start == 12 && f4::DST_ADDR.start == 16 && IPV4_HEADER_LEN == 20);
    assert!(fu::SRC_PORT.start == 0 && fu::DST_PORT.start == 2);
    assert!(fu::LENGTH.start == 4 && fu::CHECKSUM.start == 6);
};

/// [`start_udp`] for IPv4 (`bth` at least 12 bytes, `transport_len` at least 12), plus `tail`
/// (at most 15 bytes: what follows the BTH of a short packet, or nothing). The pseudo header is
/// written as 16-byte blocks, each with one store (`store16`): LRH ones | 45 FF len id 40 00 |
/// FF 11 FFFF src | dst sport dport | len FFFF BTH(12) with the FECN/BECN/resv6a byte masked |
/// tail, zero-padded. The header fields sit where [`ipv4::field`] and [`udp::field`] put them
/// (checked when compiling) with [`mask_ipv4`]'s and [`mask_udp`]'s ones.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ipv4_start(
    s: core::net::Ipv4Addr,
    d: core::net::Ipv4Addr,
    sport: u16,
    dport: u16,
    ipv4_id: u16,
    transport_len: usize,
    bth: &[u8],
    tail: &[u8],
) -> Partial {
    let udp_len = (UDP_HEADER_LEN + transport_len + ICRC_LEN) as u16;
    let tot = (IPV4_HEADER_LEN as u16 + udp_len).to_be_bytes();
    let id = ipv4_id.to_be_bytes();
    let (so, dd) = (s.octets(), d.octets());
    let (sp, dp, ul) = (
        sport.to_be_bytes(),
        dport.to_be_bytes(),
        udp_len.to_be_bytes(),
    );
    let w = |b: [u8; 8]| u64::from_le_bytes(b);
    let b = |i: usize| bth[i];
    let (mut t0, mut t1) = (0u64, 0u64);
    for (i, &x) in tail.iter().take(15).enumerate() {
        if i < 8 {
            t0 |= (x as u64) << (8 * i);
        } else {
            t1 |= (x as u64) << (8 * (i - 8));
        }
    }
    let blocks = [
        (
            u64::MAX,
            w([
                ipv4::VER_IHL_NO_OPTIONS,
                0xFF,
                tot[0],
                tot[1],
                id[0],
                id[1],
                ipv4::FLAGS_DF,
                0,
            ]),
        ),
        (
            w([
                0xFF,
                crate::ip::PROTOCOL_UDP,
                0xFF,
                0xFF,
                so[0],
                so[1],
                so[2],
                so[3],
            ]),
            w([dd[0], dd[1], dd[2], dd[3], sp[0], sp[1], dp[0], dp[1]]),
        ),
        (
            w([ul[0], ul[1], 0xFF, 0xFF, b(0), b(1), b(2), b(3)]),
            w([0xFF, b(5), b(6), b(7), b(8), b(9), b(10), b(11)]),
        ),
        (t0, t1),
    ];
    let mut p = [0u8; 64];
    for (k, (lo, hi)) in blocks.into_iter().enumerate() {
        let (_, rest) = p.split_at_mut(16 * k);
        let (dst, _) = rest
            .split_first_chunk_mut::<16>()
            .expect("64 bytes hold 4 blocks");
        crate::store16::put(dst, lo, hi);
    }
    let mut h = hasher();
    h.update(&p[..48 + tail.len().min(15)]);
    Partial(h)
}

/// A fresh CRC-32 hasher. `crc32fast::Hasher::new` asks the CPU feature cache three times per
/// call; per packet that was about 18 instructions of the ~190 an ICRC of a short packet takes
/// (callgrind, engine benchmark). With `std`, the first hasher is kept and cloned.
#[inline(always)]
fn hasher() -> crc32fast::Hasher {
    #[cfg(feature = "std")]
    {
        static FIRST: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
        FIRST.get_or_init(crc32fast::Hasher::new).clone()
    }
    #[cfg(not(feature = "std"))]
    crc32fast::Hasher::new()
}

/// Reads the ICRC stored at the end of `transport_with_icrc` (little-endian).
pub fn stored(transport_with_icrc: &[u8]) -> Result<u32> {
    let n = transport_with_icrc.len();
    if n < BTH_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    let t = &transport_with_icrc[n - ICRC_LEN..];
    Ok(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
}

/// Verifies the ICRC at the end of `transport_with_icrc` (BTH .. ICRC inclusive).
///
/// # Fuzzing
/// Under `cfg(fuzzing)` verification always succeeds, so fuzzers reach the code behind it.
pub fn verify(net: Network<'_>, transport_with_icrc: &[u8]) -> Result<()> {
    let found = stored(transport_with_icrc)?;
    let body = &transport_with_icrc[..transport_with_icrc.len() - ICRC_LEN];
    let expected = compute(net, body)?;
    if cfg!(fuzzing) || expected == found {
        Ok(())
    } else {
        Err(Error::BadIcrc { expected, found })
    }
}

/// Computes the ICRC over `transport_with_icrc[..len-4]` and writes it into the last 4 bytes.
pub fn fill(net: Network<'_>, transport_with_icrc: &mut [u8]) -> Result<u32> {
    let n = transport_with_icrc.len();
    if n < BTH_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    let crc = compute(net, &transport_with_icrc[..n - ICRC_LEN])?;
    transport_with_icrc[n - ICRC_LEN..].copy_from_slice(&crc.to_le_bytes());
    Ok(crc)
}

/// Verifies a whole RoCEv2/IPv4 datagram (IPv4 header .. ICRC).
pub fn verify_ipv4_datagram(d: &[u8]) -> Result<()> {
    let (net, t) = split_ipv4(d)?;
    verify(net, t)
}

/// Verifies a whole RoCEv2/IPv6 datagram (IPv6 header .. ICRC).
pub fn verify_ipv6_datagram(d: &[u8]) -> Result<()> {
    let (net, t) = split_ipv6(d)?;
    verify(net, t)
}

/// Computes and stores the ICRC of a whole RoCEv2/IPv4 datagram (IPv4 header .. ICRC).
pub fn fill_ipv4_datagram(d: &mut [u8]) -> Result<u32> {
    let at = IPV4_HEADER_LEN + UDP_HEADER_LEN;
    if d.len() < at {
        return Err(Error::Truncated);
    }
    let (hdr, t) = d.split_at_mut(at);
    let (ip, udp) = hdr.split_at(IPV4_HEADER_LEN);
    fill(Network::Ipv4 { ip, udp }, t)
}

/// Computes and stores the ICRC of a whole RoCEv2/IPv6 datagram (IPv6 header .. ICRC).
pub fn fill_ipv6_datagram(d: &mut [u8]) -> Result<u32> {
    let at = IPV6_HEADER_LEN + UDP_HEADER_LEN;
    if d.len() < at {
        return Err(Error::Truncated);
    }
    let (hdr, t) = d.split_at_mut(at);
    let (ip, udp) = hdr.split_at(IPV6_HEADER_LEN);
    fill(Network::Ipv6 { ip, udp }, t)
}

fn split_ipv4(d: &[u8]) -> Result<(Network<'_>, &[u8])> {
    let at = IPV4_HEADER_LEN + UDP_HEADER_LEN;
    if d.len() < at {
        return Err(Error::Truncated);
    }
    Ok((
        Network::Ipv4 {
            ip: &d[..IPV4_HEADER_LEN],
            udp: &d[IPV4_HEADER_LEN..at],
        },
        &d[at..],
    ))
}

fn split_ipv6(d: &[u8]) -> Result<(Network<'_>, &[u8])> {
    let at = IPV6_HEADER_LEN + UDP_HEADER_LEN;
    if d.len() < at {
        return Err(Error::Truncated);
    }
    Ok((
        Network::Ipv6 {
            ip: &d[..IPV6_HEADER_LEN],
            udp: &d[IPV6_HEADER_LEN..at],
        },
        &d[at..],
    ))
}

/// What a receiver does with an IPv4 packet whose identification it cannot see (a plain UDP
/// socket never sees it, yet the ICRC covers it). IPv6 packets, and IPv4 packets whose
/// identification is known, are always verified exactly. The one policy type of the workspace;
/// each layer that receives applies it as documented per variant:
///
/// * the UDP datapath (`roce-udp`'s `check_icrc`, the runtime's `ROCE_ICRC_POLICY`, default
///   [`RecoverId`](IcrcPolicy::RecoverId)) sees the packets of the socket; when it settles the
///   identification (matched, or recovered) it hands it to the NIC with the packet;
/// * the NIC engine (`roce-emu`'s `NicConfig::icrc_policy`, default
///   [`Strict`](IcrcPolicy::Strict)) applies it only to an IPv4 packet that comes without an
///   identification. Over UDP the runtime sets [`Trust`](IcrcPolicy::Trust): the datapath has
///   judged the packet already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IcrcPolicy {
    /// Verify assuming identification 0 (what our own senders, unconnected and DF, put there).
    /// A mismatch is a bad ICRC and the packet is dropped. Right when every peer is this
    /// emulator.
    Strict,
    /// Verify assuming identification 0; on mismatch accept the packet as *not verifiable* and
    /// count it (peers may be kernel rxe or hardware, whose identifications are nonzero). Not the
    /// default: it accepts a corrupted packet as readily as a foreign ID.
    AssumeZeroElseAccept,
    /// Do not check the ICRC of such packets at all; count each as not verifiable. The NIC
    /// engine's setting behind a datapath that has checked already.
    Trust,
    /// Verify assuming identification 0; on mismatch solve the ICRC for the identification: a
    /// consistent one accepts the packet (16-bit instead of 32-bit strength, counted as
    /// recovered), none means a bad ICRC. Works for kernel rxe peers, hardware (every ConnectX,
    /// Huawei and rxe capture in `shared/captures/real` has DF, a 20-byte IPv4 header and, but
    /// for Huawei's, nonzero IDs, all of which this recovers) and GSO segments received without
    /// GRO. The UDP datapath's default: a packet from our own peers costs nothing extra (it
    /// matches for the ID it was sealed for), one with a foreign ID about 30 ns more. The NIC
    /// engine holds no solver: a packet that reaches it without an identification was not
    /// recovered, so a mismatch is a bad ICRC there, as under `Strict`.
    #[default]
    RecoverId,
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::test_hex as hex;

    /// roce-spec-notes B.3 #1 / VECTORS V1: ConnectX-4 Lx CNP, real capture.
    #[test]
    fn connectx_cnp_ipv4() {
        let d = hex("45c2003c718c4000401191610a0011010a001201 000012b700280000
                     8100ffff4000011800000000 00000000000000000000000000000000 82fd002a");
        verify_ipv4_datagram(&d).unwrap();
        let (net, t) = split_ipv4(&d).unwrap();
        assert_eq!(compute(net, &t[..t.len() - 4]).unwrap(), 0x2a00fd82);
        let mut m = d.clone();
        fill_ipv4_datagram(&mut m).unwrap();
        assert_eq!(m, d);
    }

    /// B.3 #2: scapy UC SEND_ONLY, M=1, PadCnt=2.
    #[test]
    fn scapy_uc_send_only_ipv4() {
        let d = hex("45010040047840004011b4d5c0a80007c0a80007 c00012b7002caca2
                     2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e500000 78f353f3");
        verify_ipv4_datagram(&d).unwrap();
    }

    /// B.3 #3: IPv6 RC SEND_ONLY, TC 0x1A, flow label 0x12345.
    #[test]
    fn ipv6_send_only() {
        let d = hex(
            "61a1234500201140 fe800000000000000000000000000001 fe800000000000000000000000000002
                     c12312b700200000 0430ffff000000118000010068656c6c6f000000 d83bd84e",
        );
        verify_ipv6_datagram(&d).unwrap();
        let (net, t) = split_ipv6(&d).unwrap();
        assert_eq!(compute(net, &t[..t.len() - 4]).unwrap(), 0x4ed83bd8);
    }

    /// `compute_udp` from addresses, ports and identification alone gives the ICRC of the real
    /// captures above (IPv4 with a nonzero identification, IPv6 with traffic class, flow label
    /// and hop limit set), and `None` for mixed families or a body shorter than a BTH.
    #[test]
    fn compute_udp_matches_real_datagrams() {
        use core::net::IpAddr;
        let v4 = [
            "45c2003c718c4000401191610a0011010a001201 000012b700280000
             8100ffff4000011800000000 00000000000000000000000000000000 82fd002a",
            "45010040047840004011b4d5c0a80007c0a80007 c00012b7002caca2
             2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e500000 78f353f3",
            "45020030000040004011b74cc0a8010ac0a80114 d00d12b7001c0000
             1100ffff8000001200000100 1f000001 abe1f3b6",
        ];
        for d in v4.map(hex) {
            let src = IpAddr::from(<[u8; 4]>::try_from(&d[12..16]).unwrap());
            let dst = IpAddr::from(<[u8; 4]>::try_from(&d[16..20]).unwrap());
            let be = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
            let t = &d[28..];
            let crc = compute_udp(src, dst, be(20), be(22), be(4), &t[..t.len() - 4]).unwrap();
            assert_eq!(crc, stored(t).unwrap());
            // The identification is covered.
            let other = compute_udp(src, dst, be(20), be(22), be(4) ^ 1, &t[..t.len() - 4]);
            assert_ne!(other, Some(crc));
        }
        let d = hex(
            "61a1234500201140 fe800000000000000000000000000001 fe800000000000000000000000000002
             c12312b700200000 0430ffff000000118000010068656c6c6f000000 d83bd84e",
        );
        let src = IpAddr::from(<[u8; 16]>::try_from(&d[8..24]).unwrap());
        let dst = IpAddr::from(<[u8; 16]>::try_from(&d[24..40]).unwrap());
        let t = &d[48..];
        let crc = compute_udp(src, dst, 0xc123, 4791, 0, &t[..t.len() - 4]).unwrap();
        assert_eq!(crc, 0x4ed83bd8);
        let v4a = IpAddr::from([10u8, 0, 0, 1]);
        assert_eq!(compute_udp(v4a, dst, 1, 4791, 0, &t[..t.len() - 4]), None);
        assert_eq!(compute_udp(v4a, v4a, 1, 4791, 0, &t[..11]), None);
    }

    /// `start_udp` before the payload is in place, then `update` over what follows the BTH,
    /// gives the ICRC of the real capture; the BTH is read when starting (a BTH changed
    /// afterwards is not seen), and a length that does not match changes the result.
    #[test]
    fn start_udp_then_update_matches_real_datagram() {
        use core::net::IpAddr;
        let d = hex("45010040047840004011b4d5c0a80007c0a80007 c00012b7002caca2
             2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e500000 78f353f3");
        let src = IpAddr::from(<[u8; 4]>::try_from(&d[12..16]).unwrap());
        let dst = IpAddr::from(<[u8; 4]>::try_from(&d[16..20]).unwrap());
        let t = &d[28..];
        let n = t.len() - 4;
        // the BTH alone, as a sender has it before the payload copy
        let mut early = t[..n].to_vec();
        early[12..].fill(0);
        let p = start_udp(src, dst, 0xc000, 4791, 0x0478, n, &early).unwrap();
        early[12..].copy_from_slice(&t[12..n]);
        let mut q = p.clone();
        q.update(&early[12..]);
        assert_eq!(q.finish(), stored(t).unwrap());
        // a different declared length covers different IP and UDP lengths
        let mut r = start_udp(src, dst, 0xc000, 4791, 0x0478, n + 4, &early).unwrap();
        r.update(&early[12..]);
        assert_ne!(r.finish(), stored(t).unwrap());
        assert!(start_udp(src, dst, 1, 4791, 0, 11, &early).is_none());
        assert!(start_udp(src, dst, 1, 4791, 0, n, &early[..11]).is_none());
    }

    /// `compute_udp` (IPv4 blocks, short packets in one pass) agrees with `compute` over the
    /// headers Linux would send, for every length after the BTH from 0 to 40 bytes.
    #[test]
    fn compute_udp_agrees_with_compute_for_short_and_long_bodies() {
        use core::net::{IpAddr, Ipv4Addr};
        let (src, dst) = (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(192, 168, 7, 9));
        for n in 0..=40usize {
            let mut t: Vec<u8> = (0..12 + n).map(|i| (i * 37 + n) as u8).collect();
            t[0] = 0x11;
            let udp_len = (8 + t.len() + 4) as u16;
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[1] = 0x12;
            ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
            ip[4..6].copy_from_slice(&0xBEEFu16.to_be_bytes());
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let mut udp = [0u8; 8];
            udp[0..2].copy_from_slice(&0xC0DEu16.to_be_bytes());
            udp[2..4].copy_from_slice(&4791u16.to_be_bytes());
            udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
            let want = compute(Network::Ipv4 { ip: &ip, udp: &udp }, &t).unwrap();
            let got = compute_udp(IpAddr::V4(src), IpAddr::V4(dst), 0xC0DE, 4791, 0xBEEF, &t);
            assert_eq!(got, Some(want), "{n} bytes after the BTH");
        }
    }

    /// B.3 #4: FECN is excluded from the ICRC.
    #[test]
    fn fecn_is_masked_but_psn_is_not() {
        let d = hex("45020030000040004011b74cc0a8010ac0a80114 d00d12b7001c0000
                     1100ffff8000001200000100 1f000001 abe1f3b6");
        verify_ipv4_datagram(&d).unwrap();
        let mut m = d.clone();
        m[28 + 4] = 0x40; // FECN off, BECN on: still valid
        m[1] = 0x00; // TOS
        m[8] = 0x01; // TTL
        m[10] = 0x12; // checksum
        m[26] = 0x55; // UDP checksum
        verify_ipv4_datagram(&m).unwrap();
        for covered in [4usize, 5, 2, 3, 21, 28 + 11, 28 + 1, 28 + 8, 28 + 13] {
            let mut m = d.clone();
            m[covered] ^= 0x01;
            assert!(
                matches!(verify_ipv4_datagram(&m), Err(Error::BadIcrc { .. })),
                "byte {covered} must be covered"
            );
        }
    }

    /// VECTORS V8: ConnectX RoCEv1 (GRH) RC ACK, checked through the GRH path.
    #[test]
    fn roce_v1_grh() {
        // GRH: version 6, TClass 0x02, flow 0, paylen, nxthdr 0x1b, hop 64; then BTH+AETH+ICRC.
        let mut grh = [0u8; 40];
        grh[0] = 0x60;
        grh[1] = 0x20;
        grh[4..6].copy_from_slice(&20u16.to_be_bytes());
        grh[6] = 0x1b;
        grh[7] = 64;
        let mut t = hex("1100ffff00000012 00000100 1f000001 00000000");
        fill(Network::Grh { grh: &grh }, &mut t).unwrap();
        verify(Network::Grh { grh: &grh }, &t).unwrap();
        grh[1] = 0x2F; // traffic class/flow label masked
        grh[7] = 1; // hop limit masked
        verify(Network::Grh { grh: &grh }, &t).unwrap();
        grh[8] ^= 1; // source GID covered
        assert!(verify(Network::Grh { grh: &grh }, &t).is_err());
    }

    #[test]
    fn short_inputs_error() {
        assert_eq!(verify_ipv4_datagram(&[0x45; 30]), Err(Error::Truncated));
        assert_eq!(stored(&[0; 15]), Err(Error::Truncated));
        let mut ip = [0u8; 24];
        ip[0] = 0x46;
        assert_eq!(
            compute(
                Network::Ipv4 {
                    ip: &ip,
                    udp: &[0; 8]
                },
                &[0; 12]
            ),
            Err(Error::Malformed)
        );
    }
}
