//! The drop-in library against raw UDP on loopback, in one run (issue #4 "Speed"):
//!
//! * `ib_write_bw -s 65536` (Debian's perftest through our `libibverbs.so.1`, server on
//!   127.0.0.1, client on 127.0.0.2) next to raw UDP throughput with the same datagram size
//!   (one RoCE packet at the MTU: BTH 12 + MTU + ICRC 4 bytes), measured by
//!   [`roce_udp::baseline::throughput`] both as a plain `sendmmsg`/`recvmmsg` pair and with
//!   GSO/GRO; target ≥ 0.5.
//! * `ib_send_lat -s 64` next to a raw UDP ping-pong of the same datagram (12 + 64 + 4 = 80 bytes,
//!   both sides busy-polling, [`roce_udp::baseline::pingpong`]); perftest reports half a round
//!   trip, so the ratio is `2 × t_typical / UDP p50 RTT`; target ≤ 2.
//!
//! The perftest server runs on CPU 0 and the client on CPU 1 (`taskset`), as the raw UDP
//! baseline pins its two threads.
//!
//! Run: `cargo run --release -p roce-cli --example perftest_bench -- [--mtu 4096] [--secs 3]`
//! (builds nothing itself: the library must exist, see [`crate::commands::lib_dir`]).

use roce_udp::baseline::{self, Technique};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of [`run`].
#[derive(Clone, Debug)]
pub struct Options {
    /// IB MTU of the emulated NICs (and perftest `-m`).
    pub mtu: u32,
    /// Seconds of `ib_write_bw -D` and of each raw throughput test.
    pub secs: u64,
    /// Iterations of `ib_send_lat` and of the raw ping-pong.
    pub lat_iters: usize,
    /// Directory with `libibverbs.so.1` (default [`crate::commands::lib_dir`]).
    pub lib_dir: Option<PathBuf>,
    /// TCP port perftest exchanges addresses on.
    pub port: u16,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mtu: 4096,
            secs: 3,
            lat_iters: 5000,
            lib_dir: None,
            port: 18777,
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    /// `ib_write_bw -s 65536` average, Gbit/s.
    pub write_bw_gbps: f64,
    /// Raw UDP, `sendmmsg`×32 → `recvmmsg`, same datagram size, Gbit/s.
    pub udp_mmsg_gbps: f64,
    /// Raw UDP, GSO → GRO, same datagram size, Gbit/s.
    pub udp_gso_gbps: f64,
    /// `ib_send_lat -s 64` t_typical (half round trip), µs.
    pub send_lat_typical_us: f64,
    /// Raw UDP 80-byte ping-pong median round trip, µs (half its round trips measured right
    /// before `ib_send_lat`, half right after: the load of a shared machine drifts).
    pub udp_rtt_p50_us: f64,
    /// The datagram size compared.
    pub datagram: usize,
    /// Commands run.
    pub commands: Vec<String>,
}

impl Report {
    /// `write_bw / raw mmsg`.
    pub fn bw_ratio_mmsg(&self) -> f64 {
        self.write_bw_gbps / self.udp_mmsg_gbps
    }
    /// `write_bw / raw GSO`.
    pub fn bw_ratio_gso(&self) -> f64 {
        self.write_bw_gbps / self.udp_gso_gbps
    }
    /// `2 × send_lat / raw RTT`.
    pub fn lat_ratio(&self) -> f64 {
        2.0 * self.send_lat_typical_us / self.udp_rtt_p50_us
    }
}

fn pair(
    lib: &std::path::Path,
    tool: &str,
    args: &[String],
    port: u16,
    mtu: u32,
    limit: Duration,
) -> Result<(String, String), String> {
    // Pinned like the raw UDP baseline (server CPU 0, client CPU 1) when taskset exists.
    let taskset = ["/usr/bin/taskset", "/bin/taskset"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let mk = |ip: &str, client: bool| {
        let mut c = match taskset {
            Some(ts) => {
                let mut c = Command::new(ts);
                c.args(["-c", if client { "1" } else { "0" }, tool]);
                c
            }
            None => Command::new(tool),
        };
        c.args(args).args(["-p", &port.to_string()]);
        if client {
            c.arg("127.0.0.1");
        }
        let mut ld = lib.as_os_str().to_os_string();
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            ld.push(":");
            ld.push(old);
        }
        // The device's active MTU: perftest's `-m` only asks for one and falls back to the
        // port's active MTU (the runtime's default is 1024) with a warning.
        c.env("LD_LIBRARY_PATH", ld)
            .env("ROCE_IP", ip)
            .env("ROCE_MTU", mtu.to_string());
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let server = mk("127.0.0.1", false)
        .spawn()
        .map_err(|e| format!("{tool}: {e}"))?;
    let t = Instant::now();
    while !listening(port) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = mk("127.0.0.2", true)
        .spawn()
        .map_err(|e| format!("{tool}: {e}"))?;
    let out = |mut ch: std::process::Child| -> Result<String, String> {
        let t = Instant::now();
        loop {
            if ch.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            if t.elapsed() > limit {
                let _ = ch.kill();
                return Err(format!("{tool} timed out"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = ch.wait_with_output().map_err(|e| e.to_string())?;
        let s = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if !o.status.success() {
            return Err(format!("{tool} failed ({}):\n{s}", o.status));
        }
        Ok(s)
    };
    let c = out(client)?;
    let s = out(server)?;
    // Compare like with like: the MTU perftest ran at is the one asked for.
    for o in [&s, &c] {
        if let Some(l) = o.lines().find(|l| l.trim_start().starts_with("Mtu")) {
            if !l.contains(&format!(": {mtu}[B]")) {
                return Err(format!(
                    "{tool} ran at another MTU than {mtu}: {}",
                    l.trim()
                ));
            }
        }
    }
    Ok((s, c))
}

fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let v: Vec<_> = l.split_whitespace().collect();
            v.len() > 3 && v[1].ends_with(&want) && v[3] == "0A"
        })
    })
}

/// Field `i` (0-based) of the first perftest result row (after the `#bytes` header).
fn result_field(out: &str, i: usize) -> Option<f64> {
    let mut on = false;
    for l in out.lines() {
        if l.trim_start().starts_with("#bytes") {
            on = true;
            continue;
        }
        if on {
            let v: Vec<&str> = l.split_whitespace().collect();
            if v.first().is_some_and(|f| f.parse::<u64>().is_ok()) {
                return v.get(i).and_then(|x| x.parse().ok());
            }
        }
    }
    None
}

/// Runs everything and returns the figures.
pub fn run(o: &Options, log: &mut dyn Write) -> Result<Report, String> {
    let lib = match &o.lib_dir {
        Some(d) => d.clone(),
        None => crate::commands::lib_dir()?,
    };
    let mut r = Report {
        datagram: 12 + o.mtu as usize + 4,
        ..Default::default()
    };
    let m = o.mtu.to_string();
    let bw_args: Vec<String> = [
        "-x",
        "1",
        "-m",
        &m,
        "-s",
        "65536",
        "-D",
        &o.secs.to_string(),
        "--report_gbits",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    r.commands.push(format!(
        "ROCE_IP=127.0.0.{{1,2}} ROCE_MTU={} ib_write_bw {} [127.0.0.1]",
        o.mtu,
        bw_args.join(" ")
    ));
    let _ = writeln!(log, "running: {}", r.commands[0]);
    let (_, c) = pair(
        &lib,
        "ib_write_bw",
        &bw_args,
        o.port,
        o.mtu,
        Duration::from_secs(o.secs + 60),
    )?;
    r.write_bw_gbps = result_field(&c, 3).ok_or_else(|| format!("no BW figure in:\n{c}"))?;
    let _ = writeln!(
        log,
        "  ib_write_bw -s 65536 (MTU {}): {:.2} Gbit/s",
        o.mtu, r.write_bw_gbps
    );

    let dur = Duration::from_secs(o.secs);
    let t = baseline::throughput(r.datagram, Technique::Mmsg { batch: 32 }, dur)
        .map_err(|e| e.to_string())?;
    r.udp_mmsg_gbps = t.gbit_per_s();
    let _ = writeln!(log, "  raw UDP {t}");
    let t = baseline::throughput(r.datagram, Technique::GsoGro { segments: 0 }, dur)
        .map_err(|e| e.to_string())?;
    r.udp_gso_gbps = t.gbit_per_s();
    let _ = writeln!(log, "  raw UDP {t}");

    let lat_args: Vec<String> = [
        "-x",
        "1",
        "-m",
        &m,
        "-s",
        "64",
        "-n",
        &o.lat_iters.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    r.commands.push(format!(
        "ROCE_IP=127.0.0.{{1,2}} ROCE_MTU={} ib_send_lat {} [127.0.0.1]",
        o.mtu,
        lat_args.join(" ")
    ));
    let before = baseline::pingpong_samples(12 + 64 + 4, o.lat_iters.div_ceil(2))
        .map_err(|e| e.to_string())?;
    let _ = writeln!(log, "running: {}", r.commands[1]);
    let (_, c) = pair(
        &lib,
        "ib_send_lat",
        &lat_args,
        o.port + 1,
        o.mtu,
        Duration::from_secs(120),
    )?;
    r.send_lat_typical_us =
        result_field(&c, 4).ok_or_else(|| format!("no latency figure in:\n{c}"))?;
    let _ = writeln!(
        log,
        "  ib_send_lat -s 64: t_typical {:.2} us (half round trip)",
        r.send_lat_typical_us
    );
    let (mut rtts, mut lost) = before;
    let (r2, l2) = baseline::pingpong_samples(12 + 64 + 4, o.lat_iters.div_ceil(2))
        .map_err(|e| e.to_string())?;
    rtts.extend(r2);
    lost += l2;
    let p = baseline::PingPong::from_samples(12 + 64 + 4, rtts, lost).map_err(|e| e.to_string())?;
    r.udp_rtt_p50_us = p.p50.as_secs_f64() * 1e6;
    let _ = writeln!(log, "  raw UDP {p}");
    Ok(r)
}

/// Prints the comparison table.
pub fn print(r: &Report, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "\nperftest through libibverbs.so.1 vs raw UDP on loopback (datagram {} B)",
        r.datagram
    );
    let _ = writeln!(
        out,
        "  ib_write_bw -s 65536        {:8.2} Gbit/s",
        r.write_bw_gbps
    );
    let _ = writeln!(
        out,
        "  raw UDP sendmmsg/recvmmsg   {:8.2} Gbit/s   ratio {:.2} (target >= 0.5)",
        r.udp_mmsg_gbps,
        r.bw_ratio_mmsg()
    );
    let _ = writeln!(
        out,
        "  raw UDP GSO/GRO             {:8.2} Gbit/s   ratio {:.2}",
        r.udp_gso_gbps,
        r.bw_ratio_gso()
    );
    let _ = writeln!(
        out,
        "  ib_send_lat -s 64 RTT (2x)  {:8.2} us",
        2.0 * r.send_lat_typical_us
    );
    let _ = writeln!(
        out,
        "  raw UDP ping-pong RTT p50   {:8.2} us       ratio {:.2} (target <= 2)",
        r.udp_rtt_p50_us,
        r.lat_ratio()
    );
}
