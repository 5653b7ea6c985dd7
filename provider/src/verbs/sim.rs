//! Devices on a deterministic simulated network ([`roce_emu::sim::SimNet`]): virtual time,
//! seeded loss / duplication / reordering / corruption, and a pcap of every delivered packet.
//!
//! Every blocking call (`CompletionQueue::wait`, `CompletionChannel::get_cq_event`) advances
//! virtual time to the next event instead of sleeping, so retransmission timeouts cost nothing
//! and a run with the same seed is the same run, packet for packet.
//!
//! ```
//! use roce_provider::verbs::sim::{LinkConfig, SimFabric};
//! use roce_provider::verbs::DeviceConfig;
//!
//! let fabric = SimFabric::new(7, LinkConfig { loss: 0.01, ..LinkConfig::default() });
//! let a = fabric.open(DeviceConfig::new("10.0.0.1".parse().unwrap())).unwrap();
//! let b = fabric.open(DeviceConfig::new("10.0.0.2".parse().unwrap())).unwrap();
//! assert_ne!(a.gid(1), b.gid(1));
//! ```
use super::device::{Context, DeviceConfig};
use super::engine::{CompHandler, Engine};
use super::error::{Error, Result};
pub use roce_emu::sim::{LinkConfig, SimStats};
use roce_emu::sim::{PcapSink, SimNet};
use roce_emu::{Cq, Nic, NicConfig, SendWr, WorkCompletion};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A simulated network shared by the devices opened on it. Cheap to clone.
#[derive(Clone)]
pub struct SimFabric {
    net: Arc<Mutex<SendNet>>,
}

/// `SimNet` is not `Send` only because its boxed sink and filter may not be.
struct SendNet(SimNet);
// SAFETY: the only sinks ever installed (`capture_pcap`, `finish_pcap`) are `Send`
// (`PcapSink<BufWriter<File>>`, `NullSink`) and no filter is installed; everything else in
// `SimNet` is `Send`. The network is only reached through the mutex.
#[allow(unsafe_code)] // a marker, not a syscall (lib.rs docs)
unsafe impl Send for SendNet {}
impl std::ops::Deref for SendNet {
    type Target = SimNet;
    fn deref(&self) -> &SimNet {
        &self.0
    }
}
impl std::ops::DerefMut for SendNet {
    fn deref_mut(&mut self) -> &mut SimNet {
        &mut self.0
    }
}

impl SimFabric {
    /// An empty network with `seed` and the link properties of every pair of devices.
    pub fn new(seed: u64, link: LinkConfig) -> SimFabric {
        SimFabric {
            net: Arc::new(Mutex::new(SendNet(SimNet::new(seed, link)))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SendNet> {
        self.net.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a device with `cfg` (its `ip` is its address on this network; no socket is opened).
    pub fn open(&self, cfg: DeviceConfig) -> Result<Context> {
        let mut nc = NicConfig::new(cfg.ip);
        nc.netdev_mtu = cfg.mtu.bytes() + 80;
        nc.seed = cfg.seed;
        let mut net = self.lock();
        if net.nics.iter().any(|n| n.config().ip == cfg.ip) {
            return Err(Error::InvalidConfig(format!(
                "{} is already on this simulated network",
                cfg.ip
            )));
        }
        let index = net.add_nic(Nic::new(nc));
        drop(net);
        let name = if cfg.name.is_empty() {
            format!("sim{index}")
        } else {
            cfg.name.clone()
        };
        Ok(Context::from_engine(
            Arc::new(SimDevice {
                fabric: self.clone(),
                index,
                name,
                handlers: Mutex::new(HashMap::new()),
            }),
            cfg,
        ))
    }

    /// Writes every delivered datagram from now on to a pcap file at `path` (Ethernet framing,
    /// the IP/UDP headers the ICRC covers; `roce decode` and Wireshark read it). The file is
    /// complete once [`SimFabric::finish_pcap`] is called or the fabric is dropped.
    pub fn capture_pcap(&self, path: impl AsRef<Path>) -> Result<()> {
        let sink = PcapSink::create(path.as_ref()).map_err(|e| {
            Error::InvalidConfig(format!("cannot create {}: {e:?}", path.as_ref().display()))
        })?;
        self.lock().set_sink(Box::new(sink));
        Ok(())
    }

    /// Flushes and closes the pcap file.
    pub fn finish_pcap(&self) {
        // Replacing the sink drops (and so flushes) the old one.
        self.lock().set_sink(Box::new(NullSink));
    }

    /// Changes the link properties for every pair of devices.
    pub fn set_link(&self, link: LinkConfig) {
        self.lock().set_default_link(link);
    }

    /// Network statistics (transmitted, delivered, lost, …).
    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// Current virtual time since the start, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.lock().now.as_nanos()
    }

    /// The seed (print it when something fails).
    pub fn seed(&self) -> u64 {
        self.lock().seed()
    }
}

struct NullSink;
impl roce_emu::sim::PacketSink for NullSink {
    fn packet(
        &mut self,
        _: roce_emu::Instant,
        _: std::net::IpAddr,
        _: std::net::IpAddr,
        _: u16,
        _: &[u8],
    ) {
    }
}

struct SimDevice {
    fabric: SimFabric,
    index: usize,
    name: String,
    handlers: Mutex<HashMap<Cq, CompHandler>>,
}

impl SimDevice {
    /// Hands this NIC's completion-channel notifications to their handlers.
    fn dispatch(&self, net: &mut SimNet) {
        let nic = &mut net.nics[self.index];
        let mut evs = Vec::new();
        while let Some(cq) = nic.poll_comp_event() {
            evs.push(cq);
        }
        if evs.is_empty() {
            return;
        }
        let h = self.handlers.lock().unwrap_or_else(|e| e.into_inner());
        for cq in evs {
            if let Some(f) = h.get(&cq) {
                f();
            }
        }
    }
}

impl Engine for SimDevice {
    fn with_nic_dyn(&self, f: &mut dyn FnMut(&mut Nic)) {
        let mut net = self.fabric.lock();
        f(&mut net.nics[self.index]);
        net.pump();
        self.dispatch(&mut net);
    }
    fn post_send(&self, qpn: u32, wr: &SendWr<'_>, inline: Option<&[u8]>) -> roce_emu::Result<()> {
        let mut net = self.fabric.lock();
        net.nics[self.index].post_send_inline(qpn, wr, inline)?;
        net.pump();
        self.dispatch(&mut net);
        Ok(())
    }
    fn poll_cq(&self, cq: Cq, wc: &mut [WorkCompletion]) -> usize {
        let mut net = self.fabric.lock();
        let n = net.nics[self.index].poll_cq(cq, wc);
        if n > 0 || wc.is_empty() {
            return n;
        }
        net.step();
        self.dispatch(&mut net);
        net.nics[self.index].poll_cq(cq, wc)
    }
    fn progress(&self) {
        let mut net = self.fabric.lock();
        net.step();
        self.dispatch(&mut net);
    }
    fn background(&self) -> bool {
        false
    }
    fn park(&self, _timeout: Duration) {
        // Virtual time: progress() already jumped to the next event; let other threads post.
        std::thread::yield_now();
    }
    fn set_comp_handler(&self, cq: Cq, h: Option<CompHandler>) {
        let mut m = self.handlers.lock().unwrap_or_else(|e| e.into_inner());
        match h {
            Some(h) => m.insert(cq, h),
            None => m.remove(&cq),
        };
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn poll_async_event(&self) -> Option<roce_emu::AsyncEvent> {
        self.fabric.lock().nics[self.index].poll_event()
    }
}
