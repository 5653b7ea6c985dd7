//! Memory keys and initial PSNs come from the operating system's entropy: two devices opened
//! the same way, one after the other in one process or as PID 1 of two fresh PID namespaces
//! (what two containers are), do not share their first rkeys or initial PSN.
use roce_provider::verbs::*;
use std::net::IpAddr;
use std::process::Command;

/// What a program that opens a device, registers four regions and creates a QP hands its peer:
/// the four rkeys and the QP's initial PSN.
fn first_keys(addr: &str) -> (Vec<u32>, u32) {
    let ip: IpAddr = addr.parse().unwrap();
    let ctx = Device::open(DeviceConfig::new(ip)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).build().unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mrs: Vec<_> = (0..4).map(|_| pd.allocate(64, access).unwrap()).collect();
    let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
    (mrs.iter().map(|m| m.rkey()).collect(), qp.endpoint().psn)
}

#[test]
fn two_devices_opened_alike_in_one_process_get_different_keys_and_psns() {
    // Same address, same configuration, same process: before, both seeds were the process ID
    // and the address, and every key and PSN repeated.
    let a = first_keys("127.31.22.1");
    let b = first_keys("127.31.22.1");
    assert_ne!(a, b, "the same rkeys and initial PSN twice");
}

const CHILD: &str = "ROCE_TEST_ENTROPY_CHILD";

/// Run by [`two_containers_get_different_keys_and_psns`] as PID 1 of a new PID namespace.
#[test]
fn first_keys_as_pid_1() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let (rkeys, psn) = first_keys("127.31.22.2");
    println!(
        "keys pid={} rkeys={rkeys:x?} psn={psn:#x}",
        std::process::id()
    );
}

#[test]
fn two_containers_get_different_keys_and_psns() {
    let run = || -> std::result::Result<String, String> {
        let out = Command::new("unshare")
            .args(["-p", "-f", "--mount-proc"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "first_keys_as_pid_1", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .map_err(|e| format!("unshare: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text.lines().find(|l| l.starts_with("keys "));
        match line {
            Some(l) if out.status.success() => Ok(l.to_string()),
            _ => Err(format!(
                "unshare -p -f --mount-proc: {} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    };
    let (a, b) = match (run(), run()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            let what = format!("a fresh PID namespace ({e})");
            roce_tests::prereq::require("two_containers_get_different_keys_and_psns", &what, false);
            return;
        }
    };
    assert!(
        a.starts_with("keys pid=1 "),
        "not PID 1 of its namespace: {a}"
    );
    assert!(
        b.starts_with("keys pid=1 "),
        "not PID 1 of its namespace: {b}"
    );
    assert_ne!(a, b, "two containers got the same rkeys and initial PSN");
}
