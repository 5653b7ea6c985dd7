//! Memory windows through the drop-in libibverbs.so.1 (issue 22 item 1): `memory_windows.c`
//! (compiled against the installed `verbs.h`, run through `roce run`) allocates type 1 and type 2
//! windows, binds them with `ibv_bind_mw`, `IBV_WR_BIND_MW` and `ibv_wr_bind_mw`, writes and reads
//! through their rkeys from another QP, checks an access past the window's end, LOCAL_INV and
//! SEND with invalidate (both APIs), use after invalidation and the busy rules. Prerequisites: a
//! C compiler and libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use std::time::Duration;

#[test]
fn memory_windows_through_the_c_abi() {
    let Some(prog) = CProgram::compile("memory_windows", CLibs::Verbs) else {
        return;
    };
    let out = prog.run(&["--ip", "127.0.22.23"], &[], &[], Duration::from_secs(60));
    out.assert_done();
    // implemented: no "not implemented" line for any verb (the window verbs among them)
    assert!(
        !out.stderr
            .contains("is not implemented by this emulated device"),
        "{}",
        out.all()
    );
}
