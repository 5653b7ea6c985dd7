//! ECE (`rdma_set_local_ece`, `rdma_get_remote_ece`, `rdma_reject_ece`; RDMACM_1.3) through
//! the drop-in librdmacm.so.1, as librdmacm v44 and kernel rdma_cm behave over rxe:
//! `cm_ece.c` (compiled against the installed `rdma_cma.h`) runs under `roce run` with a
//! listener and a client on one address and checks the argument rules (EINVAL), both sides'
//! ECE arriving at the peer for programs with their own QPs, `ibv_query_ece` / `ibv_set_ece`
//! answering EOPNOTSUPP, `rdma_create_qp` leaving nothing to offer, and `rdma_reject_ece`
//! giving the peer REJECTED with reason 35 and the private data. The run's `--pcap`, decoded
//! by `roce decode`, shows the ECE in the first REQ and REP (Vendor ID, AttributeModifier),
//! none in the second REQ, and the REJ's reason 35 (byte-level checks: `cm/tests/ece.rs`).
//! Prerequisites: a C compiler, librdmacm-dev and
//! libibverbs-dev (FAIL under `CI=true`).
mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn ece_calls_through_the_c_abi() {
    let Some(prog) = CProgram::compile("cm_ece", CLibs::RdmaCm) else {
        return;
    };
    let pcap = prog.dir.join("cm_ece.pcap");
    let out = prog.run(
        &["--ip", "127.0.27.1", "--pcap", &pcap.to_string_lossy()],
        &["127.0.27.1", "7471"],
        &[],
        Duration::from_secs(60),
    );
    let dec = Command::new(roce())
        .arg("decode")
        .arg(&pcap)
        .output()
        .expect("run roce decode");
    drop(prog);
    println!("{}", out.all());
    let dec = String::from_utf8_lossy(&dec.stdout).into_owned();
    // each MAD is captured going out and coming back in: take the sent half
    let cm: Vec<&str> = dec.lines().filter(|l| l.contains(" CM ")).collect();
    let find = |what: &str, n: usize| {
        cm.iter()
            .filter(|l| l.contains(what))
            .nth(n)
            .unwrap_or_else(|| panic!("no {what} #{n} in:\n{dec}"))
            .to_string()
    };
    let req = find("CM REQ", 0);
    assert!(
        req.contains("vendor=0x1a2b3c") && req.contains(" attr_mod=0x55 "),
        "{req}"
    );
    let rep = find("CM REP", 0);
    assert!(
        rep.contains("vendor=0x1a2b3c") && rep.contains(" attr_mod=0x77 "),
        "{rep}"
    );
    let second = cm
        .iter()
        .filter(|l| l.contains("CM REQ"))
        .map(|l| l.to_string())
        .find(|l| !l.contains("vendor="))
        .unwrap_or_else(|| panic!("no REQ without ECE in:\n{dec}"));
    assert!(!second.contains("attr_mod"), "{second}");
    let rej = find("CM REJ", 0);
    assert!(
        rej.contains("reason=35 (vendor option is not supported)"),
        "{rej}"
    );
    out.assert_done();
    assert!(
        !out.stderr.contains("ECE"),
        "no refusal line any more:\n{}",
        out.all()
    );
}
