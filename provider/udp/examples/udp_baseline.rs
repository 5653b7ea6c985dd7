//! Raw UDP loopback baseline (127.0.0.1 -> 127.0.0.2), for comparing RoCE numbers against.
//!
//! ```text
//! cargo run --release -p roce-udp --example udp_baseline -- [SECONDS] [SIZE...]
//! ```
//! SIZE is the UDP payload in bytes (default: 124 1084 4156, i.e. 64/1024/4096 B RoCE
//! payloads plus 60 B of headers). Each measurement runs SECONDS (default 1) and stops by itself.
//! `TxBatch` is not raw UDP but our datapath as the engine drives it (copy, ICRC patch, GSO).
use std::time::Duration;

use roce_udp::baseline::{pingpong, throughput, Technique};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let mut sizes: Vec<usize> = args.filter_map(|s| s.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![124, 1084, 4156];
    }
    let d = Duration::from_secs_f64(secs);
    for &size in &sizes {
        for t in [
            Technique::Mmsg { batch: 32 },
            Technique::GsoGro { segments: 0 },
            Technique::TxBatch,
        ] {
            println!("{}", throughput(size, t, d)?);
        }
    }
    println!("{}", pingpong(64, 20_000)?);
    Ok(())
}
