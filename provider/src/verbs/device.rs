//! Devices and contexts.
use super::cq::{CompletionChannel, CqBuilder};
use super::engine::Engine;
use super::error::{Error, Result};
use super::pd::ProtectionDomain;
use roce_emu::{Counters, DeviceAttr, Gid, Mtu, Nic, PortAttr};
use std::net::IpAddr;
use std::sync::Arc;

/// How to bring up one emulated device.
///
/// ```
/// use roce_provider::verbs::{DeviceConfig, Mtu};
/// let cfg = DeviceConfig { mtu: Mtu::Mtu4096, ..DeviceConfig::new("127.0.0.2".parse().unwrap()) };
/// assert_eq!(cfg.mtu.bytes(), 4096);
/// ```
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Device name; empty picks `roceN` / `simN`.
    pub name: String,
    /// The NIC's IP address: the UDP socket binds `ip:4791`, GID index 1 is `::ffff:ip`.
    /// One device per address (use 127.0.0.1, 127.0.0.2, … on one host).
    pub ip: IpAddr,
    /// Active IB MTU of the port (rxe default on a 1500-byte netdev: 1024).
    pub mtu: Mtu,
    /// Seed of a simulated device's memory keys and initial PSNs ([`super::sim::SimFabric`]:
    /// reproducible runs), also mixed into the UDP runtime's fault injector. A device on UDP
    /// draws its keys and PSNs from the operating system (getrandom), never from this.
    pub seed: u64,
    /// UDP runtime: write every datagram sent and received to this pcap file.
    pub pcap: Option<std::path::PathBuf>,
    /// UDP runtime: fault injector, fraction of outgoing RC datagrams dropped (0.0 … 1.0).
    pub loss: f64,
    /// UDP runtime: run the background progress thread (timers and arriving packets progress
    /// when nobody polls). Default on.
    pub progress_thread: bool,
    /// UDP runtime: diagnostics (`roce: QP 0x..: what happened. What to do.`) only as
    /// `tracing` warnings, not on stderr; the `diag_*` counters count them either way. Default:
    /// `ROCE_QUIET=1` in the environment.
    pub quiet: bool,
    /// UDP runtime: share the address with other processes through the steering helper, as
    /// the drop-in library does by default (`crate::shared`). Default off: the device binds
    /// `ip:4791` itself.
    pub shared: bool,
    /// UDP runtime, shared device: datagrams to processes on this host go straight to their
    /// sockets (`crate::shared::direct`). Default on; off sends them through the helper.
    pub direct: bool,
}

impl DeviceConfig {
    /// Defaults for a device on `ip`: MTU 1024, as rxe on a standard netdev.
    pub fn new(ip: IpAddr) -> DeviceConfig {
        DeviceConfig {
            name: String::new(),
            ip,
            mtu: Mtu::Mtu1024,
            seed: 0x5eed ^ ip_seed(ip),
            pcap: None,
            loss: 0.0,
            progress_thread: true,
            quiet: std::env::var_os("ROCE_QUIET").is_some_and(|v| v == "1"),
            shared: false,
            direct: true,
        }
    }

    /// From the environment the drop-in library also reads: `ROCE_IP` (default 127.0.0.1),
    /// `ROCE_MTU` (256 … 4096, default 1024), `ROCE_DEV_NAME`, parsed by the one parser of
    /// the `ROCE_*` variables ([`crate::runtime::Config::all_from_lookup`]): an invalid value is
    /// reported on stderr and replaced by its default, as in the drop-in library. With a list
    /// in `ROCE_IP`, the first device ([`devices`] has them all).
    pub fn from_env() -> Result<DeviceConfig> {
        Ok(Self::from_runtime(&crate::runtime::Config::from_env()))
    }

    fn from_runtime(c: &crate::runtime::Config) -> DeviceConfig {
        let mut cfg = DeviceConfig::new(c.ip);
        cfg.mtu = (1..=5)
            .filter_map(Mtu::from_raw)
            .find(|m| m.bytes() == c.mtu)
            .unwrap_or(Mtu::Mtu1024);
        cfg.name = c.name.clone();
        cfg.quiet = c.quiet;
        cfg
    }

    /// Opens this device on real UDP sockets ([`Device::open`]).
    pub fn open(self) -> Result<Context> {
        Device::open(self)
    }
}

fn ip_seed(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v) => u32::from(v) as u64,
        IpAddr::V6(v) => u128::from(v) as u64,
    }
}

/// `256`, `512`, `1024`, `2048` or `4096` as an [`Mtu`].
pub fn parse_mtu(s: &str) -> Result<Mtu> {
    match s.trim().parse::<u32>() {
        Ok(256) => Ok(Mtu::Mtu256),
        Ok(512) => Ok(Mtu::Mtu512),
        Ok(1024) => Ok(Mtu::Mtu1024),
        Ok(2048) => Ok(Mtu::Mtu2048),
        Ok(4096) => Ok(Mtu::Mtu4096),
        _ => Err(Error::InvalidConfig(format!(
            "MTU {s:?} is not 256, 512, 1024, 2048 or 4096"
        ))),
    }
}

/// The devices this process would open by default, configured by the environment: one per
/// address of `ROCE_IP` ([`DeviceConfig::from_env`]). Open one with [`DeviceConfig::open`].
pub fn devices() -> Result<Vec<DeviceConfig>> {
    Ok(crate::runtime::Config::all_from_env()
        .iter()
        .map(DeviceConfig::from_runtime)
        .collect())
}

/// Entry point for emulated devices on real UDP sockets.
pub struct Device;

impl Device {
    /// Brings up an emulated NIC on `cfg.ip:4791` (a UDP socket and its progress thread) and
    /// returns its context. The device lives until the last object made from it is dropped.
    ///
    /// ```no_run
    /// use roce_provider::verbs::{Device, DeviceConfig};
    /// let ctx = Device::open(DeviceConfig::new("127.0.0.1".parse().unwrap()))?;
    /// let pd = ctx.alloc_pd()?;
    /// # Ok::<(), roce_provider::verbs::Error>(())
    /// ```
    pub fn open(cfg: DeviceConfig) -> Result<Context> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut rc = crate::runtime::Config::new(cfg.ip);
        rc.name = if cfg.name.is_empty() {
            format!(
                "roce{}",
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
        } else {
            cfg.name.clone()
        };
        rc.mtu = cfg.mtu.bytes();
        rc.pcap = cfg.pcap.clone();
        rc.loss = cfg.loss;
        rc.fault_seed ^= cfg.seed;
        rc.progress_thread = cfg.progress_thread;
        rc.quiet = cfg.quiet;
        rc.shared = cfg.shared;
        rc.direct = cfg.direct;
        let dev = crate::runtime::Device::open(rc)
            .map_err(|source| Error::OpenDevice { ip: cfg.ip, source })?;
        Ok(Context::from_engine(
            Arc::new(super::engine::UdpEngine::new(dev)),
            cfg,
        ))
    }
}

/// An open device (`struct ibv_context`). Cheap to clone; every object made from it keeps it
/// alive.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<CtxInner>,
}

pub(crate) struct CtxInner {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) cfg: DeviceConfig,
}

impl CtxInner {
    pub(crate) fn nic<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        self.engine.with_nic(f)
    }
}

impl Context {
    pub(crate) fn from_engine(engine: Arc<dyn Engine>, cfg: DeviceConfig) -> Context {
        Context {
            inner: Arc::new(CtxInner { engine, cfg }),
        }
    }

    /// Device name.
    pub fn name(&self) -> String {
        self.inner.engine.name()
    }
    /// The device's IP address.
    pub fn ip(&self) -> IpAddr {
        self.inner.cfg.ip
    }
    /// The configuration it was opened with.
    pub fn config(&self) -> &DeviceConfig {
        &self.inner.cfg
    }
    /// `ibv_query_device`.
    pub fn query_device(&self) -> DeviceAttr {
        self.inner.nic(|n| n.query_device())
    }
    /// `ibv_query_port` (port 1).
    pub fn query_port(&self) -> PortAttr {
        self.inner.nic(|n| n.query_port())
    }
    /// `ibv_query_gid`: index 0 is the link-local GID, index 1 the routable RoCEv2 GID of the
    /// device's IP address (what endpoints carry).
    pub fn gid(&self, index: usize) -> Gid {
        self.inner.nic(|n| n.query_gid(index))
    }
    /// The routable GID (index 1).
    pub fn routable_gid(&self) -> Gid {
        self.gid(1)
    }
    /// A snapshot of the device counters (rxe's names plus ours).
    pub fn counters(&self) -> Counters {
        self.inner.nic(|n| *n.counters())
    }
    /// Next asynchronous event (`ibv_get_async_event`), without blocking.
    pub fn poll_async_event(&self) -> Option<roce_emu::AsyncEvent> {
        self.inner.engine.poll_async_event()
    }
    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        ProtectionDomain::new(self)
    }
    /// `ibv_create_cq` with `cqe` entries, as a builder.
    pub fn create_cq(&self, cqe: u32) -> CqBuilder<'_> {
        CqBuilder::new(self, cqe)
    }
    /// `ibv_create_comp_channel`.
    pub fn create_comp_channel(&self) -> CompletionChannel {
        CompletionChannel::new(self)
    }
    /// The UDP runtime device underneath (runtime counters, statistics), if this context is on
    /// real sockets rather than a simulated network.
    pub fn runtime(&self) -> Option<&crate::runtime::Device> {
        self.inner.engine.runtime()
    }
    /// One round of progress (receive, timers, transmit) without blocking. Polling a CQ does
    /// this by itself; call it when waiting on something else.
    pub fn progress(&self) {
        self.inner.engine.progress();
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.name())
            .field("ip", &self.ip())
            .finish()
    }
}
