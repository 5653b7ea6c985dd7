//! A safe Rust verbs API over the emulated RoCEv2 NIC, shaped like the `ibverbs` crate:
//! device → [`Context`] → [`ProtectionDomain`] → [`MemoryRegion`] / [`CompletionQueue`] /
//! queue pair builder → [`PreparedQueuePair`] → `handshake(remote endpoint)` → [`QueuePair`].
//!
//! Devices run either on real UDP sockets ([`Device::open`]: one NIC per IP address on port
//! 4791, e.g. 127.0.0.1 and 127.0.0.2 on one host, driven by [`crate::runtime`]) or on a
//! deterministic simulated network ([`sim::SimFabric`]: virtual time, seeded loss, pcap). The
//! API is the same on both.
//!
//! Safety: memory regions own their buffers and share them with the device, so no work request
//! can reach freed memory; objects keep what they were made from alive (a QP its PD and CQs, a
//! CQ its context), so drop order never matters. Nothing here needs `unsafe` from the caller.
//!
//! ```
//! use roce_provider::verbs::{sim::SimFabric, AccessFlags, DeviceConfig, QpType};
//! use std::time::Duration;
//!
//! // Two devices on a simulated network (use `Device::open` for real UDP sockets).
//! let net = SimFabric::new(42, Default::default());
//! let a = net.open(DeviceConfig::new("10.0.0.1".parse().unwrap()))?;
//! let b = net.open(DeviceConfig::new("10.0.0.2".parse().unwrap()))?;
//!
//! let (pd_a, pd_b) = (a.alloc_pd()?, b.alloc_pd()?);
//! let (cq_a, cq_b) = (a.create_cq(64).build()?, b.create_cq(64).build()?);
//! let qp_a = pd_a.create_qp(&cq_a, &cq_a, QpType::Rc).build()?;
//! let qp_b = pd_b.create_qp(&cq_b, &cq_b, QpType::Rc).build()?;
//! let (ep_a, ep_b) = (qp_a.endpoint(), qp_b.endpoint()); // exchange out of band
//! let qp_a = qp_a.handshake(ep_b)?;
//! let qp_b = qp_b.handshake(ep_a)?;
//!
//! let src = pd_a.register(b"hello, rdma".to_vec(), AccessFlags::LOCAL_WRITE)?;
//! let dst = pd_b.allocate(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
//! qp_a.post_write(&[src.slice(..)], dst.remote(), 1)?;   // RDMA WRITE into b's region
//! let wc = cq_a.wait_one(Duration::from_secs(5))?;
//! wc.result()?;
//! assert_eq!(&dst.to_vec()[..11], b"hello, rdma");
//! # Ok::<(), roce_provider::verbs::Error>(())
//! ```
pub mod cm;
mod cq;
mod device;
pub(crate) mod engine;
mod error;
pub mod exchange;
mod mr;
mod mw;
mod pd;
mod qp;
pub mod sim;
mod srq;

pub use cq::{CompletionChannel, CompletionQueue, CqBuilder, WorkCompletion};
pub use device::{devices, parse_mtu, Context, Device, DeviceConfig};
pub use error::{Error, Result};
pub use mr::{LocalSlice, MemoryRegion, RemoteSlice, ALLOC_ALIGN};
pub use mw::MemoryWindow;
pub use pd::{grh_source_gid, AddressHandle, ProtectionDomain};
pub use qp::{
    Opcode, PreparedQueuePair, QueuePair, QueuePairBuilder, QueuePairEndpoint, SendRequest, UdDest,
    DEFAULT_QKEY, FLUSH_GLOBAL, FLUSH_MR, FLUSH_PERSISTENT, FLUSH_RANGE,
};
pub use roce_emu::{
    AccessFlags, AhAttr, AsyncEvent, Counters, DeviceAttr, Gid, Mtu, MwType, PortAttr, QpAttr,
    QpAttrMask, QpCap, QpState, QpType, SrqAttr, WcFlags, WcOpcode, WcStatus,
};
pub use srq::{SharedReceiveQueue, SrqBuilder};

#[cfg(test)]
mod tests;
