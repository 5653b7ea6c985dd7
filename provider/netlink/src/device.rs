//! The devices the answers describe, read from the sysfs tree `roce run` shows the program
//! (`/sys/class/infiniband/<dev>/…`) and the netdev's `ifindex` from `/sys/class/net`.

use std::path::Path;

/// One port, as `RDMA_NLDEV_CMD_PORT_GET` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Port number (from 1).
    pub index: u32,
    /// `ports/N/state` (`4: ACTIVE` → 4).
    pub state: u8,
    /// `ports/N/phys_state` (`5: LinkUp` → 5).
    pub phys_state: u8,
    /// InfiniBand link layer: the kernel then also reports cap mask, subnet prefix, LIDs, LMC.
    pub ib: Option<IbPort>,
    /// The netdev (`gid_attrs/ndevs/0`, else the device's `parent`) and its ifindex.
    pub netdev: Option<(String, u32)>,
}

/// What only an InfiniBand port reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbPort {
    /// `cap_mask`.
    pub cap_flags: u64,
    /// The first 8 bytes of GID 0.
    pub subnet_prefix: u64,
    /// `lid`.
    pub lid: u32,
    /// `sm_lid`.
    pub sm_lid: u32,
    /// `lid_mask_count`.
    pub lmc: u8,
}

/// One device, as `RDMA_NLDEV_CMD_GET` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Device index (`ifindex` in `rdma dev`): its position in the list, from 0.
    pub index: u32,
    /// `rxe0`.
    pub name: String,
    /// `node_type` (`1: CA` → 1).
    pub node_type: u8,
    /// `node_guid` as a number (`5054:00ff:fe18:0002` → 0x505400fffe180002).
    pub node_guid: u64,
    /// `sys_image_guid`.
    pub sys_image_guid: u64,
    /// `fw_ver`; the kernel leaves the attribute out when it is empty (rxe's is).
    pub fw: String,
    /// `device_cap_flags` (64 bits): not in sysfs; given by `roce run`, else not reported.
    pub caps: Option<u64>,
    /// Ports 1..=N.
    pub ports: Vec<Port>,
}

impl Device {
    /// `RDMA_NLDEV_ATTR_DEV_PROTOCOL` as the kernel derives it from the first port.
    pub fn protocol(&self) -> &'static str {
        match self.ports.first() {
            Some(p) if p.ib.is_some() => "ib",
            _ => "roce",
        }
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// The number before `:` in `4: ACTIVE`, or a plain / `0x` number.
fn leading_number(s: &str) -> Option<u64> {
    let n = s.split(':').next()?.trim();
    match n.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => n.parse().ok(),
    }
}

/// `xxxx:xxxx:xxxx:xxxx` (sysfs) → the GUID as a number.
fn guid(s: &str) -> Option<u64> {
    let h: String = s.chars().filter(|c| *c != ':').collect();
    (h.len() == 16).then(|| u64::from_str_radix(&h, 16).ok())?
}

fn ifindex(net_dir: &Path, netdev: &str) -> Option<u32> {
    read(&net_dir.join(netdev).join("ifindex"))?
        .trim()
        .parse()
        .ok()
}

fn port(dev_dir: &Path, net_dir: &Path, index: u32) -> Option<Port> {
    let p = dev_dir.join("ports").join(index.to_string());
    let num = |f: &str| read(&p.join(f)).and_then(|s| leading_number(&s));
    let ib = (read(&p.join("link_layer")).as_deref() == Some("InfiniBand")).then(|| IbPort {
        cap_flags: num("cap_mask").unwrap_or(0),
        subnet_prefix: read(&p.join("gids/0"))
            .and_then(|g| guid(&g.split(':').take(4).collect::<Vec<_>>().join(":")))
            .unwrap_or(0),
        lid: num("lid").unwrap_or(0) as u32,
        sm_lid: num("sm_lid").unwrap_or(0) as u32,
        lmc: num("lid_mask_count").unwrap_or(0) as u8,
    });
    let netdev = read(&p.join("gid_attrs/ndevs/0"))
        .or_else(|| read(&dev_dir.join("parent")))
        .filter(|n| !n.is_empty())
        .and_then(|n| ifindex(net_dir, &n).map(|i| (n, i)));
    Some(Port {
        index,
        state: num("state")? as u8,
        phys_state: num("phys_state").unwrap_or(0) as u8,
        ib,
        netdev,
    })
}

/// Reads device `name` from `class_dir` (`/sys/class/infiniband`); `None` if it is not there.
pub fn read_device(
    class_dir: &Path,
    net_dir: &Path,
    name: &str,
    index: u32,
    caps: Option<u64>,
) -> Option<Device> {
    let d = class_dir.join(name);
    let mut nums: Vec<u32> = std::fs::read_dir(d.join("ports"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    nums.sort_unstable();
    let node_guid = guid(&read(&d.join("node_guid"))?)?;
    Some(Device {
        index,
        name: name.to_string(),
        node_type: read(&d.join("node_type"))
            .and_then(|s| leading_number(&s))
            .unwrap_or(1) as u8,
        node_guid,
        sys_image_guid: read(&d.join("sys_image_guid"))
            .and_then(|s| guid(&s))
            .unwrap_or(node_guid),
        fw: read(&d.join("fw_ver")).unwrap_or_default(),
        caps,
        ports: nums
            .into_iter()
            .filter_map(|n| port(&d, net_dir, n))
            .collect(),
    })
}

/// `ROCE_NETLINK_DEVICES`: `name[=cap_flags],…` (cap flags in hex with `0x`, or decimal).
pub fn parse_spec(spec: &str) -> Vec<(String, Option<u64>)> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('=') {
            Some((n, c)) => (n.trim().to_string(), leading_number(c.trim())),
            None => (s.to_string(), None),
        })
        .collect()
}

/// The devices to describe: those `spec` names (in its order), or, without a spec, every
/// directory of `class_dir` (by name, no cap flags). Indices count from 0 in that order;
/// names missing from sysfs are skipped.
pub fn devices(class_dir: &Path, net_dir: &Path, spec: Option<&str>) -> Vec<Device> {
    let list = match spec {
        Some(s) => parse_spec(s),
        None => {
            let mut names: Vec<String> = std::fs::read_dir(class_dir)
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|e| e.file_name().into_string().ok())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.into_iter().map(|n| (n, None)).collect()
        }
    };
    list.iter()
        .filter_map(|(n, c)| read_device(class_dir, net_dir, n, 0, *c))
        .enumerate()
        .map(|(i, d)| Device {
            index: i as u32,
            ..d
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// rxe0 as [`fake_sysfs`] describes it (with its cap flags given as `rxe0=0x1223c76`).
    pub(crate) fn rxe0() -> Device {
        Device {
            index: 0,
            name: "rxe0".into(),
            node_type: 1,
            node_guid: 0x5054_00ff_fe18_0002,
            sys_image_guid: 0x5054_00ff_fe18_0002,
            fw: String::new(),
            caps: Some(0x1223c76),
            ports: vec![Port {
                index: 1,
                state: 4,
                phys_state: 5,
                ib: None,
                netdev: Some(("eth0".into(), 2)),
            }],
        }
    }

    /// A sysfs tree with what `roce run`'s view writes for rxe0 on `lo`.
    pub(crate) fn fake_sysfs(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("roce-netlink-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let files = [
            ("infiniband/rxe0/node_type", "1: CA"),
            ("infiniband/rxe0/node_guid", "5054:00ff:fe18:0002"),
            ("infiniband/rxe0/sys_image_guid", "5054:00ff:fe18:0002"),
            ("infiniband/rxe0/fw_ver", ""),
            ("infiniband/rxe0/parent", "eth0"),
            ("infiniband/rxe0/ports/1/state", "4: ACTIVE"),
            ("infiniband/rxe0/ports/1/phys_state", "5: LinkUp"),
            ("infiniband/rxe0/ports/1/link_layer", "Ethernet"),
            ("infiniband/rxe0/ports/1/cap_mask", "0x00010000"),
            ("infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "eth0"),
            ("net/eth0/ifindex", "2"),
            ("net/lo/ifindex", "1"),
        ];
        for (f, v) in files {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        }
        root
    }

    #[test]
    fn the_view_sysfs_tree_reads_as_rxe_reports_it() {
        let root = fake_sysfs("read");
        let (ib, net) = (root.join("infiniband"), root.join("net"));
        let d = devices(&ib, &net, Some("rxe0=0x1223c76"));
        assert_eq!(d, [rxe0()]);
        assert_eq!(d[0].protocol(), "roce");
        // without a spec: every directory, no cap flags
        let all = devices(&ib, &net, None);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].caps, None);
        // a name sysfs does not have is skipped; indices stay dense
        let d = devices(&ib, &net, Some("rxe9,rxe0"));
        assert_eq!((d.len(), d[0].index, d[0].name.as_str()), (1, 0, "rxe0"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_infiniband_port_reports_its_lids_and_prefix_and_a_missing_netdev_is_left_out() {
        let root = fake_sysfs("ib");
        let p = root.join("infiniband/rxe0/ports/1");
        std::fs::write(p.join("link_layer"), "InfiniBand\n").unwrap();
        std::fs::write(p.join("lid"), "0x11\n").unwrap();
        std::fs::write(p.join("sm_lid"), "0x1\n").unwrap();
        std::fs::write(p.join("lid_mask_count"), "0\n").unwrap();
        std::fs::create_dir_all(p.join("gids")).unwrap();
        std::fs::write(
            p.join("gids/0"),
            "fe80:0000:0000:0000:5054:00ff:fe18:0002\n",
        )
        .unwrap();
        std::fs::remove_dir_all(root.join("net/eth0")).unwrap();
        let d = devices(&root.join("infiniband"), &root.join("net"), None);
        let port = &d[0].ports[0];
        assert_eq!(
            port.ib,
            Some(IbPort {
                cap_flags: 0x10000,
                subnet_prefix: 0xfe80_0000_0000_0000,
                lid: 0x11,
                sm_lid: 1,
                lmc: 0
            })
        );
        assert_eq!(port.netdev, None);
        assert_eq!(d[0].protocol(), "ib");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_spec_lists_names_and_optional_cap_flags() {
        assert_eq!(
            parse_spec("rxe0=0x1c001021c76, rxe1 ,,x=12"),
            [
                ("rxe0".to_string(), Some(0x1c0_0102_1c76)),
                ("rxe1".to_string(), None),
                ("x".to_string(), Some(12)),
            ]
        );
        assert_eq!(guid("5054:00ff:fe18:0002"), Some(0x5054_00ff_fe18_0002));
        assert_eq!(guid("5054:00ff"), None);
        assert_eq!(leading_number("4: ACTIVE"), Some(4));
        assert_eq!(leading_number("junk"), None);
    }
}
