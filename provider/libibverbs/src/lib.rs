//! `roce-ibverbs`: a drop-in `libibverbs.so.1` (rdma-core v44 ABI) over the roce software NIC.
//!
//! Unmodified programs linked against libibverbs (Debian's `ibverbs-utils`, `perftest`, anything
//! using `rdma-sys`/`ibverbs`) load this library instead of rdma-core's through
//! `LD_LIBRARY_PATH` and see one RoCE device (`rxe0` by default, see [`config`]).
//!
//! * [`abi`] — `#[repr(C)]` mirrors of the shared structs, with compile-time layout asserts.
//! * [`backend`] — the seam to the NIC engine: [`backend::Backend`] and
//!   [`backend::DeviceContext`]. [`backend::default_backend`] is [`engine::Engine`].
//! * [`engine`] — the engine behind the seam: every verb over the roce runtime
//!   (`roce_provider::runtime::Device`, one `emu::Nic` on one UDP socket, opened at the first
//!   verb that needs it). The few verbs it does not implement (multicast, for one) return
//!   `EOPNOTSUPP` with a one-time `roce:` line.
//! * `ffi` — the exported C functions (all of the crate's `unsafe` lives there).
//! * `abi/symbols-v44.txt` + `build.rs` — SONAME, version nodes and symbol versions.
//!
//! See README.md for how `libibverbs.so.1` is produced and found.
#![deny(unsafe_op_in_unsafe_fn)]
// Unit-test builds have no generated export table, so most entry points look unused there.
#![cfg_attr(test, allow(dead_code, unused_imports))]
#![allow(clippy::missing_safety_doc)] // each ffi module documents its safety contract at the top

pub mod abi;
pub mod backend;
pub mod config;
pub mod device;
pub mod engine;
mod ffi;
mod log;

include!(concat!(env!("OUT_DIR"), "/symver.rs"));
