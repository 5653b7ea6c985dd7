//! Typed errors of the verbs API: one variant per failure, each with a message that says what
//! went wrong and, where it helps, what to do about it.
use roce_emu::{QpState, QpType, WcStatus};
use std::net::IpAddr;

/// Why a verb failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device could not be opened (typically: the UDP port 4791 of that address is taken,
    /// or the address is not configured on this host).
    #[error("cannot open an emulated RoCE device on {ip}: {source}")]
    OpenDevice {
        /// The address asked for.
        ip: IpAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A device configuration value is invalid.
    #[error("invalid device configuration: {0}")]
    InvalidConfig(String),
    /// `ibv_alloc_pd` failed.
    #[error("cannot allocate a protection domain: {0}")]
    AllocPd(#[source] roce_emu::Error),
    /// `ibv_alloc_mw` failed (`NoMem`: the device's `max_mw` windows exist).
    #[error("cannot allocate a memory window: {0}")]
    AllocMw(#[source] roce_emu::Error),
    /// `ibv_reg_mr` failed.
    #[error("cannot register a memory region of {len} bytes: {source}")]
    RegisterMr {
        /// Region length.
        len: usize,
        /// The device's reason.
        #[source]
        source: roce_emu::Error,
    },
    /// `ibv_create_cq` failed.
    #[error("cannot create a completion queue with {cqe} entries: {source}")]
    CreateCq {
        /// Entries asked for.
        cqe: u32,
        /// The device's reason.
        #[source]
        source: roce_emu::Error,
    },
    /// `ibv_resize_cq` failed (`Invalid`: 0 entries, more than the device's `max_cqe`, or
    /// fewer than the completions queued now).
    #[error("cannot resize the completion queue to {cqe} entries: {source}")]
    ResizeCq {
        /// Entries asked for.
        cqe: u32,
        /// The device's reason.
        #[source]
        source: roce_emu::Error,
    },
    /// `ibv_create_qp` failed.
    #[error("cannot create a {qp_type:?} queue pair: {source}")]
    CreateQp {
        /// Transport.
        qp_type: QpType,
        /// The device's reason.
        #[source]
        source: roce_emu::Error,
    },
    /// `ibv_modify_qp` failed.
    #[error("cannot move queue pair {qpn} to {to:?}: {source}")]
    ModifyQp {
        /// The QP.
        qpn: u32,
        /// The target state.
        to: QpState,
        /// The device's reason.
        #[source]
        source: roce_emu::Error,
    },
    /// `ibv_create_srq` failed.
    #[error("cannot create a shared receive queue: {0}")]
    CreateSrq(#[source] roce_emu::Error),
    /// `ibv_modify_srq` failed.
    #[error("cannot modify the shared receive queue: {0}")]
    ModifySrq(#[source] roce_emu::Error),
    /// `ibv_create_ah` failed.
    #[error("cannot create an address handle: {0}")]
    CreateAh(#[source] roce_emu::Error),
    /// The send queue (or receive queue) has no free slot: poll completions first, or build the
    /// QP with a larger `max_send_wr` / `max_recv_wr`.
    #[error("queue pair {qpn}: the {queue} queue is full (poll completions before posting more)")]
    QueueFull {
        /// The QP (0 for an SRQ).
        qpn: u32,
        /// "send", "receive" or "shared receive".
        queue: &'static str,
    },
    /// `ibv_post_send` rejected a work request.
    #[error("queue pair {qpn}: post_send rejected: {reason}")]
    PostSend {
        /// The QP.
        qpn: u32,
        /// Why.
        reason: String,
    },
    /// `ibv_post_recv` rejected a work request.
    #[error("queue pair {qpn}: post_recv rejected: {reason}")]
    PostRecv {
        /// The QP.
        qpn: u32,
        /// Why.
        reason: String,
    },
    /// An operation this transport does not have (e.g. RDMA READ on UC, WRITE on UD).
    #[error("{op} is not available on a {qp_type:?} queue pair")]
    WrongTransport {
        /// The operation.
        op: &'static str,
        /// The QP's transport.
        qp_type: QpType,
    },
    /// A local slice outside its memory region.
    #[error("range {offset}..{end} is outside the {len}-byte memory region")]
    OutOfBounds {
        /// Start.
        offset: usize,
        /// End (exclusive).
        end: usize,
        /// Region length.
        len: usize,
    },
    /// Objects from different protection domains or devices were combined.
    #[error("{0}: objects belong to different protection domains or devices")]
    WrongPd(&'static str),
    /// Inline data larger than the QP's `max_inline_data`.
    #[error("inline data of {len} bytes exceeds the queue pair's max_inline_data {max}")]
    InlineTooLarge {
        /// Bytes given.
        len: usize,
        /// The QP's limit.
        max: u32,
    },
    /// An atomic needs an 8-byte, 8-byte-aligned local and remote buffer.
    #[error("atomic operations need 8-byte buffers at 8-byte-aligned addresses")]
    MisalignedAtomic,
    /// A blocking wait ran out of time.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A work completion carried an error status.
    #[error("work request {wr_id} completed with {status:?}")]
    Completion {
        /// The request.
        wr_id: u64,
        /// The status (e.g. `RemAccessErr` for a wrong rkey).
        status: WcStatus,
    },
    /// The out-of-band exchange failed.
    #[error("endpoint exchange failed: {0}")]
    Exchange(#[source] std::io::Error),
    /// An endpoint could not be decoded.
    #[error("cannot decode a queue pair endpoint: {0}")]
    Decode(String),
    /// `ibv_req_notify_cq` failed.
    #[error("cannot arm the completion queue: {0}")]
    NotifyCq(#[source] roce_emu::Error),
    /// The CQ has no completion channel (`set_comp_channel` in its builder).
    #[error("the completion queue has no completion channel")]
    NoCompChannel,
    /// An RDMA CM call failed (`verbs::cm`): the errno the CM gave.
    #[error("RDMA CM {op} failed: {}", std::io::Error::from_raw_os_error(*.errno))]
    Cm {
        /// The call.
        op: &'static str,
        /// Positive errno.
        errno: i32,
    },
    /// The peer refused the connection, or could not be reached (`verbs::cm`).
    #[error("RDMA CM connection refused: {event:?} (status {status}), peer's private data {private_data:?}")]
    CmRefused {
        /// `Rejected` (status = IB CM REJ reason, 8 = nobody listens on that port, 28 = the
        /// peer's program rejected), `Unreachable` (status -110: no answer), `ConnectError`.
        event: roce_cm::EventKind,
        /// The event's status.
        status: i32,
        /// What the peer sent with its reject.
        private_data: Vec<u8>,
    },
    /// RDMA CM needs a device on real UDP sockets (`Device::open`), not a simulated one.
    #[error("RDMA CM needs a device on UDP (Device::open), not a simulated network")]
    CmNeedsUdp,
}

/// Result of a verb.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn post_reason(e: roce_emu::Error) -> String {
    match e {
        roce_emu::Error::Invalid => {
            "invalid request (QP state, opcode for this transport, too many SGEs, missing address handle, or inline too large)".into()
        }
        roce_emu::Error::NotFound => "the queue pair no longer exists".into(),
        other => other.to_string(),
    }
}
