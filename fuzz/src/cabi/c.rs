//! The library's C entry points and the few libc calls, each behind a safe wrapper.

use super::*;

extern "C" {
    fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_free_device_list(list: *mut *mut ibv_device);
    fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
    fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
    fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr;
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
        const MISSING: &str = "cabi: an ibv_wr_* function pointer of a QP with send ops is NULL";
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
