//! `ibv_resize_cq` through the drop-in libibverbs.so.1 (issue 22 item 2): `resize_cq.c`
//! (compiled against the installed `verbs.h`, run through `roce run`) grows and shrinks a CQ with
//! completions queued and checks rxe's rules: the size rounded to one less than a power of two in
//! `cq->cqe`, EINVAL below the queued count, at 0 and above `max_cqe`, completions kept in order,
//! an armed notification kept. Prerequisites: a C compiler and libibverbs-dev (FAIL under
//! `CI=true`).
mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn resize_cq_with_completions_queued_through_the_c_abi() {
    let cc = which("cc").or_else(|| which("gcc"));
    if !prerequisite(cc.is_some(), "a C compiler (apt-get install gcc)")
        || !prerequisite(
            std::path::Path::new("/usr/include/infiniband/verbs.h").exists(),
            "verbs.h (apt-get install libibverbs-dev)",
        )
    {
        return;
    }
    let dir = std::env::temp_dir().join(format!("roce-resize-cq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("resize_cq");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/resize_cq.c");
    let st = Command::new(cc.unwrap())
        .args([
            "-O1",
            "-Wall",
            "-Wno-format-zero-length",
            "-Wno-unused-function",
            "-o",
        ])
        .arg(&exe)
        .arg(src)
        .arg("-libverbs")
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling resize_cq.c failed");
    let out = spawn(
        &["--ip".to_string(), "127.0.22.22".into()],
        &[exe.to_string_lossy().into_owned()],
        &[],
    )
    .wait(Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.timed_out, "hung:\n{}", out.all());
    assert!(!out.stdout.contains("FAIL"), "{}", out.all());
    assert!(out.stdout.contains("DONE failures 0"), "{}", out.all());
    // implemented: no "not implemented yet" line for it
    assert!(!out.stderr.contains("ibv_resize_cq"), "{}", out.all());
    assert_eq!(out.code, Some(0), "{}", out.all());
}
