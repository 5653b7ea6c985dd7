//! Diagnostics that teach: the classic verbs mistakes, recorded on the side where they happen,
//! once per (QP, cause), with a message that says what happened and what the program should do.
//! Every NAK a responder sends for a mistake (invalid request, remote access, remote operational
//! error, RNR) has its cause here; a PSN-sequence NAK reports a loss, no mistake, and is only
//! counted (`send_seq_err`). [`Diagnostic::RetryingForever`] is no mistake either, but a stall
//! that would otherwise be silent: it is reported once per stall.
//! The driver drains them with [`crate::Nic::poll_diagnostic`]; every occurrence (not only the
//! first) is counted in the `diag_*` [`crate::Counters`].

use crate::counters::Counters;
use crate::verbs::QpState;
use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;

/// Why a memory key check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyFault {
    /// No region was ever registered with this key.
    Unknown,
    /// The key belonged to a region that has since been deregistered.
    Stale,
    /// The region belongs to another protection domain than the QP.
    WrongPd,
    /// The region was registered without the access this operation needs.
    NoPermission,
    /// The access reaches outside the region.
    OutOfBounds,
}

/// Why a responder refused a request with a NAK invalid request (rxe's class C errors), other
/// than a QP without the access it needs ([`Diagnostic::QpAccessNotEnabled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BadRequest {
    /// A MIDDLE or LAST packet of a SEND or RDMA WRITE without the FIRST of its message.
    MissingFirst,
    /// A new request while a multi-packet SEND or RDMA WRITE still lacked its LAST packet.
    MissingLast,
    /// A payload the path MTU does not allow: a FIRST or MIDDLE packet of other than exactly
    /// one MTU, an ONLY or LAST packet over it, an empty LAST packet.
    PacketSize {
        /// This QP's path MTU in bytes.
        mtu: u32,
    },
    /// An RDMA WRITE whose payload does not add up to the DMA length of its RETH: a WRITE_ONLY
    /// or LAST that ends the message early, a packet longer than what remains, payload with a
    /// zero length, or a pad count that does not fit the length.
    WriteLength,
    /// An RDMA READ or WRITE of more than 2^31 bytes.
    MessageTooLong,
    /// A SEND longer than the receive WR's scatter list.
    RecvTooSmall,
    /// An atomic whose remote address is not 8-byte aligned.
    AtomicMisaligned,
    /// An RDMA READ or atomic on a QP whose `max_dest_rd_atomic` is 0.
    NoDestRdAtomic,
}

/// One classic verbs mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Diagnostic {
    /// A SEND arrived on an RC QP with no receive WR posted (RNR NAK sent).
    RnrNoRecvPosted,
    /// An inbound RDMA READ/WRITE/atomic failed its rkey check (NAK, remote access error).
    RemoteAccess(KeyFault),
    /// An inbound RDMA READ/WRITE/atomic on a QP whose `qp_access_flags` lack the flag it needs
    /// (NAK invalid request).
    QpAccessNotEnabled {
        /// The missing flag, e.g. `IBV_ACCESS_REMOTE_WRITE`.
        flag: &'static str,
    },
    /// A local SGE failed its lkey check (IBV_WC_LOC_PROT_ERR).
    LocalProtection(KeyFault),
    /// A verb was used on a QP in a state that does not allow it.
    WrongState {
        /// The verb, e.g. `ibv_post_send`.
        verb: &'static str,
        /// The QP's state.
        state: QpState,
    },
    /// A completion was lost because the CQ was full (completions not polled).
    CqOverflow,
    /// An incoming request was refused with a NAK invalid request, QP moved to ERR.
    InvalidRequest(BadRequest),
    /// A QP with `retry_cnt` 7 (retry forever) has had no response acknowledging anything for
    /// a minute while it has work outstanding; it keeps retrying. Reported once per stall.
    RetryingForever {
        /// The peer's address.
        peer: IpAddr,
        /// The peer's QP number.
        dest_qpn: u32,
    },
}

fn state_name(s: QpState) -> &'static str {
    match s {
        QpState::Reset => "RESET",
        QpState::Init => "INIT",
        QpState::Rtr => "RTR",
        QpState::Rts => "RTS",
        QpState::Sqd => "SQD",
        QpState::Sqe => "SQE",
        QpState::Err => "ERR",
    }
}

impl Diagnostic {
    /// The counter (in [`Counters`]) this cause is counted in.
    pub fn counter(&self) -> &'static str {
        match self {
            Diagnostic::RnrNoRecvPosted => "diag_rnr_no_recv",
            Diagnostic::RemoteAccess(KeyFault::Unknown) => "diag_bad_rkey",
            Diagnostic::RemoteAccess(KeyFault::Stale) => "diag_stale_rkey",
            Diagnostic::RemoteAccess(KeyFault::WrongPd) => "diag_rkey_wrong_pd",
            Diagnostic::RemoteAccess(KeyFault::NoPermission) => "diag_remote_no_permission",
            Diagnostic::RemoteAccess(KeyFault::OutOfBounds) => "diag_remote_out_of_bounds",
            Diagnostic::QpAccessNotEnabled { .. } => "diag_qp_access",
            Diagnostic::LocalProtection(KeyFault::Unknown | KeyFault::Stale) => "diag_bad_lkey",
            Diagnostic::LocalProtection(KeyFault::WrongPd) => "diag_lkey_wrong_pd",
            Diagnostic::LocalProtection(KeyFault::NoPermission) => "diag_local_no_permission",
            Diagnostic::LocalProtection(KeyFault::OutOfBounds) => "diag_local_out_of_bounds",
            Diagnostic::WrongState { .. } => "diag_wrong_state",
            Diagnostic::CqOverflow => "diag_cq_overflow",
            Diagnostic::InvalidRequest(b) => match b {
                BadRequest::MissingFirst => "diag_missing_first",
                BadRequest::MissingLast => "diag_missing_last",
                BadRequest::PacketSize { .. } => "diag_mtu_mismatch",
                BadRequest::WriteLength => "diag_write_length",
                BadRequest::MessageTooLong => "diag_msg_too_long",
                BadRequest::RecvTooSmall => "diag_recv_too_small",
                BadRequest::AtomicMisaligned => "diag_atomic_misaligned",
                BadRequest::NoDestRdAtomic => "diag_no_dest_rd_atomic",
            },
            Diagnostic::RetryingForever { .. } => "diag_retrying_forever",
        }
    }

    /// What happened and what the program should do, for QP `qpn`.
    pub fn message(&self, qpn: u32) -> String {
        let what = match self {
            Diagnostic::RnrNoRecvPosted => "a SEND arrived but no receive WR was posted (RNR NAK sent). \
                 Post receive work requests before the peer sends, e.g. pre-post ibv_post_recv for every expected message"
                .to_string(),
            Diagnostic::RemoteAccess(f) => {
                let why = match f {
                    KeyFault::Unknown => "with an rkey that no memory region of this device has",
                    KeyFault::Stale => "with the rkey of a memory region that was deregistered",
                    KeyFault::WrongPd => "with the rkey of a memory region in another protection domain than this QP",
                    KeyFault::NoPermission => "on a memory region registered without the remote access it needs",
                    KeyFault::OutOfBounds => "outside the bounds of the memory region of its rkey",
                };
                let fix = match f {
                    KeyFault::Unknown | KeyFault::Stale => "Send the peer the current mr->rkey (and address) of a live ibv_reg_mr region, and keep the region registered while the peer uses it",
                    KeyFault::WrongPd => "Register the memory region in the same PD as the QP (ibv_reg_mr(qp->pd, ...))",
                    KeyFault::NoPermission => "Register the region with IBV_ACCESS_REMOTE_WRITE / IBV_ACCESS_REMOTE_READ / IBV_ACCESS_REMOTE_ATOMIC as the peer's operations need (remote write and atomics also need IBV_ACCESS_LOCAL_WRITE)",
                    KeyFault::OutOfBounds => "Keep remote_addr .. remote_addr+length inside [mr->addr, mr->addr+mr->length) of the region the peer advertised",
                };
                format!("an incoming RDMA READ/WRITE/atomic was refused {why} (NAK remote access error sent, QP moved to ERR). {fix}")
            }
            Diagnostic::QpAccessNotEnabled { flag } => format!(
                "an incoming RDMA READ/WRITE/atomic was refused because this QP's qp_access_flags \
                 lack {flag} (NAK invalid request sent, QP moved to ERR). Set qp_access_flags \
                 (IBV_QP_ACCESS_FLAGS) with {flag} when moving the QP to INIT"
            ),
            Diagnostic::LocalProtection(f) => {
                let why = match f {
                    KeyFault::Unknown | KeyFault::Stale => "an lkey that is not a live memory region of this device (wrong or deregistered)",
                    KeyFault::WrongPd => "the lkey of a memory region in another protection domain than this QP",
                    KeyFault::NoPermission => "a region registered without IBV_ACCESS_LOCAL_WRITE, which incoming data needs",
                    KeyFault::OutOfBounds => "an address/length outside its memory region",
                };
                let fix = match f {
                    KeyFault::Unknown | KeyFault::Stale => "Use mr->lkey of a region that stays registered until the work request completes",
                    KeyFault::WrongPd => "Register the buffer in the QP's PD: the QP, its memory regions and address handles must all come from the same ibv_alloc_pd",
                    KeyFault::NoPermission => "Register receive and read-response buffers with IBV_ACCESS_LOCAL_WRITE",
                    KeyFault::OutOfBounds => "Keep every sge.addr .. sge.addr+sge.length inside the registered region",
                };
                format!("a work request's scatter/gather entry uses {why} (IBV_WC_LOC_PROT_ERR, QP moved to ERR). {fix}")
            }
            Diagnostic::WrongState { verb, state } => {
                let fix = match *state {
                    QpState::Reset => "Move the QP to INIT (ibv_modify_qp) before posting receives, and to RTS before posting sends",
                    QpState::Err => "The QP is in ERR after an earlier error: new work is flushed. Reset it (RESET -> INIT -> RTR -> RTS) or create a new QP",
                    _ => "Bring the QP through RESET -> INIT -> RTR -> RTS with ibv_modify_qp first",
                };
                format!("{verb} was called while the QP is in state {}, which does not allow it. {fix}", state_name(*state))
            }
            Diagnostic::CqOverflow => "a completion was lost because its CQ was full (IBV_EVENT_CQ_ERR, QP moved to ERR). \
                 Poll the CQ (ibv_poll_cq) regularly and size it for every outstanding work request (cqe >= max_send_wr + max_recv_wr of its QPs)"
                .to_string(),
            Diagnostic::InvalidRequest(b) => bad_request(b),
            Diagnostic::RetryingForever { peer, dest_qpn } => format!(
                "no response from the peer {peer} QP {dest_qpn:#x} has acknowledged anything for a minute; \
                 retry_cnt 7 retries forever, so this QP keeps retrying and its work requests wait. \
                 Check that the peer is running and reachable, or use a retry_cnt below 7 so that the \
                 work fails with IBV_WC_RETRY_EXC_ERR"
            ),
        };
        format!("QP {qpn:#x}: {what}.")
    }

    /// Whether the diagnostic is queued only the first time on its QP; the others are raised
    /// once per episode by their caller.
    fn once_per_qp(&self) -> bool {
        !matches!(self, Diagnostic::RetryingForever { .. })
    }

    fn count(&self, c: &mut Counters) {
        let f = match self {
            Diagnostic::RnrNoRecvPosted => &mut c.diag_rnr_no_recv,
            Diagnostic::RemoteAccess(KeyFault::Unknown) => &mut c.diag_bad_rkey,
            Diagnostic::RemoteAccess(KeyFault::Stale) => &mut c.diag_stale_rkey,
            Diagnostic::RemoteAccess(KeyFault::WrongPd) => &mut c.diag_rkey_wrong_pd,
            Diagnostic::RemoteAccess(KeyFault::NoPermission) => &mut c.diag_remote_no_permission,
            Diagnostic::RemoteAccess(KeyFault::OutOfBounds) => &mut c.diag_remote_out_of_bounds,
            Diagnostic::QpAccessNotEnabled { .. } => &mut c.diag_qp_access,
            Diagnostic::LocalProtection(KeyFault::Unknown | KeyFault::Stale) => {
                &mut c.diag_bad_lkey
            }
            Diagnostic::LocalProtection(KeyFault::WrongPd) => &mut c.diag_lkey_wrong_pd,
            Diagnostic::LocalProtection(KeyFault::NoPermission) => &mut c.diag_local_no_permission,
            Diagnostic::LocalProtection(KeyFault::OutOfBounds) => &mut c.diag_local_out_of_bounds,
            Diagnostic::WrongState { .. } => &mut c.diag_wrong_state,
            Diagnostic::CqOverflow => &mut c.diag_cq_overflow,
            Diagnostic::InvalidRequest(b) => match b {
                BadRequest::MissingFirst => &mut c.diag_missing_first,
                BadRequest::MissingLast => &mut c.diag_missing_last,
                BadRequest::PacketSize { .. } => &mut c.diag_mtu_mismatch,
                BadRequest::WriteLength => &mut c.diag_write_length,
                BadRequest::MessageTooLong => &mut c.diag_msg_too_long,
                BadRequest::RecvTooSmall => &mut c.diag_recv_too_small,
                BadRequest::AtomicMisaligned => &mut c.diag_atomic_misaligned,
                BadRequest::NoDestRdAtomic => &mut c.diag_no_dest_rd_atomic,
            },
            Diagnostic::RetryingForever { .. } => &mut c.diag_retrying_forever,
        };
        *f += 1;
    }
}

/// What the peer (or this side's setup) did wrong when a request drew a NAK invalid request.
fn bad_request(b: &BadRequest) -> String {
    const NAK: &str = "(NAK invalid request sent, QP moved to ERR)";
    match b {
        BadRequest::MissingFirst => format!(
            "a middle or last packet of a SEND or RDMA WRITE arrived without the first packet of its \
             message {NAK}. The peer broke the opcode sequence: every multi-packet message must be \
             FIRST, MIDDLE..., LAST in consecutive PSNs. Usually the peer QP was re-created or its \
             sq_psn changed in the middle of a message while this QP kept its rq_psn"
        ),
        BadRequest::MissingLast => format!(
            "a new request arrived while a multi-packet SEND or RDMA WRITE still lacked its last \
             packet {NAK}. The peer broke the opcode sequence: it must end each message with its \
             LAST packet before the next one. Usually the peer QP was re-created or its sq_psn \
             changed in the middle of a message while this QP kept its rq_psn"
        ),
        BadRequest::PacketSize { mtu } => format!(
            "a packet's payload does not fit this QP's path MTU of {mtu} bytes {NAK}: FIRST and \
             MIDDLE packets must carry exactly the MTU, ONLY and LAST packets at most the MTU. The \
             peer segments with another path MTU: set the same path_mtu on both QPs \
             (IBV_QP_PATH_MTU when moving to RTR, at most ibv_query_port's active_mtu on either side)"
        ),
        BadRequest::WriteLength => format!(
            "an RDMA WRITE carried another amount of data than the DMA length in its RETH {NAK}: \
             a WRITE_ONLY or last packet ending the message early, a packet longer than what \
             remained, or a pad count that does not fit the length. The peer must send exactly \
             the length it announced; this is a non-conforming or hostile requester"
        ),
        BadRequest::MessageTooLong => format!(
            "an incoming RDMA READ or WRITE asked for more than 2^31 bytes {NAK}. The peer must \
             split transfers into messages of at most the port's max_msg_sz (ibv_query_port)"
        ),
        BadRequest::RecvTooSmall => format!(
            "a SEND arrived that is longer than the receive WR posted for it {NAK}. Post receive \
             WRs whose scatter lists hold the largest message the peer sends (the sum of \
             sge.length), or have the peer send less"
        ),
        BadRequest::AtomicMisaligned => format!(
            "an incoming atomic operation's remote address is not 8-byte aligned {NAK}. The peer's \
             remote_addr for compare-and-swap and fetch-and-add must be a multiple of 8"
        ),
        BadRequest::NoDestRdAtomic => format!(
            "an incoming RDMA READ or atomic was refused because this QP's max_dest_rd_atomic is 0 \
             {NAK}. Set max_dest_rd_atomic (IBV_QP_MAX_DEST_RD_ATOMIC) to at least the peer's \
             max_rd_atomic when moving this QP to RTR"
        ),
    }
}

/// Most diagnostics kept undrained (further ones are not queued; they are still counted).
const MAX_PENDING: usize = 64;

/// Pending diagnostics, deduplicated per (QP, cause).
#[derive(Default)]
pub(crate) struct Diags {
    seen: HashSet<(u32, Diagnostic)>,
    pending: VecDeque<(u32, Diagnostic)>,
}

impl Diags {
    /// Counts `d` on `qpn`; queues it if it is the first of its cause on that QP (or, for a
    /// diagnostic its caller raises once per episode, every time).
    pub fn report(&mut self, ctr: &mut Counters, qpn: u32, d: Diagnostic) {
        d.count(ctr);
        let first = !d.once_per_qp() || self.seen.insert((qpn, d));
        if first && self.pending.len() < MAX_PENDING {
            self.pending.push_back((qpn, d));
        }
    }

    pub fn pop(&mut self) -> Option<(u32, Diagnostic)> {
        self.pending.pop_front()
    }

    /// Forgets a destroyed QP (its number may be reused).
    pub fn forget(&mut self, qpn: u32) {
        self.seen.retain(|(q, _)| *q != qpn);
    }
}
