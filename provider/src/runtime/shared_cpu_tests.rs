//! A program pinned to one CPU (127.0.9.17–24): its device's progress thread inherits the pin and
//! runs only instead of the program, never beside it. The thread knows it, lets the program run
//! first before work the program may do itself (`thread_yields`), and still does what only it
//! can do: receive for a program that spins on memory, ring a doorbell the program left.
//!
//! Each test runs its program in a thread of its own pinned to CPU 0 (the test harness's threads
//! keep their affinity); the peer runs unpinned in the test's thread. No timing is asserted, only
//! that the work gets done and which path did it.

use crate::verbs::{
    AccessFlags, Context, Device, DeviceConfig, QpType, QueuePairEndpoint, SendRequest, WcOpcode,
    WorkCompletion,
};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One at a time: each test keeps a CPU busy, and the look tests count wake-ups.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn open(ip: &str) -> Context {
    Device::open(DeviceConfig::new(ip.parse().unwrap())).unwrap()
}

/// Runs `f` in a new thread pinned to CPU 0 (a device it opens has its progress thread there).
fn spawn_pinned<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        roce_udp::os::pin_to_cpu(0).expect("sched_setaffinity");
        assert_eq!(roce_udp::os::cpus_allowed(), Some(1));
        f()
    })
}

/// The result of a [`spawn_pinned`] thread (its panic, if it panicked).
fn join<T>(h: std::thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// One side of a test: a device, a PD, a CQ and an RC QP connected to the other side's.
struct Side {
    ctx: Context,
    pd: crate::verbs::ProtectionDomain,
    cq: crate::verbs::CompletionQueue,
    qp: crate::verbs::QueuePair,
}

/// One side's end of the endpoint exchange: sends its QP's endpoint, receives the other's.
type Link = (
    mpsc::Sender<QueuePairEndpoint>,
    mpsc::Receiver<QueuePairEndpoint>,
);

/// The two ends of an endpoint exchange (pinned side, peer).
fn links() -> (Link, Link) {
    let (to_b, from_a) = mpsc::channel();
    let (to_a, from_b) = mpsc::channel();
    ((to_b, from_b), (to_a, from_a))
}

/// Opens a device at `ip` in the calling thread (its progress thread inherits that thread's
/// affinity) and connects an RC QP on it to the other side's over `link`.
fn side(ip: &str, (to_other, from_other): Link) -> Side {
    let ctx = open(ip);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(1024).build().unwrap();
    let q = pd
        .create_qp(&cq, &cq, QpType::Rc)
        .set_max_send_wr(128)
        .set_max_recv_wr(256)
        .build()
        .unwrap();
    to_other.send(q.endpoint()).unwrap();
    let qp = q.handshake(from_other.recv().unwrap()).unwrap();
    Side { ctx, pd, cq, qp }
}

#[test]
fn a_device_opened_by_a_pinned_thread_knows_its_progress_thread_shares_that_cpu() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let shares = join(spawn_pinned(|| {
        open("127.0.9.17")
            .runtime()
            .unwrap()
            .shared
            .thread_shares_cpu
    }));
    assert!(shares, "opened on one CPU: the thread can only run there");
    // Unpinned (the harness's thread), when this machine has more than one CPU.
    if roce_udp::os::cpus_allowed().is_some_and(|n| n > 1) {
        let ctx = open("127.0.9.18");
        assert!(!ctx.runtime().unwrap().shared.thread_shares_cpu);
    }
}

/// perftest's `ib_write_bw` pattern: one WR per post (so posts wait for a deferred doorbell),
/// a window of WRs in flight, every 8th signaled, a poll after each post.
#[test]
fn a_pinned_bandwidth_loop_posting_one_wr_at_a_time_completes_with_its_data() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const SIZE: usize = 64 << 10;
    const WRS: u64 = 1024;
    let (link_a, link_b) = links();
    let (remote_tx, remote_rx) = mpsc::channel();
    let run = spawn_pinned(move || {
        let a = side("127.0.9.19", link_a);
        let remote = remote_rx.recv().unwrap();
        let src = a.pd.allocate(SIZE, AccessFlags::LOCAL_WRITE).unwrap();
        let pattern: Vec<u8> = (0..SIZE).map(|i| (i * 7 + 3) as u8).collect();
        src.write_at(0, &pattern);
        let local = [src.slice(..)];
        let mut wcs = [WorkCompletion::default(); 16];
        let (mut posted, mut done) = (0u64, 0u64);
        let start = Instant::now();
        while done < WRS {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{done} of {WRS} WRITEs"
            );
            if posted < WRS && posted - done < 64 {
                let mut wr = SendRequest::write(posted, &local, remote);
                if posted % 8 != 7 {
                    wr = wr.unsignaled();
                }
                a.qp.post(&wr).unwrap();
                posted += 1;
            }
            for wc in a.cq.poll(&mut wcs).unwrap().iter() {
                assert!(wc.is_ok(), "{wc:?}");
                done += 8;
            }
        }
        let rt = a.ctx.runtime().unwrap();
        let c = rt.runtime_counters();
        (
            rt.shared.thread_shares_cpu,
            c.progress_inline.load(Relaxed),
            c.tx_datagrams.load(Relaxed),
            pattern,
        )
    });
    let b = side("127.0.9.20", link_b);
    let target =
        b.pd.allocate(SIZE, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
            .unwrap();
    remote_tx.send(target.remote()).unwrap();
    let (shares, inline, sent, pattern) = join(run);
    assert!(shares);
    assert!(
        sent >= WRS * 16,
        "{sent} datagrams for {WRS} 64 KiB WRITEs at MTU 4096"
    );
    assert!(inline > 0, "the program progressed by itself");
    assert_eq!(target.to_vec(), pattern);
    drop(b.ctx);
}

/// ib_write_lat's pattern: poll, then spin on memory for the peer's WRITE, which only the
/// progress thread can receive; on the program's own CPU it must not yield that away to the
/// spinning program.
#[test]
fn a_pinned_program_spinning_on_memory_still_gets_each_write() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (link_a, link_b) = links();
    let (remote_tx, remote_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<u8>();
    let (seen_tx, seen_rx) = mpsc::channel::<u8>();
    let run = spawn_pinned(move || {
        let a = side("127.0.9.21", link_a);
        let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let target = a.pd.allocate(64, all).unwrap();
        remote_tx.send(target.remote()).unwrap();
        let mut wcs = [WorkCompletion::default(); 4];
        while let Ok(round) = go_rx.recv() {
            // A polls for a while (its thread's looks thin out) ...
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                let _ = a.cq.poll(&mut wcs).unwrap();
            }
            // ... then spins on memory while the peer writes into it.
            let start = Instant::now();
            let mut byte = [0u8; 1];
            loop {
                target.read_at(0, &mut byte);
                if byte[0] == round {
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "round {round}: the WRITE did not land while the pinned program spun"
                );
                std::hint::spin_loop();
            }
            seen_tx.send(round).unwrap();
        }
        a.ctx
            .runtime()
            .unwrap()
            .runtime_counters()
            .progress_thread
            .load(Relaxed)
    });
    let b = side("127.0.9.22", link_b);
    let remote = remote_rx.recv().unwrap();
    let src = b.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    for round in 1..=10u8 {
        go_tx.send(round).unwrap();
        // Let A reach its spin first (a WRITE that lands while A polls is received by A).
        std::thread::sleep(Duration::from_millis(30));
        src.write_at(0, &[round]);
        b.qp.post_write(&[src.slice(..)], remote, round as u64)
            .unwrap();
        let wc = b.cq.wait_one(Duration::from_secs(5)).unwrap();
        assert!(wc.is_ok(), "{wc:?}");
        assert_eq!(
            seen_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            round
        );
    }
    drop(go_tx);
    let thread_progress = join(run);
    assert!(
        thread_progress > 0,
        "A's thread received the WRITEs A spun for"
    );
    drop(b.ctx);
}

/// A program posts several SENDs in a row (all but the first wait for a doorbell) and stops
/// calling verbs: its thread, on the same CPU, first lets it run (it might ring the doorbell
/// itself), then rings it.
#[test]
fn a_pinned_program_that_leaves_posts_for_a_doorbell_and_stops_still_sends_them() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (link_a, link_b) = links();
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let run = spawn_pinned(move || {
        let a = side("127.0.9.23", link_a);
        let c = a.ctx.runtime().unwrap().runtime_counters();
        let before = (
            c.thread_yields.load(Relaxed),
            c.progress_thread.load(Relaxed),
        );
        let mut wcs = [WorkCompletion::default(); 4];
        while let Ok(round) = go_rx.recv() {
            // A polls a little (it is a program that polls), posts 8 SENDs, then blocks.
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(2) {
                let _ = a.cq.poll(&mut wcs).unwrap();
            }
            for i in 0..8 {
                a.qp.post(&SendRequest::send_inline(round * 8 + i, &[round as u8; 8]))
                    .unwrap();
            }
            // No verb until the next round: sleep (blocked), as a program waiting on
            // something else would.
            std::thread::sleep(Duration::from_millis(50));
        }
        (
            c.thread_yields.load(Relaxed) - before.0,
            c.progress_thread.load(Relaxed) - before.1,
        )
    });
    let b = side("127.0.9.24", link_b);
    let dst = b.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..40 {
        b.qp.post_receive(&[dst.slice(..)], i).unwrap();
    }
    let mut wcs = [WorkCompletion::default(); 16];
    let mut received = 0;
    for round in 0..4u64 {
        go_tx.send(round).unwrap();
        let start = Instant::now();
        while received < (round + 1) * 8 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "round {round}: {received} SENDs arrived"
            );
            for wc in b.cq.poll(&mut wcs).unwrap().iter() {
                assert!(wc.is_ok() && wc.opcode() == WcOpcode::Recv, "{wc:?}");
                received += 1;
            }
        }
    }
    drop(go_tx);
    let (yields, thread_runs) = join(run);
    // The program slept after each round's posts: only its thread can have sent 7 of the 8.
    assert!(
        thread_runs >= 4,
        "{thread_runs} thread progress runs for 4 rounds"
    );
    assert!(
        yields >= 4,
        "the thread let the program run first ({yields} yields, 4 rounds)"
    );
    drop(b.ctx);
}
