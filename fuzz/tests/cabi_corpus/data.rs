//! Scripts that move data: send / receive, RDMA and atomics on RC, UC and UD, SRQs and
//! completion channels.

use super::build::*;
use roce_fuzz::cabi::{List, Op, RecvSpec, Ref, Remote};

/// Appends this group's `(name, ops)` scripts to `v`.
pub(super) fn scripts(v: &mut Vec<(&'static str, Vec<Op>)>) {
    let mut s = pair(0);
    s.push(recv(
        L1,
        vec![vec![sge(1, 0, 2048)], vec![sge(1, 2048, 2048)]],
    ));
    s.push(post(
        L0,
        vec![
            send(0, SIGNALED, vec![sge(0, 0, 1000)], Remote::default()),
            send(
                1,
                SIGNALED,
                vec![sge(0, 100, 10), sge(0, 500, 20)],
                Remote::default(),
            ),
        ],
    ));
    s.push(pump());
    s.push(poll(L0));
    v.push(("rc-send-recv", s));

    let mut s = pair(0);
    s.push(recv(L1, vec![vec![sge(1, 0, 64)]]));
    s.push(post(
        L0,
        vec![
            send(2, SIGNALED, vec![sge(0, 0, 300)], remote(1, 1000, 1)),
            send(3, SIGNALED, vec![sge(0, 0, 30)], remote(1, 3000, 1)),
            send(4, SIGNALED, vec![sge(0, 2000, 500)], remote(1, 100, 1)),
            send(5, SIGNALED, vec![sge(0, 8, 8)], remote(1, 64, 0)),
        ],
    ));
    s.push(post(
        L0,
        vec![
            send(6, SIGNALED, vec![sge(0, 16, 8)], remote(1, 72, 0)),
            send(4, 0, vec![sge(0, 2600, 100)], remote(1, 0, 1)),
            send(2, SIGNALED, vec![sge(0, 0, 100)], remote(1, 0, 3)),
        ],
    ));
    s.push(pump());
    v.push(("rc-write-read-atomic", s));

    let mut s = pair(2);
    s.push(recv(
        L1,
        vec![vec![sge(1, 0, 1024)], vec![sge(1, 1024, 1024)]],
    ));
    s.push(post(
        L0,
        vec![
            send(3, SIGNALED, vec![sge(0, 0, 700)], remote(1, 2000, 1)),
            send(0, SIGNALED, vec![sge(0, 0, 1000)], Remote::default()),
            send(4, SIGNALED, vec![sge(0, 0, 8)], remote(1, 0, 1)), // no READ on UC: EINVAL
        ],
    ));
    s.push(pump());
    v.push(("uc-write-imm-send", s));

    let mut s = pair(3);
    s.push(Op::CreateAh {
        pd: L0,
        spec: ah(),
        null: 0,
    });
    s.push(recv(
        L1,
        vec![
            vec![sge(1, 0, 40), sge(1, 40, 1000)],
            vec![sge(1, 2000, 100)],
        ],
    ));
    let mut ud = send(0, SIGNALED, vec![sge(0, 0, 500)], Remote::default());
    s.push(post(L0, vec![ud.clone()]));
    ud.opcode = 1;
    ud.qkey = 7; // wrong Q_Key: dropped by the receiver
    s.push(post(L0, vec![ud.clone()]));
    ud.dest = Ref(0xC1); // a QPN nobody has
    ud.qkey = 0;
    s.push(post(L0, vec![ud]));
    s.push(pump());
    v.push(("ud-send-ah", s));

    let mut s = vec![
        pd(),
        mr(0, 0),
        mr(1, 0x10000),
        cq(63),
        cq(63),
        Op::CreateSrq {
            pd: L0,
            max_wr: 32,
            max_sge: 4,
            limit: 1,
            null: 0,
        },
        qp(0, L0, L1, Ref(0), false),
        qp(0, L0, L1, Ref(0x80), false),
        connect(L0, L1),
        Op::PostSrqRecv {
            srq: L0,
            wrs: List(vec![
                RecvSpec {
                    sges: List(vec![sge(1, 0, 1024)]),
                    sge_mode: 0,
                },
                RecvSpec {
                    sges: List(vec![sge(1, 1024, 1024)]),
                    sge_mode: 0,
                },
            ]),
            bad_null: false,
        },
        Op::ModifySrq {
            srq: L0,
            mask: 2,
            max_wr: 0,
            limit: 1,
            null: 0,
        },
        post(
            L0,
            vec![
                send(0, SIGNALED, vec![sge(0, 0, 100)], Remote::default()),
                send(1, SIGNALED, vec![sge(0, 0, 200)], Remote::default()),
            ],
        ),
        pump(),
        Op::QuerySrq { srq: L0, null: 0 },
        Op::DestroySrq { srq: L0 },
        Op::AsyncEvents { ctx: L0 },
    ];
    s.push(recv(L1, vec![vec![sge(1, 0, 8)]])); // a QP with an SRQ has no receive queue
    v.push(("srq", s));

    let mut s = vec![
        pd(),
        mr(0, 0),
        mr(1, 0),
        Op::CreateChannel { ctx: L0 },
        Op::CreateCq {
            ctx: L0,
            cqe: 63,
            mode: 1,
            ch: L0,
            vec: 0,
        },
        cq(63),
        qp(0, L0, L1, Ref(0), true),
        qp(0, L0, L1, Ref(0), true),
        connect(L0, L1),
        Op::ReqNotify {
            cq: L0,
            solicited: false,
        },
        Op::GetCqEvent { ch: L0, mode: 1 },
        recv(L1, vec![vec![sge(1, 0, 4096)]]),
        post(L0, vec![send(0, 0, vec![sge(0, 0, 64)], Remote::default())]),
        pump(),
        Op::GetCqEvent { ch: L0, mode: 0 },
        Op::ReqNotify {
            cq: L0,
            solicited: true,
        },
        post(L0, vec![send(0, 4, vec![sge(0, 0, 64)], Remote::default())]),
        pump(),
        Op::GetCqEvent { ch: L0, mode: 1 },
        Op::GetCqEvent { ch: L0, mode: 7 },
        Op::DestroyChannel { ch: L0 },
    ];
    s.push(Op::DestroyQp { qp: L0, drain: 1 });
    s.push(Op::DestroyQp { qp: L0, drain: 1 });
    s.push(Op::DestroyCq { cq: L0 });
    s.push(Op::DestroyChannel { ch: L0 });
    v.push(("comp-channel", s));
}
