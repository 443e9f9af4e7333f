//! The in-memory backend.

use crate::{
    Backend, Capabilities, Decide, EpochClock, KvRead, KvWrite, Mutation, Result, ScanLimits,
    Visit, VisitBudget, VisitEnd,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// An ordered in-memory backend (a `BTreeMap` behind a lock). Clones share the data.
///
/// Every write takes the map's lock exclusively, so the store keeps a
/// [write epoch](crate::epoch): a batch whose preconditions were
/// [observed](crate::Batch::observed_at) at the current epoch skips checking them.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    map: Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>,
    epoch: Arc<EpochClock>,
    checks: Arc<AtomicU64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys (all prefixes).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// A copy of every record, for tests and fixtures.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.read().clone()
    }

    /// How many preconditions the store has checked against stored values so far (all
    /// clones): the ones a current [write epoch](crate::epoch) vouched for are not
    /// counted. For tests and diagnostics.
    pub fn precondition_checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl KvRead for MemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.read().get(key).cloned())
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let map = self.read();
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let mut budget = VisitBudget::new(limits);
        for (k, v) in map.range::<[u8], _>((start, Bound::Unbounded)) {
            if !k.starts_with(prefix) {
                break;
            }
            if !budget.admit(k, v.len())? || visit(k, v) == Visit::Stop {
                return Ok(budget.more());
            }
        }
        Ok(budget.exhausted())
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            write_epoch: Some(&self.epoch),
            decides_once: true,
            ..Capabilities::default()
        }
    }
}

impl KvWrite for MemoryStore {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        // Exclusive for the read, the decision and the commit: no other write lands
        // between them, and the epoch cannot move under the comparison.
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let values: Vec<Option<&[u8]>> = reads
            .iter()
            .map(|k| map.get(*k).map(Vec::as_slice))
            .collect();
        let Some(batch) = decide(&values) else {
            return Ok(false);
        };
        batch.validate()?;
        let (mutations, preconditions) = batch.into_parts_to_check(&self.epoch);
        self.checks
            .fetch_add(preconditions.len() as u64, Ordering::Relaxed);
        for p in &preconditions {
            p.check(map.get(p.key()).map(Vec::as_slice))?;
        }
        for m in mutations {
            match m {
                Mutation::Set { key, value } => {
                    map.insert(key, value);
                }
                Mutation::Delete { key } => {
                    map.remove(&key);
                }
            }
        }
        // After the write, before the lock is released.
        self.epoch.advance();
        Ok(true)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

impl Backend for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{Batch, StoreError};

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    /// A conditional rewrite of `key` over the bytes read after observing the epoch.
    fn rewrite_observed(store: &MemoryStore, key: &str, new: &[u8]) -> (Batch, Vec<u8>) {
        let epoch = store.capabilities().write_epoch().unwrap();
        let old = store.get(&k(key)).unwrap().unwrap();
        let mut b = Batch::new().require_eq(k(key), old.clone());
        b.observed_at(epoch);
        (b.set(k(key), new.to_vec()), old)
    }

    #[test]
    fn observed_preconditions_are_not_checked_while_nothing_was_written() {
        let store = MemoryStore::new();
        store.apply(Batch::new().set(k("a"), k("1"))).unwrap();
        store.apply(Batch::new().set(k("g"), k("G"))).unwrap();
        let checks = store.precondition_checks();
        let (b, _) = rewrite_observed(&store, "a", b"2");
        // A precondition added after the observation is still checked.
        let b = b.require_eq(k("g"), k("G"));
        assert_eq!(b.observed().map(|(_, n)| n), Some(1));
        store.apply(b).unwrap();
        assert_eq!(store.precondition_checks(), checks + 1);
        assert_eq!(store.get(b"a").unwrap(), Some(k("2")));
    }

    #[test]
    fn a_write_between_the_read_and_the_commit_still_conflicts() {
        let store = MemoryStore::new();
        store.apply(Batch::new().set(k("a"), k("1"))).unwrap();
        let (b, _) = rewrite_observed(&store, "a", b"2");
        // Another writer (a clone) changes the row after the read.
        store
            .clone()
            .apply(Batch::new().set(k("a"), k("other")))
            .unwrap();
        let checks = store.precondition_checks();
        let err = store.apply(b).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { ref key, .. } if key == b"a"),
            "{err}"
        );
        assert_eq!(store.precondition_checks(), checks + 1);
        assert_eq!(store.get(b"a").unwrap(), Some(k("other")));

        // A write elsewhere only costs the check: the row still holds what was read.
        let (b, _) = rewrite_observed(&store, "a", b"3");
        store.apply(Batch::new().set(k("z"), k("x"))).unwrap();
        let checks = store.precondition_checks();
        store.apply(b).unwrap();
        assert_eq!(store.precondition_checks(), checks + 1);
        assert_eq!(store.get(b"a").unwrap(), Some(k("3")));
    }

    #[test]
    fn an_epoch_observed_on_another_store_vouches_for_nothing() {
        let (one, two) = (MemoryStore::new(), MemoryStore::new());
        one.apply(Batch::new().set(k("a"), k("1"))).unwrap();
        two.apply(Batch::new().set(k("a"), k("other"))).unwrap();
        // Both stores are at epoch 1; the one from `one` must not pass on `two`.
        let (b, _) = rewrite_observed(&one, "a", b"2");
        assert!(two.apply(b).unwrap_err().is_conflict());
        assert_eq!(two.get(b"a").unwrap(), Some(k("other")));
    }

    #[test]
    fn extend_keeps_an_observation_only_as_a_prefix() {
        let store = MemoryStore::new();
        store.apply(Batch::new().set(k("a"), k("1"))).unwrap();
        let (observed, _) = rewrite_observed(&store, "a", b"2");
        let mut empty = Batch::new();
        empty.extend(observed.clone());
        assert!(empty.observed().is_some());
        let mut guarded = Batch::new().require_absent(k("x"));
        guarded.extend(observed);
        assert_eq!(guarded.observed(), None);
        let (m, p) = guarded.into_parts();
        assert_eq!((m.len(), p.len()), (1, 2));
    }

    #[test]
    fn concurrent_observed_increments_lose_no_update() {
        const THREADS: usize = 4;
        const EACH: u64 = 300;
        let store = MemoryStore::new();
        store.apply(Batch::new().set(k("n"), k("0"))).unwrap();
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    let mut done = 0;
                    while done < EACH {
                        let epoch = store.capabilities().write_epoch().unwrap();
                        let old = store.get(b"n").unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&old).unwrap().parse().unwrap();
                        // Let the others run between the read and the commit.
                        std::thread::yield_now();
                        let mut b = Batch::new().require_eq(k("n"), old);
                        b.observed_at(epoch);
                        match store.apply(b.set(k("n"), (n + 1).to_string().into_bytes())) {
                            Ok(()) => done += 1,
                            Err(e) if e.is_conflict() => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                });
            }
        });
        let total = THREADS as u64 * EACH;
        assert_eq!(
            store.get(b"n").unwrap(),
            Some(total.to_string().into_bytes())
        );
    }
}
