//! roce-provider: the verbs API ([`verbs`]) and the runtime ([`runtime`]) that drives an
//! emulated NIC over the UDP datapath of `roce-udp`, and the steering helper of shared devices
//! ([`shared`]; the `roce` binary of `roce-cli` runs it as `roce steer`). The drop-in C libraries
//! are `roce-ibverbs` (`provider/libibverbs`), the command line is `roce-cli` (`provider/cli`).
//!
//! # `unsafe`
//! The crate denies `unsafe` code. Every syscall goes through the safe wrappers of `roce-udp`
//! (its private `sys` modules, with their safety argument). What remains is about memory, not
//! syscalls, each allowed where it is and argued there:
//! * `verbs/mr.rs`: the registered buffer the NIC reads and writes concurrently with the
//!   program (allocation, raw-pointer copies, atomics over the bytes, `as_slice`).
//! * `verbs/cq.rs`: one slice cast from `WorkCompletion` to the `repr(transparent)` type inside.
//! * `verbs/sim.rs`: `Send` for the simulated network whose sinks are all `Send`.
#![deny(unsafe_code)]

pub mod entropy;
pub mod runtime;
pub mod shared;
pub mod verbs;
