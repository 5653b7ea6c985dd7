//! roce-cli: the `roce` command line (`src/bin/roce.rs` only dispatches). Each subcommand lives
//! here with its own `clap::Args` struct:
//! * [`commands`]: `roce run` (with [`ns`], its private device view), `roce devices`,
//!   `roce stat`, and the hidden `roce steer` (the steering helper of a shared device, whose
//!   logic is `roce_provider::shared`; the provider spawns this binary to run it).
//! * [`decode`]: `roce decode`, RoCE packets of pcap/pcapng captures with their ICRC verdicts.
//! * [`bench`]: `roce bench`, the emulated NIC next to the raw UDP ceiling of this machine, and
//!   [`perfbench`], perftest through `roce run` against the same baselines.
//!
//! # `unsafe`
//! Denied, except in [`ns`]: `unshare` and `mount` for `roce run`'s private mount namespace,
//! argued there. They stay with the command that needs them (they run in `roce run` before it
//! `exec`s the program) rather than among the datapath's wrappers in `roce-udp`.
#![deny(unsafe_code)]

pub mod bench;
pub mod commands;
pub mod decode;
pub mod ns;
pub mod perfbench;
