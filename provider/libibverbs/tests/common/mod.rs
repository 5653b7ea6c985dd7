//! Shared helpers of the process-level tests: where our `libibverbs.so.1` is, the project's
//! prerequisite rule, and running a program with a deadline.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Project rule: a missing prerequisite fails under `CI=true`, otherwise skips loudly
/// (`roce_tests::prereq::require`, the one place of the rule). Returns `false` when the caller
/// should return (skip).
pub fn prerequisite(ok: bool, what: &str) -> bool {
    let test = std::thread::current().name().unwrap_or("test").to_string();
    roce_tests::prereq::require(&test, what, ok)
}

/// `target/<profile>`: the test executable lives in `target/<profile>/deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// The directory holding `libibverbs.so.1` and `librdmacm.so.1`, symlinks to `deps/libroce_ibverbs.so` that this
/// makes (idempotently, atomically). `cargo test` (re)builds the cdylib into `deps/` before
/// running integration tests — because the crate is also an `rlib`, which integration tests
/// depend on; a cdylib-only crate is not built by `cargo test` at all — but only `cargo build`
/// copies it up to `target/<profile>/libroce_ibverbs.so`, so the link points into `deps/`.
pub fn lib_dir() -> PathBuf {
    let dir = profile_dir();
    let so = dir.join("deps/libroce_ibverbs.so");
    assert!(
        so.exists(),
        "{} missing: cargo should have built the cdylib",
        so.display()
    );
    let want = Path::new("deps/libroce_ibverbs.so");
    // the same library is librdmacm.so.1 (src/ffi/rdmacm/mod.rs)
    for name in ["libibverbs.so.1", "librdmacm.so.1"] {
        let link = dir.join(name);
        if !std::fs::read_link(&link).is_ok_and(|t| t == want) {
            let tmp = dir.join(format!(".{name}.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::os::unix::fs::symlink(want, &tmp).expect("symlink");
            std::fs::rename(&tmp, &link).expect("rename symlink");
        }
    }
    dir
}

pub fn our_lib() -> PathBuf {
    lib_dir().join("libibverbs.so.1")
}

pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

pub struct Output {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl Output {
    /// Killed by a signal other than our own timeout kill.
    pub fn crashed(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        if self.timed_out {
            return None;
        }
        self.status.and_then(|s| s.signal())
    }
}

/// Kills `child` and every process of its group (`run` and the servers of the tests start
/// each program as the leader of a new group): a server that forks per connection (qperf)
/// leaves no child behind to hold its address for the next test.
pub fn kill_group(child: &mut Child) {
    // SAFETY: kill(2) of the process group our own child leads; no memory involved.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.kill();
}

/// Runs `cmd` (stdin closed, in a new process group) until it exits or `limit` passes (then
/// kills the group).
pub fn run(mut cmd: Command, limit: Duration) -> Output {
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out_pipe, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err_pipe, &mut s);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break Some(s);
        }
        if start.elapsed() > limit {
            timed_out = true;
            kill_group(&mut child);
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        timed_out,
    }
}

/// A command for `prog` that loads our library: `LD_LIBRARY_PATH` = our dir, `LD_BIND_NOW=1`,
/// and no inherited ROCE_* settings.
pub fn with_our_lib(prog: &Path) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", lib_dir()).env("LD_BIND_NOW", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("ROCE_") {
            c.env_remove(k);
        }
    }
    c
}

/// The dynamic loader's complaints that mean our library does not stand in for rdma-core's.
pub const LOADER_ERRORS: &[&str] = &[
    "symbol lookup error",
    "undefined symbol",
    "version `IBVERBS",
    "no version information available",
    "cannot open shared object",
    "error while loading shared libraries",
];

pub fn assert_loads_cleanly(what: &str, out: &Output) {
    for e in LOADER_ERRORS {
        assert!(
            !out.stderr.contains(e),
            "{what}: loader error {e:?} in stderr:\n{}",
            out.stderr
        );
    }
    assert!(
        out.crashed().is_none(),
        "{what}: killed by signal {:?}\nstderr:\n{}",
        out.crashed(),
        out.stderr
    );
}

/// `objdump -T` of `file`: `(version, name, defined)` for every dynamic symbol that has a
/// version (the version without parentheses; hidden/non-default versions keep them).
pub fn dynsyms(file: &Path) -> Vec<(String, String, bool)> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(file)
        .output()
        .expect("objdump");
    assert!(out.status.success(), "objdump -T {} failed", file.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !(f[2] == "DF" || f[2] == "DO" || f[1] == "DF" || f[1] == "DO") {
            continue;
        }
        let defined = !line.contains("*UND*");
        let name = f[f.len() - 1].to_string();
        let ver = f[f.len() - 2].to_string();
        v.push((ver, name, defined));
    }
    v
}
