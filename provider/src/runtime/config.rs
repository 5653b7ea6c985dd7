//! [`Config`]: the settings of one device runtime, from code or from the environment.

use roce_udp::IcrcPolicy;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Settings of one [`super::Device`]. [`Config::from_env`] reads the `ROCE_*` variables (see the
/// module docs of [`super`] for the table); [`Config::new`] gives the defaults for an address.
#[derive(Clone, Debug)]
pub struct Config {
    /// The NIC's IP address (socket `ip:4791`; GID index 1).
    pub ip: IpAddr,
    /// Device name (`rxe0`): used for the statistics file and `roce stat`.
    pub name: String,
    /// Active IB MTU in bytes (256 … 4096).
    pub mtu: u32,
    /// Write every datagram sent and received to this pcap file.
    pub pcap: Option<PathBuf>,
    /// Fault injector: fraction of outgoing datagrams dropped (0.0 … 1.0).
    pub loss: f64,
    /// Fault injector: fraction of outgoing datagrams held back and sent after the next one.
    pub reorder: f64,
    /// Seed of the fault injector.
    pub fault_seed: u64,
    /// Apply the fault injector to UC and UD datagrams too (default: RC only, because the
    /// unreliable transports have no recovery and the ping-pong tools would wait forever).
    pub fault_all: bool,
    /// Apply the fault injector to plain RC ACK/NAK packets too (default off, see
    /// [`super::Fault::with_acks`]).
    pub fault_acks: bool,
    /// What to do with received IPv4 datagrams whose identification is unknown.
    pub icrc_policy: IcrcPolicy,
    /// How long the progress thread spins (polling the socket) after activity before it sleeps.
    pub spin: Duration,
    /// Run the background progress thread (timers, event-driven programs). Default on.
    pub progress_thread: bool,
    /// Lowest limit on unacknowledged PSNs an RC requester goes down to after a loss (emu
    /// README, deviation 12). Default 128 = rxe's fixed limit, never lowered: this driver sends a
    /// PSN-sequence NAK as soon as the gap shows and looks for one between pieces of a long
    /// burst, so a loss costs a fraction of a window without shrinking it (`ROCE_UNACKED_FLOOR`).
    pub min_unacked_psns: u32,
    /// How many times the connection manager re-sends a REQ, REP, DREQ or SIDR_REQ before it
    /// gives up (15, as the kernel's `CMA_MAX_CM_RETRIES`; `ROCE_CM_RETRIES`, for tests of the
    /// failure paths, which otherwise take minutes).
    pub cm_retries: u8,
    /// Share the device with other processes on the same address through a steering helper
    /// (`crate::shared`): the default from the environment (`ROCE_SHARED=0` turns it off),
    /// off in [`Config::new`]. Off: the device binds `ip:4791` itself and a second process on
    /// that address fails to open it.
    pub shared: bool,
    /// `ROCE_SHARED` was set to 1 (sharing asked for, not only the default): no fallback to an
    /// unshared device when the helper's executable cannot be found.
    pub shared_asked: bool,
    /// On a shared device, send datagrams for the QPs of processes on this host (this device's
    /// or another shared device's) straight to their sockets, not through the steering helper
    /// (`ROCE_DIRECT`, default on; `crate::shared::direct`).
    pub direct: bool,
    /// Diagnostics only as `tracing` warnings, not on stderr (`ROCE_QUIET=1`).
    pub quiet: bool,
    /// Directory for the statistics file read by `roce stat` (`None`: [`default_stat_dir`]).
    pub stat_dir: Option<PathBuf>,
    /// How often the progress thread rewrites the statistics file.
    pub stat_interval: Duration,
}

impl Config {
    /// Defaults for a device at `ip`.
    pub fn new(ip: IpAddr) -> Config {
        Config {
            ip,
            name: DEFAULT_DEV_NAME.into(),
            mtu: 1024,
            pcap: None,
            loss: 0.0,
            reorder: 0.0,
            fault_seed: 0x5eed_f00d,
            fault_all: false,
            fault_acks: false,
            icrc_policy: IcrcPolicy::RecoverId,
            spin: Duration::from_micros(50),
            progress_thread: true,
            min_unacked_psns: roce_emu::MAX_UNACKED_PSNS,
            cm_retries: 15,
            shared: false,
            shared_asked: false,
            direct: true,
            quiet: std::env::var_os("ROCE_QUIET").is_some_and(|v| v == "1"),
            stat_dir: None,
            stat_interval: Duration::from_millis(500),
        }
    }

    /// The configuration from the `ROCE_*` environment variables (invalid values are reported on
    /// stderr and replaced by defaults): the first device's when `ROCE_IP` lists several.
    pub fn from_env() -> Config {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Config::from_env`] with a lookup function (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        Self::all_from_lookup(get).swap_remove(0)
    }

    /// Every device of the process, from the environment (see [`Config::all_from_lookup`]).
    pub fn all_from_env() -> Vec<Config> {
        Self::all_from_lookup(|k| std::env::var(k).ok())
    }

    /// The one parser of the `ROCE_*` variables, for the runtime, the Rust API and the drop-in
    /// library alike; one failure policy: an invalid value is reported on stderr (`roce: …`)
    /// and replaced by its default. Several devices, as a host with several NICs has:
    /// `ROCE_IP` may list addresses separated by commas (`127.0.0.1,127.0.0.2`), one device
    /// each, named from `ROCE_DEV_NAME` (a list of names, or one name whose number counts up:
    /// `rxe0`, `rxe1`); the other variables apply to all. A repeated address is reported and
    /// skipped. Never empty.
    pub fn all_from_lookup(get: impl Fn(&str) -> Option<String>) -> Vec<Config> {
        let ips = get("ROCE_IP").unwrap_or_default();
        if !ips.contains(',') {
            return vec![Self::one(&get)];
        }
        let names = get("ROCE_DEV_NAME")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_DEV_NAME.to_string());
        let names: Vec<&str> = names.split(',').map(str::trim).collect();
        let mut out: Vec<Config> = Vec::new();
        for ip in ips.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let i = out.len();
            let name = match names.get(i) {
                Some(n) if names.len() > 1 => n.to_string(),
                _ => numbered(names[0], i),
            };
            let c = Self::one(&|k: &str| match k {
                "ROCE_IP" => Some(ip.to_string()),
                "ROCE_DEV_NAME" => Some(name.clone()),
                _ => get(k),
            });
            if out.iter().any(|o| o.ip == c.ip) {
                eprintln!("roce: ROCE_IP lists {} twice; one device", c.ip);
                continue;
            }
            out.push(c);
        }
        if out.is_empty() {
            out.push(Self::one(&|k: &str| {
                if k == "ROCE_IP" {
                    None
                } else {
                    get(k)
                }
            }));
        }
        out
    }

    /// One device's configuration (`ROCE_IP` one address).
    fn one(get: &dyn Fn(&str) -> Option<String>) -> Config {
        let warn = |m: String| eprintln!("roce: {m}");
        let ip = match get("ROCE_IP") {
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(s) => s.trim().parse().unwrap_or_else(|_| {
                warn(format!(
                    "ROCE_IP={s:?} is not an IP address; using 127.0.0.1"
                ));
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            }),
        };
        let mut c = Config::new(ip);
        if let Some(n) = get("ROCE_DEV_NAME").filter(|s| !s.is_empty()) {
            // IBV_SYSFS_NAME_MAX (64) with its NUL
            if n.len() >= 64 || n.contains('\0') {
                warn(format!(
                    "ROCE_DEV_NAME={n:?} is too long; using {DEFAULT_DEV_NAME}"
                ));
            } else {
                c.name = n;
            }
        }
        c.quiet = get("ROCE_QUIET").is_some_and(|v| v == "1");
        if let Some(s) = get("ROCE_MTU") {
            match s.trim().parse::<u32>() {
                Ok(m @ (256 | 512 | 1024 | 2048 | 4096)) => c.mtu = m,
                _ => warn(format!(
                    "ROCE_MTU={s:?} is not 256/512/1024/2048/4096; using 1024"
                )),
            }
        }
        c.pcap = get("ROCE_PCAP")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        let frac = |k: &str| -> f64 {
            match get(k) {
                None => 0.0,
                Some(s) => parse_fraction(&s).unwrap_or_else(|e| {
                    warn(format!("{k}={s:?}: {e}; using 0"));
                    0.0
                }),
            }
        };
        c.loss = frac("ROCE_LOSS");
        c.reorder = frac("ROCE_REORDER");
        if let Some(s) = get("ROCE_FAULT_SEED") {
            let t = s.trim();
            let v = match t.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => t.parse().ok(),
            };
            match v {
                Some(v) => c.fault_seed = v,
                None => warn(format!("ROCE_FAULT_SEED={s:?} is not a number")),
            }
        }
        c.fault_all = get("ROCE_FAULT_ALL").is_some_and(|v| v == "1");
        c.fault_acks = get("ROCE_FAULT_ACKS").is_some_and(|v| v == "1");
        if let Some(s) = get("ROCE_ICRC_POLICY") {
            c.icrc_policy = match s.trim().to_ascii_lowercase().as_str() {
                "strict" => IcrcPolicy::Strict,
                "assume-zero" | "assume_zero" => IcrcPolicy::AssumeZeroElseAccept,
                "trust" | "skip" => IcrcPolicy::Trust,
                "recover" | "recover-id" | "recover_id" | "default" => IcrcPolicy::RecoverId,
                _ => {
                    warn(format!(
                        "ROCE_ICRC_POLICY={s:?}: use recover, strict, assume-zero or trust; using recover"
                    ));
                    IcrcPolicy::RecoverId
                }
            };
        }
        if let Some(s) = get("ROCE_SPIN_US") {
            match s.trim().parse::<u64>() {
                Ok(us) => c.spin = Duration::from_micros(us),
                Err(_) => warn(format!(
                    "ROCE_SPIN_US={s:?} is not a number of microseconds"
                )),
            }
        }
        if let Some(s) = get("ROCE_UNACKED_FLOOR") {
            match s.trim().parse::<u32>() {
                Ok(n) if (1..=roce_emu::MAX_UNACKED_PSNS).contains(&n) => c.min_unacked_psns = n,
                _ => warn(format!(
                    "ROCE_UNACKED_FLOOR={s:?}: a number of PSNs, 1 to 128"
                )),
            }
        }
        if let Some(s) = get("ROCE_CM_RETRIES") {
            match s.trim().parse::<u8>() {
                Ok(n) if n <= 15 => c.cm_retries = n,
                _ => warn(format!(
                    "ROCE_CM_RETRIES={s:?}: a number of retries, 0 to 15"
                )),
            }
        }
        c.shared = !get("ROCE_SHARED").is_some_and(|v| v == "0");
        c.shared_asked = get("ROCE_SHARED").is_some_and(|v| v == "1");
        if get("ROCE_DIRECT").is_some_and(|v| v == "0") {
            c.direct = false;
        }
        if get("ROCE_PROGRESS_THREAD").is_some_and(|v| v == "0") {
            c.progress_thread = false;
        }
        c.stat_dir = get("ROCE_STAT_DIR")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        c
    }

    /// The netdev MTU `emu` is configured with (IB MTU + 80 header bytes, as rxe derives it).
    pub fn netdev_mtu(&self) -> u32 {
        self.mtu + 80
    }
}

/// The default device name: scripts written for kernel soft-RoCE (`-d rxe0`) run unchanged.
pub const DEFAULT_DEV_NAME: &str = "rxe0";

/// `base` with its trailing number (0 if none) plus `i`: `rxe0` → `rxe1`, `mlx` → `mlx1`.
fn numbered(base: &str, i: usize) -> String {
    if i == 0 {
        return base.to_string();
    }
    let stem = base.trim_end_matches(|c: char| c.is_ascii_digit());
    let n: usize = base[stem.len()..].parse().unwrap_or(0);
    format!("{stem}{}", n + i)
}

/// A fraction 0..1 written as `0.005` or `0.5%` (`ROCE_LOSS`, `roce bench --loss`).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("not a fraction 0..1 (or N%)".into()),
    }
}

/// Where statistics files live: `$ROCE_STAT_DIR`, else `$XDG_RUNTIME_DIR/roce`, else
/// `/tmp/roce-<uid>`.
pub fn default_stat_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ROCE_STAT_DIR").filter(|s| !s.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()) {
        return PathBuf::from(d).join("roce");
    }
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("roce-{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn env_parsing() {
        let m: HashMap<&str, &str> = [
            ("ROCE_IP", "127.0.0.2"),
            ("ROCE_MTU", "4096"),
            ("ROCE_LOSS", "2%"),
            ("ROCE_REORDER", "0.01"),
            ("ROCE_ICRC_POLICY", "assume-zero"),
            ("ROCE_FAULT_SEED", "0x10"),
        ]
        .into_iter()
        .collect();
        let c = Config::from_lookup(|k| m.get(k).map(|s| s.to_string()));
        assert_eq!(c.ip, "127.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(c.mtu, 4096);
        assert!((c.loss - 0.02).abs() < 1e-9);
        assert!((c.reorder - 0.01).abs() < 1e-9);
        assert_eq!(c.icrc_policy, IcrcPolicy::AssumeZeroElseAccept);
        let d = Config::from_lookup(|_| None);
        assert_eq!(d.icrc_policy, IcrcPolicy::RecoverId, "the default");
        assert_eq!(c.fault_seed, 16);
        assert_eq!(c.netdev_mtu(), 4176);
    }
}
