//! `roce run`, `roce devices`, `roce stat`.
//!
//! * `roce run [--ip ADDR] [--mtu N] [--pcap FILE] [--loss P] [--reorder P] -- CMD …` runs an
//!   unmodified verbs program on an emulated NIC: it puts the directory holding our
//!   `libibverbs.so.1` first in `LD_LIBRARY_PATH`, sets the `ROCE_*` variables and `exec`s CMD.
//! * `roce devices` lists the emulated devices running now (from their statistics files) and
//!   what a program started here would get.
//! * `roce stat` prints their counters, like `rdma statistic`.

use clap::Args;
use roce_provider::runtime::{default_stat_dir, stat, Config};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `roce run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// IP address of the emulated NIC (`ROCE_IP`; default 127.0.0.1); a comma-separated list
    /// gives one NIC per address (rxe0, rxe1, …) in the program. Each must be an address of
    /// this host (as rxe runs on a netdev's addresses): roce run fails before starting the
    /// program otherwise.
    #[arg(long)]
    pub ip: Option<String>,
    /// Active IB MTU: 256, 512, 1024, 2048 or 4096 (`ROCE_MTU`).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Write every datagram sent and received to this pcap file (`ROCE_PCAP`).
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Drop this fraction of outgoing RC datagrams, e.g. 0.02 or 2% (`ROCE_LOSS`).
    #[arg(long)]
    pub loss: Option<String>,
    /// Send this fraction of outgoing RC datagrams after the next one (`ROCE_REORDER`).
    #[arg(long)]
    pub reorder: Option<String>,
    /// Device name (`ROCE_DEV_NAME`; default rxe0).
    #[arg(long)]
    pub name: Option<String>,
    /// Directory holding libibverbs.so.1 (default: $ROCE_LIB_DIR, else next to this `roce` binary, built if needed).
    #[arg(long)]
    pub lib_dir: Option<PathBuf>,
    /// Share the device with other processes on the same address, as a NIC is shared: the
    /// default (a steering helper started on first use owns ip:4791). Kept for scripts written
    /// when sharing was opt-in; sets `ROCE_SHARED=1`.
    #[arg(long, conflicts_with = "no_shared")]
    pub shared: bool,
    /// Do not share: the program's device binds ip:4791 itself, and a second process on the
    /// address fails to open it (`ROCE_SHARED=0`).
    #[arg(long)]
    pub no_shared: bool,
    /// Do not show the device in /dev/infiniband and /sys/class/infiniband to the program (by
    /// default it runs in a private mount namespace where both list it; `ROCE_VIEW=0`).
    #[arg(long)]
    pub no_view: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub cmd: Vec<OsString>,
}

/// Finds (or makes) the directory with our `libibverbs.so.1`: `target/<profile>/` next to the
/// `roce` executable, where `scripts/build-so.sh` puts the symlink to `deps/libroce_ibverbs.so`.
/// Builds the library with cargo when the executable sits in a workspace's target directory and
/// the library is missing.
pub fn lib_dir() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the roce executable: {e}"))?;
    let mut dir = exe
        .parent()
        .map(Path::to_path_buf)
        .ok_or("roce executable has no directory")?;
    // `cargo test` binaries live in target/<profile>/deps, examples in .../examples.
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        dir.pop();
    }
    let link = dir.join("libibverbs.so.1");
    let lib = dir.join("deps").join("libroce_ibverbs.so");
    if !lib.exists() && !link.exists() {
        // target/<profile>/roce → workspace = target/..
        let profile = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("debug")
            .to_string();
        let ws = dir
            .parent()
            .and_then(Path::parent)
            .ok_or("cannot locate the workspace")?;
        if ws.join("Cargo.toml").exists() {
            let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            c.current_dir(ws)
                .args(["build", "-q", "-p", "roce-ibverbs", "-p", "roce-netlink"]);
            if profile == "release" {
                c.arg("--release");
            }
            let st = c
                .status()
                .map_err(|e| format!("cargo build -p roce-ibverbs: {e}"))?;
            if !st.success() {
                return Err("cargo build -p roce-ibverbs failed".into());
            }
        }
    }
    if lib.exists() {
        // Atomic (re)creation of the symlinks, as build-so.sh does with `ln -sfn`. The same
        // library is also librdmacm.so.1 (the loader maps the one file once).
        for name in ["libibverbs.so.1", "librdmacm.so.1"] {
            let tmp = dir.join(format!(".{name}.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            if std::os::unix::fs::symlink("deps/libroce_ibverbs.so", &tmp).is_ok() {
                let _ = std::fs::rename(&tmp, dir.join(name));
            }
        }
    }
    if link.exists() {
        Ok(dir)
    } else {
        Err(format!(
            "no libibverbs.so.1 in {}: run provider/libibverbs/scripts/build-so.sh (or pass --lib-dir)",
            dir.display()
        ))
    }
}

/// Fails unless every address of `list` (comma-separated) belongs to this host. An emulated
/// NIC sends and receives on its address as rxe does on its netdev's: with an address the host
/// does not have, its port would look ACTIVE and the program would fail at its first PD, far from
/// the cause. Checked by binding a UDP socket to it (EADDRNOTAVAIL when it is not local).
pub fn check_local_addresses(list: &str) -> Result<(), String> {
    for a in list.split(',').map(str::trim) {
        let ip: std::net::IpAddr = a
            .parse()
            .map_err(|_| format!("{list:?} is not an IP address (or a comma-separated list)"))?;
        if let Err(e) = std::net::UdpSocket::bind((ip, 0)) {
            return Err(format!(
                "{ip} is not an address of this host ({e}); the emulated NIC uses the address \
                 of one of its interfaces, as rxe uses its netdev's (see `ip -brief address`)"
            ));
        }
    }
    Ok(())
}

/// `roce run`: never returns on success (exec); returns the exit code on failure.
pub fn run(a: &RunArgs) -> u8 {
    let env_ip = std::env::var("ROCE_IP").ok().filter(|s| !s.is_empty());
    if let Some(ip) = a.ip.as_ref().or(env_ip.as_ref()) {
        if let Err(e) = check_local_addresses(ip) {
            let what = if a.ip.is_some() { "--ip" } else { "ROCE_IP" };
            eprintln!("roce run: {what}: {e}");
            return 2;
        }
    }
    let dir = match a.lib_dir.clone().or_else(|| {
        std::env::var_os("ROCE_LIB_DIR")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    }) {
        Some(d) => d,
        None => match lib_dir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("roce run: {e}");
                return 127;
            }
        },
    };
    let mut ld = OsString::from(dir.as_os_str());
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|s| !s.is_empty()) {
        ld.push(":");
        ld.push(old);
    }
    let mut c = Command::new(&a.cmd[0]);
    c.args(&a.cmd[1..]).env("LD_LIBRARY_PATH", ld);
    if let Some(ip) = &a.ip {
        c.env("ROCE_IP", ip);
    }
    if let Some(m) = a.mtu {
        if ![256, 512, 1024, 2048, 4096].contains(&m) {
            eprintln!("roce run: --mtu must be 256, 512, 1024, 2048 or 4096");
            return 2;
        }
        c.env("ROCE_MTU", m.to_string());
    }
    if let Some(p) = &a.pcap {
        c.env("ROCE_PCAP", p);
    }
    if let Some(l) = &a.loss {
        c.env("ROCE_LOSS", l);
    }
    if let Some(r) = &a.reorder {
        c.env("ROCE_REORDER", r);
    }
    if let Some(n) = &a.name {
        c.env("ROCE_DEV_NAME", n);
    }
    if a.shared {
        c.env("ROCE_SHARED", "1");
    }
    if a.no_shared {
        c.env("ROCE_SHARED", "0");
    }
    if let Ok(me) = std::env::current_exe() {
        c.env("ROCE_HELPER", me);
    }
    let view_off = a.no_view || std::env::var_os("ROCE_VIEW").is_some_and(|v| v == "0");
    if !view_off {
        let env = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        let view = crate::ns::View {
            name: a
                .name
                .clone()
                .or_else(|| env("ROCE_DEV_NAME"))
                .unwrap_or_else(|| "rxe0".into()),
            ip: a
                .ip
                .clone()
                .or_else(|| env("ROCE_IP"))
                .and_then(|s| s.split(',').next()?.trim().parse().ok())
                .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1])),
            mtu: a
                .mtu
                .or_else(|| env("ROCE_MTU").and_then(|s| s.parse().ok()))
                .unwrap_or(1024),
        };
        match crate::ns::enter(&view) {
            Ok(uverbs) => {
                c.env("ROCE_UVERBS", uverbs);
                match crate::ns::netlink_env(&view, &dir) {
                    Some(vars) => {
                        c.envs(vars);
                    }
                    None => eprintln!(
                        "roce: rdma dev / rdma link will not show {}: no libroce_netlink.so in {} \
                         (cargo build -p roce-netlink)",
                        view.name,
                        dir.display()
                    ),
                }
            }
            Err(e) => eprintln!(
                "roce: {} is not shown in /dev/infiniband and /sys/class/infiniband to this \
                 program ({e}); tools that look there (UCX, ibstat) will not see it. \
                 --no-view silences this",
                view.name
            ),
        }
    }
    use std::os::unix::process::CommandExt;
    let e = c.exec();
    eprintln!("roce run: cannot run {:?}: {e}", a.cmd[0]);
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Arguments of `roce steer` (started by the processes sharing a device).
#[derive(Debug, Args)]
pub struct SteerArgs {
    /// The device's address.
    #[arg(long)]
    pub ip: std::net::IpAddr,
}

/// `roce steer`: runs the steering helper until its last process has gone.
pub fn steer(a: &SteerArgs) -> u8 {
    let policy = roce_provider::runtime::Config::from_env().icrc_policy;
    match roce_provider::shared::steer(a.ip, policy) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// Arguments of `roce devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Statistics directory (default `$ROCE_STAT_DIR`, `$XDG_RUNTIME_DIR/roce`, `/tmp/roce-<uid>`).
    #[arg(long)]
    pub stat_dir: Option<PathBuf>,
}

/// `roce devices`.
pub fn devices(a: &DevicesArgs, out: &mut dyn Write) -> u8 {
    let cfg = Config::from_env();
    let _ = writeln!(
        out,
        "configured here: {} ip {} mtu {} (ROCE_IP / ROCE_DEV_NAME / ROCE_MTU)",
        cfg.name, cfg.ip, cfg.mtu
    );
    let files = stat::read_all(a.stat_dir.as_deref());
    let live: Vec<_> = files.iter().filter(|f| f.alive).collect();
    if live.is_empty() {
        let _ = writeln!(out, "no emulated device running");
    } else {
        let _ = writeln!(
            out,
            "{:<10} {:<20} {:>8} {:>6}",
            "device", "ip", "pid", "mtu"
        );
        for f in live {
            let _ = writeln!(
                out,
                "{:<10} {:<20} {:>8} {:>6}",
                f.get("name").unwrap_or("?"),
                f.get("ip").unwrap_or("?"),
                f.get("pid").unwrap_or("?"),
                f.get("mtu").unwrap_or("?")
            );
        }
    }
    0
}

/// Arguments of `roce stat`.
#[derive(Debug, Args)]
pub struct StatArgs {
    /// Only devices with this IP address.
    #[arg(long)]
    pub ip: Option<String>,
    /// Only devices with this name.
    #[arg(long)]
    pub dev: Option<String>,
    /// Also show counters that are zero.
    #[arg(short, long)]
    pub all: bool,
    /// Include devices whose process has exited (files left behind by a crash).
    #[arg(long)]
    pub stale: bool,
    /// Statistics directory.
    #[arg(long)]
    pub stat_dir: Option<PathBuf>,
}

/// `roce stat`: one block per running device, `name value` per counter.
pub fn stat(a: &StatArgs, out: &mut dyn Write) -> u8 {
    let dir = a.stat_dir.clone().unwrap_or_else(default_stat_dir);
    let files = stat::read_all(Some(&dir));
    let mut shown = 0;
    for f in files {
        if !f.alive && !a.stale {
            continue;
        }
        if a.ip.as_deref().is_some_and(|ip| f.get("ip") != Some(ip)) {
            continue;
        }
        if a.dev.as_deref().is_some_and(|d| f.get("name") != Some(d)) {
            continue;
        }
        shown += 1;
        let _ = writeln!(
            out,
            "link {}/1 ip {} pid {}{}",
            f.get("name").unwrap_or("?"),
            f.get("ip").unwrap_or("?"),
            f.get("pid").unwrap_or("?"),
            if f.alive { "" } else { " (exited)" }
        );
        for (n, v) in &f.counters {
            if *v != 0 || a.all {
                let _ = writeln!(out, "    {n} {v}");
            }
        }
    }
    if shown == 0 {
        let _ = writeln!(
            out,
            "no emulated device running (statistics in {})",
            dir.display()
        );
    }
    0
}
