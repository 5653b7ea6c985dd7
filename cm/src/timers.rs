//! Sending, retransmission and timewait (kernel mad.c `retry_send`/`timeout_sends`, cm.c
//! `cm_process_send_error`, `cm_enter_timewait`, `cm_timewait_handler`).
//!
//! Each connection has at most one outstanding MAD (`cm_id_priv->msg`). It is re-sent, byte for
//! byte, every `timeout_ms` (the timer starts when it is queued) until its retries are spent;
//! then the connection reports the error that belongs to the state it was sent in, if it is
//! still in that state.
use crate::ib::{CmState, Conn, Retx};
use crate::rdma::RdmaState;
use crate::{errno, Endpoint, Event, EventKind, Id, Instant, MadOut};
use roce_wire::cm::{Mad, Message};
use std::collections::VecDeque;
use std::net::IpAddr;

/// The 256-byte MAD of `msg` with the kernel CM's header and `tid`.
pub(crate) fn emit(tid: u64, msg: Message) -> [u8; 256] {
    let mut b = [0u8; 256];
    // Cannot fail: the buffer is a whole MAD.
    let _ = Mad::new(tid, msg).emit(&mut b);
    b
}

/// Queues `msg` from `src` to `dst`.
pub(crate) fn send(tx: &mut VecDeque<MadOut>, src: IpAddr, dst: IpAddr, tid: u64, msg: Message) {
    tx.push_back(MadOut {
        src,
        dst,
        bytes: emit(tid, msg),
    });
}

/// `msg` as `conn` sends it: a REQ, REP or SIDR_REP with the connection's ECE `attr_mod` in
/// the header (`cm_format_mad_ece_hdr`), the other messages with 0.
fn emit_conn(conn: &Conn, tid: u64, msg: Message) -> [u8; 256] {
    let mut mad = Mad::new(tid, msg);
    if matches!(msg, Message::Req(_) | Message::Rep(_) | Message::SidrRep(_)) {
        mad.header.attr_mod = conn.ece_attr_mod;
    }
    let mut b = [0u8; 256];
    // Cannot fail: the buffer is a whole MAD.
    let _ = mad.emit(&mut b);
    b
}

/// Queues `msg` on `conn`'s address vector with `conn`'s TID.
pub(crate) fn send_conn(tx: &mut VecDeque<MadOut>, conn: &Conn, msg: Message) {
    tx.push_back(MadOut {
        src: conn.av.local,
        dst: conn.av.peer,
        bytes: emit_conn(conn, conn.tid, msg),
    });
}

/// Queues `msg` with `tid` as `conn`'s outstanding MAD: re-sent every `timeout_ms`,
/// `retries` times, while `conn` stays in `state`.
pub(crate) fn send_retx(
    tx: &mut VecDeque<MadOut>,
    conn: &mut Conn,
    now: Instant,
    tid: u64,
    msg: Message,
    (state, timeout_ms, retries): (CmState, u64, u8),
) {
    let mad = emit_conn(conn, tid, msg);
    tx.push_back(MadOut {
        src: conn.av.local,
        dst: conn.av.peer,
        bytes: mad,
    });
    conn.retx = Some(Retx {
        mad,
        sent_in: state,
        timeout_ms,
        retries_left: retries,
        deadline: now.add_nanos(timeout_ms.saturating_mul(1_000_000)),
    });
}

impl Endpoint {
    /// When [`Endpoint::handle_timeout`] is due next: the earliest retransmission or timewait
    /// expiry.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ids
            .values()
            .filter_map(|i| i.conn.as_ref())
            .flat_map(|c| [c.retx.as_ref().map(|r| r.deadline), c.timewait_until])
            .flatten()
            .min()
    }

    /// Runs the timers due at `now`: retransmissions, retry exhaustion, timewait exits.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.mirror.dirty = true;
        let due: Vec<Id> = self
            .ids
            .iter()
            .filter(|(_, i)| {
                i.conn.as_ref().is_some_and(|c| {
                    c.retx.as_ref().is_some_and(|r| r.deadline <= now)
                        || c.timewait_until.is_some_and(|t| t <= now)
                })
            })
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.retx_due(now, id);
            self.timewait_due(now, id);
        }
    }

    fn retx_due(&mut self, now: Instant, id: Id) {
        let Endpoint {
            ids,
            tx,
            counters,
            events,
            ..
        } = self;
        let Some(rid) = ids.get_mut(&id) else { return };
        let Some(conn) = rid.conn.as_mut() else {
            return;
        };
        let Some(r) = conn.retx.as_mut() else { return };
        if r.deadline > now {
            return;
        }
        if r.sent_in != conn.state {
            // An old send (`msg->context[1]` no longer the state): discarded.
            conn.retx = None;
            return;
        }
        if r.retries_left > 0 {
            r.retries_left -= 1;
            r.deadline = now.add_nanos(r.timeout_ms.saturating_mul(1_000_000));
            tx.push_back(MadOut {
                src: conn.av.local,
                dst: conn.av.peer,
                bytes: r.mad,
            });
            counters.retransmits += 1;
            return;
        }
        counters.timeouts += 1;
        conn.retx = None;
        let timeout = -errno::ETIMEDOUT;
        let kind = match conn.state {
            // IB_CM_REQ_ERROR / IB_CM_REP_ERROR → RDMA_CM_EVENT_UNREACHABLE
            CmState::ReqSent | CmState::MraReqRcvd | CmState::RepSent | CmState::MraRepRcvd => {
                conn.reset_to_idle();
                EventKind::Unreachable
            }
            // IB_CM_DREQ_ERROR → DISCONNECTED with -ETIMEDOUT
            CmState::DreqSent => {
                conn.enter_timewait(now);
                if rid.state != RdmaState::Connect {
                    return;
                }
                rid.state = RdmaState::Disconnect;
                EventKind::Disconnected
            }
            // IB_CM_SIDR_REQ_ERROR → UNREACHABLE
            CmState::SidrReqSent => {
                conn.state = CmState::Idle;
                EventKind::Unreachable
            }
            _ => return,
        };
        if rid.state == RdmaState::Connect || kind == EventKind::Disconnected {
            events.push_back(Event::simple(id, kind, timeout));
        }
    }

    fn timewait_due(&mut self, now: Instant, id: Id) {
        let Some(rid) = self.ids.get_mut(&id) else {
            return;
        };
        let Some(conn) = rid.conn.as_mut() else {
            return;
        };
        match conn.timewait_until {
            Some(t) if t <= now => {}
            _ => return,
        }
        conn.timewait_until = None;
        if conn.state != CmState::Timewait {
            return;
        }
        conn.state = CmState::Idle;
        // `cma_ib_handler` reports TIMEWAIT_EXIT only to an id in RDMA_CM_DISCONNECT.
        if rid.state == RdmaState::Disconnect {
            self.events
                .push_back(Event::simple(id, EventKind::TimewaitExit, 0));
        }
    }
}
