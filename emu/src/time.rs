//! Virtual time. The core never reads a clock: every input carries an [`Instant`].
use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in virtual time, in nanoseconds since an arbitrary epoch chosen by the driver.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Instant {
        Instant(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self + ns`, saturating.
    pub const fn add_nanos(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }
    /// Time from `earlier` to `self` (zero if `earlier` is later).
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.add_nanos(d.as_nanos().min(u64::MAX as u128) as u64)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, o: Instant) -> Duration {
        self.saturating_duration_since(o)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

/// IBA local ACK timeout: 4.096 µs × 2^`timeout` in ns; `None` when `timeout == 0` (disabled).
pub const fn local_ack_timeout_ns(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        None
    } else {
        Some(4096u64 << (timeout as u32 & 31))
    }
}
