//! The runtime's cost per 64-byte SEND round trip, in one thread and without waiting: two
//! devices on 127.0.0.31/32 with no progress thread, A posts a SEND, B polls (loopback delivery
//! is synchronous, so the datagram is already queued), posts its reply, A polls, and so on.
//! Every poll finds its datagram at the first try, so no busy-poll loop is counted: under
//! callgrind the instruction count per round trip (both sides: 2 SENDs, 2 ACKs, 4 receives,
//! 4 posts, 4 polls) is repeatable and covers the whole user-space path of `roce bench`'s
//! latency test (verbs layer, runtime, UDP driver, engine), system calls aside.
//!
//!     cargo build --release -p roce-provider --example rt_pingpong
//!     valgrind --tool=callgrind --toggle-collect='*rt_pingpong*round_trips*' \
//!         target/release/examples/rt_pingpong 2000
//!
//! Prints the wall-clock time per round trip as well (system calls included; noisy).
use roce_provider::verbs::{
    AccessFlags, CompletionQueue, Device, DeviceConfig, QpType, QueuePair, WcOpcode, WorkCompletion,
};
use std::time::Instant;

fn open(ip: &str) -> roce_provider::verbs::Context {
    Device::open(DeviceConfig {
        progress_thread: false,
        quiet: true,
        ..DeviceConfig::new(ip.parse().unwrap())
    })
    .expect("open device")
}

/// Polls until a receive completion arrives (collecting the send completions on the way).
fn wait_recv(cq: &CompletionQueue, wcs: &mut [WorkCompletion]) {
    loop {
        for wc in cq.poll(wcs).unwrap().iter() {
            assert!(wc.is_ok(), "{wc:?}");
            if wc.opcode() == WcOpcode::Recv {
                return;
            }
        }
    }
}

#[inline(never)]
fn round_trips(
    n: usize,
    (qa, ca): (&QueuePair, &CompletionQueue),
    (qb, cb): (&QueuePair, &CompletionQueue),
    (ra, rb): (
        &roce_provider::verbs::LocalSlice<'_>,
        &roce_provider::verbs::LocalSlice<'_>,
    ),
) {
    let payload = [0xA5u8; 64];
    let mut wcs = [WorkCompletion::default(); 16];
    for i in 0..n as u64 {
        qa.post_send_inline(&payload, i).unwrap();
        wait_recv(cb, &mut wcs);
        qb.post_receive(std::slice::from_ref(rb), i).unwrap();
        qb.post_send_inline(&payload, i).unwrap();
        wait_recv(ca, &mut wcs);
        qa.post_receive(std::slice::from_ref(ra), i).unwrap();
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let (a, b) = (open("127.0.0.31"), open("127.0.0.32"));
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ca, cb) = (
        a.create_cq(256).build().unwrap(),
        b.create_cq(256).build().unwrap(),
    );
    let qa = pa.create_qp(&ca, &ca, QpType::Rc).build().unwrap();
    let qb = pb.create_qp(&cb, &cb, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let ma = pa.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    let mb = pb.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    let (ra, rb) = (ma.slice(..64), mb.slice(..64));
    for i in 0..16 {
        qa.post_receive(std::slice::from_ref(&ra), i).unwrap();
        qb.post_receive(std::slice::from_ref(&rb), i).unwrap();
    }
    // Warm-up (caches, the ICRC patch tables), then the measured run.
    round_trips(100, (&qa, &ca), (&qb, &cb), (&ra, &rb));
    let t = Instant::now();
    round_trips(n, (&qa, &ca), (&qb, &cb), (&ra, &rb));
    let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{n} round trips of a 64-byte SEND in one thread: {per:.2} us each (both sides)");
}
