//! The hard work budget of one [`crate::diff()`] call: the last guard against schemas whose
//! comparison would otherwise take exponential time (memoization keeps ordinary and
//! shared-definition schemas far below it).
//!
//! The budget is per thread: [`Scope::enter`] starts it, every unit of work calls
//! [`tick`], and once it is spent every walk returns early and the diff reports
//! [`crate::SchemaError::TooComplex`].

use std::cell::Cell;

/// Work units one diff may spend: a comparison step, a normalized node or a built view
/// cost one, a change replayed from a shared definition four. Ordinary schemas
/// need a few thousand; the whole budget is spent in well under a second of CPU time.
pub const MAX_DIFF_WORK: u64 = 500_000;

/// Units one replayed change costs (it allocates its path and copies its finding).
pub(crate) const REPLAY_COST: u64 = 4;

thread_local! {
    /// Units left in the current scope; `None` outside any scope (unbounded).
    static LEFT: Cell<Option<u64>> = const { Cell::new(None) };
    /// The current scope ran out.
    static SPENT: Cell<bool> = const { Cell::new(false) };
}

/// A running budget; restores the previous state when dropped.
pub(crate) struct Scope {
    saved: (Option<u64>, bool),
}

impl Scope {
    /// Starts a budget of `units` on this thread.
    pub(crate) fn enter(units: u64) -> Self {
        let saved = (LEFT.with(Cell::get), SPENT.with(Cell::get));
        LEFT.with(|c| c.set(Some(units)));
        SPENT.with(|c| c.set(false));
        Scope { saved }
    }

    /// Whether this scope ran out of units.
    pub(crate) fn spent(&self) -> bool {
        SPENT.with(Cell::get)
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        LEFT.with(|c| c.set(self.saved.0));
        SPENT.with(|c| c.set(self.saved.1));
    }
}

/// Spends `units`; `false` once the budget is exhausted (the caller should stop).
pub(crate) fn tick(units: u64) -> bool {
    LEFT.with(|c| match c.get() {
        None => true,
        Some(left) if left >= units => {
            c.set(Some(left - units));
            true
        }
        Some(_) => {
            c.set(Some(0));
            SPENT.with(|s| s.set(true));
            false
        }
    })
}

/// Whether the current budget is exhausted.
pub(crate) fn exhausted() -> bool {
    SPENT.with(Cell::get)
}
