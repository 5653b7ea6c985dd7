//! The runs over a plan: the progress line on stderr, the raw UDP baselines, the bandwidth and
//! latency points, and the entry points [`in_process`] and [`client`].

use super::*;

pub(super) struct Progress<'a> {
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

pub(super) struct Baselines {
    fresh: bool,
    gso: HashMap<usize, Baseline>,
    mmsg: HashMap<usize, Baseline>,
    floor: HashMap<usize, Baseline>,
    dur: Duration,
}

impl Baselines {
    /// Raw UDP with GSO+GRO (`gso`) or one datagram per packet.
    fn get(&mut self, dgram: usize, gso: bool) -> Option<Baseline> {
        if gso {
            self.measure(dgram, Technique::GsoGro { segments: 0 })
        } else {
            self.measure(dgram, Technique::Mmsg { batch: 32 })
        }
    }

    /// Raw UDP with GSO+GRO plus one payload copy and the ICRC per packet on each side
    /// ([`Technique::GsoGroIcrc`]): information for `--check`, no target.
    fn floor(&mut self, dgram: usize) -> Option<Baseline> {
        self.measure(dgram, Technique::GsoGroIcrc)
    }

    fn measure(&mut self, dgram: usize, t: Technique) -> Option<Baseline> {
        let (map, technique) = match t {
            Technique::Mmsg { .. } => (&mut self.mmsg, "mmsg"),
            Technique::GsoGroIcrc => (&mut self.floor, "gso_gro_copy_icrc"),
            _ => (&mut self.gso, "gso_gro"),
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
            technique,
            datagram_size: dgram,
            gbit_per_s: r.gbit_per_s(),
            datagrams_per_s: r.datagrams_per_s(),
        };
        map.insert(dgram, b);
        Some(b)
    }
}

pub(super) fn run_bw(
    a: &Side,
    passive: &mut dyn Passive,
    op: Op,
    size: usize,
    dur: Duration,
) -> Result<BwResult, String> {
    let cq = a.ctx.create_cq(4096).build().map_err(e2s)?;
    let qp = a.qp_for(Some(op), &cq, SQ_DEPTH, RQ_DEPTH)?;
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
pub(super) const LAT_ROUNDS: usize = 5;

/// The 64-byte Send/Recv ping-pong, in [`LAT_ROUNDS`] rounds on one QP, each followed by a
/// round of the raw UDP ping-pong (`dgram` bytes) and one of the same carrying an RC ACK
/// ([`baseline::pingpong_shaped`]) when `baseline`: on a shared machine the load changes
/// within seconds, and interleaving exposes all three to the same moments. Returns the RoCE
/// result, the two baselines over all their rounds, and the round trips made (warm-ups
/// included).
pub(super) fn run_lat(
    a: &Side,
    passive: &mut dyn Passive,
    iters: usize,
    baseline: Option<usize>,
) -> Result<(LatResult, [Option<PingPong>; 2], usize), String> {
    let rounds = if iters >= 100 * LAT_ROUNDS {
        LAT_ROUNDS
    } else {
        1
    };
    let per = iters.div_ceil(rounds);
    let (mut rtts, mut made) = (Vec::with_capacity(iters), 0);
    let (mut raw, mut lost) = (Vec::new(), 0);
    let (mut acked, mut acked_lost) = (Vec::new(), 0);
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
            if let Ok((r, l)) = baseline::pingpong_shaped(dgram, baseline::RC_ACK_BYTES, per) {
                acked.extend(r);
                acked_lost += l;
            }
        }
    }
    let base = baseline.and_then(|d| PingPong::from_samples(d, raw, lost).ok());
    let acked = baseline.and_then(|d| PingPong::from_samples(d, acked, acked_lost).ok());
    Ok((lat_result(rtts), [base, acked], made))
}

pub(super) fn steps(plan: &Plan) -> usize {
    let mut n = plan.ops.len() * plan.sizes.len() + usize::from(plan.latency);
    if plan.check {
        n += 1;
    }
    n
}

pub(super) fn run_all(
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
        floor: HashMap::new(),
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
        let (r, [b, acked], made) = run_lat(a, passive, plan.iters, dgram)?;
        if let Some(c0) = c0 {
            let c1 = CounterSnap::take(a, passive.side());
            c0.print(&c1, made as u64, "latency 64 B", prog.err);
        }
        rep.lat = Some(LatRow::new(r, b, acked));
    }
    if plan.check {
        prog.step("check: raw UDP one datagram per packet, and with copy + ICRC");
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
        if baseline {
            // best of `repeat`, as every point and its baseline
            rep.floor_64k = (0..plan.repeat.max(1))
                .filter_map(|_| base.floor(big))
                .max_by(|x, y| x.datagrams_per_s.total_cmp(&y.datagrams_per_s));
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
    let mut max = plan.sizes.iter().copied().max().unwrap_or(64).max(65536);
    if plan.loss.is_some() {
        max = max.max(LOSS_MSG);
    }
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
            plan.repeat,
            &a,
            &mut passive,
            plan.counters.then_some(&mut *err),
        )?);
        rep.compute_checks();
    }
    if let Some(loss) = plan.loss {
        let _ = writeln!(
            err,
            "roce bench: loss: RC Write and Read 4 MiB, lossless and with {:.2}% loss",
            loss * 100.0
        );
        rep.loss = loss_points((ip_a, ip_b), plan, loss, &a, &mut passive)?;
    }
    if plan.cm {
        let _ = writeln!(
            err,
            "roce bench: cm: RDMA CM connections per second, then TCP connect/accept"
        );
        rep.cm = Some(cm_rates(
            &a,
            &passive.side,
            plan.duration,
            plan.repeat,
            plan.baseline,
        )?);
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
    if plan.cm {
        let _ = writeln!(err, "roce bench: cm: one-process mode only; not measured");
        plan.cm = false;
    }
    run_all(&a, &mut passive, &plan, plan.baseline && loopback, err)
}

pub(super) fn exchange_connect(addr: &str) -> Result<TcpStream, String> {
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
