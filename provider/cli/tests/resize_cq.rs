//! `ibv_resize_cq` through the drop-in libibverbs.so.1 (issue 22 item 2): `resize_cq.c`
//! (compiled against the installed `verbs.h`, run through `roce run`) grows and shrinks a CQ with
//! completions queued and checks rxe's rules: the size rounded to one less than a power of two in
//! `cq->cqe`, EINVAL below the queued count, at 0 and above `max_cqe`, completions kept in order,
//! an armed notification kept. Prerequisites: a C compiler and libibverbs-dev (FAIL under
//! `CI=true`).
mod common;
use common::*;
use std::time::Duration;

#[test]
fn resize_cq_with_completions_queued_through_the_c_abi() {
    let Some(prog) = CProgram::compile("resize_cq", CLibs::Verbs) else {
        return;
    };
    let out = prog.run(&["--ip", "127.0.22.22"], &[], &[], Duration::from_secs(60));
    out.assert_done();
    // implemented: no "not implemented yet" line for it
    assert!(!out.stderr.contains("ibv_resize_cq"), "{}", out.all());
}
