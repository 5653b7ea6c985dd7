//! The device runtime: one [`emu::Nic`](roce_emu::Nic) driven over one UDP socket
//! ([`crate::udp::Socket`] on `IP:4791`).
//!
//! # Progress
//!
//! *Progress* = receive a batch (non-blocking `recvmmsg`, GRO) → `handle_datagram` each →
//! `handle_timeout` when due → drain `poll_transmit` into a [`TxBatch`](crate::udp::coalesce::TxBatch)
//! (GSO runs, ICRC patched for the real IPv4 ID and source port) → flush → hand completion-channel
//! and async events to their handlers. It runs:
//!
//! * **inline, in the caller's thread**, where that is cheapest: [`Device::post_send`] transmits
//!   at once; [`Device::poll_cq`] progresses when the CQ is empty. A busy-polling program
//!   (perftest, ping-pong without `-e`) drives everything itself, with no thread hand-off;
//! * in **one background progress thread per device**, which spins briefly ([`Config::spin`])
//!   after activity and then blocks on the socket (with a [`Waker`](crate::udp::Waker)) until
//!   the next datagram or the engine's next timeout, so retransmission and RNR timers and
//!   event-driven programs (completion channels, `ibv_rc_pingpong -e`) work when nobody polls.
//!   While the program itself progresses (it polled within the last 200 µs) the thread touches
//!   neither the socket nor the engine lock (the program's polls run the timers); it only wakes
//!   to see whether the program stopped polling, so it never competes for packets or the lock.
//!
//! Transmit bursts send plain RC ACKs last (see `AckQueue`): a reply SEND and the ACK of the
//! SEND it answers leave as one GSO datagram.
//!
//! The engine lives behind one mutex; every entry point takes it for a short time. Packets are
//! never handed between threads: whoever received them processes them.
//!
//! Virtual time ([`roce_emu::Instant`]) is monotonic nanoseconds since the device was opened.
//!
//! # Settings (environment, read by [`Config::from_env`])
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `ROCE_IP` | `127.0.0.1` | the NIC's address (IPv4 or IPv6), socket `IP:4791` |
//! | `ROCE_DEV_NAME` | `rxe0` | device name (statistics file, `roce stat`) |
//! | `ROCE_MTU` | `1024` | active IB MTU: 256, 512, 1024, 2048, 4096 |
//! | `ROCE_LOG` | unset | `tracing` filter (`debug`, `roce_emu=trace`, …) printed on stderr |
//! | `ROCE_PCAP` | unset | write every datagram sent and received to this pcap (Ethernet/IP/UDP) |
//! | `ROCE_LOSS` | `0` | fault injector: drop this fraction (`0.02` or `2%`) of outgoing datagrams |
//! | `ROCE_REORDER` | `0` | fault injector: hold this fraction back and send it after the next one |
//! | `ROCE_FAULT_SEED` | fixed | seed of the injector |
//! | `ROCE_FAULT_ALL` | unset | `1`: inject faults into UC/UD too (default RC only: the unreliable transports have no recovery, so their tools would hang) |
//! | `ROCE_FAULT_ACKS` | unset | `1`: also drop/reorder plain RC ACK/NAK packets (default off: a lost *final* ACK leaves the peer retrying forever once the other program exited, `retry_cnt = 7` being infinite as in rxe) |
//! | `ROCE_ICRC_POLICY` | `assume-zero` | `strict`, `assume-zero`, `trust`, `recover` ([`crate::udp::IcrcPolicy`]) |
//! | `ROCE_SPIN_US` | `50` | how long the progress thread spins after activity |
//! | `ROCE_PROGRESS_THREAD` | `1` | `0` disables the background thread (then only inline progress) |
//! | `ROCE_STAT_DIR` | `$XDG_RUNTIME_DIR/roce` or `/tmp/roce-<uid>` | where counters are written for `roce stat` |
//! | `ROCE_QUIET` | unset | `1`: the diagnostics (one per QP and classic verbs mistake, see `roce_emu::diag`) go to `tracing` only, not to stderr; `roce stat` counts them (`diag_*`) either way |
//!
//! # Using it (the API other layers build on)
//!
//! ```no_run
//! use roce_provider::runtime::{Config, Device};
//! let dev = Device::open(Config::new("127.0.0.1".parse().unwrap())).unwrap();
//! let pd = dev.with_nic(|nic| nic.alloc_pd()).unwrap();
//! // create CQs/QPs/MRs with `with_nic`, then on the data path:
//! // dev.post_send(qpn, &wr, inline)?;  dev.post_recv(qpn, &wr)?;  dev.poll_cq(cq, &mut wcs);
//! // dev.set_comp_handler(cq, Some(Arc::new(|| …)));  dev.set_async_handler(Some(Arc::new(|ev| …)));
//! # let _ = pd;
//! ```
//!
//! Handlers run with the engine lock held: they must not call back into the [`Device`].

mod config;
mod fault;
pub mod stat;

pub use config::{default_stat_dir, Config};
pub use fault::{Fault, FaultVerdict};

use crate::udp::coalesce::{TxBatch, TxMeta};
use crate::udp::headers::patch_icrc_udp_sport;
use crate::udp::{IcrcCounters, IcrcVerdict, RecvBatch, Socket, SocketConfig, Wait, Waker};
use roce_emu::sim::{PacketSink, PcapSink};
use roce_emu::{AsyncEvent, Cq, Instant, Nic, NicConfig, RxMeta, WorkCompletion};
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Called when an armed CQ gets a completion (`ibv_req_notify_cq` → completion-channel event).
pub type CompHandler = Arc<dyn Fn() + Send + Sync>;
/// Called for each asynchronous event of the device.
pub type AsyncHandler = Arc<dyn Fn(AsyncEvent) + Send + Sync>;

/// Largest datagram the engine writes (BTH..ICRC for a 4096-byte MTU plus headers).
const MAX_PACKET: usize = 4096 + 64;
/// The program counts as "progressing by itself" this long after its last inline progress.
const APP_ACTIVE_NS: u64 = 200_000;

/// Runtime counters (datapath side; the engine's are in [`roce_emu::Counters`]).
#[derive(Debug, Default)]
pub struct RuntimeCounters {
    /// UDP datagrams sent (after the fault injector).
    pub tx_datagrams: AtomicU64,
    /// UDP payload bytes sent.
    pub tx_bytes: AtomicU64,
    /// Send system-call batches (flushes that sent something).
    pub tx_flushes: AtomicU64,
    /// Datagrams lost because the socket refused them (send errors, full buffer).
    pub tx_errors: AtomicU64,
    /// Datagrams received.
    pub rx_datagrams: AtomicU64,
    /// UDP payload bytes received.
    pub rx_bytes: AtomicU64,
    /// Receive batches (`recvmmsg` calls that returned data).
    pub rx_batches: AtomicU64,
    /// Received datagrams that were truncated or not for us.
    pub rx_dropped: AtomicU64,
    /// Kernel receive-queue drops (`SO_RXQ_OVFL`, cumulative).
    pub rx_kernel_drops: AtomicU64,
    /// Fault injector: datagrams dropped.
    pub fault_dropped: AtomicU64,
    /// Fault injector: datagrams held back and sent late.
    pub fault_reordered: AtomicU64,
    /// Progress runs in the program's threads.
    pub progress_inline: AtomicU64,
    /// Progress runs in the background thread.
    pub progress_thread: AtomicU64,
    /// Times the background thread blocked (went to sleep).
    pub thread_sleeps: AtomicU64,
    /// Polls that returned completions before transmitting what the engine queued.
    pub tx_deferred: AtomicU64,
    /// Positive ACKs not sent because a later ACK of the same QP in the same transmit burst
    /// covers them (ACK coalescing).
    pub tx_acks_coalesced: AtomicU64,
    /// Completion-channel events delivered.
    pub comp_events: AtomicU64,
    /// Async events delivered.
    pub async_events: AtomicU64,
    /// pcap records that could not be written.
    pub pcap_errors: AtomicU64,
}

impl RuntimeCounters {
    /// `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        [
            ("tx_datagrams", &self.tx_datagrams),
            ("tx_bytes", &self.tx_bytes),
            ("tx_flushes", &self.tx_flushes),
            ("tx_errors", &self.tx_errors),
            ("rx_datagrams", &self.rx_datagrams),
            ("rx_bytes", &self.rx_bytes),
            ("rx_batches", &self.rx_batches),
            ("rx_dropped", &self.rx_dropped),
            ("rx_kernel_drops", &self.rx_kernel_drops),
            ("fault_dropped", &self.fault_dropped),
            ("fault_reordered", &self.fault_reordered),
            ("progress_inline", &self.progress_inline),
            ("progress_thread", &self.progress_thread),
            ("thread_sleeps", &self.thread_sleeps),
            ("tx_deferred", &self.tx_deferred),
            ("tx_acks_coalesced", &self.tx_acks_coalesced),
            ("comp_events", &self.comp_events),
            ("async_events", &self.async_events),
            ("pcap_errors", &self.pcap_errors),
        ]
        .into_iter()
        .map(|(n, v)| (n, v.load(Relaxed)))
    }
}

/// A snapshot of every counter of a device, for `roce stat`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// `(name, value)` in a stable order: engine (rxe names first), ICRC, runtime.
    pub counters: Vec<(String, u64)>,
}

/// Who runs a progress pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The program, polling a CQ (or calling `progress`).
    Poll,
    /// The program, posting work.
    Post,
    /// The background thread.
    Thread,
}

/// Everything behind the engine lock.
struct Engine {
    nic: Nic,
    sock: Socket,
    tx: TxBatch,
    /// `None` only while a receive pass has it out (see `receive`).
    rx: Option<Box<RecvBatch>>,
    fault: Fault,
    held: Option<(Vec<u8>, TxMeta)>,
    /// ACKs (and responder packets queued behind them) held to the end of a transmit burst.
    acks: AckQueue,
    pcap: Option<PcapSink<io::BufWriter<std::fs::File>>>,
    pcap_buf: Vec<u8>,
    comp: HashMap<Cq, CompHandler>,
    async_handler: Option<AsyncHandler>,
    /// A poll returned completions before transmitting what the engine had queued.
    tx_deferred: bool,
}

struct Shared {
    cfg: Config,
    start: std::time::Instant,
    engine: Mutex<Engine>,
    waker: Arc<Waker>,
    stop: AtomicBool,
    /// Virtual time of the program's last inline progress.
    app_last: AtomicU64,
    /// Virtual time until which the background thread sleeps (u64::MAX: not sleeping on a timer).
    thread_deadline: AtomicU64,
    ctr: RuntimeCounters,
    icrc: IcrcCounters,
    stat_path: Option<std::path::PathBuf>,
    /// `ROCE_QUIET=1`: diagnostics go to `tracing` only, not to stderr.
    quiet: bool,
}

/// One emulated RoCE device: the engine, its UDP socket and its progress thread. Cheap to share
/// with `Arc`; dropping the last handle stops the thread and closes the socket.
pub struct Device {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("ip", &self.shared.cfg.ip)
            .field("name", &self.shared.cfg.name)
            .finish()
    }
}

/// Installs the `ROCE_LOG` tracing filter once per process (no-op when unset or when the
/// program already installed a subscriber).
pub fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(f) = std::env::var("ROCE_LOG") {
            if let Ok(filter) = tracing_subscriber::EnvFilter::try_new(f) {
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(io::stderr)
                    .try_init();
            }
        }
    });
}

impl Device {
    /// Binds `cfg.ip:4791`, creates the engine and starts the progress thread.
    pub fn open(cfg: Config) -> io::Result<Device> {
        init_logging();
        let mut ncfg = NicConfig::new(cfg.ip);
        ncfg.netdev_mtu = cfg.netdev_mtu();
        // The driver checks ICRCs (it knows the GRO segment index and the policy); the engine
        // is told "unknown IPv4 ID" so it does not compute the CRC a second time.
        ncfg.icrc_policy = roce_emu::IcrcPolicy::Skip;
        ncfg.seed = std::process::id() as u64 ^ 0x5eed_0000_0000 ^ (cfg.fault_seed << 20);
        let nic = Nic::new(ncfg);
        let sock = Socket::bind(cfg.ip, SocketConfig::default()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "roce: cannot bind UDP {}:{}: {e}",
                    cfg.ip,
                    roce_wire::ROCE_V2_UDP_PORT
                ),
            )
        })?;
        let pcap = match &cfg.pcap {
            Some(p) => Some(
                PcapSink::create(p)
                    .map_err(|e| io::Error::other(format!("roce: pcap {}: {e}", p.display())))?,
            ),
            None => None,
        };
        let waker = Arc::new(Waker::new()?);
        let stat_path = stat::stat_path(&cfg);
        let engine = Engine {
            nic,
            tx: TxBatch::new(16, MAX_PACKET),
            rx: Some(Box::new(RecvBatch::new(16))),
            fault: Fault::new(cfg.loss, cfg.reorder, cfg.fault_seed, cfg.fault_all)
                .with_acks(cfg.fault_acks),
            held: None,
            acks: AckQueue::new(),
            pcap,
            pcap_buf: vec![0; MAX_PACKET],
            comp: HashMap::new(),
            async_handler: None,
            tx_deferred: false,
            sock,
        };
        let shared = Arc::new(Shared {
            start: std::time::Instant::now(),
            engine: Mutex::new(engine),
            waker,
            stop: AtomicBool::new(false),
            app_last: AtomicU64::new(0),
            thread_deadline: AtomicU64::new(u64::MAX),
            ctr: RuntimeCounters::default(),
            icrc: IcrcCounters::default(),
            stat_path,
            quiet: std::env::var_os("ROCE_QUIET").is_some_and(|v| v == "1"),
            cfg,
        });
        register_for_exit(&shared);
        let thread = if shared.cfg.progress_thread {
            let mut rsock = shared.lock().sock.try_clone()?;
            rsock.set_waker(Some(shared.waker.clone()));
            let s = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name(format!("roce-{}", shared.cfg.name))
                    .spawn(move || progress_thread(s, rsock))?,
            )
        } else {
            None
        };
        tracing::debug!(ip = %shared.cfg.ip, mtu = shared.cfg.mtu, "roce device open");
        Ok(Device { shared, thread })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// The device's IP address.
    pub fn ip(&self) -> IpAddr {
        self.shared.cfg.ip
    }

    /// Current virtual time (ns since [`Device::open`]).
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// Runs `f` on the engine (object creation, queries, modify_qp, …), then transmits whatever
    /// it queued. The lock is held during `f`: do not call back into the device from it.
    pub fn with_nic<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        let mut e = self.shared.lock();
        let now = self.shared.now();
        if e.tx_deferred {
            // Before e.g. destroy_qp: a deferred final ACK must leave first.
            self.shared.transmit(&mut e, now);
        }
        let r = f(&mut e.nic);
        self.shared.transmit(&mut e, now);
        self.shared.dispatch_events(&mut e);
        drop(e);
        r
    }

    /// `ibv_post_send` of one WR and an immediate transmit (inline progress).
    pub fn post_send(
        &self,
        qpn: u32,
        wr: &roce_emu::SendWr<'_>,
        inline: Option<&[u8]>,
    ) -> roce_emu::Result<()> {
        let mut e = self.shared.lock();
        e.nic.post_send_inline(qpn, wr, inline)?;
        self.shared.progress(&mut e, Origin::Post);
        Ok(())
    }

    /// Posts several send WRs with one transmit at the end; returns how many were posted and
    /// the error that stopped the list, if any.
    pub fn post_send_list<'a>(
        &self,
        qpn: u32,
        wrs: impl IntoIterator<Item = (roce_emu::SendWr<'a>, Option<&'a [u8]>)>,
    ) -> (usize, roce_emu::Result<()>) {
        let mut e = self.shared.lock();
        let mut n = 0;
        let mut res = Ok(());
        for (wr, inline) in wrs {
            if let Err(err) = e.nic.post_send_inline(qpn, &wr, inline) {
                res = Err(err);
                break;
            }
            n += 1;
        }
        self.shared.progress(&mut e, Origin::Post);
        (n, res)
    }

    /// `ibv_post_recv` (no transmit needed; an RNR-waiting peer retries by itself).
    pub fn post_recv(&self, qpn: u32, wr: &roce_emu::RecvWr<'_>) -> roce_emu::Result<()> {
        self.shared.lock().nic.post_recv(qpn, wr)
    }

    /// `ibv_post_srq_recv`.
    pub fn post_srq_recv(
        &self,
        srq: roce_emu::Srq,
        wr: &roce_emu::RecvWr<'_>,
    ) -> roce_emu::Result<()> {
        self.shared.lock().nic.post_srq_recv(srq, wr)
    }

    /// `ibv_poll_cq`: returns completions; when the CQ is empty, progresses (receive, timers,
    /// transmit) in the caller's thread and looks again.
    pub fn poll_cq(&self, cq: Cq, wc: &mut [WorkCompletion]) -> usize {
        let mut e = self.shared.lock();
        let n = e.nic.poll_cq(cq, wc);
        if n > 0 || wc.is_empty() {
            return n;
        }
        let sh = &self.shared;
        let now = sh.now();
        sh.app_last.store(now.as_nanos().max(1), Relaxed);
        sh.ctr.progress_inline.fetch_add(1, Relaxed);
        if sh.receive(&mut e, now) > 0 {
            let n = e.nic.poll_cq(cq, wc);
            if n > 0 {
                // Hand the completions over first; what the engine queued (ACKs, responses)
                // goes out at the program's next post or poll, or within 200 µs from
                // the progress thread: one system call less on the latency path.
                sh.dispatch_events(&mut e);
                sh.ctr.tx_deferred.fetch_add(1, Relaxed);
                e.tx_deferred = true;
                return n;
            }
        }
        sh.finish(&mut e, now, true);
        e.nic.poll_cq(cq, wc)
    }

    /// One inline progress run (receive, timers, transmit, events); returns the datagrams moved.
    pub fn progress(&self) -> usize {
        let mut e = self.shared.lock();
        self.shared.progress(&mut e, Origin::Poll)
    }

    /// `ibv_req_notify_cq`: arms `cq`; the next (solicited) completion calls its comp handler.
    pub fn req_notify_cq(&self, cq: Cq, solicited_only: bool) -> roce_emu::Result<()> {
        self.shared.lock().nic.req_notify_cq(cq, solicited_only)
    }

    /// Sets (or clears) the handler called when `cq` produces a completion-channel event.
    pub fn set_comp_handler(&self, cq: Cq, h: Option<CompHandler>) {
        let mut e = self.shared.lock();
        match h {
            Some(h) => {
                e.comp.insert(cq, h);
            }
            None => {
                e.comp.remove(&cq);
            }
        }
    }

    /// Sets (or clears) the handler of asynchronous events (QP errors, CQ overflow, SRQ limit).
    pub fn set_async_handler(&self, h: Option<AsyncHandler>) {
        self.shared.lock().async_handler = h;
    }

    /// Runtime counters (datapath).
    pub fn runtime_counters(&self) -> &RuntimeCounters {
        &self.shared.ctr
    }

    /// Every counter: engine, ICRC, runtime.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Writes the statistics file now (the progress thread does it every
    /// [`Config::stat_interval`] too). Returns its path.
    pub fn write_stats(&self) -> Option<std::path::PathBuf> {
        self.shared.write_stats();
        self.shared.stat_path.clone()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut e = self.shared.lock();
        let now = self.shared.now();
        self.shared.transmit(&mut e, now);
        self.shared.report_diagnostics(&mut e);
        if let Some(p) = e.pcap.take() {
            let _ = p.finish();
        }
        drop(e);
        if let Some(p) = &self.shared.stat_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Receive (engine socket, non-blocking) → timers → transmit → events.
    fn progress(&self, e: &mut Engine, from: Origin) -> usize {
        let now = self.now();
        let inline = from != Origin::Thread;
        match from {
            // Only a program that polls its CQs progresses while it waits; one that spins on
            // memory (ib_write_lat) and only posts needs the thread to watch the socket.
            Origin::Poll => {
                self.app_last.store(now.as_nanos().max(1), Relaxed);
                self.ctr.progress_inline.fetch_add(1, Relaxed);
            }
            Origin::Post => {
                self.ctr.progress_inline.fetch_add(1, Relaxed);
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
        moved
    }

    /// Receives and handles up to a few batches (so a flood cannot starve the caller).
    fn receive(&self, e: &mut Engine, now: Instant) -> usize {
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
    fn finish(&self, e: &mut Engine, now: Instant, inline: bool) -> usize {
        let moved = self.timers_and_transmit(e, now);
        self.dispatch_events(e);
        if inline {
            // A timer armed earlier than the sleeping thread's deadline: wake it to re-plan.
            if let Some(t) = e.nic.poll_timeout() {
                if t.as_nanos() < self.thread_deadline.load(Relaxed) {
                    self.thread_deadline.store(t.as_nanos(), Relaxed);
                    self.waker.wake();
                }
            }
        }
        moved
    }

    fn timers_and_transmit(&self, e: &mut Engine, now: Instant) -> usize {
        if e.nic.poll_timeout().is_some_and(|t| t <= now) {
            e.nic.handle_timeout(now);
        }
        self.transmit(e, now)
    }

    /// Feeds every datagram of `rx` to the engine, after the ICRC check.
    ///
    /// Between GRO buffers (one GSO send of the peer each, typically a message) it transmits
    /// what the engine queued, so ACKs leave while the rest of the batch is handled and the
    /// sender's 128-PSN window keeps moving.
    fn handle_batch(&self, e: &mut Engine, rx: &RecvBatch, now: Instant) {
        self.ctr.rx_batches.fetch_add(1, Relaxed);
        if let Some(d) = rx.drops() {
            self.ctr.rx_kernel_drops.fetch_max(d as u64, Relaxed);
        }
        let policy = self.cfg.icrc_policy;
        let mut seen = false;
        for d in rx.iter() {
            if d.gro_index == 0 && seen {
                self.transmit(e, now);
            }
            seen = true;
            self.ctr.rx_datagrams.fetch_add(1, Relaxed);
            self.ctr.rx_bytes.fetch_add(d.payload.len() as u64, Relaxed);
            if d.truncated {
                self.ctr.rx_dropped.fetch_add(1, Relaxed);
                continue;
            }
            let v4 = d.src.is_ipv4();
            // IPv6: the engine verifies exactly (no ID); IPv4: the driver knows the GRO index.
            let id = if v4 {
                match d.check_icrc(policy, &self.icrc) {
                    IcrcVerdict::Bad => continue,
                    IcrcVerdict::Verified => {
                        Some(crate::udp::headers::gso_segment_ip_id(d.gro_index as usize))
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
        }
    }

    /// Drains `poll_transmit` into the TxBatch (fault injector, pcap) and flushes it.
    fn transmit(&self, e: &mut Engine, now: Instant) -> usize {
        e.tx_deferred = false;
        let mut total = 0;
        loop {
            let Engine {
                nic,
                sock,
                tx,
                fault,
                held,
                acks,
                pcap,
                pcap_buf,
                ..
            } = e;
            let mut produced = 0;
            while let Some(space) = tx.space() {
                let Some(t) = nic.poll_transmit(now, space) else {
                    break;
                };
                produced += 1;
                let meta = TxMeta {
                    dst: t.dst_ip,
                    dst_port: t.dst_port,
                    src_port: t.src_port,
                    tos: Some(t.tos),
                    ttl: Some(t.ttl),
                };
                if let Some(p) = pcap.as_mut() {
                    // As it leaves: the real source port (ICRC patched to match), ID 0.
                    let wire = sock.source_port(t.src_port);
                    let b = &mut pcap_buf[..t.len];
                    b.copy_from_slice(&space[..t.len]);
                    if wire != t.src_port {
                        patch_icrc_udp_sport(b, t.dst_ip.is_ipv6(), t.src_port, wire);
                    }
                    let m = RxMeta {
                        src_ip: t.src_ip,
                        dst_ip: t.dst_ip,
                        src_port: wire,
                        ipv4_id: Some(0),
                        tos: t.tos,
                        ttl: t.ttl,
                        flow_label: t.flow_label,
                    };
                    let before = p.errors;
                    p.packet_meta(now, &m, b);
                    if p.errors != before {
                        self.ctr.pcap_errors.fetch_add(1, Relaxed);
                    }
                }
                match fault.decide(&space[..t.len]) {
                    FaultVerdict::Pass => {
                        match acks.offer(&space[..t.len], meta) {
                            Offer::Commit => {
                                tx.commit(sock, meta, t.len);
                                self.count_tx(t.len);
                            }
                            Offer::Held => {}
                            Offer::Coalesced => {
                                self.ctr.tx_acks_coalesced.fetch_add(1, Relaxed);
                            }
                            Offer::Full => {
                                // Keep the order: what is held, then this packet.
                                acks.save(&space[..t.len], meta);
                                self.commit_acks(tx, sock, acks);
                            }
                        }
                        if let Some((b, m)) = held.take() {
                            Self::commit_copy(tx, sock, &b, m);
                            self.count_tx(b.len());
                        }
                    }
                    FaultVerdict::Drop => {
                        self.ctr.fault_dropped.fetch_add(1, Relaxed);
                    }
                    FaultVerdict::Hold => {
                        if held.is_none() {
                            *held = Some((space[..t.len].to_vec(), meta));
                            self.ctr.fault_reordered.fetch_add(1, Relaxed);
                        } else {
                            tx.commit(sock, meta, t.len);
                            self.count_tx(t.len);
                        }
                    }
                }
            }
            // A held datagram leaves at the end of the burst at the latest.
            if let Some((b, m)) = held.take() {
                Self::commit_copy(tx, sock, &b, m);
                self.count_tx(b.len());
            }
            // ACKs go last, behind this burst's requests: an ACK that follows a SEND of the
            // same QP joins its GSO run (one datagram through the kernel instead of two), and
            // the peer handles the request before the ACK.
            self.commit_acks(tx, sock, acks);
            total += produced;
            if tx.is_empty() {
                break;
            }
            let n = tx.len();
            match tx.flush(sock, Wait::Block(Some(Duration::from_millis(20)))) {
                Ok(sent) => {
                    self.ctr.tx_flushes.fetch_add(1, Relaxed);
                    if sent < n {
                        self.ctr.tx_errors.fetch_add((n - sent) as u64, Relaxed);
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, "flush");
                    self.ctr.tx_errors.fetch_add(n as u64, Relaxed);
                }
            }
            if produced == 0 {
                break;
            }
        }
        total
    }

    /// Commits every packet `acks` holds (then the saved one, if any), in order.
    fn commit_acks(&self, tx: &mut TxBatch, sock: &mut Socket, acks: &mut AckQueue) {
        for (b, m) in acks.drain() {
            Self::commit_copy(tx, sock, b, m);
            self.count_tx(b.len());
        }
        acks.clear();
    }

    fn commit_copy(tx: &mut TxBatch, sock: &mut Socket, b: &[u8], m: TxMeta) {
        if tx.space().is_none() {
            let _ = tx.flush(sock, Wait::Block(Some(Duration::from_millis(20))));
        }
        if let Some(space) = tx.space() {
            space[..b.len()].copy_from_slice(b);
            tx.commit(sock, m, b.len());
        }
    }

    fn count_tx(&self, len: usize) {
        self.ctr.tx_datagrams.fetch_add(1, Relaxed);
        self.ctr.tx_bytes.fetch_add(len as u64, Relaxed);
    }

    /// Reports the engine's diagnostics (once per QP and cause): a `tracing` warning and, unless
    /// `ROCE_QUIET=1`, one `roce: QP 0x..: what happened. What to do.` line on stderr.
    fn report_diagnostics(&self, e: &mut Engine) {
        while let Some((qpn, d)) = e.nic.poll_diagnostic() {
            let msg = d.message(qpn);
            tracing::warn!(qpn, cause = d.counter(), "{msg}");
            if !self.quiet {
                use std::io::Write as _;
                let _ = writeln!(io::stderr(), "roce: {msg}");
            }
        }
    }

    fn dispatch_events(&self, e: &mut Engine) {
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
    }

    fn stats(&self) -> Stats {
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

    fn write_stats(&self) {
        if let Some(p) = &self.stat_path {
            let _ = stat::write(p, &self.cfg, &self.stats());
        }
    }
}

/// Plain RC ACKs held back to the end of a transmit burst (see [`Shared::transmit`]).
///
/// The engine produces a QP's responder packets before its requester packets, so the ACK of a
/// SEND just received would precede the reply SEND in the same burst. The reply is what the peer
/// waits for: sent first, with the ACK behind it, the two form one GSO run when they share QP
/// and destination (one datagram through the kernel instead of two, one `recvmmsg` at the peer),
/// and the peer's engine sees the request first. Only ordering *within one burst* changes, and
/// only of ACKs relative to requests (independent streams in IBA); the responder's own stream
/// keeps its order: once an ACK is held, later responder packets (read responses, atomic ACKs)
/// are held behind it. Nothing is delayed past the burst, so no timer can see a difference.
struct AckQueue {
    /// Copies of the held packets, back to back.
    arena: Vec<u8>,
    /// `(offset, length, meta)` of each held packet, in order.
    held: Vec<(usize, usize, TxMeta)>,
    /// Room for the held packets in `arena`.
    cap: usize,
}

/// What [`AckQueue::offer`] decided.
enum Offer {
    /// Not held: commit it now.
    Commit,
    /// Held (copied).
    Held,
    /// It must be held but there is no room: [`AckQueue::save`] it and commit everything.
    Full,
    /// It replaced the ACK held just before it (same QP, covers it).
    Coalesced,
}

/// A positive RC ACK: opcode ACKNOWLEDGE, AETH syndrome `000` (not a NAK or an RNR NAK), no
/// payload (BTH 12 + AETH 4 + ICRC 4).
fn is_plain_ack(p: &[u8]) -> bool {
    p.len() == 20 && p[0] == OP_RC_ACK && p[12] >> 5 == 0
}

/// The BTH PSN of `a` is at or after that of `b` (24-bit serial arithmetic).
fn psn_ge(a: &[u8], b: &[u8]) -> bool {
    let psn = |p: &[u8]| u32::from_be_bytes([0, p[9], p[10], p[11]]);
    psn(a).wrapping_sub(psn(b)) & 0xFF_FFFF < 0x80_0000
}

/// RC ACKNOWLEDGE (BTH opcode of a plain ACK or NAK).
const OP_RC_ACK: u8 = 0x11;

impl AckQueue {
    fn new() -> AckQueue {
        let cap = 16 << 10;
        AckQueue {
            arena: Vec::with_capacity(cap + MAX_PACKET),
            held: Vec::with_capacity(64),
            cap,
        }
    }

    /// Holds `p` when it is an RC ACK, or an RC responder packet behind a held ACK.
    fn offer(&mut self, p: &[u8], meta: TxMeta) -> Offer {
        let op = p.first().copied().unwrap_or(0);
        // RC responses: READ response first/middle/last/only 0x0D..=0x10, ACK 0x11, atomic ACK 0x12.
        let hold = op == OP_RC_ACK || (!self.held.is_empty() && (0x0D..=0x12).contains(&op));
        if !hold {
            return Offer::Commit;
        }
        // A positive ACK right behind another one to the same QP, same burst: the later one
        // acknowledges everything the earlier did (PSN and MSN only grow, its credits are the
        // newer), so it takes the earlier one's place — ACK coalescing as IBA allows it (one
        // ACK for several requests; rxe and the engine complete every WQE up to its PSN).
        if is_plain_ack(p) {
            if let Some(&(o, l, m)) = self.held.last() {
                let prev = &self.arena[o..o + l];
                if m == meta && is_plain_ack(prev) && prev[5..8] == p[5..8] && psn_ge(p, prev) {
                    self.arena[o..o + l].copy_from_slice(p);
                    return Offer::Coalesced;
                }
            }
        }
        if self.arena.len() + p.len() > self.cap || self.held.len() == self.held.capacity() {
            return Offer::Full;
        }
        self.save(p, meta);
        Offer::Held
    }

    /// Appends `p` unconditionally (the arena has `MAX_PACKET` of slack past `cap`).
    fn save(&mut self, p: &[u8], meta: TxMeta) {
        let off = self.arena.len();
        self.arena.extend_from_slice(p);
        self.held.push((off, p.len(), meta));
    }

    fn drain(&self) -> impl Iterator<Item = (&[u8], TxMeta)> + '_ {
        self.held
            .iter()
            .map(|&(o, l, m)| (&self.arena[o..o + l], m))
    }

    fn clear(&mut self) {
        self.arena.clear();
        self.held.clear();
    }
}

/// Devices of this process, for [`flush_at_exit`].
static LIVE: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

fn register_for_exit(s: &Arc<Shared>) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn()` that lives as long as the program (it is
        // in this library, which is never unloaded: libibverbs is not dlclose'd by programs).
        unsafe { libc::atexit(flush_at_exit) };
    });
    let mut l = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    l.retain(|w| w.strong_count() > 0);
    l.push(Arc::downgrade(s));
}

/// At process exit: transmit whatever the engines still hold (a deferred final ACK would
/// otherwise leave the peer retrying forever). Never blocks for long on a busy lock.
extern "C" fn flush_at_exit() {
    let l = match LIVE.try_lock() {
        Ok(l) => l.clone(),
        Err(_) => return,
    };
    for s in l.iter().filter_map(|w| w.upgrade()) {
        for _ in 0..100 {
            if let Ok(mut e) = s.engine.try_lock() {
                let now = s.now();
                s.transmit(&mut e, now);
                s.report_diagnostics(&mut e);
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// The background progress thread (see the module docs).
fn progress_thread(s: Arc<Shared>, mut sock: Socket) {
    let mut next_stat = s.now();
    let stat_every = s.cfg.stat_interval.as_nanos() as u64;
    while !s.stop.load(Relaxed) {
        let now = s.now();
        if now >= next_stat {
            s.write_stats();
            next_stat = now.add_nanos(stat_every);
        }
        let app_last = s.app_last.load(Relaxed);
        if app_last != 0 && now.as_nanos().saturating_sub(app_last) < APP_ACTIVE_NS {
            // The program progresses by itself (its polls receive, run the timers and
            // transmit): stay off the socket *and the lock* — taking it here would make the
            // polling thread wait on a futex in the middle of a round trip. Look again when it
            // may have stopped polling. No wake-up is needed meanwhile (deadline 0).
            s.thread_deadline.store(0, Relaxed);
            s.ctr.thread_sleeps.fetch_add(1, Relaxed);
            let until = (app_last + APP_ACTIVE_NS).min(next_stat.as_nanos());
            let w = until.saturating_sub(now.as_nanos());
            std::thread::sleep(Duration::from_nanos(w.max(50_000)));
            continue;
        }
        // Timers (and anything the program queued without transmitting).
        let next_timer = {
            let mut e = s.lock();
            s.timers_and_transmit(&mut e, now);
            s.dispatch_events(&mut e);
            e.nic.poll_timeout()
        };
        let now = s.now();
        let mut wait_ns =
            next_timer.map_or(u64::MAX, |t| t.as_nanos().saturating_sub(now.as_nanos()));
        wait_ns = wait_ns.min(next_stat.as_nanos().saturating_sub(now.as_nanos()));
        s.thread_deadline
            .store(now.as_nanos().saturating_add(wait_ns), Relaxed);
        let wait = Wait::SpinThenBlock(
            s.cfg.spin,
            Some(Duration::from_nanos(wait_ns.min(1_000_000_000))),
        );
        // Wait without receiving, then receive under the lock: a batch received outside it
        // could be handled after a later one the program received inline, and a reordered UC
        // message is a lost message (seen against kernel rxe, whose packets arrive spread out).
        match sock.wait_readable(wait) {
            Ok(false) => {
                s.ctr.thread_sleeps.fetch_add(1, Relaxed);
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
    }
    s.write_stats();
}
