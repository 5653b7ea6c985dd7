//! Per-device counters. The first block uses rxe's `rdma statistic` names verbatim
//! (`rxe_hw_counters.c`); the second block counts every drop reason of this implementation.

macro_rules! counters {
    ($($(#[$m:meta])* $name:ident,)*) => {
        /// Device counters (monotonic).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub struct Counters { $($(#[$m])* pub $name: u64,)* }
        impl Counters {
            /// `(name, value)` pairs in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($name), self.$name),)*].into_iter()
            }
        }
    };
}

counters! {
    sent_pkts,
    rcvd_pkts,
    duplicate_request,
    out_of_seq_request,
    rcvd_rnr_err,
    send_rnr_err,
    rcvd_seq_err,
    /// PSN-sequence NAKs sent, one per gap (`out_of_seq_request` counts the packets): the
    /// responder's side of `rcvd_seq_err`, as `send_rnr_err` is of `rcvd_rnr_err`. Not in rxe.
    send_seq_err,
    ack_deferred,
    retry_exceeded_err,
    retry_rnr_exceeded_err,
    completer_retry_err,
    send_err,
    link_downed,
    rdma_sends,
    rdma_recvs,
    /// Datagrams whose ICRC did not match (dropped before anything else looked at them).
    icrc_errors,
    /// Datagrams accepted without ICRC verification (IPv4 ID unknown and policy `Trust`, or
    /// `AssumeZeroElseAccept` on a mismatch).
    icrc_unverified,
    /// Datagrams whose IPv4 ID was unknown and verified assuming 0 (policies `Strict`,
    /// `AssumeZeroElseAccept`, `RecoverId`).
    icrc_id_assumed,
    /// Truncated / malformed transport headers.
    malformed,
    /// Reserved or unsupported opcodes, or an opcode whose transport does not match the QP.
    bad_opcode,
    /// Destination IP not ours.
    bad_dst,
    /// No such destination QP (or QP0/QP1).
    no_qp,
    /// QP not in a state that accepts the packet.
    bad_state,
    /// Source address does not match the connected QP's path.
    bad_src,
    /// P_Key mismatch (port `bad_pkey_cntr`).
    bad_pkey,
    /// UD Q_Key mismatch (port `qkey_viol_cntr`).
    qkey_violation,
    /// Responses the completer ignored (stale, unexpected).
    resp_ignored,
    /// Requests dropped silently (UC/UD errors, class D drops, duplicates without resource).
    req_dropped,
    /// Responder output jobs dropped because the per-QP response queue was full.
    resp_queue_full,
    /// Completions lost to a full CQ.
    cq_overflow,
    /// Local ACK timer expiries that started a retry (`completer_retry_err` counts these and
    /// the PSN-sequence NAKs together, as rxe does).
    retry_timeouts,
    /// Diagnostics (`crate::diag`), every occurrence: a SEND with no receive posted (RNR NAK).
    diag_rnr_no_recv,
    /// Inbound RDMA with an unknown rkey.
    diag_bad_rkey,
    /// Inbound RDMA with the rkey of a deregistered region, or of a memory window not bound
    /// with it (never bound, invalidated, or bound again with another key byte).
    diag_stale_rkey,
    /// Inbound RDMA with the rkey of a region in another PD.
    diag_rkey_wrong_pd,
    /// Inbound RDMA on a region without the remote access it needs.
    diag_remote_no_permission,
    /// Inbound RDMA outside its region (or memory window).
    diag_remote_out_of_bounds,
    /// Inbound RDMA through a type 2 memory window bound to another QP.
    diag_rkey_other_qp,
    /// Inbound RDMA on a QP whose `qp_access_flags` lack the needed flag.
    diag_qp_access,
    /// Local SGE with an unknown or stale lkey.
    diag_bad_lkey,
    /// Local SGE with the lkey of a region in another PD.
    diag_lkey_wrong_pd,
    /// Local SGE on a region without LOCAL_WRITE where data is written.
    diag_local_no_permission,
    /// Local SGE outside its region.
    diag_local_out_of_bounds,
    /// A verb used on a QP in the wrong state.
    diag_wrong_state,
    /// A completion lost to a full CQ, per QP.
    diag_cq_overflow,
    /// NAK invalid request: a MIDDLE/LAST packet without its FIRST.
    diag_missing_first,
    /// NAK invalid request: a new request before the LAST packet of the previous message.
    diag_missing_last,
    /// NAK invalid request: a payload the path MTU does not allow.
    diag_mtu_mismatch,
    /// NAK invalid request: an RDMA WRITE whose payload does not add up to its RETH length.
    diag_write_length,
    /// NAK invalid request: an RDMA READ/WRITE of more than 2^31 bytes.
    diag_msg_too_long,
    /// NAK invalid request: a SEND longer than its receive WR.
    diag_recv_too_small,
    /// NAK invalid request: an atomic at an address not 8-byte aligned.
    diag_atomic_misaligned,
    /// NAK invalid request: an ATOMIC WRITE of other than 8 bytes.
    diag_atomic_write_length,
    /// NAK invalid request: a READ/atomic on a QP with `max_dest_rd_atomic` 0.
    diag_no_dest_rd_atomic,
    /// A QP with `retry_cnt` 7 made no progress for a minute (once per stall).
    diag_retrying_forever,
    /// `ibv_modify_qp` or `ibv_create_ah` refused an address vector (no GRH, bad port, empty
    /// or link-local source GID, mixed address families).
    diag_bad_av,
    /// The driver reported a datagram that could not leave the host (destination `::`, or
    /// the kernel refused it); the driver counts the datagrams (`tx_unroutable`).
    diag_unroutable,
    /// MADs QP1 received and kept for the connection manager (`NicConfig::gsi`).
    gsi_rcvd,
    /// MADs QP1 sent.
    gsi_sent,
    /// MADs dropped at QP1: a receive or send queue full.
    gsi_dropped,
    /// Packets for QP1 whose payload is shorter than a 256-byte MAD (dropped, as the MAD layer
    /// takes only whole MADs). Not in rxe.
    gsi_truncated,
}
