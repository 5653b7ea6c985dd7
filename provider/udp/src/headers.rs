//! The IPv4/IPv6 and UDP headers the kernel puts in front of our payload, rebuilt byte for byte
//! so that [`roce_wire::icrc`] can be computed on the send side and checked on the receive side.
//!
//! A UDP socket never sees the IP header. Everything the ICRC covers in it is known on both
//! sides **except the IPv4 identification** on receive:
//!
//! | field (IPv4) | send side | receive side (UDP socket) |
//! |---|---|---|
//! | version/IHL, protocol 17, DF | fixed | fixed |
//! | total length, UDP length | 28 + payload | 28 + payload |
//! | addresses, ports | known | `recvmmsg` name + `IP_PKTINFO` |
//! | identification | 0 for our unconnected DF sends (see `udp/README.md`) | **unknown**: assumed 0 |
//! | TOS, TTL, checksums | masked by the ICRC | masked |
//!
//! Kernel rxe picks the identification with `__ip_select_ident` (nonzero, changing), so an
//! IPv4 packet from kernel rxe cannot be fully (32-bit) ICRC-verified from a UDP socket:
//! [`IcrcPolicy`] says what to do then. [`IcrcPolicy::RecoverId`] (the default) solves the ICRC
//! for the identification ([`recover_ipv4_id`], 16-bit strength: a corrupted packet passes with
//! probability 2⁻¹⁶); `AssumeZeroElseAccept` accepts such packets unverified and
//! [`IcrcCounters::not_verifiable`] counts them. IPv6 has no identification and masks traffic class, flow label and hop
//! limit, so it is always verifiable.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};

use roce_wire::icrc::{self, Network, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN};
use roce_wire::ip;

/// The IP and UDP headers of one datagram as they appear on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireHeaders {
    ip: [u8; IPV6_HEADER_LEN],
    ip_len: u8,
    udp: [u8; UDP_HEADER_LEN],
}

/// Facts needed to rebuild the headers of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderFacts {
    /// IP source address.
    pub src: IpAddr,
    /// IP destination address (same family as `src`).
    pub dst: IpAddr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port (4791 for RoCEv2).
    pub dport: u16,
    /// UDP payload length: BTH .. ICRC inclusive.
    pub payload_len: usize,
    /// IPv4 identification (ignored for IPv6).
    pub ip_id: u16,
    /// IPv4 TOS / IPv6 traffic class (masked by the ICRC).
    pub tos: u8,
    /// TTL / hop limit (masked by the ICRC).
    pub ttl: u8,
}

impl WireHeaders {
    /// Builds the headers with [`roce_wire::ip`]'s: IPv4 with DF and its header checksum,
    /// IPv6 with flow label 0 (what Linux sends for an unlabelled socket), UDP checksum 0 (what
    /// `SO_NO_CHECK` sends; masked by the ICRC anyway). Mixed address families fall back to
    /// IPv6 with mapped addresses.
    pub fn new(f: &HeaderFacts) -> WireHeaders {
        let mut udp = [0u8; UDP_HEADER_LEN];
        ip::udp::Repr {
            src_port: f.sport,
            dst_port: f.dport,
            payload_len: f.payload_len,
        }
        .emit(&mut ip::udp::Packet::new_unchecked(&mut udp[..]));
        let mut ip_bytes = [0u8; IPV6_HEADER_LEN];
        let ip_len = match (f.src, f.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                ip::ipv4::Repr {
                    src_addr: s,
                    dst_addr: d,
                    protocol: ip::PROTOCOL_UDP,
                    payload_len: UDP_HEADER_LEN + f.payload_len,
                    ident: f.ip_id,
                    dont_frag: true,
                    tos: f.tos,
                    ttl: f.ttl,
                }
                .emit(&mut ip::ipv4::Packet::new_unchecked(&mut ip_bytes[..]));
                IPV4_HEADER_LEN
            }
            (s, d) => {
                ip::ipv6::Repr {
                    src_addr: to_v6(s),
                    dst_addr: to_v6(d),
                    next_header: ip::PROTOCOL_UDP,
                    payload_len: UDP_HEADER_LEN + f.payload_len,
                    traffic_class: f.tos,
                    flow_label: 0,
                    hop_limit: f.ttl,
                }
                .emit(&mut ip::ipv6::Packet::new_unchecked(&mut ip_bytes[..]));
                IPV6_HEADER_LEN
            }
        };
        WireHeaders {
            ip: ip_bytes,
            ip_len: ip_len as u8,
            udp,
        }
    }

    /// The IP header bytes (20 or 40).
    pub fn ip(&self) -> &[u8] {
        &self.ip[..self.ip_len as usize]
    }

    /// The UDP header bytes.
    pub fn udp(&self) -> &[u8] {
        &self.udp
    }

    /// True for IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.ip_len as usize == IPV4_HEADER_LEN
    }

    /// The view `icrc::compute`/`verify`/`fill` take.
    pub fn network(&self) -> Network<'_> {
        if self.is_ipv4() {
            Network::Ipv4 {
                ip: self.ip(),
                udp: &self.udp,
            }
        } else {
            Network::Ipv6 {
                ip: self.ip(),
                udp: &self.udp,
            }
        }
    }

    /// Computes and stores the ICRC in the last 4 bytes of `payload` (BTH .. ICRC).
    pub fn fill_icrc(&self, payload: &mut [u8]) -> roce_wire::Result<u32> {
        icrc::fill(self.network(), payload)
    }

    /// Verifies the ICRC at the end of `payload`.
    pub fn verify_icrc(&self, payload: &[u8]) -> roce_wire::Result<()> {
        icrc::verify(self.network(), payload)
    }
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped(),
        IpAddr::V6(v) => v,
    }
}

/// The IPv4 header checksum (RFC 791) of `h` with its checksum field taken as zero.
pub use roce_wire::ip::ipv4::checksum as ipv4_checksum;

/// What a receiver does with IPv4 packets whose identification it cannot see: the workspace's
/// one policy type, defined with the ICRC in `roce-wire`; here [`check_icrc`] applies it, and
/// [`IcrcPolicy::RecoverId`] solves with [`recover_ipv4_id`].
pub use roce_wire::icrc::IcrcPolicy;

/// The outcome of an ICRC check on receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcVerdict {
    /// The ICRC matched.
    Verified,
    /// The ICRC did not match and the policy says drop.
    Bad,
    /// Accepted without verification (IPv4 identification unknown).
    NotVerifiable,
    /// The ICRC matches for exactly one IPv4 identification, this one ([`IcrcPolicy::RecoverId`]).
    RecoveredId(u16),
}

impl IcrcVerdict {
    /// True when the packet should be processed.
    pub fn accept(self) -> bool {
        !matches!(self, IcrcVerdict::Bad)
    }
}

/// Counters of receive-side ICRC outcomes (relaxed atomics; share with `Arc`).
#[derive(Debug, Default)]
pub struct IcrcCounters {
    /// Packets whose ICRC matched.
    pub verified: AtomicU64,
    /// Packets dropped for a bad ICRC.
    pub bad: AtomicU64,
    /// Packets accepted although the ICRC could not be verified ("ICRC not verifiable").
    pub not_verifiable: AtomicU64,
    /// Packets accepted after recovering their IPv4 identification from the ICRC.
    pub recovered: AtomicU64,
}

impl IcrcCounters {
    /// Counts one outcome.
    pub fn count(&self, v: IcrcVerdict) {
        let c = match v {
            IcrcVerdict::Verified => &self.verified,
            IcrcVerdict::Bad => &self.bad,
            IcrcVerdict::NotVerifiable => &self.not_verifiable,
            IcrcVerdict::RecoveredId(_) => &self.recovered,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot `(verified, bad, not_verifiable)`.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.verified.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
            self.not_verifiable.load(Ordering::Relaxed),
        )
    }
}

/// Checks the ICRC of a received payload whose headers were rebuilt as `h`, under `policy`,
/// counting the outcome. `ip_id_known`: the identification in `h` is the real one (raw capture).
pub fn check_icrc(
    h: &WireHeaders,
    ip_id_known: bool,
    payload: &[u8],
    policy: IcrcPolicy,
    counters: &IcrcCounters,
) -> IcrcVerdict {
    let exact = !h.is_ipv4() || ip_id_known;
    icrc_verdict(
        exact,
        policy,
        || h.verify_icrc(payload).is_ok(),
        || recover_ipv4_id(h, payload),
        counters,
    )
}

/// The policy of [`check_icrc`], apart from how the ICRC is computed: `matches` says whether
/// the stored ICRC is the one expected (asked at most once, and not at all under `Trust` when
/// the ID is unknown), `recover` solves for the IPv4 identification (`RecoverId` only).
/// `exact`: nothing covered is unknown (IPv6, or the real IPv4 ID). Counts the outcome.
pub(crate) fn icrc_verdict(
    exact: bool,
    policy: IcrcPolicy,
    matches: impl FnOnce() -> bool,
    recover: impl FnOnce() -> Option<u16>,
    counters: &IcrcCounters,
) -> IcrcVerdict {
    let v = if exact {
        if matches() {
            IcrcVerdict::Verified
        } else {
            IcrcVerdict::Bad
        }
    } else if policy == IcrcPolicy::Trust {
        IcrcVerdict::NotVerifiable
    } else if matches() {
        IcrcVerdict::Verified
    } else {
        match policy {
            IcrcPolicy::RecoverId => match recover() {
                Some(id) => IcrcVerdict::RecoveredId(id),
                None => IcrcVerdict::Bad,
            },
            IcrcPolicy::Strict => IcrcVerdict::Bad,
            _ => IcrcVerdict::NotVerifiable,
        }
    };
    counters.count(v);
    v
}

/// The IPv4 identification the kernel gives segment `k` of one GSO send (one `sendmmsg` message)
/// from an unconnected DF socket: the segmentation code (`inet_gso_segment`) numbers the
/// segments `id, id+1, ...` from the super-packet's ID, which is 0. Plain sends: 0.
/// Established by capture (`capture_tests::capture_gso_segment_ids`, `udp/README.md`).
pub fn gso_segment_ip_id(k: usize) -> u16 {
    (k as u16).wrapping_mul(GSO_IP_ID_STEP)
}

/// Increment of the IPv4 identification between consecutive GSO segments (see
/// [`gso_segment_ip_id`]).
pub const GSO_IP_ID_STEP: u16 = 1;

/// The IPv4 identification that makes the ICRC at the end of `payload` (BTH .. ICRC) match
/// headers `h` (whose own identification is only a starting guess), or `None` if no
/// identification does (the packet is corrupt, or another covered field differs). See
/// [`super::idsolve`]: a random corruption is accepted with probability 2⁻¹⁶.
pub fn recover_ipv4_id(h: &WireHeaders, payload: &[u8]) -> Option<u16> {
    if !h.is_ipv4() || payload.len() < 16 {
        return None;
    }
    let body = &payload[..payload.len() - roce_wire::ICRC_LEN];
    let computed = icrc::compute(h.network(), body).ok()?;
    let stored = icrc::stored(payload).ok()?;
    solve_ipv4_id(
        stored,
        computed,
        ip::ipv4::Packet::new_unchecked(h.ip()).ident(),
        payload.len(),
    )
}

/// The IPv4 identification that makes the `stored` ICRC of a payload (BTH .. ICRC) of
/// `payload_len` bytes match, given the CRC `computed` for the same packet with identification
/// `guess`: their difference is the CRC effect of `guess ^ id` alone. `None` if no
/// identification does.
pub(crate) fn solve_ipv4_id(
    stored: u32,
    computed: u32,
    guess: u16,
    payload_len: usize,
) -> Option<u16> {
    let after = after_field(IPV4_HEADER_LEN, IPV4_IDENT_AT, payload_len);
    super::idsolve::solve_field_delta(stored ^ computed, after).map(|d| guess ^ d)
}

/// Where the IPv4 identification sits in the headers as sent.
const IPV4_IDENT_AT: usize = ip::ipv4::field::IDENT.start;

/// Bytes of ICRC input after a 16-bit field at `at` (offset in the IP+UDP headers as sent),
/// for a payload (BTH .. ICRC) of `payload_len` bytes: the ICRC input is 8 bytes of LRH, the
/// headers and the payload without its ICRC.
fn after_field(ip_len: usize, at: usize, payload_len: usize) -> u64 {
    (ip_len + UDP_HEADER_LEN - at - 2 + payload_len - roce_wire::ICRC_LEN) as u64
}

fn patch_field(payload: &mut [u8], ip_len: usize, at: usize, old: u16, new: u16) -> bool {
    let n = payload.len();
    if n < 16 {
        return false;
    }
    let delta = super::idsolve::field_delta_crc(old ^ new, after_field(ip_len, at, n));
    let stored = u32::from_le_bytes(payload[n - 4..].try_into().unwrap());
    payload[n - 4..].copy_from_slice(&(stored ^ delta).to_le_bytes());
    true
}

/// Updates the ICRC at the end of `payload` (BTH .. ICRC) for an IPv4 identification changed
/// from `old` to `new`, without recomputing the CRC (about 15 ns once the per-length table is cached). For
/// sealing GSO segment *k* (ID *k*) when the packet was sealed with ID 0.
pub fn patch_icrc_ipv4_id(payload: &mut [u8], old: u16, new: u16) -> bool {
    patch_field(payload, IPV4_HEADER_LEN, IPV4_IDENT_AT, old, new)
}

/// Updates the ICRC at the end of `payload` for a UDP source port changed from `old` to `new`
/// (e.g. sealed with rxe's per-QP port, sent from 4791 under [`super::SourcePorts::Fixed`]).
pub fn patch_icrc_udp_sport(payload: &mut [u8], ipv6: bool, old: u16, new: u16) -> bool {
    let ip_len = if ipv6 {
        IPV6_HEADER_LEN
    } else {
        IPV4_HEADER_LEN
    };
    patch_field(
        payload,
        ip_len,
        ip_len + ip::udp::field::SRC_PORT.start,
        old,
        new,
    )
}

/// `0.0.0.0` placeholder used when a receive lacks `IP_PKTINFO`.
pub const UNSPECIFIED_V4: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// roce-spec-notes B.3 #4: rebuilding the headers from facts reproduces the real bytes
    /// (checksums aside) and the ICRC.
    #[test]
    fn rebuilds_vector_headers() {
        let d = hex("45020030000040004011b74cc0a8010ac0a80114 d00d12b7001c0000
                     1100ffff8000001200000100 1f000001 abe1f3b6");
        let h = WireHeaders::new(&HeaderFacts {
            src: "192.168.1.10".parse().unwrap(),
            dst: "192.168.1.20".parse().unwrap(),
            sport: 0xd00d,
            dport: 4791,
            payload_len: d.len() - 28,
            ip_id: 0,
            tos: 2,
            ttl: 64,
        });
        assert_eq!(h.ip(), &d[..20]);
        assert_eq!(h.udp(), &d[20..28]);
        h.verify_icrc(&d[28..]).unwrap();
        let c = IcrcCounters::default();
        let v = check_icrc(&h, false, &d[28..], IcrcPolicy::Strict, &c);
        assert_eq!(v, IcrcVerdict::Verified);
        // A kernel-rxe-like packet with a nonzero ID: not verifiable from a UDP socket.
        let mut rxe = d.clone();
        rxe[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        roce_wire::icrc::fill_ipv4_datagram(&mut rxe).unwrap();
        let v = check_icrc(&h, false, &rxe[28..], IcrcPolicy::AssumeZeroElseAccept, &c);
        assert_eq!(v, IcrcVerdict::NotVerifiable);
        assert!(v.accept());
        let v = check_icrc(&h, false, &rxe[28..], IcrcPolicy::Strict, &c);
        assert_eq!(v, IcrcVerdict::Bad);
        let v = check_icrc(&h, false, &d[28..], IcrcPolicy::Trust, &c);
        assert_eq!(v, IcrcVerdict::NotVerifiable);
        assert_eq!(c.snapshot(), (1, 1, 2));
    }

    /// Kernel-rxe-like packets (nonzero IDs) are recovered exactly; corruption is rejected.
    #[test]
    fn recover_id_policy() {
        let c = IcrcCounters::default();
        for (id, len) in [
            (0x1234u16, 16usize),
            (1, 100),
            (0xBEEF, 1040),
            (47729, 4112),
        ] {
            let mut p: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            let f = |ip_id| HeaderFacts {
                src: "127.0.0.1".parse().unwrap(),
                dst: "127.0.0.2".parse().unwrap(),
                sport: 0xC0DE,
                dport: 4791,
                payload_len: len,
                ip_id,
                tos: 0,
                ttl: 64,
            };
            WireHeaders::new(&f(id)).fill_icrc(&mut p).unwrap();
            let guess = WireHeaders::new(&f(0));
            assert_eq!(recover_ipv4_id(&guess, &p), Some(id));
            let v = check_icrc(&guess, false, &p, IcrcPolicy::RecoverId, &c);
            assert_eq!(v, IcrcVerdict::RecoveredId(id));
            assert!(v.accept());
            p[len / 2] ^= 0x10; // corrupt one payload bit
            assert_ne!(recover_ipv4_id(&guess, &p), Some(id));
        }
        assert_eq!(c.recovered.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn patch_id_and_port_equal_refill() {
        let f = |v6: bool, sport, ip_id| HeaderFacts {
            src: if v6 {
                "::1".parse().unwrap()
            } else {
                "127.0.0.1".parse().unwrap()
            },
            dst: if v6 {
                "::1".parse().unwrap()
            } else {
                "127.0.0.2".parse().unwrap()
            },
            sport,
            dport: 4791,
            payload_len: 1040,
            ip_id,
            tos: 0,
            ttl: 64,
        };
        let mut p: Vec<u8> = (0..1040usize).map(|i| (i * 5) as u8).collect();
        WireHeaders::new(&f(false, 0xC123, 0))
            .fill_icrc(&mut p)
            .unwrap();
        assert!(patch_icrc_ipv4_id(&mut p, 0, 3));
        assert!(patch_icrc_udp_sport(&mut p, false, 0xC123, 4791));
        WireHeaders::new(&f(false, 4791, 3))
            .verify_icrc(&p)
            .unwrap();
        WireHeaders::new(&f(true, 0xC123, 0))
            .fill_icrc(&mut p)
            .unwrap();
        assert!(patch_icrc_udp_sport(&mut p, true, 0xC123, 4791));
        WireHeaders::new(&f(true, 4791, 0)).verify_icrc(&p).unwrap();
        assert!(!patch_icrc_ipv4_id(&mut [0u8; 8], 0, 1));
    }

    #[test]
    fn ipv6_headers_and_fill() {
        let d = hex(
            "61a1234500201140 fe800000000000000000000000000001 fe800000000000000000000000000002
                     c12312b700200000 0430ffff000000118000010068656c6c6f000000 d83bd84e",
        );
        let h = WireHeaders::new(&HeaderFacts {
            src: "fe80::1".parse().unwrap(),
            dst: "fe80::2".parse().unwrap(),
            sport: 0xc123,
            dport: 4791,
            payload_len: d.len() - 48,
            ip_id: 0,
            tos: 0,
            ttl: 1,
        });
        // Traffic class, flow label and hop limit differ from the capture but are masked.
        h.verify_icrc(&d[48..]).unwrap();
        let mut p = d[48..].to_vec();
        let n = p.len();
        p[n - 4..].fill(0);
        h.fill_icrc(&mut p).unwrap();
        assert_eq!(p, &d[48..]);
        let c = IcrcCounters::default();
        assert_eq!(
            check_icrc(&h, false, &d[48..], IcrcPolicy::Trust, &c),
            IcrcVerdict::Verified
        );
    }

    #[test]
    fn checksum_known_value() {
        let h = hex("4500003c1c4640004006b1e6ac100a63ac100a0c");
        assert_eq!(ipv4_checksum(&h), 0xb1e6);
    }
}
