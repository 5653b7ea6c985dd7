//! Misuse through the C ABI (NULL pointers, destroyed objects, wrong PD, QP in the wrong state,
//! too many SGEs, bad rkey, CQ overflow): `misuse.c`, compiled with the system compiler against
//! the installed `verbs.h`, run on our library through `roce run --ip 127.0.0.1`; every check
//! must report the documented errno / work-completion status / async event and nothing crashes.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn misuse_returns_documented_errors() {
    let Some((dir, exe)) = compile_c("misuse", CLibs::Verbs) else {
        return;
    };
    let _g = serial();
    assert!(
        wait_udp_free(Duration::from_secs(300)),
        "127.0.0.1:4791 stayed busy"
    );
    let out = spawn(
        &["--ip".to_string(), "127.0.0.1".into()],
        &[exe.to_string_lossy().into_owned()],
        &[("ROCE_QUIET", "1")],
    )
    .wait(Duration::from_secs(60));
    println!("{}", out.stdout);
    eprintln!("{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.timed_out, "misuse program hung");
    assert!(
        out.stdout.contains("CHECK CQ overflow"),
        "did not reach the last check"
    );
    assert!(!out.stdout.contains("FAIL"), "a misuse check failed");
    assert_eq!(out.code, Some(0));
}
