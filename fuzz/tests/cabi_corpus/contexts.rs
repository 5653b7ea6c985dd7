//! Scripts with two contexts sharing the engine (and a regression of their async events).

use super::build::*;
use roce_fuzz::cabi::{List, Op, RecvSpec, Ref, Remote};

/// Appends this group's `(name, ops)` scripts to `v`.
pub(super) fn scripts(v: &mut Vec<(&'static str, Vec<Op>)>) {
    // a second context: QPs across contexts, then the second context closed mid-flight
    let mut s = pair(0);
    s.extend([
        Op::OpenCtx { mode: 0 },
        Op::AllocPd { ctx: L1 },
        Op::CreateCq {
            ctx: L1,
            cqe: 32,
            mode: 1,
            ch: NULL,
            vec: 0,
        },
        Op::RegMr {
            pd: L1,
            buf: 2,
            off: 0,
            len: 0xFFFF,
            access: 0xF,
            variant: 0,
            iova: 0,
        },
        Op::CreateQp {
            pd: L1,
            scq: L2,
            rcq: L2,
            srq: Ref(0),
            qpt: 0,
            swr: 8,
            rwr: 8,
            ssge: 2,
            rsge: 2,
            inline: 0,
            sig_all: false,
            ex: 0,
            ops: 0,
        },
        qp(0, L0, L1, Ref(0), false),
        connect(L2, Ref(3)),
        recv(L2, vec![vec![sge(2, 0, 4096)]]),
        post(
            Ref(3),
            vec![send(0, SIGNALED, vec![sge(0, 0, 128)], Remote::default())],
        ),
        post(
            L2,
            vec![send(2, SIGNALED, vec![sge(2, 0, 128)], remote(0, 0, 1))],
        ),
        pump(),
        Op::CloseCtx { ctx: L1 },
        Op::CloseCtx { ctx: Ref::dead(0) },
        pump(),
    ]);
    v.push(("two-contexts", s));

    // regression: the second context to use the engine took over its async events, so those
    // of the first context's objects were lost (here LAST_WQE_REACHED of a QP on an SRQ)
    let s = vec![
        pd(),
        mr(0, 0),
        mr(1, 0),
        cq(63),
        cq(63),
        Op::CreateSrq {
            pd: L0,
            max_wr: 16,
            max_sge: 2,
            limit: 0,
            null: 0,
        },
        qp(0, L0, L1, Ref(0), false),
        qp(0, L0, L1, Ref(0x80), false),
        Op::OpenCtx { mode: 0 },
        Op::AllocPd { ctx: L1 },
        connect(L0, L1),
        Op::PostSrqRecv {
            srq: L0,
            wrs: List(vec![RecvSpec {
                sges: List(vec![sge(1, 0, 512)]),
                sge_mode: 0,
            }]),
            bad_null: false,
        },
        post(
            L0,
            vec![send(0, SIGNALED, vec![sge(0, 0, 100)], Remote::default())],
        ),
        pump(),
        modify_state(L1, 6),
        Op::AsyncEvents { ctx: L0 },
        Op::CloseCtx { ctx: L1 },
    ];
    v.push(("regress-async-two-contexts", s));
}
