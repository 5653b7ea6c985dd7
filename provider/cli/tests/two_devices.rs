//! Several devices in one process (issue 22 item 4): `roce run --ip A,B` gives rxe0 on A and
//! rxe1 on B, as a host with two NICs; `two_devices.c` (compiled against the installed
//! `verbs.h`) lists and opens both and moves a SEND, an RDMA WRITE and an RDMA READ between
//! them. Prerequisites: a C compiler and libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use std::time::Duration;

#[test]
fn two_devices_in_one_process_talk_to_each_other() {
    let Some(prog) = CProgram::compile("two_devices", CLibs::Verbs) else {
        return;
    };
    let out = prog.run(
        &["--ip", "127.0.22.1,127.0.22.2"],
        &[],
        &[],
        Duration::from_secs(60),
    );
    out.assert_no_failed_check();
    assert!(out.stdout.contains("CHECK read done ok"), "{}", out.all());
    assert_eq!(out.code, Some(0), "{}", out.all());
}
