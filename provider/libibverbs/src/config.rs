//! Device configuration from the environment, read once per process.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `ROCE_IP` | `127.0.0.1` | the NIC's IP address (IPv4 or IPv6); gives GID index 1. A comma-separated list gives one device per address (`rxe0`, `rxe1`, …) |
//! | `ROCE_DEV_NAME` | `rxe0` | the device name (`ibv_get_device_name`, `-d` of the tools) |
//! | `ROCE_MTU` | `1024` | the port's active MTU: 256, 512, 1024, 2048 or 4096 |
//! | `ROCE_QUIET` | unset | `1` silences the one-time "verb not implemented" warnings |
//!
//! The name defaults to `rxe0` so that scripts written for kernel soft-RoCE (`-d rxe0`) run
//! unchanged; `board_id`, `fw_ver` and `node_desc` say that it is this emulator.
//!
//! The GID table mirrors what rxe shows for a netdev with an IPv4 address: index 0 is the
//! link-local `fe80::/64` GID with the EUI-64 interface id of the port's MAC, index 1 the
//! IPv4-mapped `::ffff:a.b.c.d`, both RoCE v2. With an IPv6 `ROCE_IP`, index 1 is that address.
//! The MAC is synthetic and locally administered: `02:00:` + the 4 IPv4 bytes (for IPv6, the
//! last 4 bytes of the address), so two emulated NICs on 127.0.0.1 and 127.0.0.2 differ.

#![forbid(unsafe_code)]

use roce_provider::runtime::Config;
use std::net::IpAddr;

pub use roce_provider::runtime::DEFAULT_DEV_NAME;

#[derive(Clone, Debug)]
pub struct DeviceConfig {
    pub name: String,
    pub ip: IpAddr,
    /// `IBV_MTU_*` value of the active MTU.
    pub active_mtu: u32,
    pub mac: [u8; 6],
    pub quiet: bool,
}

impl DeviceConfig {
    pub fn from_env() -> DeviceConfig {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Every device of the process, from the environment (see [`DeviceConfig::all_from_lookup`]).
    pub fn all_from_env() -> Vec<DeviceConfig> {
        Self::all_from_lookup(|k| std::env::var(k).ok())
    }

    /// Several devices, as a host with several NICs has: `ROCE_IP` may list addresses
    /// separated by commas (`127.0.0.1,127.0.0.2`), one device each, named from
    /// `ROCE_DEV_NAME` (a list of names, or one name whose number counts up: `rxe0`, `rxe1`).
    /// `ROCE_MTU` applies to all. Parsed by the runtime's one parser
    /// ([`roce_provider::runtime::Config::all_from_lookup`]), with its failure policy.
    pub fn all_from_lookup(get: impl Fn(&str) -> Option<String>) -> Vec<DeviceConfig> {
        Config::all_from_lookup(get)
            .iter()
            .map(Self::from_runtime)
            .collect()
    }

    /// The first device's configuration (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> DeviceConfig {
        Self::from_runtime(&Config::from_lookup(get))
    }

    /// What the C API shows of a runtime configuration.
    pub fn from_runtime(c: &Config) -> DeviceConfig {
        DeviceConfig {
            name: c.name.clone(),
            ip: c.ip,
            active_mtu: mtu_enum(c.mtu).unwrap_or(crate::abi::IBV_MTU_1024),
            mac: roce_emu::net::synthetic_mac(c.ip),
            quiet: c.quiet,
        }
    }

    /// EUI-64 from the MAC (flip the U/L bit, insert `ff:fe`), as the kernel derives both rxe's
    /// node GUID and the link-local interface id.
    pub fn eui64(&self) -> [u8; 8] {
        let m = self.mac;
        [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
    }

    /// `node_guid` as stored in `ibv_device_attr` and returned by `ibv_get_device_guid`
    /// (`__be64`: the EUI-64 bytes in memory order).
    pub fn node_guid_be(&self) -> u64 {
        u64::from_ne_bytes(self.eui64())
    }

    /// The port's GID table (index → raw GID); entries past the end are zero.
    pub fn gids(&self) -> [[u8; 16]; 2] {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[8..].copy_from_slice(&self.eui64());
        let ip = match self.ip {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        [ll, ip]
    }
}

/// Bytes → `IBV_MTU_*`.
pub fn mtu_enum(bytes: u32) -> Option<u32> {
    Some(match bytes {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        4096 => 5,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::Ipv4Addr;

    fn cfg(vars: &[(&str, &str)]) -> DeviceConfig {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DeviceConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_rxe0_on_loopback() {
        let c = cfg(&[]);
        assert_eq!(c.name, "rxe0");
        assert_eq!(c.ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(c.active_mtu, crate::abi::IBV_MTU_1024);
        assert_eq!(c.mac, [2, 0, 127, 0, 0, 1]);
        let g = c.gids();
        assert_eq!(
            g[0],
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xfe, 0, 0, 1]
        );
        assert_eq!(
            g[1],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]
        );
        assert_eq!(
            c.node_guid_be().to_ne_bytes(),
            [0, 0, 0x7f, 0xff, 0xfe, 0, 0, 1]
        );
    }

    #[test]
    fn env_overrides() {
        let c = cfg(&[
            ("ROCE_IP", "127.0.0.2"),
            ("ROCE_DEV_NAME", "roce7"),
            ("ROCE_MTU", "4096"),
        ]);
        assert_eq!(c.name, "roce7");
        assert_eq!(c.gids()[1][12..], [127, 0, 0, 2]);
        assert_eq!(c.active_mtu, crate::abi::IBV_MTU_4096);
        let c = cfg(&[("ROCE_IP", "fd00::5"), ("ROCE_MTU", "1500")]);
        assert_eq!(
            c.gids()[1],
            "fd00::5".parse::<std::net::Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(c.active_mtu, crate::abi::IBV_MTU_1024);
    }
}

#[cfg(test)]
mod several {
    use super::*;
    use std::collections::HashMap;

    fn all(vars: &[(&str, &str)]) -> Vec<DeviceConfig> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DeviceConfig::all_from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn a_list_of_addresses_gives_one_device_each() {
        let d = all(&[("ROCE_IP", "127.0.0.1, 127.0.0.2")]);
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].name.as_str(), d[1].name.as_str()), ("rxe0", "rxe1"));
        assert_eq!(d[1].ip, "127.0.0.2".parse::<IpAddr>().unwrap());
        assert_ne!(d[0].mac, d[1].mac);
        let d = all(&[
            ("ROCE_IP", "10.0.0.1,10.0.0.2,10.0.0.1"),
            ("ROCE_DEV_NAME", "mlx5_3"),
        ]);
        assert_eq!(
            d.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["mlx5_3", "mlx5_4"]
        );
        let d = all(&[("ROCE_IP", "10.0.0.1,10.0.0.2"), ("ROCE_DEV_NAME", "a,b")]);
        assert_eq!((d[0].name.as_str(), d[1].name.as_str()), ("a", "b"));
        assert_eq!(all(&[("ROCE_IP", "10.0.0.9")]).len(), 1);
    }
}
