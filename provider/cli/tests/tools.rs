//! Unmodified Debian binaries (ibverbs-utils, perftest) on the emulated NIC through `roce run`:
//! a server on 127.0.0.1 and a client on 127.0.0.2, in two processes, for the tool matrix of
//! issue #4 at MTU 1024 and 4096 and through the lossy path (2% loss + 2% reordering of RC
//! datagrams). Each tool must exit 0 on both sides and print its own success output; the
//! ping-pongs run with `-c` (data check) where noted. `--report_gbits` figures are printed.
//!
//! Missing binaries: FAIL under `CI=true`, a loud SKIP otherwise. Everything is bounded by
//! timeouts. Pairs run one at a time (they share 127.0.0.1:4791 and 127.0.0.2:4791).

mod common;
use common::*;
use roce_tests::debian::{IBVERBS_UTILS as UTILS, PERFTEST};
use std::time::Duration;

#[derive(Clone, Copy)]
enum Kind {
    PingPong,
    Perftest,
}

struct Case {
    name: &'static str,
    tool: &'static str,
    args: Vec<String>,
    kind: Kind,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn cases(mtu: u32, lossy: bool) -> Vec<Case> {
    let m = mtu.to_string();
    let pp = |extra: &[&str]| {
        let mut v = s(&["-g", "1", "-n", if lossy { "300" } else { "500" }, "-m", &m]);
        v.extend(s(extra));
        v
    };
    let ud_size = (mtu - 40).to_string();
    let ud = s(&["-g", "1", "-n", "500", "-s", &ud_size, "-c"]);
    let pt = |n: &str, extra: &[&str]| {
        let mut v = s(&["-x", "1", "-m", &m, "-n", n, "--report_gbits"]);
        v.extend(s(extra));
        v
    };
    let ud_send = mtu.min(4096).to_string();
    // Through the lossy path every lost or swapped RC datagram costs a go-back-N round, and a
    // second NAK during a retry waits for the retransmit timer (67 ms at perftest's timeout 14),
    // as in rxe: fewer iterations keep the lossy matrix within a minute or two.
    let (bw_n, lat_n) = if lossy {
        ("100", "200")
    } else {
        ("1000", "500")
    };
    vec![
        Case {
            name: "rc_pingpong",
            tool: "ibv_rc_pingpong",
            args: pp(&[]),
            kind: Kind::PingPong,
        },
        Case {
            name: "rc_pingpong -s 8192",
            tool: "ibv_rc_pingpong",
            args: pp(&["-s", "8192"]),
            kind: Kind::PingPong,
        },
        Case {
            name: "rc_pingpong -e",
            tool: "ibv_rc_pingpong",
            args: pp(&["-e"]),
            kind: Kind::PingPong,
        },
        Case {
            name: "rc_pingpong -c",
            tool: "ibv_rc_pingpong",
            args: pp(&["-c"]),
            kind: Kind::PingPong,
        },
        Case {
            name: "uc_pingpong -c",
            tool: "ibv_uc_pingpong",
            args: pp(&["-c"]),
            kind: Kind::PingPong,
        },
        Case {
            name: "ud_pingpong -c",
            tool: "ibv_ud_pingpong",
            args: ud,
            kind: Kind::PingPong,
        },
        Case {
            name: "srq_pingpong -c",
            tool: "ibv_srq_pingpong",
            args: pp(&["-c"]),
            kind: Kind::PingPong,
        },
        Case {
            name: "ib_write_bw",
            tool: "ib_write_bw",
            args: pt(bw_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_read_bw",
            tool: "ib_read_bw",
            args: pt(bw_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_send_bw",
            tool: "ib_send_bw",
            args: pt(bw_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_send_bw -c UD",
            tool: "ib_send_bw",
            args: pt(bw_n, &["-c", "UD", "-s", &ud_send]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_atomic_bw CMP_AND_SWAP",
            tool: "ib_atomic_bw",
            args: pt(bw_n, &["-A", "CMP_AND_SWAP"]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_atomic_bw FETCH_AND_ADD",
            tool: "ib_atomic_bw",
            args: pt(bw_n, &["-A", "FETCH_AND_ADD"]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_write_lat",
            tool: "ib_write_lat",
            args: pt(lat_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_read_lat",
            tool: "ib_read_lat",
            args: pt(lat_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_send_lat",
            tool: "ib_send_lat",
            args: pt(lat_n, &[]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_write_bw -s 8192",
            tool: "ib_write_bw",
            args: pt(bw_n, &["-s", "8192"]),
            kind: Kind::Perftest,
        },
        Case {
            name: "ib_send_lat -s 4096",
            tool: "ib_send_lat",
            args: pt("300", &["-s", "4096"]),
            kind: Kind::Perftest,
        },
    ]
}

fn run_matrix(label: &str, mtu: u32, lossy: bool, port_base: u16) {
    if !have_tools(UTILS, "ibverbs-utils") || !have_tools(PERFTEST, "perftest") {
        return;
    }
    let _g = serial();
    let mut extra = vec!["--mtu".to_string(), mtu.to_string()];
    if lossy {
        extra.extend(s(&["--loss", "0.02", "--reorder", "0.02"]));
    }
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for (i, c) in cases(mtu, lossy).iter().enumerate() {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let p = roce_tests::perftest::retry_clock_check(
            c.name,
            || {
                pair(
                    c.tool,
                    &args,
                    port_base + i as u16,
                    &extra,
                    Duration::from_secs(60),
                )
            },
            |p| format!("{}{}", p.server.all(), p.client.all()),
        );
        let both = format!("{}{}", p.server.all(), p.client.all());
        let ok_exit = p.server.code == Some(0) && p.client.code == Some(0);
        let (ok_out, fig) = match c.kind {
            Kind::PingPong => {
                let ok =
                    p.client.stdout.contains("iters in") && p.server.stdout.contains("iters in");
                let fig = p
                    .client
                    .stdout
                    .lines()
                    .filter(|l| l.contains("iters in") || l.contains("bytes in"))
                    .collect::<Vec<_>>()
                    .join(" | ");
                (ok, fig)
            }
            Kind::Perftest => {
                let f = figures(&both);
                (f.len() >= 2, f.join(" | "))
            }
        };
        let ok = ok_exit && ok_out && !both.contains("panic");
        let status = if ok { "PASS" } else { "FAIL" };
        println!("[{label}] {status} {:<28} {:5.1}s  {fig}", c.name, p.secs);
        table.push(format!("{status} {label} {}", c.name));
        if !ok {
            failures.push(format!(
                "{} ({label}): server exit {:?} timeout {} / client exit {:?} timeout {}\n--- server stdout\n{}\n--- server stderr\n{}\n--- client stdout\n{}\n--- client stderr\n{}",
                c.name,
                p.server.code,
                p.server.timed_out,
                p.client.code,
                p.client.timed_out,
                p.server.stdout,
                p.server.stderr,
                p.client.stdout,
                p.client.stderr
            ));
        }
    }
    for f in &failures {
        eprintln!("\n===== FAILED {f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} tool runs failed in {label}",
        failures.len(),
        table.len()
    );
}

#[test]
fn matrix_mtu_1024() {
    run_matrix("mtu1024", 1024, false, 21000);
}

#[test]
fn matrix_mtu_4096() {
    run_matrix("mtu4096", 4096, false, 22000);
}

#[test]
fn matrix_lossy_2pct_loss_2pct_reorder() {
    run_matrix("lossy", 1024, true, 23000);
}

#[test]
fn devices_and_devinfo() {
    if !have_tools(&["ibv_devices", "ibv_devinfo"], "ibverbs-utils") {
        return;
    }
    let _g = serial();
    let o =
        spawn(&s(&["--ip", "127.0.0.2"]), &s(&["ibv_devices"]), &[]).wait(Duration::from_secs(20));
    assert_eq!(o.code, Some(0), "{}", o.all());
    assert!(o.stdout.contains("rxe0"), "{}", o.stdout);
    let o = spawn(
        &s(&["--ip", "127.0.0.2", "--mtu", "4096"]),
        &s(&["ibv_devinfo", "-v"]),
        &[],
    )
    .wait(Duration::from_secs(20));
    assert_eq!(o.code, Some(0), "{}", o.all());
    println!("{}", o.stdout);
    // GID index 1 is the IPv4 one (what `-g 1` / `-x 1` select in the matrix).
    let gid1 = o
        .stdout
        .lines()
        .find(|l| l.contains("GID[") && l.contains(" 1]"))
        .unwrap_or_default();
    assert!(
        gid1.contains("::ffff:127.0.0.2") && gid1.contains("RoCE v2"),
        "GID[1] line: {gid1:?}\n{}",
        o.stdout
    );
    assert!(o.stdout.contains("active_mtu:\t\t4096 (5)"), "{}", o.stdout);
    assert!(o.stdout.contains("PORT_ACTIVE"));
}
