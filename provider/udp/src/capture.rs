//! An `AF_PACKET` receiver that sees whole IP packets, headers included (needs `CAP_NET_RAW`).
//!
//! A UDP socket cannot see the IPv4 identification, so it cannot verify the ICRC of IPv4 packets
//! from senders that do not use identification 0 (kernel rxe). A [`Capture`] can: every
//! [`Captured`] packet carries its real IP header. The capture tests use it to establish what the
//! kernel puts on the wire for our sockets (`udp/README.md`).
//!
//! It is a diagnostic and verification tool, not a fast path: it copies each packet it returns.
//! Packets are filtered in code (no BPF): IPv4/IPv6 carrying UDP.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Type};

use super::sys;

const ETH_P_ALL: u16 = 0x0003;
/// `sll_pkttype` of packets addressed to this host.
pub const PACKET_HOST: u8 = 0;
/// `sll_pkttype` of packets this host sends.
pub const PACKET_OUTGOING: u8 = 4;

/// One captured UDP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// `sll_pkttype` (`PACKET_HOST` = 0, [`PACKET_OUTGOING`] = 4, ...).
    pub pkttype: u8,
    /// The IP header (20 bytes for IPv4 without options, 40 for IPv6).
    pub ip: Vec<u8>,
    /// The UDP header.
    pub udp: [u8; 8],
    /// The UDP payload (as captured; for an unsegmented GSO packet, all segments).
    pub payload: Vec<u8>,
}

impl Captured {
    /// True for IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.ip.first().map(|b| b >> 4) == Some(4)
    }
    /// IPv4 identification (`None` for IPv6).
    pub fn ip_id(&self) -> Option<u16> {
        self.is_ipv4()
            .then(|| u16::from_be_bytes([self.ip[4], self.ip[5]]))
    }
    /// IPv4 Don't Fragment flag.
    pub fn df(&self) -> bool {
        self.is_ipv4() && self.ip[6] & 0x40 != 0
    }
    /// IPv4 total length / IPv6 payload length field.
    pub fn ip_len_field(&self) -> u16 {
        if self.is_ipv4() {
            u16::from_be_bytes([self.ip[2], self.ip[3]])
        } else {
            u16::from_be_bytes([self.ip[4], self.ip[5]])
        }
    }
    /// IPv4 TOS / IPv6 traffic class.
    pub fn tos(&self) -> u8 {
        if self.is_ipv4() {
            self.ip[1]
        } else {
            ((u16::from_be_bytes([self.ip[0], self.ip[1]]) >> 4) & 0xFF) as u8
        }
    }
    /// TTL / hop limit.
    pub fn ttl(&self) -> u8 {
        if self.is_ipv4() {
            self.ip[8]
        } else {
            self.ip[7]
        }
    }
    /// Source address and port.
    pub fn src(&self) -> SocketAddr {
        let port = u16::from_be_bytes([self.udp[0], self.udp[1]]);
        SocketAddr::new(self.addr(true), port)
    }
    /// Destination address and port.
    pub fn dst(&self) -> SocketAddr {
        let port = u16::from_be_bytes([self.udp[2], self.udp[3]]);
        SocketAddr::new(self.addr(false), port)
    }
    fn addr(&self, src: bool) -> IpAddr {
        if self.is_ipv4() {
            let o = if src { 12 } else { 16 };
            IpAddr::from(<[u8; 4]>::try_from(&self.ip[o..o + 4]).unwrap())
        } else {
            let o = if src { 8 } else { 24 };
            IpAddr::from(<[u8; 16]>::try_from(&self.ip[o..o + 16]).unwrap())
        }
    }
    /// UDP length field.
    pub fn udp_len(&self) -> u16 {
        u16::from_be_bytes([self.udp[4], self.udp[5]])
    }
    /// UDP checksum field.
    pub fn udp_checksum(&self) -> u16 {
        u16::from_be_bytes([self.udp[6], self.udp[7]])
    }
    /// Verifies the RoCE ICRC over the real headers.
    pub fn verify_icrc(&self) -> roce_wire::Result<()> {
        let net = if self.is_ipv4() {
            roce_wire::icrc::Network::Ipv4 {
                ip: &self.ip,
                udp: &self.udp,
            }
        } else {
            roce_wire::icrc::Network::Ipv6 {
                ip: &self.ip,
                udp: &self.udp,
            }
        };
        roce_wire::icrc::verify(net, &self.payload)
    }
}

/// Parses an IP packet (network header first) carrying UDP. `None` for anything else.
pub fn parse_udp(pkt: &[u8], pkttype: u8) -> Option<Captured> {
    let v = pkt.first()? >> 4;
    let (ihl, proto) = match v {
        4 => ((pkt[0] & 0x0F) as usize * 4, *pkt.get(9)?),
        6 => (40, *pkt.get(6)?),
        _ => return None,
    };
    if proto != 17 || pkt.len() < ihl + 8 || ihl < 20 {
        return None;
    }
    let udp: [u8; 8] = pkt[ihl..ihl + 8].try_into().ok()?;
    Some(Captured {
        pkttype,
        ip: pkt[..ihl].to_vec(),
        udp,
        payload: pkt[ihl + 8..].to_vec(),
    })
}

/// A packet socket receiving every IP packet on every interface of the current network
/// namespace, network header first (`SOCK_DGRAM`).
pub struct Capture {
    sock: socket2::Socket,
    buf: Vec<u8>,
}

impl Capture {
    /// Opens the capture socket. Fails with `PermissionDenied` without `CAP_NET_RAW`.
    pub fn open() -> io::Result<Capture> {
        let proto = Protocol::from(ETH_P_ALL.to_be() as i32);
        let sock = socket2::Socket::new(Domain::PACKET, Type::DGRAM, Some(proto))?;
        let _ = sock.set_recv_buffer_size(16 << 20);
        Ok(Capture {
            sock,
            buf: vec![0u8; 256 * 1024],
        })
    }

    /// Like [`Capture::open`], but the kernel itself keeps only IPv4/IPv6 UDP packets whose source
    /// or destination port is in `ports` (a classic BPF filter, so unrelated traffic on a busy
    /// host cannot overflow the capture's queue). At most about 50 ports (`InvalidInput` beyond).
    pub fn open_ports(ports: &[u16]) -> io::Result<Capture> {
        let c = Capture::open()?;
        c.sock.attach_filter(&udp_port_filter(ports)?)?;
        // Drop whatever was queued before the filter was attached.
        c.sock.set_nonblocking(true)?;
        let mut scratch = [0u8; 64];
        while sys::recv_packet(&c.sock, &mut scratch).is_ok() {}
        c.sock.set_nonblocking(false)?;
        let _ = sys::setsockopt_int(
            &c.sock,
            libc::SOL_SOCKET,
            sys::consts::SO_RCVBUFFORCE,
            64 << 20,
        );
        Ok(c)
    }

    /// The next UDP packet that `keep` accepts, waiting at most `timeout` in total.
    pub fn next_udp(
        &mut self,
        timeout: Duration,
        mut keep: impl FnMut(&Captured) -> bool,
    ) -> io::Result<Option<Captured>> {
        let end = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= end {
                return Ok(None);
            }
            self.sock
                .set_read_timeout(Some((end - now).max(Duration::from_millis(1))))?;
            let (n, ty) = match sys::recv_packet(&self.sock, &mut self.buf) {
                Ok(x) => x,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let n = n.min(self.buf.len());
            if let Some(c) = parse_udp(&self.buf[..n], ty) {
                if keep(&c) {
                    return Ok(Some(c));
                }
            }
        }
    }

    /// The next packet *arriving* for `dst` (IP and UDP port; `PACKET_HOST`, so on `lo` the
    /// sender's outgoing copy is skipped), with its real IP header: a full-header receive path
    /// whose ICRC can always be verified ([`Captured::verify_icrc`]). The NIC's UDP socket
    /// receives the same datagram too and must still be drained.
    pub fn recv_for(&mut self, dst: SocketAddr, timeout: Duration) -> io::Result<Option<Captured>> {
        self.next_udp(timeout, |c| c.pkttype == PACKET_HOST && c.dst() == dst)
    }

    /// Collects up to `count` packets accepted by `keep` (fewer if `timeout` passes).
    pub fn collect(
        &mut self,
        count: usize,
        timeout: Duration,
        mut keep: impl FnMut(&Captured) -> bool,
    ) -> io::Result<Vec<Captured>> {
        let end = Instant::now() + timeout;
        let mut v = Vec::new();
        while v.len() < count {
            let left = end.saturating_duration_since(Instant::now());
            match self.next_udp(left, &mut keep)? {
                Some(c) => v.push(c),
                None => break,
            }
        }
        Ok(v)
    }
}

/// A classic BPF program (for a `SOCK_DGRAM` packet socket: offsets from the network header)
/// accepting IPv4 (unfragmented or first fragment) and IPv6 UDP packets with a port in `ports`.
pub fn udp_port_filter(ports: &[u16]) -> io::Result<Vec<libc::sock_filter>> {
    const LD_B_ABS: u16 = 0x30;
    const LD_H_ABS: u16 = 0x28;
    const LD_H_IND: u16 = 0x48;
    const LDX_B_MSH: u16 = 0xb1;
    const ALU_RSH_K: u16 = 0x74;
    const JEQ_K: u16 = 0x15;
    const JSET_K: u16 = 0x45;
    const JA: u16 = 0x05;
    const RET_K: u16 = 0x06;
    if ports.is_empty() || ports.len() > 100 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    #[derive(Clone, Copy)]
    enum T {
        Next,
        Drop,
        Accept,
        V6,
    }
    let mut prog: Vec<(u16, T, T, u32)> = Vec::new();
    let port_checks = |prog: &mut Vec<(u16, T, T, u32)>, load: u16, off: u32| {
        for field in [0u32, 2] {
            prog.push((load, T::Next, T::Next, off + field));
            for &p in ports {
                prog.push((JEQ_K, T::Accept, T::Next, p as u32));
            }
        }
    };
    prog.push((LD_B_ABS, T::Next, T::Next, 0));
    prog.push((ALU_RSH_K, T::Next, T::Next, 4));
    prog.push((JEQ_K, T::Next, T::V6, 4));
    prog.push((LD_B_ABS, T::Next, T::Next, 9));
    prog.push((JEQ_K, T::Next, T::Drop, 17));
    prog.push((LD_H_ABS, T::Next, T::Next, 6));
    prog.push((JSET_K, T::Drop, T::Next, 0x1FFF));
    prog.push((LDX_B_MSH, T::Next, T::Next, 0));
    port_checks(&mut prog, LD_H_IND, 0);
    prog.push((JA, T::Drop, T::Drop, 0));
    let v6 = prog.len();
    prog.push((LD_B_ABS, T::Next, T::Next, 0));
    prog.push((ALU_RSH_K, T::Next, T::Next, 4));
    prog.push((JEQ_K, T::Next, T::Drop, 6));
    prog.push((LD_B_ABS, T::Next, T::Next, 6));
    prog.push((JEQ_K, T::Next, T::Drop, 17));
    port_checks(&mut prog, LD_H_ABS, 40);
    let drop = prog.len();
    prog.push((RET_K, T::Next, T::Next, 0));
    let accept = prog.len();
    prog.push((RET_K, T::Next, T::Next, 0x40000));
    let mut out = Vec::with_capacity(prog.len());
    for (i, &(code, jt, jf, k)) in prog.iter().enumerate() {
        let rel = |t: T| -> io::Result<u32> {
            let to = match t {
                T::Next => i + 1,
                T::Drop => drop,
                T::Accept => accept,
                T::V6 => v6,
            };
            Ok((to - (i + 1)) as u32)
        };
        let (jt8, jf8, k) = if code == JA {
            (0, 0, rel(jt)?)
        } else if code & 0x07 == 0x05 {
            let (a, b) = (rel(jt)?, rel(jf)?);
            if a > 255 || b > 255 {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            (a as u8, b as u8, k)
        } else {
            (0, 0, k)
        };
        out.push(libc::sock_filter {
            code,
            jt: jt8,
            jf: jf8,
            k,
        });
    }
    Ok(out)
}

/// Runs `f` on a new thread inside a fresh network namespace whose `lo` is up (root only;
/// `unshare(CLONE_NEWNET)` on that thread, then one rtnetlink request). With `no_gso`, `lo`'s
/// `gso_max_segs` is set to 1 so the kernel segments GSO sends in software *before* packet
/// taps see them, making each segment's real headers visible to a [`Capture`]. The host's
/// network configuration is never touched.
pub fn in_private_netns<T: Send + 'static>(
    no_gso: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    std::thread::spawn(move || -> io::Result<T> {
        sys::unshare_net()?;
        setup_netns_lo(no_gso)?;
        Ok(f())
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// `ip link set lo up [gso_max_segs 1]` as one RTM_NEWLINK request, in the calling thread's
/// network namespace (where `lo` has interface index 1).
fn setup_netns_lo(no_gso: bool) -> io::Result<()> {
    use std::io::{Read, Write};
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLMSG_ERROR: u16 = 2;
    const IFLA_GSO_MAX_SEGS: u16 = 40;
    let mut m = Vec::with_capacity(40);
    let len: u32 = if no_gso { 40 } else { 32 };
    // nlmsghdr
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid
                                              // ifinfomsg: family, pad, type, index 1 (lo), flags IFF_UP, change IFF_UP
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    m.extend_from_slice(&1i32.to_ne_bytes());
    m.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    m.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
    if no_gso {
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&IFLA_GSO_MAX_SEGS.to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes());
    }
    debug_assert_eq!(m.len(), len as usize);
    let s = socket2::Socket::new(
        Domain::from(libc::AF_NETLINK),
        Type::RAW,
        Some(Protocol::from(libc::NETLINK_ROUTE)),
    )?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    (&s).write_all(&m)?;
    let mut r = [0u8; 256];
    let n = (&s).read(&mut r)?;
    if n < 20 || u16::from_ne_bytes([r[4], r[5]]) != NLMSG_ERROR {
        return Err(io::Error::other("unexpected rtnetlink answer"));
    }
    let err = i32::from_ne_bytes([r[16], r[17], r[18], r[19]]);
    if err != 0 {
        return Err(io::Error::from_raw_os_error(-err));
    }
    Ok(())
}
