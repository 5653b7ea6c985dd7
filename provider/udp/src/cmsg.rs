//! Control messages (`cmsg`) encoded and decoded in safe Rust on plain byte buffers.
//!
//! Layout (Linux, `struct cmsghdr`): `cmsg_len: size_t`, `cmsg_level: int`, `cmsg_type: int`,
//! then the data, each message padded to `align_of::<size_t>()`. [`space`] and [`len`] are
//! `CMSG_SPACE` and `CMSG_LEN`; a test in `sys` checks them against libc's macros.
//!
//! Buffers handed to the kernel should be 8-byte aligned; [`ControlBuf`] provides that without
//! `unsafe` by over-allocating and starting at an aligned offset.

use super::sys::consts;

const ALIGN: usize = std::mem::size_of::<usize>();
const HDR: usize = std::mem::size_of::<usize>() + 8;

const fn align(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// `CMSG_SPACE(data_len)`: bytes one message with `data_len` data bytes occupies.
pub const fn space(data_len: usize) -> usize {
    align(HDR) + align(data_len)
}

/// `CMSG_LEN(data_len)`: the value of `cmsg_len` for `data_len` data bytes.
pub const fn len(data_len: usize) -> usize {
    align(HDR) + data_len
}

/// Room for every control message we send: TOS/TCLASS (int), TTL/HOPLIMIT (int), UDP_SEGMENT (u16).
pub const SEND_SPACE: usize = 3 * space(4);
/// Room for every control message we ask for on receive: PKTINFO (IPv6: 20 B), TOS/TCLASS,
/// TTL/HOPLIMIT, UDP_GRO, SO_RXQ_OVFL; with slack.
pub const RECV_SPACE: usize = space(20) + 4 * space(4) + 64;

/// A heap byte buffer whose usable part starts at an address aligned to `align` bytes.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes starting at a multiple of `align` (a power of two).
    pub fn new(len: usize, align: usize) -> Self {
        assert!(align.is_power_of_two());
        let raw = vec![0u8; len + align];
        let start = raw.as_ptr().align_offset(align);
        assert!(start < align + 1);
        AlignedBuf { raw, start, len }
    }
    /// The aligned bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    /// The aligned bytes, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
    /// Length of the aligned part.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An 8-aligned control-message buffer for one datagram.
pub type ControlBuf = AlignedBuf;

/// Appends control messages to a byte buffer.
pub struct Encoder<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl<'a> Encoder<'a> {
    /// Starts encoding at the beginning of `buf` (which should be 8-aligned).
    pub fn new(buf: &'a mut [u8]) -> Self {
        Encoder { buf, at: 0 }
    }
    /// Appends one message. Panics when `buf` is too small (a sizing bug, not a runtime condition).
    pub fn push(&mut self, level: i32, ty: i32, data: &[u8]) {
        let sp = space(data.len());
        let b = &mut self.buf[self.at..self.at + sp];
        b.fill(0);
        b[..ALIGN].copy_from_slice(&len(data.len()).to_ne_bytes());
        b[ALIGN..ALIGN + 4].copy_from_slice(&level.to_ne_bytes());
        b[ALIGN + 4..ALIGN + 8].copy_from_slice(&ty.to_ne_bytes());
        let d = align(HDR);
        b[d..d + data.len()].copy_from_slice(data);
        self.at += sp;
    }
    /// Appends a message whose data is a C `int`.
    pub fn push_int(&mut self, level: i32, ty: i32, v: i32) {
        self.push(level, ty, &v.to_ne_bytes());
    }
    /// Appends a message whose data is a `u16` (as `UDP_SEGMENT` wants).
    pub fn push_u16(&mut self, level: i32, ty: i32, v: u16) {
        self.push(level, ty, &v.to_ne_bytes());
    }
    /// Bytes used so far (the `msg_controllen` to pass).
    pub fn len(&self) -> usize {
        self.at
    }
    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.at == 0
    }
}

/// One decoded control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cmsg<'a> {
    /// `cmsg_level`.
    pub level: i32,
    /// `cmsg_type`.
    pub ty: i32,
    /// The data bytes (`cmsg_len - CMSG_LEN(0)` of them).
    pub data: &'a [u8],
}

/// Iterates the control messages in `buf[..controllen]`. Stops at the first malformed header.
/// (One bounds check per header and one per data slice: this runs for every receive.)
#[inline]
pub fn decode(buf: &[u8]) -> impl Iterator<Item = Cmsg<'_>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let h = buf.get(at..at + HDR)?;
        let (l, rest) = h.split_at(ALIGN);
        let clen = usize::from_ne_bytes(l.try_into().unwrap_or([0; ALIGN]));
        let level = i32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let ty = i32::from_ne_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let d = align(HDR);
        if clen < d {
            return None;
        }
        let data = buf.get(at + d..at + clen)?;
        at += align(clen);
        Some(Cmsg { level, ty, data })
    })
}

/// Reads a native-endian `int` (or shorter, zero-extended) from cmsg data.
#[inline]
pub fn read_int(data: &[u8]) -> Option<i32> {
    match data.len() {
        n if n >= 4 => Some(i32::from_ne_bytes(data[..4].try_into().ok()?)),
        2 => Some(u16::from_ne_bytes([data[0], data[1]]) as i32),
        1 => Some(data[0] as i32),
        _ => None,
    }
}

/// Receive-side facts carried by the control messages of one datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvInfo {
    /// Destination address of the IP header (`IP_PKTINFO.ipi_addr` / `IPV6_PKTINFO`).
    pub dst: Option<std::net::IpAddr>,
    /// Interface index the datagram arrived on.
    pub ifindex: Option<u32>,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: Option<u8>,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: Option<u8>,
    /// GRO segment size: the buffer holds datagrams of this size (last may be shorter).
    pub gro_size: Option<u16>,
    /// Socket receive-queue drop counter (`SO_RXQ_OVFL`), cumulative.
    pub drops: Option<u32>,
}

/// Decodes the control messages we ask for into a [`RecvInfo`]; unknown messages are ignored.
pub fn parse_recv(buf: &[u8]) -> RecvInfo {
    let mut r = RecvInfo::default();
    for Cmsg { level, ty, data } in decode(buf) {
        match (level, ty) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() >= 12 => {
                // struct in_pktinfo { int ipi_ifindex; in_addr ipi_spec_dst; in_addr ipi_addr; }
                r.ifindex = Some(u32::from_ne_bytes([data[0], data[1], data[2], data[3]]));
                r.dst = Some(std::net::IpAddr::from([
                    data[8], data[9], data[10], data[11],
                ]));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() >= 20 => {
                // struct in6_pktinfo { in6_addr ipi6_addr; int ipi6_ifindex; }
                let mut a = [0u8; 16];
                a.copy_from_slice(&data[..16]);
                r.dst = Some(std::net::IpAddr::from(a));
                r.ifindex = Some(u32::from_ne_bytes([data[16], data[17], data[18], data[19]]));
            }
            (libc::IPPROTO_IP, libc::IP_TOS) | (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                r.tos = read_int(data).map(|v| v as u8);
            }
            (libc::IPPROTO_IP, libc::IP_TTL) | (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => {
                r.ttl = read_int(data).map(|v| v as u8);
            }
            (consts::SOL_UDP, consts::UDP_GRO) => {
                r.gro_size = read_int(data).map(|v| v as u16);
            }
            (libc::SOL_SOCKET, consts::SO_RXQ_OVFL) => {
                r.drops = read_int(data).map(|v| v as u32);
            }
            _ => {}
        }
    }
    r
}

/// Per-datagram send options encoded as control messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendInfo {
    /// IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN). `None`: socket default.
    pub tos: Option<u8>,
    /// IPv4 TTL / IPv6 hop limit. `None`: socket default.
    pub ttl: Option<u8>,
    /// UDP GSO segment size.
    pub gso_size: Option<u16>,
}

/// Encodes `info` for an IPv4 (`v6 == false`) or IPv6 socket; returns the bytes used.
pub fn encode_send(buf: &mut [u8], v6: bool, info: &SendInfo) -> usize {
    let mut e = Encoder::new(buf);
    if let Some(t) = info.tos {
        if v6 {
            e.push_int(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, t as i32);
        } else {
            // The kernel reads IP_TOS as an int or a single byte; use int like IPV6_TCLASS.
            e.push_int(libc::IPPROTO_IP, libc::IP_TOS, t as i32);
        }
    }
    if let Some(t) = info.ttl {
        if v6 {
            e.push_int(libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT, t as i32);
        } else {
            e.push_int(libc::IPPROTO_IP, libc::IP_TTL, t as i32);
        }
    }
    if let Some(g) = info.gso_size {
        e.push_u16(consts::SOL_UDP, consts::UDP_SEGMENT, g);
    }
    e.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    #[test]
    fn space_and_len_64bit() {
        if ALIGN == 8 {
            assert_eq!(len(0), 16);
            assert_eq!(len(4), 20);
            assert_eq!(space(4), 24);
            assert_eq!(space(2), 24);
            assert_eq!(space(12), 32);
            assert_eq!(space(20), 40);
        }
    }

    #[test]
    fn encode_then_decode_round_trip() {
        let mut b = AlignedBuf::new(SEND_SPACE, 8);
        let info = SendInfo {
            tos: Some(0x02),
            ttl: Some(7),
            gso_size: Some(1084),
        };
        let n = encode_send(b.as_mut_slice(), false, &info);
        assert_eq!(n, 3 * space(4).max(space(2)));
        let v: Vec<_> = decode(&b.as_slice()[..n]).collect();
        assert_eq!(v.len(), 3);
        assert_eq!((v[0].level, v[0].ty), (libc::IPPROTO_IP, libc::IP_TOS));
        assert_eq!(read_int(v[0].data), Some(2));
        assert_eq!((v[1].level, v[1].ty), (libc::IPPROTO_IP, libc::IP_TTL));
        assert_eq!(read_int(v[1].data), Some(7));
        assert_eq!(
            (v[2].level, v[2].ty),
            (consts::SOL_UDP, consts::UDP_SEGMENT)
        );
        assert_eq!(v[2].data, &1084u16.to_ne_bytes());
        assert_eq!(encode_send(b.as_mut_slice(), true, &SendInfo::default()), 0);
    }

    #[test]
    fn parse_recv_ipv4_and_ipv6() {
        let mut b = AlignedBuf::new(RECV_SPACE, 8);
        let mut e = Encoder::new(b.as_mut_slice());
        let mut pk = [0u8; 12];
        pk[0..4].copy_from_slice(&1u32.to_ne_bytes());
        pk[4..8].copy_from_slice(&[127, 0, 0, 9]); // spec_dst: ignored
        pk[8..12].copy_from_slice(&[127, 0, 0, 2]);
        e.push(libc::IPPROTO_IP, libc::IP_PKTINFO, &pk);
        e.push(libc::IPPROTO_IP, libc::IP_TOS, &[0x03]); // the kernel sends TOS as one byte
        e.push_int(libc::IPPROTO_IP, libc::IP_TTL, 64);
        e.push_u16(consts::SOL_UDP, consts::UDP_GRO, 1084); // and GRO as an int; accept both
        e.push_int(libc::SOL_SOCKET, consts::SO_RXQ_OVFL, 5);
        e.push_int(99, 99, 1); // unknown: ignored
        let n = e.len();
        let r = parse_recv(&b.as_slice()[..n]);
        assert_eq!(
            r,
            RecvInfo {
                dst: Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))),
                ifindex: Some(1),
                tos: Some(3),
                ttl: Some(64),
                gro_size: Some(1084),
                drops: Some(5),
            }
        );

        let mut e = Encoder::new(b.as_mut_slice());
        let mut pk6 = [0u8; 20];
        pk6[..16].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        pk6[16..].copy_from_slice(&1u32.to_ne_bytes());
        e.push(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &pk6);
        e.push_int(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, 0xB8);
        e.push_int(libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT, 1);
        let n = e.len();
        let r = parse_recv(&b.as_slice()[..n]);
        assert_eq!(r.dst, Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!((r.tos, r.ttl, r.gro_size), (Some(0xB8), Some(1), None));
    }

    #[test]
    fn decode_stops_on_garbage() {
        assert_eq!(decode(&[]).count(), 0);
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&100usize.to_ne_bytes()); // claims more than there is
        assert_eq!(decode(&b).count(), 0);
        b[..8].copy_from_slice(&3usize.to_ne_bytes()); // shorter than a header
        assert_eq!(decode(&b).count(), 0);
    }

    #[test]
    fn aligned_buf_is_aligned() {
        for a in [8usize, 64, 4096] {
            let b = AlignedBuf::new(100, a);
            assert_eq!(b.as_slice().as_ptr() as usize % a, 0);
            assert_eq!(b.len(), 100);
        }
    }
}
