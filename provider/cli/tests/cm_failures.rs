//! RDMA CM failure paths a user hits (issue 19), through the drop-in librdmacm.so.1: the roles of
//! `cm_failures.c` (compiled against the installed `rdma_cma.h`, run through `roce run`, one
//! process per side on 127.0.25.x), each ending in the event or errno kernel rdma_cm gives, and
//! none hanging:
//! - disconnect from either side with work posted: posted receives and a SEND that cannot
//!   complete (the peer has no receive; RNR retried for ever) flush with WR_FLUSH_ERR, the peer
//!   gets DISCONNECTED, and its receives flush when it answers;
//! - two listeners on one port: the second `rdma_bind_addr` fails (EADDRINUSE, EADDRNOTAVAIL
//!   beside a wildcard), as kernel `cma_check_port`, in one program and between two programs
//!   on one shared device;
//! - a peer killed mid-handshake (by PID) on a device of its own (`ROCE_SHARED=0`): the survivor
//!   gets UNREACHABLE (-ETIMEDOUT) when its REQ or REP retries run out (`ROCE_CM_RETRIES=0`: one
//!   6144 / 4096 ms timeout); on a shared device the steering helper ends a killed program's
//!   connections as the kernel ends a dead process's (one DREQ when established, REJ 28 after
//!   the CONNECT_REQUEST), so the peer gets DISCONNECTED or REJECTED at once;
//! - forged QP1 MADs (truncated, not CM, LAP, malformed, unknown comm IDs, wrong Q_Key) sent
//!   from a UDP socket with a correct ICRC: dropped and counted in `roce stat`, a DREQ for no
//!   connection answered with a DREP, and the listener then serves a real connection.
//!
//! The forged-MAD test runs once on a device of its own (`ROCE_SHARED=0`) and once on a shared
//! device (the default), whose steering helper owns `ip:4791` and takes what belongs to no
//! process itself: there the counts are the helper's (`roce stat --dev steer`).
//!
//! Prerequisites: a C compiler, librdmacm-dev and libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use roce_udp::{HeaderFacts, WireHeaders};
use roce_wire::{bth, cm, deth, mad, transport, Opcode, Psn};
use std::io::{Read, Write};
use std::net::{IpAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The compiled `cm_failures.c` (once per test binary), or `None` when a prerequisite is
/// missing outside CI.
fn program() -> Option<PathBuf> {
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    EXE.get_or_init(|| {
        let Some((_dir, exe)) = compile_c("cm_failures", CLibs::RdmaCm) else {
            return None;
        };
        Some(exe)
    })
    .clone()
}

/// One role of `cm_failures.c` under `roce run --ip`, its output collected as it comes.
struct Role {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    what: String,
}

fn collect(mut r: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let s = Arc::new(Mutex::new(String::new()));
    let to = s.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            to.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    s
}

impl Role {
    fn start(exe: &std::path::Path, ip: &str, args: &[&str], env: &[(&str, &str)]) -> Role {
        let mut c = Command::new(roce());
        c.args(["run", "--ip", ip, "--"]).arg(exe).args(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("spawn roce run");
        let out = collect(child.stdout.take().unwrap());
        let err = collect(child.stderr.take().unwrap());
        Role {
            stdin: child.stdin.take(),
            child,
            out,
            err,
            what: format!("{} on {ip}", args.join(" ")),
        }
    }

    fn text(&self) -> String {
        format!(
            "--- {} stdout:\n{}--- stderr:\n{}",
            self.what,
            self.out.lock().unwrap(),
            self.err.lock().unwrap()
        )
    }

    /// Waits until the output has a line `line` (or the process exits, or `limit` passes).
    fn wait_line(&mut self, line: &str, limit: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < limit {
            if self.out.lock().unwrap().lines().any(|l| l == line) {
                return true;
            }
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(50));
                return self.out.lock().unwrap().lines().any(|l| l == line);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Waits for the exit (killing it after `limit`): the exit code, `None` if it was killed.
    fn finish(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                return s.code();
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills it (SIGKILL to its PID: `roce run` execs the program) and reaps it.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn passed(&self) -> bool {
        let o = self.out.lock().unwrap();
        o.contains("DONE failures 0") && !o.contains(" FAIL")
    }

    /// The `EVENT <name> status <n> after_ms <n>` line: (name, status, ms).
    fn event(&self) -> Option<(String, i32, u64)> {
        let o = self.out.lock().unwrap();
        let l = o.lines().find(|l| l.starts_with("EVENT "))?;
        let f: Vec<&str> = l.split_whitespace().collect();
        Some((f[1].to_string(), f[3].parse().ok()?, f[5].parse().ok()?))
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// A server and a client of one connection; `disc` names the side that disconnects.
fn disconnect_with_work_posted(disc: &str, s_ip: &str, c_ip: &str) {
    let Some(exe) = program() else { return };
    let port = "7470";
    let mut server = Role::start(&exe, s_ip, &["server", s_ip, port, disc], &[]);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    let mut client = Role::start(&exe, c_ip, &["client", s_ip, port, disc], &[]);
    let cc = client.finish(Duration::from_secs(60));
    let sc = server.finish(Duration::from_secs(30));
    let all = format!("{}\n{}", server.text(), client.text());
    assert_eq!((sc, cc), (Some(0), Some(0)), "{all}");
    assert!(server.passed() && client.passed(), "{all}");
    let (d, p) = if disc == "server" {
        (&server, &client)
    } else {
        (&client, &server)
    };
    let (d, p) = (d.out.lock().unwrap(), p.out.lock().unwrap());
    for check in [
        "posted_receives_and_stuck_send_flushed",
        "work_posted_after_disconnect_flushed",
        "disconnected_after_drep",
    ] {
        assert!(d.contains(&format!("CHECK {check} ok")), "{all}");
    }
    for check in ["peer_gets_disconnected", "peer_receives_flushed"] {
        assert!(p.contains(&format!("CHECK {check} ok")), "{all}");
    }
}

#[test]
fn client_disconnects_with_work_posted() {
    disconnect_with_work_posted("client", "127.0.25.1", "127.0.25.2");
}

#[test]
fn server_disconnects_with_work_posted() {
    disconnect_with_work_posted("server", "127.0.25.3", "127.0.25.4");
}

#[test]
fn a_second_listener_on_the_same_port_fails_at_bind() {
    let Some(exe) = program() else { return };
    let ip = "127.0.25.5";
    let mut r = Role::start(&exe, ip, &["listeners", ip, "7471"], &[]);
    let code = r.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{}", r.text());
    assert!(r.passed(), "{}", r.text());
    let o = r.out.lock().unwrap().clone();
    assert!(
        o.contains("CHECK second_bind_same_address_eaddrinuse ok"),
        "{o}"
    );
    assert!(
        o.contains("CHECK wildcard_bind_beside_a_listener_eaddrnotavail ok"),
        "{o}"
    );
}

/// Two programs on one shared device (`ROCE_SHARED=1`): while the first listens on a port, the
/// second one's `rdma_bind_addr` to it fails with EADDRINUSE (98), and to the wildcard with
/// EADDRNOTAVAIL (99), as between two programs on one host with kernel rdma_cm; once the first
/// is killed the port is free.
#[test]
fn a_second_program_on_a_shared_device_cannot_take_a_listening_port() {
    let Some(exe) = program() else { return };
    let (ip, port) = ("127.0.25.13", "7475");
    let shared = [("ROCE_SHARED", "1")];
    let mut first = Role::start(&exe, ip, &["hang-server", ip, port], &shared);
    assert!(
        first.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        first.text()
    );
    let mut second = Role::start(&exe, ip, &["bind", ip, port], &shared);
    assert_eq!(
        second.finish(Duration::from_secs(20)),
        Some(0),
        "{}",
        second.text()
    );
    assert!(
        second.out.lock().unwrap().contains("BIND addr 98 any 99"),
        "{}\n{}",
        second.text(),
        first.text()
    );
    first.kill();
    let mut third = Role::start(&exe, ip, &["bind", ip, port], &shared);
    assert_eq!(
        third.finish(Duration::from_secs(20)),
        Some(0),
        "{}",
        third.text()
    );
    // its own specific bind now holds the port: the wildcard beside it clashes
    assert!(
        third.out.lock().unwrap().contains("BIND addr 0 any 99"),
        "{}",
        third.text()
    );
}

/// The survivor's event: UNREACHABLE with -ETIMEDOUT once its one try (`ROCE_CM_RETRIES=0`)
/// timed out, well before the bound.
fn assert_unreachable_in_time(r: &Role, timeout_ms: u64) {
    let (name, status, ms) = r
        .event()
        .unwrap_or_else(|| panic!("no event\n{}", r.text()));
    assert_eq!(
        (name.as_str(), status),
        ("RDMA_CM_EVENT_UNREACHABLE", -110),
        "{}",
        r.text()
    );
    assert!(
        ms >= timeout_ms - 100 && ms < timeout_ms + 5000,
        "after {ms} ms, expected about {timeout_ms}\n{}",
        r.text()
    );
}

#[test]
fn passive_side_killed_after_the_connect_request() {
    let Some(exe) = program() else { return };
    let (s_ip, c_ip, port) = ("127.0.25.6", "127.0.25.7", "7472");
    let own = [("ROCE_SHARED", "0")];
    let mut server = Role::start(&exe, s_ip, &["hang-server", s_ip, port], &own);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    let retries = [("ROCE_CM_RETRIES", "0"), ("ROCE_SHARED", "0")];
    let mut client = Role::start(&exe, c_ip, &["wait-client", s_ip, port], &retries);
    assert!(
        server.wait_line("REQUEST", Duration::from_secs(20)),
        "{}\n{}",
        server.text(),
        client.text()
    );
    server.kill();
    let code = client.finish(Duration::from_secs(40));
    assert_eq!(code, Some(0), "{}", client.text());
    // REQ timeout: 2 × IBA_time(18) + IBA_time(20) = 6144 ms (kernel rdma_cm would have sent
    // REJ 28 from the dead process's ids at once, as a shared device's helper does: cm README,
    // difference 12)
    assert_unreachable_in_time(&client, 6144);
}

#[test]
fn active_side_killed_after_its_req() {
    let Some(exe) = program() else { return };
    let (s_ip, c_ip, port) = ("127.0.25.8", "127.0.25.9", "7473");
    let own = [("ROCE_SHARED", "0")];
    let mut server = Role::start(&exe, s_ip, &["late-server", s_ip, port], &own);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    // the REQ carries Max CM Retries 0: the passive side's REP is sent once
    let retries = [("ROCE_CM_RETRIES", "0"), ("ROCE_SHARED", "0")];
    let mut client = Role::start(&exe, c_ip, &["hang-client", s_ip, port], &retries);
    assert!(
        server.wait_line("REQUEST", Duration::from_secs(20))
            && client.wait_line("REQ_SENT", Duration::from_secs(20)),
        "{}\n{}",
        server.text(),
        client.text()
    );
    client.kill();
    server
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"accept\n")
        .unwrap();
    let code = server.finish(Duration::from_secs(40));
    assert_eq!(code, Some(0), "{}", server.text());
    // REP timeout: IBA_time(REQ Local CM Response Timeout 20) = 4096 ms
    assert_unreachable_in_time(&server, 4096);
}

/// Programs killed on a shared device (the default), their peers on the same device: the
/// steering helper sends what the kernel's `cm_destroy_id` sends for a dead process's ids, so
/// - a server killed with its connection established: the client gets DISCONNECTED (status 0)
///   at once, answers with its DREP and exits cleanly (the kernel's peer would see the same);
/// - a server killed after the CONNECT_REQUEST: the client gets REJECTED with reason 28 at once
///   (not UNREACHABLE when its REQ retries run out);
/// and the helper counts one DREQ and one REJ (`roce stat --dev steer`), nothing for the
/// clients, which exit after tearing their ids down. A third program holds the device
/// meanwhile, so that the helper (and its statistics) stay. (A process's connection records
/// reach the helper within a millisecond of a change: `shared::MIRROR_DELAY`.)
#[test]
fn a_killed_programs_connections_end_for_their_peers_on_a_shared_device() {
    let Some(exe) = program() else { return };
    let ip = "127.0.25.19";
    // a helper left by an earlier run lingers 2 s, writing to that run's statistics directory
    let held =
        || std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| t.contains("1319007F:12B7"));
    let t = Instant::now();
    while held() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = std::env::temp_dir().join(format!("roce-cm-farewell-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let env = [
        ("ROCE_STAT_DIR", dir.to_str().unwrap()),
        ("ROCE_SHARED", "1"),
    ];
    let mut keeper = Role::start(&exe, ip, &["hang-server", ip, "7479"], &env);
    assert!(
        keeper.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        keeper.text()
    );

    // established, then the server is killed
    let mut server = Role::start(&exe, ip, &["hold-server", ip, "7477"], &env);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    let mut client = Role::start(&exe, ip, &["client", ip, "7477", "server"], &env);
    assert!(
        server.wait_line("ESTABLISHED", Duration::from_secs(20)),
        "{}\n{}",
        server.text(),
        client.text()
    );
    // a process's connection records reach the helper within a millisecond
    std::thread::sleep(Duration::from_millis(100));
    server.kill();
    let t = Instant::now();
    let code = client.finish(Duration::from_secs(30));
    let took = t.elapsed();
    assert!(code == Some(0) && client.passed(), "{}", client.text());
    assert!(
        took < Duration::from_secs(3),
        "DISCONNECTED took {took:?}\n{}",
        client.text()
    );

    // the CONNECT_REQUEST received, then the server is killed
    let mut server = Role::start(&exe, ip, &["hang-server", ip, "7478"], &env);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    let mut client = Role::start(&exe, ip, &["wait-client", ip, "7478"], &env);
    assert!(
        server.wait_line("REQUEST", Duration::from_secs(20)),
        "{}\n{}",
        server.text(),
        client.text()
    );
    // a process's connection records reach the helper within a millisecond
    std::thread::sleep(Duration::from_millis(100));
    server.kill();
    assert_eq!(
        client.finish(Duration::from_secs(30)),
        Some(0),
        "{}",
        client.text()
    );
    let (name, status, ms) = client
        .event()
        .unwrap_or_else(|| panic!("no event\n{}", client.text()));
    assert_eq!(
        (name.as_str(), status),
        ("RDMA_CM_EVENT_REJECTED", 28),
        "{}",
        client.text()
    );
    // after_ms counts from the REQ, before the kill: well under the REQ's 6144 ms timeout
    assert!(ms < 4000, "REJECTED after {ms} ms\n{}", client.text());

    // the helper's count: one DREQ, one REJ, nothing for the clients' clean exits (the
    // statistics file is rewritten every 500 ms)
    let want: [(&str, u64); 4] = [
        ("cm_orphan_dreq", 1),
        ("cm_orphan_rej", 1),
        ("cm_orphan_drep", 0),
        ("cm_orphan_sidr_rep", 0),
    ];
    let of = |got: &[(String, u64)], n: &str| got.iter().find(|(k, _)| k == n).map(|x| x.1);
    let t = Instant::now();
    let mut got = Vec::new();
    while t.elapsed() < Duration::from_secs(10) {
        got = stat_counters(ip, &dir, "steer");
        if want.iter().all(|&(n, v)| of(&got, n) == Some(v)) {
            // and still so a stat interval later
            std::thread::sleep(Duration::from_millis(600));
            got = stat_counters(ip, &dir, "steer");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    keeper.kill();
    let _ = std::fs::remove_dir_all(&dir);
    for (n, v) in want {
        assert_eq!(of(&got, n), Some(v), "{n}: {got:?}\n{}", keeper.text());
    }
}

/// A UD SEND_ONLY to QP1 from `src`:4791 to `dst`:4791 carrying `payload`, with its ICRC
/// (IPv4 identification 0, as the kernel gives an unconnected socket's DF datagrams).
fn gsi_datagram(src: IpAddr, dst: IpAddr, payload: &[u8], qkey: u32, psn: u32) -> Vec<u8> {
    let mut r = transport::Repr::new(bth::Repr::new(
        Opcode::UD_SEND_ONLY,
        mad::GSI_QPN,
        Psn::new(psn),
    ));
    r.bth.ack_req = true;
    r.deth = Some(deth::Repr {
        qkey,
        resv: 0,
        src_qp: roce_wire::Qpn::new(1),
    });
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut transport::Packet::new_unchecked(&mut buf[..]));
    buf[r.header_len()..r.header_len() + payload.len()].copy_from_slice(payload);
    let h = WireHeaders::new(&HeaderFacts {
        src,
        dst,
        sport: 4791,
        dport: 4791,
        payload_len: buf.len(),
        ip_id: 0,
        tos: 0,
        ttl: 64,
    });
    h.fill_icrc(&mut buf).unwrap();
    buf
}

/// A 256-byte CM MAD header (base version 1, class CM, version 2, method Send) with `attr` and
/// the two comm IDs of most messages.
fn raw_mad(attr: u16, local: u32, remote: u32) -> [u8; 256] {
    let mut x = [0u8; 256];
    x[..4].copy_from_slice(&[1, 7, 2, 3]);
    x[8..16].copy_from_slice(&0x77u64.to_be_bytes());
    x[16..18].copy_from_slice(&attr.to_be_bytes());
    x[24..28].copy_from_slice(&local.to_be_bytes());
    x[28..32].copy_from_slice(&remote.to_be_bytes());
    x
}

fn stat_counters(ip: &str, dir: &std::path::Path, dev: &str) -> Vec<(String, u64)> {
    let o = Command::new(roce())
        .args(["stat", "-a", "--ip", ip, "--dev", dev, "--stat-dir"])
        .arg(dir)
        .output()
        .expect("roce stat");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (n, v) = l.trim().split_once(' ')?;
            Some((n.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn forged_and_unknown_mads_are_dropped_and_counted() {
    // on a device of the process's own, its NIC and CM count them
    forged_mads(false, ("127.0.25.10", "127.0.25.11", "127.0.25.12", "7474"));
}

#[test]
fn forged_and_unknown_mads_are_dropped_and_counted_on_a_shared_device() {
    // on a shared device (the default) the steering helper owns ip:4791 and takes the MADs
    // that belong to no process: its NIC and CM count them, in `roce stat --dev steer`
    forged_mads(true, ("127.0.25.16", "127.0.25.17", "127.0.25.18", "7476"));
}

fn forged_mads(shared: bool, (s_ip, c_ip, f_ip, port): (&str, &str, &str, &str)) {
    let Some(exe) = program() else { return };
    let dir = std::env::temp_dir().join(format!("roce-cm-forged-{}-{shared}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stat_env = [
        ("ROCE_STAT_DIR", dir.to_str().unwrap()),
        ("ROCE_SHARED", if shared { "1" } else { "0" }),
    ];
    let mut server = Role::start(&exe, s_ip, &["server", s_ip, port, "client"], &stat_env);
    assert!(
        server.wait_line("LISTENING", Duration::from_secs(20)),
        "{}",
        server.text()
    );
    let sock = UdpSocket::bind((f_ip, 4791)).expect("bind the forger's address");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (src, dst): (IpAddr, IpAddr) = (f_ip.parse().unwrap(), s_ip.parse().unwrap());
    let send = |payload: &[u8], qkey: u32, psn: u32| {
        sock.send_to(&gsi_datagram(src, dst, payload, qkey, psn), (s_ip, 4791))
            .unwrap();
    };
    let dreq = |local, remote| {
        let mut b = [0u8; 256];
        cm::Mad::new(
            0x1234,
            cm::Message::Dreq(cm::dreq::Repr::new(local, remote, 9)),
        )
        .emit(&mut b)
        .unwrap();
        b
    };
    // truncated: a 100-byte MAD (the MAD layer takes only 256-byte ones)
    send(&dreq(1, 2)[..100], mad::GSI_QKEY, 1);
    // not CM: another management class, and a CM MAD with method GetResp
    let mut x = raw_mad(0x0015, 1, 2);
    x[1] = 0x04;
    send(&x, mad::GSI_QKEY, 2);
    let mut x = raw_mad(0x0015, 1, 2);
    x[3] = 0x81;
    send(&x, mad::GSI_QKEY, 3);
    // LAP: dropped on RoCE, as the kernel does
    send(&raw_mad(0x0019, 1, 2), mad::GSI_QKEY, 4);
    // malformed: a REJ whose Rejected Info Length is 73 (over 72)
    let mut x = raw_mad(0x0012, 1, 2);
    x[24 + 9] = 73 << 1;
    send(&x, mad::GSI_QKEY, 5);
    // REP, RTU, REJ, MRA, DREP, SIDR_REP for connections that do not exist
    for (i, attr) in [0x0013u16, 0x0014, 0x0012, 0x0011, 0x0016, 0x0018]
        .into_iter()
        .enumerate()
    {
        send(
            &raw_mad(attr, 0xAB00 + i as u32, 0xCD00),
            mad::GSI_QKEY,
            6 + i as u32,
        );
    }
    // the wrong Q_Key on QP1
    send(&dreq(1, 2), 0x1111_2222, 12);
    // a DREQ for no connection: answered with a DREP (IDs swapped, TID echoed), as cm.c
    send(&dreq(0xAAAA, 0xBBBB), mad::GSI_QKEY, 13);
    let mut buf = [0u8; 2048];
    let (n, from) = sock
        .recv_from(&mut buf)
        .expect("a DREP for the unknown DREQ");
    assert_eq!(from.ip(), dst);
    let p = transport::Packet::new_checked(&buf[..n]).unwrap();
    assert_eq!(p.bth().dest_qp(), mad::GSI_QPN);
    match cm::Mad::parse(p.payload()).unwrap() {
        cm::Mad {
            header,
            message: cm::Message::Drep(d),
        } => assert_eq!(
            (header.tid, d.local_comm_id, d.remote_comm_id),
            (0x1234, 0xBBBB, 0xAAAA)
        ),
        m => panic!("not a DREP: {m}"),
    }
    // `roce stat` shows them (the statistics file is rewritten every 500 ms)
    let want: [(&str, u64); 9] = [
        ("gsi_truncated", 1),
        ("gsi_dropped", 0),
        ("qkey_violation", 1),
        ("cm_mads_received", 11),
        ("cm_not_cm", 2),
        ("cm_unknown_attribute", 1),
        ("cm_malformed", 1),
        ("cm_unknown_comm_id", 7),
        ("cm_mads_sent", 1),
    ];
    let t = Instant::now();
    let mut got = Vec::new();
    while t.elapsed() < Duration::from_secs(10) {
        got = stat_counters(s_ip, &dir, if shared { "steer" } else { "rxe0" });
        let of = |n: &str| got.iter().find(|(k, _)| k == n).map(|x| x.1);
        if want.iter().all(|&(n, v)| of(n) == Some(v)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for (n, v) in want {
        let have = got.iter().find(|(k, _)| k == n).map(|x| x.1);
        assert_eq!(have, Some(v), "{n}: {got:?}\n{}", server.text());
    }
    // and the listener still serves a real connection
    let mut client = Role::start(&exe, c_ip, &["client", s_ip, port, "client"], &[]);
    let cc = client.finish(Duration::from_secs(60));
    let sc = server.finish(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    let all = format!("{}\n{}", server.text(), client.text());
    assert_eq!((sc, cc), (Some(0), Some(0)), "{all}");
    assert!(server.passed() && client.passed(), "{all}");
}
