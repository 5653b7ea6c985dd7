//! The progress loop: receive → handle → timers → transmit → events (the `Shared` side), event
//! and diagnostic dispatch, statistics, and the background progress thread.

use super::*;

/// See [`Shared::handle_batch`]: received bytes after which the next GRO buffer waits for a
/// transmit of what the engine queued (ACKs for the data just handled). Two 64 KiB messages:
/// their ACKs coalesce into one (`AckQueue`), a quarter of the 128-PSN window at MTU 4096.
/// roce bench 64 KiB Write, receiver: ACK `sendmmsg` per message 1.0 (8 KiB) -> 0.57-0.65.
const EARLY_TX_BYTES: usize = 128 << 10;

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The thread caught a program that had been polling not progressing (see
    /// [`RuntimeCounters::thread_takeovers`]): its looks start again at 200 µs. When its last
    /// poll had returned completions (it went on to work on them or to wait on memory, as
    /// ib_write_lat does, not to poll again), they stay short for [`SHORT_LOOKS_NS`]; a
    /// program caught in the middle of its polling loop was only descheduled, and a busy
    /// machine does that often: short looks would cost every round trip after it.
    fn caught(&self, look_ns: &mut u64, now: Instant) {
        self.ctr.thread_takeovers.fetch_add(1, Relaxed);
        *look_ns = APP_ACTIVE_NS;
        if self.app_last_got.load(Relaxed) {
            self.short_looks_until
                .store(now.as_nanos() + SHORT_LOOKS_NS, Relaxed);
        }
    }

    /// The engine, unless another thread holds it.
    pub(super) fn try_lock(&self) -> Option<MutexGuard<'_, Engine>> {
        match self.engine.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub(super) fn now(&self) -> Instant {
        Instant::from_nanos(roce_udp::os::monotonic_ns().saturating_sub(self.start_ns))
    }

    /// Receive (engine socket, non-blocking) → timers → transmit → events.
    pub(super) fn progress(&self, e: &mut Engine, from: Origin) -> usize {
        self.progress_at(e, from, self.now())
    }

    /// [`Shared::progress`] at `now` (a caller that has just read the clock).
    pub(super) fn progress_at(&self, e: &mut Engine, from: Origin, now: Instant) -> usize {
        let inline = from != Origin::Thread;
        match from {
            // Only a program that polls its CQs progresses while it waits; one that spins on
            // memory (ib_write_lat) and only posts needs the thread to watch the socket.
            Origin::Poll => {
                self.app_last.store(now.as_nanos().max(1), Relaxed);
                bump(&self.ctr.progress_inline, 1);
            }
            Origin::Post => {
                bump(&self.ctr.progress_inline, 1);
            }
            Origin::Thread => {
                self.ctr.progress_thread.fetch_add(1, Relaxed);
            }
        }
        // Posting only transmits: the program polls (or the thread receives) anyway, and a
        // receive system call before the send would only delay it.
        let mut moved = if from == Origin::Post {
            0
        } else {
            self.receive(e, now)
        };
        moved += self.finish(e, now, inline);
        if from == Origin::Post {
            // A program that polls and also posts long bursts (a bandwidth loop: a list of
            // 64 KiB WRITEs takes a millisecond to transmit) still progresses by itself: its
            // poll comes right after. A post counts only after a poll, so a program that posts
            // and then spins on memory without polling (ib_write_lat's server side, a
            // request/response over WRITEs) keeps the thread on the socket.
            let last = self.app_last.load(Relaxed);
            if last != 0 && now.as_nanos() < last + APP_ACTIVE_NS {
                self.app_last.store(self.now().as_nanos(), Relaxed);
            }
        }
        moved
    }

    /// Receives and handles up to a few batches (so a flood cannot starve the caller).
    pub(super) fn receive(&self, e: &mut Engine, now: Instant) -> usize {
        let mut moved = 0;
        let Some(mut rx) = e.rx.take() else { return 0 };
        for _ in 0..4 {
            let n = match e.sock.recv_batch(&mut rx, Wait::NonBlocking) {
                Ok(n) => n,
                Err(err) => {
                    tracing::debug!(%err, "recv_batch");
                    0
                }
            };
            if n == 0 {
                break;
            }
            if moved > 0 {
                // ACKs for the previous batch leave before this one is handled.
                self.transmit(e, now);
            }
            moved += n;
            self.handle_batch(e, &rx, now);
            if rx.buffers() < rx.capacity() {
                break;
            }
        }
        e.rx = Some(rx);
        moved
    }

    /// Timers, transmit, events, and waking the thread if a timer moved earlier.
    pub(super) fn finish(&self, e: &mut Engine, now: Instant, inline: bool) -> usize {
        let moved = self.timers_and_transmit(e, now);
        self.dispatch_events(e);
        if inline {
            // A timer armed earlier than the sleeping thread's deadline: wake it to re-plan.
            if let Some(t) = e.next_timeout() {
                if t.as_nanos() < self.thread_deadline.load(Relaxed) {
                    self.thread_deadline.store(t.as_nanos(), Relaxed);
                    self.waker.wake();
                }
            }
        }
        moved
    }

    pub(super) fn timers_and_transmit(&self, e: &mut Engine, now: Instant) -> usize {
        if e.nic.poll_timeout().is_some_and(|t| t <= now) {
            e.nic.handle_timeout(now);
        }
        e.run_cm(now);
        self.transmit(e, now)
    }

    /// Feeds every datagram of `rx` to the engine, after the ICRC check.
    ///
    /// Between GRO buffers (one GSO send of the peer each, typically a message) it transmits
    /// what the engine queued once at least [`EARLY_TX_BYTES`] were handled, so ACKs leave while
    /// the rest of the batch is handled and the sender's 128-PSN window keeps moving.
    pub(super) fn handle_batch(&self, e: &mut Engine, rx: &RecvBatch, now: Instant) {
        self.handle_batch_with(e, rx, now, true)
    }

    /// [`Shared::handle_batch`]; `may_transmit` false: queue everything (the caller is inside
    /// a transmit).
    pub(super) fn handle_batch_with(
        &self,
        e: &mut Engine,
        rx: &RecvBatch,
        now: Instant,
        may_transmit: bool,
    ) {
        bump(&self.ctr.rx_batches, 1);
        // A post after this reacts to what arrived (a ping-pong, ib_write_lat spinning on
        // memory): it is not part of a burst, its doorbell rings at once.
        e.doorbell.interrupt();
        if let Some(d) = rx.drops() {
            self.ctr.rx_kernel_drops.fetch_max(d as u64, Relaxed);
        }
        let policy = self.cfg.icrc_policy;
        // Bytes handled since the last transmit. Only after data (a message's worth of a GRO
        // buffer) is an early transmit worth its system call: after ACKs (20 bytes each; a
        // Write sender gets ~5 per batch) it sent one message per ACK, one `sendmmsg` each,
        // where one transmit after the batch sends them all together.
        let mut since = 0usize;
        // Out-of-sequence requests seen so far: the first one of a gap queues a PSN-sequence
        // NAK, which leaves at once (see below).
        let mut oos = e.nic.counters().out_of_seq_request;
        let mut in_gap = false;
        for d in rx.iter() {
            if may_transmit && d.gro_index == 0 && since >= EARLY_TX_BYTES {
                self.transmit(e, now);
                since = 0;
            }
            since += d.payload.len();
            bump(&self.ctr.rx_datagrams, 1);
            bump(&self.ctr.rx_bytes, d.payload.len() as u64);
            if d.truncated {
                self.ctr.rx_dropped.fetch_add(1, Relaxed);
                continue;
            }
            let mut d = d;
            if e.steer.is_some() {
                // A shared device: what comes from the steering helper (the only socket on
                // `<ip>:4791`) was checked there and has the original headers in front
                // (`crate::shared`); anything else came straight from a process on this host
                // (`crate::shared::direct`), sealed for port 4791: checked as if sent there.
                let from_helper =
                    d.src.port() == roce_wire::ROCE_V2_UDP_PORT && d.src.ip() == d.dst;
                if !from_helper {
                    d.dst_port = roce_wire::ROCE_V2_UDP_PORT;
                }
            }
            if e.steer.is_some() && d.dst_port != roce_wire::ROCE_V2_UDP_PORT {
                // from the helper
                let Some((f, inner)) = crate::shared::Forwarded::parse(d.payload) else {
                    self.ctr.rx_dropped.fetch_add(1, Relaxed);
                    continue;
                };
                let meta = RxMeta {
                    src_ip: f.src.ip(),
                    dst_ip: d.dst,
                    src_port: f.src.port(),
                    ipv4_id: None,
                    tos: f.tos,
                    ttl: f.ttl,
                    flow_label: f.flow_label,
                };
                if let Some(p) = e.pcap.as_mut() {
                    let m = RxMeta {
                        ipv4_id: f.ipv4_id.or(Some(0)),
                        ..meta
                    };
                    p.packet_meta(now, &m, inner);
                }
                e.nic.handle_datagram(now, &meta, inner);
                continue;
            }
            let v4 = d.src.is_ipv4();
            // IPv6: the engine verifies exactly (no ID); IPv4: the driver knows the GRO index.
            let id = if v4 {
                match d.check_icrc(policy, &self.icrc) {
                    IcrcVerdict::Bad => continue,
                    IcrcVerdict::Verified => {
                        Some(roce_udp::headers::gso_segment_ip_id(d.gro_index as usize))
                    }
                    IcrcVerdict::RecoveredId(id) => Some(id),
                    IcrcVerdict::NotVerifiable => None,
                }
            } else {
                None
            };
            let mut meta = RxMeta {
                src_ip: d.src.ip(),
                dst_ip: d.dst,
                src_port: d.src.port(),
                ipv4_id: None,
                tos: d.tos.unwrap_or(0),
                ttl: d.ttl.unwrap_or(64),
                flow_label: 0,
            };
            if let Some(p) = e.pcap.as_mut() {
                let m = RxMeta {
                    ipv4_id: id.or(Some(0)),
                    ..meta
                };
                let before = p.errors;
                p.packet_meta(now, &m, d.payload);
                if p.errors != before {
                    self.ctr.pcap_errors.fetch_add(1, Relaxed);
                }
            }
            if !v4 {
                meta.ipv4_id = None;
            }
            e.nic.handle_datagram(now, &meta, d.payload);
            let o = e.nic.counters().out_of_seq_request;
            let first_of_gap = o != oos && !in_gap;
            in_gap = o != oos;
            oos = o;
            if first_of_gap && may_transmit {
                // Go-back-N: everything the requester sends from now until this NAK reaches
                // it is dropped here. Send it now, not after the batch (once per run of
                // out-of-sequence datagrams: the responder NAKs a gap once).
                self.ctr.tx_urgent.fetch_add(1, Relaxed);
                self.transmit(e, now);
                since = 0;
            }
        }
    }

    /// Reports the engine's diagnostics (once per QP and cause): a `tracing` warning and, unless
    /// `ROCE_QUIET=1`, one `roce: QP 0x..: what happened. What to do.` line on stderr.
    pub(super) fn report_diagnostics(&self, e: &mut Engine) {
        while let Some((qpn, d)) = e.nic.poll_diagnostic() {
            let msg = d.message(qpn);
            tracing::warn!(qpn, cause = d.counter(), "{msg}");
            if !self.quiet {
                use std::io::Write as _;
                let _ = writeln!(io::stderr(), "roce: {msg}");
            }
        }
    }

    pub(super) fn dispatch_events(&self, e: &mut Engine) {
        self.report_diagnostics(e);
        while let Some(cq) = e.nic.poll_comp_event() {
            self.ctr.comp_events.fetch_add(1, Relaxed);
            if let Some(h) = e.comp.get(&cq) {
                h();
            }
        }
        while let Some(ev) = e.nic.poll_event() {
            self.ctr.async_events.fetch_add(1, Relaxed);
            tracing::debug!(?ev, "async event");
            if let Some(h) = &e.async_handler {
                h(ev);
            }
        }
        while let Some(ev) = e.cm.poll_event() {
            tracing::debug!(?ev, "cm event");
            if let Some(h) = &e.cm_handler {
                h(ev);
            }
        }
    }

    pub(super) fn stats(&self) -> Stats {
        let mut v: Vec<(String, u64)> = Vec::new();
        {
            let e = self.lock();
            for (n, x) in e.nic.counters().iter() {
                // The engine never checks IPv4 ICRCs itself here (the driver does, below).
                if n == "icrc_unverified" {
                    continue;
                }
                v.push((n.to_string(), x));
            }
            for (n, x) in super::stat::cm_counters(e.cm.counters()) {
                v.push((n.to_string(), x));
            }
        }
        v.push(("icrc_verified".into(), self.icrc.verified.load(Relaxed)));
        v.push(("icrc_bad".into(), self.icrc.bad.load(Relaxed)));
        v.push((
            "icrc_not_verifiable".into(),
            self.icrc.not_verifiable.load(Relaxed),
        ));
        v.push((
            "icrc_recovered_id".into(),
            self.icrc.recovered.load(Relaxed),
        ));
        for (n, x) in self.ctr.iter() {
            v.push((n.to_string(), x));
        }
        Stats { counters: v }
    }

    pub(super) fn write_stats(&self) {
        if let Some(p) = &self.stat_path {
            let _ = stat::write(p, &self.cfg, &self.stats());
        }
    }
}

/// When the program progresses by itself (it polled within [`APP_ACTIVE_NS`]): until when
/// (virtual ns) it counts as doing so. Posts do not count: a program that posts and spins on
/// memory (ib_write_lat, which polls its send CQ now and then) needs the thread to receive for
/// it (counting posts made ib_write_lat's typical round trip 49 µs instead of 9–11).
fn app_active_until(s: &Shared, now: Instant) -> Option<u64> {
    let poll = s.app_last.load(Relaxed);
    let until = poll + APP_ACTIVE_NS;
    (poll != 0 && now.as_nanos() < until).then_some(until)
}

/// On a CPU shared with the program, the thread yields to a program that polled within this
/// long: one kept from polling by the thread itself was seen idle for up to ~10 ms.
const PROGRAM_RECENT_NS: u64 = 20_000_000;

/// On a CPU the thread shares with the program: lets the program run first, if it is runnable
/// (`sched_yield` returns at once when nothing else waits for this CPU). See [`progress_thread`].
fn yield_to_program(s: &Shared) {
    s.ctr.thread_yields.fetch_add(1, Relaxed);
    roce_udp::os::yield_cpu();
}

/// The background progress thread (see the module docs).
///
/// **A CPU shared with the program.** The thread inherits the affinity of the thread that
/// opened the device, so a program pinned to one CPU (`taskset -c N ib_write_lat`, as perftest
/// users often run it) has this thread on the same CPU. There nothing the thread does runs
/// beside the program: it runs *instead* of it. Spinning 50 µs on the socket after its work
/// kept a program that spins on memory (ib_write_lat) from seeing the data the thread had just
/// received (pinned: typical up to 158 µs, p99 up to 2 ms); a thread woken by an ACK preempted a
/// polling program, which then looked inactive (no poll for 200 µs: the thread saw program-idle
/// ages of 0.5-10 ms), and the thread went on receiving and transmitting for it. So on a
/// one-CPU affinity mask the thread does not spin while its program polls, and before work a
/// program that polled lately would do itself (ring a deferred doorbell, take a datagram over,
/// progress for a program that looks inactive) it yields the CPU once (`thread_yields`) and
/// looks again: a runnable program runs first (and, when it polls, shows it is active); a
/// blocked one costs a system call. A program whose last poll returned completions may be
/// spinning on memory for data only the thread can receive: it is not yielded to. A program
/// that does not poll at all (a perftest server) keeps the spin: its thread serves alone.
pub(super) fn progress_thread(s: Arc<Shared>, mut sock: Socket) {
    let mut next_stat = s.now();
    let stat_every = s.cfg.stat_interval.as_nanos() as u64;
    // How long the next look at a program that keeps polling waits (app-active branch).
    let mut look_ns = APP_ACTIVE_NS;
    let shares_cpu = s.thread_shares_cpu;
    // On a shared CPU: whether the thread has just let the program run (see above).
    let mut yielded = false;
    // Yield once before work the program may do itself; `continue` looks again.
    macro_rules! program_first {
        ($cond:expr) => {
            if shares_cpu && !yielded && $cond {
                yield_to_program(&s);
                yielded = true;
                continue;
            }
        };
    }
    while !s.stop.load(Relaxed) {
        let now = s.now();
        if now >= next_stat {
            s.write_stats();
            next_stat = now.add_nanos(stat_every);
        }
        // Whether a yield would let *the program* run: it polled lately (the CPU may be
        // shared with other processes too, and a yield gives it to any of them: a program
        // that never polls, like a perftest server waiting on its TCP socket, gains nothing
        // from it while a busy peer on the same CPU would take a whole time slice), and its
        // last poll found its CQ empty, so it polls again (and receives) once it runs. One whose
        // last poll returned completions may be spinning on memory for data only this thread
        // can receive (ib_write_lat): no yield for it.
        let app = s.app_last.load(Relaxed);
        let recent = app != 0 && now.as_nanos().saturating_sub(app) < PROGRAM_RECENT_NS;
        let polling = recent && !s.app_last_got.load(Relaxed);
        let db = s.doorbell_at.load(Relaxed);
        if db <= now.as_nanos() {
            // The program rings it itself at its next poll or post, if it gets the CPU.
            program_first!(polling);
            yielded = false;
            // Posts have waited for their doorbell long enough: ring it.
            if now.as_nanos() - db > DOORBELL_LATE_NS {
                // Found at a look, not woken for it: the program posted, then neither polled
                // nor posted again (it spins on memory, blocks elsewhere, or was descheduled).
                s.caught(&mut look_ns, now);
            }
            let mut e = s.lock();
            if e.doorbell.pending() {
                s.ctr.tx_doorbell_thread.fetch_add(1, Relaxed);
                s.timers_and_transmit(&mut e, now);
                s.dispatch_events(&mut e);
            }
            s.doorbell_at.store(u64::MAX, Relaxed);
            continue;
        }
        let active = app_active_until(&s, now);
        if active.is_some()
            && now.as_nanos() > s.app_last.load(Relaxed) + APP_STALE_NS
            && (s.tx_deferred_pending.load(Relaxed)
                || sock.wait_readable(Wait::NonBlocking).unwrap_or(false))
        {
            program_first!(polling);
            // Polled recently, but not for APP_STALE_NS, a datagram (or an ACK left for the
            // program's next verb) waits, and the program is not inside a verb (the lock is
            // free): it stopped receiving (it polled, then spins on memory for data only the
            // thread can receive, as ib_write_lat does), or it is descheduled. Receive now.
            if let Some(mut e) = s.try_lock() {
                yielded = false;
                s.caught(&mut look_ns, now);
                s.progress(&mut e, Origin::Thread);
                continue;
            }
        }
        if let Some(active_until) = active {
            yielded = false;
            // The program progresses by itself (its polls receive, run the timers and
            // transmit): stay off the socket *and the lock* — taking it here would make the
            // polling thread wait on a futex in the middle of a round trip. Look again when it
            // may have stopped polling, or a deferred doorbell is due. Timers need no wake-up
            // meanwhile (deadline 0); a deferred doorbell or a notification request does.
            //
            // The look again is wakeable (a deferred doorbell wakes it, see `arm_doorbell`).
            // While the program keeps polling the looks thin out (x4 each, up to
            // APP_LOOK_MAX_NS): on this machine every wake-up of this thread cost a 64 B
            // ping-pong round trip 30-100 µs (a busy loop loses that much to any wake-up on its
            // CPU), and at one look per 200 µs 10-15% of the round trips did, hence its p99.
            // A program that stops polling waits at most one look interval for the thread.
            s.thread_deadline.store(0, Relaxed);
            s.ctr.thread_sleeps.fetch_add(1, Relaxed);
            let now_ns = now.as_nanos();
            // An ACK left for the program's next verb: look at the end of the 200 µs window,
            // as before the looks thinned out (a program that polls, then computes, would keep
            // its peer waiting for the ACK otherwise).
            let look_end = if s.tx_deferred_pending.load(Relaxed) {
                active_until
            } else {
                active_until.max(now_ns + look_ns)
            };
            let until = look_end.min(next_stat.as_nanos()).max(now_ns + 20_000);
            let short = now_ns < s.short_looks_until.load(Relaxed);
            look_ns = if short {
                APP_ACTIVE_NS
            } else {
                (look_ns * 4).min(APP_LOOK_MAX_NS)
            };
            s.thread_until.store(until, SeqCst);
            // A deferred doorbell: the program's next poll rings it, so the look need not end
            // early for it (a wake-up costs the program more than the doorbell saves), unless
            // this program was caught leaving one unrung. Pairs with `arm_doorbell` (store
            // doorbell_at, then load thread_until): one of the two sees the other's store.
            let until = if short {
                until.min(s.doorbell_at.load(SeqCst))
            } else {
                until
            };
            let w = until.saturating_sub(now_ns).max(10_000);
            let _ = s.waker.wait(Duration::from_nanos(w));
            s.thread_until.store(u64::MAX, SeqCst);
            continue;
        }
        // The program is not progressing by itself: the thread receives, runs the timers and
        // transmits what the program queued (deferred posts). On a shared CPU, a program that
        // polls gets the CPU first: the thread may have been woken by its own post
        // (`arm_doorbell`) or by a datagram its next poll receives.
        program_first!(polling);
        yielded = false;
        look_ns = APP_ACTIVE_NS;
        // Timers (and anything the program queued without transmitting); on a shared CPU also
        // what arrived (the datagram that woke the thread: see below).
        let next_timer = {
            let mut e = s.lock();
            if shares_cpu {
                s.progress(&mut e, Origin::Thread);
            } else {
                s.timers_and_transmit(&mut e, now);
                s.dispatch_events(&mut e);
            }
            e.next_timeout()
        };
        let now = s.now();
        let mut wait_ns =
            next_timer.map_or(u64::MAX, |t| t.as_nanos().saturating_sub(now.as_nanos()));
        wait_ns = wait_ns.min(next_stat.as_nanos().saturating_sub(now.as_nanos()));
        s.thread_deadline
            .store(now.as_nanos().saturating_add(wait_ns), Relaxed);
        s.thread_until
            .store(now.as_nanos().saturating_add(wait_ns), SeqCst);
        // On a shared CPU no spinning while the program polled lately: it may need the CPU
        // (ib_write_lat spins on memory there, waiting for the data this thread just
        // received). For a program that does not poll (a perftest server on its TCP socket:
        // the thread serves its peer alone) the thread spins as before: blocking at once made
        // every READ request of a pinned ib_read_lat wait for a wake-up (typical 8.4 -> 37 µs),
        // and spinning while yielding between looks gave the CPU to a client pinned beside the
        // server for whole time slices (ib_write_bw 4.9 -> 1.2 Gb/s).
        let spin = if shares_cpu && recent {
            Duration::ZERO
        } else {
            s.cfg.spin
        };
        let wait =
            Wait::SpinThenBlock(spin, Some(Duration::from_nanos(wait_ns.min(1_000_000_000))));
        // Wait without receiving, then receive under the lock: a batch received outside it
        // could be handled after a later one the program received inline, and a reordered UC
        // message is a lost message (seen against kernel rxe, whose packets arrive spread out).
        match sock.wait_readable(wait) {
            Ok(false) => {
                s.ctr.thread_sleeps.fetch_add(1, Relaxed);
            }
            Ok(true) if shares_cpu => {
                // A datagram: the next pass receives it, after letting a polling program run
                // first (it may receive it itself), or leaves it to a program that became
                // active meanwhile.
            }
            Ok(true) => {
                let mut e = s.lock();
                s.progress(&mut e, Origin::Thread);
            }
            Err(err) => {
                tracing::debug!(%err, "progress thread recv");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        s.thread_deadline.store(u64::MAX, Relaxed);
        s.thread_until.store(u64::MAX, SeqCst);
    }
    s.write_stats();
}

impl Engine {
    /// The earliest of the NIC's and the connection manager's timers (and the connection
    /// mirror's, on a shared device).
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        let mirror = self.steer.as_ref().and_then(|m| m.mirror_deadline());
        [self.nic.poll_timeout(), self.cm.poll_timeout(), mirror]
            .into_iter()
            .flatten()
            .min()
    }

    /// The connection manager's turn: the MADs QP1 received, its timers, then the MADs it
    /// sends go to QP1's send queue (transmitted with the rest).
    pub(super) fn run_cm(&mut self, now: Instant) {
        while let Some(m) = self.nic.poll_mad() {
            self.cm.handle_mad(
                now,
                &roce_cm::MadIn {
                    src: m.src_ip,
                    dst: m.dst_ip,
                    flow_label: m.flow_label,
                    traffic_class: m.traffic_class,
                    hop_limit: m.hop_limit,
                    bytes: &m.bytes,
                },
            );
        }
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        while let Some(out) = self.cm.poll_transmit() {
            let path = roce_emu::gsi::GsiPath {
                src_ip: out.src,
                dst_ip: out.dst,
                traffic_class: 0,
                hop_limit: 64,
                flow_label: 0,
            };
            self.nic.send_mad(path, roce_wire::mad::GSI_QPN, &out.bytes);
        }
        // a shared device's helper keeps what each connection's destroy would send
        if let Some(m) = self.steer.as_mut() {
            m.mirror(&mut self.cm, now);
        }
    }
}
