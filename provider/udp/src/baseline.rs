//! Raw UDP baseline on loopback (127.0.0.1 -> 127.0.0.2): what the kernel's UDP path can do on
//! this machine, so RoCE benchmarks can print ratios against it.
//!
//! * [`throughput`]: a sender thread (pinned to CPU 0) sends flat out, a receiver thread (pinned
//!   to CPU 1) spins on non-blocking `recvmmsg`; bytes are counted **at the receiver** during the
//!   measurement window, after a short warm-up. [`Technique::Mmsg`] is one datagram per packet
//!   with `sendmmsg`/`recvmmsg`; [`Technique::GsoGro`] is UDP GSO on send and GRO on receive.
//! * [`pingpong`]: one datagram bounced between two busy-polling threads; p50/p99 round trip.
//!
//! Both use [`Socket`] itself (ephemeral ports, so they never collide with a NIC on 4791) and stop
//! by themselves. Numbers vary 2-10x on a shared machine: compare ratios from the same run.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{OutDatagram, RecvBatch, Socket, SocketConfig, Wait};
use roce_emu::mem::copy_chunked;

/// How the throughput test moves datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Technique {
    /// One datagram per packet: `sendmmsg` of `batch` datagrams, `recvmmsg` without GRO.
    Mmsg {
        /// Datagrams per `sendmmsg` (and receive slots).
        batch: usize,
    },
    /// UDP GSO sends of `segments` datagrams each (0: as many as fit in 64 KiB, at most 64),
    /// received with UDP GRO.
    GsoGro {
        /// Segments per GSO send (0 = auto).
        segments: usize,
    },
    /// [`Technique::GsoGro`] plus the per-packet work of a datapath that copies each payload
    /// once and keeps the ICRC exact, and nothing else (no engine, no verbs): the sender copies
    /// every packet's payload from a 64 KiB source region into its segment (in ≤ 2 KiB pieces)
    /// and computes its ICRC (`roce_wire::icrc::compute_udp`), the receiver computes the ICRC
    /// of every segment, compares it and copies the payload into a 64 KiB destination region.
    /// The datagram carries a 12-byte BTH and the ICRC around the payload.
    GsoGroIcrc,
    /// Not raw UDP: our datapath as the engine would drive it. Each packet is copied into
    /// [`super::coalesce::TxBatch::space`] one by one (standing in for the engine writing it),
    /// committed (ICRC patched for ID and port) and flushed as GSO runs; received with GRO.
    TxBatch,
}

/// Result of [`throughput`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// UDP payload bytes per datagram.
    pub size: usize,
    /// What was measured.
    pub technique: Technique,
    /// The measurement window.
    pub elapsed: Duration,
    /// UDP payload bytes received in the window.
    pub bytes: u64,
    /// Datagrams received in the window.
    pub datagrams: u64,
    /// Receive-queue drops reported by the kernel (`SO_RXQ_OVFL`) over the whole run.
    pub drops: u64,
    /// [`Technique::GsoGroIcrc`]: datagrams whose ICRC the receiver verified, over the whole
    /// run (warm-up included); 0 for the other techniques.
    pub icrc_verified: u64,
    /// Whether kernel GSO / GRO were really used.
    pub gso: bool,
    /// See `gso`.
    pub gro: bool,
}

impl Throughput {
    /// UDP payload goodput in Gbit/s.
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }
    /// Datagrams per second.
    pub fn datagrams_per_s(&self) -> f64 {
        self.datagrams as f64 / self.elapsed.as_secs_f64()
    }
}

impl std::fmt::Display for Throughput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>6} B {:<22} {:>8.2} Gbit/s {:>8.3} M datagrams/s (drops {}, gso {}, gro {})",
            self.size,
            format!("{:?}", self.technique),
            self.gbit_per_s(),
            self.datagrams_per_s() / 1e6,
            self.drops,
            self.gso,
            self.gro
        )
    }
}

const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const WARMUP: Duration = Duration::from_millis(150);

fn cfg(gso: bool, gro: bool) -> SocketConfig {
    SocketConfig {
        port: 0,
        gso,
        gro,
        ..Default::default()
    }
}

/// Pins the calling thread to `cpu` when the machine has it (best effort).
pub fn pin(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpu < n {
        let _ = super::sys::pin_to_cpu(cpu);
    }
}

/// Runs `f` with the calling thread pinned to `cpu` (as [`pingpong`] pins its threads), then
/// restores the thread's previous affinity.
pub fn pinned<R>(cpu: usize, f: impl FnOnce() -> R) -> R {
    let old = super::sys::affinity().ok();
    pin(cpu);
    let r = f();
    if let Some(old) = old {
        let _ = super::sys::set_affinity(&old);
    }
    r
}

/// Measures loopback UDP throughput for datagrams of `size` payload bytes for `duration`.
pub fn throughput(size: usize, technique: Technique, duration: Duration) -> io::Result<Throughput> {
    let size = size.clamp(1, 65507 - 40);
    let (gso, gro, per_send, batch) = match technique {
        Technique::Mmsg { batch } => (false, false, 1usize, batch.clamp(1, 1024)),
        Technique::GsoGro { segments } => {
            let auto = (65000 / size).clamp(1, super::MAX_GSO_SEGMENTS);
            let s = if segments == 0 {
                auto
            } else {
                segments.min(auto)
            };
            (true, true, s, 8)
        }
        Technique::TxBatch => (true, true, 1, 8),
        Technique::GsoGroIcrc => {
            let s = (65000 / size).clamp(1, super::MAX_GSO_SEGMENTS);
            (true, true, s, 8)
        }
    };
    let mut tx = Socket::bind(SRC, cfg(gso, false))?;
    let mut rx = Socket::bind(DST, cfg(false, gro))?;
    let dst = rx.local_addr();
    let src = tx.local_addr();
    let icrc_work = technique == Technique::GsoGroIcrc && size >= 16;
    let used_gso = gso && tx.features().gso;
    let used_gro = gro && rx.features().gro;
    let stop = Arc::new(AtomicBool::new(false));
    // (bytes, datagrams) received, updated together: two separate counters read while the
    // receiver was between its two updates had a window's bytes and datagrams disagree.
    let received = Arc::new(Mutex::new((0u64, 0u64)));
    let drops = Arc::new(AtomicU64::new(0));
    let verified = Arc::new(AtomicU64::new(0));

    let receiver = {
        let (stop, received, drops) = (stop.clone(), received.clone(), drops.clone());
        let verified = verified.clone();
        std::thread::spawn(move || -> io::Result<()> {
            pin(1);
            let slots = if gro { 16 } else { 64 };
            let slot_size = if gro { super::GRO_SLOT } else { size.max(64) };
            let mut b = RecvBatch::with_layout(slots, slot_size, 0);
            let mut region = vec![0u8; 64 << 10];
            let (mut at, mut good) = (0usize, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let n = rx.recv_batch(&mut b, Wait::NonBlocking)?;
                if n > 0 && icrc_work {
                    for d in b.iter() {
                        let p = d.payload;
                        let Some(body) = p.len().checked_sub(4).map(|l| &p[..l]) else {
                            continue;
                        };
                        let id = super::headers::gso_segment_ip_id(d.gro_index as usize);
                        let c = roce_wire::icrc::compute_udp(
                            d.src.ip(),
                            d.dst,
                            d.src.port(),
                            dst.port(),
                            id,
                            body,
                        );
                        good += u64::from(c.is_some_and(|c| c.to_le_bytes() == p[body.len()..]));
                        let data = &body[12.min(body.len())..];
                        if at + data.len() > region.len() {
                            at = 0;
                        }
                        copy_chunked(&mut region[at..at + data.len()], data);
                        at += data.len();
                    }
                    std::hint::black_box(&region);
                    verified.store(good, Ordering::Relaxed);
                }
                if n > 0 {
                    let mut r = received.lock().unwrap_or_else(|e| e.into_inner());
                    r.0 += b.bytes() as u64;
                    r.1 += n as u64;
                    drop(r);
                    if let Some(d) = b.drops() {
                        drops.fetch_max(d as u64, Ordering::Relaxed);
                    }
                } else {
                    std::hint::spin_loop();
                }
            }
            Ok(())
        })
    };
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || -> io::Result<()> {
            pin(0);
            let payload = vec![0x5Au8; size * per_send];
            let one = OutDatagram {
                dst: dst.ip(),
                dst_port: dst.port(),
                src_port: 0,
                tos: None,
                ttl: None,
                payload: &payload,
                gso_size: (per_send > 1).then_some(size as u16),
            };
            if technique == Technique::TxBatch {
                let mut txb = super::coalesce::TxBatch::new(batch, size.max(16));
                let mut pkt = vec![0x5Au8; size.max(16)];
                let meta = super::coalesce::TxMeta {
                    dst: dst.ip(),
                    dst_port: dst.port(),
                    src_port: 0xC000,
                    tos: None,
                    ttl: None,
                };
                let mut psn = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match txb.space() {
                        Some(sp) => {
                            psn = psn.wrapping_add(1);
                            pkt[8..12].copy_from_slice(&psn.to_be_bytes());
                            sp[..pkt.len()].copy_from_slice(&pkt);
                            txb.commit(&mut tx, meta, pkt.len());
                        }
                        None => {
                            txb.flush(&mut tx, Wait::NonBlocking)?;
                        }
                    }
                }
                return Ok(());
            }
            if icrc_work {
                let region = vec![0x5Au8; 64 << 10];
                let mut bufs = vec![vec![0u8; size * per_send]; batch];
                let mut at = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    for buf in bufs.iter_mut() {
                        for (k, seg) in buf.chunks_mut(size).enumerate() {
                            seg[0] = 0x0A; // a BTH: RDMA WRITE ONLY
                            let body = seg.len() - 4;
                            let n = body - 12;
                            if at + n > region.len() {
                                at = 0;
                            }
                            copy_chunked(&mut seg[12..body], &region[at..at + n]);
                            at += n;
                            let id = super::headers::gso_segment_ip_id(k);
                            let c = roce_wire::icrc::compute_udp(
                                src.ip(),
                                dst.ip(),
                                src.port(),
                                dst.port(),
                                id,
                                &seg[..body],
                            )
                            .unwrap_or(0);
                            seg[body..].copy_from_slice(&c.to_le_bytes());
                        }
                    }
                    let msgs: Vec<OutDatagram<'_>> = bufs
                        .iter()
                        .map(|b| OutDatagram { payload: b, ..one })
                        .collect();
                    tx.send_batch(&msgs, Wait::NonBlocking)?;
                }
                return Ok(());
            }
            let msgs = vec![one; batch];
            while !stop.load(Ordering::Relaxed) {
                tx.send_batch(&msgs, Wait::NonBlocking)?;
            }
            Ok(())
        })
    };
    std::thread::sleep(WARMUP);
    let snapshot = || *received.lock().unwrap_or_else(|e| e.into_inner());
    let ((b0, d0), t0) = (snapshot(), Instant::now());
    std::thread::sleep(duration);
    let ((b1, d1), t1) = (snapshot(), Instant::now());
    stop.store(true, Ordering::Relaxed);
    let rs = sender
        .join()
        .map_err(|_| io::Error::other("sender panicked"))?;
    let rr = receiver
        .join()
        .map_err(|_| io::Error::other("receiver panicked"))?;
    rs?;
    rr?;
    Ok(Throughput {
        size,
        technique,
        elapsed: t1 - t0,
        bytes: b1 - b0,
        datagrams: d1 - d0,
        drops: drops.load(Ordering::Relaxed),
        icrc_verified: verified.load(Ordering::Relaxed),
        gso: used_gso,
        gro: used_gro,
    })
}

/// Result of [`pingpong`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingPong {
    /// UDP payload bytes per datagram.
    pub size: usize,
    /// Round trips measured.
    pub iters: usize,
    /// Round trips that timed out (lost datagrams), not counted in the percentiles.
    pub lost: usize,
    /// Median round trip.
    pub p50: Duration,
    /// 99th percentile round trip.
    pub p99: Duration,
    /// Fastest round trip.
    pub min: Duration,
}

impl std::fmt::Display for PingPong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>6} B ping-pong, busy-poll: p50 {:.1} us  p99 {:.1} us  min {:.1} us  ({} round trips, {} lost)",
            self.size,
            self.p50.as_secs_f64() * 1e6,
            self.p99.as_secs_f64() * 1e6,
            self.min.as_secs_f64() * 1e6,
            self.iters,
            self.lost
        )
    }
}

/// Bounces one `size`-byte datagram `iters` times between two busy-polling threads (CPU 0 and
/// CPU 1) and reports round-trip percentiles. Stops after at most ~3 s whatever `iters` is.
pub fn pingpong(size: usize, iters: usize) -> io::Result<PingPong> {
    let (rtts, lost) = pingpong_samples(size, iters)?;
    PingPong::from_samples(size.clamp(1, 65507 - 40), rtts, lost)
}

/// [`pingpong`]'s raw round-trip samples (warm-up excluded) and the count of lost round trips.
pub fn pingpong_samples(size: usize, iters: usize) -> io::Result<(Vec<Duration>, usize)> {
    pingpong_shaped(size, 0, iters)
}

/// Size of a plain RC ACK on the wire (BTH 12 + AETH 4 + ICRC 4).
pub const RC_ACK_BYTES: usize = 20;

/// [`pingpong_samples`] in the shape of an RC Send/Recv ping-pong: every datagram is followed
/// by an `ack`-byte one in the same UDP GSO send (what an RC responder's ACK costs when it
/// leaves with the reply, as our datapath sends it), received with GRO. `ack` 0: the plain
/// ping-pong (no GSO, no GRO).
pub fn pingpong_shaped(
    size: usize,
    ack: usize,
    iters: usize,
) -> io::Result<(Vec<Duration>, usize)> {
    let size = size.clamp(1, 65507 - 40);
    let ack = ack.min(size);
    let iters = iters.max(1);
    let (gso, gro) = (ack > 0, ack > 0);
    let mut a = Socket::bind(SRC, cfg(gso, gro))?;
    let mut b = Socket::bind(DST, cfg(gso, gro))?;
    let (pa, pb) = (a.local_addr(), b.local_addr());
    let stop = Arc::new(AtomicBool::new(false));
    let slot = (size + ack).max(64);
    fn out(dst: std::net::SocketAddr, buf: &[u8], gso: Option<u16>) -> OutDatagram<'_> {
        let mut o = OutDatagram::new(dst.ip(), 0, buf);
        o.dst_port = dst.port();
        o.gso_size = gso;
        o
    }
    let gso_size = (ack > 0).then_some(size as u16);
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || -> io::Result<()> {
            pin(1);
            let mut batch = RecvBatch::with_layout(4, slot, 0);
            let mut buf = vec![0u8; size + ack];
            while !stop.load(Ordering::Relaxed) {
                if b.recv_batch(&mut batch, Wait::NonBlocking)? == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                if let Some(d) = batch.iter().next() {
                    let n = d.payload.len().min(size);
                    buf[..n].copy_from_slice(&d.payload[..n]);
                }
                b.send_batch(
                    &[out(pa, &buf, gso_size)],
                    Wait::Block(Some(Duration::from_millis(100))),
                )?;
            }
            Ok(())
        })
    };
    let pinger = std::thread::spawn(move || -> io::Result<(Vec<Duration>, usize)> {
        pin(0);
        let mut batch = RecvBatch::with_layout(4, slot, 0);
        let payload = vec![0xA5u8; size + ack];
        let o = out(pb, &payload, gso_size);
        let warm = (iters / 10).clamp(10, 1000);
        let mut rtts = Vec::with_capacity(iters);
        let mut lost = 0;
        let deadline = Instant::now() + Duration::from_secs(3);
        for i in 0..warm + iters {
            if Instant::now() > deadline {
                break;
            }
            let t0 = Instant::now();
            a.send_batch(&[o], Wait::Block(Some(Duration::from_millis(100))))?;
            let timeout = t0 + Duration::from_millis(100);
            loop {
                if a.recv_batch(&mut batch, Wait::NonBlocking)? > 0 {
                    if i >= warm {
                        rtts.push(t0.elapsed());
                    }
                    break;
                }
                if Instant::now() > timeout {
                    lost += 1;
                    break;
                }
                std::hint::spin_loop();
            }
        }
        Ok((rtts, lost))
    });
    let r = pinger
        .join()
        .map_err(|_| io::Error::other("pinger panicked"));
    stop.store(true, Ordering::Relaxed);
    echo.join()
        .map_err(|_| io::Error::other("echo panicked"))??;
    r?
}

impl PingPong {
    /// Percentiles of round-trip samples (e.g. several [`pingpong_samples`] runs together).
    pub fn from_samples(size: usize, mut rtts: Vec<Duration>, lost: usize) -> io::Result<Self> {
        if rtts.is_empty() {
            return Err(io::Error::other("no round trip completed"));
        }
        rtts.sort_unstable();
        let pct = |p: f64| rtts[((rtts.len() - 1) as f64 * p).round() as usize];
        Ok(PingPong {
            size,
            iters: rtts.len(),
            lost,
            p50: pct(0.50),
            p99: pct(0.99),
            min: rtts[0],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Smoke test only: the measurements run and their numbers are consistent. No timed
    /// assertions: on a starved machine a window may legitimately see nothing.
    #[test]
    fn baseline_runs_and_moves_data() {
        let d = Duration::from_millis(100);
        let t = throughput(1084, Technique::Mmsg { batch: 16 }, d).unwrap();
        eprintln!("{t}");
        assert_eq!(t.bytes, t.datagrams * 1084);
        let t = throughput(1084, Technique::GsoGro { segments: 0 }, d).unwrap();
        eprintln!("{t}");
        assert_eq!(t.bytes, t.datagrams * 1084);
        let t = throughput(1084, Technique::TxBatch, d).unwrap();
        eprintln!("{t}");
        assert_eq!(t.bytes, t.datagrams * 1084);
        let t = throughput(4112, Technique::GsoGroIcrc, d).unwrap();
        eprintln!("{t}, {} ICRCs verified", t.icrc_verified);
        assert_eq!(t.bytes, t.datagrams * 4112);
        // every datagram the window counted was verified (the count covers the warm-up too)
        assert!(t.icrc_verified >= t.datagrams, "{t:?}");
        match pingpong(64, 200) {
            Ok(p) => {
                eprintln!("{p}");
                assert!(p.iters > 0 && p.min <= p.p50 && p.p50 <= p.p99);
            }
            Err(e) => eprintln!("ping-pong completed no round trip (starved machine?): {e}"),
        }
        let (rtts, lost) = pingpong_shaped(80, RC_ACK_BYTES, 200).unwrap();
        eprintln!("with an ACK: {} round trips, {lost} lost", rtts.len());
        // each round trip carries two datagrams as one GSO send: one came back at least
        assert!(
            !rtts.is_empty(),
            "no round trip with an ACK completed ({lost} lost)"
        );
    }
}
