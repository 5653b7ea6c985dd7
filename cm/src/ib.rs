//! The IB CM connection (kernel `struct cm_id_private`, IBA vol 1 §12.9 state machine): its
//! state, the values negotiated by REQ/REP, the address vector, the one outstanding MAD with
//! its retransmission timer, and the message formatting of cm.c (`cm_format_*`).
use crate::Instant;
use roce_emu::Gid;
use roce_wire::cm::{self, drep, dreq, mra, path, rej, rtu, Message, MsgResponse, RejReason};
use std::net::IpAddr;

/// `CMA_CM_RESPONSE_TIMEOUT`: REQ Remote/Local CM Response Timeout.
pub(crate) const CMA_CM_RESPONSE_TIMEOUT: u8 = 20;
/// `CMA_MAX_CM_RETRIES`.
pub(crate) const CMA_MAX_CM_RETRIES: u8 = 15;
/// `CMA_IBOE_PACKET_LIFETIME` (6.1): the RoCE path's packet life time.
pub(crate) const CMA_IBOE_PACKET_LIFETIME: u8 = 18;
/// rxe's `local_ca_ack_delay` (`RXE_LOCAL_CA_ACK_DELAY`): the REP's Target ACK Delay.
pub(crate) const CA_ACK_DELAY: u8 = 15;
/// `CMA_CM_MRA_SETTING` without the delay flag: the Service Timeout of a (delayed) MRA.
pub(crate) const CMA_MRA_SERVICE_TIMEOUT: u8 = 24;
/// Hop limit of a route (Linux's default IPv4 TTL / IPv6 hop limit).
pub(crate) const DEFAULT_HOP_LIMIT: u8 = 64;

/// `cm_convert_to_ms`: IBA_time(t) = 4.096 µs × 2^t, approximated as `1 << max(t − 8, 0)` ms.
pub(crate) fn convert_to_ms(t: u8) -> u64 {
    1u64 << (t.min(31) as u32).saturating_sub(8)
}

/// `cm_ack_timeout`: the Local ACK Timeout from the CA's ACK delay and the packet life time.
pub(crate) fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let mut t = packet_life_time as u32 + 1;
    let d = ca_ack_delay as u32;
    if t >= d {
        t += (d + 1 >= t) as u32;
    } else {
        t = d + (t + 1 >= d) as u32;
    }
    t.min(31) as u8
}

/// The ib_cm states (`enum ib_cm_state`; LAP states are not kept: LAP is dropped on RoCE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmState {
    Idle,
    ReqSent,
    /// Transient in the kernel (between the REQ and the CONNECT_REQUEST upcall, which sets the
    /// delayed MRA); a request is in `MraReqSent` by the time any call or MAD can see it.
    #[allow(dead_code)]
    ReqRcvd,
    MraReqSent,
    MraReqRcvd,
    RepSent,
    RepRcvd,
    MraRepSent,
    MraRepRcvd,
    Established,
    DreqSent,
    DreqRcvd,
    Timewait,
    SidrReqSent,
    SidrReqRcvd,
}

/// The address vector of a connection (`struct cm_av`, RoCE part).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Av {
    /// Our address (source of MADs, the AH's source GID).
    pub local: IpAddr,
    /// The peer's address (destination of MADs, the AH's DGID).
    pub peer: IpAddr,
    pub flow_label: u32,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// The QP's Local ACK Timeout (`av.timeout`), also the timewait base.
    pub timeout: u8,
}

impl Av {
    pub(crate) fn dgid(&self) -> Gid {
        roce_emu::gid_from_ip(self.peer)
    }
}

/// The one outstanding MAD of a connection (`cm_id_priv->msg`) and its timer: the MAD layer
/// re-sends it every `timeout_ms` until `retries_left` is spent (mad.c `retry_send`).
#[derive(Clone, Debug)]
pub(crate) struct Retx {
    pub mad: [u8; 256],
    /// The state the message was sent in (`msg->context[1]`): a timeout reports an error only
    /// while the connection is still in it (`cm_process_send_error`).
    pub sent_in: CmState,
    pub timeout_ms: u64,
    pub retries_left: u8,
    pub deadline: Instant,
}

/// An IB CM connection.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    pub state: CmState,
    pub local_id: u32,
    /// The peer's comm ID (0 until known: `cm_acquire_id` matches on it).
    pub remote_id: u32,
    pub remote_ca_guid: u64,
    pub remote_qpn: u32,
    pub local_qpn: u32,
    /// In the kernel's remote-ID / remote-QPN tables (duplicate and stale REQ/REP detection);
    /// left on entering timewait or idle (`cm_remove_remote`).
    pub remote_inserted: bool,
    pub service_id: u64,
    /// The TID replies echo, and the active side's own messages carry.
    pub tid: u64,
    /// This side's retransmission timeout for REP / DREQ (`cm_id_priv->timeout_ms`).
    pub timeout_ms: u64,
    pub max_cm_retries: u8,
    /// Service Timeout of the (delayed) MRA this side would send.
    pub service_timeout: u8,
    pub initiator_depth: u8,
    pub responder_resources: u8,
    /// IB MTU enum of the path.
    pub path_mtu: u8,
    /// Send PSN: the Starting PSN the peer sent.
    pub sq_psn: u32,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub av: Av,
    /// Private data kept for a re-sent RTU or MRA (`cm_set_private_data`).
    pub private_data: Vec<u8>,
    pub retx: Option<Retx>,
    pub timewait_until: Option<Instant>,
    /// The ECE `attr_mod` this side's REQ, REP or SIDR_REP (success) carries in the MAD
    /// header's AttributeModifier (`cm_format_mad_ece_hdr`); 0 for every other message.
    pub ece_attr_mod: u32,
}

impl Conn {
    pub(crate) fn new(local_id: u32, av: Av) -> Conn {
        Conn {
            state: CmState::Idle,
            local_id,
            remote_id: 0,
            remote_ca_guid: 0,
            remote_qpn: 0,
            local_qpn: 0,
            remote_inserted: false,
            service_id: 0,
            tid: 0,
            timeout_ms: 0,
            max_cm_retries: CMA_MAX_CM_RETRIES,
            service_timeout: CMA_MRA_SERVICE_TIMEOUT,
            initiator_depth: 0,
            responder_resources: 0,
            path_mtu: 3,
            sq_psn: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            av,
            private_data: Vec::new(),
            retx: None,
            timewait_until: None,
            ece_attr_mod: 0,
        }
    }

    /// `cm_reset_to_idle`.
    pub(crate) fn reset_to_idle(&mut self) {
        self.state = CmState::Idle;
        self.remote_inserted = false;
        self.retx = None;
    }

    /// `cm_enter_timewait`: out of the remote tables, TIMEWAIT for IBA_time(av.timeout).
    pub(crate) fn enter_timewait(&mut self, now: Instant) {
        self.remote_inserted = false;
        self.retx = None;
        self.state = CmState::Timewait;
        self.timewait_until = Some(now.add_nanos(convert_to_ms(self.av.timeout) * 1_000_000));
    }

    /// `cm_format_rej`: Local Comm ID 0 in REQ_RCVD, Message Rejected by state.
    pub(crate) fn rej(&self, state: CmState, reason: RejReason, ari: &[u8], pd: &[u8]) -> Message {
        let (local, msg) = match state {
            CmState::ReqRcvd => (0, MsgResponse::Req),
            CmState::MraReqSent => (self.local_id, MsgResponse::Req),
            CmState::RepRcvd | CmState::MraRepSent => (self.local_id, MsgResponse::Rep),
            _ => (self.local_id, MsgResponse::Other),
        };
        let mut r = rej::Repr::new(local, self.remote_id, reason, &[]).unwrap_or_else(empty_rej);
        r.message_rejected = msg;
        copy_into(&mut r.private_data, pd);
        let n = copy_into(&mut r.ari, ari);
        r.reject_info_length = n as u8;
        Message::Rej(r)
    }

    /// `cm_format_mra`.
    pub(crate) fn mra(&self, msg: MsgResponse) -> Message {
        let mut r = mra::Repr {
            local_comm_id: self.local_id,
            remote_comm_id: self.remote_id,
            message_mraed: msg,
            service_timeout: self.service_timeout,
            private_data: [0; mra::PRIVATE_DATA_LEN],
        };
        copy_into(&mut r.private_data, &self.private_data);
        Message::Mra(r)
    }

    /// `cm_format_rtu`.
    pub(crate) fn rtu(&self) -> Message {
        let mut r = rtu::Repr::new(self.local_id, self.remote_id);
        copy_into(&mut r.private_data, &self.private_data);
        Message::Rtu(r)
    }

    /// `cm_format_dreq`: Remote QPN/EECN = the peer's QPN.
    pub(crate) fn dreq(&self) -> Message {
        Message::Dreq(dreq::Repr::new(
            self.local_id,
            self.remote_id,
            self.remote_qpn,
        ))
    }

    /// `cm_format_drep`.
    pub(crate) fn drep(&self) -> Message {
        Message::Drep(drep::Repr::new(self.local_id, self.remote_id))
    }
}

fn empty_rej() -> rej::Repr {
    rej::Repr {
        local_comm_id: 0,
        remote_comm_id: 0,
        message_rejected: MsgResponse::Req,
        reason: RejReason::ConsumerDefined,
        reject_info_length: 0,
        ari: [0; rej::ARI_LEN],
        private_data: [0; rej::PRIVATE_DATA_LEN],
    }
}

/// Copies as much of `src` as fits; returns the count.
pub(crate) fn copy_into(dst: &mut [u8], src: &[u8]) -> usize {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
    n
}

/// `cm_issue_rej`: a REJ to a message that matched no usable connection, built from the
/// received one (comm IDs swapped from its first two words, TID echoed).
pub(crate) fn issue_rej(
    rcv_local: u32,
    rcv_remote: u32,
    reason: RejReason,
    msg: MsgResponse,
) -> Message {
    let mut r = empty_rej();
    r.local_comm_id = rcv_remote;
    r.remote_comm_id = rcv_local;
    r.reason = reason;
    r.message_rejected = msg;
    Message::Rej(r)
}

/// `cm_issue_drep`: the DREP for a DREQ that matched no connection.
pub(crate) fn issue_drep(d: &dreq::Repr) -> Message {
    Message::Drep(drep::Repr::new(d.remote_comm_id, d.local_comm_id))
}

/// The IB MTU enum of a byte count, rounding down, at least 256 (`iboe_get_mtu`).
pub(crate) fn mtu_enum(bytes: u32) -> u8 {
    [4096, 2048, 1024, 512]
        .into_iter()
        .find(|&m| m <= bytes)
        .and_then(cm::mtu_enum)
        .unwrap_or(1)
}

/// The primary path of a REQ as `cm_format_req` fills it on RoCE: permissive LIDs (the hop
/// limit exceeds 1), RoCEv2 GIDs, rate 0, SL 0, not subnet-local, and Local ACK Timeout
/// `cm_ack_timeout(ca_ack_delay, packet_life_time)`, which is 19 with rxe.
pub(crate) fn req_path(av: &Av) -> path::Repr {
    path::Repr {
        local_port_lid: path::PERMISSIVE_LID,
        remote_port_lid: path::PERMISSIVE_LID,
        local_port_gid: roce_emu::gid_from_ip(av.local),
        remote_port_gid: av.dgid(),
        flow_label: av.flow_label & 0xF_FFFF,
        packet_rate: 0,
        traffic_class: av.traffic_class,
        hop_limit: av.hop_limit,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: ack_timeout(CA_ACK_DELAY, CMA_IBOE_PACKET_LIFETIME),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn kernel_arithmetic() {
        assert_eq!(ack_timeout(15, 18), 19);
        assert_eq!(ack_timeout(15, 16), 17);
        assert_eq!(ack_timeout(20, 1), 20);
        assert_eq!(ack_timeout(0, 31), 31);
        assert_eq!(convert_to_ms(18), 1024);
        assert_eq!(convert_to_ms(19), 2048);
        assert_eq!(convert_to_ms(20), 4096);
        assert_eq!(convert_to_ms(24), 65536);
        assert_eq!(convert_to_ms(3), 1);
        assert_eq!(convert_to_ms(255), 1 << 23);
        assert_eq!(
            (
                mtu_enum(1024),
                mtu_enum(4096),
                mtu_enum(1500),
                mtu_enum(100)
            ),
            (3, 5, 3, 1)
        );
    }
}
