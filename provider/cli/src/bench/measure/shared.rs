//! `--tests shared`: what sharing one device among processes costs (design §2.2, "Cost"), in
//! one run: RC Write 64 KiB and Send/Recv 64 B between
//!
//! * (a) two devices in one process (the default bench pair, `ip_a` and `ip_b`);
//! * (b) one device shared by two processes: this one and a `roce bench --server` it starts on
//!   the same address (the next one after `ip_b`), datagrams on the direct path;
//! * (c) the same on the address after that, through the steering helper (`ROCE_DIRECT=0`).
//!
//! The bandwidth points of the three run in turn `repeat` times (best of each kept, as the
//! other points), then the three latency runs. Figures only: ratios against (a).
use super::*;
use std::process::{Child, Command, Stdio};

/// How a device of the bench is opened (`--sharing` for a `--server` started by this test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Sharing {
    /// Its own `ip:4791`.
    No = 0,
    /// Shared through the steering helper, local datagrams on the direct path.
    Direct,
    /// Shared, every datagram through the helper.
    Helper,
}

/// How `roce bench --server --sharing …` opens its device (0 no, 1 direct, 2 helper).
pub(crate) static SERVER_SHARING: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

impl Sharing {
    /// [`SERVER_SHARING`].
    pub(crate) fn current() -> Sharing {
        match SERVER_SHARING.load(Ordering::Relaxed) {
            1 => Sharing::Direct,
            2 => Sharing::Helper,
            _ => Sharing::No,
        }
    }
    /// Sets [`SERVER_SHARING`].
    pub(crate) fn set_current(self) {
        SERVER_SHARING.store(self as u8, Ordering::Relaxed);
    }
    pub(crate) fn parse(s: &str) -> Result<Sharing, String> {
        match s {
            "direct" => Ok(Sharing::Direct),
            "helper" => Ok(Sharing::Helper),
            "no" => Ok(Sharing::No),
            _ => Err(format!("--sharing {s:?}: direct, helper or no")),
        }
    }
    fn arg(self) -> &'static str {
        match self {
            Sharing::No => "no",
            Sharing::Direct => "direct",
            Sharing::Helper => "helper",
        }
    }
}

/// One setup's figures.
#[derive(Clone, Debug, Serialize)]
pub struct SharedRow {
    pub setup: &'static str,
    pub ip: String,
    pub write_64k_gbit_per_s: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

/// The three setups, (a) first.
#[derive(Clone, Debug, Serialize)]
pub struct SharedCost {
    pub rows: Vec<SharedRow>,
}

impl SharedCost {
    /// The table, with ratios against (a).
    pub fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "Sharing one device: RC Write 64 KiB and Send/Recv 64 B, same run, ratios against (a)"
        )?;
        writeln!(
            out,
            "{:<56} {:>9} {:>6} {:>8} {:>6} {:>8} {:>6}",
            "setup", "Gb/s", "ratio", "p50 µs", "ratio", "p99 µs", "ratio"
        )?;
        let a = &self.rows[0];
        for r in &self.rows {
            writeln!(
                out,
                "{:<56} {:>9.2} {:>6.2} {:>8.1} {:>6.2} {:>8.1} {:>6.2}",
                format!("{} ({})", r.setup, r.ip),
                r.write_64k_gbit_per_s,
                r.write_64k_gbit_per_s / a.write_64k_gbit_per_s.max(1e-9),
                r.lat_p50_us,
                r.lat_p50_us / a.lat_p50_us.max(1e-9),
                r.lat_p99_us,
                r.lat_p99_us / a.lat_p99_us.max(1e-9),
            )?;
        }
        Ok(())
    }
}

/// A `roce bench --server` child on a shared device, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn next_ip(ip: IpAddr, n: u8) -> Result<IpAddr, String> {
    match ip {
        IpAddr::V4(v) => {
            let mut o = v.octets();
            o[3] = o[3]
                .checked_add(n)
                .ok_or_else(|| format!("no address {n} after {ip}"))?;
            Ok(IpAddr::from(o))
        }
        IpAddr::V6(_) => Err("--tests shared needs IPv4 addresses".into()),
    }
}

/// Starts the passive side of (b) or (c) in a process of its own, and this process's device on
/// the same address; returns both ends.
fn shared_pair(
    ip: IpAddr,
    port: u16,
    how: Sharing,
    mtu: Mtu,
) -> Result<(Server, Side, RemotePassive), String> {
    let exe = std::env::current_exe().map_err(|e| format!("the roce executable: {e}"))?;
    let child = Command::new(exe)
        .args(["bench", "--server", "--ip", &ip.to_string()])
        .args([
            "--port",
            &port.to_string(),
            "--mtu",
            &mtu.bytes().to_string(),
        ])
        .args(["--sharing", how.arg()])
        .args((!PROGRESS_THREAD.load(Ordering::Relaxed)).then_some("--no-progress-thread"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("roce bench --server: {e}"))?;
    let server = Server(child);
    // the server opens first (it starts the helper); wait for its control port
    let s = exchange_connect(&format!("{ip}:{port}"))?;
    let side = Side::open_as(ip, mtu, 65536, 0.0, how)?;
    let passive = RemotePassive {
        w: s.try_clone().map_err(|e| e.to_string())?,
        r: BufReader::new(s),
    };
    Ok((server, side, passive))
}

/// Runs the comparison (see the module docs).
pub fn shared_cost(
    ip_a: IpAddr,
    ip_b: IpAddr,
    port: u16,
    plan: &Plan,
    err: &mut dyn Write,
) -> Result<SharedCost, String> {
    let a = Side::open_as(ip_a, plan.mtu, 65536, 0.0, Sharing::No)?;
    let b = Side::open_as(ip_b, plan.mtu, 65536, 0.0, Sharing::No)?;
    let mut local = LocalPassive {
        side: b,
        running: None,
    };
    let ip_direct = next_ip(ip_b, 1)?;
    let ip_helper = next_ip(ip_b, 2)?;
    let (_s1, d, mut pd) = shared_pair(ip_direct, port, Sharing::Direct, plan.mtu)?;
    let (_s2, h, mut ph) = shared_pair(ip_helper, port, Sharing::Helper, plan.mtu)?;
    let mut setups: Vec<(&'static str, &Side, &mut dyn Passive)> = vec![
        ("(a) two devices in one process", &a, &mut local),
        ("(b) one device, two processes, direct path", &d, &mut pd),
        ("(c) one device, two processes, via helper", &h, &mut ph),
    ];
    let mut best = [0f64; 3];
    for round in 0..plan.repeat {
        for (i, (name, side, passive)) in setups.iter_mut().enumerate() {
            let _ = writeln!(err, "shared: round {} {name}: RC Write 64 KiB", round + 1);
            let r = run_bw(side, &mut **passive, Op::Write, 65536, plan.duration)?;
            best[i] = best[i].max(r.gbit_per_s());
        }
    }
    let mut rows = Vec::new();
    for (i, (name, side, passive)) in setups.iter_mut().enumerate() {
        let _ = writeln!(err, "shared: {name}: Send/Recv 64 B latency");
        let (l, _, _) = run_lat(side, &mut **passive, plan.iters, None)?;
        rows.push(SharedRow {
            setup: name,
            ip: side.ctx.ip().to_string(),
            write_64k_gbit_per_s: best[i],
            lat_p50_us: l.p50_us,
            lat_p99_us: l.p99_us,
        });
    }
    Ok(SharedCost { rows })
}
