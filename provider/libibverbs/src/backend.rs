//! The seam between the C ABI and the NIC engine.
//!
//! The `ffi` modules own everything the ABI dictates: the C structs programs read (`ibv_qp`,
//! `ibv_cq`, …), their allocation and lifetime, the `ops` table the inline verbs jump through,
//! completion-channel and async-event file descriptors, errno conventions and argument checks.
//! The engine implements [`Backend`] (one per process) and [`DeviceContext`] (one per
//! `ibv_open_device`), in safe Rust, on plain values:
//!
//! * objects are named by ids the engine chooses ([`PdId`], [`CqId`], [`QpId`], …);
//! * work requests arrive as [`SendWr`]/[`RecvWr`] views whose scatter lists are slices;
//! * completions are written straight into the caller's `ibv_wc` array (`&mut [ibv_wc]`);
//! * registered memory is an [`MrMemory`], whose accessors hold the only `unsafe` needed to touch
//!   application memory (in `ffi::memory`);
//! * completion events go out through a [`CqNotifier`], async events through an
//!   [`AsyncEventSink`], both already wired to the file descriptors programs poll.
//!
//! Every method has a default body returning `Err(Errno::EOPNOTSUPP)`, so the engine can fill
//! them in one at a time; the C layer turns the error into the convention of each verb (NULL +
//! errno, a positive errno return, or a negative `poll_cq` return).
//!
//! To plug an engine in, change [`default_backend`] (the only constructor the C layer calls).

#![forbid(unsafe_code)]

use crate::abi::{ibv_ah_attr, ibv_qp_attr, ibv_qp_cap, ibv_sge, ibv_srq_attr, ibv_wc};
use crate::config::DeviceConfig;
pub use crate::ffi::events::{AsyncElement, AsyncEventSink, CqNotifier};
pub use crate::ffi::memory::MrMemory;
use std::fmt;
use std::sync::Arc;

/// A positive errno value (`libc::E*`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const EAGAIN: Errno = Errno(libc::EAGAIN);
    pub const ENOMEM: Errno = Errno(libc::ENOMEM);
    pub const EACCES: Errno = Errno(libc::EACCES);
    pub const EFAULT: Errno = Errno(libc::EFAULT);
    pub const EBUSY: Errno = Errno(libc::EBUSY);
    pub const ENODEV: Errno = Errno(libc::ENODEV);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const ENOSPC: Errno = Errno(libc::ENOSPC);
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ETIMEDOUT: Errno = Errno(libc::ETIMEDOUT);
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Errno({} {})",
            self.0,
            std::io::Error::from_raw_os_error(self.0)
        )
    }
}

pub type VerbResult<T> = Result<T, Errno>;

macro_rules! ids {
    ($($(#[$m:meta])* $name:ident),*) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub u64);
    )*};
}
ids!(
    /// A protection domain, named by the engine.
    PdId,
    /// A memory region.
    MrId,
    /// A completion queue.
    CqId,
    /// A queue pair.
    QpId,
    /// A shared receive queue.
    SrqId,
    /// An address handle.
    AhId
);

/// A registered memory region as the engine reports it back.
#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    pub id: MrId,
    pub lkey: u32,
    pub rkey: u32,
}

/// Arguments of `ibv_create_cq`/`ibv_create_cq_ex`.
pub struct CqInit {
    /// Minimum number of entries the program asked for.
    pub cqe: u32,
    pub comp_vector: u32,
    /// Present iff the CQ was created with a completion channel. Call
    /// [`CqNotifier::notify`] when a completion arrives on a CQ armed by `req_notify_cq`.
    pub notifier: Option<CqNotifier>,
    /// Cookie for [`AsyncEventSink::post`] with [`AsyncElement::Cq`] (the `ibv_cq` address).
    pub cookie: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct CqInfo {
    pub id: CqId,
    /// The actual capacity (`ibv_cq.cqe`), ≥ the requested one.
    pub cqe: u32,
}

/// Arguments of `ibv_create_qp`/`ibv_create_qp_ex` (ids already resolved from the C pointers).
#[derive(Clone, Debug)]
pub struct QpInit {
    pub pd: PdId,
    pub qp_type: u32,
    pub send_cq: CqId,
    pub recv_cq: CqId,
    pub srq: Option<SrqId>,
    pub cap: ibv_qp_cap,
    pub sq_sig_all: bool,
    /// Cookie for [`AsyncEventSink::post`] with [`AsyncElement::Qp`].
    pub cookie: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct QpInfo {
    pub id: QpId,
    pub qp_num: u32,
    /// The actual capacities, ≥ the requested ones (written back to `init_attr->cap`).
    pub cap: ibv_qp_cap,
}

#[derive(Clone, Copy, Debug)]
pub struct SrqInfo {
    pub id: SrqId,
    pub attr: ibv_srq_attr,
}

/// The UD destination of a send work request.
#[derive(Clone, Copy, Debug)]
pub struct UdDest {
    pub ah: AhId,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// One send work request, read from the program's `ibv_send_wr` (which stays the program's) or
/// built by the `ibv_wr_*` API (`ibv_wr_start` … `ibv_wr_complete`, which the C layer turns into
/// one `post_send` per request at `ibv_wr_complete`). Fields that do not apply to `opcode` are
/// zero.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    /// `IBV_WR_*`
    pub opcode: u32,
    /// `IBV_SEND_*`
    pub send_flags: u32,
    /// Immediate data as the program stored it (network order), or the rkey to invalidate.
    pub imm_data: u32,
    pub sg_list: &'a [ibv_sge],
    /// With `IBV_SEND_INLINE`: the payload, already gathered from the program's buffers, which
    /// it may reuse as soon as the post returns.
    /// The engine must copy it before returning; `sg_list` then needs no lkey check.
    pub inline_data: Option<&'a [u8]>,
    pub remote_addr: u64,
    pub rkey: u32,
    /// Atomics' compare or add operand; for `IBV_WR_ATOMIC_WRITE` the 8 bytes to write, as they
    /// lie in the program's memory (`u64::from_ne_bytes`).
    pub compare_add: u64,
    pub swap: u64,
    /// Set for UD QPs.
    pub ud: Option<UdDest>,
    /// `IBV_WR_BIND_MW` (`ibv_send_wr.bind_mw`, `ibv_wr_bind_mw`, `ibv_bind_mw`).
    pub bind: MwBindWr,
    /// `IBV_WR_FLUSH` (`ibv_wr_flush`).
    pub flush: FlushWr,
}

/// `ibv_wr_flush`'s length, placement type (`IBV_FLUSH_GLOBAL` 1, `IBV_FLUSH_PERSISTENT` 2)
/// and selectivity level (`IBV_FLUSH_RANGE` 0, `IBV_FLUSH_MR` 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct FlushWr {
    pub length: u32,
    pub placement_type: u8,
    pub level: u8,
}

/// A memory window bind: the window (its current rkey), the rkey it gets (only the low byte,
/// the consumer's key, is the program's) and `struct ibv_mw_bind_info` with the region by lkey.
#[derive(Clone, Copy, Debug, Default)]
pub struct MwBindWr {
    pub mw_rkey: u32,
    pub rkey: u32,
    /// `bind_info.mr->lkey` (0 when `bind_info.mr` is NULL: unbinding a type 1 window).
    pub mr_lkey: u32,
    pub addr: u64,
    pub length: u64,
    pub access: u32,
}

#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    pub wr_id: u64,
    pub sg_list: &'a [ibv_sge],
}

/// One engine instance for the process. [`default_backend`] creates it on the first
/// `ibv_open_device`.
pub trait Backend: Send + Sync + 'static {
    /// Opens the device for a new `ibv_context`. `events` is wired to `context->async_fd`.
    fn open_device(
        &self,
        cfg: &DeviceConfig,
        events: AsyncEventSink,
    ) -> VerbResult<Box<dyn DeviceContext>>;
}

/// Everything the verbs need from the engine, for one open device. Errors are positive errnos.
#[allow(unused_variables)]
pub trait DeviceContext: Send + Sync {
    fn alloc_pd(&self) -> VerbResult<PdId> {
        Err(Errno::EOPNOTSUPP)
    }
    fn dealloc_pd(&self, pd: PdId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    /// `mem` is the program's `[addr, addr+length)`; `iova` the address remote peers use.
    fn reg_mr(&self, pd: PdId, mem: MrMemory, iova: u64, access: i32) -> VerbResult<MrInfo> {
        Err(Errno::EOPNOTSUPP)
    }
    fn dereg_mr(&self, mr: MrId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// `ibv_alloc_mw` of `IBV_MW_TYPE_1` or `_2`; returns the window's rkey.
    fn alloc_mw(&self, pd: PdId, mw_type: u32) -> VerbResult<u32> {
        Err(Errno::EOPNOTSUPP)
    }
    /// `ibv_dealloc_mw` of the window `rkey` names (its key byte may be out of date).
    fn dealloc_mw(&self, rkey: u32) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn create_cq(&self, init: CqInit) -> VerbResult<CqInfo> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Returns the new actual capacity.
    fn resize_cq(&self, cq: CqId, cqe: u32) -> VerbResult<u32> {
        Err(Errno::EOPNOTSUPP)
    }
    fn destroy_cq(&self, cq: CqId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Fills `wc[..n]` and returns `n` (0 when empty). Hot path.
    fn poll_cq(&self, cq: CqId, wc: &mut [ibv_wc]) -> VerbResult<usize> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Arms the CQ: the next (solicited, if `solicited_only`) completion fires the notifier once.
    fn req_notify_cq(&self, cq: CqId, solicited_only: bool) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn create_qp(&self, init: QpInit) -> VerbResult<QpInfo> {
        Err(Errno::EOPNOTSUPP)
    }
    /// `mask` is `enum ibv_qp_attr_mask`. On success the C layer updates `qp->state` from
    /// `attr.qp_state` when `IBV_QP_STATE` is in the mask.
    fn modify_qp(&self, qp: QpId, attr: &ibv_qp_attr, mask: i32) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Fills `attr` (at least the fields in `mask`) and returns the QP's current capacities.
    fn query_qp(&self, qp: QpId, mask: i32, attr: &mut ibv_qp_attr) -> VerbResult<ibv_qp_cap> {
        Err(Errno::EOPNOTSUPP)
    }
    fn destroy_qp(&self, qp: QpId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// One work request; the C layer walks the list and reports the failing one in `*bad_wr`.
    fn post_send(&self, qp: QpId, wr: &SendWr<'_>) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// The requests of one `ibv_wr_start` … `ibv_wr_complete`, which man ibv_wr_post says are
    /// posted all or none. This default posts them one by one and stops at the first error, so
    /// a failure can leave earlier ones posted: an engine should check the whole batch first.
    fn post_send_batch(&self, qp: QpId, wrs: &[SendWr<'_>]) -> VerbResult<()> {
        wrs.iter().try_for_each(|w| self.post_send(qp, w))
    }
    fn post_recv(&self, qp: QpId, wr: &RecvWr<'_>) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn create_srq(&self, pd: PdId, attr: ibv_srq_attr, cookie: u64) -> VerbResult<SrqInfo> {
        Err(Errno::EOPNOTSUPP)
    }
    fn modify_srq(&self, srq: SrqId, attr: &ibv_srq_attr, mask: i32) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    fn query_srq(&self, srq: SrqId) -> VerbResult<ibv_srq_attr> {
        Err(Errno::EOPNOTSUPP)
    }
    fn destroy_srq(&self, srq: SrqId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    fn post_srq_recv(&self, srq: SrqId, wr: &RecvWr<'_>) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn create_ah(&self, pd: PdId, attr: &ibv_ah_attr) -> VerbResult<AhId> {
        Err(Errno::EOPNOTSUPP)
    }
    fn destroy_ah(&self, ah: AhId) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn attach_mcast(&self, qp: QpId, gid: [u8; 16], lid: u16) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    fn detach_mcast(&self, qp: QpId, gid: [u8; 16], lid: u16) -> VerbResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
}

/// The backend used until the engine is plugged in: devices open (so `ibv_devices`,
/// `ibv_devinfo` and every query work), and every verb that needs the engine returns
/// `EOPNOTSUPP`.
pub struct Unsupported;

struct UnsupportedContext;
impl DeviceContext for UnsupportedContext {}

impl Backend for Unsupported {
    fn open_device(
        &self,
        _cfg: &DeviceConfig,
        _events: AsyncEventSink,
    ) -> VerbResult<Box<dyn DeviceContext>> {
        Ok(Box::new(UnsupportedContext))
    }
}

/// The engine integration point: the roce runtime (`crate::engine`).
pub fn default_backend() -> Arc<dyn Backend> {
    Arc::new(crate::engine::Engine)
}
