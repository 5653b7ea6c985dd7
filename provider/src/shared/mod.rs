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

use roce_udp::os;
use roce_udp::{IcrcCounters, IcrcPolicy, OutDatagram, RecvBatch, Socket, SocketConfig, Wait};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
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

/// A control connection that has not said HELLO (yet).
const NO_SLOT: u32 = u32::MAX;

struct Client {
    ctl: BufReader<UnixStream>,
    /// The line being read (kept across reads that would block mid-line).
    line: String,
    port: u16,
    slot: u32,
    /// Its connections' farewells by local comm ID (`MIRROR` lines), sent when it dies.
    conns: BTreeMap<u32, roce_cm::ConnMirror>,
    listening: Vec<u64>,
    /// Service IDs it stopped listening on lately, and when (see [`RECENT_LISTENER`]).
    recent: Vec<(u64, Instant)>,
}

/// A REQ for a service ID nobody listens on goes to the process that listened on it within
/// this long, whose CM decides (it may be listening again by then, or it answers REJ 8 itself).
/// A program that closes a listener and opens a new one on the same port (perftest's `-R`
/// between its exchange and its test connection) would otherwise lose every REQ that comes in
/// between to the helper's REJ 8, where with the port to itself its own CM took the REQ after
/// its new listen.
const RECENT_LISTENER: Duration = Duration::from_secs(1);

/// `roce steer --ip IP`: the helper's loop. Returns when no process has used the device for
/// [`LINGER`].
pub fn steer(ip: IpAddr, policy: IcrcPolicy) -> std::io::Result<()> {
    let name = control_name(ip);
    let listener = match UnixListener::bind_addr(&UnixAddr::from_abstract_name(name.as_bytes())?) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Ok(()), // another won
        Err(e) => return Err(e),
    };
    listener.set_nonblocking(true)?;
    let mut sock = Socket::bind(ip, SocketConfig::default()).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("roce steer: cannot bind UDP {ip}:4791: {e}"),
        )
    })?;
    let mut rx = RecvBatch::new(16);
    let (ports, ports_fd) = direct::PortTable::create()?;
    // What no process takes on QP1 (a REQ or SIDR_REQ nobody listens for, a DREQ for a
    // connection that is gone) is answered as the kernel's CM answers it (REJ 8, SIDR_REP 1,
    // DREP) by a CM of the helper's own with no ids, sent from QP1 of a NIC of its own.
    // The helper has checked the ICRC: its NIC takes QP1's datagrams as they are, and checks
    // the rest (headers, Q_Key, a whole MAD) and counts what it drops, as a process's would.
    let ncfg = roce_emu::NicConfig {
        udp_sport: Some(roce_wire::ROCE_V2_UDP_PORT),
        gsi: true,
        icrc_policy: roce_emu::IcrcPolicy::Trust,
        ..roce_emu::NicConfig::new(ip)
    };
    let mut orphan_cm = roce_cm::Endpoint::new(roce_cm::Config {
        node_guid: ncfg.node_guid(),
        addrs: vec![ip],
        path_mtu: 1024,
        seed: os::monotonic_ns() ^ u64::from(std::process::id()),
        max_cm_retries: 15,
    });
    let node_guid = ncfg.node_guid();
    let mut orphan_nic = roce_emu::Nic::new(ncfg);
    // Farewells sent for dead processes' connections, by `roce_cm::MirrorState`.
    let mut farewells = [0u64; 7];
    let mut tx_buf = vec![0u8; 4096 + 64];
    let counters = IcrcCounters::default();
    let mut clients: Vec<Client> = Vec::new();
    let mut idle_since = Some(Instant::now());
    // The helper's own statistics file, device name "steer" (`roce stat --dev steer`): what its
    // NIC and CM did with the QP1 datagrams no process owns; removed when it exits.
    let mut scfg = crate::runtime::Config::from_env();
    scfg.ip = ip;
    scfg.name = "steer".into();
    let stat_file = StatFileGuard(crate::runtime::stat::stat_path(&scfg));
    let mut last_stat: Option<Instant> = None;
    let mut hdr = [0u8; HEADER_LEN];
    // What one receive batch forwards: the datagrams back to back, and runs of them to one
    // process that leave as one GSO send (`Run`).
    let mut arena: Vec<u8> = Vec::with_capacity(16 * 65536 * 2);
    let mut runs: Vec<Run> = Vec::new();
    loop {
        // control: new processes, their messages, their deaths
        ports.beat(os::monotonic_ns());
        while let Ok((s, _)) = listener.accept() {
            let _ = s.set_nonblocking(true);
            clients.push(Client {
                ctl: BufReader::new(s),
                line: String::new(),
                port: 0,
                slot: NO_SLOT,
                conns: BTreeMap::new(),
                listening: Vec::new(),
                recent: Vec::new(),
            });
        }
        let mut i = 0;
        while i < clients.len() {
            let keep = loop {
                let c = &mut clients[i];
                match c.ctl.read_line(&mut c.line) {
                    Ok(0) => break false,
                    Ok(_) if !c.line.ends_with('\n') => {}
                    Ok(_) => {
                        let line = std::mem::take(&mut c.line);
                        let w: Vec<&str> = line.split_whitespace().collect();
                        match w.first().copied() {
                            // A process of this device: a slot, and the port table.
                            Some("HELLO")
                                if w.get(3).and_then(|v| v.parse().ok()) != Some(PROTOCOL) =>
                            {
                                let _ = clients[i].ctl.get_mut().write_all(
                                    format!(
                                        "ERR this helper speaks protocol {PROTOCOL} (pid {}): \
                                         another build of roce runs on this address\n",
                                        std::process::id()
                                    )
                                    .as_bytes(),
                                );
                                break false;
                            }
                            Some("HELLO") if clients[i].slot == NO_SLOT => {
                                let Some(slot) =
                                    (0..SLOTS).find(|n| clients.iter().all(|c| c.slot != *n))
                                else {
                                    let _ = clients[i]
                                        .ctl
                                        .get_mut()
                                        .write_all(b"ERR too many processes on this device\n");
                                    break false;
                                };
                                let c = &mut clients[i];
                                c.slot = slot;
                                c.port = w.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
                                ports.set_port(slot, c.port);
                                let _ = os::send_with_fd(
                                    c.ctl.get_ref(),
                                    format!("SLOT {slot}\n").as_bytes(),
                                    &ports_fd,
                                );
                            }
                            // A process of another device on this host: the table only.
                            Some("OBSERVE") if clients[i].slot == NO_SLOT => {
                                let _ = os::send_with_fd(
                                    clients[i].ctl.get_ref(),
                                    b"TABLE\n",
                                    &ports_fd,
                                );
                                break false;
                            }
                            // What its CM would send for a connection if it died now.
                            Some("MIRROR") => {
                                let c = &mut clients[i];
                                match line["MIRROR".len()..].parse() {
                                    Ok(roce_cm::MirrorChange::Set(m)) => {
                                        c.conns.insert(m.local_comm_id, m);
                                    }
                                    Ok(roce_cm::MirrorChange::Removed(id)) => {
                                        c.conns.remove(&id);
                                    }
                                    Err(_) => {}
                                }
                            }
                            Some("LISTEN") => {
                                let now: Vec<u64> = w[1..]
                                    .iter()
                                    .filter_map(|s| u64::from_str_radix(s, 16).ok())
                                    .collect();
                                let c = &mut clients[i];
                                c.recent.retain(|(s, t)| {
                                    t.elapsed() < RECENT_LISTENER && !now.contains(s)
                                });
                                for s in c.listening.iter().filter(|s| !now.contains(s)) {
                                    c.recent.push((*s, Instant::now()));
                                }
                                c.listening = now;
                                let _ = os::send_line(clients[i].ctl.get_ref(), b"OK\n");
                            }
                            _ => {}
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                    Err(_) => break false,
                }
            };
            if keep {
                i += 1;
            } else {
                // gone (exit, kill -9) or only observing: its slot's port is nobody's now
                let c = clients.swap_remove(i);
                if c.slot != NO_SLOT {
                    ports.set_port(c.slot, 0);
                }
                // and its connections end for their peers as the kernel's `cm_destroy_id`
                // ends a dead process's: one DREQ, REJ 28 / REJ 4, DREP, SIDR_REP 2
                let now = roce_emu::Instant::from_nanos(os::monotonic_ns());
                let mads = c.conns.values().map(|m| {
                    farewells[m.state as usize] += 1;
                    roce_cm::farewell(m, node_guid)
                });
                orphan_transmit(&mut orphan_nic, &sock, &mut tx_buf, now, mads);
            }
        }
        if last_stat.map_or(true, |t| t.elapsed() >= scfg.stat_interval) {
            last_stat = Some(Instant::now());
            if let Some(p) = &stat_file.0 {
                let mut v: Vec<(String, u64)> = orphan_nic
                    .counters()
                    .iter()
                    .map(|(n, x)| (n.to_string(), x))
                    .collect();
                for (n, x) in crate::runtime::stat::cm_counters(orphan_cm.counters()) {
                    v.push((n.to_string(), x));
                }
                v.extend(orphan_counters(&farewells));
                let _ =
                    crate::runtime::stat::write(p, &scfg, &crate::runtime::Stats { counters: v });
            }
        }
        if clients.is_empty() {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() > LINGER {
                return Ok(());
            }
        } else {
            idle_since = None;
        }
        // Wait for a datagram, a new process or a message of one (a listener must be known
        // before the process's rdma_listen returns: a REQ that comes after it is never REJ 8).
        let fds: Vec<_> = [sock.as_socket2().as_raw_fd(), listener.as_raw_fd()]
            .into_iter()
            .chain(clients.iter().map(|c| c.ctl.get_ref().as_raw_fd()))
            .collect();
        let ready = os::poll_in(&fds, 50);
        if !ready[0] || ready[1..].iter().any(|&r| r) {
            // control first: a listener registered before a REQ came must be known to it
            continue;
        }
        let n = sock.recv_batch(&mut rx, Wait::NonBlocking)?;
        if n == 0 {
            continue;
        }
        arena.clear();
        runs.clear();
        for d in rx.iter() {
            if d.truncated {
                continue;
            }
            let verdict = d.check_icrc(policy, &counters);
            if !verdict.accept() {
                continue;
            }
            // the IPv4 ID the ICRC covers, for the receiver's capture
            let ipv4_id = match verdict {
                roce_udp::IcrcVerdict::Verified if d.src.is_ipv4() => {
                    Some(roce_udp::headers::gso_segment_ip_id(d.gro_index as usize))
                }
                roce_udp::IcrcVerdict::RecoveredId(id) => Some(id),
                _ => None,
            };
            // the owner of its QP, or of the connection its MAD names; QP1's MADs that no
            // live process takes (a REQ nobody listens for, anything for a dead process's
            // connection) go to the helper's own CM
            let owner = route(d.payload, &clients)
                .and_then(|slot| clients.iter().find(|c| c.slot == slot && c.port != 0));
            let Some(c) = owner else {
                if for_qp1(d.payload) {
                    let now = roce_emu::Instant::from_nanos(os::monotonic_ns());
                    orphan_nic.handle_datagram(
                        now,
                        &roce_emu::RxMeta {
                            src_ip: d.src.ip(),
                            dst_ip: d.dst,
                            src_port: d.src.port(),
                            ipv4_id: None,
                            tos: d.tos.unwrap_or(0),
                            ttl: d.ttl.unwrap_or(64),
                            flow_label: 0,
                        },
                        d.payload,
                    );
                    while let Some(m) = orphan_nic.poll_mad() {
                        orphan_cm.handle_mad(
                            now,
                            &roce_cm::MadIn {
                                src: m.src_ip,
                                dst: m.dst_ip,
                                flow_label: m.flow_label,
                                traffic_class: m.traffic_class,
                                hop_limit: m.hop_limit,
                                bytes: &m.bytes,
                            },
                        );
                    }
                    let mads = std::iter::from_fn(|| orphan_cm.poll_transmit());
                    orphan_transmit(&mut orphan_nic, &sock, &mut tx_buf, now, mads);
                }
                continue;
            };
            Forwarded {
                src: d.src,
                tos: d.tos.unwrap_or(0),
                ttl: d.ttl.unwrap_or(64),
                flow_label: 0,
                ipv4_id,
            }
            .emit(&mut hdr);
            let start = arena.len();
            arena.extend_from_slice(&hdr);
            arena.extend_from_slice(d.payload);
            Run::add(&mut runs, c.port, start, arena.len());
        }
        if !runs.is_empty() {
            let out: Vec<OutDatagram<'_>> = runs
                .iter()
                .map(|r| OutDatagram {
                    dst: ip,
                    dst_port: r.port,
                    src_port: roce_wire::ROCE_V2_UDP_PORT,
                    tos: None,
                    ttl: None,
                    payload: &arena[r.start..r.end],
                    gso_size: (r.count > 1).then_some(r.seg as u16),
                })
                .collect();
            let _ = sock.send_batch(&out, Wait::Block(Some(Duration::from_millis(20))));
        }
    }
}

/// Sends `mads` from QP1 of the helper's NIC (each a UD SEND to the peer's QP1, as a process's
/// CM sends them) out of the helper's socket.
fn orphan_transmit(
    nic: &mut roce_emu::Nic,
    sock: &Socket,
    tx_buf: &mut [u8],
    now: roce_emu::Instant,
    mads: impl Iterator<Item = roce_cm::MadOut>,
) {
    for out in mads {
        let path = roce_emu::gsi::GsiPath {
            src_ip: out.src,
            dst_ip: out.dst,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        nic.send_mad(path, 1, &out.bytes);
    }
    while let Some(t) = nic.poll_transmit(now, tx_buf) {
        let to = socket2::SockAddr::from(SocketAddr::new(t.dst_ip, t.dst_port));
        let _ = sock.as_socket2().send_to(&tx_buf[..t.len], &to);
    }
}

/// The helper's counters of farewells sent for dead processes (`farewells` by
/// `roce_cm::MirrorState`): `cm_orphan_dreq` (established), `cm_orphan_rej` (REJ 4 or 28 for a
/// handshake), `cm_orphan_drep` (a DREQ it had received), `cm_orphan_sidr_rep` (status 2).
fn orphan_counters(farewells: &[u64; 7]) -> [(String, u64); 4] {
    use roce_cm::MirrorState as S;
    let f = |s: S| farewells[s as usize];
    [
        ("cm_orphan_dreq".into(), f(S::Established)),
        (
            "cm_orphan_rej".into(),
            f(S::ReqSent) + f(S::ReqRcvd) + f(S::RepRcvd) + f(S::RepSent),
        ),
        ("cm_orphan_drep".into(), f(S::DreqRcvd)),
        ("cm_orphan_sidr_rep".into(), f(S::SidrReqRcvd)),
    ]
}

/// Forwarded datagrams to one process that leave as one GSO send: equal segments, the last one
/// possibly shorter, at most [`roce_udp::MAX_GSO_SEGMENTS`].
struct Run {
    port: u16,
    start: usize,
    end: usize,
    seg: usize,
    count: usize,
    closed: bool,
}

impl Run {
    fn add(runs: &mut Vec<Run>, port: u16, start: usize, end: usize) {
        let len = end - start;
        if let Some(r) = runs.last_mut() {
            if r.port == port
                && r.end == start
                && !r.closed
                && r.count < roce_udp::MAX_GSO_SEGMENTS
                && len <= r.seg
                && r.end - r.start + len <= 65000
            {
                r.end = end;
                r.count += 1;
                r.closed = len < r.seg;
                return;
            }
        }
        runs.push(Run {
            port,
            start,
            end,
            seg: len,
            count: 1,
            closed: false,
        });
    }
}

/// The MAD of a datagram to QP1 (BTH, DETH, 256 bytes).
/// Removes the helper's statistics file when the helper returns.
struct StatFileGuard(Option<std::path::PathBuf>);

impl Drop for StatFileGuard {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A datagram (BTH .. ICRC) for QP1.
fn for_qp1(p: &[u8]) -> bool {
    p.len() >= 12 && u32::from_be_bytes([0, p[5], p[6], p[7]]) == 1
}

/// The slot a datagram (BTH .. ICRC) is for.
fn route(p: &[u8], clients: &[Client]) -> Option<u32> {
    if p.len() < 12 {
        return None;
    }
    let dqp = u32::from_be_bytes([0, p[5], p[6], p[7]]);
    if dqp != 1 {
        return slot_of_qpn(dqp);
    }
    // QP1: a MAD after BTH (12) and DETH (8)
    let mad = p.get(20..20 + 256)?;
    let attr = u16::from_be_bytes([mad[16], mad[17]]);
    let data = &mad[24..];
    match attr {
        // REQ and SIDR_REQ: the listener of the service ID (payload offset 8 in both)
        0x0010 | 0x0017 => {
            let sid = u64::from_be_bytes(data[8..16].try_into().ok()?);
            clients
                .iter()
                .find(|c| c.listening.contains(&sid))
                .or_else(|| {
                    clients.iter().find(|c| {
                        c.recent
                            .iter()
                            .any(|(s, t)| *s == sid && t.elapsed() < RECENT_LISTENER)
                    })
                })
                .map(|c| c.slot)
        }
        // SIDR_REP: the Request ID (offset 0); the others: the Remote Comm ID (offset 4)
        0x0018 => comm_slot(u32::from_be_bytes(data[0..4].try_into().ok()?)),
        _ => comm_slot(u32::from_be_bytes(data[4..8].try_into().ok()?)),
    }
}

fn comm_slot(id: u32) -> Option<u32> {
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
