//! RDMA FLUSH and ATOMIC WRITE (IBA 1.5, issue 22 item 3) through the drop-in libibverbs.so.1:
//! `flush_atomic_write.c` (compiled against the installed `verbs.h`, reaching v45's `wr_flush`
//! slot and names as a program built against newer headers does) runs through
//! `roce run --ip A,B` between two emulated NICs and checks the capability bits, QP creation
//! with `IBV_QP_EX_WITH_ATOMIC_WRITE` / `_FLUSH`, FLUSH access at registration, an ATOMIC WRITE
//! landing with `IBV_WC_ATOMIC_WRITE`, FLUSHes completing with `IBV_WC_FLUSH`, both refused in
//! `ibv_post_send`, a remote access error and a remote invalid request. Prerequisites: a C
//! compiler and libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use std::time::Duration;

#[test]
fn flush_and_atomic_write_through_the_c_abi() {
    let Some(prog) = CProgram::compile("flush_atomic_write", CLibs::Verbs) else {
        return;
    };
    let out = prog.run(
        &["--ip", "127.0.22.24,127.0.22.25"],
        &[],
        &[],
        Duration::from_secs(60),
    );
    println!("{}", out.all());
    out.assert_done();
    // the legacy post path says once why it refuses each
    for op in ["IBV_WR_ATOMIC_WRITE", "IBV_WR_FLUSH"] {
        let line = format!("roce: ibv_post_send: {op} is refused here (EINVAL)");
        assert_eq!(out.stderr.matches(&line).count(), 1, "{}", out.all());
    }
}
