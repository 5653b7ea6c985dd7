//! Process-level tests of the drop-in library: its ELF interface against rdma-core v44's, and
//! unmodified Debian binaries (ibverbs-utils, perftest 4.5) loading it with `LD_BIND_NOW=1`.
//!
//! Prerequisites: `objdump` (binutils), the Debian packages `ibverbs-utils`, `perftest` and
//! `libibverbs1` (the real library, for the comparison). Missing → FAIL under `CI=true`, else a
//! loud SKIP.

mod common;

use common::*;
use roce_tests::debian::{IBVERBS_UTILS as UTILS, PERFTEST, RDMACM_UTILS};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const REAL_LIB: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
const REAL_RDMACM: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

/// Libraries the Debian binaries (UTILS, PERFTEST, RDMACM_UTILS) pull in that import from libibverbs.
const DEP_LIBS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libmlx5.so.1",
    "/lib/x86_64-linux-gnu/libefa.so.1",
    "/lib/x86_64-linux-gnu/librdmacm.so.1",
];

fn have_objdump() -> bool {
    prerequisite(
        which("objdump").is_some(),
        "objdump (apt-get install binutils)",
    )
}

fn binaries(names: &[&str], pkg: &str) -> Option<Vec<PathBuf>> {
    let found: Vec<PathBuf> = names.iter().filter_map(|n| which(n)).collect();
    let ok = found.len() == names.len();
    prerequisite(ok, &format!("{} (apt-get install {pkg})", names.join(", "))).then_some(found)
}

/// Our exports: (node, symbol) of every defined, versioned symbol.
fn our_exports() -> BTreeSet<(String, String)> {
    dynsyms(&our_lib())
        .into_iter()
        .filter(|(v, n, d)| *d && v != n)
        .map(|(v, n, _)| (v, n))
        .collect()
}

fn symbol_table() -> BTreeSet<(String, String)> {
    let text = concat!(
        include_str!("../abi/symbols-v44.txt"),
        include_str!("../abi/rdmacm-v44.txt")
    );
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap().to_string(),
                it.next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn soname_and_exports_are_exactly_the_v44_table() {
    if !have_objdump() {
        return;
    }
    let lib = our_lib();
    let d = Command::new("objdump")
        .arg("-p")
        .arg(&lib)
        .output()
        .unwrap();
    let p = String::from_utf8_lossy(&d.stdout);
    assert!(
        p.lines()
            .any(|l| l.split_whitespace().eq(["SONAME", "libibverbs.so.1"])),
        "SONAME:\n{p}"
    );
    for node in [
        "IBVERBS_1.0",
        "IBVERBS_1.1",
        "IBVERBS_1.5",
        "IBVERBS_1.6",
        "IBVERBS_1.7",
        "IBVERBS_1.8",
        "IBVERBS_1.9",
        "IBVERBS_1.10",
        "IBVERBS_1.11",
        "IBVERBS_1.12",
        "IBVERBS_1.13",
        "IBVERBS_1.14",
        "IBVERBS_PRIVATE_34",
        "RDMACM_1.0",
        "RDMACM_1.1",
        "RDMACM_1.2",
        "RDMACM_1.3",
    ] {
        assert!(
            p.lines()
                .any(|l| l.trim_end().ends_with(&format!(" {node}"))),
            "version node {node} not defined:\n{p}"
        );
    }
    let ours = our_exports();
    assert_eq!(
        ours,
        symbol_table(),
        "exports differ from abi/symbols-v44.txt + abi/rdmacm-v44.txt"
    );
    // Nothing else leaks out (no unversioned `Base` exports of Rust internals).
    let base: Vec<_> = dynsyms(&lib)
        .into_iter()
        .filter(|(v, _, d)| *d && v == "Base")
        .collect();
    assert!(base.is_empty(), "unversioned exports: {base:?}");
    println!("{} versioned exports", ours.len());
}

#[test]
fn exports_cover_the_installed_libibverbs() {
    if !have_objdump()
        || !prerequisite(
            Path::new(REAL_LIB).exists(),
            "libibverbs1 (rdma-core's library, for comparison)",
        )
    {
        return;
    }
    let ours = our_exports();
    let real: BTreeSet<(String, String)> = dynsyms(Path::new(REAL_LIB))
        .into_iter()
        .filter(|(v, n, d)| *d && v != n && !v.starts_with('('))
        .map(|(v, n, _)| (v, n))
        .collect();
    let missing: Vec<_> = real.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "default-version exports of rdma-core's library we lack: {missing:?}"
    );
    // The one addition is documented in abi/symbols-v44.txt (librdmacm's are checked below).
    let extra: Vec<_> = ours
        .difference(&real)
        .filter(|(v, _)| !v.starts_with("RDMACM_"))
        .collect();
    assert_eq!(
        extra,
        [&("IBVERBS_1.1".to_string(), "ibv_register_driver".to_string())]
    );
}

#[test]
fn exports_are_exactly_the_installed_librdmacm() {
    if !have_objdump()
        || !prerequisite(
            Path::new(REAL_RDMACM).exists(),
            "librdmacm1 (rdma-core's library, for comparison)",
        )
    {
        return;
    }
    let ours: BTreeSet<_> = our_exports()
        .into_iter()
        .filter(|(v, _)| v.starts_with("RDMACM_"))
        .collect();
    let real: BTreeSet<(String, String)> = dynsyms(Path::new(REAL_RDMACM))
        .into_iter()
        .filter(|(v, n, d)| *d && v != n && !v.starts_with('('))
        .map(|(v, n, _)| (v, n))
        .collect();
    assert_eq!(ours, real, "librdmacm.so.1's exports, node for node");
    assert_eq!(ours.len(), 68);
}

#[test]
fn every_import_of_the_target_binaries_and_their_libraries_resolves() {
    if !have_objdump() {
        return;
    }
    let Some(mut files) = binaries(UTILS, "ibverbs-utils") else {
        return;
    };
    let Some(pt) = binaries(PERFTEST, "perftest") else {
        return;
    };
    files.extend(pt);
    let Some(cm) = binaries(RDMACM_UTILS, "rdmacm-utils") else {
        return;
    };
    files.extend(cm);
    let libs: Vec<PathBuf> = DEP_LIBS.iter().map(PathBuf::from).collect();
    if !prerequisite(
        libs.iter().all(|l| l.exists()),
        "libmlx5/libefa (ibverbs-providers), librdmacm1",
    ) {
        return;
    }
    files.extend(libs);
    let ours = our_exports();
    let mut total = BTreeSet::new();
    for f in &files {
        for (v, n, defined) in dynsyms(f) {
            if defined || !(v.contains("IBVERBS") || v.contains("RDMACM")) {
                continue;
            }
            let v = v.trim_matches(|c| c == '(' || c == ')').to_string();
            assert!(
                ours.contains(&(v.clone(), n.clone())),
                "{} imports {n}@{v}, which we do not export",
                f.display()
            );
            total.insert((v, n));
        }
    }
    println!(
        "{} distinct imports from {} files all resolve",
        total.len(),
        files.len()
    );
    assert!(
        total.len() > 100,
        "suspiciously few imports found: {}",
        total.len()
    );
}

#[test]
fn ibv_devices_lists_our_device() {
    let Some(b) = binaries(&["ibv_devices"], "ibverbs-utils") else {
        return;
    };
    let out = run(with_our_lib(&b[0]), Duration::from_secs(20));
    assert_loads_cleanly("ibv_devices", &out);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "stderr: {}",
        out.stderr
    );
    assert!(
        out.stdout.contains("rxe0") && out.stdout.contains("00007ffffe000001"),
        "{}",
        out.stdout
    );
}

#[test]
fn ibv_devinfo_verbose_shows_an_rxe_like_device() {
    let Some(b) = binaries(&["ibv_devinfo"], "ibverbs-utils") else {
        return;
    };
    let mut c = with_our_lib(&b[0]);
    c.arg("-v");
    let out = run(c, Duration::from_secs(20));
    assert_loads_cleanly("ibv_devinfo -v", &out);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "stderr: {}",
        out.stderr
    );
    println!("{}", out.stdout);
    let norm: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for want in [
        "hca_id: rxe0",
        "transport: InfiniBand (0)",
        "board_id: roce-emu (userspace RoCEv2 NIC)",
        "phys_port_cnt: 1",
        "max_qp_wr: 16384",
        "atomic_cap: ATOMIC_HCA (1)",
        "state: PORT_ACTIVE (4)",
        "max_mtu: 4096 (5)",
        "active_mtu: 1024 (3)",
        "link_layer: Ethernet",
        "max_msg_sz: 0x800000",
        "gid_tbl_len: 1024",
        "GID[ 0]: fe80::7fff:fe00:1, RoCE v2",
        "GID[ 1]: ::ffff:127.0.0.1, RoCE v2",
    ] {
        assert!(
            norm.iter().any(|l| l == want),
            "missing line {want:?} in:\n{}",
            out.stdout
        );
    }
    assert!(out.stderr.trim().is_empty(), "stderr: {}", out.stderr);
}

#[test]
fn device_settings_come_from_the_environment() {
    let Some(b) = binaries(&["ibv_devinfo"], "ibverbs-utils") else {
        return;
    };
    let mut c = with_our_lib(&b[0]);
    c.env("ROCE_IP", "127.0.0.2")
        .env("ROCE_DEV_NAME", "roce9")
        .env("ROCE_MTU", "4096")
        .arg("-v");
    let out = run(c, Duration::from_secs(20));
    assert_loads_cleanly("ibv_devinfo", &out);
    let s = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(s.contains("hca_id: roce9"), "{}", out.stdout);
    assert!(s.contains("active_mtu: 4096 (5)"), "{}", out.stdout);
    assert!(
        s.contains("GID[ 1]: ::ffff:127.0.0.2, RoCE v2"),
        "{}",
        out.stdout
    );
    // `-d NAME` selects by our name.
    let mut c = with_our_lib(&b[0]);
    c.env("ROCE_DEV_NAME", "roce9").args(["-d", "roce9"]);
    let out = run(c, Duration::from_secs(20));
    assert_eq!(out.status.and_then(|s| s.code()), Some(0), "{}", out.stderr);
}

/// A TCP port nobody listens on (so clients fail at connect time, after the device work).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn every_target_binary_loads_with_bind_now() {
    let Some(utils) = binaries(UTILS, "ibverbs-utils") else {
        return;
    };
    let Some(perf) = binaries(PERFTEST, "perftest") else {
        return;
    };
    let mut ran = 0;
    for b in utils.iter().chain(perf.iter()) {
        let name = b.file_name().unwrap().to_string_lossy().into_owned();
        // 1. Usage: every import is bound at load time (BIND_NOW), nothing else happens.
        let mut c = with_our_lib(b);
        c.arg(if name.starts_with("ib_") {
            "--help"
        } else {
            "-h"
        });
        let out = run(c, Duration::from_secs(20));
        assert_loads_cleanly(&format!("{name} --help"), &out);
        assert!(!out.timed_out, "{name} --help hung");
        // 2. Client mode against a server that does not exist: the device is opened and queried
        //    and the program fails later (at the first verb the engine lacks, or at connect).
        let port = dead_port().to_string();
        let mut c = with_our_lib(b);
        c.env("ROCE_QUIET", "1");
        if name.starts_with("ib_") {
            c.args(["-p", &port, "-n", "5", "127.0.0.1"]);
        } else {
            c.args(["-p", &port, "-n", "1", "127.0.0.1"]);
        }
        let out = run(c, Duration::from_secs(30));
        assert_loads_cleanly(&format!("{name} client"), &out);
        assert!(
            !out.timed_out,
            "{name} client hung:\nstdout:{}\nstderr:{}",
            out.stdout, out.stderr
        );
        assert!(
            !out.stderr.contains("No IB devices found") && !out.stderr.contains("No RDMA devices"),
            "{name}: {}",
            out.stderr
        );
        ran += 1;
    }
    println!("{ran} binaries loaded through {}", our_lib().display());
}

#[test]
fn binaries_bind_to_our_library_not_rdma_cores() {
    let Some(b) = binaries(&["ibv_devices", "ib_write_bw"], "ibverbs-utils perftest") else {
        return;
    };
    let ours = std::fs::canonicalize(our_lib()).unwrap();
    for bin in &b {
        // ldd resolves libibverbs.so.1 in our directory (for perftest, which also needs
        // librdmacm.so.1, the one library loaded under that name, which is ours too)…
        let mut c = Command::new("ldd");
        c.arg(bin).env("LD_LIBRARY_PATH", lib_dir());
        let out = run(c, Duration::from_secs(20));
        let line = out
            .stdout
            .lines()
            .find(|l| l.contains("libibverbs.so.1") || l.contains("librdmacm.so.1"))
            .unwrap_or_default()
            .to_string();
        let target = line
            .split("=>")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("");
        assert_eq!(
            std::fs::canonicalize(target).ok().as_deref(),
            Some(ours.as_path()),
            "ldd {}: {line}",
            bin.display()
        );
    }
    // …and every symbol binding goes there (LD_DEBUG=bindings).
    let mut c = with_our_lib(&b[0]);
    c.env("LD_DEBUG", "bindings");
    let out = run(c, Duration::from_secs(20));
    let ibv: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("binding file") && l.contains("`ibv_"))
        .collect();
    assert!(ibv.len() >= 4, "no ibv_ bindings seen:\n{}", out.stderr);
    for l in &ibv {
        assert!(
            l.contains(&*lib_dir().to_string_lossy()) && l.contains("[IBVERBS_"),
            "binding not to our library: {l}"
        );
        assert!(
            !l.contains("/lib/x86_64-linux-gnu/libibverbs"),
            "binding to rdma-core's library: {l}"
        );
    }
}
