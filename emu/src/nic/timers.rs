//! QP timers (retransmit and RNR deadlines): a heap of (deadline, QPN), earliest first, whose
//! stale entries are dropped lazily; `handle_timeout` runs what expired.
use super::Nic;
use crate::qp::Ctx;
use crate::time::Instant;
use std::cmp::Reverse;

impl Nic {
    /// Records `qpn`'s deadline if it changed from `before`, then drops stale heap tops.
    pub(super) fn sync_timer(&mut self, qpn: u32, before: u64) {
        let now = self.qps.get(qpn).map_or(crate::qp::NEVER, |q| q.deadline());
        if now != before && now != crate::qp::NEVER {
            self.timers.push(Reverse((Instant(now), qpn)));
        }
        self.clean_timers();
    }

    fn timer_live(&self, t: Instant, qpn: u32) -> bool {
        self.qps.get(qpn).and_then(|q| q.next_timeout()) == Some(t)
    }

    pub(super) fn clean_timers(&mut self) {
        while let Some(&Reverse((t, q))) = self.timers.peek() {
            if self.timer_live(t, q) {
                break;
            }
            self.timers.pop();
        }
        if self.timers.len() > 4 * self.qps.len() + 64 {
            let qps = &self.qps;
            self.timers
                .retain(|Reverse((t, q))| qps.get(*q).and_then(|x| x.next_timeout()) == Some(*t));
        }
    }

    /// Runs every timer that expired at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let span = self.live_span();
        let _d = span.as_ref().map(|s| s.enter());
        let mut due = std::mem::take(&mut self.scratch);
        due.clear();
        while let Some(&Reverse((t, q))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if !due.contains(&q) {
                due.push(q);
            }
        }
        for &qpn in &due {
            let Some(qp) = self.qps.get_mut(qpn) else {
                continue;
            };
            if qp.next_timeout().is_some_and(|t| t <= now) {
                let mut ctx = ctx!(self);
                qp.on_timeout(&mut ctx, now);
                if !qp.in_ready {
                    qp.in_ready = true;
                    self.ready.push_back(qpn);
                }
            }
            if let Some(t) = qp.next_timeout() {
                self.timers.push(Reverse((t, qpn)));
            }
        }
        self.scratch = due;
        self.clean_timers();
    }

    /// The earliest moment [`Nic::handle_timeout`] has work. O(1).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }
}
