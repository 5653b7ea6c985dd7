//! The steering helper, `roce steer --ip IP` ([`steer`]): owns `<ip>:4791`, gives each process
//! of the device a slot, forwards each datagram to the process owning its QP, listener or comm
//! ID, answers what nobody owns with a NIC and CM of its own, and ends a dead process's
//! connections for their peers (see the [module above](super)).

use super::{
    comm_slot, control_name, direct, slot_of_qpn, Forwarded, HEADER_LEN, LINGER, PROTOCOL, SLOTS,
};
use roce_udp::os;
use roce_udp::{IcrcCounters, IcrcPolicy, OutDatagram, RecvBatch, Socket, SocketConfig, Wait};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

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
        if ready[1..].iter().any(|&r| r) {
            // control first: a listener registered before a REQ came must be known to it
            continue;
        }
        // (also after a timeout: an interrupted poll reports nothing)
        let before = os::monotonic_ns();
        let n = sock.recv_batch(&mut rx, Wait::NonBlocking)?;
        // The socket is empty: all that came before `before` has been read (and is forwarded
        // below), which tells senders when they may go straight again (`direct`).
        let drained = (rx.buffers() < rx.capacity()).then_some(before);
        if n == 0 {
            if let Some(t) = drained {
                ports.set_drained(t);
            }
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
        if let Some(t) = drained {
            ports.set_drained(t);
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
