//! The exact cache of guard-key values (see the crate documentation for its invariant).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many guard keys the cache holds at most (the oldest is dropped for a new one).
const MAX_GUARDS: usize = 16;
/// Guard values larger than this are not cached (read from sled each time).
const MAX_GUARD_VALUE: usize = 64 * 1024;

/// The bit of a key's length in [`GuardCache::lengths`].
pub(crate) fn length_bit(key: &[u8]) -> u64 {
    1u64 << (key.len() % 64)
}

/// The exact cache of guard-key values shared by every clone of a [`SledStore`].
#[derive(Debug, Default)]
pub(crate) struct GuardCache {
    /// One bit per cached key length (modulo 64), set when a key is cached and never
    /// cleared: a plain write whose keys hit no bit skips the cache without locking it.
    pub(crate) lengths: AtomicU64,
    entries: Mutex<GuardEntries>,
}

impl GuardCache {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, GuardEntries> {
        // The entries are only ever forgotten on a panic path: a poisoned cache is cleared.
        self.entries.lock().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            g.forget_all();
            g
        })
    }
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
