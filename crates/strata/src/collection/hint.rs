//! A collection handle's hints: the stored bytes of documents this handle wrote last.
//!
//! A `put` must name the document's current bytes in its batch (the compare-and-swap
//! precondition that keeps a concurrent writer's update from being lost, and the source
//! of the next lock version). Reading them costs a round trip on a networked store
//! (PostgreSQL: one more statement per put, as much as the write's own). A handle that
//! wrote a document remembers the bytes it wrote and uses them as that precondition
//! instead of reading.
//!
//! Why a wrong hint changes nothing but the cost: the hint is only ever used as the
//! batch's `Equals` precondition on the document's key, and the store checks
//! preconditions atomically with the write, against the committed state, across every
//! process and handle (on PostgreSQL under the key's lock, in the statement that writes).
//! If another handle or process wrote the document since, its bytes differ — every write
//! changes the envelope's lock version — so the batch fails with a conflict, writes
//! nothing, the hint is dropped and the write reads the document and tries again, exactly
//! as after losing any race. If the precondition holds, the stored bytes *are* the hint,
//! so everything derived from them (lock version, the sealed / ahead-of-build checks) is
//! what a read would have produced. Hints are used only by unconditional writes (`put`):
//! `insert`, `update` and deletes read, so that their own checks (`Expect`) never fail
//! on a stale hint.
//!
//! Only on backends whose reads are round trips to a server
//! ([`strata_store::Backend::remote_reads`]: PostgreSQL); on embedded backends a read
//! costs less than keeping a copy of every written value, and hints are off.
//!
//! Bounded: at most [`MAX_ENTRIES`] documents and [`MAX_BYTES`] bytes per handle; past
//! either, the hints are dropped wholesale (a later write reads, as without hints).

use std::collections::HashMap;
use std::sync::Mutex;

/// The most documents one handle keeps hints for.
pub const MAX_ENTRIES: usize = 4096;
/// The most key and value bytes one handle keeps in hints.
pub const MAX_BYTES: usize = 4 << 20;

/// The hints of one collection handle (see the module).
#[derive(Debug, Default)]
pub(crate) struct Hints {
    /// Off: nothing is remembered, every write reads.
    enabled: bool,
    state: Mutex<State>,
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
            state: Mutex::default(),
        }
    }

    /// Whether this handle keeps hints at all.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A map updated in single steps: consistent after a panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        self.lock().docs.get(key).cloned()
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
