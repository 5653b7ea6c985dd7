//! The active side's loops: the bandwidth window loop and the latency ping-pong.

use super::*;

pub(super) fn bw_loop(
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
pub(super) fn lat_loop(
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
pub(super) fn lat_result(mut rtts: Vec<Duration>) -> LatResult {
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
