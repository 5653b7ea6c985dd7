//! The `roce` command line. Each subcommand lives in the library (`roce_cli::<name>`)
//! with its own `clap::Args` struct; this file only dispatches.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Tools for the pure-Rust RoCEv2 software NIC.
#[derive(Debug, Parser)]
#[command(name = "roce", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode RoCE packets in pcap/pcapng captures and check their ICRCs.
    ///
    /// Exit status: 0 all complete packets valid, 1 some ICRC bad, 2 a file unreadable.
    Decode(roce_cli::decode::DecodeArgs),
    /// Benchmark RC Write/Read/Send bandwidth and Send/Recv latency between two emulated NICs
    /// (127.0.0.1 and 127.0.0.2 by default), each next to the raw UDP ceiling of this machine.
    ///
    /// Exit status: 0 done, 1 a `--check` target missed, 2 error.
    Bench(roce_cli::bench::BenchArgs),
    /// Run an unmodified verbs program on an emulated NIC (sets LD_LIBRARY_PATH and ROCE_*).
    ///
    /// Example: roce run --ip 127.0.0.2 -- ibv_rc_pingpong -g 1 127.0.0.1
    Run(roce_cli::commands::RunArgs),
    /// List the emulated devices running now.
    Devices(roce_cli::commands::DevicesArgs),
    /// Counters of the running emulated devices (like `rdma statistic`).
    Stat(roce_cli::commands::StatArgs),
    /// The steering helper of a device shared by several processes (started by them).
    #[command(hide = true)]
    Steer(roce_cli::commands::SteerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode(args) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let code = roce_cli::decode::run(&args, &mut out, &mut std::io::stderr());
            let _ = std::io::Write::flush(&mut out);
            ExitCode::from(code)
        }
        Command::Bench(args) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let code = roce_cli::bench::run(&args, &mut out, &mut std::io::stderr());
            ExitCode::from(code)
        }
        Command::Run(args) => ExitCode::from(roce_cli::commands::run(&args)),
        Command::Devices(args) => {
            ExitCode::from(roce_cli::commands::devices(&args, &mut std::io::stdout()))
        }
        Command::Stat(args) => {
            ExitCode::from(roce_cli::commands::stat(&args, &mut std::io::stdout()))
        }
        Command::Steer(args) => ExitCode::from(roce_cli::commands::steer(&args)),
    }
}
