//! The write hints of a [`PgStore`](super::PgStore): the bytes of keys this handle wrote
//! last, so that a read-modify-write of one of them needs no read.
//!
//! A write that decides on a key's current value ([`strata_store::KvWrite::read_modify_write`],
//! a collection's `put`) must name the bytes it decided on: the server re-checks them in
//! the statement that writes (the precondition that keeps a concurrent writer's update
//! from being lost, and the source of the next lock version). Reading them first would
//! cost a round trip (one more statement per put, as much as the write's own). So the
//! write decides on what the handle expects the key to hold: the bytes it wrote there
//! last (its hint), or — a key it has no hint for — absent.
//!
//! Why a wrong expectation changes nothing but the cost: it is only ever handed to the
//! decision together with a precondition that the key still holds it, and the server
//! checks preconditions atomically with the write, against the committed state, across
//! every process and handle (under the key's lock, in the statement that writes). If
//! another handle or process wrote the key since (or it exists and was guessed absent),
//! its bytes differ, so the write fails on that key and writes nothing; the server's
//! answer carries the key's current bytes, the hint is dropped, and the write is decided
//! again on those bytes, exactly as after losing any race. If the precondition holds, the
//! stored bytes *are* the expected ones, so everything the decision derived from them is
//! what a read would have produced. A decision that refuses on an expected value is
//! decided again on the value read.
//!
//! Bounded: at most [`MAX_ENTRIES`] keys and [`MAX_BYTES`] bytes per handle; past either,
//! the hints are dropped wholesale (a later write guesses, as without hints).

use std::collections::HashMap;
use std::sync::RwLock;

/// The most documents one handle keeps hints for.
pub const MAX_ENTRIES: usize = 4096;
/// The most key and value bytes one handle keeps in hints.
pub const MAX_BYTES: usize = 4 << 20;

/// The hints of one store handle (see the module).
#[derive(Debug, Default)]
pub(crate) struct Hints {
    /// Off: nothing is remembered, every write reads.
    enabled: bool,
    /// Read (shared) by every write's lookup, changed (exclusive, one map step) after it.
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    docs: HashMap<Vec<u8>, Vec<u8>>,
    bytes: usize,
}

impl Hints {
    /// Hints that remember (`enabled`) or that never do.
    pub(crate) fn new(enabled: bool) -> Self {
        Hints {
            enabled,
            state: RwLock::default(),
        }
    }

    fn lock(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        // A map updated in single steps: consistent after a panic elsewhere.
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes this handle last wrote under `key`, if it remembers them.
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        if !self.enabled {
            return None;
        }
        self.lookup(key)
    }

    #[inline(never)]
    fn lookup(&self, key: &[u8]) -> Option<Vec<u8>> {
        // Shared: concurrent writers through one handle look their hints up at once.
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .docs
            .get(key)
            .cloned()
    }

    /// Remembers that `key` now holds `value` (written by this handle).
    pub(crate) fn remember(&self, key: Vec<u8>, value: Vec<u8>) {
        if !self.enabled {
            return;
        }
        let size = key.len() + value.len();
        let mut state = self.lock();
        if let Some(old) = state.docs.remove(&key) {
            state.bytes -= key.len() + old.len();
        }
        if size > MAX_BYTES {
            return;
        }
        if state.docs.len() >= MAX_ENTRIES || state.bytes + size > MAX_BYTES {
            state.docs.clear();
            state.bytes = 0;
        }
        state.bytes += size;
        state.docs.insert(key, value);
    }

    /// Forgets `key` (its hint proved stale, or this handle deleted it).
    pub(crate) fn forget(&self, key: &[u8]) {
        if !self.enabled {
            return;
        }
        let mut state = self.lock();
        if let Some(old) = state.docs.remove(key) {
            state.bytes -= key.len() + old.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_bounded_and_forgotten() {
        let off = Hints::new(false);
        off.remember(b"a".to_vec(), b"1".to_vec());
        assert_eq!(off.get(b"a"), None, "disabled hints remember nothing");
        let h = Hints::new(true);
        h.remember(b"a".to_vec(), b"1".to_vec());
        h.remember(b"a".to_vec(), b"22".to_vec());
        assert_eq!(h.get(b"a"), Some(b"22".to_vec()));
        assert_eq!(h.lock().bytes, 3);
        h.forget(b"a");
        assert_eq!(h.get(b"a"), None);
        assert_eq!(h.lock().bytes, 0);
        for i in 0..MAX_ENTRIES + 1 {
            h.remember(format!("k{i}").into_bytes(), vec![0]);
        }
        assert!(h.lock().docs.len() <= MAX_ENTRIES);
        h.remember(b"big".to_vec(), vec![0; MAX_BYTES]);
        assert_eq!(h.get(b"big"), None, "larger than the budget: not kept");
        assert!(h.lock().bytes <= MAX_BYTES);
    }
}
