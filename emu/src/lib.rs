//! # roce-emu: a sans-IO RoCEv2 NIC with rxe semantics
//!
//! [`Nic`] is one emulated RDMA device. It owns protection domains, memory regions, completion
//! queues, shared receive queues, address handles and queue pairs (RC, UC, UD), and implements
//! the transport exactly as Linux `rdma_rxe` does: the requester / responder / completer split
//! of `rxe_req.c`, `rxe_resp.c`, `rxe_comp.c` lives in [`qp`]'s three files.
//!
//! The core does no I/O and reads no clock (quinn-proto style): every input carries a virtual
//! [`Instant`]; datagrams come in through [`Nic::handle_datagram`] and go out through
//! [`Nic::poll_transmit`], timers through [`Nic::poll_timeout`] / [`Nic::handle_timeout`].
//! Application memory is reached only through the [`MemoryRegion`] trait after every key,
//! protection-domain, permission and bounds check, so this crate has no `unsafe`.
//!
//! [`sim`] drives several NICs over a deterministic simulated network (latency, bandwidth,
//! seeded loss, duplication, reordering, corruption) on virtual time.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod counters;
pub mod diag;
mod error;
pub mod gsi;
pub mod mem;
mod mw;
pub mod net;
mod nic;
pub(crate) mod qp;
mod queue;
pub mod sim;
mod slab;
pub mod time;
pub mod verbs;

pub use counters::Counters;
pub use diag::{AvProblem, BadRequest, Diagnostic, KeyFault, Unroutable};
pub use error::{Error, Result};
pub use mem::{MemoryRegion, Mr, VecMemory};
pub use net::{IcrcPolicy, RxMeta, Transmit};
pub use nic::{Nic, NicConfig};
pub use qp::{MAX_UNACKED_PSNS, MIN_UNACKED_PSNS};
pub use time::Instant;
pub use verbs::*;

/// Protection domain handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);
/// Completion queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cq(pub u32);
/// Shared receive queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Srq(pub u32);
/// Address handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ah(pub u32);
