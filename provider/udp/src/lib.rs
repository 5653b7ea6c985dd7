//! roce-udp: the UDP datapath of the roce software RoCEv2 NIC, one UDP socket per emulated NIC,
//! batched and GSO/GRO-aware, and the safe wrappers ([`os`]) over every other syscall the
//! product makes.
//!
//! * [`Socket`] binds `ADDR:4791` (IPv4 or IPv6) for one emulated NIC and sends/receives batches
//!   of [`OutDatagram`]/[`InDatagram`] with `sendmmsg`/`recvmmsg`, UDP GSO and UDP GRO.
//! * [`headers`] rebuilds the IP/UDP headers the kernel sends, so the ICRC can be computed over
//!   exactly those bytes on both sides, and decides what to do when it cannot ([`IcrcPolicy`]).
//! * [`coalesce::TxBatch`] packs engine packets into GSO runs in place, patching each ICRC for
//!   the IPv4 ID and source port really sent; [`idsolve`] is the CRC algebra behind the patch
//!   and behind [`IcrcPolicy::RecoverId`] (recovering an unseen IPv4 ID from the ICRC).
//! * [`baseline`] measures what raw UDP on loopback can do, for benchmark ratios.
//! * [`os`]: shared memory, `SCM_RIGHTS`, `poll`, `getrandom`, user IDs, `atexit`, the clock
//!   and CPU affinity, for the provider and the `roce` command.
//! * Test-only (private, `#[cfg(test)]`): `raw`, a raw IPv4 sender (`IP_HDRINCL`) with full
//!   control of ID, TOS, TTL and ports, and `capture`, an `AF_PACKET` receiver that sees full IP
//!   headers (the tests that establish the IPv4 identification facts; needs `CAP_NET_RAW`).
//!
//! Findings (what the kernel actually puts on the wire) are in `provider/udp/README.md`.
//!
//! All `unsafe` code of the workspace's syscalls is in the private `sys` module (`sys.rs`, the
//! datapath's, and `sys/os.rs`, the process-level ones), with its safety argument.
#![deny(unsafe_code)]

pub mod baseline;
#[cfg(test)]
mod capture;
pub mod cmsg;
pub mod coalesce;
pub mod datagram;
pub mod headers;
pub mod idsolve;
pub mod os;
#[cfg(test)]
mod raw;
mod socket;
pub(crate) mod sys;
pub mod waker;

pub use datagram::{split_gro, InDatagram, OutDatagram, RecvBatch, GRO_SLOT};
pub use headers::{check_icrc, HeaderFacts, IcrcCounters, IcrcPolicy, IcrcVerdict, WireHeaders};
pub use socket::{Features, Socket, SocketConfig, SourcePorts, Wait, MAX_GSO_SEGMENTS};
pub use waker::Waker;

#[cfg(test)]
mod capture_tests;

#[cfg(test)]
mod tests;
