//! RC RDMA WRITE then READ bandwidth between two emulated NICs on 127.0.0.1 and 127.0.0.2 (one
//! process, two devices), with the data checked at the end.
//!
//! ```text
//! cargo run --release -p roce-provider --example write_read_bw
//! ```
use roce_provider::verbs::{
    AccessFlags, Device, DeviceConfig, Mtu, QpType, SendRequest, WorkCompletion,
};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Results in Gbit/s.
#[derive(Debug)]
pub struct Bw {
    /// RDMA WRITE.
    pub write_gbps: f64,
    /// RDMA READ.
    pub read_gbps: f64,
}

/// Writes `size`-byte messages from a to b for `dur`, then reads them back for `dur`, 16 in
/// flight, MTU 4096; checks that the last READ brought back what the WRITEs put there.
pub fn run(
    ip_a: IpAddr,
    ip_b: IpAddr,
    size: usize,
    dur: Duration,
) -> Result<Bw, Box<dyn std::error::Error>> {
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let a = Device::open(DeviceConfig {
        mtu: Mtu::Mtu4096,
        ..DeviceConfig::new(ip_a)
    })?;
    let b = Device::open(DeviceConfig {
        mtu: Mtu::Mtu4096,
        ..DeviceConfig::new(ip_b)
    })?;
    let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
    let (ca, cb) = (a.create_cq(256).build()?, b.create_cq(256).build()?);
    let qa = pa.create_qp(&ca, &ca, QpType::Rc).build()?;
    let qb = pb.create_qp(&cb, &cb, QpType::Rc).build()?;
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, _qb) = (qa.handshake(eb)?, qb.handshake(ea)?);

    let pattern: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
    let src = pa.register(pattern.clone(), all)?;
    let dst = pb.allocate(size, all)?;
    let back = pa.allocate(size, all)?;

    let measure = |wr: SendRequest<'_>| -> Result<f64, Box<dyn std::error::Error>> {
        let mut wcs = [WorkCompletion::default(); 32];
        let (mut inflight, mut done) = (0, 0u64);
        let start = Instant::now();
        while start.elapsed() < dur || inflight > 0 {
            while inflight < 16 && start.elapsed() < dur {
                qa.post(&wr)?;
                inflight += 1;
            }
            for wc in ca.wait(&mut wcs, Duration::from_secs(10))?.iter() {
                wc.result()?;
                inflight -= 1;
                done += 1;
            }
        }
        Ok(done as f64 * size as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9)
    };
    let local = [src.slice(..)];
    let write_gbps = measure(SendRequest::write(1, &local, dst.remote()))?;
    if dst.to_vec() != pattern {
        return Err("WRITE: the remote region does not hold the pattern".into());
    }
    let into = [back.slice(..)];
    let read_gbps = measure(SendRequest::read(2, &into, dst.remote()))?;
    if back.to_vec() != pattern {
        return Err("READ: the local region does not hold the pattern".into());
    }
    Ok(Bw {
        write_gbps,
        read_gbps,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let r = run(
        "127.0.0.1".parse()?,
        "127.0.0.2".parse()?,
        65536,
        Duration::from_secs(1),
    )?;
    println!("RC 64 KiB, 127.0.0.1 -> 127.0.0.2, MTU 4096: WRITE {:.2} Gbit/s, READ {:.2} Gbit/s (data checked)", r.write_gbps, r.read_gbps);
    Ok(())
}
