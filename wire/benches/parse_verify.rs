//! Throughput of frame parse + ICRC verify on 4 KiB RoCEv2/IPv4 packets, next to `crc32fast`
//! alone over the same bytes. Not a timed test: it prints numbers.
//!
//!     cargo bench -p roce-wire --bench parse_verify
//!
//! Prints packets and GB (frame bytes) per second of CPU time for both, and their ratio (target ≥ 0.80), for two
//! working sets: 64 frames (266 KB, cache-resident, as a packet that has just been received)
//! and 1024 frames (4.3 MB, past the L2 cache: the parser's first touch of each frame's headers
//! then pays the cache miss that the CRC's streaming loads otherwise hide).
use roce_wire::frame::{self, build_ipv4_frame, Ipv4FrameSpec, LinkType, Verdict};
use roce_wire::{bth, transport, Opcode, Psn};
use std::hint::black_box;
use std::time::{Duration, Instant};

const PAYLOAD: usize = 4096;
const ROUNDS: usize = 7;
const ROUND_TIME: Duration = Duration::from_millis(400);

fn frames(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let op = Opcode::RC_RDMA_WRITE_MIDDLE;
            let mut r =
                transport::Repr::new(bth::Repr::new(op, 0x100 + i as u32, Psn::new(i as u32)));
            r.set_payload_len(PAYLOAD);
            let mut t = vec![0u8; r.buffer_len()];
            r.emit(&mut transport::Packet::new_unchecked(&mut t[..]));
            for (k, b) in t[r.header_len()..r.header_len() + PAYLOAD]
                .iter_mut()
                .enumerate()
            {
                *b = (k * 31 + i) as u8;
            }
            let spec = Ipv4FrameSpec {
                ip_id: i as u16,
                src_port: 0xC000 | i as u16,
                ..Default::default()
            };
            build_ipv4_frame(&spec, &t).unwrap()
        })
        .collect()
}

/// CPU time this thread has run, in nanoseconds (Linux `schedstat`), so that time spent
/// descheduled on a busy machine does not count; wall time elsewhere.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

/// One round of `f` over the frames for about [`ROUND_TIME`]; returns packets per CPU second.
fn round(frames: &[Vec<u8>], f: &mut impl FnMut(&[u8]) -> bool) -> f64 {
    let wall = Instant::now();
    let start = cpu_ns(wall);
    let mut n = 0u64;
    let mut ok = 0u64;
    while wall.elapsed() < ROUND_TIME {
        for fr in frames {
            ok += f(black_box(fr)) as u64;
        }
        n += frames.len() as u64;
    }
    assert_eq!(ok, n, "every packet must pass");
    n as f64 * 1e9 / (cpu_ns(wall) - start).max(1) as f64
}

/// Best packets/s of `a` and of `b`, their rounds interleaved so that both see the same
/// machine load.
fn measure(
    frames: &[Vec<u8>],
    mut a: impl FnMut(&[u8]) -> bool,
    mut b: impl FnMut(&[u8]) -> bool,
) -> (f64, f64) {
    let (mut best_a, mut best_b) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        best_a = best_a.max(round(frames, &mut a));
        best_b = best_b.max(round(frames, &mut b));
    }
    (best_a, best_b)
}

fn main() {
    for count in [64, 1024] {
        let frames = frames(count);
        let bytes = frames[0].len() as f64;
        let (pv, crc) = measure(
            &frames,
            |fr| match frame::parse(LinkType::Ethernet, fr) {
                Ok(Some(f)) => f.verdict() == Verdict::IcrcValid,
                _ => false,
            },
            |fr| black_box(crc32fast::hash(fr)) != 1,
        );
        println!(
            "{count} frames of {bytes} bytes (RoCEv2/IPv4 RC RDMA_WRITE_MIDDLE, {PAYLOAD}-byte payload), {:.1} MB:",
            count as f64 * bytes / 1e6
        );
        for (what, pps) in [("parse + ICRC verify", pv), ("crc32fast::hash only", crc)] {
            println!(
                "  {what:<22} {pps:>12.0} packets/s {:>7.2} GB/s",
                pps * bytes / 1e9
            );
        }
        println!("  ratio (parse+verify / crc32fast): {:.3}", pv / crc);
    }
}
