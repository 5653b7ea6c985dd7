//! A lossy network, deterministically: two NICs on a simulated network that loses 3% of the
//! packets and reorders 2%, RC WRITEs and SENDs that all complete intact anyway (go-back-N,
//! PSN-sequence NAKs, retransmission timers on virtual time), every delivered packet written to
//! a pcap file, then that file decoded as `roce decode FILE` does.
//!
//! ```text
//! cargo run --release -p roce-cli --example lossy_pcap [OUT.pcap]
//! roce decode OUT.pcap      # or open it in Wireshark
//! ```
use roce_cli::decode::{self, DecodeArgs};
use roce_provider::verbs::sim::{LinkConfig, SimFabric};
use roce_provider::verbs::{AccessFlags, DeviceConfig, QpType};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What happened.
#[derive(Debug)]
pub struct Lossy {
    /// Packets the network dropped.
    pub lost: u64,
    /// Packets delivered (and captured).
    pub delivered: u64,
    /// Exit status of the decoder (0: every ICRC valid).
    pub decode_status: u8,
    /// The decoder's output.
    pub listing: String,
}

/// Runs the transfer with `seed`, writes the capture to `pcap` and decodes it.
pub fn run(pcap: &Path, seed: u64) -> Result<Lossy, Box<dyn std::error::Error>> {
    let link = LinkConfig {
        loss: 0.03,
        reorder: 0.02,
        reorder_delay_ns: 30_000,
        ..LinkConfig::default()
    };
    let net = SimFabric::new(seed, link);
    net.capture_pcap(pcap)?;
    let a = net.open(DeviceConfig::new("192.0.2.1".parse()?))?;
    let b = net.open(DeviceConfig::new("192.0.2.2".parse()?))?;
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
    let (ca, cb) = (a.create_cq(64).build()?, b.create_cq(64).build()?);
    let qa = pa.create_qp(&ca, &ca, QpType::Rc).set_timeout(8).build()?;
    let qb = pb.create_qp(&cb, &cb, QpType::Rc).build()?;
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, qb) = (qa.handshake(eb)?, qb.handshake(ea)?);

    let data: Vec<u8> = (0..32 * 1024).map(|i| (i % 251) as u8).collect();
    let src = pa.register(data.clone(), all)?;
    let dst = pb.allocate(8 * data.len(), all)?;
    let inbox = pb.allocate(4096, all)?;
    for i in 0..8 {
        qb.post_receive(&[inbox.slice(i * 512..(i + 1) * 512)], i as u64)?;
    }
    for i in 0..8 {
        qa.post_write(
            &[src.slice(..)],
            dst.remote_slice(i * data.len()..(i + 1) * data.len()),
            i as u64,
        )?;
        qa.post_send(&[src.slice(i * 512..(i + 1) * 512)], 100 + i as u64)?;
    }
    for _ in 0..16 {
        ca.wait_one(Duration::from_secs(30))?.result()?;
    }
    for _ in 0..8 {
        cb.wait_one(Duration::from_secs(30))?.result()?;
    }
    let got = dst.to_vec();
    for i in 0..8 {
        if got[i * data.len()..(i + 1) * data.len()] != data[..] {
            return Err(format!("WRITE {i} corrupted").into());
        }
    }
    if inbox.to_vec() != data[..4096] {
        return Err("SENDs corrupted".into());
    }
    net.finish_pcap();
    let stats = net.stats();

    let args = DecodeArgs {
        files: vec![pcap.to_path_buf()],
        json: false,
        write_pcap: None,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let decode_status = decode::run(&args, &mut out, &mut err);
    let mut listing = String::from_utf8_lossy(&out).into_owned();
    listing.push_str(&String::from_utf8_lossy(&err));
    Ok(Lossy {
        lost: stats.lost,
        delivered: stats.delivered,
        decode_status,
        listing,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pcap = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("roce-lossy.pcap"));
    let r = run(&pcap, 2026)?;
    println!("3% loss, 2% reordering: all 8 WRITEs of 32 KiB and 8 SENDs completed intact; the network lost {} packets and delivered {}", r.lost, r.delivered);
    println!(
        "capture: {}\n\n$ roce decode {}",
        pcap.display(),
        pcap.display()
    );
    let lines: Vec<&str> = r.listing.lines().collect();
    for l in lines.iter().take(12) {
        println!("{l}");
    }
    if lines.len() > 24 {
        println!("... ({} more lines)", lines.len() - 24);
    }
    for l in lines.iter().skip(12.max(lines.len().saturating_sub(12))) {
        println!("{l}");
    }
    if r.decode_status != 0 {
        return Err(format!("roce decode exited {}", r.decode_status).into());
    }
    Ok(())
}
