//! Loss recovery through the UDP driver (127.0.9.x): the responder's PSN-sequence NAK leaves as
//! soon as the gap shows (`tx_urgent`), the requester looks for it between pieces of a long
//! burst (`tx_piece_receives`), and so the requester keeps rxe's limit of 128 unacknowledged
//! PSNs through losses (no window cut, deviation 12 off) while every WRITE completes once, in
//! order, with its data.

use crate::verbs::{AccessFlags, Device, DeviceConfig, Mtu, QpType, SendRequest, WorkCompletion};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const SIZE: usize = 64 << 10;
const MSGS: u64 = 400;
const DEPTH: u64 = 16;

#[test]
fn one_percent_request_loss_is_nacked_at_once_and_keeps_rxe_s_window() {
    let open = |ip: &str, loss: f64| {
        Device::open(DeviceConfig {
            mtu: Mtu::Mtu4096,
            loss,
            ..DeviceConfig::new(ip.parse().unwrap())
        })
        .unwrap()
    };
    // Loss on A's transmit only (its requests; plain ACKs are never dropped).
    let (a, b) = (open("127.0.9.5", 0.01), open("127.0.9.6", 0.0));
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ca, cb) = (
        a.create_cq(256).build().unwrap(),
        b.create_cq(16).build().unwrap(),
    );
    let mk = |pd: &crate::verbs::ProtectionDomain, cq| {
        pd.create_qp(cq, cq, QpType::Rc)
            .set_max_send_wr(64)
            .set_path_mtu(Mtu::Mtu4096)
            .set_timeout(12)
            .build()
            .unwrap()
    };
    let (qa, qb) = (mk(&pa, &ca), mk(&pb, &cb));
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, _qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    // DEPTH slots; message i writes its index into every 8 bytes of slot i % DEPTH.
    let src = pa.allocate(SIZE * DEPTH as usize, all).unwrap();
    let dst = pb.allocate(SIZE * DEPTH as usize, all).unwrap();
    let fill = |i: u64| {
        let bytes: Vec<u8> = (0..SIZE / 8).flat_map(|_| i.to_le_bytes()).collect();
        let off = (i % DEPTH) as usize * SIZE;
        src.write_at(off, &bytes);
    };
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wcs = [WorkCompletion::default(); 32];
    let start = Instant::now();
    while done < MSGS {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stalled at {done}"
        );
        // Refill whole: slot k is reused only after message k - DEPTH completed.
        if posted < MSGS && posted - done < DEPTH {
            let batch: Vec<u64> = (posted..MSGS.min(done + DEPTH)).collect();
            for &i in &batch {
                fill(i);
            }
            let local: Vec<_> = batch
                .iter()
                .map(|&i| {
                    let off = (i % DEPTH) as usize * SIZE;
                    [src.slice(off..off + SIZE)]
                })
                .collect();
            let wrs: Vec<_> = batch
                .iter()
                .zip(&local)
                .map(|(&i, l)| {
                    let off = (i % DEPTH) as usize * SIZE;
                    SendRequest::write(i, l, dst.remote_slice(off..off + SIZE))
                })
                .collect();
            qa.post_batch(&wrs).unwrap();
            posted += batch.len() as u64;
        }
        for wc in ca.poll(&mut wcs).unwrap().iter() {
            assert!(wc.is_ok(), "{wc:?}");
            assert_eq!(wc.wr_id(), done, "completions once each, in order");
            // what landed is message `done`'s (its slot is not rewritten before this)
            let off = (done % DEPTH) as usize * SIZE;
            let mut got = vec![0u8; SIZE];
            dst.read_at(off, &mut got);
            let want = done.to_le_bytes();
            assert!(got.chunks(8).all(|c| c == want), "message {done}: data");
            done += 1;
        }
    }
    let (ra, rb) = (a.runtime().unwrap(), b.runtime().unwrap());
    let dropped = ra.runtime_counters().fault_dropped.load(Relaxed);
    let urgent = rb.runtime_counters().tx_urgent.load(Relaxed);
    let pieces = ra.runtime_counters().tx_piece_receives.load(Relaxed);
    let (seq_naks, oos) = (a.counters().rcvd_seq_err, b.counters().out_of_seq_request);
    eprintln!(
        "{MSGS} x 64 KiB: dropped {dropped}, NAKs {seq_naks}, discarded {oos}, urgent transmits \
         {urgent}, piece receives {pieces}"
    );
    // 6 400 request packets at 1%: losses happened, and NAKs (not the ACK timer) answered them.
    assert!(dropped > 10, "the fault injector dropped {dropped}");
    assert!(seq_naks > 0, "no PSN-sequence NAK");
    assert!(
        urgent > 0,
        "the responder never transmitted at once after a gap"
    );
    assert!(
        pieces > 0,
        "the requester never received between pieces of a burst"
    );
    let w = ra.with_nic(|n| n.qp_unacked_limit(qa.qpn()));
    assert_eq!(w, Some(128), "rxe's limit, never cut");
}
