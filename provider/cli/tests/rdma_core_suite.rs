//! rdma-core's own verbs and RDMA CM test suite (the `tests/` of rdma-core that Debian ships in
//! python3-pyverbs, under /usr/share/doc/rdma-core/tests), unmodified, through `roce run` on
//! 127.0.0.1: every test passes or is skipped, and the tests of what kernel rxe supports
//! run and pass (memory windows, resize CQ, extended QPs, RDMA CM over RC and UD). Its
//! harness uses the first GID; as on rxe over an IPv4 netdev the RoCE v2 GID of the address is
//! index 1, so it runs with `--gid 1` (index 0, `fe80::`, is refused loudly here).
//!
//! A "real stacks" test (`scripts/real-stacks`). Prerequisite: python3-pyverbs (FAIL under
//! `CI=true`, else a SKIP).
mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

const SUITE: &str = "/usr/share/doc/rdma-core/tests";

/// Runs the suite like its `run_tests.py`, printing one `RESULT <test id> <ok|skip|error|fail>
/// [reason]` line per test on stdout.
const RUNNER: &str = r#"
import os, sys, unittest
from importlib.machinery import SourceFileLoader
d = sys.argv[1]
sys.path.insert(0, d)
sys.argv = ['run_tests.py', '--dev', 'rxe0', '--gid', '1']
from args_parser import parser
tests = SourceFileLoader('tests', os.path.join(d, '__init__.py')).load_module()
parser.parse_args()
class R(unittest.TextTestResult):
    def addSuccess(self, t):
        super().addSuccess(t); print('RESULT', t.id(), 'ok', flush=True)
    def addSkip(self, t, why):
        super().addSkip(t, why); print('RESULT', t.id(), 'skip', why, flush=True)
    def addError(self, t, e):
        super().addError(t, e); print('RESULT', t.id(), 'error', flush=True)
    def addFailure(self, t, e):
        super().addFailure(t, e); print('RESULT', t.id(), 'fail', flush=True)
suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
r = unittest.TextTestRunner(resultclass=R, verbosity=1).run(suite)
sys.exit(0 if r.wasSuccessful() else 1)
"#;

/// Tests of features kernel rxe (6.1) has: they must run and pass, not be skipped.
const MUST_PASS: &[&str] = &[
    "test_mr.MWTest.test_mw_type1",
    "test_mr.MWTest.test_mw_type2",
    "test_mr.MWTest.test_invalidate_mw_type1",
    "test_mr.MWTest.test_mw_type2_invalidate_local",
    "test_mr.MWTest.test_mw_type2_invalidate_remote",
    "test_mr.MWTest.test_mw_type2_invalidate_dealloc",
    "test_qpex.QpExTestCase.test_qp_ex_rc_bind_mw",
    "test_cq.CQTest.test_resize_cq",
    "test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write",
    "test_qpex.QpExTestCase.test_qp_ex_rc_atomic_cmp_swp",
    "test_qpex.QpExTestCase.test_qp_ex_ud_send",
    "test_atomic.AtomicTest.test_atomic_cmp_and_swap",
    "test_cq_events.CqEventsTestCase.test_cq_events_rc",
    "test_rdmacm.CMTestCase.test_rdmacm_sync_traffic",
    "test_rdmacm.CMTestCase.test_rdmacm_async_traffic",
    "test_rdmacm.CMTestCase.test_rdmacm_async_traffic_external_qp",
    "test_rdmacm.CMTestCase.test_rdmacm_async_udp_traffic",
    "test_rdmacm.CMTestCase.test_rdmacm_async_reject_traffic",
    "test_rdmacm.CMTestCase.test_rdmacm_async_read",
    "test_rdmacm.CMTestCase.test_rdmacm_async_write",
];

/// Copies the suite (Debian gzips its larger files) into a scratch directory.
fn unpack(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(SUITE).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(e.path()).unwrap();
        if let Some(plain) = name.strip_suffix(".gz") {
            let out = std::process::Command::new("gzip")
                .arg("-dc")
                .arg(e.path())
                .output()
                .expect("gzip");
            assert!(out.status.success(), "gzip -dc {name}");
            std::fs::write(to.join(plain), out.stdout).unwrap();
        } else {
            std::fs::write(to.join(&name), bytes).unwrap();
        }
    }
}

#[test]
#[ignore = "real stacks: run by scripts/real-stacks (cargo test -- --ignored)"]
fn rdma_core_test_suite_passes_through_the_drop_in_libraries() {
    let have = Path::new(SUITE).join("run_tests.py").exists()
        && std::process::Command::new("/usr/bin/python3")
            .args(["-c", "import pyverbs.device"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !prerequisite(have, "rdma-core's tests (apt-get install python3-pyverbs)") {
        return;
    }
    // its RDMA CM tests take the address of the device's netdev from sysfs (`device/net/lo`)
    // and that is lo's first address: the device must be 127.0.0.1 (shared with other tests:
    // one at a time)
    let _g = serial_on_loopback(Duration::from_secs(120));
    let dir = std::env::temp_dir().join(format!("roce-rdma-core-tests-{}", std::process::id()));
    let tests = dir.join("tests");
    unpack(&tests);
    let o = spawn(
        &["--ip".to_string(), "127.0.0.1".into()],
        &[
            "/usr/bin/python3".to_string(),
            "-c".into(),
            RUNNER.into(),
            tests.to_string_lossy().into_owned(),
        ],
        &[],
    )
    .wait(Duration::from_secs(300));
    let _ = std::fs::remove_dir_all(&dir);
    let results: Vec<(&str, &str)> = o
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .filter_map(|l| {
            let mut w = l.splitn(3, ' ');
            Some((w.next()?, w.next()?))
        })
        .collect();
    let bad: Vec<_> = results
        .iter()
        .filter(|(_, r)| *r == "error" || *r == "fail")
        .collect();
    let ok = results.iter().filter(|(_, r)| *r == "ok").count();
    println!(
        "rdma-core tests: {} run, {ok} passed, {} skipped, {} failed",
        results.len(),
        results.iter().filter(|(_, r)| *r == "skip").count(),
        bad.len()
    );
    assert!(!o.timed_out, "the suite hung:\n{}", o.all());
    assert!(results.len() > 200, "too few tests ran:\n{}", o.all());
    assert!(bad.is_empty(), "failed: {bad:?}\n{}", o.stderr);
    assert_eq!(o.code, Some(0), "{}", o.all());
    for t in MUST_PASS {
        let r = results
            .iter()
            .find(|(id, _)| id.ends_with(t))
            .map(|(_, r)| *r);
        assert_eq!(r, Some("ok"), "{t} (a feature kernel rxe has)");
    }
}
