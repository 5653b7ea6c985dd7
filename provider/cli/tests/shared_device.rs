//! One emulated NIC shared by several processes (the default; these tests still say
//! `--shared`; issue 20 item 1): the steering helper owns `<ip>:4791`, each process runs its
//! engine on its own socket, and datagrams and CM MADs reach the process that owns their QP or
//! connection. Unmodified tools
//! with server and client on the same address; two pairs at once; a killed process does not
//! disturb the others; the helper leaves after the last process.
//!
//! And the launcher case the sharing is for: `roce run -- mpirun -np 2` and `-np 4` with
//! Open MPI's UCX PML over `rc_verbs` and with its CM PML over libfabric's `verbs;ofi_rxd`, every
//! rank on the one NIC; libfabric's own `fi_pingpong` (msg, rdm over ofi_rxm and ofi_rxd, dgram).
//! These two are run by the "real stacks" stage (`scripts/real-stacks`).
//!
//! Prerequisites: perftest, rdmacm-utils, openmpi-bin, libopenmpi-dev, ucx-utils (FAIL under
//! `CI=true`, else a SKIP).
mod common;
use common::*;
use std::time::{Duration, Instant};

fn args(ip: &str) -> Vec<String> {
    vec!["--shared".into(), "--ip".into(), ip.into()]
}

fn cmd(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn helper_running(ip: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains(" steer --ip ") && c.trim_end().ends_with(ip)
        })
    })
}

fn wait_helper_gone(ip: &str) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if !helper_running(ip) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// A perftest server and client on `ip` (TCP port `port` for its exchange).
fn perftest_pair(ip: &str, port: &str) -> (Proc, Proc) {
    let base = [
        "ib_write_bw",
        "-d",
        "rxe0",
        "-x",
        "1",
        "-n",
        "300",
        "-F",
        "-p",
        port,
    ];
    let server = spawn(&args(ip), &cmd(&base), &[]);
    let t = Instant::now();
    while !tcp_listening(port.parse().unwrap()) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = base.to_vec();
    c.push(ip);
    (server, spawn(&args(ip), &cmd(&c), &[]))
}

#[test]
fn server_and_client_on_one_address_two_pairs_at_once() {
    if !have_tools(&["ib_write_bw"], "perftest") {
        return;
    }
    let ip = "127.0.24.1";
    let (s1, c1) = perftest_pair(ip, "19501");
    let (s2, c2) = perftest_pair(ip, "19502");
    for (name, p) in [
        ("client 1", c1),
        ("server 1", s1),
        ("client 2", c2),
        ("server 2", s2),
    ] {
        let o = p.wait(Duration::from_secs(60));
        assert_eq!(o.code, Some(0), "{name}: {}", o.all());
        assert!(o.stdout.contains("65536"), "{name}: {}", o.all());
    }
    assert!(
        wait_helper_gone(ip),
        "the helper stayed after the last process"
    );
}

#[test]
fn rdma_cm_connects_two_processes_on_one_address() {
    if !have_tools(&["rping", "udaddy"], "rdmacm-utils") {
        return;
    }
    let ip = "127.0.24.2";
    let server = spawn(
        &args(ip),
        &cmd(&["rping", "-s", "-a", ip, "-v", "-C", "20"]),
        &[],
    );
    std::thread::sleep(Duration::from_millis(800));
    let client = spawn(
        &args(ip),
        &cmd(&["rping", "-c", "-a", ip, "-v", "-C", "20"]),
        &[],
    )
    .wait(Duration::from_secs(60));
    let server = server.wait(Duration::from_secs(20));
    assert_eq!(
        client.code,
        Some(0),
        "client: {}\nserver: {}",
        client.all(),
        server.all()
    );
    assert_eq!(server.code, Some(0), "server: {}", server.all());
    let pings = client
        .stdout
        .lines()
        .filter(|l| l.starts_with("ping data: rdma-ping-"))
        .count();
    assert_eq!(pings, 20, "{}", client.all());
    // UD through SIDR
    let server = spawn(&args(ip), &cmd(&["udaddy", "-b", ip]), &[]);
    std::thread::sleep(Duration::from_millis(800));
    let client = spawn(&args(ip), &cmd(&["udaddy", "-s", ip]), &[]).wait(Duration::from_secs(60));
    let server = server.wait(Duration::from_secs(20));
    assert_eq!(client.code, Some(0), "udaddy client: {}", client.all());
    assert_eq!(server.code, Some(0), "udaddy server: {}", server.all());
}

#[test]
fn a_killed_process_leaves_the_others_working() {
    if !have_tools(&["ib_write_bw"], "perftest")
        || !have_tools(&["ibv_rc_pingpong"], "ibverbs-utils")
    {
        return;
    }
    let ip = "127.0.24.3";
    // a process that joins the device (ibv_rc_pingpong opens it before it waits for its
    // client) and is killed -9 while waiting
    let victim = spawn(
        &args(ip),
        &cmd(&["ibv_rc_pingpong", "-g", "1", "-p", "19503"]),
        &[],
    );
    let t = Instant::now();
    while !tcp_listening(19503) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    while !helper_running(ip) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        helper_running(ip),
        "no helper while a process uses the device"
    );
    std::thread::sleep(Duration::from_millis(300));
    let _ = victim.kill();
    // the survivors: a pair started after the kill uses the device normally
    let (s, c) = perftest_pair(ip, "19504");
    let c = c.wait(Duration::from_secs(60));
    let s = s.wait(Duration::from_secs(20));
    assert_eq!(c.code, Some(0), "client: {}", c.all());
    assert_eq!(s.code, Some(0), "server: {}", s.all());
    assert!(
        wait_helper_gone(ip),
        "the helper stayed after the last process"
    );
}

#[test]
fn a_request_nobody_listens_for_is_rejected_at_once() {
    if !have_tools(&["rping"], "rdmacm-utils") {
        return;
    }
    let ip = "127.0.24.4";
    // a process on the device, listening on another port
    let idle = spawn(
        &args(ip),
        &cmd(&["rping", "-s", "-a", ip, "-p", "7000"]),
        &[],
    );
    let t = Instant::now();
    while !helper_running(ip) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let client = spawn(
        &args(ip),
        &cmd(&["rping", "-c", "-a", ip, "-p", "7001", "-C", "1"]),
        &[],
    )
    .wait(Duration::from_secs(30));
    let took = t.elapsed();
    let _ = idle.kill();
    assert!(!client.timed_out, "{}", client.all());
    assert_ne!(client.code, Some(0), "{}", client.all());
    assert!(
        took < Duration::from_secs(10),
        "REJ 8 should come at once: {took:?}"
    );
    assert!(client.all().contains("REJECTED"), "{}", client.all());
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn mpirun_with_ucx_and_with_libfabric_on_one_shared_nic() {
    if !have_tools(&["mpirun", "mpicc"], "openmpi-bin libopenmpi-dev") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("roce-mpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("mpi_pingpong");
    let st = std::process::Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mpi_pingpong.c"))
        .status()
        .expect("mpicc");
    assert!(st.success(), "mpicc failed");
    let ip = "127.0.24.5";
    let exe_s = exe.to_string_lossy().into_owned();
    // Open MPI's UCX PML over rc_verbs, then its CM PML over libfabric's verbs;ofi_rxd
    // (FI_VERBS_GID_IDX=1: the RoCE v2 GID; FI_UNIVERSE_SIZE as on rxe)
    let ucx: &[&str] = &[
        "--mca",
        "pml",
        "ucx",
        "--mca",
        "btl",
        "^openib,uct",
        "-x",
        "UCX_TLS=rc_verbs,ud_verbs,self",
        "-x",
        "UCX_NET_DEVICES=rxe0:1",
    ];
    let ofi: &[&str] = &[
        "--mca",
        "pml",
        "cm",
        "--mca",
        "mtl",
        "ofi",
        "-x",
        "FI_PROVIDER=verbs;ofi_rxd",
        "-x",
        "FI_VERBS_GID_IDX=1",
        "-x",
        "FI_UNIVERSE_SIZE=16",
    ];
    for (name, np, extra) in [
        ("pml ucx", "2", ucx),
        ("pml ucx", "4", ucx),
        ("pml cm mtl ofi", "2", ofi),
        ("pml cm mtl ofi", "4", ofi),
    ] {
        let mut c = vec![
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            np,
        ];
        c.extend_from_slice(extra);
        c.push(&exe_s);
        let o = spawn(&args(ip), &cmd(&c), &[]).wait(Duration::from_secs(120));
        let n: u32 = np.parse().unwrap();
        let want = format!("allreduce {0} (want {0})", n * (n + 1) / 2);
        assert_eq!(o.code, Some(0), "{name} -np {np}: {}", o.all());
        assert!(
            o.stdout.contains(&format!("pingpong ok, {want}")),
            "{name} -np {np}: {}",
            o.all()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wait_helper_gone(ip), "the helper stayed after the job");
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn libfabric_verbs_msg_rdm_and_dgram_between_two_processes_on_one_nic() {
    if !have_tools(&["fi_pingpong", "fi_info"], "libfabric-bin") {
        return;
    }
    // libfabric's verbs provider finds a device through the addresses getifaddrs lists: on
    // loopback that is 127.0.0.1 only (shared with other tests: one at a time)
    let ip = "127.0.0.1";
    let _g = serial();
    assert!(
        wait_udp_free(Duration::from_secs(120)),
        "127.0.0.1:4791 stayed busy"
    );
    // ofi_rxm sizes its CQs from the universe size (more than rxe's 32767 entries by default:
    // the same setting is needed on kernel rxe); dgram needs the RoCE v2 GID of the address
    let env = [("FI_UNIVERSE_SIZE", "16"), ("FI_VERBS_GID_IDX", "1")];
    for (i, ep) in [
        ["-p", "verbs", "-e", "msg"],
        ["-p", "verbs;ofi_rxm", "-e", "rdm"],
        ["-p", "verbs;ofi_rxd", "-e", "rdm"],
        ["-p", "verbs", "-e", "dgram"],
    ]
    .iter()
    .enumerate()
    {
        let port = (19610 + i).to_string();
        let mut srv = vec!["fi_pingpong"];
        srv.extend_from_slice(ep);
        // a datagram is at most one MTU (1024)
        // (ofi_rxd carries rdm over datagrams and segments larger messages itself)
        let size = if ep[3] == "dgram" { "512" } else { "4096" };
        srv.extend_from_slice(&["-I", "50", "-S", size]);
        let mut cli = srv.clone();
        srv.extend_from_slice(&["-B", &port]);
        cli.extend_from_slice(&["-P", &port, ip]);
        let server = spawn(&args(ip), &cmd(&srv), &env);
        std::thread::sleep(Duration::from_millis(1000));
        let client = spawn(&args(ip), &cmd(&cli), &env).wait(Duration::from_secs(60));
        let server = server.wait(Duration::from_secs(20));
        assert_eq!(
            client.code,
            Some(0),
            "{ep:?} client: {}\nserver: {}",
            client.all(),
            server.all()
        );
        assert_eq!(server.code, Some(0), "{ep:?} server: {}", server.all());
        let shown = if size == "512" { "512" } else { "4k" };
        assert!(client.stdout.contains(shown), "{ep:?}: {}", client.all());
    }
}
