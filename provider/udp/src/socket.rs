//! [`Socket`]: the UDP socket of one emulated NIC, with batched, GSO/GRO-aware I/O.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Type};

use super::cmsg::{self, AlignedBuf, SendInfo};
use super::datagram::{OutDatagram, RecvBatch};
use super::headers::{HeaderFacts, WireHeaders};
use super::sys::{self, consts};
use super::waker::Waker;
use roce_wire::ROCE_V2_UDP_PORT;
use std::sync::Arc;

mod send;

/// Where the UDP source port of each datagram comes from.
///
/// The ICRC covers the UDP source port, so the port really used must be known before the ICRC is
/// computed: ask [`Socket::source_port`] (or [`Socket::wire_headers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourcePorts {
    /// Everything leaves from the socket's own port (4791). One descriptor, batches never split,
    /// no ECMP/RSS entropy. Receivers (rxe, ConnectX, us) accept any source port. The default.
    #[default]
    Fixed,
    /// One extra send-only socket per distinct requested source port (rxe's `0xC000 + hash(qpn)`),
    /// opened on first use and bound to the NIC's address. Costs a descriptor per port and splits
    /// `sendmmsg` batches at port changes. Falls back to the main port if a bind fails.
    PerPort,
}

/// How to wait in [`Socket::recv_batch`] / [`Socket::send_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Return at once (`Ok(0)` when nothing is ready).
    NonBlocking,
    /// Block in `ppoll` up to the timeout (`None`: forever).
    Block(Option<Duration>),
    /// Retry without sleeping for `spin`, then block up to the second value (`None`: forever).
    /// Waking a sleeping thread costs tens of µs on this class of machine; spinning does not.
    SpinThenBlock(Duration, Option<Duration>),
}

/// Settings for [`Socket::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketConfig {
    /// UDP port to bind (4791; 0 picks an ephemeral port, useful for tests and benchmarks).
    pub port: u16,
    /// Wanted `SO_SNDBUF`/`SO_RCVBUF` in bytes (forced past `*mem_max` when root).
    pub buffer_bytes: usize,
    /// Source-port policy.
    pub source_ports: SourcePorts,
    /// Send with a zero UDP checksum as rxe does (`SO_NO_CHECK`, `UDP_NO_CHECK6_TX`). The kernel
    /// refuses GSO on such a socket, so GSO sends temporarily turn the checksum back on (their
    /// segments carry a valid checksum; it is masked by the ICRC). Never affects receive.
    pub zero_checksum: bool,
    /// Use UDP GSO on send when the kernel has it.
    pub gso: bool,
    /// Use UDP GRO on receive when the kernel has it.
    pub gro: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            port: ROCE_V2_UDP_PORT,
            buffer_bytes: 8 << 20,
            source_ports: SourcePorts::Fixed,
            zero_checksum: true,
            gso: true,
            gro: true,
        }
    }
}

/// What the socket found it could do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    /// UDP GSO (`UDP_SEGMENT`) is usable.
    pub gso: bool,
    /// UDP GRO (`UDP_GRO`) is on.
    pub gro: bool,
    /// Zero-checksum sending is on.
    pub zero_checksum: bool,
    /// `SO_RXQ_OVFL` drop counting is on.
    pub drop_counter: bool,
    /// Effective `SO_SNDBUF` (as the kernel reports it: twice the accounting size).
    pub sndbuf: usize,
    /// Effective `SO_RCVBUF`.
    pub rcvbuf: usize,
}

/// Most datagrams [`Socket::send_batch`] sends without planning (its direct path).
const DIRECT_MAX: usize = 8;

/// Largest number of segments in one GSO send (`UDP_MAX_SEGMENTS` is 64 on older kernels).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Largest UDP payload of one (GSO) send.
pub const MAX_UDP_PAYLOAD: usize = 65507 - 40;

#[derive(Debug, Clone, Copy)]
struct Msg {
    dgram: u32,
    off: u32,
    len: u32,
    ctrl: u32,
}

struct PortSock {
    port: u16,
    sock: socket2::Socket,
    no_check: bool,
}

/// The UDP socket of one emulated NIC (one IP address, port 4791).
///
/// Unconnected, `IP_MTU_DISCOVER = IP_PMTUDISC_DO` (so IPv4 sends carry DF and identification 0),
/// non-blocking, large buffers, `IP_PKTINFO`/`IP_RECVTOS`/`IP_RECVTTL` (or the IPv6 ones) and
/// `SO_RXQ_OVFL` on, GRO on when available. IPv6 sockets are v6-only with `UDP_NO_CHECK6_RX`
/// and `UDP_NO_CHECK6_TX`, so zero-checksum datagrams (as rxe sends them) are accepted.
///
/// Send and receive take `&mut self` because they use preallocated scratch space. For a separate
/// receive thread use [`Socket::try_clone`] (same kernel socket, own scratch). Only one thread
/// should *send* on a kernel socket when `zero_checksum` and GSO are both on, since GSO sends flip
/// the socket-wide checksum flag.
pub struct Socket {
    sock: socket2::Socket,
    local: SocketAddr,
    v6: bool,
    cfg: SocketConfig,
    features: Features,
    no_check: bool,
    /// The TTL / hop limit the socket uses without a cmsg (`getsockopt` at bind): a datagram
    /// asking for exactly that needs no `IP_TTL` cmsg (one less for the kernel to parse).
    default_ttl: Option<u8>,
    send_scratch: sys::SendScratch,
    addrs: Vec<SockAddr>,
    ctrl: Vec<AlignedBuf>,
    ctrl_len: Vec<usize>,
    /// The direct path's address index per datagram.
    plan_addr: [u8; DIRECT_MAX],
    plan: Vec<Msg>,
    ports: Vec<PortSock>,
    waker: Option<Arc<Waker>>,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("local", &self.local)
            .field("features", &self.features)
            .finish()
    }
}

fn set_buffers(s: &socket2::Socket, bytes: usize) -> (usize, usize) {
    let b = bytes.min(i32::MAX as usize) as i32;
    if sys::setsockopt_int(s, libc::SOL_SOCKET, consts::SO_SNDBUFFORCE, b).is_err() {
        let _ = s.set_send_buffer_size(bytes);
    }
    if sys::setsockopt_int(s, libc::SOL_SOCKET, consts::SO_RCVBUFFORCE, b).is_err() {
        let _ = s.set_recv_buffer_size(bytes);
    }
    (
        s.send_buffer_size().unwrap_or(0),
        s.recv_buffer_size().unwrap_or(0),
    )
}

fn set_no_check(s: &socket2::Socket, v6: bool, on: bool) -> io::Result<()> {
    if v6 {
        sys::setsockopt_int(s, consts::SOL_UDP, consts::UDP_NO_CHECK6_TX, on as i32)
    } else {
        sys::setsockopt_int(s, libc::SOL_SOCKET, consts::SO_NO_CHECK, on as i32)
    }
}

/// The TTL / hop limit a datagram is sent with. Linux refuses `IP_TTL` / `IPV6_HOPLIMIT` 0
/// with EINVAL, which would make every send of a QP or AH whose `hop_limit` is 0 (a zeroed
/// `ibv_ah_attr`) fail; kernel rxe puts 0 in the header and the packet is still delivered on the
/// link (TTL only matters when forwarding). 1 is the closest value a UDP socket can send: the
/// same one-link reach. (The ICRC masks the TTL, so it is unaffected.)
pub(crate) fn sendable_ttl(ttl: Option<u8>) -> Option<u8> {
    ttl.map(|t| t.max(1))
}

/// The socket's TTL / unicast hop limit when no cmsg sets one.
fn default_ttl(s: &socket2::Socket, v6: bool) -> Option<u8> {
    let v = if v6 {
        sys::getsockopt_int(s, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS)
    } else {
        sys::getsockopt_int(s, libc::IPPROTO_IP, libc::IP_TTL)
    };
    v.ok().and_then(|v| u8::try_from(v).ok()).filter(|&v| v > 0)
}

fn new_udp(addr: SocketAddr) -> io::Result<socket2::Socket> {
    let v6 = addr.is_ipv6();
    let dom = if v6 { Domain::IPV6 } else { Domain::IPV4 };
    let s = socket2::Socket::new(dom, Type::DGRAM.nonblocking(), Some(Protocol::UDP))?;
    if v6 {
        s.set_only_v6(true)?;
        sys::setsockopt_int(
            &s,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )?;
        sys::setsockopt_int(&s, consts::SOL_UDP, consts::UDP_NO_CHECK6_RX, 1)?;
    } else {
        sys::setsockopt_int(
            &s,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )?;
    }
    s.bind(&SockAddr::from(addr))?;
    Ok(s)
}

impl Socket {
    /// Binds `ip:cfg.port` for one emulated NIC and applies every option (see the type docs).
    pub fn bind(ip: IpAddr, cfg: SocketConfig) -> io::Result<Socket> {
        let v6 = ip.is_ipv6();
        let s = new_udp(SocketAddr::new(ip, cfg.port))?;
        let local = s
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("no local address"))?;
        let (sndbuf, rcvbuf) = set_buffers(&s, cfg.buffer_bytes);
        if v6 {
            sys::setsockopt_int(&s, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
            sys::setsockopt_int(&s, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
            sys::setsockopt_int(&s, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1)?;
        } else {
            sys::setsockopt_int(&s, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)?;
            sys::setsockopt_int(&s, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
            sys::setsockopt_int(&s, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)?;
        }
        let drop_counter =
            sys::setsockopt_int(&s, libc::SOL_SOCKET, consts::SO_RXQ_OVFL, 1).is_ok();
        let gro = cfg.gro && sys::setsockopt_int(&s, consts::SOL_UDP, consts::UDP_GRO, 1).is_ok();
        // GSO: kernels without it answer ENOPROTOOPT to getsockopt(UDP_SEGMENT).
        let gso = cfg.gso && sys::getsockopt_int(&s, consts::SOL_UDP, consts::UDP_SEGMENT).is_ok();
        let zero_checksum = cfg.zero_checksum && set_no_check(&s, v6, true).is_ok();
        let default_ttl = default_ttl(&s, v6);
        tracing::debug!(
            %local, gso, gro, zero_checksum, drop_counter, sndbuf, rcvbuf,
            "udp socket bound"
        );
        Ok(Socket {
            sock: s,
            local,
            v6,
            cfg,
            features: Features {
                gso,
                gro,
                zero_checksum,
                drop_counter,
                sndbuf,
                rcvbuf,
            },
            no_check: zero_checksum,
            default_ttl,
            send_scratch: Default::default(),
            addrs: Vec::new(),
            ctrl: Vec::new(),
            ctrl_len: Vec::new(),
            plan_addr: [0; DIRECT_MAX],
            plan: Vec::new(),
            ports: Vec::new(),
            waker: None,
        })
    }

    /// A second handle on the same kernel socket with its own scratch space (e.g. for a receive
    /// thread). Per-port send sockets are not shared.
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(Socket {
            sock: self.sock.try_clone()?,
            local: self.local,
            v6: self.v6,
            cfg: self.cfg,
            features: self.features,
            no_check: self.no_check,
            default_ttl: self.default_ttl,
            send_scratch: Default::default(),
            addrs: Vec::new(),
            ctrl: Vec::new(),
            ctrl_len: Vec::new(),
            plan_addr: [0; DIRECT_MAX],
            plan: Vec::new(),
            ports: Vec::new(),
            waker: None,
        })
    }

    /// Makes blocking receives also return (`Ok(0)`) when `waker` is woken from another thread.
    pub fn set_waker(&mut self, waker: Option<Arc<Waker>>) {
        self.waker = waker;
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// What was detected and enabled.
    pub fn features(&self) -> Features {
        self.features
    }

    /// The underlying socket (e.g. to register it with an external poller).
    pub fn as_socket2(&self) -> &socket2::Socket {
        &self.sock
    }

    /// The UDP source port a datagram asking for `requested` will really carry. Under
    /// [`SourcePorts::PerPort`] this opens the port's socket if needed.
    pub fn source_port(&mut self, requested: u16) -> u16 {
        match self.cfg.source_ports {
            SourcePorts::Fixed => self.local.port(),
            SourcePorts::PerPort => match self.port_index(requested) {
                Some(_) => requested,
                None => self.local.port(),
            },
        }
    }

    /// The IP and UDP headers the kernel will send for segment `segment` of `d` (see
    /// `udp/README.md` for the identification rule), for computing the ICRC:
    /// `sock.wire_headers(&d, 0).fill_icrc(&mut payload)`.
    pub fn wire_headers(&mut self, d: &OutDatagram<'_>, segment: usize) -> WireHeaders {
        let sport = self.source_port(d.src_port);
        WireHeaders::new(&HeaderFacts {
            src: self.local.ip(),
            dst: d.dst,
            sport,
            dport: d.dst_port,
            payload_len: d.segment(segment).len(),
            ip_id: self.segment_ip_id(d, segment),
            tos: d.tos.unwrap_or(0),
            ttl: sendable_ttl(d.ttl).unwrap_or(64),
        })
    }

    /// Computes and writes the ICRC of every segment of a payload about to be sent to `dst` as
    /// `d` describes (`d.payload` is ignored; `payload` is the same bytes, mutable).
    pub fn fill_icrc(&mut self, d: &OutDatagram<'_>, payload: &mut [u8]) -> roce_wire::Result<()> {
        let g = match d.gso_size {
            Some(g) if g > 0 && payload.len() > g as usize => g as usize,
            _ => payload.len().max(1),
        };
        let total = payload.len();
        for (k, seg) in payload.chunks_mut(g).enumerate() {
            let h = WireHeaders::new(&HeaderFacts {
                src: self.local.ip(),
                dst: d.dst,
                sport: self.source_port(d.src_port),
                dport: d.dst_port,
                payload_len: seg.len(),
                ip_id: self.ip_id_at(d.gso_size, total, k),
                tos: d.tos.unwrap_or(0),
                ttl: sendable_ttl(d.ttl).unwrap_or(64),
            });
            h.fill_icrc(seg)?;
        }
        Ok(())
    }

    /// Segments per GSO message for segment size `g` (`send_batch` splits larger GSO datagrams).
    fn gso_per_message(g: usize) -> usize {
        MAX_GSO_SEGMENTS.min((MAX_UDP_PAYLOAD / g.max(1)).max(1))
    }

    /// The IPv4 identification segment `k` of `d` will carry: with kernel GSO, its index inside
    /// its GSO message; otherwise 0.
    pub fn segment_ip_id(&self, d: &OutDatagram<'_>, k: usize) -> u16 {
        self.ip_id_at(d.gso_size, d.payload.len(), k)
    }

    fn ip_id_at(&self, gso_size: Option<u16>, total: usize, k: usize) -> u16 {
        match gso_size {
            Some(g) if self.features.gso && g > 0 && total > g as usize => {
                let segs = total.div_ceil(g as usize);
                let per = Self::gso_per_message(g as usize);
                let first = k - k % per;
                // A trailing message of a single segment is sent without UDP_SEGMENT.
                if (segs - first).min(per) > 1 {
                    super::headers::gso_segment_ip_id(k % per)
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Index+1 into `ports` of the socket for `port` (0 = main socket), opening it if needed.
    fn port_index(&mut self, port: u16) -> Option<usize> {
        if port == self.local.port() {
            return None;
        }
        if let Some(i) = self.ports.iter().position(|p| p.port == port) {
            return Some(i + 1);
        }
        let s = new_udp(SocketAddr::new(self.local.ip(), port)).ok()?;
        set_buffers(&s, self.cfg.buffer_bytes);
        let _ = s.set_recv_buffer_size(4096);
        let no_check = self.features.zero_checksum && set_no_check(&s, self.v6, true).is_ok();
        self.ports.push(PortSock {
            port,
            sock: s,
            no_check,
        });
        Some(self.ports.len())
    }

    /// Waits until a datagram is ready to be received, without receiving it, so that the one
    /// who then receives can do so under its own lock and datagrams are handled in arrival
    /// order (a thread that received first and locked second could be overtaken by another
    /// receiver). `true`: something is ready; `false`: `wait` ran out or the waker fired.
    pub fn wait_readable(&mut self, wait: Wait) -> io::Result<bool> {
        let fd = self.sock.as_raw_fd();
        let start = Instant::now();
        let mut spin_until = None;
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        loop {
            // MSG_PEEK on a non-blocking socket: reports a queued datagram, consumes nothing.
            match self.sock.peek(&mut probe) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if wait == Wait::NonBlocking {
                        return Ok(false);
                    }
                    let waker = self.waker.as_deref();
                    if !wait_ready(fd, false, wait, start, &mut spin_until, waker)? {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Receives into `batch`. Returns the number of datagrams (GRO buffers split), `0` when
    /// nothing arrived within `wait`. Read them with [`RecvBatch::iter`].
    pub fn recv_batch(&mut self, batch: &mut RecvBatch, wait: Wait) -> io::Result<usize> {
        batch.filled = 0;
        batch.local = self.local;
        let fd = self.sock.as_raw_fd();
        let mut start = None;
        let mut spin_until = None;
        loop {
            let r = sys::recvmmsg(fd, &mut batch.slots, &mut batch.meta);
            match r {
                Ok(n) => {
                    batch.filled = n;
                    for i in 0..n {
                        batch.info[i] = cmsg::parse_recv(batch.control(i));
                    }
                    return Ok(batch.datagrams());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if wait == Wait::NonBlocking {
                        return Ok(0);
                    }
                    let start = *start.get_or_insert_with(Instant::now);
                    let waker = self.waker.as_deref();
                    if !wait_ready(fd, false, wait, start, &mut spin_until, waker)? {
                        return Ok(0);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// After `EAGAIN`: decides whether to retry now (spinning), after blocking, or give up (also
/// when `waker` fired, whose wake-ups are then consumed).
fn wait_ready(
    fd: std::os::fd::RawFd,
    write: bool,
    wait: Wait,
    start: Instant,
    spin_until: &mut Option<Instant>,
    waker: Option<&Waker>,
) -> io::Result<bool> {
    let block = |rem: Option<Duration>| -> io::Result<bool> {
        if sys::wait_fd(fd, write, waker.map(|w| w.raw_fd()), rem)? {
            if let Some(w) = waker {
                w.drain();
            }
            return Ok(false);
        }
        Ok(true)
    };
    let remaining = |t: Option<Duration>| t.map(|t| t.saturating_sub(start.elapsed()));
    match wait {
        Wait::NonBlocking => Ok(false),
        Wait::Block(t) => {
            let rem = remaining(t);
            if rem == Some(Duration::ZERO) {
                return Ok(false);
            }
            block(rem)
        }
        Wait::SpinThenBlock(spin, t) => {
            let until = *spin_until.get_or_insert(start + spin);
            if Instant::now() < until {
                std::hint::spin_loop();
                return Ok(true);
            }
            let t = t.map(|t| t + spin);
            let rem = remaining(t);
            if rem == Some(Duration::ZERO) {
                return Ok(false);
            }
            block(rem)
        }
    }
}

#[cfg(test)]
mod ttl_tests {
    use super::sendable_ttl;

    #[test]
    fn hop_limit_zero_is_sent_as_one_not_refused() {
        assert_eq!(sendable_ttl(Some(0)), Some(1));
        assert_eq!(sendable_ttl(Some(64)), Some(64));
        assert_eq!(sendable_ttl(None), None);
    }
}
