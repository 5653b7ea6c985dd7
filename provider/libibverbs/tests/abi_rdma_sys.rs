//! Drives the rdma-sys ABI tests in `tests/abi/` (a separate cargo workspace, so that a machine
//! without libclang or the rdma-core dev packages can still build the project):
//!
//! * `layout.rs`: every mirrored struct's size and field offsets == rdma-sys's bindgen of the
//!   installed verbs.h;
//! * `through_our_lib.rs`: verbs called through rdma-sys (extern bindings and its inline-verb
//!   re-implementations) reach our library, loaded via `LD_LIBRARY_PATH`.
//!
//! Prerequisites (rdma-sys's build script): `pkg-config`, `libibverbs-dev`, `librdmacm-dev`,
//! `libclang-dev`, and crates.io for the first build. Missing → FAIL under `CI=true`, else SKIP.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn libclang_present() -> bool {
    if std::env::var_os("LIBCLANG_PATH").is_some() {
        return true;
    }
    let dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib", "/usr/local/lib"];
    let mut found = dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                e.file_name().to_string_lossy().starts_with("libclang")
                    && e.file_name().to_string_lossy().contains(".so")
            })
        })
    });
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        for e in rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
        {
            if let Ok(libs) = std::fs::read_dir(e.path().join("lib")) {
                found |= libs.flatten().any(|l| {
                    let n = l.file_name().to_string_lossy().into_owned();
                    n.starts_with("libclang") && n.contains(".so") && !n.starts_with("libclang-cpp")
                });
            }
        }
    }
    found
}

fn pkg_config_has(pkgs: &[&str]) -> bool {
    Command::new("pkg-config")
        .arg("--exists")
        .args(pkgs)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn rdma_sys_layout_and_calls_through_our_library() {
    if !prerequisite(
        which("pkg-config").is_some(),
        "pkg-config (apt-get install pkg-config)",
    ) || !prerequisite(
        pkg_config_has(&["libibverbs", "librdmacm"]),
        "libibverbs-dev and librdmacm-dev (pkg-config libibverbs librdmacm)",
    ) || !prerequisite(
        libclang_present(),
        "libclang for bindgen (apt-get install libclang-dev)",
    ) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = root.join("tests/abi/Cargo.toml");
    assert!(manifest.exists(), "{} missing", manifest.display());
    let cargo = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| "cargo".into());
    let lib_dir = lib_dir();
    // Separate target dir: the outer `cargo test` holds the lock on the workspace's.
    let target = common::profile_dir().parent().unwrap().join("abi-rdma-sys");

    let mut c = Command::new(cargo);
    c.arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--")
        .arg("--nocapture");
    for (k, _) in std::env::vars() {
        let inherited_build_var = (k.starts_with("CARGO_")
            && k != "CARGO_HOME"
            && !k.starts_with("CARGO_REGISTRIES")
            && !k.starts_with("CARGO_NET")
            && !k.starts_with("CARGO_HTTP"))
            || k == "MAKEFLAGS"
            || k == "MFLAGS"
            || k.starts_with("ROCE_");
        if inherited_build_var {
            c.env_remove(&k);
        }
    }
    c.env("CARGO_TARGET_DIR", &target)
        .env("LD_LIBRARY_PATH", &lib_dir)
        .current_dir(root.join("tests/abi"));
    let out = run(c, Duration::from_secs(1200));
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert!(!out.timed_out, "tests/abi timed out:\n{all}");
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "tests/abi failed:\n{all}"
    );
    assert!(
        all.contains("sizes and offsets equal rdma-sys's"),
        "layout test did not run:\n{all}"
    );
    assert!(
        all.contains("test device_context_and_queries_through_rdma_sys ... ok"),
        "{all}"
    );
    assert!(!all.contains("SKIP"), "a tests/abi test skipped:\n{all}");
    for l in all
        .lines()
        .filter(|l| l.contains("equal rdma-sys") || (l.starts_with("test ") && l.contains(" ... ")))
    {
        println!("tests/abi: {l}");
    }
}
