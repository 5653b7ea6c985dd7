//! `roce bench`: RC Write / Read / Send bandwidth over message sizes and 64-byte Send/Recv
//! latency between two emulated NICs, each next to the raw UDP ceiling of the same machine
//! (same datagram size, same I/O technique), perftest-style.
//!
//! * In one process (default): two devices on 127.0.0.1 and 127.0.0.2, each with its own
//!   runtime threads; the active side runs in the calling thread, the passive side's work
//!   (reposting receives, echoing) in a thread of its own.
//! * Two hosts: `roce bench --server` on one, `roce bench --client HOST` on the other; a TCP
//!   control connection (port 18515) exchanges endpoints and starts/stops each test.
//!
//! Ratios compare packet rates: RoCE data packets per second (messages/s × packets per
//! message) over raw UDP datagrams per second at the RoCE datagram size. The raw UDP baseline is
//! [`roce_udp::baseline`]: GSO send + GRO receive, which is what the runtime's datapath uses,
//! and, for `--check`, one datagram per packet with `sendmmsg`/`recvmmsg`.
mod measure;
mod report;

use clap::Args;
use roce_provider::verbs::{parse_mtu, Mtu};
use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

pub use measure::{BwResult, LatResult, Op};
pub use report::{Check, Report};

/// `roce bench` arguments.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Short run (3 sizes, 50 ms per point): a smoke test, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Also measure 1% loss (on the next two addresses) and 1,000 QPs, print the issue-6
    /// ratios, exit 1 if one misses (one-process mode only).
    #[arg(long)]
    pub check: bool,
    /// Also run RC Write and Read of 4 MiB with this fraction of every datagram dropped
    /// (`0.005` or `0.5%`; on the next two addresses), next to the same without loss: goodput
    /// and retransmitted share (one-process mode only).
    #[arg(long, value_name = "P", value_parser = parse_loss)]
    pub loss: Option<f64>,
    /// Serve the passive side for a `--client` on another host (control port `--port`).
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Run the active side against `roce bench --server` at HOST[:PORT].
    #[arg(long, value_name = "HOST[:PORT]")]
    pub client: Option<String>,
    /// This device's IP (default 127.0.0.1; 127.0.0.2 with --client).
    #[arg(long)]
    pub ip: Option<IpAddr>,
    /// The second device's IP in one-process mode.
    #[arg(long, default_value = "127.0.0.2")]
    pub peer_ip: IpAddr,
    /// TCP control port for --server / --client.
    #[arg(long, default_value_t = roce_provider::verbs::exchange::DEFAULT_PORT)]
    pub port: u16,
    /// Seconds per bandwidth point (and per baseline point).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Message sizes, e.g. `64,4K,64K,1M` (default: powers of two 64 B … 1 MiB).
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Option<Vec<usize>>,
    /// Path MTU: 256 … 4096.
    #[arg(long, default_value = "4096", value_parser = parse_mtu_arg)]
    pub mtu: Mtu,
    /// Latency round trips.
    #[arg(long)]
    pub iters: Option<usize>,
    /// Measure each bandwidth point (and its baseline) this many times, alternately, and keep
    /// the best of each (default 2; 1 with --quick).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Tests to run: any of write, read, send, lat; `cm`: RDMA CM connections per second next
    /// to TCP connect/accept (measure/cm.rs); `shared`: the cost of sharing one device
    /// among processes (measure/shared.rs).
    #[arg(long, value_delimiter = ',', default_value = "write,read,send,lat")]
    pub tests: Vec<String>,
    /// Skip the raw UDP baseline.
    #[arg(long)]
    pub no_baseline: bool,
    /// Then run unmodified perftest (`ib_write_bw -s 65536`, `ib_send_lat -s 64`) through the
    /// drop-in libibverbs.so.1 on the same two addresses, next to raw UDP and to this run's own
    /// figures (one-process mode; needs Debian's perftest and the library built).
    #[arg(long)]
    pub perftest: bool,
    /// After each point, print both devices' datapath counters per message (system calls,
    /// datagrams, inline progress, thread wake-ups) on stderr: where the time goes.
    #[arg(long)]
    pub counters: bool,
    /// Run the devices without the runtime's background progress thread (polling threads
    /// drive everything).
    #[arg(long)]
    pub no_progress_thread: bool,
    /// `--server` only: open the device shared (`direct`, `helper`) or not (`no`); started so
    /// by `--tests shared`.
    #[arg(long, hide = true, default_value = "no")]
    pub sharing: String,
}

fn parse_mtu_arg(s: &str) -> Result<Mtu, String> {
    parse_mtu(s).map_err(|e| e.to_string())
}

/// `64`, `4K`, `64KiB`, `1M` → bytes.
fn parse_loss(s: &str) -> Result<f64, String> {
    roce_provider::runtime::parse_fraction(s)
}

pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.trim_end_matches("IB").trim_end_matches('B');
    let (num, mul) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1024),
        Some('M') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let n: usize = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 64, 4K, 1M)"))?;
    let v = n * mul;
    if v == 0 || v > 1 << 30 {
        return Err(format!("{s:?}: sizes go from 1 B to 1 GiB"));
    }
    Ok(v)
}

/// Effective settings after defaults.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Per bandwidth point.
    pub duration: Duration,
    /// Latency round trips.
    pub iters: usize,
    /// Which tests.
    pub ops: Vec<Op>,
    /// Latency test.
    pub latency: bool,
    /// Path MTU.
    pub mtu: Mtu,
    /// Raw UDP baseline.
    pub baseline: bool,
    /// Extra --check measurements.
    pub check: bool,
    /// Runs per bandwidth point.
    pub repeat: usize,
    /// Print datapath counters per message after each point.
    pub counters: bool,
    /// `--loss`: also Write and Read 4 MiB with this fraction of datagrams dropped.
    pub loss: Option<f64>,
    /// `--tests shared`: the cost of sharing one device (`measure/shared.rs`).
    pub shared: bool,
    /// `--tests cm`: RDMA CM connections set up and torn down per second (`measure/cm.rs`).
    pub cm: bool,
}

impl Plan {
    /// From the arguments.
    pub fn from_args(a: &BenchArgs) -> Result<Plan, String> {
        let sizes = match (&a.sizes, a.quick) {
            (Some(s), _) => s.clone(),
            (None, true) => vec![64, 4096, 65536],
            (None, false) => (6..=20).map(|p| 1usize << p).collect(),
        };
        let duration = Duration::from_secs_f64(
            a.duration
                .unwrap_or(if a.quick { 0.05 } else { 0.25 })
                .clamp(0.001, 60.0),
        );
        let iters = a.iters.unwrap_or(if a.quick { 300 } else { 5000 }).max(1);
        let mut ops = Vec::new();
        let mut latency = false;
        let mut shared = false;
        let mut cm = false;
        for t in &a.tests {
            match t.trim() {
                "write" => ops.push(Op::Write),
                "read" => ops.push(Op::Read),
                "send" => ops.push(Op::Send),
                "lat" | "latency" => latency = true,
                "shared" => shared = true,
                "cm" => cm = true,
                other => {
                    return Err(format!(
                        "unknown test {other:?} (write, read, send, lat, cm, shared)"
                    ))
                }
            }
        }
        Ok(Plan {
            sizes,
            duration,
            iters,
            ops,
            latency,
            mtu: a.mtu,
            baseline: !a.no_baseline,
            check: a.check,
            repeat: a.repeat.unwrap_or(if a.quick { 1 } else { 2 }).clamp(1, 20),
            counters: a.counters,
            loss: a.loss,
            shared,
            cm,
        })
    }
}

/// Runs `roce bench`; returns the exit status (0 ok, 1 a `--check` target missed, 2 error).
pub fn run(args: &BenchArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let plan = match Plan::from_args(args) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(err, "roce bench: {e}");
            return 2;
        }
    };
    measure::PROGRESS_THREAD.store(
        !args.no_progress_thread,
        std::sync::atomic::Ordering::Relaxed,
    );
    if args.server {
        match measure::Sharing::parse(&args.sharing) {
            Ok(s) => s.set_current(),
            Err(e) => {
                let _ = writeln!(err, "roce bench: {e}");
                return 2;
            }
        }
    } else if plan.shared && args.client.is_none() {
        let ip = args.ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        match measure::shared_cost(ip, args.peer_ip, args.port, &plan, err) {
            Ok(c) => {
                if args.json {
                    let _ = writeln!(out, "{}", serde_json::json!({ "shared": c }));
                } else {
                    let _ = c.print(out);
                }
            }
            Err(e) => {
                let _ = writeln!(err, "roce bench: shared: {e}");
                return 2;
            }
        }
        if plan.ops.is_empty() && !plan.latency && !plan.cm {
            return 0;
        }
    }
    let res = if args.server {
        let ip = args.ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        measure::serve(ip, args.port, plan.mtu, err).map(|_| None)
    } else if let Some(addr) = &args.client {
        let ip = args.ip.unwrap_or(IpAddr::from([127, 0, 0, 2]));
        measure::client(ip, addr, args.port, &plan, err).map(Some)
    } else {
        let ip = args.ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        measure::in_process(ip, args.peer_ip, &plan, err).map(Some)
    };
    let res = match res {
        Ok(Some(mut report)) if args.perftest && !args.server && args.client.is_none() => {
            // After roce bench's own devices closed: perftest binds the same addresses.
            let o = crate::perfbench::Options {
                mtu: plan.mtu.bytes(),
                secs: (plan.duration.as_secs_f64() * 8.0).ceil().clamp(1.0, 10.0) as u64,
                lat_iters: plan.iters,
                ..Default::default()
            };
            match crate::perfbench::run(&o, err) {
                Ok(p) => report.perftest = Some(p),
                Err(e) => report.perftest_error = Some(e),
            }
            if plan.check {
                report.compute_checks();
            }
            Ok(Some(report))
        }
        other => other,
    };
    match res {
        Ok(None) => 0,
        Ok(Some(report)) => {
            if args.json {
                let _ = writeln!(out, "{}", report.to_json());
            } else {
                let _ = report.print(out);
            }
            let _ = out.flush();
            if plan.check && report.checks.iter().any(|c| !c.pass) {
                1
            } else {
                0
            }
        }
        Err(e) => {
            let _ = writeln!(err, "roce bench: {e}");
            2
        }
    }
}
