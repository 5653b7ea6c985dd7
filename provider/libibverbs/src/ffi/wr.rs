//! The `ibv_wr_*` ("new post send") API of QPs created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
//! Debian's perftest 4.5 uses it by default (`ibv_create_qp_ex` + `ibv_qp_to_qp_ex`, unless
//! `--use_old_post_send`). The inline `ibv_wr_*` functions of verbs.h call the function pointers
//! stored in `struct ibv_qp_ex`; ours collect the requests between `wr_start` and `wr_complete`
//! and then hand them to the same `DeviceContext::post_send` as `ibv_post_send` does, so the
//! engine implements one path.
//!
//! Semantics (man ibv_wr_post): a builder (`wr_send`, `wr_rdma_write`, …) starts a request with
//! the `wr_id`/`wr_flags` the program stored in the `ibv_qp_ex` just before; setters
//! (`wr_set_sge`, `wr_set_ud_addr`, `wr_set_inline_data`, …) complete the current one;
//! `wr_complete` posts them all and returns 0 or an errno, `wr_abort` drops them. Inline data is
//! copied when it is set (the program may reuse the buffer right away).
//!
//! # Safety
//! `qp` is the `ibv_qp_ex*` of one of our QPs (it is the first field of `Qp`, so the pointer is
//! the `Qp` pointer; module contract in `ffi/mod.rs`). SGE lists and inline buffers are the
//! program's, read during the call only. Requests are kept under the QP's `pending` mutex (the API
//! requires the program to serialize per QP; the mutex makes a violation harmless for us).

use super::objects::{gather, obj, Ah, Qp};
use super::{guard, set_errno};
use crate::abi::*;
use crate::backend::{Errno, FlushWr, MwBindWr, SendWr, UdDest};
use core::ffi::c_void;

/// `send_ops_flags` an RC QP supports: what the engine executes, as rxe's provider (TSO is not
/// a RoCE verb). FLUSH is rdma-core v45's: its `wr_flush` slot follows v44's `ibv_qp_ex`, and
/// our QPs have it ([`ibv_qp_ex_ext`]).
pub const RC_SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | IBV_QP_EX_WITH_LOCAL_INV
    | IBV_QP_EX_WITH_BIND_MW
    | IBV_QP_EX_WITH_SEND_WITH_INV
    | IBV_QP_EX_WITH_FLUSH
    | IBV_QP_EX_WITH_ATOMIC_WRITE;
/// … a UC QP (no READ, atomics, LOCAL_INV or SEND with invalidate on UC; BIND_MW as rxe).
pub const UC_SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_BIND_MW;
/// … a UD QP.
pub const UD_SEND_OPS: u64 = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

/// The `send_ops_flags` a QP of type `qp_type` supports (0 for other types).
pub fn supported_send_ops(qp_type: u32) -> u64 {
    match qp_type {
        IBV_QPT_RC => RC_SEND_OPS,
        IBV_QPT_UC => UC_SEND_OPS,
        IBV_QPT_UD => UD_SEND_OPS,
        _ => 0,
    }
}

/// `IBV_QP_EX_WITH_*` names of the bits in `flags`, joined with ` | `.
pub fn send_ops_names(flags: u64) -> String {
    const NAMES: [&str; 13] = [
        "RDMA_WRITE",
        "RDMA_WRITE_WITH_IMM",
        "SEND",
        "SEND_WITH_IMM",
        "RDMA_READ",
        "ATOMIC_CMP_AND_SWP",
        "ATOMIC_FETCH_AND_ADD",
        "LOCAL_INV",
        "BIND_MW",
        "SEND_WITH_INV",
        "TSO",
        "FLUSH",
        "ATOMIC_WRITE",
    ];
    (0..64)
        .filter(|b| flags & (1u64 << b) != 0)
        .map(|b| match NAMES.get(b) {
            Some(n) => format!("IBV_QP_EX_WITH_{n}"),
            None => format!("1 << {b}"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// One request under construction.
#[derive(Clone, Debug, Default)]
pub struct Req {
    wr_id: u64,
    opcode: u32,
    flags: u32,
    imm: u32,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
    ud: Option<UdDest>,
    bind: MwBindWr,
    flush: FlushWr,
    sges: Vec<ibv_sge>,
    inline: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct Pending {
    reqs: Vec<Req>,
    /// A setter was called with no request started, or with bad arguments: `wr_complete` fails.
    error: Option<Errno>,
}

/// Fills the `wr_*` function pointers of a new QP (v44's and v45's `wr_flush`).
pub(crate) fn install(x: &mut ibv_qp_ex_ext) {
    x.wr_flush = Some(wr_flush);
    let q = &mut x.base;
    q.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    q.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    q.wr_local_inv = Some(wr_local_inv);
    q.wr_bind_mw = Some(wr_bind_mw);
    q.wr_rdma_read = Some(wr_rdma_read);
    q.wr_rdma_write = Some(wr_rdma_write);
    q.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    q.wr_send = Some(wr_send);
    q.wr_send_imm = Some(wr_send_imm);
    q.wr_send_inv = Some(wr_send_inv);
    q.wr_set_ud_addr = Some(wr_set_ud_addr);
    q.wr_set_inline_data = Some(wr_set_inline_data);
    q.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    q.wr_set_sge = Some(wr_set_sge);
    q.wr_set_sge_list = Some(wr_set_sge_list);
    q.wr_start = Some(wr_start);
    q.wr_complete = Some(wr_complete);
    q.wr_abort = Some(wr_abort);
    q.wr_atomic_write = Some(wr_atomic_write);
    // send_tso, set_xrc_srqn stay NULL: create_qp_ex refuses those send_ops_flags.
}

/// Runs `f` on our QP and its pending requests; a NULL `qp` (which would crash libibverbs)
/// returns `default`.
fn with_qp<T: Copy>(qp: *mut ibv_qp_ex, default: T, f: impl FnOnce(&Qp, &mut Pending) -> T) -> T {
    guard(default, || {
        // SAFETY: module contract (our QP; `ibv_qp_ex` is at offset 0 of `Qp`).
        let Some(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return default;
        };
        let mut p = q.pending.lock().unwrap_or_else(|e| e.into_inner());
        f(q, &mut p)
    })
}

/// Starts a request with the `wr_id` and `wr_flags` the program stored in the `ibv_qp_ex`.
fn begin<'p>(q: &Qp, p: &'p mut Pending, opcode: u32) -> &'p mut Req {
    // SAFETY: reading two plain fields of our QP's C struct that the program wrote before the
    // call (the API requires the program to serialize calls per QP).
    let (wr_id, flags) = unsafe {
        let c = &(*q.c.get()).base;
        (c.wr_id, c.wr_flags)
    };
    p.reqs.push(Req {
        wr_id,
        opcode,
        flags,
        ..Default::default()
    });
    p.reqs.last_mut().expect("just pushed")
}

fn current(p: &mut Pending) -> Option<&mut Req> {
    if p.reqs.is_empty() {
        p.error.get_or_insert(Errno::EINVAL);
    }
    p.reqs.last_mut()
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    with_qp(qp, (), |_, p| {
        p.reqs.clear();
        p.error = None;
    })
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    with_qp(qp, (), |_, p| {
        p.reqs.clear();
        p.error = None;
    })
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> i32 {
    with_qp(qp, libc::EINVAL, |q, p| {
        let reqs = std::mem::take(&mut p.reqs);
        if let Some(e) = p.error.take() {
            set_errno(e.0);
            return e.0;
        }
        // SAFETY: our QP's C struct; `context` is set at creation and never changes.
        let context = unsafe { (*q.c.get()).base.qp_base.context };
        let Some(ctx) = super::context::from_ptr(context) else {
            return libc::EINVAL;
        };
        let batch: Vec<SendWr<'_>> = reqs
            .iter()
            .map(|r| SendWr {
                wr_id: r.wr_id,
                opcode: r.opcode,
                send_flags: r.flags,
                imm_data: r.imm,
                sg_list: &r.sges,
                inline_data: r.inline.as_deref(),
                remote_addr: r.remote_addr,
                rkey: r.rkey,
                compare_add: r.compare_add,
                swap: r.swap,
                ud: r.ud,
                bind: r.bind,
                flush: r.flush,
            })
            .collect();
        // All or none (man ibv_wr_post): the batch goes to the engine in one call, which
        // checks every request before it posts any.
        if let Err(e) = ctx.inner.backend.post_send_batch(q.id, &batch) {
            if e == Errno::EOPNOTSUPP {
                crate::log::unimplemented_once("ibv_wr_complete (post_send)");
            }
            set_errno(e.0);
            return e.0;
        }
        0
    })
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    with_qp(qp, (), |q, p| {
        begin(q, p, IBV_WR_SEND);
    })
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm_data: u32) {
    with_qp(qp, (), |q, p| {
        begin(q, p, IBV_WR_SEND_WITH_IMM).imm = imm_data
    })
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) {
    with_qp(qp, (), |q, p| {
        begin(q, p, IBV_WR_SEND_WITH_INV).imm = invalidate_rkey
    })
}

unsafe extern "C" fn wr_local_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) {
    with_qp(qp, (), |q, p| {
        begin(q, p, IBV_WR_LOCAL_INV).imm = invalidate_rkey
    })
}

unsafe extern "C" fn wr_bind_mw(
    qp: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    with_qp(qp, (), |q, p| {
        // SAFETY: NULL or one of our windows (module contract); `info` the program's, read now.
        let (m, i) = unsafe { (obj::<super::objects::Mw, _>(mw), info.as_ref()) };
        let bind = match (m, i) {
            (Some(m), Some(i)) => super::objects::bind_wr(m, rkey, i),
            _ => Err(Errno::EINVAL),
        };
        match bind {
            Ok(b) => begin(q, p, IBV_WR_BIND_MW).bind = b,
            Err(e) => p.error = Some(e),
        }
    })
}

fn remote(r: &mut Req, rkey: u32, remote_addr: u64) {
    r.rkey = rkey;
    r.remote_addr = remote_addr;
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    with_qp(qp, (), |q, p| {
        remote(begin(q, p, IBV_WR_RDMA_WRITE), rkey, remote_addr)
    })
}

unsafe extern "C" fn wr_rdma_write_imm(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: u32,
) {
    with_qp(qp, (), |q, p| {
        let r = begin(q, p, IBV_WR_RDMA_WRITE_WITH_IMM);
        remote(r, rkey, remote_addr);
        r.imm = imm_data;
    })
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    with_qp(qp, (), |q, p| {
        remote(begin(q, p, IBV_WR_RDMA_READ), rkey, remote_addr)
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    with_qp(qp, (), |q, p| {
        let r = begin(q, p, IBV_WR_ATOMIC_CMP_AND_SWP);
        remote(r, rkey, remote_addr);
        r.compare_add = compare;
        r.swap = swap;
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    with_qp(qp, (), |q, p| {
        let r = begin(q, p, IBV_WR_ATOMIC_FETCH_AND_ADD);
        remote(r, rkey, remote_addr);
        r.compare_add = add;
    })
}

unsafe extern "C" fn wr_atomic_write(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    with_qp(qp, (), |q, p| {
        if atomic_wr.is_null() {
            p.error = Some(Errno::EINVAL);
            return;
        }
        let r = begin(q, p, IBV_WR_ATOMIC_WRITE);
        remote(r, rkey, remote_addr);
        let mut b = [0u8; 8];
        // SAFETY: `atomic_wr` points to the 8 bytes to write (verbs.h contract), read now as
        // rxe's provider copies them at this call.
        unsafe { core::ptr::copy_nonoverlapping(atomic_wr.cast::<u8>(), b.as_mut_ptr(), 8) };
        r.compare_add = u64::from_ne_bytes(b);
    })
}

/// `ibv_wr_flush` (rdma-core v45): `len` bytes at `remote_addr` (the whole region behind
/// `rkey` for `IBV_FLUSH_MR`), placement `type_` and selectivity `level` as given: the responder
/// judges them, as rxe's provider passes them on unchecked. A length that does not fit the
/// RETH's 32 bits fails `ibv_wr_complete` with EINVAL (rxe's WQE keeps the low 32 bits).
unsafe extern "C" fn wr_flush(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    len: usize,
    type_: u8,
    level: u8,
) {
    with_qp(qp, (), |q, p| {
        let Ok(length) = u32::try_from(len) else {
            p.error = Some(Errno::EINVAL);
            return;
        };
        let r = begin(q, p, IBV_WR_FLUSH);
        remote(r, rkey, remote_addr);
        r.flush = FlushWr {
            length,
            placement_type: type_,
            level,
        };
    })
}

unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    with_qp(qp, (), |q, p| {
        // SAFETY: NULL or one of our AHs (module contract).
        let ah = unsafe { obj::<Ah, _>(ah) };
        // An AH of another PD is refused here rather than by the engine half-way through the
        // batch at ibv_wr_complete.
        let ah = ah.filter(|a| {
            // SAFETY: the `pd` fields of our own live AH and QP.
            unsafe { (*a.c.get()).pd == (*q.c.get()).base.qp_base.pd }
        });
        match (ah, current(p)) {
            (Some(a), Some(r)) => {
                r.ud = Some(UdDest {
                    ah: a.id,
                    remote_qpn,
                    remote_qkey,
                })
            }
            (None, _) => p.error = Some(Errno::EINVAL),
            _ => {}
        }
    })
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    with_qp(qp, (), |_, p| {
        if let Some(r) = current(p) {
            r.sges.clear();
            r.sges.push(ibv_sge { addr, length, lkey });
        }
    })
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    with_qp(qp, (), |_, p| {
        if num_sge > 0 && sg_list.is_null() {
            p.error = Some(Errno::EINVAL);
            return;
        }
        if let Some(r) = current(p) {
            r.sges.clear();
            if num_sge > 0 {
                // SAFETY: the program's array of `num_sge` SGEs, read now.
                r.sges
                    .extend_from_slice(unsafe { core::slice::from_raw_parts(sg_list, num_sge) });
            }
        }
    })
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    with_qp(qp, (), |_, p| {
        if length > 0 && addr.is_null() {
            p.error = Some(Errno::EINVAL);
            return;
        }
        if let Some(r) = current(p) {
            let sge = [ibv_sge {
                addr: addr as u64,
                length: length as u32,
                lkey: 0,
            }];
            // SAFETY: `addr[..length]` is the program's data, copied now (inline semantics).
            r.inline = Some(unsafe { gather(&sge) });
            r.flags |= IBV_SEND_INLINE;
            r.sges.clear();
        }
    })
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    with_qp(qp, (), |_, p| {
        if num_buf > 0 && buf_list.is_null() {
            p.error = Some(Errno::EINVAL);
            return;
        }
        if let Some(r) = current(p) {
            let bufs: &[ibv_data_buf] = if num_buf == 0 {
                &[]
            } else {
                // SAFETY: the program's array of `num_buf` buffers.
                unsafe { core::slice::from_raw_parts(buf_list, num_buf) }
            };
            let sges: Vec<ibv_sge> = bufs
                .iter()
                .map(|b| ibv_sge {
                    addr: b.addr as u64,
                    length: b.length as u32,
                    lkey: 0,
                })
                .collect();
            // SAFETY: each buffer is the program's data, copied now.
            r.inline = Some(unsafe { gather(&sges) });
            r.flags |= IBV_SEND_INLINE;
            r.sges.clear();
        }
    })
}
