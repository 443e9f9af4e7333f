//! The exact cache of guard-key values (see the crate documentation for its invariant).

use std::sync::atomic::{AtomicU64, Ordering};

/// How many guard keys the cache holds at most (the oldest is dropped for a new one).
const MAX_GUARDS: usize = 16;
/// Guard values larger than this are not cached (read from sled each time).
const MAX_GUARD_VALUE: usize = 64 * 1024;

/// The bit of a key's length in [`GuardCache::lengths`].
pub(crate) fn length_bit(key: &[u8]) -> u64 {
    1u64 << (key.len() % 64)
}

/// What every clone of a [`SledStore`](crate::SledStore) knows of the guard cache without
/// a lock. The entries ([`GuardEntries`]) live inside the writer lock: only its exclusive
/// side changes them; either side reads them (stable while held).
#[derive(Debug, Default)]
pub(crate) struct GuardCache {
    /// One bit per cached key length (modulo 64), set when a key is cached (under the
    /// exclusive side) and never cleared: a plain write whose keys hit no bit needs no
    /// exclusive side to keep the cache exact.
    pub(crate) lengths: AtomicU64,
}

/// Cached guard keys and their current values (`None`: absent), oldest first.
#[derive(Debug, Default)]
pub(crate) struct GuardEntries {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl GuardEntries {
    fn position(&self, key: &[u8]) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k.as_slice() == key)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    pub(crate) fn fill(&mut self, lengths: &AtomicU64, key: &[u8], value: Option<&[u8]>) {
        if value.is_some_and(|v| v.len() > MAX_GUARD_VALUE) || self.position(key).is_some() {
            return;
        }
        if self.entries.len() >= MAX_GUARDS {
            self.entries.remove(0);
        }
        lengths.fetch_or(length_bit(key), Ordering::AcqRel);
        self.entries.push((key.to_vec(), value.map(<[u8]>::to_vec)));
    }

    pub(crate) fn forget(&mut self, key: &[u8]) {
        if let Some(i) = self.position(key) {
            self.entries.remove(i);
        }
    }

    pub(crate) fn forget_all(&mut self) {
        self.entries.clear();
    }
}
