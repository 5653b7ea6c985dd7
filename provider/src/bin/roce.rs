//! The `roce` command line. Each subcommand lives in the library (`roce_provider::<name>`)
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
    Decode(roce_provider::decode::DecodeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode(args) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let code = roce_provider::decode::run(&args, &mut out, &mut std::io::stderr());
            let _ = std::io::Write::flush(&mut out);
            ExitCode::from(code)
        }
    }
}
