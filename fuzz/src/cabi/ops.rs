//! The ops a run executes ([`Op`]) and the decoder / encoder of a whole input.

use super::*;

macro_rules! ops {
    ($($(#[$m:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? }),* $(,)?) => {
        /// One step of a call sequence (see the field docs of the records for the encodings).
        #[derive(Clone, Debug, PartialEq)]
        #[allow(missing_docs)]
        pub enum Op { $($(#[$m])* $name { $($f: $t),* }),* }

        const OP_COUNT: usize = [$(stringify!($name)),*].len();

        impl Op {
            /// Decodes one op: the first byte (modulo the number of ops) chooses it.
            #[allow(unused_assignments)]
            pub fn read(i: &mut Input<'_>) -> Op {
                let k = i.byte() as usize % OP_COUNT;
                let mut j = 0;
                $(
                    if k == j {
                        return Op::$name { $($f: Field::get(i)),* };
                    }
                    j += 1;
                )*
                unreachable!()
            }
            /// Encodes it as [`Op::read`] reads it.
            #[allow(unused_assignments, unused_variables)]
            pub fn write(&self, out: &mut Vec<u8>) {
                let mut j = 0u8;
                $(
                    if let Op::$name { $($f),* } = self {
                        out.push(j);
                        $(Field::put($f, out);)*
                        return;
                    }
                    j += 1;
                )*
            }
        }
    };
}

ops! {
    /// `mode % 8`: 0, 1, 6, 7 `ibv_open_device` (at most three contexts), 2 NULL, 3 a pointer
    /// that is not a device (both `ENODEV`), 4 `ibv_get_device_list(NULL)` then
    /// `ibv_free_device_list`, 5 the same list freed twice (the second is refused). A context
    /// is open from the start.
    OpenCtx { mode: u8 },
    /// Destroys everything that belongs to the context (or uses something that does) in a
    /// valid order, then `ibv_close_device`.
    CloseCtx { ctx: Ref },
    AllocPd { ctx: Ref },
    DeallocPd { pd: Ref },
    /// Buffer `buf % 3`, offset `off % 4096`, `len` clipped to the buffer (0xFFFF: to its end,
    /// 0xFFFE: NULL address and length 0); `access`: bits 0–9 raw, 0x8000 sets
    /// `IBV_ACCESS_RELAXED_ORDERING` (optional range); `variant % 3`: `ibv_reg_mr`,
    /// `ibv_reg_mr_iova`, `ibv_reg_mr_iova2` (iova: page-aligned low 32 bits of `iova`, or all
    /// of it when bit 63 is set).
    RegMr { pd: Ref, buf: u8, off: u16, len: u16, access: u16, variant: u8, iova: u64 },
    DeregMr { mr: Ref },
    CreateChannel { ctx: Ref },
    DestroyChannel { ch: Ref },
    /// `mode % 4`: `cqe % 64`, `cqe` raw, one of -1/0/32767/32768/MAX/MIN/1/2, `1 + cqe % 8`.
    /// `ch`: NULL = no channel (a live pick with no channel live also means none).
    /// `vec % 8`: 0–4 → 0, 5 → 1, 6 → -1, 7 → `vec`.
    CreateCq { ctx: Ref, cqe: u16, mode: u8, ch: Ref, vec: u8 },
    DestroyCq { cq: Ref },
    ReqNotify { cq: Ref, solicited: bool },
    /// Non-blocking `ibv_get_cq_event`; `mode & 1` acks at once (else before the CQ goes),
    /// `mode % 8 == 7` passes NULL out-pointers.
    GetCqEvent { ch: Ref, mode: u8 },
    /// `n`: 0xFF `num_entries = -1`, 0xFE NULL `wc` with 1 entry, else `n % 20` entries.
    PollCq { cq: Ref, n: u8 },
    /// `srq`: below 0x80 none, 0x80–0xEF the live SRQ `srq - 0x80`, else dead / NULL as a
    /// [`Ref`]. `qpt % 8`: RC (0, 1, 4, 7), UC (2), UD (3, 5), 6 an unsupported type. Capacities:
    /// `wr % 64` (0xF8.. big or too big), `sge % 40`, `inline % 512`. `qpt == 0xFF`: NULL
    /// attributes. `ex % 8`: 0–4 `ibv_create_qp`; through `verbs_context.create_qp_ex` (as the
    /// inline `ibv_create_qp_ex` calls it) 5 with `IBV_QP_INIT_ATTR_CREATE_FLAGS` = 0, 6 with
    /// every `send_ops_flags` we support (the QP gets the `ibv_wr_*` API), 7 with `ops` as
    /// `send_ops_flags`.
    CreateQp { pd: Ref, scq: Ref, rcq: Ref, srq: Ref, qpt: u8, swr: u8, rwr: u8, ssge: u8, rsge: u8, inline: u16, sig_all: bool, ex: u8, ops: u16 },
    /// `tmpl % 8`: 0 mask `mask & 0x3ffffff`, 1/2/3 the INIT/RTR/RTS mask of the QP's type with
    /// that target state, 4 `IBV_QP_STATE`, 5 the RTS template | random bits, 6 `mask` raw,
    /// 7 `STATE | mask & 0x1fffff`; `tmpl == 0xFF`: NULL attributes. Every attribute from the
    /// fields (states `% 8` unless ≥ 0xF8).
    ModifyQp { qp: Ref, tmpl: u8, mask: u32, state: u8, cur: u8, mtu: u8, qkey: u32, rq_psn: u32, sq_psn: u32, dest: Ref, access: u8, pkey: u8, port: u8, timeout: u8, retry: u8, rnr: u8, min_rnr: u8, rd: u8, dest_rd: u8, sqd: u8, ah: AhSpec },
    /// Brings QPs `a` and `b` (possibly the same) to RTS connected to each other, with valid
    /// attributes from the fields, each step checked.
    Connect { a: Ref, b: Ref, access: u8, mtu: u8, timeout: u8, retry: u8, rnr: u8, rd: u8, psn: u32 },
    /// `mode % 4`: 1 NULL `attr`, 2 NULL `init_attr`.
    QueryQp { qp: Ref, mode: u8, mask: u32 },
    /// `drain & 1`: move to ERR, drain the CQs and check the QP's WRs first.
    DestroyQp { qp: Ref, drain: u8 },
    /// `max_wr % 128` (0xFFF0..: big or too big), `max_sge % 32`, `limit % 160`; `null % 16 ==
    /// 15`: NULL attributes.
    CreateSrq { pd: Ref, max_wr: u16, max_sge: u8, limit: u16, null: u8 },
    ModifySrq { srq: Ref, mask: u8, max_wr: u16, limit: u16, null: u8 },
    QuerySrq { srq: Ref, null: u8 },
    DestroySrq { srq: Ref },
    /// `null % 16 == 15`: NULL attributes.
    CreateAh { pd: Ref, spec: AhSpec, null: u8 },
    DestroyAh { ah: Ref },
    /// Through `qp->context->ops.post_send` (a destroyed or NULL QP through a live context's
    /// table); an empty list posts NULL; `bad_null`: NULL `bad_wr`.
    PostSend { qp: Ref, wrs: List<SendSpec, 4>, bad_null: bool },
    /// The `ibv_wr_*` API (QPs created with send ops only; others must have no `ibv_qp_ex`):
    /// `ibv_wr_start`, per WR `wr_id` / `wr_flags` then the builder of its opcode (raw 7
    /// `wr_local_inv`, raw 15 `wr_atomic_write`, `imm & 1` a NULL value pointer), UD
    /// `wr_set_ud_addr`, one data setter, then `ibv_wr_complete`. `mode` bit 0 `ibv_wr_abort`
    /// instead, bit 1 a setter before any builder (the post must fail), bit 2 the single-buffer
    /// setters, bit 3 no data setter.
    PostWr { qp: Ref, wrs: List<SendSpec, 4>, mode: u8 },
    PostRecv { qp: Ref, wrs: List<RecvSpec, 4>, bad_null: bool },
    PostSrqRecv { srq: Ref, wrs: List<RecvSpec, 4>, bad_null: bool },
    /// `1 + rounds % 8` rounds of polling every live CQ until it is empty (lets data move).
    Pump { rounds: u8 },
    /// Non-blocking `ibv_get_async_event` / `ibv_ack_async_event` until none is left.
    AsyncEvents { ctx: Ref },
}

/// At most this many ops per input.
pub const MAX_OPS: usize = 200;

/// Decodes an input into ops (what [`run`] executes).
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut i = Input::new(data);
    let mut v = Vec::new();
    while !i.is_empty() && v.len() < MAX_OPS {
        v.push(Op::read(&mut i));
    }
    v
}

/// Encodes ops so that [`decode`] gives them back.
pub fn encode(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        op.write(&mut out);
    }
    out
}
