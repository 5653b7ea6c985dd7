//! Memory windows through the drop-in libibverbs.so.1 (issue 22 item 1): `memory_windows.c`
//! (compiled against the installed `verbs.h`, run through `roce run`) allocates type 1 and type 2
//! windows, binds them with `ibv_bind_mw`, `IBV_WR_BIND_MW` and `ibv_wr_bind_mw`, writes and reads
//! through their rkeys from another QP, checks an access past the window's end, LOCAL_INV and
//! SEND with invalidate (both APIs), use after invalidation and the busy rules. Prerequisites: a
//! C compiler and libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn memory_windows_through_the_c_abi() {
    let cc = which("cc").or_else(|| which("gcc"));
    if !prerequisite(cc.is_some(), "a C compiler (apt-get install gcc)")
        || !prerequisite(
            std::path::Path::new("/usr/include/infiniband/verbs.h").exists(),
            "verbs.h (apt-get install libibverbs-dev)",
        )
    {
        return;
    }
    let dir = std::env::temp_dir().join(format!("roce-memory-windows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("memory_windows");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/memory_windows.c");
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
    assert!(st.success(), "compiling memory_windows.c failed");
    let out = spawn(
        &["--ip".to_string(), "127.0.22.23".into()],
        &[exe.to_string_lossy().into_owned()],
        &[],
    )
    .wait(Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.timed_out, "hung:\n{}", out.all());
    assert!(!out.stdout.contains("FAIL"), "{}", out.all());
    assert!(out.stdout.contains("DONE failures 0"), "{}", out.all());
    // implemented: no "not implemented" line for any verb (the window verbs among them)
    assert!(
        !out.stderr
            .contains("is not implemented by this emulated device"),
        "{}",
        out.all()
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
}
