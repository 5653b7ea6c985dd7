//! A QP's deadlines: the local ACK (retransmit) timer and the RNR NAK timer, in virtual
//! nanoseconds. The completer and requester decide when to arm them and for how long (the
//! period and its back-off are the completer's); this type keeps the deadlines, answers for
//! the earliest one and says which expired. The NIC keeps every QP's earliest deadline in its
//! heap (`nic/timers.rs`).
//!
//! (ACK coalescing needs no deadline: the responder merges a backlog of positive ACKs in its
//! job queue, `response.rs`.)
use crate::time::Instant;

/// A disarmed deadline (plain integers: the earliest of two is one `min`, no `Option` match).
pub(crate) const NEVER: u64 = u64::MAX;

/// The timers that [`Timers::take_expired`] found expired (and disarmed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Expired {
    /// The RNR NAK timer: the requester may retry.
    pub rnr: bool,
    /// The local ACK timer.
    pub retrans: bool,
}

/// The deadlines of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timers {
    /// Local ACK timer deadline, [`NEVER`] when disarmed.
    retrans: u64,
    /// RNR NAK timer deadline, [`NEVER`] when disarmed.
    rnr: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            retrans: NEVER,
            rnr: NEVER,
        }
    }
}

impl Timers {
    /// Arms (or moves) the local ACK timer to `period_ns` after `now`.
    #[inline]
    pub fn arm_retrans(&mut self, now: Instant, period_ns: u64) {
        self.retrans = now.add_nanos(period_ns).0;
    }

    /// Disarms the local ACK timer.
    #[inline]
    pub fn disarm_retrans(&mut self) {
        self.retrans = NEVER;
    }

    /// Whether the local ACK timer is armed.
    #[inline]
    pub fn retrans_armed(&self) -> bool {
        self.retrans != NEVER
    }

    /// Arms the RNR NAK timer `usec` microseconds after `now`.
    #[inline]
    pub fn arm_rnr(&mut self, now: Instant, usec: u64) {
        self.rnr = now.add_nanos(usec * 1000).0;
    }

    /// Disarms both timers.
    #[inline]
    pub fn disarm_all(&mut self) {
        *self = Timers::default();
    }

    /// Earliest armed deadline, [`NEVER`] when none is armed.
    #[inline]
    pub fn deadline(&self) -> u64 {
        self.retrans.min(self.rnr)
    }

    /// Earliest armed deadline.
    #[inline]
    pub fn next(&self) -> Option<Instant> {
        let d = self.deadline();
        (d != NEVER).then_some(Instant(d))
    }

    /// Disarms and reports the timers whose deadline is at or before `now`.
    #[inline]
    pub fn take_expired(&mut self, now: Instant) -> Expired {
        let rnr = self.rnr != NEVER && self.rnr <= now.0;
        let retrans = self.retrans != NEVER && self.retrans <= now.0;
        if rnr {
            self.rnr = NEVER;
        }
        if retrans {
            self.retrans = NEVER;
        }
        Expired { rnr, retrans }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn the_earliest_armed_deadline_expires_and_is_disarmed() {
        let mut t = Timers::default();
        assert_eq!((t.deadline(), t.next()), (NEVER, None));
        assert!(!t.retrans_armed());
        t.arm_retrans(Instant(1_000), 500);
        t.arm_rnr(Instant(1_000), 2);
        assert!(t.retrans_armed());
        assert_eq!(t.next(), Some(Instant(1_500)));
        assert_eq!(t.take_expired(Instant(1_499)), Expired::default());
        assert_eq!(
            t.take_expired(Instant(1_500)),
            Expired {
                rnr: false,
                retrans: true
            }
        );
        assert!(!t.retrans_armed());
        assert_eq!(t.next(), Some(Instant(3_000)));
        t.arm_retrans(Instant(2_000), 1_000);
        assert_eq!(
            t.take_expired(Instant(5_000)),
            Expired {
                rnr: true,
                retrans: true
            }
        );
        assert_eq!(t, Timers::default());
        t.arm_retrans(Instant(0), 1);
        t.arm_rnr(Instant(0), 1);
        t.disarm_all();
        assert_eq!(t.next(), None);
    }
}
