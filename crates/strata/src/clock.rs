//! Injectable time: every time-dependent piece of strata (heartbeats, leases,
//! stale windows, drain timeouts, sweep leases) reads the time through a
//! [`Clock`], so tests drive time by hand with a [`ManualClock`] instead of
//! sleeping.
//!
//! ```
//! use std::sync::Arc;
//! use strata::clock::{Clock, ManualClock};
//!
//! let clock = Arc::new(ManualClock::new(1_000));
//! let shared: Arc<dyn Clock> = clock.clone();
//! clock.advance(250);
//! assert_eq!(shared.now_ms(), 1_250);
//! clock.set(10);
//! assert_eq!(shared.now_ms(), 10);
//! ```

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + Debug {
    /// The current time in milliseconds.
    fn now_ms(&self) -> u64;
}

/// A shared clock handle, the form every strata component stores.
pub type SharedClock = Arc<dyn Clock>;

/// The real system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// A shared handle on the system clock.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before the epoch reads as 0 rather than failing.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; cloning shares the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A manual clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(start_ms)),
        }
    }

    /// Moves the clock forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ms))
            });
    }

    /// Sets the clock to `ms`.
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let a = ManualClock::new(5);
        let b = a.clone();
        a.advance(10);
        assert_eq!(b.now_ms(), 15);
        b.advance(u64::MAX);
        assert_eq!(a.now_ms(), u64::MAX);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
