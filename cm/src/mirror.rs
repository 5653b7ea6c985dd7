//! A mirror of each connection's farewell, for a device shared by several processes: what
//! `rdma_destroy_id` would send for the connection if the process died now.
//!
//! The kernel destroys a dead process's rdma_cm ids itself (`cm_destroy_id`, rdma-cm-notes
//! §5.1), so the peer of a killed program gets a DREQ or a REJ at once. Here the CM lives in
//! the process, so whoever outlives it (the shared device's steering helper) keeps a mirror of
//! each connection's facts ([`ConnMirror`], fed from [`Endpoint::poll_mirror`]) and sends
//! [`farewell`] for each when the process is gone. Records go as soon as the connection
//! leaves the states that send something (a process that destroyed its ids leaves none).
use crate::ib::{self, CmState, Conn};
use crate::rdma::send_farewell;
use crate::{Endpoint, Id, Instant, MadOut};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A connection's ib_cm state, as far as its farewell depends on it (states that send the
/// same bytes are one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorState {
    /// REQ_SENT, MRA_REQ_RCVD: REJ 4 (timeout) with the CA GUID as ARI.
    ReqSent,
    /// REQ_RCVD, MRA_REQ_SENT (not accepted yet): REJ 28, Message Rejected = REQ.
    ReqRcvd,
    /// REP_RCVD, MRA_REP_SENT (no RTU yet): REJ 28, Message Rejected = REP.
    RepRcvd,
    /// REP_SENT, MRA_REP_RCVD (no RTU yet): REJ 28, Message Rejected = other.
    RepSent,
    /// ESTABLISHED: one DREQ.
    Established,
    /// DREQ_RCVD (not answered): DREP.
    DreqRcvd,
    /// SIDR_REQ_RCVD (not answered): SIDR_REP status 2.
    SidrReqRcvd,
}

const STATE_NAMES: [(MirrorState, &str); 7] = [
    (MirrorState::ReqSent, "req-sent"),
    (MirrorState::ReqRcvd, "req-rcvd"),
    (MirrorState::RepRcvd, "rep-rcvd"),
    (MirrorState::RepSent, "rep-sent"),
    (MirrorState::Established, "established"),
    (MirrorState::DreqRcvd, "dreq-rcvd"),
    (MirrorState::SidrReqRcvd, "sidr-req-rcvd"),
];

impl MirrorState {
    fn of(s: CmState) -> Option<MirrorState> {
        Some(match s {
            CmState::ReqSent | CmState::MraReqRcvd => MirrorState::ReqSent,
            CmState::ReqRcvd | CmState::MraReqSent => MirrorState::ReqRcvd,
            CmState::RepRcvd | CmState::MraRepSent => MirrorState::RepRcvd,
            CmState::RepSent | CmState::MraRepRcvd => MirrorState::RepSent,
            CmState::Established => MirrorState::Established,
            CmState::DreqRcvd => MirrorState::DreqRcvd,
            CmState::SidrReqRcvd => MirrorState::SidrReqRcvd,
            _ => return None,
        })
    }

    fn cm_state(self) -> CmState {
        match self {
            MirrorState::ReqSent => CmState::ReqSent,
            MirrorState::ReqRcvd => CmState::MraReqSent,
            MirrorState::RepRcvd => CmState::RepRcvd,
            MirrorState::RepSent => CmState::RepSent,
            MirrorState::Established => CmState::Established,
            MirrorState::DreqRcvd => CmState::DreqRcvd,
            MirrorState::SidrReqRcvd => CmState::SidrReqRcvd,
        }
    }

    /// The state's name in [`ConnMirror`]'s text form (`established`, `req-sent` …).
    pub fn name(self) -> &'static str {
        STATE_NAMES
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("", |(_, n)| n)
    }
}

/// What sending a connection's farewell takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnMirror {
    /// The farewell to send.
    pub state: MirrorState,
    /// Our comm ID (the key of the record).
    pub local_comm_id: u32,
    /// The peer's comm ID (its Request ID for `SidrReqRcvd`).
    pub remote_comm_id: u32,
    /// The peer's QPN (a DREQ's Remote QPN/EECN).
    pub remote_qpn: u32,
    /// The Service ID (a SIDR_REP echoes it).
    pub service_id: u64,
    /// The TID the farewell carries: this side's own (`cm_form_tid`) for a DREQ, the
    /// connection's for a REJ, DREP or SIDR_REP (`cm_id_priv->tid`).
    pub tid: u64,
    /// Our address (the MAD's source).
    pub local: IpAddr,
    /// The peer's address (the MAD's destination).
    pub peer: IpAddr,
}

/// One change of an endpoint's mirror ([`Endpoint::poll_mirror`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorChange {
    /// A connection's record, new or changed (keyed by `local_comm_id`).
    Set(ConnMirror),
    /// The connection with this local comm ID has nothing to send any more (destroyed,
    /// disconnecting, in timewait, idle).
    Removed(u32),
}

/// The MAD `rdma_destroy_id` sends for the mirrored connection (byte for byte what
/// [`Endpoint::destroy_id`] sends for it), from QP1 of `m.local` to the peer's QP1;
/// `node_guid` is the CA GUID (the ARI of REJ 4).
pub fn farewell(m: &ConnMirror, node_guid: u64) -> MadOut {
    let av = ib::Av {
        local: m.local,
        peer: m.peer,
        flow_label: 0,
        traffic_class: 0,
        hop_limit: ib::DEFAULT_HOP_LIMIT,
        timeout: ib::CMA_IBOE_PACKET_LIFETIME + 1,
    };
    let mut conn = Conn::new(m.local_comm_id, av);
    conn.state = m.state.cm_state();
    conn.remote_id = m.remote_comm_id;
    conn.remote_qpn = m.remote_qpn;
    conn.service_id = m.service_id;
    conn.tid = m.tid;
    let mut tx = VecDeque::new();
    send_farewell(&mut tx, &mut conn, Instant::from_nanos(0), node_guid, m.tid);
    // Every mirrored state sends exactly one MAD.
    tx.pop_front().unwrap_or(MadOut {
        src: m.local,
        dst: m.peer,
        bytes: [0; 256],
    })
}

/// Text form, one line without the newline:
/// `<state> <local comm ID> <remote comm ID> <remote QPN> <service ID> <TID> <local> <peer>`,
/// numbers in hex.
impl fmt::Display for ConnMirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:x} {:x} {:x} {:x} {:x} {} {}",
            self.state.name(),
            self.local_comm_id,
            self.remote_comm_id,
            self.remote_qpn,
            self.service_id,
            self.tid,
            self.local,
            self.peer
        )
    }
}

/// The text form is not one of [`ConnMirror`] or [`MirrorChange`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadMirror;

impl FromStr for ConnMirror {
    type Err = BadMirror;
    fn from_str(s: &str) -> Result<ConnMirror, BadMirror> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let [st, l, r, q, sid, tid, local, peer] = w[..] else {
            return Err(BadMirror);
        };
        let hex32 = |v: &str| u32::from_str_radix(v, 16).map_err(|_| BadMirror);
        let hex64 = |v: &str| u64::from_str_radix(v, 16).map_err(|_| BadMirror);
        Ok(ConnMirror {
            state: STATE_NAMES
                .iter()
                .find(|(_, n)| *n == st)
                .ok_or(BadMirror)?
                .0,
            local_comm_id: hex32(l)?,
            remote_comm_id: hex32(r)?,
            remote_qpn: hex32(q)? & 0xFF_FFFF,
            service_id: hex64(sid)?,
            tid: hex64(tid)?,
            local: local.parse().map_err(|_| BadMirror)?,
            peer: peer.parse().map_err(|_| BadMirror)?,
        })
    }
}

/// Text form: `set <ConnMirror>` or `removed <local comm ID in hex>`.
impl fmt::Display for MirrorChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MirrorChange::Set(m) => write!(f, "set {m}"),
            MirrorChange::Removed(id) => write!(f, "removed {id:x}"),
        }
    }
}

impl FromStr for MirrorChange {
    type Err = BadMirror;
    fn from_str(s: &str) -> Result<MirrorChange, BadMirror> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("set ") {
            return rest.parse().map(MirrorChange::Set);
        }
        let rest = s.strip_prefix("removed ").ok_or(BadMirror)?;
        u32::from_str_radix(rest.trim(), 16)
            .map(MirrorChange::Removed)
            .map_err(|_| BadMirror)
    }
}

/// The endpoint's side: the records last handed out and the changes not polled yet.
#[derive(Default)]
pub(crate) struct Mirror {
    records: BTreeMap<Id, ConnMirror>,
    changes: VecDeque<MirrorChange>,
    /// A call, MAD or timer ran since the last comparison.
    pub dirty: bool,
}

impl Endpoint {
    /// The next change of the connections' mirror (see [`farewell`]): each connection that
    /// would send a MAD if its id were destroyed now has a record, set when it appears or its
    /// farewell changes, removed when it has none any more. Costs nothing until first called;
    /// then each call after a change compares every connection with its record (one linear
    /// scan, as [`Endpoint::poll_timeout`]).
    pub fn poll_mirror(&mut self) -> Option<MirrorChange> {
        if self.mirror.changes.is_empty() && self.mirror.dirty {
            self.mirror.dirty = false;
            self.compare_mirror();
        }
        self.mirror.changes.pop_front()
    }

    fn compare_mirror(&mut self) {
        let now: BTreeMap<Id, ConnMirror> = self
            .ids
            .iter()
            .filter_map(|(&id, r)| Some((id, self.mirror_of(r.conn.as_ref()?)?)))
            .collect();
        let m = &mut self.mirror;
        for (id, old) in &m.records {
            match now.get(id) {
                Some(n) if n.local_comm_id == old.local_comm_id => {}
                _ => m
                    .changes
                    .push_back(MirrorChange::Removed(old.local_comm_id)),
            }
        }
        for (id, n) in &now {
            if m.records.get(id) != Some(n) {
                m.changes.push_back(MirrorChange::Set(*n));
            }
        }
        m.records = now;
    }

    fn mirror_of(&self, c: &Conn) -> Option<ConnMirror> {
        let state = MirrorState::of(c.state)?;
        Some(ConnMirror {
            state,
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            remote_qpn: c.remote_qpn,
            service_id: c.service_id,
            tid: if state == MirrorState::Established {
                self.form_tid(c.local_id)
            } else {
                c.tid
            },
            local: c.av.local,
            peer: c.av.peer,
        })
    }
}
