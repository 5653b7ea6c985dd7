//! One emulated NIC per address shared by several processes (issue 20 item 1), opt-in with
//! `ROCE_SHARED=1` (`roce run --shared`).
//!
//! A NIC answers on `<ip>:4791` for every process, as a real one does, so one process must own
//! that port: a steering helper, `roce steer --ip <ip>`, started by the first process that
//! opens the device (detached, no root, no daemon to manage) and gone two seconds after the
//! last one closes or dies. Each process runs its own engine on its own UDP socket
//! (`<ip>:<ephemeral>`), sends from it directly, and registers with the helper over a Unix
//! stream socket (abstract name `roce-steer/<uid>/<ip>`). The helper gives each process a
//! slot, which fixes its QP numbers (a range of [`QPNS_PER_SLOT`]) and the top byte of its CM
//! communication IDs, so the helper routes without tables:
//!
//! * a datagram to QP *n* goes to the slot owning *n*;
//! * a CM MAD to QP1: a REQ or SIDR_REQ to the process listening on its service ID (the
//!   processes tell the helper their listeners), anything else by the top byte of the remote
//!   comm ID (the Request ID for SIDR_REP). What no process takes is answered as the kernel's
//!   CM answers it: REJ 8 for a REQ nobody listens for, SIDR_REP status 1, DREP for a DREQ of a
//!   connection that is gone.
//!
//! The helper checks each datagram's ICRC as the runtime does (`IcrcPolicy`), drops bad ones,
//! and forwards the rest with a [`HEADER_LEN`]-byte header carrying what the receiving engine
//! needs of the original IP/UDP headers (source address and port, TOS, TTL, flow label).
//! Datagrams between processes on this host (on one device or on two) skip the helper: they go
//! straight to the owning process's port, which the helper publishes in shared memory
//! ([`direct`]); `ROCE_DIRECT=0` sends them through the helper too.
//! A process's death closes its control connection: the helper frees the slot and ends the
//! process's RDMA CM connections for their peers as the kernel ends a dead process's (one DREQ,
//! REJ 28 / REJ 4 mid-handshake: `roce_cm::farewell`), from the records the process sent it
//! (`MIRROR` lines, [`Membership::mirror`]).
pub mod direct;
mod steer;

pub use steer::steer;

use roce_udp::os;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::time::{Duration, Instant};

/// The control protocol's version (`HELLO port pid version`): a helper and a process of
/// different builds refuse each other loudly.
const PROTOCOL: u32 = 2;
/// Processes one device can have at once.
pub const SLOTS: u32 = 64;
/// QP numbers per process: rxe's 17..0x20000 in [`SLOTS`] ranges.
pub const QPNS_PER_SLOT: u32 = (0x20000 - 17) / SLOTS;
/// Bytes in front of a forwarded datagram.
pub const HEADER_LEN: usize = 32;
const MAGIC: &[u8; 4] = b"RSTR";
/// How long a new or changed connection record waits before it goes to the helper
/// ([`Membership::mirror`]).
const MIRROR_DELAY: Duration = Duration::from_millis(1);
/// How long the helper stays after its last process.
const LINGER: Duration = Duration::from_secs(2);

/// The QP numbers of `slot`: `[first, end)`.
pub fn qpn_range(slot: u32) -> (u32, u32) {
    let first = 17 + slot * QPNS_PER_SLOT;
    (first, first + QPNS_PER_SLOT)
}

pub(crate) fn slot_of_qpn(qpn: u32) -> Option<u32> {
    qpn.checked_sub(17)
        .map(|q| q / QPNS_PER_SLOT)
        .filter(|s| *s < SLOTS)
}

fn control_name(ip: IpAddr) -> String {
    let uid = os::euid();
    format!("roce-steer/{uid}/{ip}")
}

/// The metadata the helper forwards in front of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forwarded {
    pub src: SocketAddr,
    pub tos: u8,
    pub ttl: u8,
    pub flow_label: u32,
    /// The IPv4 identification the datagram's ICRC covers, when the helper found it.
    pub ipv4_id: Option<u16>,
}

impl Forwarded {
    fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        out[..4].copy_from_slice(MAGIC);
        out[4] = 1;
        out[5] =
            if self.src.is_ipv4() { 4 } else { 6 } | if self.ipv4_id.is_some() { 0x80 } else { 0 };
        out[6] = self.tos;
        out[7] = self.ttl;
        out[8..10].copy_from_slice(&self.src.port().to_be_bytes());
        out[10..14].copy_from_slice(&self.flow_label.to_be_bytes());
        out[14..16].copy_from_slice(&self.ipv4_id.unwrap_or(0).to_be_bytes());
        out[16..].copy_from_slice(&match self.src.ip() {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        });
    }

    /// The header and the datagram behind it; `None` if `buf` does not start with one.
    pub fn parse(buf: &[u8]) -> Option<(Forwarded, &[u8])> {
        if buf.len() < HEADER_LEN || &buf[..4] != MAGIC || buf[4] != 1 {
            return None;
        }
        let a: [u8; 16] = buf[16..32].try_into().ok()?;
        let ip: IpAddr = match buf[5] & 0x7f {
            4 => std::net::Ipv6Addr::from(a).to_ipv4_mapped()?.into(),
            6 => std::net::Ipv6Addr::from(a).into(),
            _ => return None,
        };
        Some((
            Forwarded {
                src: SocketAddr::new(ip, u16::from_be_bytes([buf[8], buf[9]])),
                tos: buf[6],
                ttl: buf[7],
                flow_label: u32::from_be_bytes(buf[10..14].try_into().ok()?),
                ipv4_id: (buf[5] & 0x80 != 0).then(|| u16::from_be_bytes([buf[14], buf[15]])),
            },
            &buf[HEADER_LEN..],
        ))
    }
}

/// A process's registration with the helper; dropping it (or dying) frees the slot.
pub struct Membership {
    ctl: UnixStream,
    pub slot: u32,
    listening: Vec<u64>,
    /// The helper's slot-to-port table (for [`direct::Direct`]).
    pub ports: Option<direct::PortTable>,
    /// Connection mirror changes not sent yet, by local comm ID ([`Membership::mirror`]).
    mirror_pending: BTreeMap<u32, roce_cm::MirrorChange>,
    /// When the oldest of them came.
    mirror_since: Option<roce_emu::Instant>,
    /// Local comm IDs the helper holds a record of.
    mirror_held: std::collections::BTreeSet<u32>,
}

impl Membership {
    /// Registers the engine whose socket has `udp_port` on `ip`, starting the helper if none
    /// runs.
    pub fn join(ip: IpAddr, udp_port: u16) -> std::io::Result<Membership> {
        // A helper that was leaving (its last process gone two seconds ago) as this one
        // connected closes without an answer: the next try starts a new one.
        let mut tries = 0;
        loop {
            match Membership::join_once(ip, udp_port) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted && tries < 3 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                r => return r,
            }
        }
    }

    fn join_once(ip: IpAddr, udp_port: u16) -> std::io::Result<Membership> {
        let name = control_name(ip);
        let addr = UnixAddr::from_abstract_name(name.as_bytes())?;
        let mut spawned = false;
        let t0 = Instant::now();
        let ctl = loop {
            match UnixStream::connect_addr(&addr) {
                Ok(s) => break s,
                Err(e) if t0.elapsed() > Duration::from_secs(5) => {
                    let held = std::net::UdpSocket::bind((ip, roce_wire::ROCE_V2_UDP_PORT))
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::AddrInUse);
                    return Err(std::io::Error::new(
                        e.kind(),
                        if held {
                            format!(
                                "roce: {ip}:4791 is held by a process that does not share it \
                                 (started with ROCE_SHARED=0 or roce run --no-shared, or kernel \
                                 rxe): this NIC cannot be shared"
                            )
                        } else {
                            format!("roce: no steering helper for {ip} ({e})")
                        },
                    ));
                }
                Err(_) => {
                    if !spawned {
                        spawn_helper(ip)?;
                        spawned = true;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        let mut m = Membership {
            ctl,
            slot: 0,
            listening: Vec::new(),
            ports: None,
            mirror_pending: BTreeMap::new(),
            mirror_since: None,
            mirror_held: Default::default(),
        };
        let left = || {
            std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                format!("roce: the steering helper for {ip} left"),
            )
        };
        os::send_line(
            &m.ctl,
            format!("HELLO {udp_port} {} {PROTOCOL}\n", std::process::id()).as_bytes(),
        )
        .map_err(|_| left())?;
        // The answer is one line, with the port table's memfd attached.
        let mut got = Vec::new();
        let mut fd = None;
        while !got.ends_with(b"\n") {
            let mut buf = [0u8; 128];
            let (n, f) = os::recv_with_fd(&m.ctl, &mut buf, false).map_err(|_| left())?;
            if n == 0 {
                return Err(left());
            }
            got.extend_from_slice(&buf[..n]);
            fd = fd.or(f);
        }
        let line = String::from_utf8_lossy(&got).into_owned();
        match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["SLOT", n] if fd.is_some() => {
                m.slot = n.parse().map_err(std::io::Error::other)?;
                m.ports = fd.as_ref().and_then(|f| direct::PortTable::map(f).ok());
            }
            ["SLOT", _] => {
                return Err(std::io::Error::other(format!(
                    "roce: the steering helper for {ip} is from another build of roce (it sent \
                     no port table); end the programs using {ip} (and its `roce steer --ip {ip}`)"
                )))
            }
            _ => {
                return Err(std::io::Error::other(format!(
                    "roce: the steering helper for {ip} refused: {}",
                    line.trim()
                )))
            }
        }
        Ok(m)
    }

    /// Tells the helper what this process's connection manager would send for each connection
    /// if its ids were destroyed now (`roce_cm::Endpoint::poll_mirror`), so that when the
    /// process dies the helper sends it, as the kernel destroys a dead process's rdma_cm ids
    /// (`cm_destroy_id`). One `MIRROR` line per change, many in one send, no answer awaited.
    /// A record the helper holds is removed at once (it never sends a farewell the process
    /// already sent: `destroy_id`'s DREQ leaves after this); new and changed records wait up
    /// to [`MIRROR_DELAY`] (see [`Membership::mirror_deadline`]), so a connection set up and
    /// torn down within it costs no line at all.
    pub fn mirror(&mut self, cm: &mut roce_cm::Endpoint, now: roce_emu::Instant) {
        let mut urgent = false;
        while let Some(c) = cm.poll_mirror() {
            match c {
                roce_cm::MirrorChange::Set(m) => {
                    self.mirror_pending.insert(m.local_comm_id, c);
                }
                roce_cm::MirrorChange::Removed(id) if self.mirror_held.contains(&id) => {
                    self.mirror_pending.insert(id, c);
                    urgent = true;
                }
                roce_cm::MirrorChange::Removed(id) => {
                    self.mirror_pending.remove(&id);
                }
            }
        }
        if self.mirror_pending.is_empty() {
            self.mirror_since = None;
            return;
        }
        let since = *self.mirror_since.get_or_insert(now);
        if !urgent && now < since.add_nanos(MIRROR_DELAY.as_nanos() as u64) {
            return;
        }
        let mut lines = String::new();
        for (id, c) in std::mem::take(&mut self.mirror_pending) {
            match c {
                roce_cm::MirrorChange::Set(_) => self.mirror_held.insert(id),
                roce_cm::MirrorChange::Removed(_) => self.mirror_held.remove(&id),
            };
            lines.push_str("MIRROR ");
            lines.push_str(&c.to_string());
            lines.push('\n');
        }
        self.mirror_since = None;
        let _ = os::send_line(&self.ctl, lines.as_bytes());
    }

    /// When [`Membership::mirror`] must run next to send the records that wait.
    pub fn mirror_deadline(&self) -> Option<roce_emu::Instant> {
        self.mirror_since
            .map(|t| t.add_nanos(MIRROR_DELAY.as_nanos() as u64))
    }

    /// Tells the helper the service IDs this process listens on (when they changed).
    pub fn set_listening(&mut self, mut sids: Vec<u64>) {
        sids.sort_unstable();
        if sids == self.listening {
            return;
        }
        let mut l = String::from("LISTEN");
        for s in &sids {
            l.push_str(&format!(" {s:x}"));
        }
        l.push('\n');
        if os::send_line(&self.ctl, l.as_bytes()).is_ok() {
            // Wait for the helper to have it (as rdma_listen returns once the kernel has it).
            if os::poll_in(&[self.ctl.as_raw_fd()], 2000)[0] {
                let mut buf = [0u8; 16];
                let _ = os::recv_with_fd(&self.ctl, &mut buf, true);
            }
        }
        self.listening = sids;
    }
}

/// Starts `roce steer --ip IP` detached (its own session; never this program's child for
/// long: the intermediate exits at once).
fn spawn_helper(ip: IpAddr) -> std::io::Result<()> {
    let exe = helper_exe().ok_or_else(|| {
        std::io::Error::other(
            "roce: cannot find the roce executable for the steering helper (set ROCE_HELPER)",
        )
    })?;
    let mut c = std::process::Command::new("setsid");
    c.arg("-f")
        .arg(exe)
        .args(["steer", "--ip", &ip.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let _ = c.status()?;
    Ok(())
}

/// `$ROCE_HELPER`, else the `roce` next to the running `roce` or to the drop-in library.
pub(crate) fn helper_exe() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("ROCE_HELPER").filter(|p| !p.is_empty()) {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    if exe.file_name().is_some_and(|n| n == "roce") {
        return Some(exe);
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libroce_ibverbs.so"))?;
    let deps = std::path::Path::new(lib).parent()?;
    [deps.join("roce"), deps.parent()?.join("roce")]
        .into_iter()
        .find(|p| p.is_file())
}

/// The slot whose process holds comm ID `id` (its top byte is the slot + 1).
pub(crate) fn comm_slot(id: u32) -> Option<u32> {
    (id >> 24).checked_sub(1).filter(|s| *s < SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_ranges() {
        for src in ["127.0.0.7:49152", "[fd00::9]:4791"] {
            let f = Forwarded {
                src: src.parse().unwrap(),
                tos: 3,
                ttl: 61,
                flow_label: 0x12345,
                ipv4_id: Some(7),
            };
            let mut h = [0u8; HEADER_LEN];
            f.emit(&mut h);
            let mut buf = h.to_vec();
            buf.extend_from_slice(b"packet");
            let (g, rest) = Forwarded::parse(&buf).unwrap();
            assert_eq!((g, rest), (f, &b"packet"[..]));
        }
        assert!(Forwarded::parse(b"RSTRx").is_none());
        assert_eq!(qpn_range(0).0, 17);
        assert_eq!(qpn_range(SLOTS - 1).1, 17 + SLOTS * QPNS_PER_SLOT);
        assert!(qpn_range(SLOTS - 1).1 <= 0x20000);
        for s in [0, 1, 63] {
            let (a, b) = qpn_range(s);
            assert_eq!((slot_of_qpn(a), slot_of_qpn(b - 1)), (Some(s), Some(s)));
        }
        assert_eq!(comm_slot(0x0100_0001), Some(0));
        assert_eq!(comm_slot(0x0000_0001), None);
    }
}
