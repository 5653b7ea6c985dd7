//! The deferred doorbell: a burst of one-WR `post_send` calls (perftest posts one WR per
//! `ibv_post_send`) leaves in one transmit (one `sendmmsg`, GSO runs across messages) instead of
//! one system call per post.
//!
//! * The first post after anything else (a poll, a notification request, another verb, a
//!   received datagram, or a pause longer than [`DOORBELL_BURST_NS`]) transmits at once, as
//!   before: a ping-pong, or a program that posts and then spins on memory for the answer
//!   (ib_write_lat: the answer is received between its posts), sees no delay.
//! * A post that directly follows another post is only queued in the engine (it is already in
//!   the send queue; only the transmit waits), until
//!   - [`DOORBELL_WRS`] WRs or [`DOORBELL_BYTES`] bytes are waiting (the post that reaches the
//!     limit transmits them all),
//!   - the program polls a CQ, requests a notification, calls any other verb through
//!     `with_nic` (modify / destroy QP, …) or progresses explicitly,
//!   - or the background thread rings it: at most [`DOORBELL_NS`] after the first deferred post
//!     when the thread is waiting on the socket (it is woken if it would sleep longer), and at
//!     the end of its current look (200 µs up to 12.8 ms) while the program polls by itself, so
//!     a program that posts and then blocks elsewhere (a TCP exchange) still makes progress; a
//!     doorbell found that late brings the wake-ups back for 100 ms (`thread_takeovers`).
//! * Without a progress thread (`ROCE_PROGRESS_THREAD=0`) nothing is deferred. Dropping the
//!   device and the at-exit flush transmit everything the engine holds, deferred posts included.

/// Posts count as one burst when they follow each other within this time (virtual ns).
pub const DOORBELL_BURST_NS: u64 = 20_000;
/// A deferred doorbell is rung when this many WRs wait (the post that reaches it transmits).
pub const DOORBELL_WRS: u32 = 16;
/// … or when this many payload bytes wait.
pub const DOORBELL_BYTES: u64 = 256 << 10;
/// The progress thread rings a deferred doorbell this long after the first deferred post at the
/// latest, when it is not in its polling-window sleep (see the module docs).
pub const DOORBELL_NS: u64 = 30_000;

/// Doorbell state, behind the engine lock.
#[derive(Debug, Default)]
pub(super) struct Doorbell {
    /// Send WRs posted and not transmitted yet.
    wrs: u32,
    /// Their payload bytes.
    bytes: u64,
    /// Virtual time of the last post, 0 once something else came after it.
    last_post: u64,
}

impl Doorbell {
    /// A WR of `bytes` was just posted at `now`: `true` = defer its transmit, `false` = the
    /// caller transmits now (which rings the doorbell for everything waiting).
    pub(super) fn defer(&mut self, now: u64, bytes: u64) -> bool {
        let burst = self.last_post != 0 && now.saturating_sub(self.last_post) < DOORBELL_BURST_NS;
        self.last_post = now.max(1);
        if !burst || self.wrs + 1 >= DOORBELL_WRS || self.bytes + bytes >= DOORBELL_BYTES {
            return false;
        }
        self.wrs += 1;
        self.bytes += bytes;
        true
    }

    /// The post of [`Doorbell::defer`] transmitted and returned at `now`: the burst goes on
    /// from here. The gap to the next post is the program's own; the transmit's time is not
    /// part of it (a 64 KiB message takes longer than [`DOORBELL_BURST_NS`] to send, so
    /// measured from the post's start every post of a burst of large messages transmitted
    /// alone: 1,000 QPs, one `sendmmsg` per 64 KiB message).
    pub(super) fn transmitted_at(&mut self, now: u64) {
        if self.last_post != 0 {
            self.last_post = now.max(1);
        }
    }

    /// Deferred posts wait for their transmit.
    pub(super) fn pending(&self) -> bool {
        self.wrs > 0
    }

    /// Something other than a post happened: the next post starts a new burst.
    pub(super) fn interrupt(&mut self) {
        self.last_post = 0;
    }

    /// A transmit ran: everything posted has been handed to the engine's transmit path.
    pub(super) fn rung(&mut self) {
        self.wrs = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_post_transmits_burst_defers_until_the_limit() {
        let mut d = Doorbell::default();
        assert!(!d.defer(1_000, 64), "the first post transmits");
        for i in 1..DOORBELL_WRS {
            assert!(d.defer(1_000 + i as u64, 64), "post {i} of the burst waits");
        }
        assert!(d.pending());
        assert!(
            !d.defer(2_000, 64),
            "the 16th deferred post rings the doorbell"
        );
        d.rung();
        assert!(!d.pending());
        assert!(d.defer(2_100, 64), "the burst goes on");
    }

    #[test]
    fn a_slow_transmit_does_not_end_the_burst() {
        let mut d = Doorbell::default();
        assert!(!d.defer(1_000, 65536), "the first post transmits");
        // its transmit took longer than a burst gap; the program posts right after it returns
        d.transmitted_at(1_000 + 3 * DOORBELL_BURST_NS);
        assert!(
            d.defer(1_500 + 3 * DOORBELL_BURST_NS, 65536),
            "the next post joins the burst"
        );
        d.interrupt();
        d.transmitted_at(1_000_000);
        assert!(
            !d.defer(1_000_100, 64),
            "after a poll the next post still transmits"
        );
    }

    #[test]
    fn a_poll_or_a_pause_ends_the_burst_and_bytes_limit() {
        let mut d = Doorbell::default();
        assert!(!d.defer(1_000, 64));
        d.interrupt();
        assert!(!d.defer(1_100, 64), "a poll in between: transmit at once");
        assert!(
            !d.defer(1_100 + DOORBELL_BURST_NS, 64),
            "a pause: transmit at once"
        );
        assert!(d.defer(1_200 + DOORBELL_BURST_NS, DOORBELL_BYTES / 2));
        assert!(
            !d.defer(1_300 + DOORBELL_BURST_NS, DOORBELL_BYTES / 2),
            "bytes limit"
        );
    }
}
