//! `roce run`'s device view: the emulated NIC as system tools look for it outside
//! libibverbs (issue 20 item 2), in a private mount namespace that only the program and its
//! children see.
//!
//! * `/dev/infiniband/uverbs0` (or the first free `uverbsN`): `/dev/null` bound there, a
//!   character device the program can open read/write — UCX keeps an IB device only if that
//!   node exists (`uct_ib_device_is_accessible`), and never does I/O on it (all verbs go
//!   through libibverbs, ours). `ROCE_UVERBS` tells the library the name.
//! * `/sys/class/infiniband/<dev>/…` with what `ibstat`, `ibstatus`, UCX and rdma-core's test
//!   base read (node type and GUIDs, port state, rate, GIDs and their types and netdevs,
//!   P_Keys, `device/net/<netdev>`, `device/numa_node`), and
//!   `/sys/class/infiniband_verbs/uverbsN/{ibdev,abi_version}`.
//!
//! How: a new mount namespace (plus a user namespace mapping the caller to itself when it is
//! not root), `/` made private, then `/dev` and `/sys/class` replaced by tmpfs copies: every
//! original entry bound back in (directories recursively, so `pts`, `shm` and mounted classes
//! stay live), symlinks copied, and the device's entries added. The host's `/dev` and `/sys`
//! are never written. Limits (README): only `roce run`'s program and children see it; the
//! tree is a snapshot taken at start; a program doing its own uverbs ioctls gets ENOTTY from
//! `/dev/null`; unprivileged user namespaces may be disabled (then `roce run` says so once and
//! runs the program without the view). `rdma dev` / `rdma link` ask netlink, not sysfs:
//! [`netlink_env`] preloads `roce-netlink` (provider/netlink), which answers them from this tree.
//!
//! # Safety
//! The `unsafe` here is `libc::unshare` and `libc::mount` with NUL-terminated paths we own,
//! called while `roce run` is single-threaded (before `exec`), as `unshare(CLONE_NEWUSER)`
//! requires; and `libc::geteuid`/`getegid`.
#![allow(unsafe_code)] // the namespace syscalls of `roce run` (# Safety above)
use std::ffi::CString;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// What the view shows.
pub struct View {
    /// Device name (`rxe0`).
    pub name: String,
    /// The NIC's address.
    pub ip: IpAddr,
    /// Active MTU in bytes.
    pub mtu: u32,
}

fn c(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| format!("{}: NUL", p.display()))
}

fn mount(
    src: Option<&Path>,
    dst: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
) -> Result<(), String> {
    let s = src.map(c).transpose()?;
    let d = c(dst)?;
    let t = fstype.map(|t| CString::new(t).unwrap());
    // SAFETY: NUL-terminated strings (or NULL) that outlive the call.
    let r = unsafe {
        libc::mount(
            s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            d.as_ptr(),
            t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount {} on {}: {}",
            src.map_or("-".into(), |s| s.display().to_string()),
            dst.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A new mount namespace (and user namespace when not root), with `/` private.
fn unshare() -> Result<(), String> {
    // SAFETY: plain syscalls.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let flags = if uid == 0 {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    };
    // SAFETY: roce run is single-threaded here (before exec).
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(format!(
            "unshare: {} (unprivileged user namespaces disabled?)",
            std::io::Error::last_os_error()
        ));
    }
    if uid != 0 {
        let w = |f: &str, s: String| std::fs::write(f, s).map_err(|e| format!("{f}: {e}"));
        w("/proc/self/setgroups", "deny".into())?;
        w("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        w("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE)
}

/// Fills `dst` (a fresh tmpfs) with `src`'s entries: directories and files bound from the
/// original (recursively), symlinks copied. Entries that cannot be bound are skipped.
fn replicate(src: &Path, dst: &Path, skip: &[&str]) -> Result<(), String> {
    let rd = std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))?;
    for e in rd.flatten() {
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let (from, to) = (e.path(), dst.join(&name));
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_symlink() {
            if let Ok(t) = std::fs::read_link(&from) {
                let _ = std::os::unix::fs::symlink(t, &to);
            }
            continue;
        }
        let made = if ft.is_dir() {
            std::fs::create_dir(&to)
        } else {
            std::fs::File::create(&to).map(|_| ())
        };
        if made.is_ok() {
            let _ = mount(Some(&from), &to, None, libc::MS_BIND | libc::MS_REC);
        }
    }
    Ok(())
}

fn write_files(dir: &Path, files: &[(&str, String)]) -> Result<(), String> {
    for (f, v) in files {
        let p = dir.join(f);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&p, format!("{v}\n")).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// `xxxx:xxxx:…` as sysfs prints GIDs and GUIDs.
fn colon_hex(b: &[u8]) -> String {
    b.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c.get(1).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(":")
}

/// The interface holding `ip` (`lo` for 127.0.0.0/8 when it is not configured as such).
fn netdev_of(ip: IpAddr) -> String {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr", "show"])
        .output();
    if let Ok(o) = out {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 3 && f[3].split('/').next() == Some(&ip.to_string()) {
                return f[1].trim_end_matches(':').to_string();
            }
        }
    }
    "lo".into()
}

/// The first `uverbsN` that `/dev/infiniband` does not have.
fn free_uverbs() -> String {
    (0..64)
        .map(|n| format!("uverbs{n}"))
        .find(|n| !Path::new("/dev/infiniband").join(n).exists())
        .unwrap_or_else(|| "uverbs63".into())
}

/// The files of `/sys/class/infiniband/<dev>` for `v` (relative paths and contents).
pub fn sysfs_files(v: &View, netdev: &str) -> Vec<(String, String)> {
    let ncfg = roce_emu::NicConfig::new(v.ip);
    let guid = ncfg.node_guid().to_be_bytes();
    let nic = roce_emu::Nic::new(roce_emu::NicConfig {
        netdev_mtu: v.mtu + 80,
        ..ncfg
    });
    let port = nic.query_port();
    let mut f: Vec<(String, String)> = vec![
        ("node_type".into(), "1: CA".into()),
        ("node_guid".into(), colon_hex(&guid)),
        ("sys_image_guid".into(), colon_hex(&guid)),
        ("node_desc".into(), "roce userspace RoCEv2 emulator".into()),
        // empty, as rxe's (ibv_query_device still says 0.0.0; rdma dev prints no fw)
        ("fw_ver".into(), String::new()),
        ("hw_rev".into(), "0x0".into()),
        ("hca_type".into(), "roce".into()),
        ("board_id".into(), "roce-emu (userspace RoCEv2 NIC)".into()),
        ("parent".into(), netdev.into()),
        ("device/numa_node".into(), "-1".into()),
        ("device/local_cpus".into(), local_cpus()),
        ("ports/1/state".into(), "4: ACTIVE".into()),
        ("ports/1/phys_state".into(), "5: LinkUp".into()),
        ("ports/1/rate".into(), "10 Gb/sec (1X QDR)".into()),
        ("ports/1/lid".into(), "0x0".into()),
        ("ports/1/lid_mask_count".into(), "0".into()),
        ("ports/1/sm_lid".into(), "0x0".into()),
        ("ports/1/sm_sl".into(), "0".into()),
        (
            "ports/1/cap_mask".into(),
            format!("0x{:08x}", port.port_cap_flags),
        ),
        ("ports/1/link_layer".into(), "Ethernet".into()),
        ("ports/1/pkeys/0".into(), "0xffff".into()),
    ];
    for (i, g) in nic.gids().iter().enumerate() {
        f.push((format!("ports/1/gids/{i}"), colon_hex(g)));
        f.push((format!("ports/1/gid_attrs/types/{i}"), "RoCE v2".into()));
        f.push((format!("ports/1/gid_attrs/ndevs/{i}"), netdev.into()));
    }
    f
}

fn local_cpus() -> String {
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64);
    let mask: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut s = String::new();
    let _ = write!(s, "{mask:x}");
    s
}

/// `device_cap_flags` of the emulated device as netlink reports it (`RDMA_NLDEV_ATTR_CAP_FLAGS`
/// is the kernel's 64-bit flags, `ibv_query_device_ex`'s `device_cap_flags_ex`). Sysfs has no
/// file for it, so `roce run` hands it to the netlink answers; the drop-in library defines it
/// (`device_attr_ex`) and a test keeps the two equal.
pub const DEVICE_CAP_FLAGS: u64 = 0x1c0_0102_1c76;

/// What makes `rdma dev` / `rdma link` (iproute2, netlink) show the view's device:
/// `LD_PRELOAD` with `libroce_netlink.so` from `lib_dir/deps` or `lib_dir` (before any
/// `LD_PRELOAD` already set), which answers `NETLINK_RDMA` sockets from the view's sysfs, and
/// `ROCE_NETLINK_DEVICES` naming the device and its cap flags. `None` without the library.
pub fn netlink_env(v: &View, lib_dir: &Path) -> Option<[(&'static str, std::ffi::OsString); 2]> {
    let lib = [lib_dir.join("deps"), lib_dir.to_path_buf()]
        .into_iter()
        .map(|d| d.join("libroce_netlink.so"))
        .find(|p| p.exists())?;
    let mut preload = std::ffi::OsString::from(lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|s| !s.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let devices = format!("{}=0x{DEVICE_CAP_FLAGS:x}", v.name);
    Some([
        ("LD_PRELOAD", preload),
        ("ROCE_NETLINK_DEVICES", devices.into()),
    ])
}

/// Enters the view; returns the `uverbsN` name the library must report (`ROCE_UVERBS`).
pub fn enter(v: &View) -> Result<String, String> {
    let uverbs = free_uverbs();
    let netdev = netdev_of(v.ip);
    unshare()?;
    let stage = PathBuf::from(format!("/tmp/.roce-view-{}", std::process::id()));
    let (dev, class) = (stage.join("dev"), stage.join("class"));
    std::fs::create_dir_all(&dev).map_err(|e| format!("{}: {e}", dev.display()))?;
    std::fs::create_dir_all(&class).map_err(|e| format!("{}: {e}", class.display()))?;
    let r = (|| {
        mount(Some(Path::new("tmpfs")), &dev, Some("tmpfs"), 0)?;
        mount(Some(Path::new("tmpfs")), &class, Some("tmpfs"), 0)?;
        // /dev, with infiniband/uverbsN added
        replicate(Path::new("/dev"), &dev, &["infiniband"])?;
        let ib = dev.join("infiniband");
        std::fs::create_dir(&ib).map_err(|e| format!("{}: {e}", ib.display()))?;
        if Path::new("/dev/infiniband").is_dir() {
            replicate(Path::new("/dev/infiniband"), &ib, &[])?;
        }
        let node = ib.join(&uverbs);
        std::fs::File::create(&node).map_err(|e| format!("{}: {e}", node.display()))?;
        mount(Some(Path::new("/dev/null")), &node, None, libc::MS_BIND)?;
        // /sys/class, with infiniband/<dev> and infiniband_verbs/uverbsN added
        replicate(
            Path::new("/sys/class"),
            &class,
            &["infiniband", "infiniband_verbs"],
        )?;
        let ibc = class.join("infiniband");
        std::fs::create_dir(&ibc).map_err(|e| format!("{}: {e}", ibc.display()))?;
        if Path::new("/sys/class/infiniband").is_dir() {
            replicate(Path::new("/sys/class/infiniband"), &ibc, &[&v.name])?;
        }
        let files = sysfs_files(v, &netdev);
        let files: Vec<(&str, String)> =
            files.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
        write_files(&ibc.join(&v.name), &files)?;
        std::fs::create_dir_all(ibc.join(&v.name).join("device/net").join(&netdev))
            .map_err(|e| e.to_string())?;
        let ibv = class.join("infiniband_verbs");
        std::fs::create_dir(&ibv).map_err(|e| e.to_string())?;
        if Path::new("/sys/class/infiniband_verbs").is_dir() {
            replicate(Path::new("/sys/class/infiniband_verbs"), &ibv, &[&uverbs])?;
        }
        write_files(
            &ibv.join(&uverbs),
            &[("ibdev", v.name.clone()), ("abi_version", "1".into())],
        )?;
        write_files(&ibv, &[("abi_version", "6".into())])?;
        mount(Some(&dev), Path::new("/dev"), None, libc::MS_MOVE)?;
        mount(Some(&class), Path::new("/sys/class"), None, libc::MS_MOVE)
    })();
    let _ = std::fs::remove_dir(&dev);
    let _ = std::fs::remove_dir(&class);
    let _ = std::fs::remove_dir(&stage);
    r.map(|_| uverbs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_netlink_cap_flags_are_the_drop_in_librarys() {
        let cfg = roce_ibverbs::config::DeviceConfig::from_lookup(|_| None);
        let ex = roce_ibverbs::device::device_attr_ex(&cfg).device_cap_flags_ex;
        assert_eq!(super::DEVICE_CAP_FLAGS, ex);
    }
}
