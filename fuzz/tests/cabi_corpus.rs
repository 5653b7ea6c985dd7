//! The seed corpus of the `cabi` target (`fuzz/corpus/cabi/`), generated here: hand-written
//! call sequences ([`roce_fuzz::cabi::Op`] scripts encoded with `cabi::encode`) that reach
//! posting and polling on every QP type, SRQs, completion channels, the EBUSY destroy orders,
//! NULL and destroyed handles, CQ overflow, RESET with WRs outstanding and two contexts; plus
//! pseudo-random byte strings. `cabi_seeds_are_generated_by_code` checks the committed files
//! match (other files in the directory, such as regression inputs, are left alone); to
//! (re)write them:
//!
//! ```text
//! ROCE_REGEN_CORPUS=1 cargo test -p roce-fuzz --test cabi_corpus
//! ```
use roce_fuzz::cabi::{self, AhSpec, List, Op, RecvSpec, Ref, Remote, SendSpec, Sge};
use std::path::Path;

#[global_allocator]
static ALLOC: cabi::CountingAlloc = cabi::CountingAlloc;

const L0: Ref = Ref::live(0);
const L1: Ref = Ref::live(1);
const L2: Ref = Ref::live(2);
const NULL: Ref = Ref::NULL;

const SIGNALED: u8 = 2;
const INLINE: u8 = 8;

/// An address vector to this device (hop limit 64: with 0 nothing is sent, see README.md).
fn ah() -> AhSpec {
    AhSpec {
        hop: 64,
        ..AhSpec::default()
    }
}

fn pd() -> Op {
    Op::AllocPd { ctx: L0 }
}

/// MR over the whole buffer `buf`, every access right; `iova` 0 = its address.
fn mr(buf: u8, iova: u64) -> Op {
    Op::RegMr {
        pd: L0,
        buf,
        off: 0,
        len: 0xFFFF,
        access: 0xF,
        variant: if iova == 0 { 0 } else { 1 },
        iova,
    }
}

fn cq(cqe: u16) -> Op {
    Op::CreateCq {
        ctx: L0,
        cqe,
        mode: 1,
        ch: NULL,
        vec: 0,
    }
}

/// `qpt`: 0 RC, 2 UC, 3 UD; `srq`: `Ref(0)` none, `Ref(0x80 + k)` live SRQ k.
fn qp(qpt: u8, scq: Ref, rcq: Ref, srq: Ref, sig_all: bool) -> Op {
    Op::CreateQp {
        pd: L0,
        scq,
        rcq,
        srq,
        qpt,
        swr: 16,
        rwr: 16,
        ssge: 4,
        rsge: 4,
        inline: 64,
        sig_all,
        ex: 0,
        ops: 0,
    }
}

/// [`qp`] through `ibv_create_qp_ex` with every send op: the QP has the `ibv_wr_*` API.
fn qp_ex(qpt: u8, scq: Ref, rcq: Ref) -> Op {
    let Op::CreateQp {
        pd,
        srq,
        swr,
        rwr,
        ssge,
        rsge,
        inline,
        ..
    } = qp(qpt, scq, rcq, Ref(0), false)
    else {
        unreachable!()
    };
    Op::CreateQp {
        pd,
        scq,
        rcq,
        srq,
        qpt,
        swr,
        rwr,
        ssge,
        rsge,
        inline,
        sig_all: false,
        ex: 6,
        ops: 0,
    }
}

fn post_wr(qp: Ref, wrs: Vec<SendSpec>, mode: u8) -> Op {
    Op::PostWr {
        qp,
        wrs: List(wrs),
        mode,
    }
}

fn connect(a: Ref, b: Ref) -> Op {
    Op::Connect {
        a,
        b,
        access: 0,
        mtu: 2,
        timeout: 14,
        retry: 7,
        rnr: 7,
        rd: 2,
        psn: 0x00AB_CDEF,
    }
}

fn sge(mr: u8, off: u16, len: u16) -> Sge {
    Sge {
        mr: Ref(mr),
        off,
        len,
        mode: 0,
    }
}

fn send(opcode: u8, flags: u8, sges: Vec<Sge>, remote: Remote) -> SendSpec {
    SendSpec {
        opcode,
        flags,
        sges: List(sges),
        sge_mode: 0,
        remote,
        imm: 0x1234_5678,
        compare_add: 5,
        swap: 9,
        ah: L0,
        dest: L1,
        qkey: 0,
    }
}

fn remote(mr: u8, off: u16, mode: u8) -> Remote {
    Remote {
        mr: Ref(mr),
        off,
        mode,
    }
}

fn post(qp: Ref, wrs: Vec<SendSpec>) -> Op {
    Op::PostSend {
        qp,
        wrs: List(wrs),
        bad_null: false,
    }
}

fn recv(qp: Ref, sges: Vec<Vec<Sge>>) -> Op {
    Op::PostRecv {
        qp,
        wrs: List(
            sges.into_iter()
                .map(|s| RecvSpec {
                    sges: List(s),
                    sge_mode: 0,
                })
                .collect(),
        ),
        bad_null: false,
    }
}

fn pump() -> Op {
    Op::Pump { rounds: 3 }
}

fn poll(cq: Ref) -> Op {
    Op::PollCq { cq, n: 16 }
}

fn modify_state(qp: Ref, state: u8) -> Op {
    Op::ModifyQp {
        qp,
        tmpl: 4,
        mask: 0,
        state,
        cur: 0,
        mtu: 2,
        qkey: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest: L0,
        access: 0,
        pkey: 0,
        port: 0,
        timeout: 0,
        retry: 0,
        rnr: 0,
        min_rnr: 0,
        rd: 0,
        dest_rd: 0,
        sqd: 0,
        ah: AhSpec::default(),
    }
}

/// PD, two full-access MRs (buffer 0 at its address, buffer 1 at iova 0x10000), CQs 0 and 1,
/// and two QPs of type `qpt` (send CQ 0, receive CQ 1) connected to each other.
fn pair(qpt: u8) -> Vec<Op> {
    vec![
        pd(),
        mr(0, 0),
        mr(1, 0x10000),
        cq(63),
        cq(63),
        qp(qpt, L0, L1, Ref(0), false),
        qp(qpt, L0, L1, Ref(0), false),
        connect(L0, L1),
    ]
}

fn scripts() -> Vec<(&'static str, Vec<Op>)> {
    let mut v = Vec::new();

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

    let mut s = pair(0);
    s.push(Op::CreateChannel { ctx: L0 });
    s.push(Op::CreateCq {
        ctx: L0,
        cqe: 5,
        mode: 1,
        ch: L0,
        vec: 0,
    });
    s.push(Op::CreateSrq {
        pd: L0,
        max_wr: 4,
        max_sge: 1,
        limit: 0,
        null: 0,
    });
    s.push(qp(3, L2, L2, Ref(0x80), false));
    s.push(Op::CreateAh {
        pd: L0,
        spec: ah(),
        null: 0,
    });
    for op in [
        Op::DeallocPd { pd: L0 },
        Op::DestroyCq { cq: L0 },
        Op::DestroyCq { cq: L2 },
        Op::DestroyChannel { ch: L0 },
        Op::DestroySrq { srq: L0 },
        Op::DestroyQp { qp: L2, drain: 0 },
        Op::DestroySrq { srq: L0 },
        Op::DestroyCq { cq: L2 },
        Op::DestroyChannel { ch: L0 },
        Op::DeallocPd { pd: L0 },
        Op::DestroyAh { ah: L0 },
        Op::DeregMr { mr: L0 },
        Op::DeregMr { mr: L0 },
        Op::DestroyQp { qp: L0, drain: 0 },
        Op::DestroyQp { qp: L0, drain: 0 },
        Op::DestroyCq { cq: L0 },
        Op::DestroyCq { cq: L0 },
        Op::DeallocPd { pd: L0 },
        Op::DeallocPd { pd: Ref::dead(0) },
        Op::DeregMr { mr: Ref::dead(1) },
        Op::DestroyCq { cq: Ref::dead(0) },
        Op::DestroyQp {
            qp: Ref::dead(0),
            drain: 0,
        },
        Op::DestroyAh { ah: Ref::dead(0) },
        Op::DestroySrq { srq: Ref::dead(0) },
        Op::DestroyChannel { ch: Ref::dead(0) },
        Op::PollCq {
            cq: Ref::dead(0),
            n: 4,
        },
        Op::ReqNotify {
            cq: Ref::dead(1),
            solicited: false,
        },
        post(
            Ref::dead(0),
            vec![send(0, SIGNALED, vec![], Remote::default())],
        ),
        recv(Ref::dead(1), vec![vec![]]),
        Op::QueryQp {
            qp: Ref::dead(0),
            mode: 0,
            mask: 0,
        },
        Op::GetCqEvent {
            ch: Ref::dead(0),
            mode: 0,
        },
    ] {
        s.push(op);
    }
    v.push(("destroy-order-busy-dead", s));

    let s = vec![
        Op::OpenCtx { mode: 2 },
        Op::OpenCtx { mode: 3 },
        Op::OpenCtx { mode: 4 },
        Op::OpenCtx { mode: 5 },
        Op::AllocPd { ctx: NULL },
        Op::CreateChannel { ctx: NULL },
        Op::AsyncEvents { ctx: NULL },
        Op::CreateCq {
            ctx: NULL,
            cqe: 4,
            mode: 1,
            ch: NULL,
            vec: 0,
        },
        pd(),
        Op::RegMr {
            pd: NULL,
            buf: 0,
            off: 0,
            len: 16,
            access: 1,
            variant: 0,
            iova: 0,
        },
        Op::RegMr {
            pd: L0,
            buf: 0,
            off: 0,
            len: 0xFFFE,
            access: 1,
            variant: 0,
            iova: 0,
        },
        Op::RegMr {
            pd: L0,
            buf: 2,
            off: 8,
            len: 100,
            access: 2,
            variant: 2,
            iova: 0x8000_0000_0000_0000,
        },
        Op::RegMr {
            pd: L0,
            buf: 2,
            off: 8,
            len: 100,
            access: 0x8007,
            variant: 2,
            iova: u64::MAX,
        },
        cq(8),
        Op::CreateCq {
            ctx: L0,
            cqe: 0,
            mode: 2,
            ch: NULL,
            vec: 6,
        },
        Op::CreateCq {
            ctx: L0,
            cqe: 3,
            mode: 2,
            ch: NULL,
            vec: 7,
        },
        Op::CreateQp {
            pd: L0,
            scq: L0,
            rcq: L0,
            srq: Ref(0),
            qpt: 0xFF,
            swr: 0,
            rwr: 0,
            ssge: 0,
            rsge: 0,
            inline: 0,
            sig_all: false,
            ex: 0,
            ops: 0,
        },
        Op::CreateQp {
            pd: L0,
            scq: NULL,
            rcq: L0,
            srq: Ref(0),
            qpt: 0,
            swr: 1,
            rwr: 1,
            ssge: 1,
            rsge: 1,
            inline: 0,
            sig_all: false,
            ex: 0,
            ops: 0,
        },
        Op::CreateQp {
            pd: L0,
            scq: L0,
            rcq: L0,
            srq: Ref(0),
            qpt: 6,
            swr: 1,
            rwr: 1,
            ssge: 1,
            rsge: 1,
            inline: 0,
            sig_all: false,
            ex: 0,
            ops: 0,
        },
        Op::CreateQp {
            pd: L0,
            scq: L0,
            rcq: L0,
            srq: Ref(0),
            qpt: 0,
            swr: 0xF9,
            rwr: 1,
            ssge: 39,
            rsge: 1,
            inline: 450,
            sig_all: false,
            ex: 0,
            ops: 0,
        },
        qp(0, L0, L0, Ref(0), false),
        Op::ModifyQp {
            qp: L0,
            tmpl: 0xFF,
            mask: 0,
            state: 0,
            cur: 0,
            mtu: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest: L0,
            access: 0,
            pkey: 0,
            port: 0,
            timeout: 0,
            retry: 0,
            rnr: 0,
            min_rnr: 0,
            rd: 0,
            dest_rd: 0,
            sqd: 0,
            ah: AhSpec::default(),
        },
        Op::QueryQp {
            qp: L0,
            mode: 1,
            mask: 0,
        },
        Op::QueryQp {
            qp: L0,
            mode: 2,
            mask: 0,
        },
        Op::QueryQp {
            qp: L0,
            mode: 0,
            mask: u32::MAX,
        },
        Op::CreateSrq {
            pd: L0,
            max_wr: 0,
            max_sge: 1,
            limit: 0,
            null: 0,
        },
        Op::CreateSrq {
            pd: L0,
            max_wr: 8,
            max_sge: 30,
            limit: 0,
            null: 0,
        },
        Op::CreateSrq {
            pd: L0,
            max_wr: 8,
            max_sge: 1,
            limit: 9,
            null: 0,
        },
        Op::CreateSrq {
            pd: L0,
            max_wr: 8,
            max_sge: 1,
            limit: 0,
            null: 15,
        },
        Op::CreateSrq {
            pd: L0,
            max_wr: 8,
            max_sge: 1,
            limit: 0,
            null: 0,
        },
        Op::ModifySrq {
            srq: L0,
            mask: 1,
            max_wr: 100,
            limit: 0,
            null: 0,
        },
        Op::ModifySrq {
            srq: L0,
            mask: 2,
            max_wr: 0,
            limit: 100,
            null: 0,
        },
        Op::ModifySrq {
            srq: L0,
            mask: 2,
            max_wr: 0,
            limit: 1,
            null: 15,
        },
        Op::QuerySrq { srq: L0, null: 15 },
        Op::CreateAh {
            pd: L0,
            spec: ah(),
            null: 15,
        },
        Op::CreateAh {
            pd: L0,
            spec: AhSpec { gid: 3, ..ah() },
            null: 0,
        },
        Op::CreateAh {
            pd: L0,
            spec: AhSpec { sgid: 6, ..ah() },
            null: 0,
        },
        Op::CreateAh {
            pd: L0,
            spec: AhSpec { sgid: 7, ..ah() },
            null: 0,
        },
        Op::PollCq { cq: L0, n: 0xFF },
        Op::PollCq { cq: L0, n: 0xFE },
        Op::PollCq { cq: L0, n: 0 },
        post(NULL, vec![send(0, 0, vec![], Remote::default())]),
        recv(NULL, vec![vec![]]),
        Op::PostSrqRecv {
            srq: NULL,
            wrs: List(vec![]),
            bad_null: true,
        },
        Op::PollCq { cq: NULL, n: 1 },
        Op::ReqNotify {
            cq: NULL,
            solicited: true,
        },
        Op::DestroyAh { ah: NULL },
        Op::DestroySrq { srq: NULL },
        Op::DestroyQp { qp: NULL, drain: 0 },
        Op::DestroyCq { cq: NULL },
        Op::DestroyChannel { ch: NULL },
        Op::DeregMr { mr: NULL },
        Op::DeallocPd { pd: NULL },
        Op::GetCqEvent { ch: NULL, mode: 0 },
        Op::CloseCtx { ctx: NULL },
    ];
    v.push(("null-and-invalid", s));

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
    v
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// `(name, bytes)` of every seed.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = scripts()
        .into_iter()
        .map(|(n, ops)| (format!("script-{n}"), cabi::encode(&ops)))
        .collect();
    // the pair set-up followed by random bytes: random ops on connected QPs
    let base = cabi::encode(&pair(0));
    for i in 0..8u64 {
        let mut s = 0xCAB1_0000 + i;
        let mut b = base.clone();
        b.extend((0..[200usize, 600, 1500, 3000][i as usize % 4]).map(|_| xorshift(&mut s) as u8));
        out.push((format!("pair-random-{i:02}"), b));
    }
    out.push(("zeros".to_string(), vec![0u8; 256]));
    out.push(("ones".to_string(), vec![0xFF; 256]));
    for i in 0..8u64 {
        let mut s = 0xCAB1_1000 + i;
        let len = [64usize, 256, 1024, 3000][i as usize % 4];
        out.push((
            format!("random-{i:02}"),
            (0..len).map(|_| xorshift(&mut s) as u8).collect(),
        ));
    }
    out
}

#[test]
fn scripts_round_trip() {
    for (name, ops) in scripts() {
        assert_eq!(cabi::decode(&cabi::encode(&ops)), ops, "{name}");
    }
}

#[test]
fn cabi_seeds_are_generated_by_code() {
    let regen = std::env::var_os("ROCE_REGEN_CORPUS").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join("cabi");
    for (name, bytes) in seeds() {
        let path = dir.join(&name);
        if regen {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (regenerate: ROCE_REGEN_CORPUS=1)", path.display())
            });
            assert_eq!(committed, bytes, "{} is stale", path.display());
        }
        let st = cabi::run_stats(&bytes);
        eprintln!("{name}: {st:?}");
        if let Some(&(_, sent, received)) = MOVES_DATA.iter().find(|(n, ..)| name == *n) {
            assert!(
                st.sent >= sent && st.received >= received,
                "{name}: {st:?}, expected at least {sent} sends and {received} receives completed"
            );
        }
    }
}

/// Scripts whose data must move: (seed, successful send completions, receive completions).
const MOVES_DATA: &[(&str, usize, usize)] = &[
    ("script-rc-send-recv", 2, 2),
    ("script-rc-write-read-atomic", 4, 1),
    ("script-uc-write-imm-send", 2, 2),
    ("script-ud-send-ah", 1, 1),
    ("script-srq", 2, 2),
    ("script-comp-channel", 1, 1),
    ("script-inline", 2, 1),
    ("script-two-contexts", 2, 1),
    ("script-reset-and-err", 1, 1),
    ("script-wr-api", 7, 2),
];
