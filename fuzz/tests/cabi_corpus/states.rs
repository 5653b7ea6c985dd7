//! Scripts at the edges of queues and QP states: CQ overflow, RESET and ERR with WRs
//! outstanding, inline sends, malformed work requests, arbitrary modify masks.

use super::build::*;
use roce_fuzz::cabi::{AhSpec, List, Op, RecvSpec, Ref, Remote};

/// Appends this group's `(name, ops)` scripts to `v`.
pub(super) fn scripts(v: &mut Vec<(&'static str, Vec<Op>)>) {
    // a 1-entry CQ and more signaled WRs than it holds
    let mut s = vec![
        pd(),
        mr(0, 0),
        mr(1, 0),
        cq(1),
        cq(2),
        qp(0, L0, L1, Ref(0), true),
        qp(0, L0, L1, Ref(0), true),
        connect(L0, L1),
        recv(L1, vec![vec![sge(1, 0, 64)]; 4]),
    ];
    for _ in 0..3 {
        s.push(post(
            L0,
            vec![send(0, 0, vec![sge(0, 0, 16)], Remote::default()); 3],
        ));
    }
    s.push(pump());
    v.push(("cq-overflow", s));

    // WRs outstanding when the QP goes to RESET (no completions), then posts in RESET
    let mut s = pair(0);
    s.push(recv(L1, vec![vec![sge(1, 0, 64)]; 3]));
    s.push(post(
        L0,
        vec![send(2, SIGNALED, vec![sge(0, 0, 64)], remote(1, 0, 1)); 2],
    ));
    s.push(modify_state(L0, 0));
    s.push(modify_state(L1, 0));
    s.push(recv(L1, vec![vec![sge(1, 0, 64)]]));
    s.push(post(
        L0,
        vec![send(0, SIGNALED, vec![sge(0, 0, 64)], Remote::default())],
    ));
    s.push(pump());
    s.push(connect(L0, L1));
    s.push(recv(L1, vec![vec![sge(1, 0, 64)]]));
    s.push(post(
        L0,
        vec![send(0, SIGNALED, vec![sge(0, 0, 64)], Remote::default())],
    ));
    s.push(pump());
    s.push(modify_state(L1, 6));
    s.push(post(
        L0,
        vec![send(0, SIGNALED, vec![sge(0, 0, 64)], Remote::default())],
    ));
    s.push(pump());
    s.push(modify_state(L0, 0));
    s.push(modify_state(L0, 6));
    s.push(Op::QueryQp {
        qp: L0,
        mode: 0,
        mask: 1,
    });
    v.push(("reset-and-err", s));

    // inline sends (SGE addresses are real pointers), also past max_inline_data
    let mut s = pair(0);
    s.push(recv(L1, vec![vec![sge(1, 0, 4096)]; 3]));
    let mut big = sge(0, 0, 300);
    big.mode = 5;
    s.push(post(
        L0,
        vec![
            send(
                0,
                SIGNALED | INLINE,
                vec![sge(0, 0, 40), sge(2, 100, 20)],
                Remote::default(),
            ),
            send(
                2,
                SIGNALED | INLINE,
                vec![sge(0, 4150, 60)],
                remote(1, 0, 1),
            ),
            send(0, SIGNALED | INLINE, vec![big], Remote::default()),
            send(4, SIGNALED | INLINE, vec![sge(0, 0, 16)], remote(1, 0, 1)),
        ],
    ));
    s.push(pump());
    v.push(("inline", s));

    // malformed work requests: negative / NULL / too many SGEs, unsupported opcodes, bad keys
    let mut s = pair(0);
    let mut w = send(0, SIGNALED, vec![sge(0, 0, 8)], Remote::default());
    let mut r = RecvSpec {
        sges: List(vec![sge(1, 0, 8)]),
        sge_mode: 0,
    };
    for mode in [15u8, 14, 13] {
        w.sge_mode = mode;
        r.sge_mode = mode;
        s.push(post(
            L0,
            vec![send(0, SIGNALED, vec![], Remote::default()), w.clone()],
        ));
        s.push(Op::PostRecv {
            qp: L1,
            wrs: List(vec![RecvSpec::default(), r.clone()]),
            bad_null: mode == 13,
        });
    }
    for op in [0xE0 + 7, 0xE0 + 8, 0xE0 + 10, 0xE0 + 14, 0xE0 + 15, 0xFF] {
        s.push(post(
            L0,
            vec![send(op, SIGNALED, vec![sge(0, 0, 8)], remote(1, 0, 0))],
        ));
    }
    let mut keys = vec![];
    for mode in 5..8 {
        let mut g = sge(0, 4000, 200);
        g.mode = mode;
        keys.push(send(0, SIGNALED, vec![g], Remote::default()));
    }
    keys.push(send(2, SIGNALED, vec![sge(0, 0, 8)], remote(1, 5000, 2)));
    s.push(recv(L1, vec![vec![sge(1, 0, 4096)]; 4]));
    s.push(post(L0, keys));
    s.push(Op::PostSend {
        qp: L0,
        wrs: List(vec![
            send(0, SIGNALED, vec![sge(0, 0, 8)], Remote::default()),
            send(0xFF, SIGNALED, vec![sge(0, 0, 8)], Remote::default()),
        ]),
        bad_null: true,
    });
    s.push(pump());
    v.push(("bad-work-requests", s));

    // arbitrary attribute masks and values on one QP
    let mut s = pair(0);
    for (tmpl, mask, state) in [
        (0u8, 0x1FFFFFu32, 1u8),
        (1, 0, 0),
        (6, 0xFFFF_FFFF, 3),
        (7, 0x3, 4),
        (5, 0x0, 3),
        (0, 0x2, 3),
        (4, 0, 4),
        (4, 0, 5),
        (4, 0, 7),
        (4, 0, 0xF9),
        (2, 0, 0),
        (3, 0, 0),
    ] {
        s.push(Op::ModifyQp {
            qp: L0,
            tmpl,
            mask,
            state,
            cur: 3,
            mtu: 4,
            qkey: 9,
            rq_psn: 0xFF_FFFF,
            sq_psn: 0x100_0000,
            dest: L1,
            access: 0xFF,
            pkey: 0,
            port: 0,
            timeout: 40,
            retry: 9,
            rnr: 2,
            min_rnr: 33,
            rd: 200,
            dest_rd: 3,
            sqd: 1,
            ah: AhSpec {
                gid: 2,
                ..AhSpec::default()
            },
        });
        s.push(post(
            L0,
            vec![send(0, SIGNALED, vec![sge(0, 0, 8)], Remote::default())],
        ));
    }
    s.push(Op::AsyncEvents { ctx: L0 });
    v.push(("modify-arbitrary", s));
}
