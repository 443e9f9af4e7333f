//! The knobs of a sweep ([`SweepOptions`]) and their defaults.

use crate::clock::{SharedClock, SystemClock};
use crate::pass::PassLimits;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 256;
/// Default lease duration.
pub const DEFAULT_LEASE_MS: u64 = 60_000;
/// Default minimum spacing between progress lines.
pub const DEFAULT_PROGRESS_LOG_MS: u64 = 5_000;

pub(super) type AbortCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Knobs of a sweep; every default suits an unattended boot sweep.
#[derive(Clone)]
pub struct SweepOptions {
    pub(super) runner_id: String,
    pub(super) limits: PassLimits,
    pub(super) abort: Option<AbortCheck>,
    pub(super) lease_ms: u64,
    pub(super) lease_wait: Duration,
    pub(super) progress_log_ms: u64,
    pub(super) clock: SharedClock,
}

impl fmt::Debug for SweepOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SweepOptions")
            .field("runner_id", &self.runner_id)
            .field("limits", &self.limits)
            .field("abort", &self.abort.is_some())
            .field("lease_ms", &self.lease_ms)
            .field("lease_wait", &self.lease_wait)
            .field("progress_log_ms", &self.progress_log_ms)
            .field("clock", &self.clock)
            .finish()
    }
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self::new()
    }
}

fn random_runner_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}-{:x}-{:x}",
        std::process::id(),
        nanos,
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

impl SweepOptions {
    /// Defaults: a fresh runner id, [`DEFAULT_BATCH_SIZE`] rows (256, the payload seed's
    /// batch) and the bulk pass's default byte budget (4 MiB) per batch, never aborts,
    /// 60 s lease, a progress line at most every 5 s, the system clock.
    pub fn new() -> Self {
        SweepOptions {
            runner_id: random_runner_id(),
            limits: PassLimits::new(DEFAULT_BATCH_SIZE, crate::pass::DEFAULT_MAX_BYTES)
                .unwrap_or_default(),
            abort: None,
            lease_ms: DEFAULT_LEASE_MS,
            lease_wait: Duration::ZERO,
            progress_log_ms: DEFAULT_PROGRESS_LOG_MS,
            clock: SystemClock::shared(),
        }
    }

    /// Identifies this instance, so a lease tells "mine, resume it" from "someone else's".
    pub fn runner_id(mut self, id: impl Into<String>) -> Self {
        self.runner_id = id.into();
        self
    }

    /// The batch limits (rows and byte budget) of the bulk pass under the sweep; the rows
    /// per batch are also the lease-renewal and abort-poll granularity.
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Polled at every batch boundary; `true` stops the sweep, releasing the lease and
    /// leaving it resumable.
    pub fn abort_when(mut self, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.abort = Some(Arc::new(check));
        self
    }

    /// How long a claimed lease survives without a renewal.
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.lease_ms = ms;
        self
    }

    /// How long to wait for another process's sweep of the collection to end before
    /// returning [`SweepNote::Contended`](super::SweepNote::Contended) (default zero: one attempt). Only stores shared
    /// by several processes have such a lease.
    pub fn lease_wait(mut self, wait: Duration) -> Self {
        self.lease_wait = wait;
        self
    }

    /// Minimum spacing between "still going" progress lines (tracing, info level).
    pub fn progress_log_ms(mut self, ms: u64) -> Self {
        self.progress_log_ms = ms;
        self
    }

    /// The clock lease expiry is computed with.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The runner id.
    pub fn get_runner_id(&self) -> &str {
        &self.runner_id
    }

    /// The batch limits.
    pub fn get_limits(&self) -> PassLimits {
        self.limits
    }

    /// The lease duration.
    pub fn get_lease_ms(&self) -> u64 {
        self.lease_ms
    }
}
