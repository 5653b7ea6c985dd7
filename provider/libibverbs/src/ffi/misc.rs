//! Helpers that need no device: enum strings, rate conversions, fork support, the sysfs helpers
//! (with a few files of our device answered from memory), ECE and data-in-order queries.
//!
//! # Safety
//! String results are `'static` C literals. `ibv_read_sysfs_file` writes at most `size` bytes
//! into the caller's `buf` after NULL checks and reads `dir`/`file` as NUL-terminated C strings,
//! as its contract says; the real file read goes through `std::fs`.

#[cfg(test)]
use super::context::config;
use super::context::{configs, ibdev_path};
use crate::abi::*;
use crate::device;
use core::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

fn s(c: &'static CStr) -> *const c_char {
    c.as_ptr()
}

pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    s(match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    })
}

pub extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    s(match port_state {
        0 => c"no state change (NOP)",
        1 => c"down",
        2 => c"init",
        3 => c"armed",
        4 => c"active",
        5 => c"active defer",
        _ => c"unknown",
    })
}

pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    const T: [&CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    s(usize::try_from(event)
        .ok()
        .and_then(|i| T.get(i))
        .copied()
        .unwrap_or(c"unknown"))
}

pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    const T: [&CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    s(usize::try_from(status)
        .ok()
        .and_then(|i| T.get(i))
        .copied()
        .unwrap_or(c"unknown"))
}

/// `enum ibv_rate` value, its multiple of 2.5 Gb/s (IBA static rate; -1 where none) and its
/// data rate in Mb/s.
const RATES: [(c_int, c_int, c_int); 23] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];
const IBV_RATE_MAX: c_int = 0;

pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    if mult < 0 {
        return IBV_RATE_MAX;
    }
    RATES
        .iter()
        .find(|r| r.1 == mult)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.2 == mbps)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

static FORK_INIT: AtomicBool = AtomicBool::new(false);

/// Nothing is pinned for DMA (the "NIC" is this process's own code), so `fork()` is safe without
/// `madvise(MADV_DONTFORK)`: accept and remember the request.
pub extern "C" fn ibv_fork_init() -> c_int {
    FORK_INIT.store(true, Ordering::Relaxed);
    0
}

/// `IBV_FORK_UNNEEDED`: as on kernels with copy-on-fork for pinned pages.
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    IBV_FORK_UNNEEDED
}

pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `$SYSFS_PATH` or `/sys`, as libibverbs (computed once; the string lives forever).
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    static PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let p = std::env::var("SYSFS_PATH").ok().filter(|p| !p.is_empty());
        let p = p
            .map(|p| p.trim_end_matches('/').to_string())
            .unwrap_or_else(|| "/sys".into());
        std::ffi::CString::new(p).unwrap_or_else(|_| c"/sys".to_owned())
    })
    .as_ptr()
}

/// Files of our device's (virtual) sysfs directory that tools read.
fn virtual_sysfs(dir: &str, file: &str) -> Option<String> {
    let dir = dir.trim_end_matches('/');
    let cfg = configs().iter().find(|c| ibdev_path(c) == dir)?;
    let guid = cfg.eui64();
    let guid = format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        guid[0], guid[1], guid[2], guid[3], guid[4], guid[5], guid[6], guid[7]
    );
    Some(match file {
        "board_id" => device::BOARD_ID.into(),
        "fw_ver" => device::FW_VER.into(),
        "hw_rev" => "0".into(),
        "hca_type" => "roce".into(),
        "node_desc" => device::NODE_DESC.into(),
        "node_type" => "1: CA".into(),
        "node_guid" | "sys_image_guid" => guid,
        _ => return None,
    })
}

/// `ibv_read_sysfs_file(dir, file, buf, size)`: the file's content without a trailing newline,
/// NUL-terminated; returns its length or -1.
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    super::guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: NUL-terminated strings by the function's contract.
        let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let (d, f) = (d.to_string_lossy(), f.to_string_lossy());
        let mut content = match virtual_sysfs(&d, &f) {
            Some(s) => s.into_bytes(),
            None => match std::fs::read(format!("{d}/{f}")) {
                Ok(b) => b,
                Err(_) => return -1,
            },
        };
        if content.last() == Some(&b'\n') {
            content.pop();
        }
        if content.len() >= size {
            // libibverbs fails rather than truncating.
            return -1;
        }
        // SAFETY: `buf` has `size` > content.len() bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(content.as_ptr().cast::<c_char>(), buf, content.len());
            *buf.add(content.len()) = 0;
        }
        content.len() as c_int
    })
}

/// ECE (enhanced connection establishment) is a vendor extension; like providers without it,
/// answer `EOPNOTSUPP` (librdmacm calls these on every connection and copes).
pub extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    libc::EOPNOTSUPP
}

pub extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    libc::EOPNOTSUPP
}

/// No guarantee that data arrives in order beyond what the verbs promise: 0.
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut ibv_qp, _op: c_int, _flags: u32) -> c_int {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(p: *const c_char) -> &'static str {
        // SAFETY: our functions return 'static C literals.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn strings_and_rates() {
        assert_eq!(st(ibv_wc_status_str(0)), "success");
        assert_eq!(st(ibv_wc_status_str(5)), "Work Request Flushed Error");
        assert_eq!(
            st(ibv_wc_status_str(12)),
            "transport retry counter exceeded"
        );
        assert_eq!(st(ibv_wc_status_str(99)), "unknown");
        assert_eq!(st(ibv_event_type_str(9)), "port active");
        assert_eq!(
            st(ibv_node_type_str(IBV_NODE_CA)),
            "InfiniBand channel adapter"
        );
        assert_eq!(st(ibv_port_state_str(4)), "active");
        assert_eq!(ibv_rate_to_mult(3), 4);
        assert_eq!(mult_to_ibv_rate(4), 3);
        assert_eq!(ibv_rate_to_mbps(16), 103125);
        assert_eq!(mbps_to_ibv_rate(103125), 16);
        assert_eq!(ibv_rate_to_mult(11), -1);
        assert_eq!(mult_to_ibv_rate(7), 0);
        assert_eq!(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
    }

    #[test]
    fn sysfs_board_id() {
        let dir = std::ffi::CString::new(ibdev_path(config())).unwrap();
        let mut buf = [0 as c_char; 64];
        // SAFETY: valid C strings and buffer.
        let n = unsafe {
            ibv_read_sysfs_file(dir.as_ptr(), c"board_id".as_ptr(), buf.as_mut_ptr(), 64)
        };
        assert_eq!(n as usize, device::BOARD_ID.len());
        // SAFETY: NUL-terminated by the call.
        assert!(st_buf(&buf).starts_with("roce-emu"));
        let mut small = [0 as c_char; 4];
        // SAFETY: as above.
        assert_eq!(
            unsafe {
                ibv_read_sysfs_file(dir.as_ptr(), c"board_id".as_ptr(), small.as_mut_ptr(), 4)
            },
            -1
        );
    }

    fn st_buf(b: &[c_char]) -> String {
        // SAFETY: NUL-terminated local buffer.
        unsafe { CStr::from_ptr(b.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}
