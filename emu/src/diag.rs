//! Diagnostics that teach: the classic verbs mistakes, recorded on the side where they happen,
//! once per (QP, cause), with a message that says what happened and what the program should do.
//! Every NAK a responder sends for a mistake (invalid request, remote access, remote operational
//! error, RNR) has its cause here; a PSN-sequence NAK reports a loss, no mistake, and is only
//! counted (`send_seq_err`). [`Diagnostic::RetryingForever`] is no mistake either, but a stall
//! that would otherwise be silent: it is reported once per stall.
//! The driver drains them with [`crate::Nic::poll_diagnostic`]; every occurrence (not only the
//! first) is counted in the `diag_*` [`crate::Counters`].

use crate::counters::Counters;
use crate::verbs::{Gid, QpState};
use crate::Error;
use std::collections::{HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

/// The QP number of a diagnostic that concerns no QP (an address vector refused by
/// `ibv_create_ah`): its message has no `QP 0x..:` prefix.
pub const NO_QP: u32 = u32::MAX;

/// What is wrong with an address vector given to `ibv_modify_qp` (`IBV_QP_AV`) or
/// `ibv_create_ah`, in the order the kernel checks it on a RoCE port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AvProblem {
    /// `port_num` is not the device's one port (`rdma_check_ah_attr`: EINVAL).
    BadPort {
        /// The port number given.
        port: u8,
    },
    /// `is_global` is 0: a RoCE address vector needs a GRH (`rdma_check_ah_attr`: EINVAL).
    NoGrh,
    /// `grh.sgid_index` names an empty GID table entry (the GID cache: ENODATA).
    EmptySourceGid {
        /// The index given.
        index: u8,
    },
    /// `grh.sgid_index` names the link-local `fe80::` GID, which this NIC lists (as rxe does)
    /// but cannot send from (EINVAL; emu README, deviation 18).
    LinkLocalSource {
        /// The index given.
        index: u8,
    },
    /// Source and destination GIDs of different address families, e.g. an IPv4 source GID
    /// and a zero destination GID (address resolution: EINVAL).
    FamilyMismatch {
        /// The source GID index.
        index: u8,
        /// The source GID.
        sgid: Gid,
        /// The destination GID.
        dgid: Gid,
    },
}

impl AvProblem {
    /// The error the verb returns (errno as the kernel's).
    pub fn error(&self) -> Error {
        match self {
            AvProblem::EmptySourceGid { .. } => Error::NoData,
            _ => Error::Invalid,
        }
    }
}

/// Why a datagram could not leave the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unroutable {
    /// Its destination is the unspecified address (GID `::`, or `::ffff:0.0.0.0`), which a
    /// socket would deliver to this host itself: it is not sent.
    Unspecified,
    /// The kernel refused to send it (`sendmmsg`: ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL,
    /// EINVAL, …).
    Refused {
        /// The errno.
        errno: i32,
    },
}

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
    /// The access reaches outside the region (or the memory window).
    OutOfBounds,
    /// A type 2 memory window bound to another QP than the one the request came on.
    WindowOfAnotherQp,
    /// A memory window's key, but the window is not bound with it: never bound, invalidated
    /// (LOCAL_INV, SEND with invalidate) or bound again with another key byte. Counted with
    /// [`KeyFault::Stale`] (`diag_stale_rkey`).
    StaleWindow,
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
    /// An RDMA READ, atomic, FLUSH or ATOMIC WRITE on a QP whose `max_dest_rd_atomic` is 0.
    NoDestRdAtomic,
    /// An ATOMIC WRITE whose RETH length or payload is not exactly 8 bytes (IBA 1.5).
    AtomicWriteLength,
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
    /// An address vector was refused by `verb` (`ibv_modify_qp` or `ibv_create_ah`); reported
    /// at the call, with [`NO_QP`] for `ibv_create_ah`.
    AddressVector {
        /// The verb.
        verb: &'static str,
        /// What is wrong.
        problem: AvProblem,
        /// The GID of the device's IP address (GID index 1), the one to use.
        ip_gid: Gid,
    },
    /// The local ACK timer expired `retry_cnt` + 1 times without the peer acknowledging
    /// anything: the work request completed with `IBV_WC_RETRY_EXC_ERR`, the QP went to ERR.
    RetryExceeded {
        /// The peer's address.
        peer: IpAddr,
        /// The peer's QP number.
        dest_qpn: u32,
        /// The QP's `retry_cnt`.
        retry_cnt: u8,
    },
    /// The peer answered RNR more often than `rnr_retry` allows: the work request completed
    /// with `IBV_WC_RNR_RETRY_EXC_ERR`, the QP went to ERR.
    RnrRetryExceeded {
        /// The peer's address.
        peer: IpAddr,
        /// The peer's QP number.
        dest_qpn: u32,
        /// The QP's `rnr_retry`.
        rnr_retry: u8,
    },
    /// A datagram of this QP could not leave the host (reported by the driver, which sends).
    Unroutable {
        /// Its destination.
        dst: IpAddr,
        /// Why.
        cause: Unroutable,
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
            Diagnostic::RemoteAccess(KeyFault::Stale | KeyFault::StaleWindow) => "diag_stale_rkey",
            Diagnostic::RemoteAccess(KeyFault::WrongPd) => "diag_rkey_wrong_pd",
            Diagnostic::RemoteAccess(KeyFault::NoPermission) => "diag_remote_no_permission",
            Diagnostic::RemoteAccess(KeyFault::OutOfBounds) => "diag_remote_out_of_bounds",
            Diagnostic::RemoteAccess(KeyFault::WindowOfAnotherQp) => "diag_rkey_other_qp",
            Diagnostic::QpAccessNotEnabled { .. } => "diag_qp_access",
            Diagnostic::LocalProtection(
                KeyFault::Unknown | KeyFault::Stale | KeyFault::StaleWindow,
            ) => "diag_bad_lkey",
            Diagnostic::LocalProtection(KeyFault::WrongPd | KeyFault::WindowOfAnotherQp) => {
                "diag_lkey_wrong_pd"
            }
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
                BadRequest::AtomicWriteLength => "diag_atomic_write_length",
            },
            Diagnostic::RetryingForever { .. } => "diag_retrying_forever",
            Diagnostic::AddressVector { .. } => "diag_bad_av",
            Diagnostic::RetryExceeded { .. } => "retry_exceeded_err",
            Diagnostic::RnrRetryExceeded { .. } => "retry_rnr_exceeded_err",
            Diagnostic::Unroutable { .. } => "diag_unroutable",
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
                    KeyFault::OutOfBounds => "outside the bounds of the memory region of its rkey (or of its memory window)",
                    KeyFault::WindowOfAnotherQp => "through a type 2 memory window bound to another QP",
                    KeyFault::StaleWindow => "with the rkey of a memory window that is not bound with that key (never bound, invalidated by LOCAL_INV or a SEND with invalidate, or bound again with another key byte)",
                };
                let fix = match f {
                    KeyFault::Unknown | KeyFault::Stale => "Send the peer the current mr->rkey (and address) of a live ibv_reg_mr region, and keep the region registered while the peer uses it",
                    KeyFault::WrongPd => "Register the memory region in the same PD as the QP (ibv_reg_mr(qp->pd, ...))",
                    KeyFault::NoPermission => "Register the region with IBV_ACCESS_REMOTE_WRITE / IBV_ACCESS_REMOTE_READ / IBV_ACCESS_REMOTE_ATOMIC as the peer's operations need (remote write and atomics also need IBV_ACCESS_LOCAL_WRITE)",
                    KeyFault::OutOfBounds => "Keep remote_addr .. remote_addr+length inside [mr->addr, mr->addr+mr->length) of the region the peer advertised (for a memory window: inside the addr and length it was bound with)",
                    KeyFault::WindowOfAnotherQp => "Give each peer the rkey of a window bound (IBV_WR_BIND_MW) on the QP connected to it",
                    KeyFault::StaleWindow => "Bind the window (IBV_WR_BIND_MW / ibv_bind_mw) before the peer uses it and send the peer the rkey of that bind; an invalidated rkey never works again",
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
                    KeyFault::Unknown | KeyFault::Stale | KeyFault::StaleWindow => "an lkey that is not a live memory region of this device (wrong or deregistered)",
                    KeyFault::WrongPd | KeyFault::WindowOfAnotherQp => "the lkey of a memory region in another protection domain than this QP",
                    KeyFault::NoPermission => "a region registered without IBV_ACCESS_LOCAL_WRITE, which incoming data needs",
                    KeyFault::OutOfBounds => "an address/length outside its memory region",
                };
                let fix = match f {
                    KeyFault::Unknown | KeyFault::Stale | KeyFault::StaleWindow => "Use mr->lkey of a region that stays registered until the work request completes",
                    KeyFault::WrongPd | KeyFault::WindowOfAnotherQp => "Register the buffer in the QP's PD: the QP, its memory regions and address handles must all come from the same ibv_alloc_pd",
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
            Diagnostic::AddressVector {
                verb,
                problem,
                ip_gid,
            } => av_problem(verb, problem, ip_gid),
            Diagnostic::RetryExceeded {
                peer,
                dest_qpn,
                retry_cnt,
            } => format!(
                "no ACK came from the peer {peer} QP {dest_qpn:#x} through retry_cnt {retry_cnt} \
                 retransmissions (IBV_WC_RETRY_EXC_ERR, QP moved to ERR). Check that the peer is \
                 running and reachable at that address, that its QP is in RTR or RTS, and that each \
                 side was given the other's QPN, GID and PSNs"
            ),
            Diagnostic::RnrRetryExceeded {
                peer,
                dest_qpn,
                rnr_retry,
            } => format!(
                "the peer {peer} QP {dest_qpn:#x} answered RNR (no receive WR posted) more often \
                 than rnr_retry {rnr_retry} allows (IBV_WC_RNR_RETRY_EXC_ERR, QP moved to ERR). \
                 The peer must post receive WRs before this side sends to it; rnr_retry 7 retries \
                 forever"
            ),
            Diagnostic::Unroutable { dst, cause } => unroutable(dst, cause),
        };
        if qpn == NO_QP {
            format!("{what}.")
        } else {
            format!("QP {qpn:#x}: {what}.")
        }
    }

    /// What decides "the same cause" for reporting once per QP: the address, GIDs and errno
    /// of an address vector or unroutable datagram do not (a UD QP sending to many bad
    /// destinations is told once).
    fn dedup_key(&self) -> Diagnostic {
        match *self {
            Diagnostic::AddressVector {
                verb,
                problem: AvProblem::FamilyMismatch { .. },
                ..
            } => Diagnostic::AddressVector {
                verb,
                problem: AvProblem::FamilyMismatch {
                    index: 0,
                    sgid: [0; 16],
                    dgid: [0; 16],
                },
                ip_gid: [0; 16],
            },
            Diagnostic::AddressVector { verb, problem, .. } => Diagnostic::AddressVector {
                verb,
                problem,
                ip_gid: [0; 16],
            },
            Diagnostic::Unroutable { cause, .. } => Diagnostic::Unroutable {
                dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                cause: match cause {
                    Unroutable::Unspecified => Unroutable::Unspecified,
                    Unroutable::Refused { .. } => Unroutable::Refused { errno: 0 },
                },
            },
            d => d,
        }
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
            Diagnostic::RemoteAccess(KeyFault::Stale | KeyFault::StaleWindow) => {
                &mut c.diag_stale_rkey
            }
            Diagnostic::RemoteAccess(KeyFault::WrongPd) => &mut c.diag_rkey_wrong_pd,
            Diagnostic::RemoteAccess(KeyFault::NoPermission) => &mut c.diag_remote_no_permission,
            Diagnostic::RemoteAccess(KeyFault::OutOfBounds) => &mut c.diag_remote_out_of_bounds,
            Diagnostic::RemoteAccess(KeyFault::WindowOfAnotherQp) => &mut c.diag_rkey_other_qp,
            Diagnostic::QpAccessNotEnabled { .. } => &mut c.diag_qp_access,
            Diagnostic::LocalProtection(
                KeyFault::Unknown | KeyFault::Stale | KeyFault::StaleWindow,
            ) => &mut c.diag_bad_lkey,
            Diagnostic::LocalProtection(KeyFault::WrongPd | KeyFault::WindowOfAnotherQp) => {
                &mut c.diag_lkey_wrong_pd
            }
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
                BadRequest::AtomicWriteLength => &mut c.diag_atomic_write_length,
            },
            Diagnostic::RetryingForever { .. } => &mut c.diag_retrying_forever,
            Diagnostic::AddressVector { .. } => &mut c.diag_bad_av,
            Diagnostic::RetryExceeded { .. } => &mut c.retry_exceeded_err,
            Diagnostic::RnrRetryExceeded { .. } => &mut c.retry_rnr_exceeded_err,
            Diagnostic::Unroutable { .. } => &mut c.diag_unroutable,
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
             remote_addr for compare-and-swap, fetch-and-add and ATOMIC WRITE must be a multiple \
             of 8"
        ),
        BadRequest::NoDestRdAtomic => format!(
            "an incoming RDMA READ or atomic was refused because this QP's max_dest_rd_atomic is 0 \
             {NAK}. Set max_dest_rd_atomic (IBV_QP_MAX_DEST_RD_ATOMIC) to at least the peer's \
             max_rd_atomic when moving this QP to RTR"
        ),
        BadRequest::AtomicWriteLength => format!(
            "an incoming ATOMIC WRITE did not carry exactly 8 bytes (its RETH length and payload \
             must both be 8) {NAK}. This is a non-conforming or hostile requester"
        ),
    }
}

/// The diagnostic of an address vector `verb` refused on a device with GID table `gids`.
pub(crate) fn av_refused(verb: &'static str, problem: AvProblem, gids: &[Gid]) -> Diagnostic {
    Diagnostic::AddressVector {
        verb,
        problem,
        ip_gid: gids.get(1).copied().unwrap_or_default(),
    }
}

/// A GID as an address (`::ffff:a.b.c.d` for IPv4-mapped ones, as `ibv_devinfo` prints it).
fn gid_str(g: &Gid) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}

/// What is wrong with an address vector and what to give instead.
fn av_problem(verb: &str, p: &AvProblem, ip_gid: &Gid) -> String {
    let ip = gid_str(ip_gid);
    let what = match p {
        AvProblem::BadPort { port } => format!(
            "ah_attr.port_num is {port}, and this device has one port (EINVAL, as the kernel's \
             rdma_check_ah_attr). Set ah_attr.port_num = 1"
        ),
        AvProblem::NoGrh => format!(
            "ah_attr.is_global is 0, and on a RoCE port every address vector needs a GRH (EINVAL, \
             as the kernel's rdma_check_ah_attr). Set ah_attr.is_global = 1, ah_attr.grh.dgid to \
             the peer's GID and ah_attr.grh.sgid_index = 1 (GID {ip}): ibv_*_pingpong need -g 1, \
             perftest -x 1"
        ),
        AvProblem::EmptySourceGid { index } => format!(
            "ah_attr.grh.sgid_index {index} is an empty GID table entry (ENODATA, as the kernel's \
             GID cache); this port lists GID 0 (link-local fe80::) and GID 1 ({ip}). Use \
             sgid_index 1"
        ),
        AvProblem::LinkLocalSource { index } => format!(
            "ah_attr.grh.sgid_index {index} is the port's link-local GID (fe80::), which this \
             emulated NIC lists as rxe does but cannot send from: it sends from its IP address \
             only (EINVAL). Use GID index 1 ({ip}): -g 1 for ibv_*_pingpong, -x 1 for perftest, \
             FI_VERBS_GID_IDX=1 for libfabric, UCX_IB_GID_INDEX=1 for UCX"
        ),
        AvProblem::FamilyMismatch { dgid, .. } if *dgid == [0; 16] => {
            "ah_attr.grh.dgid is :: (all zero), so the peer's GID was never filled in (EINVAL, as \
             the kernel's address resolution). Set it to the peer's GID: for an IPv4 peer its GID \
             1, ::ffff:a.b.c.d"
                .to_string()
        }
        AvProblem::FamilyMismatch { index, sgid, dgid } => format!(
            "source GID {index} ({}) and destination GID {} are of different address families \
             (EINVAL, as the kernel's address resolution). Give the peer's GID of this GID's \
             family: for an IPv4 peer its GID 1, ::ffff:a.b.c.d, with sgid_index 1",
            gid_str(sgid),
            gid_str(dgid)
        ),
    };
    format!("{verb} refused the address vector: {what}")
}

/// The symbolic name of the errnos a send reports for a destination.
fn errno_name(e: i32) -> String {
    let n = match e {
        1 => "EPERM",
        13 => "EACCES",
        22 => "EINVAL",
        97 => "EAFNOSUPPORT",
        99 => "EADDRNOTAVAIL",
        101 => "ENETUNREACH",
        113 => "EHOSTUNREACH",
        _ => return format!("errno {e}"),
    };
    n.to_string()
}

fn unroutable(dst: &IpAddr, cause: &Unroutable) -> String {
    match cause {
        Unroutable::Unspecified => format!(
            "a datagram to {dst} was not sent: its destination GID is :: (unspecified), so \
             nothing it sends can reach a peer. Set the address vector's grh.dgid to the peer's \
             GID (for an IPv4 peer its GID 1, ::ffff:a.b.c.d)"
        ),
        Unroutable::Refused { errno } => {
            let desc = std::io::Error::from_raw_os_error(*errno).to_string();
            let desc = desc.split(" (os error").next().unwrap_or_default();
            format!(
                "a datagram to {dst} could not leave the host: sendmmsg failed with {} ({desc}), \
                 and every datagram to it is lost. Check that the address vector's dgid is the \
                 peer's GID and that this host has a route to it (ip route get {dst})",
                errno_name(*errno)
            )
        }
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
        let first = !d.once_per_qp() || self.seen.insert((qpn, d.dedup_key()));
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
