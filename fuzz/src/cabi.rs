//! `cabi`: the drop-in `libibverbs.so.1` (crate `roce-ibverbs`) driven through its C ABI — the
//! `extern "C"` verbs the rlib exports, the context `ops` table the inline `ibv_post_send`,
//! `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` jump through, the
//! `verbs_context.create_qp_ex` op and the `ibv_wr_*` function pointers of `ibv_qp_ex` — with
//! call sequences decoded from the input.
//!
//! The input is a list of [`Op`]s (first byte of each picks the op, then its fields, little
//! endian, zero once the input runs out; [`encode`] writes a list back, so seeds are built as
//! scripts in `tests/cabi_corpus.rs`). Objects are chosen from tables of the handles the
//! library gave out ([`Ref`]): live ones, destroyed ones, live ones of another type or NULL (the
//! library promises `EINVAL` for the last three: it looks every object pointer up in its
//! registry of live objects before using it). The harness never passes a dangling pointer
//! anywhere else: work requests, SGE arrays and out-pointers are its own, registered memory is
//! its own buffers (alive for the whole run), inline SGEs point into those buffers.
//!
//! One device (the process's `ROCE_IP`, a pid-derived `127.1xx.y.z`, progress thread off so
//! every packet moves inside a verb call); up to three contexts on it share the engine, so QPs
//! of any context can be connected to each other and data moves over UDP loopback.
//!
//! Invariants (a panic names the step and the op):
//! * no panic out of the C ABI (the library turns a caught panic into `EIO`, never a documented
//!   value, and libFuzzer aborts on the panic itself);
//! * every call returns a documented value, with the exact errno where the outcome is known
//!   (NULL, destroyed or wrong-typed objects → `EINVAL`; a PD with live MRs/QPs/SRQs/AHs, a CQ
//!   with QPs, a channel with CQs, an SRQ with QPs → `EBUSY`; valid creations succeed and report
//!   what was asked; posting to a QP in RESET → `EINVAL` with `bad_wr` at the first WR; `bad_wr`
//!   always inside the posted list; an `ibv_wr_complete` that fails with `EINVAL` posted none of
//!   its batch, man ibv_wr_post);
//! * completions: only for WRs that were posted, at most once each, on the right CQ with the
//!   right `qp_num`, never a success for an unsignaled send; at teardown (and on a draining
//!   destroy) every QP is moved to ERR and the CQs drained, and then every signaled WR that was
//!   posted completed exactly once (flush errors count) unless its CQ may have overflowed (the
//!   harness bounds each CQ's occupancy) or its QP went through RESET / was destroyed first;
//! * completion events only after `ibv_req_notify_cq`, only for CQs of that channel; async
//!   events name live objects of their context, and a QP on an SRQ that goes to ERR gets
//!   `IBV_EVENT_QP_LAST_WQE_REACHED`;
//! * no byte outside the registered buffers changes (64 guard bytes around each), nor any byte
//!   that was never inside a writable MR or inside a range an accepted WR addressed (receive,
//!   READ and atomic SGEs through their lkey, WRITE and atomic targets through their rkey),
//!   checked after every step;
//! * no leak: after tearing everything down, this thread's live heap allocations (with
//!   [`CountingAlloc`] installed as the global allocator) and the process's open file
//!   descriptors are back to where they were (a run that leaks is repeated twice, so the first
//!   use of a lazily initialised static is not taken for a leak).
#![allow(unsafe_code)]

use core::ffi::{c_int, c_uint, c_void};
use core::ptr::null_mut;
use roce_ibverbs::abi::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Input

/// The fuzz input as a stream of fields: little endian, zero once it runs out.
pub struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    /// Reads `data` from the start.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data, at: 0 }
    }
    /// True once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at = self.at.saturating_add(1);
        b
    }
}

/// A value read from / written to the input.
pub trait Field: Sized {
    /// Reads one.
    fn get(i: &mut Input<'_>) -> Self;
    /// Writes it so that [`Field::get`] reads it back.
    fn put(&self, out: &mut Vec<u8>);
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn get(i: &mut Input<'_>) -> Self {
                let mut b = [0u8; core::mem::size_of::<$t>()];
                for x in b.iter_mut() {
                    *x = i.byte();
                }
                <$t>::from_le_bytes(b)
            }
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes())
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for bool {
    fn get(i: &mut Input<'_>) -> Self {
        i.byte() & 1 == 1
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self as u8)
    }
}

/// A handle choice: `0..=0xEF` picks a live object (index modulo the number of live ones, in
/// creation order), `0xF0..=0xF7` a destroyed one, `0xF8..=0xFE` a live object of another
/// type, `0xFF` NULL. The library promises `EINVAL` for the last three (it looks every pointer
/// up in its registry of live objects before using it). An op whose choice cannot be met
/// (nothing live, nothing destroyed) does nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ref(pub u8);

impl Ref {
    /// NULL.
    pub const NULL: Ref = Ref(0xFF);
    /// The `k`-th live object.
    pub const fn live(k: u8) -> Ref {
        Ref(k)
    }
    /// A destroyed object (`k` modulo the number of them).
    pub const fn dead(k: u8) -> Ref {
        Ref(0xF0 + k % 8)
    }
    /// A live object of another type (`k` modulo the number of them).
    pub const fn wrong(k: u8) -> Ref {
        Ref(0xF8 + k % 7)
    }
}

impl Field for Ref {
    fn get(i: &mut Input<'_>) -> Self {
        Ref(i.byte())
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.0)
    }
}

/// Up to `N` items (a count byte modulo `N + 1`, then the items).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct List<T, const N: usize>(pub Vec<T>);

impl<T: Field, const N: usize> Field for List<T, N> {
    fn get(i: &mut Input<'_>) -> Self {
        let n = i.byte() as usize % (N + 1);
        List((0..n).map(|_| T::get(i)).collect())
    }
    fn put(&self, out: &mut Vec<u8>) {
        assert!(self.0.len() <= N, "list longer than {N}");
        out.push(self.0.len() as u8);
        for x in &self.0 {
            x.put(out);
        }
    }
}

macro_rules! record {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        impl Field for $name {
            fn get(i: &mut Input<'_>) -> Self {
                $name { $($f: Field::get(i)),* }
            }
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$f.put(out);)*
            }
        }
    };
}

record!(
    /// One SGE. `mr` names any MR ever registered (live or not: only its numbers are used;
    /// NULL: made-up numbers). `mode % 8`: 0–4 inside the MR, 5 from its iova plus `off`
    /// unclipped, 6 a wrong lkey, 7 its rkey as lkey. With `IBV_SEND_INLINE` the address is a
    /// real pointer into the MR's buffer (the library reads it), whatever the mode.
    Sge {
        mr: Ref,
        off: u16,
        len: u16,
        mode: u8,
    }
);

record!(
    /// The remote side of an RDMA / atomic WR. `mode % 4`: 0 inside the MR (8-aligned), 1 inside,
    /// 2 unclipped offset, 3 wrong rkey.
    Remote {
        mr: Ref,
        off: u16,
        mode: u8,
    }
);

record!(
    /// One `ibv_send_wr`. `opcode`: below 0xE0 one of the nine verbs opcodes, else raw
    /// `opcode - 0xE0`. `flags`: raw `IBV_SEND_*` bits. `sge_mode % 16`: 15 `num_sge = -1`,
    /// 14 NULL `sg_list` with `num_sge = 2`, 13 forty zero-length SGEs, else `sges`.
    SendSpec {
        opcode: u8,
        flags: u8,
        sges: List<Sge, 5>,
        sge_mode: u8,
        remote: Remote,
        imm: u32,
        compare_add: u64,
        swap: u64,
        /// UD: the address handle.
        ah: Ref,
        /// UD: below 0xC0 the QP number of that QP (any, live or not), else made up.
        dest: Ref,
        /// UD: 0 = the Q_Key the connect op gives UD QPs.
        qkey: u32,
    }
);

record!(
    /// One `ibv_recv_wr` (`sge_mode` as in [`SendSpec`]).
    RecvSpec {
        sges: List<Sge, 5>,
        sge_mode: u8,
    }
);

record!(
    /// An address vector (`ibv_ah_attr`). `gid % 4`: 0–1 this device's IPv4 GID, 2 an IPv4
    /// loopback address nobody listens on, 3 an IPv6 GID (always paired with the IPv4 source
    /// GID, so it is refused: nothing is ever sent outside 127/8). `sgid % 8`: 0–5 index 1
    /// (IPv4), 6 index 0 (IPv6, refused with an IPv4 destination), 7 `sgid` itself.
    AhSpec {
        gid: u8,
        sgid: u8,
        is_global: u8,
        port: u8,
        hop: u8,
        tclass: u8,
        flow: u32,
        sl: u8,
    }
);

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

// ---------------------------------------------------------------------------------------------
// Leak accounting

thread_local! {
    /// (live allocations, live bytes) made by this thread.
    static HEAP: Cell<(i64, i64)> = const { Cell::new((0, 0)) };
}

fn bump(n: i64, bytes: i64) {
    let _ = HEAP.try_with(|c| {
        let (a, b) = c.get();
        c.set((a + n, b + bytes));
    });
}

/// A global allocator that counts each thread's live allocations (for the leak check of
/// [`run`]). The `cabi` fuzz target and the tests that run it install it; without it only file
/// descriptors are checked.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the same arguments; the bookkeeping touches a
// const-initialised thread-local `Cell` only (no allocation, no destructor).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            bump(1, l.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            bump(1, l.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) };
        bump(-1, -(l.size() as i64));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            bump(0, new as i64 - l.size() as i64);
        }
        q
    }
}

fn heap() -> (i64, i64) {
    HEAP.try_with(|c| c.get()).unwrap_or((0, 0))
}

/// Whether [`CountingAlloc`] is the global allocator.
fn counting() -> bool {
    let before = heap();
    let b = std::hint::black_box(Box::new(0u64));
    let after = heap();
    drop(b);
    after.0 == before.0 + 1
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

// ---------------------------------------------------------------------------------------------
// The library's C entry points and the few libc calls, each behind a safe wrapper

mod c {
    use super::*;

    extern "C" {
        fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
        fn ibv_free_device_list(list: *mut *mut ibv_device);
        fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
        fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
        fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid)
            -> c_int;
        fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
        fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
        fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int)
            -> *mut ibv_mr;
        fn ibv_reg_mr_iova(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            len: usize,
            iova: u64,
            access: c_int,
        ) -> *mut ibv_mr;
        fn ibv_reg_mr_iova2(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            len: usize,
            iova: u64,
            access: c_uint,
        ) -> *mut ibv_mr;
        fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
        fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel;
        fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int;
        fn ibv_create_cq(
            ctx: *mut ibv_context,
            cqe: c_int,
            cq_context: *mut c_void,
            ch: *mut ibv_comp_channel,
            vec: c_int,
        ) -> *mut ibv_cq;
        fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
        fn ibv_get_cq_event(
            ch: *mut ibv_comp_channel,
            cq: *mut *mut ibv_cq,
            cq_context: *mut *mut c_void,
        ) -> c_int;
        fn ibv_ack_cq_events(cq: *mut ibv_cq, n: c_uint);
        fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
        fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
        fn ibv_query_qp(
            qp: *mut ibv_qp,
            attr: *mut ibv_qp_attr,
            mask: c_int,
            init: *mut ibv_qp_init_attr,
        ) -> c_int;
        fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
        fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
        fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int;
        fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int;
        fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
        fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
        fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int;
        fn ibv_get_async_event(ctx: *mut ibv_context, ev: *mut ibv_async_event) -> c_int;
        fn ibv_ack_async_event(ev: *mut ibv_async_event);
    }

    // Every wrapper below passes, for an object argument, NULL, a handle the library gave out
    // and the harness tracks as live, a destroyed one that no live object aliases, or a live
    // one of another type (the library looks every object pointer up in its registry of live
    // objects first and answers EINVAL); every other pointer is to the caller's own storage,
    // valid for the call. That is the whole contract of these verbs.

    pub fn device_list(num: &mut c_int) -> *mut *mut ibv_device {
        // SAFETY: `num` is our out-pointer.
        unsafe { ibv_get_device_list(num) }
    }
    pub fn device_list_nullable(num: Option<&mut c_int>) -> *mut *mut ibv_device {
        let n = num.map_or(null_mut(), |n| n as *mut _);
        // SAFETY: `n` is our out-pointer or NULL (allowed: the count is optional).
        unsafe { ibv_get_device_list(n) }
    }
    /// A second `ibv_free_device_list` of a list already freed.
    pub fn free_device_list_again(list: *mut *mut ibv_device) {
        // SAFETY: the library records live lists and refuses one it does not know (its
        // registry of live objects), so the freed list is never touched.
        unsafe { ibv_free_device_list(list) }
    }
    pub fn free_device_list(list: *mut *mut ibv_device) {
        // SAFETY: `list` came from `ibv_get_device_list` and is freed once.
        unsafe { ibv_free_device_list(list) }
    }
    pub fn open(dev: *mut ibv_device) -> *mut ibv_context {
        // SAFETY: the library compares `dev` with its device before any use.
        unsafe { ibv_open_device(dev) }
    }
    pub fn close(ctx: *mut ibv_context) -> c_int {
        // SAFETY: wrapper contract (NULL / live / documented dead context).
        unsafe { ibv_close_device(ctx) }
    }
    pub fn query_gid(ctx: *mut ibv_context, index: c_int, gid: &mut ibv_gid) -> c_int {
        // SAFETY: live context; `gid` is ours.
        unsafe { ibv_query_gid(ctx, 1, index, gid) }
    }
    pub fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
        // SAFETY: wrapper contract.
        unsafe { ibv_alloc_pd(ctx) }
    }
    pub fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_dealloc_pd(pd) }
    }
    /// `addr..addr+len` is harness memory that stays allocated until after the MR is gone.
    pub fn reg_mr(
        variant: u8,
        pd: *mut ibv_pd,
        addr: usize,
        len: usize,
        iova: u64,
        access: c_int,
    ) -> *mut ibv_mr {
        let a = addr as *mut c_void;
        // SAFETY: wrapper contract; the range is the caller's own buffer (see above).
        unsafe {
            match variant {
                0 => ibv_reg_mr(pd, a, len, access),
                1 => ibv_reg_mr_iova(pd, a, len, iova, access),
                _ => ibv_reg_mr_iova2(pd, a, len, iova, access as c_uint),
            }
        }
    }
    pub fn dereg_mr(mr: *mut ibv_mr) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_dereg_mr(mr) }
    }
    pub fn create_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
        // SAFETY: wrapper contract.
        unsafe { ibv_create_comp_channel(ctx) }
    }
    pub fn destroy_channel(ch: *mut ibv_comp_channel) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_destroy_comp_channel(ch) }
    }
    pub fn create_cq(
        ctx: *mut ibv_context,
        cqe: c_int,
        cookie: usize,
        ch: *mut ibv_comp_channel,
        vec: c_int,
    ) -> *mut ibv_cq {
        // SAFETY: wrapper contract; `cq_context` is an opaque value the library never follows.
        unsafe { ibv_create_cq(ctx, cqe, cookie as *mut c_void, ch, vec) }
    }
    pub fn destroy_cq(cq: *mut ibv_cq) -> c_int {
        // SAFETY: wrapper contract (and every event the harness got for it was acked).
        unsafe { ibv_destroy_cq(cq) }
    }
    pub fn get_cq_event(
        ch: *mut ibv_comp_channel,
        out: Option<(&mut *mut ibv_cq, &mut *mut c_void)>,
    ) -> c_int {
        let (a, b) = match out {
            Some((a, b)) => (a as *mut _, b as *mut _),
            None => (null_mut(), null_mut()),
        };
        // SAFETY: wrapper contract; the out-pointers are ours or NULL (documented EINVAL).
        unsafe { ibv_get_cq_event(ch, a, b) }
    }
    pub fn ack_cq_events(cq: *mut ibv_cq, n: u32) {
        // SAFETY: live CQ.
        unsafe { ibv_ack_cq_events(cq, n) }
    }
    pub fn create_qp(pd: *mut ibv_pd, attr: Option<&mut ibv_qp_init_attr>) -> *mut ibv_qp {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: wrapper contract; `attr` is ours or NULL (documented EINVAL).
        unsafe { ibv_create_qp(pd, a) }
    }
    pub fn modify_qp(qp: *mut ibv_qp, attr: Option<&mut ibv_qp_attr>, mask: c_int) -> c_int {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_modify_qp(qp, a, mask) }
    }
    pub fn query_qp(
        qp: *mut ibv_qp,
        attr: Option<&mut ibv_qp_attr>,
        mask: c_int,
        init: Option<&mut ibv_qp_init_attr>,
    ) -> c_int {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        let i = init.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_query_qp(qp, a, mask, i) }
    }
    pub fn destroy_qp(qp: *mut ibv_qp) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_destroy_qp(qp) }
    }
    pub fn create_srq(pd: *mut ibv_pd, attr: Option<&mut ibv_srq_init_attr>) -> *mut ibv_srq {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_create_srq(pd, a) }
    }
    pub fn modify_srq(srq: *mut ibv_srq, attr: Option<&mut ibv_srq_attr>, mask: c_int) -> c_int {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_modify_srq(srq, a, mask) }
    }
    pub fn query_srq(srq: *mut ibv_srq, attr: Option<&mut ibv_srq_attr>) -> c_int {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_query_srq(srq, a) }
    }
    pub fn destroy_srq(srq: *mut ibv_srq) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_destroy_srq(srq) }
    }
    pub fn create_ah(pd: *mut ibv_pd, attr: Option<&mut ibv_ah_attr>) -> *mut ibv_ah {
        let a = attr.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_create_ah(pd, a) }
    }
    pub fn destroy_ah(ah: *mut ibv_ah) -> c_int {
        // SAFETY: wrapper contract.
        unsafe { ibv_destroy_ah(ah) }
    }
    pub fn get_async_event(ctx: *mut ibv_context, ev: Option<&mut ibv_async_event>) -> c_int {
        let e = ev.map_or(null_mut(), |a| a as *mut _);
        // SAFETY: as above.
        unsafe { ibv_get_async_event(ctx, e) }
    }
    pub fn ack_async_event(ev: &mut ibv_async_event) {
        // SAFETY: an event the library filled in, about a live object.
        unsafe { ibv_ack_async_event(ev) }
    }

    /// The `ops` table of a live context, as the inline verbs read it.
    pub fn ops(ctx: *mut ibv_context) -> ibv_context_ops {
        // SAFETY: `ctx` is a live context; `ops` is a public field programs read.
        unsafe { (*ctx).ops }
    }
    /// Reads a field of a live object the library handed out (programs read these structs).
    pub fn peek<T, R>(p: *mut T, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: callers pass live handles only; no verb runs concurrently (one thread, no
        // progress thread), so nothing writes the struct while it is borrowed.
        unsafe { f(&*p) }
    }
    pub fn post_send(
        ops: &ibv_context_ops,
        qp: *mut ibv_qp,
        wr: *mut ibv_send_wr,
        bad: *mut *mut ibv_send_wr,
    ) -> c_int {
        let f = ops.post_send.expect("ops.post_send");
        // SAFETY: wrapper contract; `wr` is NULL or our list (each SGE array as long as its
        // `num_sge`, or NULL / negative count, both documented EINVAL), `bad` ours or NULL.
        unsafe { f(qp, wr, bad) }
    }
    pub fn post_recv(
        ops: &ibv_context_ops,
        qp: *mut ibv_qp,
        wr: *mut ibv_recv_wr,
        bad: *mut *mut ibv_recv_wr,
    ) -> c_int {
        let f = ops.post_recv.expect("ops.post_recv");
        // SAFETY: as for post_send.
        unsafe { f(qp, wr, bad) }
    }
    pub fn post_srq_recv(
        ops: &ibv_context_ops,
        srq: *mut ibv_srq,
        wr: *mut ibv_recv_wr,
        bad: *mut *mut ibv_recv_wr,
    ) -> c_int {
        let f = ops.post_srq_recv.expect("ops.post_srq_recv");
        // SAFETY: as for post_send.
        unsafe { f(srq, wr, bad) }
    }
    pub fn poll_cq(ops: &ibv_context_ops, cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
        let f = ops.poll_cq.expect("ops.poll_cq");
        // SAFETY: wrapper contract; `wc` is NULL or our array of at least `n` entries.
        unsafe { f(cq, n, wc) }
    }
    pub fn req_notify_cq(ops: &ibv_context_ops, cq: *mut ibv_cq, solicited: c_int) -> c_int {
        let f = ops.req_notify_cq.expect("ops.req_notify_cq");
        // SAFETY: wrapper contract.
        unsafe { f(cq, solicited) }
    }

    fn ibv_qp_to_qp_ex_(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
        extern "C" {
            fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex;
        }
        // SAFETY: wrapper contract.
        unsafe { ibv_qp_to_qp_ex(qp) }
    }
    pub fn qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
        ibv_qp_to_qp_ex_(qp)
    }

    /// An all-zero `ibv_qp_init_attr_ex` (what a program's `memset` gives).
    pub fn zeroed_init_attr_ex() -> ibv_qp_init_attr_ex {
        // SAFETY: a C struct of integers and raw pointers; all-zero is a valid value of each.
        unsafe { core::mem::zeroed() }
    }

    /// The inline `ibv_create_qp_ex` for a comp_mask beyond `IBV_QP_INIT_ATTR_PD`: the
    /// `verbs_context` in front of the live context `ctx`, its size checked to cover the op.
    pub fn create_qp_ex(ctx: *mut ibv_context, attr: &mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
        let off = core::mem::offset_of!(verbs_context, context);
        let vctx = (ctx as usize - off) as *mut verbs_context;
        // SAFETY: `ctx` is a live context whose `abi_compat` says it is embedded in a
        // `verbs_context` (checked first); `sz` tells how much of it exists.
        let op = unsafe {
            if (*ctx).abi_compat as usize != VERBS_ABI_IS_EXTENDED
                || (*vctx).sz
                    < core::mem::size_of::<verbs_context>()
                        - core::mem::offset_of!(verbs_context, create_qp_ex)
            {
                None
            } else {
                (*vctx).create_qp_ex
            }
        };
        let Some(f) = op else {
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        };
        // SAFETY: the library's op, called as the inline verb calls it; `attr` is ours.
        unsafe { f(ctx, attr) }
    }

    /// One call of the `ibv_wr_*` API on a live `ibv_qp_ex` with send ops.
    #[derive(Clone, Copy, Debug)]
    pub enum WrCall {
        Start,
        Complete,
        Abort,
        Send,
        SendImm(u32),
        SendInv(u32),
        LocalInv(u32),
        Write(u32, u64),
        WriteImm(u32, u64, u32),
        Read(u32, u64),
        Cas(u32, u64, u64, u64),
        Faa(u32, u64, u64),
        AtomicWrite(u32, u64, *const c_void),
        UdAddr(*mut ibv_ah, u32, u32),
        Sge(u32, u64, u32),
        SgeList(usize, *const ibv_sge),
        Inline(*mut c_void, usize),
        InlineList(usize, *const ibv_data_buf),
    }

    /// Sets `wr_id` / `wr_flags` and makes `call` through the QP's function pointers, as the
    /// inline `ibv_wr_*` functions do. Returns `ibv_wr_complete`'s result (else 0).
    pub fn wr(qpx: *mut ibv_qp_ex, id_flags: Option<(u64, u32)>, call: WrCall) -> c_int {
        use WrCall::*;
        // SAFETY: `qpx` is the `ibv_qp_ex` of a live QP created with send ops (the harness
        // checked `ibv_qp_to_qp_ex`); the program owns `wr_id`/`wr_flags` and reads the function
        // pointers. Pointer arguments are NULL (documented EINVAL) or the harness's own memory
        // (SGE / buffer arrays of the given length, inline data in its buffers).
        unsafe {
            if let Some((id, flags)) = id_flags {
                (*qpx).wr_id = id;
                (*qpx).wr_flags = flags;
            }
            let q = &*qpx;
            const MISSING: &str =
                "cabi: an ibv_wr_* function pointer of a QP with send ops is NULL";
            match call {
                Start => q.wr_start.expect(MISSING)(qpx),
                Complete => return q.wr_complete.expect(MISSING)(qpx),
                Abort => q.wr_abort.expect(MISSING)(qpx),
                Send => q.wr_send.expect(MISSING)(qpx),
                SendImm(i) => q.wr_send_imm.expect(MISSING)(qpx, i),
                SendInv(k) => q.wr_send_inv.expect(MISSING)(qpx, k),
                LocalInv(k) => q.wr_local_inv.expect(MISSING)(qpx, k),
                Write(k, a) => q.wr_rdma_write.expect(MISSING)(qpx, k, a),
                WriteImm(k, a, i) => q.wr_rdma_write_imm.expect(MISSING)(qpx, k, a, i),
                Read(k, a) => q.wr_rdma_read.expect(MISSING)(qpx, k, a),
                Cas(k, a, c, w) => q.wr_atomic_cmp_swp.expect(MISSING)(qpx, k, a, c, w),
                Faa(k, a, x) => q.wr_atomic_fetch_add.expect(MISSING)(qpx, k, a, x),
                AtomicWrite(k, a, p) => q.wr_atomic_write.expect(MISSING)(qpx, k, a, p),
                UdAddr(ah, n, k) => q.wr_set_ud_addr.expect(MISSING)(qpx, ah, n, k),
                Sge(k, a, l) => q.wr_set_sge.expect(MISSING)(qpx, k, a, l),
                SgeList(n, p) => q.wr_set_sge_list.expect(MISSING)(qpx, n, p),
                Inline(p, n) => q.wr_set_inline_data.expect(MISSING)(qpx, p, n),
                InlineList(n, p) => q.wr_set_inline_data_list.expect(MISSING)(qpx, n, p),
            }
        }
        0
    }

    pub fn set_errno(v: i32) {
        // SAFETY: the calling thread's errno slot, always valid.
        unsafe { *libc::__errno_location() = v }
    }
    pub fn errno() -> i32 {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() }
    }
    /// Makes `fd` (an event fd the program owns a copy of: channel / async fd) non-blocking,
    /// as a program that polls it does.
    pub fn nonblocking(fd: c_int) {
        // SAFETY: plain fcntl on a descriptor the library handed us.
        let r = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
        };
        assert!(r == 0, "fcntl(O_NONBLOCK) on fd {fd}");
    }
    /// `len` bytes at `p`, which the harness owns.
    pub fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
        // SAFETY: callers pass their own allocation; the library writes it only inside verb
        // calls, and none runs while the slice lives.
        unsafe { core::slice::from_raw_parts(p, len) }
    }
    /// Reads the union member the event type selects (all are plain pointers / ints).
    /// `wr.rdma` of a WR the harness built: (remote_addr, rkey).
    pub fn union_rdma(w: &ibv_send_wr) -> (u64, u32) {
        // SAFETY: every member of the union is plain data (any bit pattern is valid).
        unsafe { (w.wr.rdma.remote_addr, w.wr.rdma.rkey) }
    }
    /// `wr.atomic` of a WR the harness built: (remote_addr, rkey).
    pub fn union_atomic(w: &ibv_send_wr) -> (u64, u32) {
        // SAFETY: as above.
        unsafe { (w.wr.atomic.remote_addr, w.wr.atomic.rkey) }
    }
    pub fn event_element(ev: &ibv_async_event) -> usize {
        // SAFETY: every member of the union is a pointer or an int at offset 0.
        unsafe { ev.element.qp as usize }
    }
    pub fn alloc(l: Layout) -> *mut u8 {
        // SAFETY: non-zero-sized layout.
        unsafe { std::alloc::alloc(l) }
    }
    pub fn free(p: *mut u8, l: Layout) {
        // SAFETY: allocated by `alloc` with `l`, freed once, no MR on it any more.
        unsafe { std::alloc::dealloc(p, l) }
    }
    pub fn fill(p: *mut u8, src: &[u8]) {
        // SAFETY: `p` is our allocation of at least `src.len()` bytes, not registered yet.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
    }
}

// ---------------------------------------------------------------------------------------------
// Setup

struct Setup;

/// Once per process: the environment the library reads (before its first call).
fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let pid = std::process::id();
        let ip = Ipv4Addr::new(
            127,
            100 + ((pid >> 16) % 100) as u8,
            (pid >> 8) as u8,
            (pid as u8).max(1),
        );
        for k in [
            "ROCE_LOSS",
            "ROCE_REORDER",
            "ROCE_PCAP",
            "ROCE_LOG",
            "ROCE_FAULT_ALL",
            "ROCE_FAULT_ACKS",
            "ROCE_DEV_NAME",
            "ROCE_ICRC_POLICY",
        ] {
            std::env::remove_var(k);
        }
        std::env::set_var("ROCE_IP", ip.to_string());
        std::env::set_var("ROCE_MTU", "1024");
        std::env::set_var("ROCE_PROGRESS_THREAD", "0");
        std::env::set_var("ROCE_QUIET", "1");
        Setup
    })
}

// ---------------------------------------------------------------------------------------------
// Buffers

const NBUF: usize = 3;
const BUF: usize = 4096;
const GUARD: usize = 64;
const TOTAL: usize = GUARD + BUF + GUARD;
const QKEY: u32 = 0x1111_1111;

/// The `send_ops_flags` the library implements (`ibv_wr_*` builders it installs).
const WR_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | IBV_QP_EX_WITH_LOCAL_INV
    | IBV_QP_EX_WITH_SEND_WITH_INV
    | IBV_QP_EX_WITH_ATOMIC_WRITE;

fn buf_layout() -> Layout {
    Layout::from_size_align(TOTAL, 64).expect("layout")
}

/// Harness memory that MRs register parts of: 64 guard bytes, 4096 bytes, 64 guard bytes.
struct Buf {
    base: *mut u8,
    orig: Vec<u8>,
    /// Interior bytes that were inside an MR with a write permission.
    writable: Vec<bool>,
    /// Interior bytes that an accepted WR addressed for writing (a receive or READ / atomic
    /// SGE through its lkey, a WRITE / atomic target through its rkey).
    addressed: Vec<bool>,
}

impl Buf {
    fn new(k: usize) -> Buf {
        let base = c::alloc(buf_layout());
        assert!(!base.is_null(), "out of memory");
        let orig: Vec<u8> = (0..TOTAL)
            .map(|i| (i as u8).wrapping_mul(7) ^ (0x5A + 13 * k as u8))
            .collect();
        c::fill(base, &orig);
        Buf {
            base,
            orig,
            writable: vec![false; BUF],
            addressed: vec![false; BUF],
        }
    }
    fn interior(&self) -> usize {
        self.base as usize + GUARD
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // After a violation the library may still hold MRs on it: leak it then.
        if !std::thread::panicking() {
            c::free(self.base, buf_layout());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handles

macro_rules! handle {
    ($name:ident($t:ty) { $($(#[$fm:meta])* $f:ident : $ft:ty),* $(,)? }) => {
        struct $name {
            p: *mut $t,
            alive: bool,
            $($(#[$fm])* $f: $ft),*
        }
        impl Handle for $name {
            fn addr(&self) -> usize {
                self.p as usize
            }
            fn alive(&self) -> bool {
                self.alive
            }
        }
    };
}

trait Handle {
    fn addr(&self) -> usize;
    fn alive(&self) -> bool;
}

handle!(CtxH(ibv_context) {});
handle!(PdH(ibv_pd) { ctx: usize });
handle!(MrH(ibv_mr) {
    pd: usize,
    buf: usize,
    /// Offset of the first byte in the buffer's interior.
    off: usize,
    len: usize,
    iova: u64,
    lkey: u32,
    rkey: u32,
});
handle!(ChH(ibv_comp_channel) { ctx: usize });
handle!(CqH(ibv_cq) {
    ctx: usize,
    ch: Option<usize>,
    cap: usize,
    unacked: u32,
    arms: u64,
    events: u64,
    tainted: bool,
});
handle!(QpH(ibv_qp) {
    pd: usize,
    scq: usize,
    rcq: usize,
    srq: Option<usize>,
    qpt: u32,
    qpn: u32,
    state: u32,
    sig_all: bool,
    cap: ibv_qp_cap,
    qkey: u32,
    /// Created with send ops: has the `ibv_wr_*` API.
    ex: bool,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED` events read for it.
    last_wqe: u32,
});
handle!(SrqH(ibv_srq) { pd: usize });
handle!(AhH(ibv_ah) { pd: usize });

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pick {
    Live(usize),
    /// The address of a destroyed object, or of a live object of another type.
    Bad(usize),
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Send,
    Recv,
    Srq(usize),
}

/// A work request the library accepted (or may have: `bad_wr` NULL on a failed list).
#[derive(Debug)]
struct Wr {
    qp: usize,
    kind: Kind,
    /// Must complete exactly once (signaled and surely posted).
    must: bool,
    signaled: bool,
    opcode: u32,
    /// Receive: total SGE length.
    len: u64,
    seen: u8,
    /// Can still produce a completion (its QP / SRQ was not destroyed or reset).
    live: bool,
    /// CQs seen empty after it stopped being live: it cannot be in them.
    cleared: Vec<usize>,
}

const WC_STATUS_MAX: u32 = 21;
/// `IBV_EVENT_QP_LAST_WQE_REACHED`.
const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;

fn is_v4_mapped(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

fn mapped(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

// ---------------------------------------------------------------------------------------------
// The harness

/// What a run did (for tests that check the seeds reach the data path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Work requests the library accepted.
    pub posted: usize,
    /// Successful completions, send side.
    pub sent: usize,
    /// Successful completions, receive side.
    pub received: usize,
    /// Error completions (flushes included).
    pub errors: usize,
    /// Completion events read from channels.
    pub events: usize,
    /// Async events read.
    pub async_events: usize,
}

struct H {
    stats: Stats,
    step: usize,
    op: Option<Op>,
    list: *mut *mut ibv_device,
    dev: *mut ibv_device,
    gid: [u8; 16],
    bufs: Vec<Buf>,
    ctxs: Vec<CtxH>,
    pds: Vec<PdH>,
    mrs: Vec<MrH>,
    chs: Vec<ChH>,
    cqs: Vec<CqH>,
    qps: Vec<QpH>,
    srqs: Vec<SrqH>,
    ahs: Vec<AhH>,
    wrs: HashMap<u64, Wr>,
    next_wr: u64,
}

macro_rules! fail {
    ($h:expr, $($arg:tt)*) => {
        panic!("cabi step {} ({:?}): {}", $h.step, $h.op, format!($($arg)*))
    };
}

fn pick_in<T: Handle>(
    v: &[T],
    r: Ref,
    dead_ok: impl Fn(usize) -> bool,
    others: impl FnOnce() -> Vec<usize>,
) -> Option<Pick> {
    match r.0 {
        0xFF => Some(Pick::Null),
        0xF0..=0xF7 => {
            let dead: Vec<usize> = (0..v.len())
                .filter(|&i| !v[i].alive() && dead_ok(v[i].addr()))
                .collect();
            if dead.is_empty() {
                return None;
            }
            Some(Pick::Bad(
                v[dead[(r.0 - 0xF0) as usize % dead.len()]].addr(),
            ))
        }
        0xF8..=0xFE => {
            let mine: Vec<usize> = v.iter().map(|h| h.addr()).collect();
            let o: Vec<usize> = others().into_iter().filter(|a| !mine.contains(a)).collect();
            if o.is_empty() {
                return None;
            }
            Some(Pick::Bad(o[(r.0 - 0xF8) as usize % o.len()]))
        }
        b => {
            let live: Vec<usize> = (0..v.len()).filter(|&i| v[i].alive()).collect();
            if live.is_empty() {
                return None;
            }
            Some(Pick::Live(live[b as usize % live.len()]))
        }
    }
}

fn live_count<T: Handle>(v: &[T]) -> usize {
    v.iter().filter(|h| h.alive()).count()
}

fn ptr_of<T: Handle>(v: &[T], p: Pick) -> usize {
    match p {
        Pick::Live(i) => v[i].addr(),
        Pick::Bad(a) => a,
        Pick::Null => 0,
    }
}

impl H {
    fn new(_: &Setup) -> H {
        let mut n = -1;
        let list = c::device_list(&mut n);
        assert!(!list.is_null() && n == 1, "ibv_get_device_list: {n}");
        let dev = c::peek(list, |l| *l);
        assert!(!dev.is_null());
        assert!(
            c::peek(list.wrapping_add(1), |l| l.is_null()),
            "device list not NULL-terminated"
        );
        let mut h = H {
            stats: Stats::default(),
            step: 0,
            op: None,
            list,
            dev,
            gid: [0; 16],
            bufs: (0..NBUF).map(Buf::new).collect(),
            ctxs: Vec::new(),
            pds: Vec::new(),
            mrs: Vec::new(),
            chs: Vec::new(),
            cqs: Vec::new(),
            qps: Vec::new(),
            srqs: Vec::new(),
            ahs: Vec::new(),
            wrs: HashMap::new(),
            next_wr: 0x1000,
        };
        h.open_ctx(0);
        h
    }

    // ------------------------------------------------------------------ helpers

    /// The addresses of every live handle.
    fn live_addrs(&self) -> Vec<usize> {
        fn add<T: Handle>(out: &mut Vec<usize>, v: &[T]) {
            out.extend(v.iter().filter(|h| h.alive()).map(|h| h.addr()));
        }
        let mut out = Vec::new();
        add(&mut out, &self.ctxs);
        add(&mut out, &self.pds);
        add(&mut out, &self.mrs);
        add(&mut out, &self.chs);
        add(&mut out, &self.cqs);
        add(&mut out, &self.qps);
        add(&mut out, &self.srqs);
        add(&mut out, &self.ahs);
        out
    }

    /// No live handle lives at `addr` (a destroyed object's address reused by a new object
    /// would reach that object).
    fn unaliased(&self, addr: usize) -> bool {
        !self.live_addrs().contains(&addr)
    }

    fn pick<T: Handle>(&self, v: &[T], r: Ref) -> Option<Pick> {
        pick_in(v, r, |a| self.unaliased(a), || self.live_addrs())
    }

    /// Some live context's ops table (to call an ops entry with a NULL / destroyed object).
    fn any_ops(&self) -> Option<ibv_context_ops> {
        self.ctxs.iter().find(|c| c.alive).map(|c| c::ops(c.p))
    }

    fn want(&self, verb: &str, got: c_int, allowed: &[c_int]) {
        if !allowed.contains(&got) {
            fail!(self, "{verb} returned {got}, expected one of {allowed:?}");
        }
    }

    /// A NULL-returning verb's result: `Some(true)` must succeed, `Some(false)` must fail with
    /// an errno in `errs`, `None` either.
    fn want_ptr<T>(&self, verb: &str, p: *mut T, ok: Option<bool>, errs: &[i32]) -> bool {
        let e = c::errno();
        match (p.is_null(), ok) {
            (false, Some(false)) => fail!(self, "{verb} succeeded, expected errno {errs:?}"),
            (true, Some(true)) => fail!(self, "{verb} failed with errno {e}, expected success"),
            (true, _) if !errs.contains(&e) => {
                fail!(
                    self,
                    "{verb} failed with errno {e}, expected one of {errs:?}"
                )
            }
            _ => {}
        }
        !p.is_null()
    }

    fn ctx_of_pd(&self, pd: usize) -> usize {
        self.pds[pd].ctx
    }

    fn qp_ctx(&self, q: usize) -> usize {
        self.ctx_of_pd(self.qps[q].pd)
    }

    fn check_memory(&self) {
        for (k, b) in self.bufs.iter().enumerate() {
            let now = c::bytes(b.base, TOTAL);
            if now == &b.orig[..] {
                continue;
            }
            for (i, (n, o)) in now.iter().zip(&b.orig).enumerate() {
                if n == o {
                    continue;
                }
                if !(GUARD..GUARD + BUF).contains(&i) {
                    fail!(
                        self,
                        "write outside the registered buffers: buffer {k} guard byte {i}"
                    );
                }
                if !b.writable[i - GUARD] {
                    fail!(
                        self,
                        "write to buffer {k} offset {} that no writable MR ever covered",
                        i - GUARD
                    );
                }
                if !b.addressed[i - GUARD] {
                    fail!(
                        self,
                        "write to buffer {k} offset {} that no accepted WR addressed",
                        i - GUARD
                    );
                }
            }
        }
    }

    // ------------------------------------------------------------------ step

    fn step(&mut self, op: Op) {
        self.op = Some(op.clone());
        match op {
            Op::OpenCtx { mode } => self.open_ctx(mode),
            Op::CloseCtx { ctx } => self.close_ctx(ctx),
            Op::AllocPd { ctx } => self.alloc_pd(ctx),
            Op::DeallocPd { pd } => self.dealloc_pd(pd),
            Op::RegMr {
                pd,
                buf,
                off,
                len,
                access,
                variant,
                iova,
            } => self.reg_mr(pd, buf, off, len, access, variant, iova),
            Op::DeregMr { mr } => self.dereg_mr(mr),
            Op::CreateChannel { ctx } => self.create_channel(ctx),
            Op::DestroyChannel { ch } => self.destroy_channel(ch),
            Op::CreateCq {
                ctx,
                cqe,
                mode,
                ch,
                vec,
            } => self.create_cq(ctx, cqe, mode, ch, vec),
            Op::DestroyCq { cq } => self.destroy_cq(cq),
            Op::ReqNotify { cq, solicited } => self.req_notify(cq, solicited),
            Op::GetCqEvent { ch, mode } => self.get_cq_event(ch, mode),
            Op::PollCq { cq, n } => self.poll_op(cq, n),
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
                sig_all,
                ex,
                ops,
            } => self.create_qp(
                pd,
                scq,
                rcq,
                srq,
                qpt,
                [swr, rwr, ssge, rsge],
                inline,
                sig_all,
                (ex, ops),
            ),
            op @ Op::ModifyQp { .. } => self.modify_op(&op),
            Op::Connect {
                a,
                b,
                access,
                mtu,
                timeout,
                retry,
                rnr,
                rd,
                psn,
            } => self.connect(a, b, [access, mtu, timeout, retry, rnr, rd], psn),
            Op::QueryQp { qp, mode, mask } => self.query_op(qp, mode, mask),
            Op::DestroyQp { qp, drain } => self.destroy_qp_op(qp, drain),
            Op::CreateSrq {
                pd,
                max_wr,
                max_sge,
                limit,
                null,
            } => self.create_srq(pd, max_wr, max_sge, limit, null),
            Op::ModifySrq {
                srq,
                mask,
                max_wr,
                limit,
                null,
            } => self.modify_srq(srq, mask, max_wr, limit, null),
            Op::QuerySrq { srq, null } => self.query_srq(srq, null),
            Op::DestroySrq { srq } => self.destroy_srq(srq),
            Op::CreateAh { pd, spec, null } => self.create_ah(pd, &spec, null),
            Op::DestroyAh { ah } => self.destroy_ah(ah),
            Op::PostSend { qp, wrs, bad_null } => self.post_send(qp, &wrs.0, bad_null),
            Op::PostWr { qp, wrs, mode } => self.post_wr(qp, &wrs.0, mode),
            Op::PostRecv { qp, wrs, bad_null } => self.post_recv(qp, None, &wrs.0, bad_null),
            Op::PostSrqRecv { srq, wrs, bad_null } => {
                self.post_recv(srq, Some(()), &wrs.0, bad_null)
            }
            Op::Pump { rounds } => {
                for _ in 0..1 + rounds % 8 {
                    self.drain_all();
                }
            }
            Op::AsyncEvents { ctx } => self.async_op(ctx),
        }
        self.update_taint();
        self.check_memory();
        self.step += 1;
    }

    // ------------------------------------------------------------------ contexts

    fn open_ctx(&mut self, mode: u8) {
        if live_count(&self.ctxs) >= 3 {
            return;
        }
        c::set_errno(0);
        match mode % 8 {
            4 | 5 => {
                let l = c::device_list_nullable(None);
                if l.is_null() || c::peek(l, |d| *d) != self.dev {
                    fail!(self, "ibv_get_device_list(NULL) gave {l:?}");
                }
                c::free_device_list(l);
                if mode % 8 == 5 {
                    c::free_device_list_again(l);
                }
            }
            2 => {
                let p = c::open(null_mut());
                self.want_ptr("ibv_open_device(NULL)", p, Some(false), &[libc::ENODEV]);
            }
            3 => {
                let mut junk = 0u64;
                let p = c::open((&mut junk as *mut u64).cast());
                self.want_ptr("ibv_open_device(junk)", p, Some(false), &[libc::ENODEV]);
            }
            _ => {
                let p = c::open(self.dev);
                self.want_ptr("ibv_open_device", p, Some(true), &[]);
                let (dev, async_fd) = c::peek(p, |x| (x.device, x.async_fd));
                if dev != self.dev {
                    fail!(self, "context->device is not the device");
                }
                c::nonblocking(async_fd);
                if self.gid == [0; 16] {
                    let mut g = ibv_gid::default();
                    let rc = c::query_gid(p, 1, &mut g);
                    self.want("ibv_query_gid", rc, &[0]);
                    assert!(
                        is_v4_mapped(&g.raw) && g.raw[12] == 127,
                        "the cabi target sends only to 127/8, but GID 1 is {:?}",
                        g.raw
                    );
                    self.gid = g.raw;
                }
                self.ctxs.push(CtxH { p, alive: true });
            }
        }
    }

    fn close_ctx(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => {
                self.teardown(Some(i));
                self.drain_async(i);
                let rc = c::close(self.ctxs[i].p);
                self.want("ibv_close_device", rc, &[0]);
                self.ctxs[i].alive = false;
            }
            _ => {
                let rc = c::close(ptr_of(&self.ctxs, pk) as *mut _);
                self.want("ibv_close_device(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }

    // ------------------------------------------------------------------ PD / MR / channel

    fn alloc_pd(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        c::set_errno(0);
        match pk {
            Pick::Live(i) => {
                if live_count(&self.pds) >= 16 {
                    return;
                }
                let p = c::alloc_pd(self.ctxs[i].p);
                self.want_ptr("ibv_alloc_pd", p, Some(true), &[]);
                if c::peek(p, |x| x.context) != self.ctxs[i].p {
                    fail!(self, "pd->context is not its context");
                }
                self.pds.push(PdH {
                    p,
                    alive: true,
                    ctx: i,
                });
            }
            _ => {
                let p = c::alloc_pd(ptr_of(&self.ctxs, pk) as *mut _);
                self.want_ptr("ibv_alloc_pd(dead/NULL)", p, Some(false), &[libc::EINVAL]);
            }
        }
    }

    fn pd_busy(&self, i: usize) -> bool {
        self.mrs.iter().any(|m| m.alive && m.pd == i)
            || self.qps.iter().any(|q| q.alive && q.pd == i)
            || self.srqs.iter().any(|s| s.alive && s.pd == i)
            || self.ahs.iter().any(|a| a.alive && a.pd == i)
    }

    fn dealloc_pd(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        let rc = c::dealloc_pd(ptr_of(&self.pds, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.pd_busy(i) => {
                self.want("ibv_dealloc_pd(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_dealloc_pd", rc, &[0]);
                self.pds[i].alive = false;
            }
            _ => self.want("ibv_dealloc_pd(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn reg_mr(&mut self, r: Ref, buf: u8, off: u16, len: u16, access: u16, variant: u8, iova: u64) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.mrs) >= 48 {
            return;
        }
        let b = buf as usize % NBUF;
        let off = off as usize % BUF;
        let (addr, len) = match len {
            0xFFFE => (0, 0),
            0xFFFF => (self.bufs[b].interior() + off, BUF - off),
            l => (self.bufs[b].interior() + off, l as usize % (BUF - off + 1)),
        };
        let acc = (access & 0x3FF) as c_int | if access & 0x8000 != 0 { 1 << 20 } else { 0 };
        let variant = variant % 3;
        let iova = match variant {
            0 => addr as u64,
            _ if iova >> 63 == 1 => iova,
            _ => iova & 0xFFFF_F000,
        };
        c::set_errno(0);
        let p = c::reg_mr(
            variant,
            ptr_of(&self.pds, pk) as *mut _,
            addr,
            len,
            iova,
            acc,
        );
        let Pick::Live(i) = pk else {
            self.want_ptr("ibv_reg_mr(dead/NULL pd)", p, Some(false), &[libc::EINVAL]);
            return;
        };
        let remote_w = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
        let bad = (acc & remote_w != 0 && acc & IBV_ACCESS_LOCAL_WRITE == 0)
            || iova.checked_add(len as u64).is_none();
        if !self.want_ptr("ibv_reg_mr", p, Some(!bad), &[libc::EINVAL]) {
            return;
        }
        let (ctx, pd, a, l, lkey, rkey) = c::peek(p, |m| {
            (m.context, m.pd, m.addr as usize, m.length, m.lkey, m.rkey)
        });
        if ctx != self.ctxs[self.pds[i].ctx].p || pd != self.pds[i].p || a != addr || l != len {
            fail!(self, "ibv_mr fields differ from the registration");
        }
        if acc & (IBV_ACCESS_LOCAL_WRITE | remote_w) != 0 && len > 0 {
            let o = addr - self.bufs[b].interior();
            self.bufs[b].writable[o..o + len].fill(true);
        }
        self.mrs.push(MrH {
            p,
            alive: true,
            pd: i,
            buf: b,
            off: addr.saturating_sub(self.bufs[b].interior()),
            len,
            iova,
            lkey,
            rkey,
        });
    }

    fn dereg_mr(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.mrs, r) else {
            return;
        };
        let rc = c::dereg_mr(ptr_of(&self.mrs, pk) as *mut _);
        if let Pick::Live(i) = pk {
            self.want("ibv_dereg_mr", rc, &[0]);
            self.mrs[i].alive = false;
        } else {
            self.want("ibv_dereg_mr(dead/NULL)", rc, &[libc::EINVAL]);
        }
    }

    fn create_channel(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        if matches!(pk, Pick::Live(_)) && live_count(&self.chs) >= 4 {
            return;
        }
        c::set_errno(0);
        let p = c::create_channel(ptr_of(&self.ctxs, pk) as *mut _);
        let Pick::Live(i) = pk else {
            self.want_ptr(
                "ibv_create_comp_channel(dead/NULL)",
                p,
                Some(false),
                &[libc::EINVAL],
            );
            return;
        };
        self.want_ptr("ibv_create_comp_channel", p, Some(true), &[]);
        let (ctx, fd, refcnt) = c::peek(p, |x| (x.context, x.fd, x.refcnt));
        if ctx != self.ctxs[i].p || refcnt != 0 {
            fail!(self, "ibv_comp_channel fields");
        }
        c::nonblocking(fd);
        self.chs.push(ChH {
            p,
            alive: true,
            ctx: i,
        });
    }

    fn destroy_channel(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.chs, r) else {
            return;
        };
        let rc = c::destroy_channel(ptr_of(&self.chs, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.cqs.iter().any(|q| q.alive && q.ch == Some(i)) => {
                self.want("ibv_destroy_comp_channel(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_destroy_comp_channel", rc, &[0]);
                self.chs[i].alive = false;
            }
            _ => self.want("ibv_destroy_comp_channel(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }

    // ------------------------------------------------------------------ CQ

    fn create_cq(&mut self, ctx: Ref, cqe: u16, mode: u8, ch: Ref, vec: u8) {
        let Some(pk) = self.pick(&self.ctxs, ctx) else {
            return;
        };
        if live_count(&self.cqs) >= 8 {
            return;
        }
        let n: c_int = match mode % 4 {
            0 => (cqe % 64) as c_int,
            1 => cqe as c_int,
            2 => [-1, 0, 32767, 32768, i32::MAX, i32::MIN, 1, 2][cqe as usize % 8],
            _ => 1 + (cqe % 8) as c_int,
        };
        let chp = if ch == Ref::NULL {
            Pick::Null
        } else {
            match self.pick(&self.chs, ch) {
                Some(p) => p,
                None if ch.0 < 0xF0 => Pick::Null,
                None => return,
            }
        };
        let v: c_int = match vec % 8 {
            0..=4 => 0,
            5 => 1,
            6 => -1,
            _ => vec as c_int,
        };
        let nvec = match pk {
            Pick::Live(i) => c::peek(self.ctxs[i].p, |x| x.num_comp_vectors),
            _ => 1,
        };
        let cookie = 0xC0_0000 + self.cqs.len();
        let chptr = ptr_of(&self.chs, chp) as *mut ibv_comp_channel;
        c::set_errno(0);
        let p = c::create_cq(ptr_of(&self.ctxs, pk) as *mut _, n, cookie, chptr, v);
        let ok = matches!(pk, Pick::Live(_))
            && (1..=32767).contains(&n)
            && (0..nvec).contains(&v)
            && !matches!(chp, Pick::Bad(_));
        if !self.want_ptr("ibv_create_cq", p, Some(ok), &[libc::EINVAL]) {
            return;
        }
        let Pick::Live(i) = pk else { unreachable!() };
        let (cctx, cch, ccookie, ccqe) =
            c::peek(p, |q| (q.context, q.channel, q.cq_context as usize, q.cqe));
        if cctx != self.ctxs[i].p || cch != chptr || ccookie != cookie || ccqe < n {
            fail!(self, "ibv_cq fields (cqe {ccqe} for {n})");
        }
        let ch = match chp {
            Pick::Live(k) => Some(k),
            _ => None,
        };
        self.cqs.push(CqH {
            p,
            alive: true,
            ctx: i,
            ch,
            cap: ccqe as usize,
            unacked: 0,
            arms: 0,
            events: 0,
            tainted: false,
        });
        if let Some(k) = ch {
            let users = self
                .cqs
                .iter()
                .filter(|q| q.alive && q.ch == Some(k))
                .count();
            if c::peek(self.chs[k].p, |x| x.refcnt) as usize != users {
                fail!(self, "channel refcnt is not its number of CQs ({users})");
            }
        }
    }

    fn destroy_cq(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        let Pick::Live(i) = pk else {
            let rc = c::destroy_cq(ptr_of(&self.cqs, pk) as *mut _);
            self.want("ibv_destroy_cq(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let busy = self
            .qps
            .iter()
            .any(|q| q.alive && (q.scq == i || q.rcq == i));
        if !busy && self.cqs[i].unacked > 0 {
            c::ack_cq_events(self.cqs[i].p, self.cqs[i].unacked);
            self.cqs[i].unacked = 0;
        }
        let rc = c::destroy_cq(self.cqs[i].p);
        if busy {
            self.want("ibv_destroy_cq(busy)", rc, &[libc::EBUSY]);
        } else {
            self.want("ibv_destroy_cq", rc, &[0]);
            self.cqs[i].alive = false;
        }
    }

    fn req_notify(&mut self, r: Ref, solicited: bool) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => {
                let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
                let rc = c::req_notify_cq(&ops, self.cqs[i].p, solicited as c_int);
                self.want("ibv_req_notify_cq", rc, &[0]);
                self.cqs[i].arms += 1;
            }
            _ => {
                let Some(ops) = self.any_ops() else { return };
                let rc = c::req_notify_cq(&ops, ptr_of(&self.cqs, pk) as *mut _, 0);
                self.want("ibv_req_notify_cq(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }

    fn get_cq_event(&mut self, r: Ref, mode: u8) {
        let Some(pk) = self.pick(&self.chs, r) else {
            return;
        };
        let chp = ptr_of(&self.chs, pk) as *mut ibv_comp_channel;
        c::set_errno(0);
        let Pick::Live(k) = pk else {
            let rc = c::get_cq_event(chp, None);
            self.want("ibv_get_cq_event(dead/NULL)", rc, &[-1]);
            self.want(
                "ibv_get_cq_event(dead/NULL) errno",
                c::errno(),
                &[libc::EINVAL],
            );
            return;
        };
        if mode % 8 == 7 {
            let rc = c::get_cq_event(chp, None);
            self.want("ibv_get_cq_event(NULL out)", rc, &[-1]);
            self.want(
                "ibv_get_cq_event(NULL out) errno",
                c::errno(),
                &[libc::EINVAL],
            );
            return;
        }
        let mut cq: *mut ibv_cq = null_mut();
        let mut cookie: *mut c_void = null_mut();
        let rc = c::get_cq_event(chp, Some((&mut cq, &mut cookie)));
        if rc != 0 {
            self.want("ibv_get_cq_event", rc, &[-1]);
            self.want("ibv_get_cq_event errno", c::errno(), &[libc::EAGAIN]);
            return;
        }
        let Some(i) = (0..self.cqs.len()).find(|&i| self.cqs[i].alive && self.cqs[i].p == cq)
        else {
            fail!(self, "completion event for a CQ that is not live: {cq:?}");
        };
        if self.cqs[i].ch != Some(k) {
            fail!(
                self,
                "completion event for CQ {i} on a channel it does not use"
            );
        }
        if cookie as usize != 0xC0_0000 + i {
            fail!(self, "completion event with the wrong cq_context");
        }
        self.stats.events += 1;
        let q = &mut self.cqs[i];
        q.events += 1;
        if q.events > q.arms {
            fail!(
                self,
                "CQ {i}: {} completion events for {} ibv_req_notify_cq",
                self.cqs[i].events,
                self.cqs[i].arms
            );
        }
        if mode & 1 == 1 {
            c::ack_cq_events(cq, 1);
        } else {
            self.cqs[i].unacked += 1;
        }
    }

    /// One `poll_cq` of up to `num` entries on live CQ `i`; returns how many.
    fn poll(&mut self, i: usize, num: usize) -> usize {
        let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
        let mut wc = vec![ibv_wc::default(); num];
        let ptr = if num == 0 {
            null_mut()
        } else {
            wc.as_mut_ptr()
        };
        let rc = c::poll_cq(&ops, self.cqs[i].p, num as c_int, ptr);
        if rc < 0 || rc as usize > num {
            fail!(self, "ibv_poll_cq({num}) returned {rc}");
        }
        for w in &wc[..rc as usize] {
            self.completion(i, w);
        }
        if (rc as usize) < num {
            self.cq_empty(i);
        }
        rc as usize
    }

    fn poll_op(&mut self, r: Ref, n: u8) {
        let Some(pk) = self.pick(&self.cqs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => match n {
                0xFF | 0xFE => {
                    let ops = c::ops(self.ctxs[self.cqs[i].ctx].p);
                    let mut one = [ibv_wc::default(); 1];
                    let rc = if n == 0xFF {
                        c::poll_cq(&ops, self.cqs[i].p, -1, one.as_mut_ptr())
                    } else {
                        c::poll_cq(&ops, self.cqs[i].p, 1, null_mut())
                    };
                    self.want("ibv_poll_cq(bad args)", rc, &[-libc::EINVAL]);
                }
                _ => {
                    self.poll(i, (n % 20) as usize);
                }
            },
            _ => {
                let Some(ops) = self.any_ops() else { return };
                let mut one = [ibv_wc::default(); 1];
                let rc = c::poll_cq(&ops, ptr_of(&self.cqs, pk) as *mut _, 1, one.as_mut_ptr());
                self.want("ibv_poll_cq(dead/NULL)", rc, &[-libc::EINVAL]);
            }
        }
    }

    /// Polls every live CQ until it is empty.
    fn drain_all(&mut self) {
        for i in 0..self.cqs.len() {
            if !self.cqs[i].alive {
                continue;
            }
            for _ in 0..64 {
                if self.poll(i, 16) < 16 {
                    break;
                }
            }
        }
    }

    fn completion(&mut self, cq: usize, w: &ibv_wc) {
        let Some(wr) = self.wrs.get_mut(&w.wr_id) else {
            fail!(self, "completion for a WR never posted: {w:?}");
        };
        wr.seen += 1;
        let (kind, qp, signaled, opcode, len, seen) =
            (wr.kind, wr.qp, wr.signaled, wr.opcode, wr.len, wr.seen);
        if seen > 1 {
            fail!(self, "WR {:#x} completed twice: {w:?}", w.wr_id);
        }
        if w.status > WC_STATUS_MAX {
            fail!(self, "completion with status {}", w.status);
        }
        let ok = w.status == IBV_WC_SUCCESS;
        match (ok, kind) {
            (false, _) => self.stats.errors += 1,
            (true, Kind::Send) => self.stats.sent += 1,
            (true, _) => self.stats.received += 1,
        }
        match kind {
            Kind::Send => {
                let q = &self.qps[qp];
                if q.scq != cq || q.qpn != w.qp_num {
                    fail!(
                        self,
                        "send completion on CQ {cq} / QPN {:#x}, expected CQ {} / QPN {:#x}",
                        w.qp_num,
                        q.scq,
                        q.qpn
                    );
                }
                if ok && !signaled {
                    fail!(self, "an unsignaled send WR completed successfully: {w:?}");
                }
                let want = match opcode {
                    IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => IBV_WC_RDMA_WRITE,
                    IBV_WR_RDMA_READ => IBV_WC_RDMA_READ,
                    IBV_WR_ATOMIC_CMP_AND_SWP => IBV_WC_COMP_SWAP,
                    IBV_WR_ATOMIC_FETCH_AND_ADD => IBV_WC_FETCH_ADD,
                    _ => IBV_WC_SEND,
                };
                if ok && w.opcode != want {
                    fail!(
                        self,
                        "send completion opcode {} for WR opcode {opcode}",
                        w.opcode
                    );
                }
            }
            Kind::Recv | Kind::Srq(_) => {
                let q = match kind {
                    Kind::Recv => qp,
                    Kind::Srq(s) => match (0..self.qps.len()).find(|&k| {
                        self.qps[k].qpn == w.qp_num && self.qps[k].srq == Some(s) && self.qps[k].rcq == cq
                    }) {
                        Some(k) => k,
                        None => fail!(self, "SRQ {s} receive completed on CQ {cq} for QPN {:#x}, no QP of that SRQ and CQ", w.qp_num),
                    },
                    Kind::Send => unreachable!(),
                };
                if self.qps[q].rcq != cq || self.qps[q].qpn != w.qp_num {
                    fail!(self, "receive completion on the wrong CQ / QPN: {w:?}");
                }
                if ok && !matches!(w.opcode, IBV_WC_RECV | IBV_WC_RECV_RDMA_WITH_IMM) {
                    fail!(self, "receive completion opcode {}", w.opcode);
                }
                if ok && u64::from(w.byte_len) > len && w.opcode == IBV_WC_RECV {
                    fail!(
                        self,
                        "received {} bytes into {len} bytes of SGEs",
                        w.byte_len
                    );
                }
            }
        }
    }

    /// CQ `i` was seen empty: WRs that can no longer complete are not in it.
    fn cq_empty(&mut self, i: usize) {
        for w in self.wrs.values_mut() {
            if !w.live && w.seen == 0 && !w.cleared.contains(&i) {
                w.cleared.push(i);
            }
        }
    }

    /// The CQs a WR's completion can go to.
    fn wr_cqs(&self, w: &Wr) -> Vec<usize> {
        match w.kind {
            Kind::Send => vec![self.qps[w.qp].scq],
            Kind::Recv => vec![self.qps[w.qp].rcq],
            Kind::Srq(s) => {
                let mut v: Vec<usize> = self
                    .qps
                    .iter()
                    .filter(|q| q.srq == Some(s))
                    .map(|q| q.rcq)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// Marks a CQ that may have overflowed (more completions possibly queued than its size).
    fn update_taint(&mut self) {
        let mut bound = vec![0usize; self.cqs.len()];
        for w in self.wrs.values() {
            if w.seen > 0 {
                continue;
            }
            for cq in self.wr_cqs(w) {
                if !w.cleared.contains(&cq) {
                    bound[cq] += 1;
                }
            }
        }
        for (q, b) in self.cqs.iter_mut().zip(bound) {
            if q.alive && b > q.cap {
                q.tainted = true;
            }
        }
    }

    // ------------------------------------------------------------------ QP

    #[allow(clippy::too_many_arguments)]
    fn create_qp(
        &mut self,
        pd: Ref,
        scq: Ref,
        rcq: Ref,
        srq: Ref,
        qpt: u8,
        caps: [u8; 4],
        inline: u16,
        sig_all: bool,
        (ex, ops): (u8, u16),
    ) {
        if live_count(&self.qps) >= 12 {
            return;
        }
        let Some(ppd) = self.pick(&self.pds, pd) else {
            return;
        };
        if qpt == 0xFF {
            c::set_errno(0);
            let p = c::create_qp(ptr_of(&self.pds, ppd) as *mut _, None);
            self.want_ptr("ibv_create_qp(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let (Some(ps), Some(pr)) = (self.pick(&self.cqs, scq), self.pick(&self.cqs, rcq)) else {
            return;
        };
        let psrq = match srq.0 {
            0..=0x7F => Pick::Null,
            0x80..=0xEF => match self.pick(&self.srqs, Ref(srq.0 - 0x80)) {
                Some(p) => p,
                None => return,
            },
            _ => match self.pick(&self.srqs, srq) {
                Some(p) => p,
                None => return,
            },
        };
        let t = match qpt % 8 {
            2 => IBV_QPT_UC,
            3 | 5 => IBV_QPT_UD,
            6 => [
                IBV_QPT_RAW_PACKET,
                IBV_QPT_XRC_SEND,
                IBV_QPT_XRC_RECV,
                IBV_QPT_DRIVER,
                0,
                1,
                5,
                7,
            ][(qpt >> 3) as usize % 8],
            _ => IBV_QPT_RC,
        };
        let wr = |v: u8| -> u32 {
            if v >= 0xF8 {
                [0x4000, 0x4001, 0x10000, u32::MAX, 256, 0x3FFF, 1000, 0][(v - 0xF8) as usize]
            } else {
                (v % 64) as u32
            }
        };
        let cap = ibv_qp_cap {
            max_send_wr: wr(caps[0]),
            max_recv_wr: wr(caps[1]),
            max_send_sge: (caps[2] % 40) as u32,
            max_recv_sge: (caps[3] % 40) as u32,
            max_inline_data: if inline >= 0xFFF0 {
                u32::MAX - (inline & 0xF) as u32
            } else {
                (inline % 512) as u32
            },
        };
        let srq_ptr = ptr_of(&self.srqs, psrq) as *mut ibv_srq;
        let cookie = 0x9900_0000 + self.qps.len();
        let mut ia = ibv_qp_init_attr {
            qp_context: cookie as *mut c_void,
            send_cq: ptr_of(&self.cqs, ps) as *mut _,
            recv_cq: ptr_of(&self.cqs, pr) as *mut _,
            srq: srq_ptr,
            cap,
            qp_type: t,
            sq_sig_all: sig_all as c_int,
        };
        let pdp = ptr_of(&self.pds, ppd) as *mut ibv_pd;
        c::set_errno(0);
        let via_op = ex % 8 >= 5;
        let send_ops = match ex % 8 {
            6 => Some(WR_OPS),
            7 => Some(ops as u64),
            _ => None,
        };
        let p = if via_op {
            // the inline ibv_create_qp_ex: any live context's op (it reads the PD's)
            let ctx = match ppd {
                Pick::Live(k) => self.ctxs[self.pds[k].ctx].p,
                _ => match self.ctxs.iter().find(|x| x.alive) {
                    Some(x) => x.p,
                    None => return,
                },
            };
            let mut iax = c::zeroed_init_attr_ex();
            iax.qp_context = ia.qp_context;
            iax.send_cq = ia.send_cq;
            iax.recv_cq = ia.recv_cq;
            iax.srq = ia.srq;
            iax.cap = ia.cap;
            iax.qp_type = t;
            iax.sq_sig_all = ia.sq_sig_all;
            iax.pd = pdp;
            iax.comp_mask = IBV_QP_INIT_ATTR_PD
                | if send_ops.is_some() {
                    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
                } else {
                    IBV_QP_INIT_ATTR_CREATE_FLAGS
                };
            iax.send_ops_flags = send_ops.unwrap_or(0);
            let p = c::create_qp_ex(ctx, &mut iax);
            ia.cap = iax.cap;
            p
        } else {
            c::create_qp(pdp, Some(&mut ia))
        };
        if send_ops.is_some_and(|o| o & !WR_OPS != 0) {
            self.want_ptr(
                "ibv_create_qp_ex(unsupported send ops)",
                p,
                Some(false),
                &[libc::EOPNOTSUPP],
            );
            return;
        }
        let refs_ok = matches!(ppd, Pick::Live(_))
            && matches!(ps, Pick::Live(_))
            && matches!(pr, Pick::Live(_))
            && !matches!(psrq, Pick::Bad(_));
        let type_ok = matches!(t, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD);
        let caps_ok = cap.max_send_wr <= 0x4000
            && cap.max_send_sge <= 32
            && cap.max_inline_data <= 400
            && (psrq != Pick::Null || (cap.max_recv_wr <= 0x4000 && cap.max_recv_sge <= 32));
        let errs: &[i32] = if !refs_ok || (type_ok && !caps_ok) {
            &[libc::EINVAL]
        } else {
            &[libc::EOPNOTSUPP]
        };
        if !self.want_ptr(
            "ibv_create_qp",
            p,
            Some(refs_ok && type_ok && caps_ok),
            errs,
        ) {
            return;
        }
        let (Pick::Live(pdi), Pick::Live(si), Pick::Live(ri)) = (ppd, ps, pr) else {
            unreachable!()
        };
        let got = ia.cap;
        if got.max_send_wr < cap.max_send_wr
            || got.max_send_sge < cap.max_send_sge
            || got.max_inline_data < cap.max_inline_data
            || (psrq == Pick::Null
                && (got.max_recv_wr < cap.max_recv_wr || got.max_recv_sge < cap.max_recv_sge))
        {
            fail!(
                self,
                "ibv_create_qp reported capacities {got:?} below the request {cap:?}"
            );
        }
        let (qctx, qpd, qs, qr, qsrq, qpn, st, qt, qc) = c::peek(p, |q| {
            (
                q.context,
                q.pd,
                q.send_cq,
                q.recv_cq,
                q.srq,
                q.qp_num,
                q.state,
                q.qp_type,
                q.qp_context as usize,
            )
        });
        if qctx != self.ctxs[self.pds[pdi].ctx].p
            || qpd != self.pds[pdi].p
            || qs != self.cqs[si].p
            || qr != self.cqs[ri].p
            || qsrq != srq_ptr
            || qpn == 0
            || st != IBV_QPS_RESET
            || qt != t
            || qc != cookie
        {
            fail!(self, "ibv_qp fields differ from the creation");
        }
        if self.qps.iter().any(|q| q.alive && q.qpn == qpn) {
            fail!(self, "QPN {qpn:#x} given out twice");
        }
        self.qps.push(QpH {
            p,
            alive: true,
            pd: pdi,
            scq: si,
            rcq: ri,
            srq: match psrq {
                Pick::Live(k) => Some(k),
                _ => None,
            },
            qpt: t,
            qpn,
            state: IBV_QPS_RESET,
            sig_all,
            cap: got,
            qkey: 0,
            ex: send_ops.is_some(),
            last_wqe: 0,
        });
        let qpx = c::qp_to_qp_ex(p);
        if std::ptr::eq(qpx.cast::<ibv_qp>(), p) != send_ops.is_some()
            || (send_ops.is_none() && !qpx.is_null())
        {
            fail!(
                self,
                "ibv_qp_to_qp_ex gave {qpx:?} for a QP with send ops {send_ops:?}"
            );
        }
    }

    fn ah_attr(&self, s: &AhSpec) -> (ibv_ah_attr, bool) {
        let dgid = match s.gid % 4 {
            0 | 1 => self.gid,
            2 => mapped(Ipv4Addr::new(127, 255, 255, 254)),
            _ => [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        };
        let v4 = is_v4_mapped(&dgid);
        let sgid = match s.sgid % 8 {
            _ if !v4 => 1,
            0..=5 => 1,
            6 => 0,
            _ => s.sgid,
        };
        let attr = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: dgid },
                flow_label: s.flow & 0xF_FFFF,
                sgid_index: sgid,
                hop_limit: s.hop,
                traffic_class: s.tclass,
            },
            dlid: 0,
            sl: s.sl,
            src_path_bits: 0,
            static_rate: 0,
            is_global: s.is_global,
            port_num: if s.port >= 0x80 { s.port } else { 1 },
        };
        (attr, v4 && sgid == 1)
    }

    fn query_state(&self, i: usize) -> u32 {
        let mut a = ibv_qp_attr::default();
        let mut ia = ibv_qp_init_attr {
            qp_context: null_mut(),
            send_cq: null_mut(),
            recv_cq: null_mut(),
            srq: null_mut(),
            cap: Default::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        let rc = c::query_qp(self.qps[i].p, Some(&mut a), IBV_QP_STATE, Some(&mut ia));
        self.want("ibv_query_qp", rc, &[0]);
        a.qp_state
    }

    /// `ibv_modify_qp` on live QP `i` with the model updated; returns the result.
    fn modify(&mut self, i: usize, attr: &mut ibv_qp_attr, mask: c_int) -> c_int {
        let rc = c::modify_qp(self.qps[i].p, Some(attr), mask);
        self.want("ibv_modify_qp", rc, &[0, libc::EINVAL]);
        if rc != 0 {
            return rc;
        }
        if mask & IBV_QP_QKEY != 0 {
            self.qps[i].qkey = attr.qkey;
        }
        if mask & IBV_QP_STATE != 0 {
            let before = self.qps[i].state;
            let to = attr.qp_state;
            self.qps[i].state = to;
            if c::peek(self.qps[i].p, |q| q.state) != to {
                fail!(self, "qp->state is not the state just set ({to})");
            }
            let now = self.query_state(i);
            // (RESET → ERR: the engine stays in RESET, see fuzz/README.md)
            let quirk = to == IBV_QPS_ERR
                && now == IBV_QPS_RESET
                && matches!(before, IBV_QPS_RESET | IBV_QPS_ERR);
            // moving to RTS (or SQD) sends what was posted before; a WR that fails there moves
            // the QP to ERR (UC/UD: SQE) before the verb returns
            let failed_at_once =
                matches!(to, IBV_QPS_RTS | IBV_QPS_SQD) && matches!(now, IBV_QPS_ERR | IBV_QPS_SQE);
            if now != to && !quirk && !failed_at_once {
                fail!(
                    self,
                    "ibv_query_qp says state {now} right after a modify to {to}"
                );
            }
            if to == IBV_QPS_RESET {
                self.retire_qp(i);
            }
        }
        0
    }

    /// QP `i` was reset or destroyed: its WRs can no longer complete (but may sit in a CQ).
    fn retire_qp(&mut self, i: usize) {
        for w in self.wrs.values_mut() {
            if w.qp == i && !matches!(w.kind, Kind::Srq(_)) {
                w.live = false;
            }
        }
    }

    fn dest_qpn(&self, r: Ref) -> u32 {
        if r.0 < 0xC0 && !self.qps.is_empty() {
            self.qps[r.0 as usize % self.qps.len()].qpn
        } else {
            (r.0 as u32).wrapping_mul(0x10101) & 0xFF_FFFF
        }
    }

    fn modify_op(&mut self, op: &Op) {
        let Op::ModifyQp {
            qp,
            tmpl,
            mask,
            state,
            cur,
            mtu,
            qkey,
            rq_psn,
            sq_psn,
            dest,
            access,
            pkey,
            port,
            timeout,
            retry,
            rnr,
            min_rnr,
            rd,
            dest_rd,
            sqd,
            ref ah,
        } = *op
        else {
            unreachable!()
        };
        let Some(pk) = self.pick(&self.qps, qp) else {
            return;
        };
        let st = |v: u8| -> u32 {
            if v >= 0xF8 {
                (v as u32).wrapping_mul(0x0101_0101)
            } else {
                (v % 8) as u32
            }
        };
        let Pick::Live(i) = pk else {
            let mut a = ibv_qp_attr::default();
            let rc = c::modify_qp(ptr_of(&self.qps, pk) as *mut _, Some(&mut a), IBV_QP_STATE);
            self.want("ibv_modify_qp(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        if tmpl == 0xFF {
            let rc = c::modify_qp(self.qps[i].p, None, IBV_QP_STATE);
            self.want("ibv_modify_qp(NULL attr)", rc, &[libc::EINVAL]);
            return;
        }
        let t = self.qps[i].qpt;
        let (m_init, m_rtr, m_rts) = masks(t);
        let (mask, to) = match tmpl % 8 {
            0 => (mask & 0x03FF_FFFF, st(state)),
            1 => (m_init, IBV_QPS_INIT),
            2 => (m_rtr, IBV_QPS_RTR),
            3 => (m_rts, IBV_QPS_RTS),
            4 => (IBV_QP_STATE as u32, st(state)),
            5 => (m_rts | (mask & 0x001F_FFFF), st(state)),
            6 => (mask, st(state)),
            _ => (IBV_QP_STATE as u32 | (mask & 0x001F_FFFF), st(state)),
        };
        let (ah_attr, _) = self.ah_attr(ah);
        let mut a = ibv_qp_attr {
            qp_state: to,
            cur_qp_state: st(cur),
            path_mtu: if mtu >= 0xF0 {
                mtu as u32
            } else {
                1 + (mtu % 5) as u32
            },
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num: self.dest_qpn(dest),
            qp_access_flags: access as u32,
            ah_attr,
            pkey_index: if pkey >= 0x80 { pkey as u16 } else { 0 },
            en_sqd_async_notify: sqd,
            max_rd_atomic: rd,
            max_dest_rd_atomic: dest_rd,
            min_rnr_timer: min_rnr,
            port_num: if port >= 0x80 { port } else { 1 },
            timeout,
            retry_cnt: retry,
            rnr_retry: rnr,
            ..Default::default()
        };
        self.modify(i, &mut a, mask as c_int);
    }

    fn connect(&mut self, a: Ref, b: Ref, p: [u8; 6], psn: u32) {
        let (Some(Pick::Live(i)), Some(Pick::Live(j))) =
            (self.pick(&self.qps, a), self.pick(&self.qps, b))
        else {
            return;
        };
        self.bring_up(i, j, p, psn);
        if j != i {
            self.bring_up(j, i, p, psn);
        }
    }

    /// RESET → INIT → RTR → RTS toward `peer`, each step with a valid attribute set for the
    /// QP's state as `ibv_query_qp` reports it; each must succeed.
    fn bring_up(&mut self, i: usize, peer: usize, p: [u8; 6], psn: u32) {
        let [access, mtu, timeout, retry, rnr, rd] = p;
        let t = self.qps[i].qpt;
        let (m_init, m_rtr, m_rts) = masks(t);
        for _ in 0..3 {
            let now = self.query_state(i);
            let model = self.qps[i].state;
            if now != model {
                if model == IBV_QPS_ERR && now == IBV_QPS_RESET {
                    // RESET → ERR leaves the engine in RESET (see fuzz/README.md)
                    self.qps[i].state = IBV_QPS_RESET;
                } else if now == IBV_QPS_ERR || now == IBV_QPS_SQE {
                    // an asynchronous error
                    return;
                } else {
                    fail!(self, "QP {i} is in state {now}, the model says {model}");
                }
            }
            let mut a = ibv_qp_attr {
                pkey_index: 0,
                port_num: 1,
                qkey: QKEY,
                qp_access_flags: if access & 0x80 != 0 {
                    (access & 0xF) as u32
                } else {
                    0xF
                },
                path_mtu: 1 + (mtu % 5) as u32,
                dest_qp_num: self.qps[peer].qpn,
                rq_psn: psn & 0xFF_FFFF,
                sq_psn: psn & 0xFF_FFFF,
                max_dest_rd_atomic: 1 << (rd % 5),
                max_rd_atomic: 1 << (rd % 5),
                min_rnr_timer: rd % 32,
                timeout: timeout % 32,
                retry_cnt: retry % 8,
                rnr_retry: rnr % 8,
                // hop limit 0 (TTL 0) makes every datagram fail in sendmsg (see README.md)
                ah_attr: self
                    .ah_attr(&AhSpec {
                        hop: 64,
                        ..AhSpec::default()
                    })
                    .0,
                ..Default::default()
            };
            let (mask, to) = match now {
                IBV_QPS_RESET => (m_init, IBV_QPS_INIT),
                IBV_QPS_INIT => (m_rtr, IBV_QPS_RTR),
                IBV_QPS_RTR => (m_rts, IBV_QPS_RTS),
                _ => return,
            };
            a.qp_state = to;
            let rc = self.modify(i, &mut a, mask as c_int);
            if rc != 0 {
                fail!(
                    self,
                    "QP {i} (type {t}) {now} → {to} with a valid attribute set: {rc}"
                );
            }
        }
    }

    fn query_op(&mut self, r: Ref, mode: u8, mask: u32) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let mut a = ibv_qp_attr::default();
        let mut ia = ibv_qp_init_attr {
            qp_context: null_mut(),
            send_cq: null_mut(),
            recv_cq: null_mut(),
            srq: null_mut(),
            cap: Default::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        let p = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let Pick::Live(i) = pk else {
            let rc = c::query_qp(p, Some(&mut a), mask as c_int, Some(&mut ia));
            self.want("ibv_query_qp(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let rc = match mode % 4 {
            1 => c::query_qp(p, None, mask as c_int, Some(&mut ia)),
            2 => c::query_qp(p, Some(&mut a), mask as c_int, None),
            _ => c::query_qp(p, Some(&mut a), mask as c_int, Some(&mut ia)),
        };
        if matches!(mode % 4, 1 | 2) {
            self.want("ibv_query_qp(NULL out)", rc, &[libc::EINVAL]);
            return;
        }
        self.want("ibv_query_qp", rc, &[0]);
        let q = &self.qps[i];
        let srq = q.srq.map_or(null_mut(), |s| self.srqs[s].p);
        if ia.send_cq != self.cqs[q.scq].p
            || ia.recv_cq != self.cqs[q.rcq].p
            || ia.srq != srq
            || ia.qp_type != q.qpt
            || (ia.sq_sig_all != 0) != q.sig_all
            || ia.cap != q.cap
        {
            fail!(self, "ibv_query_qp init_attr differs from the creation");
        }
        let model = q.state;
        let now = a.qp_state;
        let fine = now == model
            || (model == IBV_QPS_ERR && now == IBV_QPS_RESET)
            || (model != IBV_QPS_RESET && matches!(now, IBV_QPS_ERR | IBV_QPS_SQE));
        if !fine || now > IBV_QPS_ERR {
            fail!(self, "ibv_query_qp state {now}, model {model}");
        }
    }

    fn move_to_err(&mut self, i: usize) {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_ERR,
            ..Default::default()
        };
        let rc = self.modify(i, &mut a, IBV_QP_STATE);
        if rc != 0 {
            fail!(self, "modify QP {i} to ERR: {rc}");
        }
    }

    /// After ERR and a drain: every signaled WR of QP `i` completed.
    fn verify_qp(&self, i: usize) {
        for (id, w) in &self.wrs {
            if w.qp != i || matches!(w.kind, Kind::Srq(_)) || !w.must || !w.live || w.seen > 0 {
                continue;
            }
            let cq = if w.kind == Kind::Send {
                self.qps[i].scq
            } else {
                self.qps[i].rcq
            };
            if !self.cqs[cq].tainted {
                fail!(self, "signaled WR {id:#x} ({w:?}) of QP {i} never completed (QP in ERR, CQ {cq} drained)");
            }
        }
    }

    fn destroy_qp(&mut self, i: usize, drain: bool) {
        if drain {
            self.move_to_err(i);
            self.drain_all();
            self.verify_qp(i);
        }
        let rc = c::destroy_qp(self.qps[i].p);
        self.want("ibv_destroy_qp", rc, &[0]);
        self.qps[i].alive = false;
        self.retire_qp(i);
    }

    fn destroy_qp_op(&mut self, r: Ref, drain: u8) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => self.destroy_qp(i, drain & 1 == 1),
            _ => {
                let rc = c::destroy_qp(ptr_of(&self.qps, pk) as *mut _);
                self.want("ibv_destroy_qp(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }

    // ------------------------------------------------------------------ SRQ / AH

    fn create_srq(&mut self, r: Ref, max_wr: u16, max_sge: u8, limit: u16, null: u8) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.srqs) >= 4 {
            return;
        }
        let pdp = ptr_of(&self.pds, pk) as *mut ibv_pd;
        c::set_errno(0);
        if null % 16 == 15 {
            let p = c::create_srq(pdp, None);
            self.want_ptr("ibv_create_srq(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let mw = if max_wr >= 0xFFF0 {
            [0x4000, 0x4001, 0, u32::MAX, 1, 0x3FFF, 0x10000, 2][(max_wr & 7) as usize]
        } else {
            (max_wr % 128) as u32
        };
        let attr = ibv_srq_attr {
            max_wr: mw,
            max_sge: (max_sge % 32) as u32,
            srq_limit: (limit % 160) as u32,
        };
        let cookie = 0x5500_0000 + self.srqs.len();
        let mut ia = ibv_srq_init_attr {
            srq_context: cookie as *mut c_void,
            attr,
        };
        let p = c::create_srq(pdp, Some(&mut ia));
        let ok = matches!(pk, Pick::Live(_))
            && (1..=0x4000).contains(&attr.max_wr)
            && attr.max_sge <= 27
            && attr.srq_limit <= attr.max_wr;
        if !self.want_ptr("ibv_create_srq", p, Some(ok), &[libc::EINVAL]) {
            return;
        }
        let Pick::Live(i) = pk else { unreachable!() };
        if ia.attr.max_wr < attr.max_wr || ia.attr.max_sge < attr.max_sge {
            fail!(self, "ibv_create_srq reported {:?} for {attr:?}", ia.attr);
        }
        let (sctx, spd, sc) = c::peek(p, |s| (s.context, s.pd, s.srq_context as usize));
        if sctx != self.ctxs[self.pds[i].ctx].p || spd != self.pds[i].p || sc != cookie {
            fail!(self, "ibv_srq fields differ from the creation");
        }
        self.srqs.push(SrqH {
            p,
            alive: true,
            pd: i,
        });
    }

    fn modify_srq(&mut self, r: Ref, mask: u8, max_wr: u16, limit: u16, null: u8) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let mut a = ibv_srq_attr {
            max_wr: max_wr as u32,
            max_sge: 0,
            srq_limit: limit as u32,
        };
        let p = ptr_of(&self.srqs, pk) as *mut ibv_srq;
        if !matches!(pk, Pick::Live(_)) {
            let rc = c::modify_srq(p, Some(&mut a), mask as c_int);
            self.want("ibv_modify_srq(dead/NULL)", rc, &[libc::EINVAL]);
        } else if null % 16 == 15 {
            let rc = c::modify_srq(p, None, mask as c_int);
            self.want("ibv_modify_srq(NULL attr)", rc, &[libc::EINVAL]);
        } else {
            let rc = c::modify_srq(p, Some(&mut a), mask as c_int);
            self.want("ibv_modify_srq", rc, &[0, libc::EINVAL, libc::EOPNOTSUPP]);
        }
    }

    fn query_srq(&mut self, r: Ref, null: u8) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let mut a = ibv_srq_attr::default();
        let p = ptr_of(&self.srqs, pk) as *mut ibv_srq;
        if !matches!(pk, Pick::Live(_)) {
            let rc = c::query_srq(p, Some(&mut a));
            self.want("ibv_query_srq(dead/NULL)", rc, &[libc::EINVAL]);
        } else if null % 16 == 15 {
            let rc = c::query_srq(p, None);
            self.want("ibv_query_srq(NULL attr)", rc, &[libc::EINVAL]);
        } else {
            let rc = c::query_srq(p, Some(&mut a));
            self.want("ibv_query_srq", rc, &[0]);
            if a.max_wr == 0 || a.srq_limit > a.max_wr {
                fail!(self, "ibv_query_srq: {a:?}");
            }
        }
    }

    fn destroy_srq(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let rc = c::destroy_srq(ptr_of(&self.srqs, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.qps.iter().any(|q| q.alive && q.srq == Some(i)) => {
                self.want("ibv_destroy_srq(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_destroy_srq", rc, &[0]);
                self.srqs[i].alive = false;
                for w in self.wrs.values_mut() {
                    if w.kind == Kind::Srq(i) {
                        w.live = false;
                    }
                }
            }
            _ => self.want("ibv_destroy_srq(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }

    fn create_ah(&mut self, r: Ref, spec: &AhSpec, null: u8) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.ahs) >= 16 {
            return;
        }
        let pdp = ptr_of(&self.pds, pk) as *mut ibv_pd;
        c::set_errno(0);
        if null % 16 == 15 {
            let p = c::create_ah(pdp, None);
            self.want_ptr("ibv_create_ah(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let (mut attr, valid) = self.ah_attr(spec);
        let p = c::create_ah(pdp, Some(&mut attr));
        let Pick::Live(i) = pk else {
            self.want_ptr(
                "ibv_create_ah(dead/NULL pd)",
                p,
                Some(false),
                &[libc::EINVAL],
            );
            return;
        };
        if !self.want_ptr("ibv_create_ah", p, Some(valid), &[libc::EINVAL]) {
            return;
        }
        if c::peek(p, |a| (a.context, a.pd)) != (self.ctxs[self.pds[i].ctx].p, self.pds[i].p) {
            fail!(self, "ibv_ah fields differ from the creation");
        }
        self.ahs.push(AhH {
            p,
            alive: true,
            pd: i,
        });
    }

    fn destroy_ah(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ahs, r) else {
            return;
        };
        let rc = c::destroy_ah(ptr_of(&self.ahs, pk) as *mut _);
        if let Pick::Live(i) = pk {
            self.want("ibv_destroy_ah", rc, &[0]);
            self.ahs[i].alive = false;
        } else {
            self.want("ibv_destroy_ah(dead/NULL)", rc, &[libc::EINVAL]);
        }
    }

    // ------------------------------------------------------------------ posting

    fn sge(&self, s: &Sge, inline: bool) -> ibv_sge {
        let mr = if s.mr == Ref::NULL || self.mrs.is_empty() {
            None
        } else {
            Some(&self.mrs[s.mr.0 as usize % self.mrs.len()])
        };
        if inline {
            // a real pointer into a harness buffer (guards included: they are only read)
            let b = mr.map_or(0, |m| m.buf);
            let o = s.off as usize % TOTAL;
            let len = (s.len as usize % 512).min(TOTAL - o);
            return ibv_sge {
                addr: (self.bufs[b].base as usize + o) as u64,
                length: len as u32,
                lkey: mr.map_or(0, |m| m.lkey),
            };
        }
        let Some(m) = mr else {
            return ibv_sge {
                addr: (s.off as u64) << 12 | 0x10,
                length: s.len as u32,
                lkey: (s.off as u32).wrapping_mul(0x9E37_79B9),
            };
        };
        let inside = |off: u16, len: u16| -> (u64, u32) {
            let o = off as u64 % (m.len as u64 + 1);
            (m.iova + o, (len as u64).min(m.len as u64 - o) as u32)
        };
        match s.mode % 8 {
            0..=4 => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.lkey,
                }
            }
            5 => ibv_sge {
                addr: m.iova.wrapping_add(s.off as u64),
                length: s.len as u32,
                lkey: m.lkey,
            },
            6 => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.lkey ^ (1 + s.off as u32),
                }
            }
            _ => {
                let (a, l) = inside(s.off, s.len);
                ibv_sge {
                    addr: a,
                    length: l,
                    lkey: m.rkey,
                }
            }
        }
    }

    /// The SGE array of a WR: `(array, num_sge, NULL list)`.
    fn sg_list(&self, sges: &[Sge], mode: u8, inline: bool) -> (Vec<ibv_sge>, c_int, bool) {
        match mode % 16 {
            15 => (Vec::new(), -1, true),
            14 => (Vec::new(), 2, true),
            13 => (vec![ibv_sge::default(); 40], 40, false),
            _ => {
                let v: Vec<ibv_sge> = sges.iter().map(|s| self.sge(s, inline)).collect();
                let n = v.len() as c_int;
                (v, n, n == 0)
            }
        }
    }

    fn remote(&self, r: &Remote, atomic: bool) -> (u64, u32) {
        let mr = if r.mr == Ref::NULL || self.mrs.is_empty() {
            None
        } else {
            Some(&self.mrs[r.mr.0 as usize % self.mrs.len()])
        };
        let Some(m) = mr else {
            return ((r.off as u64) << 3, r.off as u32);
        };
        let o = r.off as u64 % (m.len as u64 + 1);
        match r.mode % 4 {
            0 if atomic => ((m.iova + o) & !7, m.rkey),
            0 | 1 => (m.iova + o, m.rkey),
            2 => (m.iova.wrapping_add(r.off as u64), m.rkey),
            _ => (m.iova + o, m.rkey.wrapping_add(1 + r.off as u32)),
        }
    }

    /// Marks `[addr, addr + len)` of every MR (live or not) whose key is `key` as addressed.
    fn mark(&mut self, key: u32, remote: bool, addr: u64, len: u64) {
        for k in 0..self.mrs.len() {
            let m = &self.mrs[k];
            if (if remote { m.rkey } else { m.lkey }) != key || addr < m.iova {
                continue;
            }
            let o = addr - m.iova;
            if o >= m.len as u64 {
                continue;
            }
            let n = len.min(m.len as u64 - o) as usize;
            let start = m.off + o as usize;
            let b = m.buf;
            self.bufs[b].addressed[start..start + n].fill(true);
        }
    }

    /// Marks what an accepted send WR may write: local SGEs of READ / atomics, the remote
    /// range of WRITE / atomics.
    fn mark_send(&mut self, w: &ibv_send_wr, sges: &[ibv_sge], len: u64) {
        let atomic = matches!(
            w.opcode,
            IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
        );
        if w.opcode == IBV_WR_RDMA_READ || atomic {
            for g in sges {
                self.mark(g.lkey, false, g.addr, g.length as u64);
            }
        }
        let (raddr, rkey) = if atomic {
            c::union_atomic(w)
        } else {
            c::union_rdma(w)
        };
        match w.opcode {
            IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => self.mark(rkey, true, raddr, len),
            _ if atomic => self.mark(rkey, true, raddr, 8),
            _ => {}
        }
    }

    fn new_wr_id(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    fn post_send(&mut self, r: Ref, specs: &[SendSpec], bad_null: bool) {
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let qp = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let live = match pk {
            Pick::Live(i) => Some(i),
            _ => None,
        };
        let ops = match live {
            Some(i) => {
                let ctx = c::peek(qp, |q| q.context);
                if ctx != self.ctxs[self.qp_ctx(i)].p {
                    fail!(self, "qp->context changed");
                }
                c::ops(ctx)
            }
            None => match self.any_ops() {
                Some(o) => o,
                None => return,
            },
        };
        let is_ud = live.is_some_and(|i| self.qps[i].qpt == IBV_QPT_UD);
        let mut arrays: Vec<Vec<ibv_sge>> = Vec::new();
        let mut list: Vec<ibv_send_wr> = Vec::new();
        let mut meta: Vec<(u64, u32, bool, u64)> = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let opcode = if s.opcode < 0xE0 {
                [
                    IBV_WR_SEND,
                    IBV_WR_SEND_WITH_IMM,
                    IBV_WR_RDMA_WRITE,
                    IBV_WR_RDMA_WRITE_WITH_IMM,
                    IBV_WR_RDMA_READ,
                    IBV_WR_ATOMIC_CMP_AND_SWP,
                    IBV_WR_ATOMIC_FETCH_AND_ADD,
                    IBV_WR_SEND_WITH_INV,
                    IBV_WR_SEND,
                ][s.opcode as usize % 9]
            } else {
                (s.opcode - 0xE0) as u32
            };
            let flags = s.flags as c_uint;
            let inline = flags & IBV_SEND_INLINE != 0;
            let (arr, n, _) = self.sg_list(&s.sges.0, s.sge_mode, inline);
            let atomic = matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            );
            let (raddr, rkey) = self.remote(&s.remote, atomic);
            let wr = if is_ud {
                let ah = match self.pick(&self.ahs, s.ah) {
                    Some(p) => ptr_of(&self.ahs, p) as *mut ibv_ah,
                    None => null_mut(),
                };
                let dest = self.dest_qpn(s.dest);
                let qkey = if s.qkey == 0 { QKEY } else { s.qkey };
                ibv_send_wr_wr {
                    ud: ibv_send_wr_ud {
                        ah,
                        remote_qpn: dest,
                        remote_qkey: qkey,
                    },
                }
            } else if atomic {
                ibv_send_wr_wr {
                    atomic: ibv_send_wr_atomic {
                        remote_addr: raddr,
                        compare_add: s.compare_add,
                        swap: s.swap,
                        rkey,
                    },
                }
            } else {
                ibv_send_wr_wr {
                    rdma: ibv_send_wr_rdma {
                        remote_addr: raddr,
                        rkey,
                    },
                }
            };
            let len = arr.iter().map(|x| x.length as u64).sum();
            arrays.push(arr);
            list.push(ibv_send_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: n,
                opcode,
                send_flags: flags,
                imm_data: s.imm,
                wr,
                qp_type: ibv_send_wr_qp_type {
                    xrc: ibv_send_wr_xrc { remote_srqn: 0 },
                },
                ext: ibv_send_wr_ext {
                    tso: ibv_send_wr_tso {
                        hdr: null_mut(),
                        hdr_sz: 0,
                        mss: 0,
                    },
                },
            });
            meta.push((id, opcode, flags & IBV_SEND_SIGNALED != 0, len));
        }
        for k in 0..list.len() {
            if !arrays[k].is_empty() {
                list[k].sg_list = arrays[k].as_mut_ptr();
            }
        }
        let base = list.as_mut_ptr();
        for k in 0..list.len().saturating_sub(1) {
            list[k].next = base.wrapping_add(k + 1);
        }
        let head = if list.is_empty() { null_mut() } else { base };
        let mut bad: *mut ibv_send_wr = null_mut();
        let badp: *mut *mut ibv_send_wr = if bad_null { null_mut() } else { &mut bad };
        let rc = c::post_send(&ops, qp, head, badp);
        let Some(i) = live else {
            self.want("ibv_post_send(dead/NULL qp)", rc, &[libc::EINVAL]);
            return;
        };
        let posted = self.posted(
            "ibv_post_send",
            rc,
            bad as usize,
            base as usize,
            list.len(),
            bad_null,
            i,
        );
        let sig_all = self.qps[i].sig_all;
        for (k, (id, opcode, signaled, len)) in meta.into_iter().enumerate() {
            let sure = k < posted.0;
            if !sure && k >= posted.1 {
                break;
            }
            self.mark_send(&list[k], &arrays[k], len);
            let signaled = signaled || sig_all;
            self.stats.posted += sure as usize;
            self.wrs.insert(
                id,
                Wr {
                    qp: i,
                    kind: Kind::Send,
                    must: sure && signaled,
                    signaled,
                    opcode,
                    len: 0,
                    seen: 0,
                    live: true,
                    cleared: Vec::new(),
                },
            );
        }
        drop(arrays);
    }

    /// Maps an opcode byte as [`SendSpec`] documents it.
    fn opcode_of(b: u8) -> u32 {
        if b < 0xE0 {
            [
                IBV_WR_SEND,
                IBV_WR_SEND_WITH_IMM,
                IBV_WR_RDMA_WRITE,
                IBV_WR_RDMA_WRITE_WITH_IMM,
                IBV_WR_RDMA_READ,
                IBV_WR_ATOMIC_CMP_AND_SWP,
                IBV_WR_ATOMIC_FETCH_AND_ADD,
                IBV_WR_SEND_WITH_INV,
                IBV_WR_SEND,
            ][b as usize % 9]
        } else {
            (b - 0xE0) as u32
        }
    }

    /// The `ibv_wr_*` API: all of a batch is posted by `ibv_wr_complete` or none of it
    /// (man ibv_wr_post: "the entire posting will be aborted").
    fn post_wr(&mut self, r: Ref, specs: &[SendSpec], mode: u8) {
        use c::WrCall as W;
        let Some(pk) = self.pick(&self.qps, r) else {
            return;
        };
        let qp = ptr_of(&self.qps, pk) as *mut ibv_qp;
        let qpx = c::qp_to_qp_ex(qp);
        let i = match pk {
            Pick::Live(i) if self.qps[i].ex => i,
            _ => {
                if !qpx.is_null() {
                    fail!(
                        self,
                        "ibv_qp_to_qp_ex of a QP without send ops (or not live) is {qpx:?}"
                    );
                }
                return;
            }
        };
        if !std::ptr::eq(qpx.cast::<ibv_qp>(), qp) {
            fail!(self, "ibv_qp_to_qp_ex is not the QP");
        }
        let is_ud = self.qps[i].qpt == IBV_QPT_UD;
        c::wr(qpx, None, W::Start);
        if mode & 2 != 0 {
            c::wr(qpx, None, W::Sge(0, 0, 0));
        }
        let mut batch = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let opcode = Self::opcode_of(s.opcode);
            let flags = s.flags as u32;
            let atomic = matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            );
            let (ra, rk) = self.remote(&s.remote, atomic);
            let value = if s.imm & 1 == 0 {
                self.bufs[0].interior() as *const c_void
            } else {
                core::ptr::null()
            };
            let build = match opcode {
                IBV_WR_SEND_WITH_IMM => W::SendImm(s.imm),
                IBV_WR_SEND_WITH_INV => W::SendInv(s.imm),
                IBV_WR_RDMA_WRITE => W::Write(rk, ra),
                IBV_WR_RDMA_WRITE_WITH_IMM => W::WriteImm(rk, ra, s.imm),
                IBV_WR_RDMA_READ => W::Read(rk, ra),
                IBV_WR_ATOMIC_CMP_AND_SWP => W::Cas(rk, ra, s.compare_add, s.swap),
                IBV_WR_ATOMIC_FETCH_AND_ADD => W::Faa(rk, ra, s.compare_add),
                IBV_WR_LOCAL_INV => W::LocalInv(s.imm),
                IBV_WR_ATOMIC_WRITE => W::AtomicWrite(rk, ra, value),
                _ => W::Send,
            };
            let opcode = match build {
                W::Send => IBV_WR_SEND,
                _ => opcode,
            };
            c::wr(qpx, Some((id, flags)), build);
            if is_ud {
                let ah = match self.pick(&self.ahs, s.ah) {
                    Some(p) => ptr_of(&self.ahs, p) as *mut ibv_ah,
                    None => null_mut(),
                };
                let qkey = if s.qkey == 0 { QKEY } else { s.qkey };
                c::wr(qpx, None, W::UdAddr(ah, self.dest_qpn(s.dest), qkey));
            }
            let inline = flags & IBV_SEND_INLINE != 0;
            let (arr, n, null) = self.sg_list(&s.sges.0, s.sge_mode, inline);
            let mut len: u64 = arr.iter().map(|g| g.length as u64).sum();
            if mode & 8 == 0 {
                if inline {
                    if mode & 4 != 0 {
                        let (a, l) = arr.first().map_or((0, 0), |g| (g.addr, g.length));
                        len = l as u64;
                        c::wr(qpx, None, W::Inline(a as *mut c_void, l as usize));
                    } else {
                        let bufs: Vec<ibv_data_buf> = arr
                            .iter()
                            .map(|g| ibv_data_buf {
                                addr: g.addr as *mut c_void,
                                length: g.length as usize,
                            })
                            .collect();
                        let p = if null {
                            core::ptr::null()
                        } else {
                            bufs.as_ptr()
                        };
                        c::wr(qpx, None, W::InlineList(n.max(0) as usize, p));
                    }
                } else if mode & 4 != 0 && !arr.is_empty() {
                    len = arr[0].length as u64;
                    c::wr(qpx, None, W::Sge(arr[0].lkey, arr[0].addr, arr[0].length));
                } else {
                    let p = if null {
                        core::ptr::null()
                    } else {
                        arr.as_ptr()
                    };
                    c::wr(qpx, None, W::SgeList(n.max(0) as usize, p));
                }
            }
            batch.push((id, opcode, flags, arr, len, ra, rk));
        }
        if mode & 1 != 0 {
            c::wr(qpx, None, W::Abort);
            return;
        }
        let rc = c::wr(qpx, None, W::Complete);
        self.want("ibv_wr_complete", rc, &[0, libc::EINVAL, libc::ENOMEM]);
        // EINVAL: none of the batch is posted. ENOMEM (the SQ filled up): the engine cannot
        // post a batch atomically yet, so a prefix may have been posted (fuzz/README.md).
        let sure = rc == 0;
        if rc == libc::EINVAL {
            return;
        }
        if sure && mode & 2 != 0 {
            fail!(
                self,
                "ibv_wr_complete succeeded after a setter without a work request"
            );
        }
        if sure && self.qps[i].state == IBV_QPS_RESET && !specs.is_empty() {
            fail!(self, "ibv_wr_complete succeeded on a QP in RESET");
        }
        let sig_all = self.qps[i].sig_all;
        for (id, opcode, flags, arr, len, ra, rk) in batch {
            let mut w = ibv_send_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: 0,
                opcode,
                send_flags: flags,
                imm_data: 0,
                wr: ibv_send_wr_wr {
                    rdma: ibv_send_wr_rdma {
                        remote_addr: ra,
                        rkey: rk,
                    },
                },
                qp_type: ibv_send_wr_qp_type {
                    xrc: ibv_send_wr_xrc { remote_srqn: 0 },
                },
                ext: ibv_send_wr_ext {
                    tso: ibv_send_wr_tso {
                        hdr: null_mut(),
                        hdr_sz: 0,
                        mss: 0,
                    },
                },
            };
            if matches!(
                opcode,
                IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
            ) {
                w.wr = ibv_send_wr_wr {
                    atomic: ibv_send_wr_atomic {
                        remote_addr: ra,
                        compare_add: 0,
                        swap: 0,
                        rkey: rk,
                    },
                };
            }
            self.mark_send(&w, &arr, len);
            let signaled = flags & IBV_SEND_SIGNALED != 0 || sig_all;
            self.stats.posted += sure as usize;
            self.wrs.insert(
                id,
                Wr {
                    qp: i,
                    kind: Kind::Send,
                    must: sure && signaled,
                    signaled,
                    opcode,
                    len: 0,
                    seen: 0,
                    live: true,
                    cleared: Vec::new(),
                },
            );
        }
    }

    /// Checks a post's result; returns (WRs surely posted, WRs maybe posted).
    #[allow(clippy::too_many_arguments)]
    fn posted(
        &self,
        verb: &str,
        rc: c_int,
        bad: usize,
        base: usize,
        n: usize,
        bad_null: bool,
        qp: usize,
    ) -> (usize, usize) {
        self.want(verb, rc, &[0, libc::EINVAL, libc::ENOMEM]);
        if qp != usize::MAX && self.qps[qp].state == IBV_QPS_RESET && n > 0 {
            if rc != libc::EINVAL {
                fail!(self, "{verb} on a QP in RESET returned {rc}");
            }
            if !bad_null && bad != base {
                fail!(self, "{verb} on a QP in RESET: bad_wr is not the first WR");
            }
        }
        if rc == 0 {
            return (n, n);
        }
        if bad_null {
            return (0, n);
        }
        let size = if verb == "ibv_post_send" {
            core::mem::size_of::<ibv_send_wr>()
        } else {
            core::mem::size_of::<ibv_recv_wr>()
        };
        let off = bad.wrapping_sub(base);
        if n == 0 || bad < base || off / size * size != off || off / size >= n {
            fail!(
                self,
                "{verb} failed ({rc}) with bad_wr {bad:#x} outside the list"
            );
        }
        let k = (bad - base) / size;
        (k, k)
    }

    /// `srq`: `Some(())` posts to an SRQ chosen by `r`, else to a QP.
    fn post_recv(&mut self, r: Ref, srq: Option<()>, specs: &[RecvSpec], bad_null: bool) {
        let (pk, obj, live_ops) = if srq.is_some() {
            let Some(pk) = self.pick(&self.srqs, r) else {
                return;
            };
            let p = ptr_of(&self.srqs, pk);
            let ops = match pk {
                Pick::Live(i) => Some(c::ops(self.ctxs[self.ctx_of_pd(self.srqs[i].pd)].p)),
                _ => None,
            };
            (pk, p, ops)
        } else {
            let Some(pk) = self.pick(&self.qps, r) else {
                return;
            };
            let p = ptr_of(&self.qps, pk);
            let ops = match pk {
                Pick::Live(i) => Some(c::ops(self.ctxs[self.qp_ctx(i)].p)),
                _ => None,
            };
            (pk, p, ops)
        };
        let ops = match live_ops.or_else(|| self.any_ops()) {
            Some(o) => o,
            None => return,
        };
        let mut arrays: Vec<Vec<ibv_sge>> = Vec::new();
        let mut list: Vec<ibv_recv_wr> = Vec::new();
        let mut meta = Vec::new();
        for s in specs {
            let id = self.new_wr_id();
            let (arr, n, _) = self.sg_list(&s.sges.0, s.sge_mode, false);
            meta.push((id, arr.iter().map(|x| x.length as u64).sum::<u64>()));
            arrays.push(arr);
            list.push(ibv_recv_wr {
                wr_id: id,
                next: null_mut(),
                sg_list: null_mut(),
                num_sge: n,
            });
        }
        for k in 0..list.len() {
            if !arrays[k].is_empty() {
                list[k].sg_list = arrays[k].as_mut_ptr();
            }
        }
        let base = list.as_mut_ptr();
        for k in 0..list.len().saturating_sub(1) {
            list[k].next = base.wrapping_add(k + 1);
        }
        let head = if list.is_empty() { null_mut() } else { base };
        let mut bad: *mut ibv_recv_wr = null_mut();
        let badp: *mut *mut ibv_recv_wr = if bad_null { null_mut() } else { &mut bad };
        let rc = if srq.is_some() {
            c::post_srq_recv(&ops, obj as *mut _, head, badp)
        } else {
            c::post_recv(&ops, obj as *mut _, head, badp)
        };
        let Pick::Live(i) = pk else {
            self.want("ibv_post_recv(dead/NULL)", rc, &[libc::EINVAL]);
            return;
        };
        let qp = if srq.is_some() { usize::MAX } else { i };
        if srq.is_none() && self.qps[i].srq.is_some() && !list.is_empty() && rc != libc::EINVAL {
            fail!(self, "ibv_post_recv on a QP with an SRQ returned {rc}");
        }
        let posted = self.posted(
            "ibv_post_recv",
            rc,
            bad as usize,
            base as usize,
            list.len(),
            bad_null,
            qp,
        );
        for (k, (id, len)) in meta.into_iter().enumerate() {
            let sure = k < posted.0;
            if !sure && k >= posted.1 {
                break;
            }
            for g in &arrays[k] {
                self.mark(g.lkey, false, g.addr, g.length as u64);
            }
            self.stats.posted += sure as usize;
            let (qp, kind, must) = if srq.is_some() {
                (usize::MAX, Kind::Srq(i), false)
            } else {
                (i, Kind::Recv, sure)
            };
            self.wrs.insert(
                id,
                Wr {
                    qp,
                    kind,
                    must,
                    signaled: true,
                    opcode: 0,
                    len,
                    seen: 0,
                    live: true,
                    cleared: Vec::new(),
                },
            );
        }
        drop(arrays);
    }

    // ------------------------------------------------------------------ async events

    fn drain_async(&mut self, i: usize) {
        for _ in 0..256 {
            let mut ev = ibv_async_event {
                element: ibv_async_event_element { port_num: 0 },
                event_type: 0,
            };
            c::set_errno(0);
            let rc = c::get_async_event(self.ctxs[i].p, Some(&mut ev));
            if rc != 0 {
                self.want("ibv_get_async_event", rc, &[-1]);
                self.want("ibv_get_async_event errno", c::errno(), &[libc::EAGAIN]);
                return;
            }
            self.stats.async_events += 1;
            let el = c::event_element(&ev);
            let t = ev.event_type;
            let owner = match t {
                IBV_EVENT_CQ_ERR => self
                    .cqs
                    .iter()
                    .find(|q| q.alive && q.p as usize == el)
                    .map(|q| q.ctx),
                1..=7 | 16 => (0..self.qps.len())
                    .find(|&k| self.qps[k].alive && self.qps[k].p as usize == el)
                    .map(|k| self.qp_ctx(k)),
                14 | 15 => self
                    .srqs
                    .iter()
                    .find(|s| s.alive && s.p as usize == el)
                    .map(|s| self.pds[s.pd].ctx),
                8..=13 | 17..=20 => Some(i),
                _ => fail!(self, "async event of unknown type {t}"),
            };
            if t == IBV_EVENT_QP_LAST_WQE_REACHED {
                if let Some(k) =
                    (0..self.qps.len()).find(|&k| self.qps[k].alive && self.qps[k].p as usize == el)
                {
                    self.qps[k].last_wqe += 1;
                }
            }
            if owner != Some(i) {
                fail!(
                    self,
                    "async event {t} names {el:#x}, not a live object of context {i}"
                );
            }
            c::ack_async_event(&mut ev);
        }
    }

    fn async_op(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => self.drain_async(i),
            _ => {
                c::set_errno(0);
                let mut ev = ibv_async_event {
                    element: ibv_async_event_element { port_num: 0 },
                    event_type: 0,
                };
                let rc = c::get_async_event(ptr_of(&self.ctxs, pk) as *mut _, Some(&mut ev));
                self.want("ibv_get_async_event(dead/NULL)", rc, &[-1]);
                self.want(
                    "ibv_get_async_event(dead/NULL) errno",
                    c::errno(),
                    &[libc::EINVAL],
                );
            }
        }
    }

    // ------------------------------------------------------------------ teardown

    /// Destroys, in a valid order, every object of context `only` (all when `None`) and every
    /// object that uses one of them; QPs go to ERR and are drained and checked first.
    fn teardown(&mut self, only: Option<usize>) {
        let mine = |c: usize| !matches!(only, Some(o) if o != c);
        let cqs: Vec<bool> = self
            .cqs
            .iter()
            .map(|q| q.alive && (mine(q.ctx) || q.ch.is_some_and(|h| mine(self.chs[h].ctx))))
            .collect();
        let srqs: Vec<bool> = self
            .srqs
            .iter()
            .map(|s| s.alive && mine(self.pds[s.pd].ctx))
            .collect();
        let qps: Vec<usize> = (0..self.qps.len())
            .filter(|&k| {
                let q = &self.qps[k];
                q.alive
                    && (mine(self.pds[q.pd].ctx)
                        || cqs[q.scq]
                        || cqs[q.rcq]
                        || q.srq.is_some_and(|s| srqs[s]))
            })
            .collect();
        // A QP on an SRQ that leaves a working state for ERR raises LAST_WQE_REACHED on its
        // context (any state but RESET was reached from one).
        let mut last_wqe = Vec::new();
        for &k in &qps {
            if self.qps[k].srq.is_some() && self.query_state(k) != IBV_QPS_RESET {
                last_wqe.push(k);
            }
            self.move_to_err(k);
        }
        self.drain_all();
        for c in 0..self.ctxs.len() {
            if self.ctxs[c].alive {
                self.drain_async(c);
            }
        }
        for k in last_wqe {
            if self.qps[k].last_wqe == 0 {
                fail!(
                    self,
                    "QP {k} (context {}) on an SRQ went to ERR without IBV_EVENT_QP_LAST_WQE_REACHED",
                    self.qp_ctx(k)
                );
            }
        }
        for &k in &qps {
            self.verify_qp(k);
            self.destroy_qp(k, false);
        }
        for k in 0..self.ahs.len() {
            if self.ahs[k].alive && mine(self.pds[self.ahs[k].pd].ctx) {
                let rc = c::destroy_ah(self.ahs[k].p);
                self.want("ibv_destroy_ah", rc, &[0]);
                self.ahs[k].alive = false;
            }
        }
        for (k, &is) in srqs.iter().enumerate() {
            if is {
                let rc = c::destroy_srq(self.srqs[k].p);
                self.want("ibv_destroy_srq", rc, &[0]);
                self.srqs[k].alive = false;
            }
        }
        for k in 0..self.mrs.len() {
            if self.mrs[k].alive && mine(self.pds[self.mrs[k].pd].ctx) {
                let rc = c::dereg_mr(self.mrs[k].p);
                self.want("ibv_dereg_mr", rc, &[0]);
                self.mrs[k].alive = false;
            }
        }
        for (k, &is) in cqs.iter().enumerate() {
            if is {
                if self.cqs[k].unacked > 0 {
                    c::ack_cq_events(self.cqs[k].p, self.cqs[k].unacked);
                    self.cqs[k].unacked = 0;
                }
                let rc = c::destroy_cq(self.cqs[k].p);
                self.want("ibv_destroy_cq", rc, &[0]);
                self.cqs[k].alive = false;
            }
        }
        for k in 0..self.chs.len() {
            if self.chs[k].alive && mine(self.chs[k].ctx) {
                let rc = c::destroy_channel(self.chs[k].p);
                self.want("ibv_destroy_comp_channel", rc, &[0]);
                self.chs[k].alive = false;
            }
        }
        for k in 0..self.pds.len() {
            if self.pds[k].alive && mine(self.pds[k].ctx) {
                let rc = c::dealloc_pd(self.pds[k].p);
                self.want("ibv_dealloc_pd", rc, &[0]);
                self.pds[k].alive = false;
            }
        }
    }

    fn finish(mut self) -> Stats {
        self.op = None;
        self.teardown(None);
        for i in 0..self.ctxs.len() {
            if self.ctxs[i].alive {
                self.drain_async(i);
                let rc = c::close(self.ctxs[i].p);
                self.want("ibv_close_device", rc, &[0]);
                self.ctxs[i].alive = false;
            }
        }
        self.check_memory();
        c::free_device_list(self.list);
        self.stats
    }
}

/// The INIT, RTR and RTS masks of a QP type (required attributes only).
fn masks(t: u32) -> (u32, u32, u32) {
    let s = IBV_QP_STATE;
    let m = match t {
        IBV_QPT_UD => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
            s,
            s | IBV_QP_SQ_PSN,
        ),
        IBV_QPT_UC => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            s | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
            s | IBV_QP_SQ_PSN,
        ),
        _ => (
            s | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            s | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER,
            s | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_SQ_PSN
                | IBV_QP_MAX_QP_RD_ATOMIC,
        ),
    };
    (m.0 as u32, m.1 as u32, m.2 as u32)
}

fn run_once(data: &[u8], s: &Setup) -> Stats {
    let mut h = H::new(s);
    for op in decode(data) {
        h.step(op);
    }
    h.finish()
}

/// The target body: decodes `data` into ops, runs them, tears everything down and checks
/// that nothing leaked.
pub fn run(data: &[u8]) {
    run_stats(data);
}

/// [`run`], returning what the (last) run did.
pub fn run_stats(data: &[u8]) -> Stats {
    let s = setup();
    let counting = counting();
    let mut tries = 0;
    loop {
        let a0 = heap();
        let f0 = open_fds();
        let stats = run_once(data, s);
        let f1 = open_fds();
        let a1 = heap();
        let leaked = (counting && (a1.0 > a0.0 || a1.1 > a0.1)) || f1 > f0;
        if !leaked {
            return stats;
        }
        tries += 1;
        if tries == 3 {
            panic!(
                "cabi: leak after tearing everything down: {} allocations / {} bytes / {} fds \
                 more than before",
                a1.0 - a0.0,
                a1.1 - a0.1,
                f1 as i64 - f0 as i64
            );
        }
        // A lazily initialised static on first use is not a leak: judge the next run.
    }
}
