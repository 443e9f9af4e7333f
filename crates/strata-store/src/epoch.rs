//! Write epochs: how a backend whose writers are all ordered by one in-process lock skips
//! re-reading the preconditions a caller has just read itself.
//!
//! A bulk rewrite (the eager sweep) reads a page of rows and writes each back only if it
//! still holds the bytes read: one [`Precondition`](crate::Precondition) per row. Checking
//! them costs one read per row under the backend's writer lock. Most of the time nothing
//! wrote in between, and the backend can know that without reading anything:
//!
//! * the backend keeps an [`EpochClock`]: a counter it **advances after every write has
//!   been applied, while it still holds its writer lock** (the shared or the exclusive
//!   side);
//! * the reader **observes** the epoch ([`Capabilities::write_epoch`](crate::Capabilities::write_epoch))
//!   *before* it reads, and marks the preconditions it built from that read with
//!   [`Batch::observed_at`](crate::Batch::observed_at);
//! * at commit, holding the writer lock **exclusively**, the backend compares: if the
//!   epoch is still the one observed, those preconditions hold and are not read again
//!   ([`Batch::into_parts_to_check`](crate::Batch::into_parts_to_check)); otherwise every
//!   precondition is checked as before.
//!
//! Why "unchanged" proves the preconditions: take any write `W` that ever changed a key
//! the batch requires. `W` advanced the epoch after applying and before releasing the
//! writer lock; the commit holds that lock exclusively, so `W` has advanced it by then.
//! If the reader's observation came *before* `W`'s advance, the epoch at commit differs
//! from the one observed and everything is checked. If it came *after*, `W` had finished
//! applying before the observation (the advance is a release, the observation an
//! acquire), so the read that followed saw `W`'s result — the bytes read are current
//! unless another write, covered by the same argument, came later. Either way no write
//! lands between the read and the commit unseen. Advancing *before* applying would be
//! unsound: a reader could observe the new value while the write is still in progress and
//! read the old bytes.
//!
//! Only backends whose every writer takes that one lock can keep an epoch: sled and the
//! in-memory backend (one process opens the datastore; every clone shares the lock).
//! PostgreSQL, written by several processes, keeps none and checks every precondition.

use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the clocks of different backends in one process, so an epoch observed on
/// one store is never taken for another's.
static NEXT_CLOCK: AtomicU64 = AtomicU64::new(1);

/// A backend's write epoch as observed at one moment (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteEpoch {
    clock: u64,
    value: u64,
}

impl WriteEpoch {
    /// How many batches were applied between `earlier` and this observation (`None` when
    /// they come from different backends). A caller that applied `n` batches itself in
    /// between and gets exactly `n` knows that nothing else wrote to the store meanwhile
    /// (every applied non-empty batch advances the epoch exactly once).
    pub fn writes_since(&self, earlier: WriteEpoch) -> Option<u64> {
        (self.clock == earlier.clock).then(|| self.value.wrapping_sub(earlier.value))
    }
}

/// The write-epoch counter of one backend (shared by all its clones).
///
/// The backend calls [`EpochClock::advance`] after applying every write, while it holds
/// its writer lock, and consults [`EpochClock::unchanged_since`] (through
/// [`Batch::into_parts_to_check`](crate::Batch::into_parts_to_check)) only while holding
/// that lock exclusively.
#[derive(Debug)]
pub struct EpochClock {
    id: u64,
    value: AtomicU64,
}

impl Default for EpochClock {
    fn default() -> Self {
        Self::new()
    }
}

impl EpochClock {
    /// A fresh clock, distinct from every other clock of this process.
    pub fn new() -> Self {
        EpochClock {
            id: NEXT_CLOCK.fetch_add(1, Ordering::Relaxed),
            value: AtomicU64::new(0),
        }
    }

    /// The current epoch (an acquire: every write whose advance it sees is visible to
    /// the reads that follow).
    pub fn observe(&self) -> WriteEpoch {
        WriteEpoch {
            clock: self.id,
            value: self.value.load(Ordering::Acquire),
        }
    }

    /// Records that a write was applied. Call after the write, before releasing the
    /// writer lock (a release: the write is visible to whoever observes the new value),
    /// exactly once per applied batch (see [`WriteEpoch::writes_since`]; a batch with no
    /// mutation and no precondition, which writes nothing, need not count).
    pub fn advance(&self) {
        self.value.fetch_add(1, Ordering::Release);
    }

    /// True when `epoch` was observed on this clock and no write was applied since.
    /// Meaningful only while the caller holds the writer lock exclusively.
    pub fn unchanged_since(&self, epoch: WriteEpoch) -> bool {
        epoch.clock == self.id && self.value.load(Ordering::Acquire) == epoch.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_holds_until_the_next_write_and_only_on_its_own_clock() {
        let clock = EpochClock::new();
        let other = EpochClock::new();
        let e = clock.observe();
        assert!(clock.unchanged_since(e));
        // Same value, another clock: never vouched for.
        assert_eq!(other.observe().value, e.value);
        assert!(!other.unchanged_since(e));
        clock.advance();
        assert!(!clock.unchanged_since(e));
        assert_eq!(clock.observe().writes_since(e), Some(1));
        assert_eq!(other.observe().writes_since(e), None);
        assert!(clock.unchanged_since(clock.observe()));
    }
}
