//! Misuse through the C ABI (NULL pointers, destroyed objects, wrong PD, QP in the wrong state,
//! too many SGEs, bad rkey, CQ overflow): `misuse.c`, compiled with the system compiler against
//! the installed `verbs.h`, run on our library through `roce run --ip 127.0.0.1`; every check
//! must report the documented errno / work-completion status / async event and nothing crashes.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn misuse_returns_documented_errors() {
    let Some(prog) = CProgram::compile("misuse", CLibs::Verbs) else {
        return;
    };
    let _g = serial_on_loopback(Duration::from_secs(300));
    let out = prog.run(
        &["--ip", "127.0.0.1"],
        &[],
        &[("ROCE_QUIET", "1")],
        Duration::from_secs(60),
    );
    println!("{}", out.stdout);
    eprintln!("{}", out.stderr);
    out.assert_no_failed_check();
    assert!(
        out.stdout.contains("CHECK CQ overflow"),
        "did not reach the last check"
    );
    assert_eq!(out.code, Some(0));
}
