//! The exact in-process cache of guard keys.
//!
//! A write decides on keys besides the one it writes — the fence record every write
//! requires, a collection's deploy-window record — and each of them would cost a B-tree
//! lookup inside every write transaction. Their values change rarely, so the store keeps
//! the current value (or absence) of such keys here and serves them without a lookup.
//!
//! **Why it is exact.** A redb store is written by one process at a time (redb locks the
//! file), and in this process every write of the file goes through
//! [`RedbStore::write`](crate::RedbStore), which takes the cache only while it holds the
//! database's one write transaction (redb runs one at a time). Under that transaction,
//! before its mutations are applied, every entry equals the committed value of its key,
//! because:
//!
//! * an entry is only filled with a value read from the table inside such a transaction
//!   for a key the transaction does not write, so it is the committed value whether the
//!   transaction then commits or aborts;
//! * every key a transaction writes is removed from the cache *before* it is written, so
//!   no entry can outlive a change of its key, whether the commit then succeeds or fails;
//! * a panic while the cache is held (the caller's decision, say) poisons its lock, and a
//!   poisoned cache is emptied before it is used again.
//!
//! Bounded: [`MAX_GUARDS`] keys (the oldest leaves for a new one), values up to
//! [`MAX_GUARD_VALUE`] bytes (larger ones are always read from the table).

use std::sync::{Mutex, MutexGuard};
use strata_store::Mutation;

/// How many guard keys the cache holds at most.
pub(crate) const MAX_GUARDS: usize = 16;
/// Guard values larger than this are not cached.
pub(crate) const MAX_GUARD_VALUE: usize = 64 * 1024;

/// The cached guard keys and their committed values (`None`: absent), oldest first.
#[derive(Debug, Default)]
pub(crate) struct GuardCache {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// One bit per cached key length (modulo 64): a written key whose bit is clear is
    /// not cached, and the cache is not searched for it.
    lengths: u64,
    /// Reads and precondition checks served from the cache (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    hits: std::cell::Cell<u64>,
}

fn length_bit(key: &[u8]) -> u64 {
    1u64 << (key.len() % 64)
}

impl GuardCache {
    /// The cached value of `key`: `Some(None)` when it is known absent, `None` when the
    /// key is not cached.
    pub(crate) fn get(&mut self, key: &[u8]) -> Option<Option<&[u8]>> {
        if self.lengths & length_bit(key) == 0 {
            return None;
        }
        let found = self.entries.iter().find(|(k, _)| k.as_slice() == key)?;
        self.count_hits(1);
        Some(found.1.as_deref())
    }

    /// Counts `n` reads served from the cache (looked up with [`GuardCache::peek`]).
    pub(crate) fn count_hits(&self, n: usize) {
        self.hits.set(self.hits.get() + n as u64);
    }

    /// [`GuardCache::get`] without counting a hit.
    pub(crate) fn peek(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        if self.lengths & length_bit(key) == 0 {
            return None;
        }
        let found = self.entries.iter().find(|(k, _)| k.as_slice() == key)?;
        Some(found.1.as_deref())
    }

    /// Caches `value` (the committed value, read inside the current write transaction)
    /// for `key`, a key the transaction does not write.
    pub(crate) fn fill(&mut self, key: &[u8], value: Option<&[u8]>) {
        if value.is_some_and(|v| v.len() > MAX_GUARD_VALUE) {
            return;
        }
        if let Some(at) = self.position(key) {
            self.entries[at].1 = value.map(<[u8]>::to_vec);
            return;
        }
        if self.entries.len() >= MAX_GUARDS {
            self.entries.remove(0);
        }
        self.lengths |= length_bit(key);
        self.entries.push((key.to_vec(), value.map(<[u8]>::to_vec)));
    }

    /// Drops `key` (about to be written).
    pub(crate) fn forget(&mut self, key: &[u8]) {
        if self.lengths & length_bit(key) == 0 {
            return;
        }
        if let Some(at) = self.position(key) {
            self.entries.remove(at);
        }
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k.as_slice() == key)
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.lengths = 0;
    }

    /// Reads served from the cache so far.
    #[cfg(test)]
    pub(crate) fn hits(&self) -> u64 {
        self.hits.get()
    }
}

/// The cache behind its lock; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Guards(Mutex<GuardCache>);

impl Guards {
    /// The cache, for the holder of the database's write transaction. A cache whose lock
    /// was poisoned (a panic while it was held) is emptied first.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GuardCache> {
        self.0.lock().unwrap_or_else(|poisoned| {
            let mut cache = poisoned.into_inner();
            cache.clear();
            self.0.clear_poison();
            cache
        })
    }
}

/// The keys a batch writes, to tell its guards (keys it requires but does not write)
/// apart; a set only for a batch with many of both.
pub(crate) enum Written<'a> {
    Few(&'a [Mutation]),
    Many(std::collections::HashSet<&'a [u8]>),
}

impl<'a> Written<'a> {
    pub(crate) fn of(mutations: &'a [Mutation], checks: usize) -> Self {
        if mutations.len() > 8 && checks > 8 {
            Written::Many(mutations.iter().map(Mutation::key).collect())
        } else {
            Written::Few(mutations)
        }
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        match self {
            Written::Few(m) => m.iter().any(|m| m.key() == key),
            Written::Many(set) => set.contains(key),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use crate::RedbStore;
    use strata_store::{Batch, KvRead, KvWrite, Mutation, StoreError};

    const FENCE: &[u8] = b"__nx/fence";
    const WINDOW: &[u8] = b"__nx/window/c";

    /// A new store in layout 2, and one in layout 1 opened writable (its upgrade
    /// postponed): the cache behaves the same in both.
    fn stores() -> Vec<(tempfile::TempDir, RedbStore)> {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::create(dir.path().join("s.redb")).unwrap();
        let old = tempfile::tempdir().unwrap();
        let layout_1 = crate::postpone::tests::writable_layout_1(&old.path().join("s.redb"));
        vec![(dir, store), (old, layout_1)]
    }

    /// A document write guarded by the fence record holding `fence` (`None`: absent).
    fn guarded(fence: Option<&[u8]>, doc: &[u8]) -> Batch {
        Batch::new()
            .require(FENCE.to_vec(), fence.map(<[u8]>::to_vec))
            .set(b"d/1".to_vec(), doc.to_vec())
    }

    /// A decided write of `d/1` reading the document and the window record; returns the
    /// window value the decision saw.
    fn decided(store: &RedbStore, doc: &[u8]) -> Option<Vec<u8>> {
        let mut seen = None;
        store
            .read_modify_write(&[b"d/1", WINDOW], &mut |values| {
                seen = values[1].map(<[u8]>::to_vec);
                Some(Batch::new().set(b"d/1".to_vec(), doc.to_vec()))
            })
            .unwrap();
        seen
    }

    #[test]
    fn a_guard_is_served_from_the_cache_after_its_first_check() {
        for (_dir, store) in stores() {
            store.apply(guarded(None, b"1")).unwrap();
            let before = store.guard_cache_hits();
            store.apply(guarded(None, b"2")).unwrap();
            store.apply(guarded(None, b"3")).unwrap();
            assert_eq!(store.guard_cache_hits(), before + 2);
            // A key read besides the one written is cached too.
            assert_eq!(decided(&store, b"4"), None);
            let before = store.guard_cache_hits();
            assert_eq!(decided(&store, b"5"), None);
            assert_eq!(store.guard_cache_hits(), before + 1);
            assert_eq!(store.get(b"d/1").unwrap(), Some(b"5".to_vec()));
        }
    }

    /// A write's values reach its decision in the order of its keys, whether each came
    /// from the cache or from its table: cached guards between documents (a write set's
    /// window and fence records after its documents, a document after them) never shift
    /// another key's value.
    #[test]
    fn cached_and_read_values_reach_the_decision_in_key_order() {
        for (_dir, store) in stores() {
            store
                .apply(
                    Batch::new()
                        .set(FENCE.to_vec(), b"F".to_vec())
                        .set(WINDOW.to_vec(), b"W".to_vec())
                        .set(b"d/2".to_vec(), b"two".to_vec()),
                )
                .unwrap();
            // Fills the cache with the two guards (read besides the document written).
            let fill: [&[u8]; 3] = [b"d/1", WINDOW, FENCE];
            store
                .read_modify_write(&fill, &mut |_| {
                    Some(Batch::new().set(b"d/1".to_vec(), b"one".to_vec()))
                })
                .unwrap();
            let reads: [&[u8]; 6] = [b"d/1", WINDOW, b"d/0", FENCE, b"d/2", b"d/3"];
            let before = store.guard_cache_hits();
            let mut seen = Vec::new();
            store
                .read_modify_write(&reads, &mut |values| {
                    seen = values.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
                    None
                })
                .unwrap();
            assert_eq!(store.guard_cache_hits(), before + 2, "both guards served");
            let want: Vec<Option<Vec<u8>>> = vec![
                Some(b"one".to_vec()),
                Some(b"W".to_vec()),
                None,
                Some(b"F".to_vec()),
                Some(b"two".to_vec()),
                None,
            ];
            assert_eq!(seen, want);
        }
    }

    /// Every other path that writes a cached guard key — a plain batch, a conditional
    /// one, a decided write, a delete — is seen by the next write.
    #[test]
    fn a_guard_written_through_any_path_is_seen_by_the_next_write() {
        for (_dir, store) in stores() {
            store.apply(guarded(None, b"1")).unwrap();
            // A plain batch writes the fence.
            store
                .apply(Batch::new().set(FENCE.to_vec(), b"A".to_vec()))
                .unwrap();
            let err = store.apply(guarded(None, b"2")).unwrap_err();
            assert!(err.is_conflict(), "{err:?}");
            store.apply(guarded(Some(b"A"), b"2")).unwrap();
            // A conditional batch (a compare-and-swap of the fence itself).
            store
                .apply(
                    Batch::new()
                        .require_eq(FENCE.to_vec(), b"A".to_vec())
                        .set(FENCE.to_vec(), b"B".to_vec()),
                )
                .unwrap();
            assert!(store.apply(guarded(Some(b"A"), b"3")).is_err());
            store.apply(guarded(Some(b"B"), b"3")).unwrap();
            // A decided write that reads the fence and writes it.
            store
                .read_modify_write(&[FENCE], &mut |values| {
                    assert_eq!(values[0], Some(&b"B"[..]));
                    Some(Batch::new().set(FENCE.to_vec(), b"C".to_vec()))
                })
                .unwrap();
            assert!(store.apply(guarded(Some(b"B"), b"4")).is_err());
            store.apply(guarded(Some(b"C"), b"4")).unwrap();
            // A delete.
            store.apply(Batch::new().delete(FENCE.to_vec())).unwrap();
            assert!(store.apply(guarded(Some(b"C"), b"5")).is_err());
            store.apply(guarded(None, b"5")).unwrap();
            // A key read by decided writes (the window record), then written.
            assert_eq!(decided(&store, b"6"), None);
            store
                .apply(Batch::new().set(WINDOW.to_vec(), b"w2".to_vec()))
                .unwrap();
            assert_eq!(decided(&store, b"7"), Some(b"w2".to_vec()));
            assert_eq!(store.get(b"d/1").unwrap(), Some(b"7".to_vec()));
        }
    }

    /// A write refused by its decision, by a failed precondition, or by an invalid batch
    /// leaves every cached guard equal to the stored value.
    #[test]
    fn a_refused_write_leaves_the_cache_right() {
        for (_dir, store) in stores() {
            store
                .apply(Batch::new().set(FENCE.to_vec(), b"A".to_vec()))
                .unwrap();
            // A failed precondition on the guard caches its real value.
            let err = store.apply(guarded(None, b"1")).unwrap_err();
            assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
            store.apply(guarded(Some(b"A"), b"1")).unwrap();
            // A batch that would write the fence but fails on another precondition: the
            // fence is not written and the cache still says "A".
            let err = store
                .apply(
                    Batch::new()
                        .require_absent(b"d/1".to_vec())
                        .set(FENCE.to_vec(), b"X".to_vec()),
                )
                .unwrap_err();
            assert!(err.is_conflict(), "{err:?}");
            assert_eq!(store.get(FENCE).unwrap(), Some(b"A".to_vec()));
            store.apply(guarded(Some(b"A"), b"2")).unwrap();
            // A batch writing one key twice is refused whole.
            let twice = Batch::from_parts(
                vec![
                    Mutation::Set {
                        key: FENCE.to_vec(),
                        value: b"Y".to_vec(),
                    },
                    Mutation::Delete {
                        key: FENCE.to_vec(),
                    },
                ],
                vec![],
            );
            assert!(matches!(
                store.apply(twice).unwrap_err(),
                StoreError::DuplicateKey { .. }
            ));
            store.apply(guarded(Some(b"A"), b"3")).unwrap();
            // A decision that refuses after reading the window caches nothing stale: the
            // window is written next, and the next decision sees the new value.
            assert!(!store
                .read_modify_write(&[b"d/1", WINDOW], &mut |_| None)
                .unwrap());
            store
                .apply(Batch::new().set(WINDOW.to_vec(), b"w".to_vec()))
                .unwrap();
            assert_eq!(decided(&store, b"4"), Some(b"w".to_vec()));
            // A panic inside a decision (the lock is poisoned) empties the cache.
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                store.read_modify_write(&[b"d/1", WINDOW], &mut |_| panic!("the caller's bug"))
            }));
            assert!(caught.is_err());
            store
                .apply(Batch::new().set(WINDOW.to_vec(), b"w3".to_vec()))
                .unwrap();
            assert_eq!(decided(&store, b"5"), Some(b"w3".to_vec()));
            store.apply(guarded(Some(b"A"), b"6")).unwrap();
            assert!(store.apply(guarded(None, b"7")).is_err());
        }
    }

    /// The cache holds at most `MAX_GUARDS` keys; older ones are read again, right.
    #[test]
    fn the_cache_is_bounded_and_stays_right_past_its_bound() {
        for (_dir, store) in stores() {
            let guard = |i: usize| format!("g/{i:02}").into_bytes();
            let n = super::MAX_GUARDS + 4;
            for i in 0..n {
                store
                    .apply(
                        Batch::new()
                            .require_absent(guard(i))
                            .set(b"d".to_vec(), vec![1]),
                    )
                    .unwrap();
            }
            for i in 0..n {
                store
                    .apply(Batch::new().set(guard(i), vec![i as u8]))
                    .unwrap();
            }
            for i in 0..n {
                assert!(store
                    .apply(
                        Batch::new()
                            .require_absent(guard(i))
                            .set(b"d".to_vec(), vec![2])
                    )
                    .is_err());
                store
                    .apply(
                        Batch::new()
                            .require_eq(guard(i), vec![i as u8])
                            .set(b"d".to_vec(), vec![3]),
                    )
                    .unwrap();
            }
            let cache = store.inner.guards.lock();
            assert!(cache.entries.len() <= super::MAX_GUARDS);
        }
    }
}
