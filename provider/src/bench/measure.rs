//! The measurements: bandwidth and latency loops on the verbs API, the passive side (in this
//! process or behind a TCP control connection) and the raw UDP baselines.
use super::report::{Baseline, BwRow, LatRow, Report, Scale};
use super::Plan;
use crate::udp::baseline::{self, PingPong, Technique};
use crate::verbs::{
    AccessFlags, CompletionQueue, Context, DeviceConfig, Error, MemoryRegion, Mtu,
    ProtectionDomain, QpType, QueuePair, QueuePairEndpoint, RemoteSlice, SendRequest, WcOpcode,
    WorkCompletion,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A benchmarked operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// RDMA WRITE bandwidth.
    Write,
    /// RDMA READ bandwidth.
    Read,
    /// SEND/RECV bandwidth.
    Send,
    /// SEND/RECV ping-pong latency.
    Lat,
}

impl Op {
    /// Table title.
    pub fn title(self) -> &'static str {
        match self {
            Op::Write => "RC Write",
            Op::Read => "RC Read",
            Op::Send => "RC Send",
            Op::Lat => "RC Send/Recv latency",
        }
    }
}

/// A bandwidth point.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BwResult {
    /// Message size.
    pub size: usize,
    /// Messages completed.
    pub iterations: u64,
    /// Time from the first post to the last completion.
    pub seconds: f64,
}

impl BwResult {
    /// Payload Gbit/s.
    pub fn gbit_per_s(&self) -> f64 {
        self.iterations as f64 * self.size as f64 * 8.0 / self.seconds.max(1e-9) / 1e9
    }
    /// Messages per second.
    pub fn msg_per_s(&self) -> f64 {
        self.iterations as f64 / self.seconds.max(1e-9)
    }
}

/// A latency result.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LatResult {
    /// Round trips measured.
    pub iterations: usize,
    /// Fastest.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// Bytes the wire packets of `op` add around the payload: BTH 12 + ICRC 4, RETH 16 on a WRITE's
/// only packet, AETH 4 on a READ response's only packet.
pub fn datagram_size(op: Op, size: usize, mtu: Mtu) -> usize {
    let mtu = mtu.bytes() as usize;
    if size > mtu {
        return mtu + 16;
    }
    size.max(1)
        + 16
        + match op {
            Op::Write => 16,
            Op::Read => 4,
            Op::Send | Op::Lat => 0,
        }
}

/// Data packets per message.
pub fn packets_per_msg(size: usize, mtu: Mtu) -> u64 {
    size.max(1).div_ceil(mtu.bytes() as usize) as u64
}

const ALL: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);
const SQ_DEPTH: u32 = 256;
const RQ_DEPTH: u32 = 512;
/// Bytes in flight per QP in the bandwidth loop.
const WINDOW_BYTES: usize = 2 << 20;
const T: Duration = Duration::from_secs(20);

/// Whether devices run the runtime's background progress thread (`--no-progress-thread`
/// turns it off; the passive side then always has a polling thread of its own).
pub(crate) static PROGRESS_THREAD: AtomicBool = AtomicBool::new(true);

fn e2s(e: Error) -> String {
    e.to_string()
}

/// One device with what every test needs.
pub(crate) struct Side {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub mr: Arc<MemoryRegion>,
    pub mtu: Mtu,
    /// Local ACK timeout exponent of this side's QPs (4.096 µs × 2^t; the verbs default is 14).
    pub timeout: u8,
}

/// Local ACK timeout of the lossy pair's QPs under `--check`: 12 = 16.8 ms (perftest's `-u`).
/// Loss recovery does not wait on the timer except when both copies of a retry's first packet
/// or the last packet of the final drain are lost; at 14 (67 ms) one such stall costs 13% of a
/// 0.5 s point, at 12 about 3%, and at 10 or less a loaded machine fires it spuriously
/// (emu/README.md, "Loss recovery").
pub(crate) const LOSSY_QP_TIMEOUT: u8 = 12;

/// Runtime counters of both devices, for `--counters`.
struct CounterSnap(Vec<(&'static str, u64)>, Vec<(&'static str, u64)>);

impl CounterSnap {
    fn take(a: &Side, b: Option<&Side>) -> CounterSnap {
        let snap = |s: Option<&Side>| {
            s.and_then(|s| s.ctx.runtime())
                .map(|d| d.runtime_counters().iter().collect())
                .unwrap_or_default()
        };
        CounterSnap(snap(Some(a)), snap(b))
    }
    /// Prints the counters that moved, per message, for the active and the passive device.
    fn print(&self, later: &CounterSnap, per: u64, what: &str, err: &mut dyn Write) {
        let per = per.max(1) as f64;
        for (side, (x, y)) in [
            ("active", (&self.0, &later.0)),
            ("passive", (&self.1, &later.1)),
        ] {
            let mut line = format!("counters {what} {side}, per message:");
            for ((n, v0), (_, v1)) in x.iter().zip(y.iter()) {
                if v1 > v0 {
                    line.push_str(&format!(" {n} {:.3}", (v1 - v0) as f64 / per));
                }
            }
            let _ = writeln!(err, "{line}");
        }
    }
}

impl Side {
    pub(crate) fn open(ip: IpAddr, mtu: Mtu, len: usize, loss: f64) -> Result<Side, String> {
        let cfg = DeviceConfig {
            mtu,
            loss,
            progress_thread: PROGRESS_THREAD.load(Ordering::Relaxed),
            ..DeviceConfig::new(ip)
        };
        let ctx = cfg.open().map_err(|e| format!("{e} (is another `roce bench` or program using {ip}:4791? pick others with --ip/--peer-ip)"))?;
        let pd = ctx.alloc_pd().map_err(e2s)?;
        let mr = Arc::new(pd.allocate(len.max(64), ALL).map_err(e2s)?);
        mr.fill(0x5A);
        Ok(Side {
            ctx,
            pd,
            mr,
            mtu,
            timeout: 14,
        })
    }

    fn qp(
        &self,
        cq: &CompletionQueue,
        max_send_wr: u32,
        max_recv_wr: u32,
    ) -> Result<crate::verbs::PreparedQueuePair, String> {
        self.pd
            .create_qp(cq, cq, QpType::Rc)
            .set_max_send_wr(max_send_wr)
            .set_max_recv_wr(max_recv_wr)
            .set_max_inline_data(256)
            .set_path_mtu(self.mtu)
            .set_min_rnr_timer(1)
            .set_timeout(self.timeout)
            .build()
            .map_err(e2s)
    }
}

// ------------------------------------------------------------------ the active side's loops

fn bw_loop(
    qp: &QueuePair,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    op: Op,
    size: usize,
    remote: RemoteSlice,
    dur: Duration,
) -> Result<BwResult, String> {
    let depth = (WINDOW_BYTES / size.max(1)).clamp(1, SQ_DEPTH as usize / 2);
    let local = [mr.slice(..size)];
    let wr = match op {
        Op::Write => SendRequest::write(0, &local, remote),
        Op::Read => SendRequest::read(0, &local, remote),
        _ => SendRequest::send(0, &local),
    };
    let batch = [wr; 32];
    let mut wcs = [WorkCompletion::default(); 64];
    let (mut outstanding, mut done) = (0usize, 0u64);
    let start = Instant::now();
    let end = start + dur;
    let mut last = start;
    let mut posting = true;
    loop {
        if posting && outstanding < depth {
            // post what the window allows as one list: one transmit (one GSO run) per list
            let k = (depth - outstanding).min(batch.len());
            qp.post_batch(&batch[..k]).map_err(e2s)?;
            outstanding += k;
        }
        let n = cq.poll(&mut wcs).map_err(e2s)?.len();
        for wc in &wcs[..n] {
            wc.result().map_err(e2s)?;
            outstanding -= 1;
            done += 1;
        }
        if n > 0 {
            last = Instant::now();
            if posting && last >= end {
                posting = false;
            }
        } else if last.elapsed() > T {
            return Err(format!("{} {size} B: no completion for {T:?}", op.title()));
        }
        if !posting && outstanding == 0 {
            break;
        }
    }
    Ok(BwResult {
        size,
        iterations: done,
        seconds: (last - start).as_secs_f64(),
    })
}

/// Round trips of one latency round: samples after `warm` unmeasured ones; also returns the
/// number of round trips made (warm-up included).
fn lat_loop(
    qp: &QueuePair,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    iters: usize,
) -> Result<(Vec<Duration>, usize), String> {
    let size = 64;
    let payload = [0xA5u8; 64];
    let warm = (iters / 10).clamp(10, 500);
    let mut rtts = Vec::with_capacity(iters);
    let mut wcs = [WorkCompletion::default(); 16];
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..warm + iters {
        let t0 = Instant::now();
        qp.post(&SendRequest::send_inline(1, &payload))
            .map_err(e2s)?;
        'wait: loop {
            let n = cq.poll(&mut wcs).map_err(e2s)?.len();
            for wc in &wcs[..n] {
                wc.result().map_err(e2s)?;
                if wc.opcode() == WcOpcode::Recv {
                    qp.post_receive(&[mr.slice(..size)], 0).map_err(e2s)?;
                    break 'wait;
                }
            }
            if Instant::now() > deadline {
                return Err("latency: no reply within 30 s".into());
            }
        }
        if i >= warm {
            rtts.push(t0.elapsed());
        }
    }
    Ok((rtts, warm + iters))
}

/// Min / p50 / p99 of round-trip samples.
fn lat_result(mut rtts: Vec<Duration>) -> LatResult {
    rtts.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |p: f64| us(rtts[((rtts.len() - 1) as f64 * p).round() as usize]);
    LatResult {
        iterations: rtts.len(),
        min_us: us(rtts[0]),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

// ------------------------------------------------------------------ the passive side

/// What the active side asks the passive side for.
#[derive(Debug, Serialize, Deserialize)]
struct Setup {
    op: Op,
    size: usize,
    endpoint: QueuePairEndpoint,
}

/// The passive side's answer.
#[derive(Debug, Serialize, Deserialize)]
struct Ready {
    endpoint: QueuePairEndpoint,
    remote: RemoteSlice,
}

trait Passive {
    fn setup(&mut self, s: &Setup) -> Result<Ready, String>;
    fn stop(&mut self) -> Result<(), String>;
    /// The passive device when it is in this process.
    fn side(&self) -> Option<&Side> {
        None
    }
}

/// The passive side in this process: a device and, for Send and latency, a thread that reposts
/// receives (and echoes).
struct LocalPassive {
    side: Side,
    running: Option<Running>,
}

/// A passive test in progress: its stop flag, its thread, its QP (kept alive until stop).
type Running = (Arc<AtomicBool>, JoinHandle<Result<(), String>>, QueuePair);

impl Passive for LocalPassive {
    fn side(&self) -> Option<&Side> {
        Some(&self.side)
    }
    fn setup(&mut self, s: &Setup) -> Result<Ready, String> {
        self.stop()?;
        if s.size > self.side.mr.len() {
            return Err(format!(
                "size {} exceeds the passive side's region ({} B)",
                s.size,
                self.side.mr.len()
            ));
        }
        let cq = self.side.ctx.create_cq(4096).build().map_err(e2s)?;
        let qp = self.side.qp(&cq, SQ_DEPTH, RQ_DEPTH)?;
        let size = if s.op == Op::Lat { 64 } else { s.size };
        let posted = match s.op {
            Op::Send => RQ_DEPTH as u64,
            Op::Lat => 16,
            _ => 0,
        };
        for i in 0..posted {
            qp.post_receive(&[self.side.mr.slice(..size)], i)
                .map_err(e2s)?;
        }
        let endpoint = qp.endpoint();
        let qp = qp.handshake(s.endpoint).map_err(e2s)?;
        let remote = self.side.mr.remote_slice(..s.size.max(64));
        let stop = Arc::new(AtomicBool::new(false));
        let h = if posted > 0 || !PROGRESS_THREAD.load(Ordering::Relaxed) {
            let (st, q, mr, op) = (stop.clone(), qp.clone(), self.side.mr.clone(), s.op);
            std::thread::spawn(move || responder(&q, &cq, &mr, op, size, &st))
        } else {
            // WRITE/READ: the device's progress thread answers; keep the CQ alive with the QP
            std::thread::spawn(move || {
                drop(cq);
                Ok(())
            })
        };
        self.running = Some((stop, h, qp));
        Ok(Ready { endpoint, remote })
    }
    fn stop(&mut self) -> Result<(), String> {
        if let Some((stop, h, _qp)) = self.running.take() {
            stop.store(true, Ordering::Relaxed);
            h.join()
                .map_err(|_| "passive thread panicked".to_string())??;
        }
        Ok(())
    }
}

/// Drives the passive device (polling its CQ progresses it: ACKs, READ responses); Send: reposts
/// every receive; latency: reposts and answers each message with one of its own.
fn responder(
    qp: &QueuePair,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    op: Op,
    size: usize,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut wcs = [WorkCompletion::default(); 64];
    let payload = [0x5Au8; 64];
    if op == Op::Lat {
        // the echo side of the ping-pong, pinned like the raw UDP one
        baseline::pin(1);
    }
    while !stop.load(Ordering::Relaxed) {
        let n = cq.poll(&mut wcs).map_err(e2s)?.len();
        for wc in &wcs[..n] {
            if !wc.is_ok() {
                // the peer tore its QP down: stop quietly
                return Ok(());
            }
            if wc.opcode() == WcOpcode::Recv {
                qp.post_receive(&[mr.slice(..size)], 0).map_err(e2s)?;
                if op == Op::Lat {
                    qp.post(&SendRequest::send_inline(2, &payload))
                        .map_err(e2s)?;
                }
            }
        }
    }
    Ok(())
}

/// The passive side on another host, over the control connection.
struct RemotePassive {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl RemotePassive {
    fn call<T: Serialize, R: for<'de> Deserialize<'de>>(&mut self, msg: &T) -> Result<R, String> {
        let mut line = serde_json::to_string(msg).map_err(|e| e.to_string())?;
        line.push('\n');
        self.w
            .write_all(line.as_bytes())
            .map_err(|e| format!("control connection: {e}"))?;
        let mut got = String::new();
        self.r
            .read_line(&mut got)
            .map_err(|e| format!("control connection: {e}"))?;
        let v: serde_json::Value = serde_json::from_str(got.trim())
            .map_err(|e| format!("control connection: {e}: {got:?}"))?;
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return Err(format!("server: {e}"));
        }
        serde_json::from_value(v).map_err(|e| format!("control connection: {e}"))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
enum Cmd {
    Setup(Setup),
    Stop,
}

impl Passive for RemotePassive {
    fn setup(&mut self, s: &Setup) -> Result<Ready, String> {
        self.call(&Cmd::Setup(Setup {
            op: s.op,
            size: s.size,
            endpoint: s.endpoint,
        }))
    }
    fn stop(&mut self) -> Result<(), String> {
        let _: serde_json::Value = self.call(&Cmd::Stop)?;
        Ok(())
    }
}

/// `roce bench --server`: serves clients one after another until killed.
pub fn serve(ip: IpAddr, port: u16, mtu: Mtu, err: &mut dyn Write) -> Result<(), String> {
    let side = Side::open(ip, mtu, 1 << 20, 0.0)?;
    let listener =
        TcpListener::bind((ip, port)).map_err(|e| format!("control port {ip}:{port}: {e}"))?;
    let _ = writeln!(
        err,
        "roce bench: serving on {ip} (RoCE {ip}:4791, control {ip}:{port}); Ctrl-C to stop"
    );
    let mut passive = LocalPassive {
        side,
        running: None,
    };
    loop {
        let (s, peer) = listener.accept().map_err(|e| e.to_string())?;
        let _ = writeln!(err, "roce bench: client {peer}");
        let mut w = s.try_clone().map_err(|e| e.to_string())?;
        let r = BufReader::new(s);
        for line in r.lines() {
            let Ok(line) = line else { break };
            let reply = match serde_json::from_str::<Cmd>(&line) {
                Ok(Cmd::Setup(su)) => match passive.setup(&su) {
                    Ok(rd) => serde_json::to_value(rd).map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                },
                Ok(Cmd::Stop) => passive.stop().map(|_| serde_json::json!({"ok": true})),
                Err(e) => Err(format!("bad request: {e}")),
            };
            let v = reply.unwrap_or_else(|e| serde_json::json!({ "error": e }));
            if writeln!(w, "{v}").is_err() {
                break;
            }
        }
        let _ = passive.stop();
        let _ = writeln!(err, "roce bench: client {peer} done");
    }
}

// ------------------------------------------------------------------ progress on stderr

struct Progress<'a> {
    err: &'a mut dyn Write,
    total: usize,
    done: usize,
    tty: bool,
}

impl Progress<'_> {
    fn step(&mut self, what: &str) {
        self.done += 1;
        let bar = 24 * self.done / self.total.max(1);
        let line = format!(
            "[{}{}] {:>3}/{} {what}",
            "#".repeat(bar),
            ".".repeat(24 - bar.min(24)),
            self.done,
            self.total
        );
        if self.tty {
            let _ = write!(self.err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(self.err, "{line}");
        }
        let _ = self.err.flush();
    }
    fn finish(&mut self) {
        if self.tty {
            let _ = write!(self.err, "\r\x1b[2K");
            let _ = self.err.flush();
        }
    }
}

// ------------------------------------------------------------------ the runs

struct Baselines {
    fresh: bool,
    gso: HashMap<usize, Baseline>,
    mmsg: HashMap<usize, Baseline>,
    dur: Duration,
}

impl Baselines {
    fn get(&mut self, dgram: usize, gso: bool) -> Option<Baseline> {
        let (map, t) = if gso {
            (&mut self.gso, Technique::GsoGro { segments: 0 })
        } else {
            (&mut self.mmsg, Technique::Mmsg { batch: 32 })
        };
        // Measured afresh next to every RoCE point (same run, same moment): on a shared
        // machine the ceiling moves by 2-10x within seconds, so a cached one lies. (`fresh`
        // false would reuse one per datagram size: a quicker, worse estimate.)
        if !self.fresh {
            if let Some(b) = map.get(&dgram) {
                return Some(*b);
            }
        }
        // A starved window can see no datagram at all: try once more, else report none
        // rather than a ratio over zero.
        let mut r = baseline::throughput(dgram, t, self.dur).ok()?;
        if r.datagrams == 0 {
            r = baseline::throughput(dgram, t, self.dur).ok()?;
        }
        if r.datagrams == 0 {
            return None;
        }
        let b = Baseline {
            technique: if gso { "gso_gro" } else { "mmsg" },
            datagram_size: dgram,
            gbit_per_s: r.gbit_per_s(),
            datagrams_per_s: r.datagrams_per_s(),
        };
        map.insert(dgram, b);
        Some(b)
    }
}

fn run_bw(
    a: &Side,
    passive: &mut dyn Passive,
    op: Op,
    size: usize,
    dur: Duration,
) -> Result<BwResult, String> {
    let cq = a.ctx.create_cq(4096).build().map_err(e2s)?;
    let qp = a.qp(&cq, SQ_DEPTH, RQ_DEPTH)?;
    let ready = passive.setup(&Setup {
        op,
        size,
        endpoint: qp.endpoint(),
    })?;
    let qp = qp.handshake(ready.endpoint).map_err(e2s)?;
    let r = bw_loop(&qp, &cq, &a.mr, op, size, ready.remote, dur);
    passive.stop()?;
    r
}

/// Rounds the latency test is split into, alternating with the raw UDP ping-pong.
const LAT_ROUNDS: usize = 5;

/// The 64-byte Send/Recv ping-pong, in [`LAT_ROUNDS`] rounds on one QP, each followed by a
/// round of the raw UDP ping-pong (`dgram` bytes) when `baseline`: on a shared machine the load
/// changes within seconds, and interleaving exposes both to the same moments. Returns the RoCE
/// result, the baseline over all its rounds, and the round trips made (warm-ups included).
fn run_lat(
    a: &Side,
    passive: &mut dyn Passive,
    iters: usize,
    baseline: Option<usize>,
) -> Result<(LatResult, Option<PingPong>, usize), String> {
    let rounds = if iters >= 100 * LAT_ROUNDS {
        LAT_ROUNDS
    } else {
        1
    };
    let per = iters.div_ceil(rounds);
    let (mut rtts, mut made) = (Vec::with_capacity(iters), 0);
    let (mut raw, mut lost) = (Vec::new(), 0);
    for _ in 0..rounds {
        // A fresh QP pair per round: the passive side's echo thread stops (it busy-polls)
        // while the raw UDP ping-pong runs.
        let cq = a.ctx.create_cq(4096).build().map_err(e2s)?;
        let qp = a.qp(&cq, SQ_DEPTH, RQ_DEPTH)?;
        let ready = passive.setup(&Setup {
            op: Op::Lat,
            size: 64,
            endpoint: qp.endpoint(),
        })?;
        let qp = qp.handshake(ready.endpoint).map_err(e2s)?;
        for i in 0..16 {
            qp.post_receive(&[a.mr.slice(..64)], i).map_err(e2s)?;
        }
        // Pinned like the raw UDP ping-pong (CPU 0 here, the echo on CPU 1).
        let r = baseline::pinned(0, || lat_loop(&qp, &cq, &a.mr, per));
        passive.stop()?;
        let (r, m) = r?;
        rtts.extend(r);
        made += m;
        if let Some(dgram) = baseline {
            if let Ok((r, l)) = baseline::pingpong_samples(dgram, per) {
                raw.extend(r);
                lost += l;
            }
        }
    }
    let base = baseline.and_then(|d| PingPong::from_samples(d, raw, lost).ok());
    Ok((lat_result(rtts), base, made))
}

fn steps(plan: &Plan) -> usize {
    let mut n = plan.ops.len() * plan.sizes.len() + usize::from(plan.latency);
    if plan.check {
        n += 1;
    }
    n
}

fn run_all(
    a: &Side,
    passive: &mut dyn Passive,
    plan: &Plan,
    baseline: bool,
    err: &mut dyn Write,
) -> Result<Report, String> {
    let tty = std::io::stderr().is_terminal();
    let mut prog = Progress {
        err,
        total: steps(plan),
        done: 0,
        tty,
    };
    let mut base = Baselines {
        fresh: true,
        gso: HashMap::new(),
        mmsg: HashMap::new(),
        dur: plan.duration.max(Duration::from_millis(50)),
    };
    let mut rep = Report::new(plan, a.ctx.ip());
    for &op in &plan.ops {
        for &size in &plan.sizes {
            prog.step(&format!("{} {size} B", op.title()));
            let dgram = datagram_size(op, size, plan.mtu);
            // RoCE and raw UDP alternately, `repeat` times; the best of each (a shared machine
            // only ever makes a run slower, so the best run is the least disturbed one).
            let (mut r, mut b) = (None::<BwResult>, None::<Baseline>);
            for _ in 0..plan.repeat {
                let c0 = plan.counters.then(|| CounterSnap::take(a, passive.side()));
                let x = run_bw(a, passive, op, size, plan.duration)?;
                if let Some(c0) = c0 {
                    let c1 = CounterSnap::take(a, passive.side());
                    c0.print(
                        &c1,
                        x.iterations,
                        &format!("{} {size} B", op.title()),
                        prog.err,
                    );
                }
                if !r.is_some_and(|r| x.msg_per_s() <= r.msg_per_s()) {
                    r = Some(x);
                }
                if baseline {
                    if let Some(y) = base.get(dgram, true) {
                        if !b.is_some_and(|b| y.datagrams_per_s <= b.datagrams_per_s) {
                            b = Some(y);
                        }
                    }
                }
            }
            let r = r.expect("repeat >= 1");
            rep.bw
                .push(BwRow::new(op, r, packets_per_msg(size, plan.mtu), dgram, b));
        }
    }
    if plan.latency {
        prog.step("RC Send/Recv latency 64 B");
        let c0 = plan.counters.then(|| CounterSnap::take(a, passive.side()));
        let dgram = baseline.then(|| datagram_size(Op::Lat, 64, plan.mtu));
        let (r, b, made) = run_lat(a, passive, plan.iters, dgram)?;
        if let Some(c0) = c0 {
            let c1 = CounterSnap::take(a, passive.side());
            c0.print(&c1, made as u64, "latency 64 B", prog.err);
        }
        rep.lat = Some(LatRow::new(r, b));
    }
    if plan.check {
        prog.step("check: raw UDP one datagram per packet");
        let big = datagram_size(Op::Write, 65536, plan.mtu);
        rep.mmsg_64k = if baseline { base.get(big, false) } else { None };
        rep.mmsg_64b = if baseline {
            base.get(datagram_size(Op::Write, 64, plan.mtu), false)
        } else {
            None
        };
        for op in [Op::Write, Op::Read, Op::Send] {
            if !rep.bw.iter().any(|r| r.op == op && r.size == 65536) {
                let r = run_bw(a, passive, op, 65536, plan.duration)?;
                let b = if baseline {
                    base.get(datagram_size(op, 65536, plan.mtu), true)
                } else {
                    None
                };
                rep.bw.push(BwRow::new(
                    op,
                    r,
                    packets_per_msg(65536, plan.mtu),
                    datagram_size(op, 65536, plan.mtu),
                    b,
                ));
            }
        }
        if !rep.bw.iter().any(|r| r.op == Op::Write && r.size == 64) {
            let r = run_bw(a, passive, Op::Write, 64, plan.duration)?;
            let b = if baseline {
                base.get(datagram_size(Op::Write, 64, plan.mtu), true)
            } else {
                None
            };
            rep.bw.push(BwRow::new(
                Op::Write,
                r,
                1,
                datagram_size(Op::Write, 64, plan.mtu),
                b,
            ));
        }
    }
    prog.finish();
    Ok(rep)
}

/// Default mode: both devices in this process.
pub fn in_process(
    ip_a: IpAddr,
    ip_b: IpAddr,
    plan: &Plan,
    err: &mut dyn Write,
) -> Result<Report, String> {
    let max = plan.sizes.iter().copied().max().unwrap_or(64).max(65536);
    let a = Side::open(ip_a, plan.mtu, max, 0.0)?;
    let b = Side::open(ip_b, plan.mtu, max, 0.0)?;
    let mut passive = LocalPassive {
        side: b,
        running: None,
    };
    let mut rep = run_all(&a, &mut passive, plan, plan.baseline, err)?;
    if plan.check {
        let _ = writeln!(
            err,
            "roce bench: check: 64 KiB Write with 1% loss, then 1,000 QPs"
        );
        rep.scale = Some(scale_and_loss(
            ip_a,
            ip_b,
            plan.mtu,
            plan.duration,
            &a,
            &mut passive,
        )?);
        rep.compute_checks();
    }
    Ok(rep)
}

/// `--client`: the active side here, the passive side behind `roce bench --server`.
pub fn client(
    ip: IpAddr,
    server: &str,
    port: u16,
    plan: &Plan,
    err: &mut dyn Write,
) -> Result<Report, String> {
    let addr = if server.contains(':') {
        server.to_string()
    } else {
        format!("{server}:{port}")
    };
    let max = plan.sizes.iter().copied().max().unwrap_or(64).max(65536);
    if max > 1 << 20 {
        return Err("the server's region is 1 MiB: sizes up to 1M with --client".into());
    }
    let a = Side::open(ip, plan.mtu, max, 0.0)?;
    let s = exchange_connect(&addr)?;
    let loopback = s.peer_addr().map(|p| p.ip().is_loopback()).unwrap_or(false);
    let mut passive = RemotePassive {
        w: s.try_clone().map_err(|e| e.to_string())?,
        r: BufReader::new(s),
    };
    // The raw UDP baseline runs on this host's loopback: meaningful only when the server is here.
    let mut plan = plan.clone();
    plan.check = false;
    run_all(&a, &mut passive, &plan, plan.baseline && loopback, err)
}

fn exchange_connect(addr: &str) -> Result<TcpStream, String> {
    let start = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                return Err(format!("cannot reach the server at {addr}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `--check` extras: 64 KiB Write with 1% injected loss (a second pair of devices on the next
/// two addresses), and 1,000 RC QPs between the two main devices.
fn scale_and_loss(
    ip_a: IpAddr,
    ip_b: IpAddr,
    mtu: Mtu,
    dur: Duration,
    a: &Side,
    passive: &mut LocalPassive,
) -> Result<Scale, String> {
    let next = |ip: IpAddr, k: u8| match ip {
        IpAddr::V4(v) => {
            let o = v.octets();
            IpAddr::from([o[0], o[1], o[2], o[3].wrapping_add(k)])
        }
        v6 => v6,
    };
    let (la, lb) = (next(ip_a, 2), next(ip_b, 2));
    let lossy = (|| -> Result<BwResult, String> {
        let mut a2 = Side::open(la, mtu, 65536, 0.01)?;
        let mut b2 = Side::open(lb, mtu, 65536, 0.01)?;
        a2.timeout = LOSSY_QP_TIMEOUT;
        b2.timeout = LOSSY_QP_TIMEOUT;
        let mut p2 = LocalPassive {
            side: b2,
            running: None,
        };
        run_bw(&a2, &mut p2, Op::Write, 65536, dur * 2)
    })();
    let lossless = run_bw(a, passive, Op::Write, 65536, dur * 2)?;
    // 1,000 QPs, round robin, the same total window as one QP.
    let nqp = 1000;
    let cq_a = a.ctx.create_cq(8192).build().map_err(e2s)?;
    let b = &passive.side;
    let cq_b = b.ctx.create_cq(64).build().map_err(e2s)?;
    let mut qps = Vec::with_capacity(nqp);
    let mut peers = Vec::with_capacity(nqp);
    let mut mem = 0usize;
    for _ in 0..nqp {
        let qa = a.qp(&cq_a, 4, 1)?;
        let qb = b.qp(&cq_b, 1, 1)?;
        let (ea, eb) = (qa.endpoint(), qb.endpoint());
        let qa = qa.handshake(eb).map_err(e2s)?;
        let qb = qb.handshake(ea).map_err(e2s)?;
        let (s, q) = qa.memory();
        mem += s + q;
        qps.push(qa);
        peers.push(qb);
    }
    let remote = b.mr.remote_slice(..65536);
    let local = [a.mr.slice(..65536)];
    let depth = WINDOW_BYTES / 65536;
    let mut per_qp = vec![0u8; nqp];
    let mut wcs = [WorkCompletion::default(); 64];
    let (mut outstanding, mut done, mut next_qp) = (0usize, 0u64, 0usize);
    let qpn_index: HashMap<u32, usize> =
        qps.iter().enumerate().map(|(i, q)| (q.qpn(), i)).collect();
    let start = Instant::now();
    let mut last = start;
    let mut posting = true;
    while posting || outstanding > 0 {
        while posting && outstanding < depth {
            let i = next_qp;
            next_qp = (next_qp + 1) % nqp;
            if per_qp[i] >= 2 {
                continue;
            }
            qps[i]
                .post(&SendRequest::write(0, &local, remote))
                .map_err(e2s)?;
            per_qp[i] += 1;
            outstanding += 1;
        }
        let n = cq_a.poll(&mut wcs).map_err(e2s)?.len();
        for wc in &wcs[..n] {
            wc.result().map_err(e2s)?;
            per_qp[qpn_index[&wc.qp_num()]] -= 1;
            outstanding -= 1;
            done += 1;
        }
        if n > 0 {
            last = Instant::now();
            if last - start >= dur * 2 {
                posting = false;
            }
        } else if last.elapsed() > T {
            return Err("1,000 QPs: no completion for 20 s".into());
        }
    }
    let many = BwResult {
        size: 65536,
        iterations: done,
        seconds: (last - start).as_secs_f64(),
    };
    drop(peers);
    Ok(Scale {
        lossless,
        lossy: lossy.ok(),
        lossy_ips: (la, lb),
        many,
        qps: nqp,
        bytes_per_qp: mem / nqp,
    })
}
