//! Scripts of the `ibv_wr_*` API (and a regression of a partial `ibv_wr_complete`).

use super::build::*;
use roce_fuzz::cabi::{List, Op, Ref, Remote};

/// Appends this group's `(name, ops)` scripts to `v`.
pub(super) fn scripts(v: &mut Vec<(&'static str, Vec<Op>)>) {
    // the ibv_wr_* API: batches that must post whole or not at all
    let mut s = vec![
        pd(),
        mr(0, 0),
        mr(1, 0x10000),
        cq(63),
        cq(63),
        qp_ex(0, L0, L1),
        qp_ex(0, L0, L1),
        connect(L0, L1),
        recv(L1, vec![vec![sge(1, 0, 1024)]; 4]),
        post_wr(
            L0,
            vec![
                send(0, SIGNALED, vec![sge(0, 0, 100)], Remote::default()),
                send(2, SIGNALED, vec![sge(0, 0, 300)], remote(1, 1000, 1)),
                send(4, SIGNALED, vec![sge(0, 2000, 200)], remote(1, 0, 1)),
                send(5, SIGNALED, vec![sge(0, 8, 8)], remote(1, 64, 0)),
            ],
            0,
        ),
        pump(),
        // single-buffer setters, inline
        post_wr(
            L0,
            vec![
                send(1, SIGNALED | INLINE, vec![sge(0, 0, 40)], Remote::default()),
                send(
                    2,
                    SIGNALED,
                    vec![sge(0, 0, 30), sge(0, 40, 8)],
                    remote(1, 500, 1),
                ),
            ],
            4,
        ),
        // inline list; then abort; then a setter before any builder
        post_wr(
            L0,
            vec![send(
                0,
                SIGNALED | INLINE,
                vec![sge(0, 0, 10), sge(2, 8, 10)],
                Remote::default(),
            )],
            0,
        ),
        post_wr(
            L0,
            vec![send(0, SIGNALED, vec![sge(0, 0, 10)], Remote::default())],
            1,
        ),
        post_wr(
            L0,
            vec![send(0, SIGNALED, vec![sge(0, 0, 10)], Remote::default())],
            2,
        ),
        pump(),
        // a valid SEND, then a request the engine refuses: nothing may be posted
        post_wr(
            L0,
            vec![
                send(0, SIGNALED, vec![sge(0, 0, 64)], Remote::default()),
                send(0xE0 + 7, SIGNALED, vec![], Remote::default()),
            ],
            0,
        ),
        pump(),
        post_wr(
            L1,
            vec![send(0xE0 + 15, SIGNALED, vec![], remote(0, 0, 0))],
            8,
        ),
        Op::PostWr {
            qp: L0,
            wrs: List(vec![]),
            mode: 0,
        },
        pump(),
    ];
    // UD through the wr API
    s.extend([
        qp_ex(3, L0, L1),
        qp_ex(3, L0, L1),
        connect(L2, Ref(3)),
        Op::CreateAh {
            pd: L0,
            spec: ah(),
            null: 0,
        },
        recv(Ref(3), vec![vec![sge(1, 2048, 1024)]]),
        post_wr(
            L2,
            vec![{
                let mut w = send(0, SIGNALED, vec![sge(0, 0, 200)], Remote::default());
                w.dest = Ref(3);
                w
            }],
            0,
        ),
        pump(),
    ]);
    v.push(("wr-api", s));

    // regression: ibv_wr_complete posted the requests before a refused one (a LOCAL_INV the
    // engine does not implement; a UD address handle of another PD) and still failed
    let mut s = vec![
        pd(),
        pd(),
        mr(0, 0),
        mr(1, 0),
        cq(63),
        cq(63),
        qp_ex(0, L0, L1),
        qp_ex(0, L0, L1),
        connect(L0, L1),
        recv(L1, vec![vec![sge(1, 0, 1024)]; 2]),
        post_wr(
            L0,
            vec![
                send(0, SIGNALED, vec![sge(0, 0, 64)], Remote::default()),
                send(0xE0 + 7, SIGNALED, vec![], Remote::default()),
            ],
            0,
        ),
        pump(),
        qp_ex(3, L0, L1),
        qp_ex(3, L0, L1),
        connect(L2, Ref(3)),
        Op::CreateAh {
            pd: L1,
            spec: ah(),
            null: 0,
        },
        recv(Ref(3), vec![vec![sge(1, 2048, 1024)]]),
        post_wr(
            L2,
            vec![
                {
                    let mut w = send(0, SIGNALED, vec![sge(0, 0, 100)], Remote::default());
                    w.ah = NULL;
                    w.dest = Ref(3);
                    w
                },
                {
                    let mut w = send(0, SIGNALED, vec![sge(0, 0, 100)], Remote::default());
                    w.dest = Ref(3);
                    w
                },
            ],
            0,
        ),
        pump(),
    ];
    s.push(Op::DestroyAh { ah: L0 });
    v.push(("regress-wr-complete-partial", s));
}
