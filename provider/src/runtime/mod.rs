//! The device runtime: one [`emu::Nic`](roce_emu::Nic) driven over one UDP socket
//! ([`roce_udp::Socket`] on `IP:4791`).
//!
//! # Progress
//!
//! *Progress* = receive a batch (non-blocking `recvmmsg`, GRO) → `handle_datagram` each →
//! `handle_timeout` when due → drain `poll_transmit` into a [`TxBatch`](roce_udp::coalesce::TxBatch)
//! (GSO runs, ICRC patched for the real IPv4 ID and source port) → flush → hand completion-channel
//! and async events to their handlers. It runs:
//!
//! * **inline, in the caller's thread**, where that is cheapest: [`Device::post_send`] transmits
//!   at once, except a post that directly follows another one, which rings a deferred doorbell
//!   (a burst of one-WR posts leaves in one `sendmmsg`; see `doorbell.rs`); [`Device::poll_cq`]
//!   progresses when the CQ is empty. A busy-polling program (perftest, ping-pong without `-e`)
//!   drives everything itself, with no thread hand-off;
//! * in **one background progress thread per device**, which spins briefly ([`Config::spin`])
//!   after activity and then blocks on the socket (with a [`Waker`](roce_udp::Waker)) until
//!   the next datagram or the engine's next timeout, so retransmission and RNR timers and
//!   event-driven programs (completion channels, `ibv_rc_pingpong -e`) work when nobody polls.
//!   While the program itself progresses (it polled within the last 200 µs) the thread touches
//!   neither the socket nor the engine lock (the program's polls run the timers); it only wakes
//!   to see whether the program stopped polling, or to ring a deferred doorbell, so it never
//!   competes for packets or the lock.
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
//! | `ROCE_ICRC_POLICY` | `recover` | `recover`, `strict`, `assume-zero`, `trust` ([`roce_udp::IcrcPolicy`]) |
//! | `ROCE_SPIN_US` | `50` | how long the progress thread spins after activity |
//! | `ROCE_UNACKED_FLOOR` | `128` | lowest RC limit on unacknowledged PSNs after a loss (emu README, deviation 12; 128 = rxe's fixed limit) |
//! | `ROCE_PROGRESS_THREAD` | `1` | `0` disables the background thread (then only inline progress) |
//! | `ROCE_STAT_DIR` | `$XDG_RUNTIME_DIR/roce` or `/tmp/roce-<uid>` | where counters are written for `roce stat` |
//! | `ROCE_STATS_AT_CLOSE` | unset | `1`: print the nonzero counters (engine, ICRC verdicts, runtime: what `roce stat` shows) on stderr when the device closes |
//! | `ROCE_SHARED` | unset | `1`: share the address with other processes through a steering helper (`crate::shared`); `0`: bind `IP:4791` alone |
//! | `ROCE_DIRECT` | `1` | shared device: `0` sends datagrams to processes on this host through their device's helper instead of straight to their sockets (`crate::shared::direct`) |
//! | `ROCE_HELPER` | set by `roce run` | the `roce` executable that runs the steering helper (else the one next to the drop-in library) |
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

mod cm_ports;
mod config;
mod device;
mod doorbell;
#[cfg(test)]
mod doorbell_tests;
mod fault;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod icrc_tests;
#[cfg(test)]
mod look_tests;
#[cfg(test)]
mod loss_tests;
mod progress;
#[cfg(test)]
mod shared_cpu_tests;
pub mod stat;
mod transmit;

pub use config::{default_stat_dir, parse_fraction, Config, DEFAULT_DEV_NAME};
pub use doorbell::{DOORBELL_BURST_NS, DOORBELL_BYTES, DOORBELL_NS, DOORBELL_WRS};
pub use fault::{Fault, FaultVerdict};

use doorbell::Doorbell;
use progress::progress_thread;
use roce_emu::sim::{PacketSink, PcapSink};
use roce_emu::{AsyncEvent, Cq, Instant, Nic, NicConfig, RxMeta, WorkCompletion};
use roce_udp::coalesce::{TxBatch, TxMeta};
use roce_udp::headers::patch_icrc_udp_sport;
use roce_udp::{
    IcrcCounters, IcrcVerdict, RecvBatch, Socket, SocketConfig, SourcePorts, Wait, Waker,
};
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use transmit::AckQueue;

/// Called when an armed CQ gets a completion (`ibv_req_notify_cq` → completion-channel event).
pub type CompHandler = Arc<dyn Fn() + Send + Sync>;
/// Called for each asynchronous event of the device.
pub type AsyncHandler = Arc<dyn Fn(AsyncEvent) + Send + Sync>;
/// Called for each event of the device's connection manager ([`Device::cm`]), with the engine
/// lock held: it must only queue the event, never call back into the device.
pub type CmHandler = Arc<dyn Fn(roce_cm::Event) + Send + Sync>;

/// Largest datagram the engine writes (BTH..ICRC for a 4096-byte MTU plus headers).
const MAX_PACKET: usize = 4096 + 64;
/// The program counts as "progressing by itself" this long after its last inline progress.
const APP_ACTIVE_NS: u64 = 200_000;
/// The longest the progress thread sleeps between two looks at a program that keeps polling
/// (the look interval grows 4x per look from [`APP_ACTIVE_NS`]): each wake-up of a sleeping
/// thread costs a busy-polling program on this class of machine 30-100 µs.
const APP_LOOK_MAX_NS: u64 = 12_800_000;
/// A datagram waiting at a look while the program's last poll is older than this: the program
/// stopped receiving (it spins on memory); the thread takes the socket over at once.
const APP_STALE_NS: u64 = 100_000;
/// After the thread caught the program not receiving, its looks stay at [`APP_ACTIVE_NS`] this
/// long (renewed at each catch): such a program (ib_write_lat) would otherwise wait up to
/// [`APP_LOOK_MAX_NS`] each time. Short, so that a false catch (a program descheduled right
/// after a poll that returned completions, common in bandwidth loops) costs at most this.
const SHORT_LOOKS_NS: u64 = 100_000_000;
/// A deferred doorbell the thread finds this late was left by a program that stopped polling
/// (a woken thread rings it within microseconds of its deadline).
const DOORBELL_LATE_NS: u64 = 100_000;

/// Adds `n` to a counter that only the holder of the engine lock changes (readers anywhere see
/// a value that was current at some moment): a plain load and store, not a locked
/// read-modify-write, which costs ~20 cycles per packet and counter on this class of CPU.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

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
    /// Datagrams that could not leave the host: destination `::` (not sent), or refused by the
    /// kernel for their destination (ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EINVAL, …).
    /// Each QP's first one is explained in a `roce:` line (engine counter `diag_unroutable`).
    pub tx_unroutable: AtomicU64,
    /// Shared device: datagrams sent straight to the socket of the process owning their QP on
    /// this host, not through the steering helper (`crate::shared::direct`).
    pub tx_direct: AtomicU64,
    /// Shared device: datagrams for a QP of a device on this host that no process owns (its
    /// process exited or was killed): dropped, as the steering helper drops them.
    pub tx_no_owner: AtomicU64,
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
    /// Times the background thread caught a program that had been polling not progressing: a
    /// datagram waiting while it stopped polling (it spins on memory; the thread received it
    /// at once), or a deferred doorbell left unrung (the thread rang it at its look). Either
    /// brings the thread's short looks and doorbell wake-ups back for 100 ms (renewed at each catch).
    pub thread_takeovers: AtomicU64,
    /// Times the background thread, pinned to the one CPU the program runs on, let the program
    /// run first (`sched_yield`) before doing work the program might do itself (see
    /// `progress_thread`).
    pub thread_yields: AtomicU64,
    /// Polls that returned completions before transmitting what the engine queued.
    pub tx_deferred: AtomicU64,
    /// Posts whose transmit waited for a later doorbell (see the `doorbell` module).
    pub tx_doorbell_deferred: AtomicU64,
    /// Deferred doorbells the background thread rang (the program neither polled nor posted
    /// enough to ring them itself).
    pub tx_doorbell_thread: AtomicU64,
    /// Positive ACKs not sent because a later ACK of the same QP in the same transmit burst
    /// covers them (ACK coalescing).
    pub tx_acks_coalesced: AtomicU64,
    /// Transmits started inside a receive batch because a request arrived out of sequence
    /// (the PSN-sequence NAK it queued leaves at once).
    pub tx_urgent: AtomicU64,
    /// Receives done between two pieces of a long transmit burst that found something (see
    /// `PIECE_PKTS`).
    pub tx_piece_receives: AtomicU64,
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
            ("tx_unroutable", &self.tx_unroutable),
            ("tx_direct", &self.tx_direct),
            ("tx_no_owner", &self.tx_no_owner),
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
            ("thread_takeovers", &self.thread_takeovers),
            ("thread_yields", &self.thread_yields),
            ("tx_deferred", &self.tx_deferred),
            ("tx_acks_coalesced", &self.tx_acks_coalesced),
            ("tx_doorbell_deferred", &self.tx_doorbell_deferred),
            ("tx_doorbell_thread", &self.tx_doorbell_thread),
            ("tx_urgent", &self.tx_urgent),
            ("tx_piece_receives", &self.tx_piece_receives),
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
    held: Option<(Vec<u8>, TxMeta, u16)>,
    /// ACKs (and responder packets queued behind them) held to the end of a transmit burst.
    acks: AckQueue,
    pcap: Option<PcapSink<io::BufWriter<std::fs::File>>>,
    pcap_buf: Vec<u8>,
    comp: HashMap<Cq, CompHandler>,
    async_handler: Option<AsyncHandler>,
    /// The host's connection manager (RDMA CM over IB CM MADs on QP1), fed by the NIC's GSI.
    cm: roce_cm::Endpoint,
    cm_handler: Option<CmHandler>,
    /// This process's membership of a shared device (`ROCE_SHARED`, `crate::shared`).
    steer: Option<crate::shared::Membership>,
    /// The direct path to the processes of local shared devices (`crate::shared::direct`).
    direct: Option<crate::shared::direct::Direct>,
    /// A poll returned completions before transmitting what the engine had queued.
    tx_deferred: bool,
    /// Posts waiting for their transmit (deferred doorbell).
    doorbell: Doorbell,
    /// The engine's `completer_retry_err` when a transmit last looked, and until when (virtual
    /// ns) long bursts go out in pieces (see `PIECE_PKTS` in `transmit.rs`).
    retries_seen: u64,
    pieces_until: u64,
    /// Destinations and QPs of the packets committed since the last flush (one entry per
    /// change), to name the QPs whose datagrams the kernel refused.
    tx_from: Vec<(IpAddr, u32)>,
}

struct Shared {
    cfg: Config,
    /// `CLOCK_MONOTONIC` (ns) at open: virtual time 0.
    start_ns: u64,
    engine: Mutex<Engine>,
    /// The host-wide claims of this device's bound rdma_cm ports (`cm_ports`); taken before
    /// `engine` when both are.
    cm_ports: Mutex<cm_ports::Claims>,
    waker: Arc<Waker>,
    stop: AtomicBool,
    /// Virtual time of the program's last inline progress.
    app_last: AtomicU64,
    /// The program's last poll returned completions (it may now work on them, or wait on
    /// memory, instead of polling again); false after a poll that found the CQ empty.
    app_last_got: AtomicBool,
    /// Mirrors `Engine::tx_deferred` (an ACK left for the program's next verb) for the
    /// progress thread, which looks at it without the lock.
    tx_deferred_pending: AtomicBool,
    /// Virtual time by which the progress thread rings a deferred doorbell (u64::MAX: none).
    doorbell_at: AtomicU64,
    /// Virtual time until which the thread's looks at a polling program stay short and a
    /// deferred doorbell wakes it: set when it caught the program not progressing (a datagram
    /// or a doorbell left waiting).
    short_looks_until: AtomicU64,
    /// Virtual time until which the background thread sleeps in any wait a `Waker::wake` ends
    /// (u64::MAX: running, or not sleeping on a time).
    thread_until: AtomicU64,
    /// Virtual time until which the background thread sleeps (u64::MAX: not sleeping on a timer).
    thread_deadline: AtomicU64,
    /// The background thread may only run on the one CPU the thread that opened the device was
    /// pinned to (it inherits that affinity), so it shares it with the program: see
    /// `progress_thread`.
    thread_shares_cpu: bool,
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

/// Devices of this process, for [`flush_at_exit`].
static LIVE: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

fn register_for_exit(s: &Arc<Shared>) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // `flush_at_exit` is in this library, which is never unloaded (libibverbs is not
        // dlclose'd by programs).
        roce_udp::os::at_exit(flush_at_exit);
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
                // a device the program never closes (librdmacm's) still ends its capture
                if let Some(p) = e.pcap.take() {
                    let _ = p.finish();
                }
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}
