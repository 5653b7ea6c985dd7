//! roce-provider: the verbs API and the runtime that drives an emulated NIC over the UDP
//! datapath of `roce-udp`, the steering helper of shared devices, and the `roce` command line.
//!
//! # `unsafe`
//! The crate denies `unsafe` code. Every syscall goes through the safe wrappers of `roce-udp`
//! (its private `sys` modules, with their safety argument). What remains is about memory, not
//! syscalls, each allowed where it is and argued there:
//! * `verbs/mr.rs`: the registered buffer the NIC reads and writes concurrently with the
//!   program (allocation, raw-pointer copies, atomics over the bytes, `as_slice`).
//! * `verbs/cq.rs`: one slice cast from `WorkCompletion` to the `repr(transparent)` type inside.
//! * `verbs/sim.rs`: `Send` for the simulated network whose sinks are all `Send`.
//! * `ns.rs`: `unshare`/`mount` for `roce run`'s private device view.
#![deny(unsafe_code)]

pub mod bench;
pub mod cli;
pub mod decode;
pub mod entropy;
pub mod ns;
pub mod perfbench;
pub mod runtime;
pub mod shared;
pub mod verbs;
