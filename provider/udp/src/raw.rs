//! A raw IPv4 sender (`AF_INET`, `SOCK_RAW`, `IPPROTO_RAW`, so `IP_HDRINCL`): we write the whole
//! IPv4 and UDP header, so the IPv4 identification, DSCP/ECN, TTL and UDP source port are exactly
//! what the caller asks for. Needs `CAP_NET_RAW`. Send-only (an `IPPROTO_RAW` socket receives
//! nothing); pair it with [`super::capture::Capture`] to receive whole IP packets.
//!
//! The kernel still fills in the IPv4 header checksum, and an identification of 0 only when DF
//! is clear (`raw_send_hdrinc` → `ip_select_ident`; with DF set 0 stays 0). Everything else is sent
//! as written. Use it to emulate foreign senders (kernel rxe's nonzero IDs) or for full control;
//! the ordinary [`super::Socket`] is the fast path.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, SockAddr, Type};

use super::cmsg::AlignedBuf;
use super::headers::WireHeaders;
use super::sys;

/// One packet for [`RawSender::send_batch`]: its headers (addresses, ports, ID, TOS, TTL, lengths)
/// and its UDP payload (BTH .. ICRC).
#[derive(Debug, Clone, Copy)]
pub struct RawDatagram<'a> {
    /// The IPv4 and UDP headers to send verbatim (IPv4 header checksum recomputed by the kernel).
    pub headers: WireHeaders,
    /// BTH .. ICRC.
    pub payload: &'a [u8],
}

/// A raw IPv4 sender with full header control.
pub struct RawSender {
    sock: socket2::Socket,
    bufs: Vec<AlignedBuf>,
    addrs: Vec<SockAddr>,
    scratch: sys::SendScratch,
}

impl std::fmt::Debug for RawSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawSender").finish_non_exhaustive()
    }
}

const MAX_PACKET: usize = 65535;

impl RawSender {
    /// Opens the raw socket. Fails with `PermissionDenied` without `CAP_NET_RAW`.
    pub fn open() -> io::Result<RawSender> {
        let sock = socket2::Socket::new(
            Domain::IPV4,
            Type::RAW.nonblocking(),
            Some(Protocol::from(libc::IPPROTO_RAW)),
        )?;
        let _ = sock.set_send_buffer_size(8 << 20);
        Ok(RawSender {
            sock,
            bufs: Vec::new(),
            addrs: Vec::new(),
            scratch: Default::default(),
        })
    }

    /// Sends the packets with `sendmmsg`; returns how many the kernel took (non-blocking).
    /// IPv6 headers are rejected with `InvalidInput`.
    pub fn send_batch(&mut self, pkts: &[RawDatagram<'_>]) -> io::Result<usize> {
        self.addrs.clear();
        for (i, p) in pkts.iter().enumerate() {
            if !p.headers.is_ipv4() {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            let n = 28 + p.payload.len();
            if n > MAX_PACKET {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            if self.bufs.len() <= i {
                self.bufs.push(AlignedBuf::new(MAX_PACKET, 64));
            }
            let b = self.bufs[i].as_mut_slice();
            b[..20].copy_from_slice(p.headers.ip());
            b[20..28].copy_from_slice(p.headers.udp());
            b[28..n].copy_from_slice(p.payload);
            let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
            self.addrs
                .push(SockAddr::from(SocketAddr::new(IpAddr::V4(dst), 0)));
        }
        let bufs = &self.bufs;
        let addrs = &self.addrs;
        let r = sys::sendmmsg(
            self.sock.as_raw_fd(),
            pkts.len(),
            |i| sys::SendMsg {
                addr: &addrs[i],
                data: &bufs[i].as_slice()[..28 + pkts[i].payload.len()],
                control: &[],
            },
            &mut self.scratch,
        );
        match r {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }
}
