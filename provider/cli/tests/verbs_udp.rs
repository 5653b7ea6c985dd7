//! The verbs API over real UDP sockets (the runtime), the examples as functions, and a smoke run
//! of `roce bench --quick`. Every test uses its own pair of loopback addresses (one NIC per
//! address and port 4791), so tests run in parallel and never touch 127.0.0.1/127.0.0.2.
//! No timing assertions: the machine is shared and noisy.
use roce_provider::verbs::*;
use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

#[path = "../examples/lossy_pcap.rs"]
mod lossy_pcap;
#[path = "../../examples/rc_pingpong.rs"]
mod rc_pingpong;
#[path = "../../examples/ud_echo.rs"]
mod ud_echo;
#[path = "../../examples/write_read_bw.rs"]
mod write_read_bw;

const T: Duration = Duration::from_secs(20);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn all() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

struct Side {
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

fn side(addr: &str) -> Side {
    let ctx = Device::open(DeviceConfig::new(ip(addr))).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256).build().unwrap();
    Side { ctx, pd, cq }
}

fn rc(a: &Side, b: &Side) -> (QueuePair, QueuePair) {
    let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
    let qb = b.pd.create_qp(&b.cq, &b.cq, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap())
}

fn ok(cq: &CompletionQueue) -> WorkCompletion {
    let wc = cq.wait_one(T).unwrap();
    assert!(wc.is_ok(), "{wc:?}");
    wc
}

#[test]
fn rc_send_write_read_atomics_over_udp() {
    let (a, b) = (side("127.31.1.1"), side("127.31.1.2"));
    assert_eq!(roce_emu::ip_from_gid(&a.ctx.gid(1)), ip("127.31.1.1"));
    let (qa, qb) = rc(&a, &b);
    let src =
        a.pd.register((0..10_000u32).map(|i| i as u8).collect::<Vec<_>>(), all())
            .unwrap();
    let dst = b.pd.allocate(10_000, all()).unwrap();
    // SEND with immediate
    qb.post_receive(&[dst.slice(..)], 1).unwrap();
    qa.post_send_with_imm(&[src.slice(..5000)], 2, 7).unwrap();
    ok(&a.cq);
    let r = ok(&b.cq);
    assert_eq!((r.byte_len(), r.imm_data()), (5000, Some(7)));
    assert!(dst.to_vec()[..5000] == src.to_vec()[..5000]);
    // WRITE, READ back
    qa.post_write(&[src.slice(..)], dst.remote(), 3).unwrap();
    ok(&a.cq);
    assert!(dst.to_vec() == src.to_vec());
    let back = a.pd.allocate(10_000, all()).unwrap();
    qa.post_read(&[back.slice(..)], dst.remote(), 4).unwrap();
    assert_eq!(ok(&a.cq).opcode(), WcOpcode::RdmaRead);
    assert!(back.to_vec() == src.to_vec());
    // atomics
    let counter = b.pd.allocate(8, all()).unwrap();
    let old = a.pd.allocate(8, all()).unwrap();
    for i in 0..10u64 {
        qa.post_fetch_add(&old.slice(..), counter.remote(), 3, 10 + i)
            .unwrap();
        ok(&a.cq);
        assert_eq!(old.load_u64(0), 3 * i);
    }
    qa.post_compare_swap(&old.slice(..), counter.remote(), 30, 1, 20)
        .unwrap();
    ok(&a.cq);
    assert_eq!((old.load_u64(0), counter.load_u64(0)), (30, 1));
    let rt = a.ctx.runtime().expect("a UDP runtime device");
    assert!(rt
        .stats()
        .counters
        .iter()
        .any(|(n, v)| n == "sent_pkts" && *v > 0));
}

#[test]
fn wrong_rkey_over_udp_is_remote_access_error() {
    let (a, b) = (side("127.31.2.1"), side("127.31.2.2"));
    let (qa, _qb) = rc(&a, &b);
    let src = a.pd.allocate(64, all()).unwrap();
    let dst = b.pd.allocate(64, all()).unwrap();
    let mut bad = dst.remote();
    bad.rkey = bad.rkey.wrapping_add(1 << 12);
    qa.post_write(&[src.slice(..)], bad, 1).unwrap();
    let wc = a.cq.wait_one(T).unwrap();
    assert_eq!(wc.status(), WcStatus::RemAccessErr);
}

#[test]
fn srq_and_completion_channel_over_udp() {
    let (a, b) = (side("127.31.3.1"), side("127.31.3.2"));
    let ch = b.ctx.create_comp_channel();
    let cq = b.ctx.create_cq(64).set_comp_channel(&ch).build().unwrap();
    let srq = b.pd.create_srq(32).build().unwrap();
    let buf = b.pd.allocate(8 * 64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..8 {
        srq.post_receive(&[buf.slice(i * 64..(i + 1) * 64)], i as u64)
            .unwrap();
    }
    let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
    let qb =
        b.pd.create_qp(&cq, &cq, QpType::Rc)
            .set_srq(&srq)
            .build()
            .unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, _qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    cq.req_notify(false).unwrap();
    qa.post_send_inline(b"event", 1).unwrap();
    ok(&a.cq);
    // nobody polls b: its progress thread receives, completes and notifies the channel
    ch.get_cq_event(T).unwrap();
    let mut wc = [WorkCompletion::default(); 4];
    let got = cq.poll(&mut wc).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].wr_id(), got[0].byte_len()), (0, 5));
    assert_eq!(&buf.to_vec()[..5], b"event");
}

#[test]
fn opening_an_address_twice_is_a_typed_error() {
    let _a = side("127.31.4.1");
    match Device::open(DeviceConfig::new(ip("127.31.4.1"))) {
        Err(Error::OpenDevice { ip: i, .. }) => assert_eq!(i, ip("127.31.4.1")),
        other => panic!("expected OpenDevice, got {other:?}"),
    }
}

#[test]
fn example_rc_pingpong() {
    let r = rc_pingpong::run(ip("127.31.5.1"), ip("127.31.5.2"), 0, 200, 4096).unwrap();
    assert_eq!((r.iters, r.size), (200, 4096));
}

#[test]
fn example_write_read_bw() {
    let r = write_read_bw::run(
        ip("127.31.6.1"),
        ip("127.31.6.2"),
        65536,
        Duration::from_millis(200),
    )
    .unwrap();
    assert!(r.write_gbps > 0.0 && r.read_gbps > 0.0, "{r:?}");
}

#[test]
fn example_ud_echo() {
    assert_eq!(
        ud_echo::run(ip("127.31.7.1"), ip("127.31.7.2"), 10).unwrap(),
        10
    );
}

#[test]
fn example_lossy_pcap_decodes_clean() {
    let pcap = std::env::temp_dir().join(format!("roce-example-lossy-{}.pcap", std::process::id()));
    let r = lossy_pcap::run(&pcap, 7).unwrap();
    assert!(r.lost > 0);
    assert_eq!(r.decode_status, 0, "{}", r.listing);
    assert!(r.listing.contains("RDMA_WRITE_FIRST") && r.listing.contains("ICRC ok"));
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn roce_bench_quick_prints_a_table_and_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "bench",
            "--quick",
            "--ip",
            "127.31.8.1",
            "--peer-ip",
            "127.31.8.2",
            "--iters",
            "100",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for want in [
        "RC Write bandwidth",
        "RC Read bandwidth",
        "RC Send bandwidth",
        "#bytes",
        "BW[Gb/sec]",
        "t_p50[usec]",
        "ratio",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
    assert!(
        stderr.contains("RC Send/Recv latency 64 B"),
        "no progress lines on stderr:\n{stderr}"
    );
    eprintln!("{stdout}");
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "bench",
            "--quick",
            "--json",
            "--no-baseline",
            "--tests",
            "write",
            "--sizes",
            "4K",
            "--ip",
            "127.31.8.1",
            "--peer-ip",
            "127.31.8.2",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bandwidth"][0]["test"], "write");
    assert_eq!(v["bandwidth"][0]["size"], 4096);
    assert!(v["bandwidth"][0]["iterations"].as_u64().unwrap() > 0);
}

#[test]
fn roce_bench_server_and_client() {
    let port = 28515u16;
    let mut server = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "bench",
            "--server",
            "--ip",
            "127.31.9.1",
            "--port",
            &port.to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "bench",
            "--client",
            "127.31.9.1",
            "--port",
            &port.to_string(),
            "--ip",
            "127.31.9.2",
            "--quick",
            "--sizes",
            "64,64K",
            "--iters",
            "100",
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("RC Send bandwidth") && stdout.contains("t_p50[usec]"),
        "{stdout}"
    );
}

/// A UD send toward the unspecified address (GID `::ffff:0.0.0.0`, IPv4-mapped, so the address
/// vector passes the family check) would reach this host itself through a socket: it is not sent,
/// the runtime counts it (`tx_unroutable`) and the engine reports it once for the QP
/// (`diag_unroutable` counts both sends). Issue 20 item 3.
#[test]
fn a_ud_send_to_the_unspecified_address_is_not_sent_and_is_counted() {
    let a = side("127.31.10.1");
    let qp =
        a.pd.create_qp(&a.cq, &a.cq, QpType::Ud)
            .build()
            .unwrap()
            .activate()
            .unwrap();
    let mut dgid = [0u8; 16];
    dgid[10..12].copy_from_slice(&[0xff, 0xff]);
    let ah =
        a.pd.create_ah_with(roce_emu::AhAttr {
            dgid,
            ..roce_emu::AhAttr::to_ip(ip("127.31.10.1"))
        })
        .unwrap();
    let msg = a.pd.allocate(64, all()).unwrap();
    let before = a.ctx.runtime().unwrap().stats();
    for id in 0..2 {
        qp.post_send_ud(&[msg.slice(..16)], &ah, 1234, DEFAULT_QKEY, id)
            .unwrap();
        ok(&a.cq);
    }
    let get = |s: &roce_provider::runtime::Stats, k: &str| {
        s.counters
            .iter()
            .find(|(n, _)| n == k)
            .map_or(0, |(_, v)| *v)
    };
    let after = a.ctx.runtime().unwrap().stats();
    assert_eq!(get(&after, "tx_unroutable"), 2);
    assert_eq!(
        get(&after, "tx_datagrams"),
        get(&before, "tx_datagrams"),
        "nothing sent"
    );
    assert_eq!(get(&after, "diag_unroutable"), 2);
}
