//! `roce run --ip` with an address this host does not have fails at once, naming the address,
//! instead of starting the program with a port that looks ACTIVE and fails at its first PD.
use std::process::Command;

fn roce_run(ip_flag: Option<&str>, env_ip: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_roce"));
    c.arg("run");
    if let Some(ip) = ip_flag {
        c.args(["--ip", ip]);
    }
    c.args(["--no-view", "--", "true"]).env_remove("ROCE_IP");
    if let Some(ip) = env_ip {
        c.env("ROCE_IP", ip);
    }
    c.output().expect("run roce")
}

#[test]
fn an_address_the_host_does_not_have_fails_at_roce_run() {
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of a host.
    for (flag, env, what) in [
        (Some("192.0.2.77"), None, "--ip"),
        (Some("127.0.0.1,192.0.2.77"), None, "--ip"),
        (None, Some("192.0.2.77"), "ROCE_IP"),
    ] {
        let out = roce_run(flag, env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?} {env:?}: {err}");
        assert!(
            err.contains(&format!(
                "roce run: {what}: 192.0.2.77 is not an address of this host"
            )),
            "{err}"
        );
    }
    // An address the host has passes the check and the program runs.
    let out = roce_run(Some("127.0.0.1"), None);
    assert!(out.status.success(), "{out:?}");
    let out = roce_run(Some("not-an-ip"), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an IP address"));
}
