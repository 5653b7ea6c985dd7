//! RC RDMA WRITE 64 KiB bandwidth with and without injected loss, through the UDP runtime on
//! loopback, shaped like `roce bench --check`'s loss point: MTU 4096, one QP, 32 messages
//! (2 MiB) in flight posted as lists, the passive side answered by its device's progress
//! thread, and `DeviceConfig.loss` dropping that fraction of RC request packets at transmit
//! (ACKs exempt). Lossless and lossy rounds alternate (the machine is shared: the ratio is
//! taken within one run), each pair of devices on its own addresses.
//!
//! ```text
//! cargo run --release -p roce-provider --example loss_bw -- \
//!     [--loss 0.01] [--timeout 14] [--secs 2] [--rounds 2] [--ips 127.0.0.21]
//! ```
//!
//! `--timeout` is the lossy QPs' local ACK timeout exponent (4.096 µs × 2^t, rxe / perftest
//! `-u`; default 14 ≈ 67 ms as the bench); the lossless pair always uses 14. `--ips A` puts
//! the lossless pair on A and A+1, the lossy pair on A+2 and A+3. Prints Gb/s of every round,
//! the ratio of the totals, the engine counters that explain the lossy figure and the longest
//! time the active side went without a completion.
use roce_provider::verbs::{
    AccessFlags, Context, Device, DeviceConfig, Mtu, QpType, SendRequest, WorkCompletion,
};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const SIZE: usize = 65536;
const WINDOW_BYTES: usize = 2 << 20;
const SQ_DEPTH: u32 = 256;
const RQ_DEPTH: u32 = 512;

struct Opts {
    loss: f64,
    timeout: u8,
    secs: f64,
    rounds: usize,
    base: Ipv4Addr,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        loss: 0.01,
        timeout: 14,
        secs: 2.0,
        rounds: 2,
        base: Ipv4Addr::new(127, 0, 0, 21),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--loss" => o.loss = val()?.parse().map_err(|e| format!("--loss: {e}"))?,
            "--timeout" => o.timeout = val()?.parse().map_err(|e| format!("--timeout: {e}"))?,
            "--secs" => o.secs = val()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--rounds" => o.rounds = val()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--ips" => o.base = val()?.parse().map_err(|e| format!("--ips: {e}"))?,
            "-h" | "--help" => {
                println!("loss_bw [--loss P] [--timeout T] [--secs S] [--rounds N] [--ips A]");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if !(0.0..1.0).contains(&o.loss) || o.timeout > 31 || o.rounds == 0 || o.secs <= 0.0 {
        return Err("--loss in [0, 1), --timeout in 0..=31, --rounds ≥ 1, --secs > 0".into());
    }
    Ok(o)
}

struct Pair {
    a: Context,
    b: Context,
    timeout: u8,
}

fn open(ip: Ipv4Addr, loss: f64) -> Result<Context, String> {
    Device::open(DeviceConfig {
        mtu: Mtu::Mtu4096,
        loss,
        ..DeviceConfig::new(IpAddr::V4(ip))
    })
    .map_err(|e| format!("{ip}: {e}"))
}

/// One measured round: a fresh QP pair, `dur` of posting, then the window drained.
/// Returns (Gb/s, longest gap between completions).
fn round(p: &Pair, dur: Duration) -> Result<(f64, Duration), String> {
    let e2s = |e: roce_provider::verbs::Error| e.to_string();
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let (pa, pb) = (p.a.alloc_pd().map_err(e2s)?, p.b.alloc_pd().map_err(e2s)?);
    let ca = p.a.create_cq(4096).build().map_err(e2s)?;
    let cb = p.b.create_cq(4096).build().map_err(e2s)?;
    let qp = |pd: &roce_provider::verbs::ProtectionDomain,
              cq: &roce_provider::verbs::CompletionQueue| {
        pd.create_qp(cq, cq, QpType::Rc)
            .set_max_send_wr(SQ_DEPTH)
            .set_max_recv_wr(RQ_DEPTH)
            .set_max_inline_data(256)
            .set_path_mtu(Mtu::Mtu4096)
            .set_min_rnr_timer(1)
            .set_timeout(p.timeout)
            .build()
    };
    let (qa, qb) = (qp(&pa, &ca).map_err(e2s)?, qp(&pb, &cb).map_err(e2s)?);
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, _qb) = (
        qa.handshake(eb).map_err(e2s)?,
        qb.handshake(ea).map_err(e2s)?,
    );
    let src = pa.allocate(SIZE, all).map_err(e2s)?;
    src.fill(0x5A);
    let dst = pb.allocate(SIZE, all).map_err(e2s)?;
    let local = [src.slice(..SIZE)];
    let wr = SendRequest::write(0, &local, dst.remote_slice(..SIZE));
    let batch = [wr; 32];
    let depth = (WINDOW_BYTES / SIZE).clamp(1, SQ_DEPTH as usize / 2);
    let mut wcs = [WorkCompletion::default(); 64];
    let (mut outstanding, mut done) = (0usize, 0u64);
    let start = Instant::now();
    let end = start + dur;
    let (mut last, mut gap) = (start, Duration::ZERO);
    let mut posting = true;
    loop {
        if posting && outstanding < depth {
            let k = (depth - outstanding).min(batch.len());
            qa.post_batch(&batch[..k]).map_err(e2s)?;
            outstanding += k;
        }
        let n = ca.poll(&mut wcs).map_err(e2s)?.len();
        for wc in &wcs[..n] {
            wc.result().map_err(e2s)?;
            outstanding -= 1;
            done += 1;
        }
        if n > 0 {
            let now = Instant::now();
            gap = gap.max(now - last);
            last = now;
            if posting && last >= end {
                posting = false;
            }
        } else if last.elapsed() > Duration::from_secs(20) {
            return Err("no completion for 20 s".into());
        }
        if !posting && outstanding == 0 {
            break;
        }
    }
    let secs = (last - start).as_secs_f64();
    Ok((done as f64 * SIZE as f64 * 8.0 / secs / 1e9, gap))
}

fn main() -> Result<(), String> {
    let o = parse()?;
    let ip = |k: u8| {
        let b = o.base.octets();
        Ipv4Addr::new(b[0], b[1], b[2], b[3].wrapping_add(k))
    };
    let clean = Pair {
        a: open(ip(0), 0.0)?,
        b: open(ip(1), 0.0)?,
        timeout: 14,
    };
    let lossy = Pair {
        a: open(ip(2), o.loss)?,
        b: open(ip(3), o.loss)?,
        timeout: o.timeout,
    };
    let dur = Duration::from_secs_f64(o.secs);
    println!(
        "RC WRITE 64 KiB, MTU 4096, 1 QP, {} in flight; lossless {} -> {} (timeout 14), lossy {} -> {} (loss {}, timeout {} = {:.2} ms), {} s per round",
        WINDOW_BYTES / SIZE,
        ip(0),
        ip(1),
        ip(2),
        ip(3),
        o.loss,
        o.timeout,
        4.096e-3 * (1u64 << o.timeout) as f64,
        o.secs
    );
    let c0 = (lossy.a.counters(), lossy.b.counters());
    let drop0 = fault_dropped(&lossy.a) + fault_dropped(&lossy.b);
    let (mut sum_clean, mut sum_lossy, mut max_gap) = (0.0, 0.0, Duration::ZERO);
    for r in 0..o.rounds {
        let (g0, gap0) = round(&clean, dur)?;
        let (g1, gap) = round(&lossy, dur)?;
        max_gap = max_gap.max(gap);
        println!(
            "round {}: lossless {g0:.2} Gb/s, lossy {g1:.2} Gb/s, ratio {:.3}; longest wait for a completion: lossless {:.1} ms, lossy {:.1} ms",
            r + 1,
            g1 / g0,
            gap0.as_secs_f64() * 1e3,
            gap.as_secs_f64() * 1e3
        );
        sum_clean += g0;
        sum_lossy += g1;
    }
    let (a, b) = (lossy.a.counters(), lossy.b.counters());
    let dropped = fault_dropped(&lossy.a) + fault_dropped(&lossy.b) - drop0;
    println!(
        "total: lossless {:.2} Gb/s, lossy {:.2} Gb/s, ratio {:.3}",
        sum_clean / o.rounds as f64,
        sum_lossy / o.rounds as f64,
        sum_lossy / sum_clean
    );
    println!(
        "lossy requester: sent_pkts {} fault_dropped {} completer_retry_err {} rcvd_seq_err {} retry_timeouts {} resp_ignored {}",
        a.sent_pkts - c0.0.sent_pkts,
        dropped,
        a.completer_retry_err - c0.0.completer_retry_err,
        a.rcvd_seq_err - c0.0.rcvd_seq_err,
        a.retry_timeouts - c0.0.retry_timeouts,
        a.resp_ignored - c0.0.resp_ignored,
    );
    println!(
        "lossy responder: rcvd_pkts {} out_of_seq_request {} duplicate_request {} sent_pkts {}; longest wait {:.1} ms",
        b.rcvd_pkts - c0.1.rcvd_pkts,
        b.out_of_seq_request - c0.1.out_of_seq_request,
        b.duplicate_request - c0.1.duplicate_request,
        b.sent_pkts - c0.1.sent_pkts,
        max_gap.as_secs_f64() * 1e3
    );
    Ok(())
}

fn fault_dropped(c: &Context) -> u64 {
    c.runtime().map_or(0, |d| {
        d.runtime_counters()
            .fault_dropped
            .load(std::sync::atomic::Ordering::Relaxed)
    })
}
