//! The C ABI under valgrind memcheck (issue 7, item 4): the drop-in tests run once under
//! `valgrind --tool=memcheck` on our `libibverbs.so.1` (through `roce run`, as in the other
//! drop-in tests) and must give zero errors: no invalid read or write, no use of uninitialised
//! memory in a syscall or a branch, no mismatched free, no definite leak
//! (`--leak-check=full --errors-for-leak-kinds=definite`, `--track-origins=yes`).
//!
//! * `misuse.c` and `diagnose.c`, compiled as `misuse.rs` / `diagnose.rs` compile them (plus
//!   `-g`): NULL, destroyed and wrong-typed objects, QPs in the wrong state, bad keys, RNR, CQ
//!   overflow — the error paths of every verb they touch.
//! * `ibv_rc_pingpong -n 20` (and `-e`, completion channels) from Debian's ibverbs-utils, server
//!   and client both under valgrind, and `ib_write_bw -n 50` from perftest.
//!
//! Each test prints valgrind's figures (`ERROR SUMMARY`, leak kinds, heap usage) and, when it
//! fails, valgrind's report. What the programs check themselves is `misuse.rs` / `diagnose.rs`'s
//! business (under valgrind's 20–50× slowdown an RNR-vs-ACK-timeout race could turn one of
//! their checks): here a FAIL line is reported on stderr, and the program must only run to its
//! end. Suppressions (`memcheck.supp`) cover perftest's own bugs only, each with its reason;
//! errors in our library are fixed, not suppressed.
//!
//! The emulated NICs use their own loopback addresses (127.0.47.1 and .2) so that the suite can
//! run next to the other drop-in tests. `ROCE_SPIN_US=0`: valgrind runs one thread at a time, and
//! a progress thread spinning on the socket would only take turns from the program's thread.
//!
//! Missing valgrind, compiler, `verbs.h` or Debian binary: FAIL under `CI=true`, else a loud SKIP.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Valgrind's exit status when it found errors (`--error-exitcode`).
const VG_ERROR_EXIT: i32 = 97;
const SERVER_IP: &str = "127.0.47.1";
const CLIENT_IP: &str = "127.0.47.2";
const SERVER_IP4: [u8; 4] = [127, 0, 47, 1];
const CLIENT_IP4: [u8; 4] = [127, 0, 47, 2];
const SUPP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/memcheck.supp");

fn valgrind() -> Option<PathBuf> {
    let v = which("valgrind");
    prerequisite(v.is_some(), "valgrind (apt-get install valgrind)").then_some(v?)
}

fn c_prerequisites() -> Option<PathBuf> {
    let cc = which("cc").or_else(|| which("gcc"));
    let ok = prerequisite(cc.is_some(), "a C compiler (apt-get install gcc)")
        && prerequisite(
            Path::new("/usr/include/infiniband/verbs.h").exists(),
            "verbs.h (apt-get install libibverbs-dev)",
        );
    ok.then_some(cc?)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("roce-memcheck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `valgrind <options> --log-file=LOG` as the start of a command line.
fn vg_cmd(vg: &Path, log: &Path) -> Vec<String> {
    let mut v = vec![vg.to_string_lossy().into_owned()];
    v.extend(
        [
            "--tool=memcheck",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--show-leak-kinds=definite",
            "--track-origins=yes",
            "--num-callers=40",
            // Valgrind serialises threads; a fair lock keeps the progress thread from starving
            // the program's thread (or the reverse) and the timing of the runs steady.
            "--fair-sched=yes",
        ]
        .map(String::from),
    );
    v.push(format!("--error-exitcode={VG_ERROR_EXIT}"));
    v.push(format!("--suppressions={SUPP}"));
    v.push(format!("--log-file={}", log.display()));
    v
}

/// Valgrind's closing figures for one process.
#[derive(Debug, Default)]
struct Figures {
    errors: u64,
    contexts: u64,
    suppressed: u64,
    definite: u64,
    indirect: u64,
    possible: u64,
    reachable: u64,
    allocs: u64,
}

fn num(s: &str) -> u64 {
    s.replace(',', "").parse().unwrap_or(u64::MAX)
}

/// The number after `key` in `line` (valgrind writes "1,234").
fn after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let n: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .collect();
    Some(num(&n))
}

/// Parses valgrind's log; `None` if it has no `ERROR SUMMARY` (valgrind did not finish).
fn figures(log: &str) -> Option<Figures> {
    let mut f = Figures::default();
    let mut summary = false;
    for l in log.lines() {
        if l.contains("ERROR SUMMARY:") {
            summary = true;
            f.errors = after(l, "ERROR SUMMARY:")?;
            f.contexts = after(l, "errors from")?;
            f.suppressed = after(l, "(suppressed:")?;
        } else if l.contains("definitely lost:") {
            f.definite = after(l, "definitely lost:")?;
        } else if l.contains("indirectly lost:") {
            f.indirect = after(l, "indirectly lost:")?;
        } else if l.contains("possibly lost:") {
            f.possible = after(l, "possibly lost:")?;
        } else if l.contains("still reachable:") {
            f.reachable = after(l, "still reachable:")?;
        } else if l.contains("total heap usage:") {
            f.allocs = after(l, "total heap usage:")?;
        }
    }
    summary.then_some(f)
}

/// Checks one valgrind run: it finished, found zero errors and did not exit with its error
/// status. Prints the figures; on failure prints valgrind's report (the whole log, or its first
/// and last lines when it is long) before panicking.
fn check(what: &str, log_path: &Path, out: &Out, secs: f64) -> Figures {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let f = figures(&log);
    if let Some(f) = &f {
        println!(
            "memcheck {what}: {} errors ({} suppressed), definitely lost {} B, indirectly {} B, \
             possibly {} B, still reachable {} B, {} allocations, {secs:.1} s",
            f.errors, f.suppressed, f.definite, f.indirect, f.possible, f.reachable, f.allocs
        );
    }
    let clean = f.as_ref().is_some_and(|f| f.errors == 0) && out.code != Some(VG_ERROR_EXIT);
    if !clean {
        let lines: Vec<&str> = log.lines().collect();
        eprintln!("---- valgrind report of {what} ({}):", log_path.display());
        if lines.len() <= 400 {
            eprintln!("{log}");
        } else {
            eprintln!("{}", lines[..300].join("\n"));
            eprintln!("[… {} lines …]", lines.len() - 340);
            eprintln!("{}", lines[lines.len() - 40..].join("\n"));
        }
        eprintln!(
            "---- program stdout:\n{}\n---- stderr:\n{}",
            out.stdout, out.stderr
        );
    }
    let f = f.unwrap_or_else(|| {
        panic!(
            "valgrind did not finish {what} (no ERROR SUMMARY; timed out: {}, exit {:?})",
            out.timed_out, out.code
        )
    });
    assert_eq!(
        f.errors, 0,
        "valgrind memcheck found {} errors in {} contexts in {what} (report above)",
        f.errors, f.contexts
    );
    assert_ne!(out.code, Some(VG_ERROR_EXIT), "valgrind reported errors");
    f
}

/// Waits until nothing holds UDP `ip`:4791 (a previous run still exiting).
fn wait_free(ips: &[[u8; 4]]) {
    let t = Instant::now();
    while ips.iter().any(|ip| udp_bound(*ip)) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "{ips:?}:4791 stayed busy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Compiles `provider/cli/tests/<name>.c` as its own test does, plus `-g` for valgrind's stacks.
fn compile(cc: &Path, name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    let src = format!("{}/tests/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let st = Command::new(cc)
        .args(["-g", "-O1", "-Wall", "-Wno-format-zero-length", "-o"])
        .arg(&exe)
        .arg(src)
        .arg("-libverbs")
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling {name}.c failed");
    exe
}

/// Runs one of the C test programs under valgrind on `roce run --ip SERVER_IP`.
fn c_program(name: &str, env: &[(&str, &str)]) {
    let (Some(vg), Some(cc)) = (valgrind(), c_prerequisites()) else {
        return;
    };
    let dir = scratch(name);
    let exe = compile(&cc, name, &dir);
    let log = dir.join("valgrind.log");
    let stat_dir = dir.join("stat");
    std::fs::create_dir_all(&stat_dir).unwrap();
    let mut cmd = vg_cmd(&vg, &log);
    cmd.push(exe.to_string_lossy().into_owned());
    let mut env = env.to_vec();
    env.extend([
        ("ROCE_SPIN_US", "0"),
        ("ROCE_STAT_DIR", stat_dir.to_str().unwrap()),
    ]);
    let _g = serial();
    wait_free(&[SERVER_IP4]);
    let t = Instant::now();
    let out =
        spawn(&["--ip".to_string(), SERVER_IP.into()], &cmd, &env).wait(Duration::from_secs(180));
    let secs = t.elapsed().as_secs_f64();
    check(&format!("{name}.c"), &log, &out, secs);
    assert!(!out.timed_out, "{name} hung under valgrind");
    assert!(
        out.stdout.lines().any(|l| l.ends_with(" failures")),
        "{name} did not run to its end:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    for l in out.stdout.lines().filter(|l| l.contains(" FAIL")) {
        eprintln!("note: under valgrind {name}.c reported: {l}");
    }
    assert!(
        matches!(out.code, Some(0 | 1)),
        "{name} ended with {:?}",
        out.code
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn misuse_c_has_no_memcheck_errors() {
    c_program("misuse", &[("ROCE_QUIET", "1")]);
}

#[test]
fn diagnose_c_has_no_memcheck_errors() {
    c_program("diagnose", &[]);
}

/// A server (SERVER_IP) and a client (CLIENT_IP → SERVER_IP) of an unmodified Debian tool, both
/// under valgrind; `port` is the tool's TCP port (`-p`). Returns the client's stdout.
fn tool_pair(name: &str, tool: &str, args: &[&str], port: u16, pkg: &str) -> Option<String> {
    let vg = valgrind()?;
    if !have_tools(&[tool], pkg) {
        return None;
    }
    let tool = which(tool).unwrap();
    let dir = scratch(name);
    let (slog, clog) = (dir.join("server.log"), dir.join("client.log"));
    let mut sargs = vg_cmd(&vg, &slog);
    sargs.push(tool.to_string_lossy().into_owned());
    sargs.extend(args.iter().map(|s| s.to_string()));
    sargs.extend(["-p".into(), port.to_string()]);
    let mut cargs = vg_cmd(&vg, &clog);
    cargs.extend(sargs[cargs.len()..].iter().cloned());
    cargs.push(SERVER_IP.into());
    let env = [("ROCE_SPIN_US", "0")];
    let _g = serial();
    wait_free(&[SERVER_IP4, CLIENT_IP4]);
    let t = Instant::now();
    while tcp_listening(port) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "TCP port {port} busy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    let mut server = spawn(&["--ip".to_string(), SERVER_IP.into()], &sargs, &env);
    // Valgrind takes a few seconds to load the tool before it listens.
    while !tcp_listening(port) && t.elapsed() < Duration::from_secs(60) && !server.exited() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let client =
        spawn(&["--ip".to_string(), CLIENT_IP.into()], &cargs, &env).wait(Duration::from_secs(150));
    let server = if client.timed_out {
        server.kill()
    } else {
        server.wait(Duration::from_secs(180))
    };
    let secs = t.elapsed().as_secs_f64();
    check(&format!("{name} server"), &slog, &server, secs);
    check(&format!("{name} client"), &clog, &client, secs);
    assert!(
        !client.timed_out && !server.timed_out,
        "{name} hung under valgrind:\n{}\n{}",
        server.all(),
        client.all()
    );
    assert_eq!(server.code, Some(0), "{name} server:\n{}", server.all());
    assert_eq!(client.code, Some(0), "{name} client:\n{}", client.all());
    let _ = std::fs::remove_dir_all(&dir);
    Some(client.stdout)
}

#[test]
fn rc_pingpong_pair_has_no_memcheck_errors() {
    let args = ["-g", "1", "-n", "20"];
    if let Some(out) = tool_pair(
        "ibv_rc_pingpong",
        "ibv_rc_pingpong",
        &args,
        18561,
        "ibverbs-utils",
    ) {
        assert!(out.contains("20 iters in"), "{out}");
    }
}

#[test]
fn rc_pingpong_events_pair_has_no_memcheck_errors() {
    let args = ["-g", "1", "-n", "20", "-e"];
    if let Some(out) = tool_pair(
        "ibv_rc_pingpong -e",
        "ibv_rc_pingpong",
        &args,
        18562,
        "ibverbs-utils",
    ) {
        assert!(out.contains("20 iters in"), "{out}");
    }
}

#[test]
fn ib_write_bw_pair_has_no_memcheck_errors() {
    let args = ["-x", "1", "-n", "50", "-s", "4096"];
    if let Some(out) = tool_pair("ib_write_bw", "ib_write_bw", &args, 18563, "perftest") {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some("4096")),
            "no 4096-byte result line:\n{out}"
        );
    }
}
