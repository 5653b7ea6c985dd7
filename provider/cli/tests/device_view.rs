//! `roce run`'s device view (issue 20 item 2): inside it the program finds the emulated NIC
//! where system RDMA tools look — `/dev/infiniband/uverbs0`, `/sys/class/infiniband/rxe0` —
//! and unmodified Debian tools use it: `ibstat`, `ibstatus`, `rdma dev` / `rdma link`
//! (iproute2, over netlink answered by the preloaded `roce-netlink`), `ucx_info -d`, and
//! `ucx_perftest` (tag_lat, tag_bw, ucp_put_bw and ucp_get, each over UCX's `rc_verbs` and over
//! `ud_verbs` alone) between two NICs. Outside, the host is unchanged.
//!
//! Prerequisites: `infiniband-diags`, `iproute2` and `ucx-utils` (FAIL under `CI=true`, else a
//! SKIP).
mod common;
use common::*;
use std::time::Duration;

fn run(ip: &str, cmd: &[&str], env: &[(&str, &str)]) -> Out {
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    spawn(&["--ip".into(), ip.into()], &cmd, env).wait(Duration::from_secs(60))
}

#[test]
fn the_device_node_and_sysfs_tree_exist_only_for_the_program() {
    let had_ib = std::path::Path::new("/dev/infiniband").exists();
    let o = run(
        "127.0.21.1",
        &[
            "sh",
            "-c",
            "test -c /dev/infiniband/uverbs0 && test -r /dev/infiniband/uverbs0 && \
             test -w /dev/infiniband/uverbs0 && cat /sys/class/infiniband/rxe0/node_type \
             /sys/class/infiniband/rxe0/ports/1/state /sys/class/infiniband/rxe0/ports/1/gids/1 \
             /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1 \
             /sys/class/infiniband_verbs/uverbs0/ibdev && ls /sys/class/infiniband/rxe0/device/net \
             && test -e /dev/null && test -d /dev/pts && test -d /sys/class/net/lo",
        ],
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.all());
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "1: CA",
            "4: ACTIVE",
            "0000:0000:0000:0000:0000:ffff:7f00:1501",
            "RoCE v2",
            "rxe0",
            "lo"
        ],
        "{}",
        o.all()
    );
    // the host's /dev is untouched
    assert_eq!(std::path::Path::new("/dev/infiniband").exists(), had_ib);
    let off = run(
        "127.0.21.1",
        &["sh", "-c", "test -e /sys/class/infiniband/rxe0"],
        &[("ROCE_VIEW", "0")],
    );
    assert_ne!(off.code, Some(0), "ROCE_VIEW=0 shows no tree");
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn ibstat_and_ibstatus_list_the_port() {
    if !have_tools(&["ibstat", "ibstatus"], "infiniband-diags") {
        return;
    }
    let o = run("127.0.21.2", &["ibstat"], &[]);
    assert_eq!(o.code, Some(0), "{}", o.all());
    for want in [
        "CA 'rxe0'",
        "State: Active",
        "Physical state: LinkUp",
        "Link layer: Ethernet",
        // IB_PORT_CM_SUP only, as rxe's sysfs cap_mask (recorded in the lab, kernel 6.1)
        "Capability mask: 0x00010000",
    ] {
        assert!(o.stdout.contains(want), "{want}: {}", o.all());
    }
    let o = run("127.0.21.2", &["ibstatus"], &[]);
    assert_eq!(o.code, Some(0), "{}", o.all());
    assert!(
        o.stdout.contains("Infiniband device 'rxe0' port 1 status"),
        "{}",
        o.all()
    );
    assert!(o.stdout.contains("4: ACTIVE"), "{}", o.all());
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn ucx_finds_rxe0_and_runs_ucx_perftest_over_rc_verbs_and_ud_verbs() {
    let _g = serial();
    if !have_tools(&["ucx_info", "ucx_perftest"], "ucx-utils") {
        return;
    }
    let o = run("127.0.21.3", &["ucx_info", "-d"], &[]);
    assert_eq!(o.code, Some(0), "{}", o.all());
    for want in [
        "Memory domain: rxe0",
        "Transport: rc_verbs",
        "Transport: ud_verbs",
        "Device: rxe0:1",
    ] {
        assert!(o.stdout.contains(want), "{want}:\n{}", o.stdout);
    }
    // The client chooses the test (ucx_perftest's server takes the client's parameters); the
    // server is given the same `-t` anyway.
    let tests = ["tag_lat", "tag_bw", "ucp_put_bw", "ucp_get"];
    let runs = tests
        .iter()
        .flat_map(|t| [("rc_verbs,ud_verbs,self", *t), ("ud_verbs,self", *t)]);
    for (tls, test) in runs {
        let env = [("UCX_NET_DEVICES", "rxe0:1"), ("UCX_TLS", tls)];
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port().to_string()
        };
        let server = spawn(
            &["--ip".into(), "127.0.21.4".into()],
            &["ucx_perftest", "-p", &port, "-t", test, "-n", "500"].map(String::from),
            &env,
        );
        let t = std::time::Instant::now();
        while !tcp_listening(port.parse().unwrap()) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let client = run(
            "127.0.21.5",
            &[
                "ucx_perftest",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                test,
                "-n",
                "2000",
            ],
            &env,
        );
        let server = server.wait(Duration::from_secs(30));
        assert_eq!(
            client.code,
            Some(0),
            "{test} {tls} client: {}",
            client.all()
        );
        assert_eq!(
            server.code,
            Some(0),
            "{test} {tls} server: {}",
            server.all()
        );
        let fin = client.stdout.lines().find(|l| l.starts_with("Final:"));
        assert!(
            fin.is_some_and(|l| l.contains("2000")),
            "{test} {tls}: {}",
            client.all()
        );
        println!("{test} {tls}: {}", fin.unwrap_or_default());
    }
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn rdma_dev_and_link_show_the_device_and_refuse_what_is_not_implemented() {
    if !have_tools(&["rdma"], "iproute2") {
        return;
    }
    let ip = "127.0.21.6";
    let ok = |cmd: &[&str]| {
        let o = run(ip, cmd, &[]);
        assert_eq!(o.code, Some(0), "{cmd:?}: {}", o.all());
        o.stdout
    };
    // kernel rxe on eth0 in the qemu lab prints the same lines with its own GUID and netdev
    let link = "link rxe0/1 state ACTIVE physical_state LINK_UP netdev lo \n";
    assert_eq!(ok(&["rdma", "link"]), link);
    assert_eq!(ok(&["rdma", "link", "show", "rxe0/1"]), link);
    assert_eq!(
        ok(&["rdma", "-d", "link"]),
        "link rxe0/1 state ACTIVE physical_state LINK_UP netdev lo netdev_index 1 \n"
    );
    assert_eq!(
        ok(&["rdma", "-j", "-d", "link"]),
        "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"state\":\"ACTIVE\",\
         \"physical_state\":\"LINK_UP\",\"netdev\":\"lo\",\"netdev_index\":1}]\n"
    );
    let dev = ok(&["rdma", "dev"]);
    assert!(dev.starts_with("0: rxe0: node_type ca node_guid "), "{dev}");
    assert!(dev.contains(" sys_image_guid "), "{dev}");
    assert_eq!(ok(&["rdma", "dev", "show", "rxe0"]), dev);
    let details = ok(&["rdma", "-d", "dev"]);
    assert!(
        details.contains("adaptive-moderation off \n    caps: <BAD_PKEY_CNTR, BAD_QKEY_CNTR, "),
        "{details}"
    );
    let json = ok(&["rdma", "-j", "dev"]);
    assert!(
        json.starts_with("[{\"ifindex\":0,\"ifname\":\"rxe0\",\"node_type\":\"ca\",\"node_guid\":"),
        "{json}"
    );
    assert_eq!(ok(&["rdma", "sys"]), "netns shared copy-on-fork on\n");
    // what rxe answers and the view does not: a loud failure, not an empty answer
    for cmd in [
        &["rdma", "res"][..],
        &["rdma", "statistic"],
        &["rdma", "dev", "set", "rxe0", "name", "x"],
    ] {
        let o = run(ip, cmd, &[]);
        assert_eq!(o.code, Some(1), "{cmd:?}: {}", o.all());
        assert!(
            o.stderr.contains("error: Operation not supported"),
            "{cmd:?}: {}",
            o.all()
        );
    }
    // as on rxe: an unknown device or port
    let o = run(ip, &["rdma", "link", "show", "rxe0/2"], &[]);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (Some(1), "Wrong device name\n"),
        "{}",
        o.all()
    );
    // without the view, rdma asks the host's kernel (here: no RDMA) and sees no rxe0
    let o = run(ip, &["rdma", "link"], &[("ROCE_VIEW", "0")]);
    assert!(!o.stdout.contains("rxe0"), "{}", o.all());
}
