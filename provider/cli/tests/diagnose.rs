//! Diagnostics that teach (issue 4, item 6): `diagnose.c` provokes each classic verbs mistake
//! through the C ABI on `roce run --ip 127.0.0.1`; stderr must carry exactly one warning per
//! cause and QP, on the side where it happened, with the exact message, and `roce stat` must
//! count them (`diag_*`; RNR retries running out in rxe's `retry_rnr_exceeded_err`).

mod common;
use common::*;
use std::collections::HashMap;
use std::time::Duration;

/// (mistake as printed by diagnose.c, what the warning says after "roce: QP 0x..: ", counter).
const EXPECTED: &[(&str, &str, &str)] = &[
    (
        "wrong_state",
        "ibv_post_send was called while the QP is in state RESET, which does not allow it. Move the \
         QP to INIT (ibv_modify_qp) before posting receives, and to RTS before posting sends.",
        "diag_wrong_state 4",
    ),
    (
        "wrong_state",
        "ibv_post_recv was called while the QP is in state RESET, which does not allow it. Move the \
         QP to INIT (ibv_modify_qp) before posting receives, and to RTS before posting sends.",
        "diag_wrong_state 4",
    ),
    (
        "rnr",
        "a SEND arrived but no receive WR was posted (RNR NAK sent). Post receive work requests \
         before the peer sends, e.g. pre-post ibv_post_recv for every expected message.",
        "diag_rnr_no_recv",
    ),
    (
        "bad_rkey",
        "an incoming RDMA READ/WRITE/atomic was refused with an rkey that no memory region of this \
         device has (NAK remote access error sent, QP moved to ERR). Send the peer the current \
         mr->rkey (and address) of a live ibv_reg_mr region, and keep the region registered while \
         the peer uses it.",
        "diag_bad_rkey 1",
    ),
    (
        "stale_rkey",
        "an incoming RDMA READ/WRITE/atomic was refused with the rkey of a memory region that was \
         deregistered (NAK remote access error sent, QP moved to ERR). Send the peer the current \
         mr->rkey (and address) of a live ibv_reg_mr region, and keep the region registered while \
         the peer uses it.",
        "diag_stale_rkey 1",
    ),
    (
        "out_of_bounds",
        "an incoming RDMA READ/WRITE/atomic was refused outside the bounds of the memory region of \
         its rkey (or of its memory window) (NAK remote access error sent, QP moved to ERR). Keep \
         remote_addr .. remote_addr+length inside [mr->addr, mr->addr+mr->length) of the region \
         the peer advertised (for a memory window: inside the addr and length it was bound \
         with).",
        "diag_remote_out_of_bounds 1",
    ),
    (
        "no_permission",
        "an incoming RDMA READ/WRITE/atomic was refused on a memory region registered without the \
         remote access it needs (NAK remote access error sent, QP moved to ERR). Register the \
         region with IBV_ACCESS_REMOTE_WRITE / IBV_ACCESS_REMOTE_READ / IBV_ACCESS_REMOTE_ATOMIC \
         as the peer's operations need (remote write and atomics also need \
         IBV_ACCESS_LOCAL_WRITE).",
        "diag_remote_no_permission 1",
    ),
    (
        "qp_access",
        "an incoming RDMA READ/WRITE/atomic was refused because this QP's qp_access_flags lack \
         IBV_ACCESS_REMOTE_ATOMIC (NAK invalid request sent, QP moved to ERR). Set \
         qp_access_flags (IBV_QP_ACCESS_FLAGS) with IBV_ACCESS_REMOTE_ATOMIC when moving the QP \
         to INIT.",
        "diag_qp_access 1",
    ),
    (
        "wrong_pd",
        "a work request's scatter/gather entry uses the lkey of a memory region in another \
         protection domain than this QP (IBV_WC_LOC_PROT_ERR, QP moved to ERR). Register the \
         buffer in the QP's PD: the QP, its memory regions and address handles must all come \
         from the same ibv_alloc_pd.",
        "diag_lkey_wrong_pd 1",
    ),
    (
        "cq_overflow",
        "a completion was lost because its CQ was full (IBV_EVENT_CQ_ERR, QP moved to ERR). Poll \
         the CQ (ibv_poll_cq) regularly and size it for every outstanding work request (cqe >= \
         max_send_wr + max_recv_wr of its QPs).",
        "diag_cq_overflow",
    ),
];

#[test]
fn each_classic_mistake_warns_once_and_is_counted() {
    let Some(prog) = CProgram::compile("diagnose", CLibs::Verbs) else {
        return;
    };
    let stat_dir = prog.dir.join("stat");
    std::fs::create_dir_all(&stat_dir).unwrap();
    let stat_cmd = format!(
        "{} stat --ip 127.0.0.1 --stat-dir {}",
        roce().display(),
        stat_dir.display()
    );
    let _g = serial_on_loopback(Duration::from_secs(300));
    let out = prog.run(
        &["--ip", "127.0.0.1"],
        &[],
        &[
            ("ROCE_STAT_DIR", stat_dir.to_str().unwrap()),
            ("ROCE_STAT_CMD", &stat_cmd),
        ],
        Duration::from_secs(60),
    );
    println!("{}", out.stdout);
    eprintln!("{}", out.stderr);
    out.assert_no_failed_check();
    assert_eq!(out.code, Some(0));
    let qpn: HashMap<&str, u32> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("QPN "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k, v.trim().parse().unwrap()))
        .collect();
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("roce: QP "))
        .collect();
    for (mistake, msg, counter) in EXPECTED {
        let q = qpn[mistake];
        let line = format!("roce: QP {q:#x}: {msg}");
        let n = warnings.iter().filter(|w| **w == line).count();
        assert_eq!(
            n, 1,
            "expected once on stderr:\n{line}\nwarnings:\n{warnings:#?}"
        );
        assert!(
            out.stdout.lines().any(|l| l.trim().starts_with(counter)),
            "roce stat does not show {counter}"
        );
    }
    // The sender of the RNR case ran out of RNR retries (rnr_retry 3): said on its side.
    let (s, d) = (qpn["rnr_sender"], qpn["rnr"]);
    let line = format!(
        "roce: QP {s:#x}: the peer 127.0.0.1 QP {d:#x} answered RNR (no receive WR posted) more \
         often than rnr_retry 3 allows (IBV_WC_RNR_RETRY_EXC_ERR, QP moved to ERR). The peer must \
         post receive WRs before this side sends to it; rnr_retry 7 retries forever."
    );
    assert_eq!(
        warnings.iter().filter(|w| **w == line).count(),
        1,
        "expected once on stderr:\n{line}\nwarnings:\n{warnings:#?}"
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.trim().starts_with("retry_rnr_exceeded_err 1")),
        "roce stat does not show retry_rnr_exceeded_err 1"
    );
    assert_eq!(
        warnings.len(),
        EXPECTED.len() + 1,
        "one warning per cause and QP, nothing else: {warnings:#?}"
    );
}
