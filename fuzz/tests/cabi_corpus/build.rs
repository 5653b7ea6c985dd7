//! Builders of the ops the seed scripts are made of, and the handle / flag shorthands they use.

use roce_fuzz::cabi::{AhSpec, List, Op, RecvSpec, Ref, Remote, SendSpec, Sge};

pub(super) const L0: Ref = Ref::live(0);
pub(super) const L1: Ref = Ref::live(1);
pub(super) const L2: Ref = Ref::live(2);
pub(super) const NULL: Ref = Ref::NULL;

pub(super) const SIGNALED: u8 = 2;
pub(super) const INLINE: u8 = 8;

/// An address vector to this device (hop limit 64: with 0 nothing is sent, see README.md;
/// with a GRH, which a RoCE port requires).
pub(super) fn ah() -> AhSpec {
    AhSpec {
        hop: 64,
        is_global: 1,
        ..AhSpec::default()
    }
}

pub(super) fn pd() -> Op {
    Op::AllocPd { ctx: L0 }
}

/// MR over the whole buffer `buf`, every access right; `iova` 0 = its address.
pub(super) fn mr(buf: u8, iova: u64) -> Op {
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

pub(super) fn cq(cqe: u16) -> Op {
    Op::CreateCq {
        ctx: L0,
        cqe,
        mode: 1,
        ch: NULL,
        vec: 0,
    }
}

/// `qpt`: 0 RC, 2 UC, 3 UD; `srq`: `Ref(0)` none, `Ref(0x80 + k)` live SRQ k.
pub(super) fn qp(qpt: u8, scq: Ref, rcq: Ref, srq: Ref, sig_all: bool) -> Op {
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
pub(super) fn qp_ex(qpt: u8, scq: Ref, rcq: Ref) -> Op {
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

pub(super) fn post_wr(qp: Ref, wrs: Vec<SendSpec>, mode: u8) -> Op {
    Op::PostWr {
        qp,
        wrs: List(wrs),
        mode,
    }
}

pub(super) fn connect(a: Ref, b: Ref) -> Op {
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

pub(super) fn sge(mr: u8, off: u16, len: u16) -> Sge {
    Sge {
        mr: Ref(mr),
        off,
        len,
        mode: 0,
    }
}

pub(super) fn send(opcode: u8, flags: u8, sges: Vec<Sge>, remote: Remote) -> SendSpec {
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

pub(super) fn remote(mr: u8, off: u16, mode: u8) -> Remote {
    Remote {
        mr: Ref(mr),
        off,
        mode,
    }
}

pub(super) fn post(qp: Ref, wrs: Vec<SendSpec>) -> Op {
    Op::PostSend {
        qp,
        wrs: List(wrs),
        bad_null: false,
    }
}

pub(super) fn recv(qp: Ref, sges: Vec<Vec<Sge>>) -> Op {
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

pub(super) fn pump() -> Op {
    Op::Pump { rounds: 3 }
}

pub(super) fn poll(cq: Ref) -> Op {
    Op::PollCq { cq, n: 16 }
}

pub(super) fn modify_state(qp: Ref, state: u8) -> Op {
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
pub(super) fn pair(qpt: u8) -> Vec<Op> {
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
