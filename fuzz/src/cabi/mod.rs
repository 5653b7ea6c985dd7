//! `cabi`: the drop-in `libibverbs.so.1` (crate `roce-ibverbs`) driven through its C ABI — the
//! `extern "C"` verbs the rlib exports, the context `ops` table the inline `ibv_post_send`,
//! `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` jump through, the
//! `verbs_context.create_qp_ex` op and the `ibv_wr_*` function pointers of `ibv_qp_ex` — with
//! call sequences decoded from the input.
//!
//! The input is a list of [`Op`]s (first byte of each picks the op, then its fields, little
//! endian, zero once the input runs out; [`encode`] writes a list back, so seeds are built as
//! scripts in `tests/cabi_corpus/`). Objects are chosen from tables of the handles the
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

macro_rules! fail {
    ($h:expr, $($arg:tt)*) => {
        panic!("cabi step {} ({:?}): {}", $h.step, $h.op, format!($($arg)*))
    };
}

mod c;
mod cq;
mod events;
mod guard;
mod handles;
mod input;
mod leak;
mod objects;
mod ops;
mod post;
mod qp;
mod setup;
mod srq_ah;
mod step;
mod teardown;
mod wr;

pub use input::{AhSpec, Field, Input, List, RecvSpec, Ref, Remote, SendSpec, Sge};
pub use leak::CountingAlloc;
pub use ops::{decode, encode, Op, MAX_OPS};

use guard::*;
use handles::*;
use leak::{counting, heap, open_fds};
use setup::*;

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
