//! # roce-wire: the RoCEv2 wire format, to the bit
//!
//! Two layers, in the style of smoltcp's `wire` module:
//!
//! * **Packet views** (`bth::Packet<T>`, `reth::Packet<T>`, …) are zero-copy, typed windows over
//!   bytes. `new_unchecked` wraps a buffer, `check_len` validates its length, and once `check_len`
//!   has returned `Ok` no accessor or setter can panic. `new_checked` does both and is what
//!   untrusted input must go through. Views judge nothing: they expose every field ever defined.
//! * **Reprs** (`bth::Repr`, `transport::Repr`, …) are the high-level meaning of a well-formed
//!   packet. `Repr::parse` never panics; `Repr::emit` never panics on a buffer of exactly
//!   `buffer_len()` bytes.
//!
//! The [`opcode`] table (256 entries, as in the kernel's `rxe_opcode.c`) drives header layout:
//! nobody computes header offsets by hand, and each header's bytes are read and written only
//! by its own module (the transport parser and the senders' fast paths, such as
//! [`bth::fast`], call them). [`Psn`] is a 24-bit serial number, [`Qpn`] a 24-bit queue pair
//! number. [`ip`] holds the IPv4, IPv6 and UDP headers RoCEv2 travels in, and [`icrc`] computes
//! the invariant CRC over masked IPv4/IPv6/GRH, UDP and BTH headers exactly as kernel rxe and
//! ConnectX do. With the default `std` feature, [`frame`] finds RoCE
//! inside Ethernet, 802.1Q, Linux cooked and raw-IP frames (L2 parsed by `pnet_packet`), and
//! [`pcap`] reads pcap/pcapng and writes pcap files that Wireshark dissects as InfiniBand.
//!
//! Above the transport, [`mad`] is the 24-byte MAD common header of the 256-byte management
//! datagrams sent to QP 1, [`cm`] the IB CM messages (REQ, MRA, REJ, REP, RTU, DREQ, DREP,
//! SIDR_REQ, SIDR_REP; IBA vol 1 chapter 12) with every field at its bit offset, and [`cma`]
//! what kernel rdma_cm adds on top: service IDs from port spaces and ports, and the `cma_hdr`
//! carrying the IP addresses in REQ and SIDR_REQ private data.
//!
//! The crate allocates nothing on the parse/emit path. Its only `unsafe` is one 16-byte store
//! in the ICRC routine (`store16`, with its safety argument and the measurement that asked for it).
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm;
pub mod cma;
pub mod cnp;
pub mod deth;
mod error;
pub mod feth;
pub mod field;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ip;
pub mod mad;
pub mod opcode;
mod psn;
mod qpn;
pub mod rdeth;
pub mod reth;
mod store16;
pub mod transport;
pub mod xrceth;

#[cfg(feature = "std")]
pub mod frame;
#[cfg(feature = "std")]
pub mod pcap;

pub use error::{Error, Result};
pub use opcode::{OpFlags, OpInfo, Opcode, Support, Transport};
pub use psn::Psn;
pub use qpn::Qpn;

/// Bytes from hex digits (whitespace ignored): the unit tests' packet vectors.
#[cfg(test)]
pub(crate) fn test_hex(s: &str) -> std::vec::Vec<u8> {
    let s: std::string::String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// UDP destination port of RoCEv2 (IANA "roce").
pub const ROCE_V2_UDP_PORT: u16 = 4791;
/// EtherType of RoCEv1 (GRH + BTH directly over Ethernet).
pub const ROCE_V1_ETHERTYPE: u16 = 0x8915;
/// Default partition key, full member (`0xFFFF`), which rxe always sends.
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// Size of the invariant CRC trailer.
pub const ICRC_LEN: usize = 4;
/// UDP source port base of rxe: `0xC000 | hash(qpn)`.
pub const ROCE_V2_SPORT_BASE: u16 = 0xC000;
