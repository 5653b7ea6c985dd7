//! What a QP engine may touch outside its own QP: the device's shared state (CQs, SRQs,
//! counters, diagnostics, events, GIDs) and, read only, the MR table; plus posting completions.
use crate::counters::Counters;
use crate::mem::MrTable;
use crate::queue::{CqState, SrqState};
use crate::slab::Slab;
use crate::verbs::*;
use crate::{Cq, Pd};
use std::collections::VecDeque;

/// Device state an engine may change outside its own QP (owned by the `Nic`).
pub(crate) struct Shared {
    pub cqs: Slab<CqState>,
    pub srqs: Slab<SrqState>,
    pub ahs: Slab<(Pd, AhAttr)>,
    /// Memory windows: bound and invalidated by the engines, so here and not beside the MRs.
    pub mws: crate::mw::MwTable,
    pub ctr: Counters,
    pub diags: crate::diag::Diags,
    pub events: VecDeque<AsyncEvent>,
    pub comp_events: VecDeque<Cq>,
    pub gids: Vec<Gid>,
    pub port_mtu: u32,
    pub tx_ipv4_id: u16,
    /// The transmit record of the last UD datagram built (a UD path comes with each WQE;
    /// connected QPs keep theirs in `Qp::tx`).
    pub ud_tx: Option<crate::net::Transmit>,
    /// The QP of the last datagram `poll_transmit` returned.
    pub last_tx_qpn: u32,
}

/// Everything an engine may touch outside its own QP: the MR table (read only: an MR found by
/// a key check stays borrowed while completions and counters change) and the rest of the
/// device. Two pointers, built per packet.
pub(crate) struct Ctx<'a> {
    pub mrs: &'a MrTable,
    pub s: &'a mut Shared,
}

impl std::ops::Deref for Ctx<'_> {
    type Target = Shared;
    #[inline]
    fn deref(&self) -> &Shared {
        self.s
    }
}

impl std::ops::DerefMut for Ctx<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Shared {
        self.s
    }
}

impl Shared {
    /// Records a diagnostic on `qpn` (counted always, reported once per cause).
    pub fn diag(&mut self, qpn: u32, d: crate::diag::Diagnostic) {
        self.diags.report(&mut self.ctr, qpn, d);
    }

    /// Posts a completion; false (and a CQ error event) when the CQ is full.
    #[inline]
    pub fn cq_post(&mut self, cq: Cq, wc: WorkCompletion, solicited: bool) -> bool {
        let Some(c) = self.cqs.get_mut(cq.0) else {
            return false;
        };
        if c.q.len() >= c.cap {
            self.cq_overflow(cq, wc.qp_num);
            return false;
        }
        c.q.push_back(wc);
        if let Some(sol_only) = c.armed {
            if !sol_only || solicited || wc.status != WcStatus::Success {
                c.armed = None;
                self.comp_events.push_back(cq);
            }
        }
        true
    }

    /// A completion for `qpn` found CQ `cq` full: count, diagnose, raise the CQ error once.
    #[cold]
    #[inline(never)]
    fn cq_overflow(&mut self, cq: Cq, qpn: u32) {
        self.ctr.cq_overflow += 1;
        self.diags
            .report(&mut self.ctr, qpn, crate::diag::Diagnostic::CqOverflow);
        if let Some(c) = self.cqs.get_mut(cq.0) {
            if !c.overflowed {
                c.overflowed = true;
                self.events.push_back(AsyncEvent::CqErr(cq));
            }
        }
    }
}
