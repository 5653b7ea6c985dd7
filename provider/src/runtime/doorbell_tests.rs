//! The deferred doorbell over real UDP sockets (127.0.9.x): bursts of one-WR posts arrive
//! whole, and a burst that nobody polls after still leaves (the progress thread rings it).

use crate::verbs::{
    AccessFlags, CompletionQueue, Device, DeviceConfig, QpType, QueuePair, SendRequest, WcOpcode,
    WorkCompletion,
};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

struct Side {
    ctx: crate::verbs::Context,
    pd: crate::verbs::ProtectionDomain,
    cq: CompletionQueue,
}

fn side(ip: &str) -> Side {
    let ctx = Device::open(DeviceConfig::new(ip.parse().unwrap())).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256).build().unwrap();
    Side { ctx, pd, cq }
}

fn connect(a: &Side, b: &Side) -> (QueuePair, QueuePair) {
    let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
    let qb = b.pd.create_qp(&b.cq, &b.cq, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap())
}

/// Receive completions now in `cq` (polls until `n` arrived or `t` passed).
fn recvs(cq: &CompletionQueue, n: usize, t: Duration) -> usize {
    let mut wcs = [WorkCompletion::default(); 64];
    let (mut got, start) = (0, Instant::now());
    while got < n && start.elapsed() < t {
        for wc in cq.poll(&mut wcs).unwrap().iter() {
            assert!(wc.is_ok(), "{wc:?}");
            if wc.opcode() == WcOpcode::Recv {
                got += 1;
            }
        }
    }
    got
}

#[test]
fn a_burst_of_one_wr_posts_arrives_in_order_with_fewer_transmits() {
    let (a, b) = (side("127.0.9.1"), side("127.0.9.2"));
    let (qa, qb) = connect(&a, &b);
    let dst = b.pd.allocate(64 * 40, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..40 {
        qb.post_receive(&[dst.slice(i * 64..(i + 1) * 64)], i as u64)
            .unwrap();
    }
    let rt = a.ctx.runtime().unwrap();
    let flushes = rt.runtime_counters().tx_flushes.load(Relaxed);
    let msgs: Vec<[u8; 8]> = (0..40u64).map(|i| i.to_le_bytes()).collect();
    for (i, m) in msgs.iter().enumerate() {
        qa.post(&SendRequest::send_inline(i as u64, m)).unwrap();
    }
    let sent = rt.runtime_counters().tx_flushes.load(Relaxed) - flushes;
    let deferred = rt.runtime_counters().tx_doorbell_deferred.load(Relaxed);
    // the sends complete (the poll rings whatever still waits)
    let mut done = 0;
    while done < 40 {
        let wc = a.cq.wait_one(T).unwrap();
        assert!(wc.is_ok(), "{wc:?}");
        done += 1;
    }
    assert_eq!(recvs(&b.cq, 40, T), 40);
    for i in 0..40 {
        assert_eq!(dst.to_vec()[i * 64..i * 64 + 8], (i as u64).to_le_bytes());
    }
    // 40 posts within microseconds: most of them wait for a doorbell (a preempted poster may
    // start new bursts, so no exact figure)
    assert!(deferred > 0, "no post was deferred");
    assert!(sent < 40, "{sent} transmits for 40 posts");
}

#[test]
fn a_burst_nobody_polls_after_is_sent_by_the_progress_thread() {
    let (a, b) = (side("127.0.9.3"), side("127.0.9.4"));
    let (qa, qb) = connect(&a, &b);
    let dst = b.pd.allocate(64 * 8, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..8 {
        qb.post_receive(&[dst.slice(i * 64..(i + 1) * 64)], i as u64)
            .unwrap();
    }
    for i in 0..8u64 {
        qa.post(&SendRequest::send_inline(i, &i.to_le_bytes()))
            .unwrap();
    }
    // Neither side polls: b's progress thread receives, a's rings the deferred doorbell.
    let rt = a.ctx.runtime().unwrap();
    // Posts left waiting for the doorbell (all but the first, unless the poster was
    // descheduled between two posts: then a later post rang it, and maybe the last one).
    let left = rt.shared.doorbell_at.load(Relaxed) != u64::MAX;
    let start = Instant::now();
    while start.elapsed() < T {
        std::thread::sleep(Duration::from_millis(5));
        if b.ctx
            .runtime()
            .unwrap()
            .runtime_counters()
            .rx_datagrams
            .load(Relaxed)
            >= 8
        {
            break;
        }
    }
    // Rung by the progress thread: at its 30 µs deadline (`tx_doorbell_thread`) or earlier,
    // when it receives the ACK of the first (immediate) send and transmits what waits.
    let c = rt.runtime_counters();
    let thread = c.progress_thread.load(Relaxed) + c.tx_doorbell_thread.load(Relaxed);
    assert!(
        !left || thread > 0,
        "posts left for the doorbell, but no thread progress"
    );
    assert_eq!(recvs(&b.cq, 8, Duration::from_millis(100)), 8);
    for i in 0..8 {
        assert_eq!(dst.to_vec()[i * 64..i * 64 + 8], (i as u64).to_le_bytes());
    }
}
