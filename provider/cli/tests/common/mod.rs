//! Shared helpers of the tool tests: run unmodified Debian binaries through `roce run`, a
//! server on 127.0.0.1 and a client on 127.0.0.2, with timeouts, and check their output.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Every tool pair binds 127.0.0.1:4791 and 127.0.0.2:4791: one pair at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`serial`], then waits (at most `limit`, else fails) until 127.0.0.1:4791 and
/// 127.0.0.2:4791 are free ([`wait_udp_free`]): for a test whose program runs on 127.0.0.1.
pub fn serial_on_loopback(limit: Duration) -> MutexGuard<'static, ()> {
    let g = serial();
    assert!(wait_udp_free(limit), "127.0.0.1:4791 stayed busy");
    g
}

pub fn roce() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roce"))
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file())
}

/// True if the prerequisite is present; otherwise FAIL under `CI=true`, else a loud SKIP
/// (`roce_tests::prereq::require`, the one place of the rule).
pub fn prerequisite(ok: bool, what: &str) -> bool {
    let test = std::thread::current().name().unwrap_or("test").to_string();
    roce_tests::prereq::require(&test, what, ok)
}

pub fn have_tools(tools: &[&str], pkg: &str) -> bool {
    let missing: Vec<_> = tools.iter().filter(|t| which(t).is_none()).collect();
    prerequisite(
        missing.is_empty(),
        &format!("{missing:?} (apt-get install {pkg})"),
    )
}

/// What a C test program links against.
#[derive(Clone, Copy)]
pub enum CLibs {
    /// libibverbs.
    Verbs,
    /// librdmacm and libibverbs.
    RdmaCm,
}

/// Compiles `tests/<name>.c` against the installed rdma-core headers into a fresh temporary
/// directory: `Some((directory, executable))` (the directory is the caller's to remove), or
/// `None` after [`prerequisite`] when no C compiler or the headers are missing.
pub fn compile_c(name: &str, libs: CLibs) -> Option<(PathBuf, PathBuf)> {
    let cc = which("cc").or_else(|| which("gcc"));
    let (header, pkg, link): (&str, &str, &[&str]) = match libs {
        CLibs::Verbs => (
            "/usr/include/infiniband/verbs.h",
            "verbs.h (apt-get install libibverbs-dev)",
            &["-libverbs"],
        ),
        CLibs::RdmaCm => (
            "/usr/include/rdma/rdma_cma.h",
            "rdma_cma.h (apt-get install librdmacm-dev)",
            &["-lrdmacm", "-libverbs"],
        ),
    };
    if !prerequisite(cc.is_some(), "a C compiler (apt-get install gcc)")
        || !prerequisite(std::path::Path::new(header).exists(), pkg)
    {
        return None;
    }
    let dir = std::env::temp_dir().join(format!(
        "roce-{}-{}",
        name.replace('_', "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(format!("{name}.c"));
    let st = Command::new(cc?)
        .args([
            "-O1",
            "-Wall",
            "-Wno-format-zero-length",
            "-Wno-unused-function",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .args(link)
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling {name}.c failed");
    Some((dir, exe))
}

/// A C test program (`tests/<name>.c`, see [`compile_c`]) in a temporary directory of its own,
/// removed when this is dropped (files a test puts there, such as a pcap, go with it).
pub struct CProgram {
    /// The build directory.
    pub dir: PathBuf,
    /// The executable.
    pub exe: PathBuf,
}

impl CProgram {
    /// Compiles `tests/<name>.c`; `None` after [`prerequisite`] as [`compile_c`].
    pub fn compile(name: &str, libs: CLibs) -> Option<CProgram> {
        compile_c(name, libs).map(|(dir, exe)| CProgram { dir, exe })
    }

    /// Runs it once as `roce run <run_args> -- <exe> <args>` with `env`, killed after `limit`.
    pub fn run(
        &self,
        run_args: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> Out {
        let run_args: Vec<String> = run_args.iter().map(|a| a.to_string()).collect();
        let mut cmd = vec![self.exe.to_string_lossy().into_owned()];
        cmd.extend(args.iter().map(|a| a.to_string()));
        spawn(&run_args, &cmd, env).wait(limit)
    }
}

impl Drop for CProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A finished process.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// What every run of a C test program must show: it ended in time and none of its checks
    /// (verbs_setup.h's `CHECK`) printed FAIL.
    pub fn assert_no_failed_check(&self) {
        assert!(!self.timed_out, "hung:\n{}", self.all());
        assert!(!self.stdout.contains("FAIL"), "{}", self.all());
    }

    /// [`Out::assert_no_failed_check`] for a program that ends with verbs_setup.h's `done()`:
    /// its `DONE failures 0` line and exit status 0 too.
    pub fn assert_done(&self) {
        self.assert_no_failed_check();
        assert!(self.stdout.contains("DONE failures 0"), "{}", self.all());
        assert_eq!(self.code, Some(0), "{}", self.all());
    }
}

pub struct Proc {
    child: Child,
    start: Instant,
}

/// Starts `roce run <run_args> -- <cmd...>` with piped output.
pub fn spawn(run_args: &[String], cmd: &[String], env: &[(&str, &str)]) -> Proc {
    let mut c = Command::new(roce());
    c.arg("run").args(run_args).arg("--").args(cmd);
    // its own process group: a timeout or `kill` takes the program's forked children too
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    Proc {
        child: c.spawn().expect("spawn roce run"),
        start: Instant::now(),
    }
}

impl Proc {
    /// Waits until `deadline` after start; kills the process on timeout.
    pub fn wait(mut self, limit: Duration) -> Out {
        let mut timed_out = false;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if self.start.elapsed() > limit => {
                    timed_out = true;
                    self.kill_group();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let code = if timed_out {
            None
        } else {
            self.child.wait().ok().and_then(|s| s.code())
        };
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut stdout);
        }
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        Out {
            code,
            timed_out,
            stdout,
            stderr,
        }
    }

    /// Kills the program and every process of its group (a server that forks per
    /// connection, such as qperf, leaves nothing behind).
    pub fn kill(mut self) -> Out {
        self.kill_group();
        self.wait(Duration::from_secs(5))
    }

    fn kill_group(&mut self) {
        // SAFETY: kill(2) of the process group our own child leads; no memory involved.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.kill();
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

/// Is a TCP port listening on any address (from /proc/net/tcp)?
pub fn tcp_listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let v: Vec<_> = l.split_whitespace().collect();
                v.len() > 3 && v[1].ends_with(&want) && v[3] == "0A"
            })
        })
    })
}

/// Is UDP `ip:4791` bound by anyone but a shared device's steering helper (`roce steer`, which
/// the next program on the address joins; from /proc/net/udp)?
pub fn udp_bound(ip: [u8; 4]) -> bool {
    let want = format!("{:02X}{:02X}{:02X}{:02X}:12B7", ip[3], ip[2], ip[1], ip[0]);
    let inodes: Vec<String> = std::fs::read_to_string("/proc/net/udp")
        .map(|t| {
            t.lines()
                .skip(1)
                .filter(|l| l.split_whitespace().nth(1) == Some(&want))
                .filter_map(|l| l.split_whitespace().nth(9).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    !inodes.is_empty() && inodes.iter().any(|i| !helper_socket(i))
}

/// Socket inode `inode` belongs to a `roce steer` process.
fn helper_socket(inode: &str) -> bool {
    let link = format!("socket:[{inode}]");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        std::fs::read(p.path().join("cmdline"))
            .is_ok_and(|c| c.windows(7).any(|w| w == b"\0steer\0"))
            && std::fs::read_dir(p.path().join("fd")).is_ok_and(|fds| {
                fds.flatten().any(|f| {
                    std::fs::read_link(f.path()).is_ok_and(|l| l.to_str() == Some(link.as_str()))
                })
            })
    })
}

/// Waits until 127.0.0.1:4791 and 127.0.0.2:4791 are free (another test program may hold them).
pub fn wait_udp_free(limit: Duration) -> bool {
    let t = Instant::now();
    while udp_bound([127, 0, 0, 1]) || udp_bound([127, 0, 0, 2]) {
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Result of one server/client pair.
pub struct PairOut {
    pub server: Out,
    pub client: Out,
    pub secs: f64,
}

/// Runs a server (127.0.0.1) and a client (127.0.0.2 → 127.0.0.1) of `tool`. `port` is the TCP
/// port the tool exchanges addresses on (passed with `-p`), `extra_run` extra `roce run` options.
pub fn pair(
    tool: &str,
    args: &[&str],
    port: u16,
    extra_run: &[String],
    limit: Duration,
) -> PairOut {
    let t0 = Instant::now();
    assert!(
        wait_udp_free(Duration::from_secs(300)),
        "127.0.0.1/2:4791 stayed busy (another program?)"
    );
    let mut sargs: Vec<String> = vec![tool.into()];
    sargs.extend(args.iter().map(|s| s.to_string()));
    sargs.extend(["-p".into(), port.to_string()]);
    let mut cargs = sargs.clone();
    cargs.push("127.0.0.1".into());
    let mut srun = vec!["--ip".to_string(), "127.0.0.1".into()];
    srun.extend(extra_run.iter().cloned());
    let mut crun = vec!["--ip".to_string(), "127.0.0.2".into()];
    crun.extend(extra_run.iter().cloned());
    let mut server = spawn(&srun, &sargs, &[]);
    // perftest's client connects once: wait until the server listens (a loaded machine took
    // over 10 s to start one once), or has exited
    let t = Instant::now();
    while !tcp_listening(port) && t.elapsed() < Duration::from_secs(60) && !server.exited() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = spawn(&crun, &cargs, &[]);
    let client = client.wait(limit);
    let server = if client.timed_out {
        server.kill()
    } else {
        server.wait(limit)
    };
    PairOut {
        server,
        client,
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// Lines of perftest output that carry the figures (after the `#bytes` header).
pub fn figures(out: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut on = false;
    for l in out.lines() {
        if l.trim_start().starts_with("#bytes") {
            on = true;
            v.push(l.trim().to_string());
            continue;
        }
        if on && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
            v.push(l.trim().to_string());
        }
    }
    v
}
