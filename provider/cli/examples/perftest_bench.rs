//! `ib_write_bw -s 65536` and `ib_send_lat -s 64` through the drop-in libibverbs.so.1 next to raw
//! UDP on loopback, as ratios (see `roce_cli::perfbench`).
//!
//! ```text
//! provider/libibverbs/scripts/build-so.sh --release
//! cargo run --release -p roce-cli --example perftest_bench -- [--mtu 4096] [--secs 3] [--iters 5000]
//! ```
use roce_cli::perfbench::{print, run, Options};

fn main() {
    let mut o = Options::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--mtu" => o.mtu = v.parse().expect("--mtu N"),
            "--secs" => o.secs = v.parse().expect("--secs N"),
            "--iters" => o.lat_iters = v.parse().expect("--iters N"),
            "--lib-dir" => o.lib_dir = Some(v.into()),
            a => panic!("unknown argument {a}"),
        }
        i += 2;
    }
    match run(&o, &mut std::io::stderr()) {
        Ok(r) => print(&r, &mut std::io::stdout()),
        Err(e) => {
            eprintln!("perftest_bench: {e}");
            std::process::exit(1);
        }
    }
}
