//! The write paths: plain batches, conditional batches (checked under the exclusive side
//! of the writer lock, through the guard cache) and the single-key compare-and-swap.

use crate::cache::{length_bit, GuardEntries};
use crate::SledStore;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use strata_store::{Batch, KvWrite, Mutation, Precondition, Result, StoreError};

impl SledStore {
    /// Checks `preconditions` and writes `mutations`. The caller holds the exclusive side
    /// of `writers`.
    fn apply_conditional(
        &self,
        mut mutations: Vec<Mutation>,
        preconditions: Vec<Precondition>,
    ) -> Result<()> {
        let mut cache = self.guards.lock();
        if let [only] = mutations.as_slice() {
            let key = only.key();
            let mut own = None;
            for p in &preconditions {
                if p.key() == key {
                    if own.is_some() {
                        own = None;
                        break;
                    }
                    own = Some(p);
                } else {
                    self.check_guard(&mut cache, p)?;
                }
            }
            if let Some(own) = own {
                // One traversal checks and writes the key; nothing else is written.
                cache.forget(key);
                return match mutations.pop() {
                    Some(Mutation::Set { key, value }) => self.cas(own, &key, Some(value)),
                    Some(Mutation::Delete { key }) => self.cas(own, &key, None),
                    None => Ok(()),
                };
            }
            // Several preconditions on the key itself: the general path below (the guard
            // preconditions were checked above; checking them again is cheap).
        }
        let written: std::collections::HashSet<&[u8]> =
            mutations.iter().map(Mutation::key).collect();
        for p in &preconditions {
            if written.contains(p.key()) {
                let current = self.db.get(p.key()).map_err(|e| self.error(e))?;
                p.check(current.as_deref())?;
            } else {
                self.check_guard(&mut cache, p)?;
            }
        }
        // A written key leaves the cache (it is filled again, from sled, when next
        // required): whatever the write's outcome, no entry can be stale.
        for m in &mutations {
            cache.forget(m.key());
        }
        self.write(mutations)
    }

    /// Checks a precondition on a key the batch does not write, through the guard cache
    /// (filled from sled on a miss). The caller holds the exclusive side of `writers`.
    fn check_guard(&self, cache: &mut GuardEntries, p: &Precondition) -> Result<()> {
        if let Some(current) = cache.get(p.key()) {
            return p.check(current.as_deref());
        }
        let current = self.db.get(p.key()).map_err(|e| self.error(e))?;
        let result = p.check(current.as_deref());
        cache.fill(&self.guards.lengths, p.key(), current.as_deref());
        result
    }

    /// One sled compare-and-swap of `key` from what `own` requires to `new`.
    fn cas(&self, own: &Precondition, key: &[u8], new: Option<Vec<u8>>) -> Result<()> {
        let old = match own {
            Precondition::Equals { value, .. } => Some(value.as_slice()),
            Precondition::Absent { .. } => None,
        };
        match self
            .db
            .compare_and_swap(key, old, new)
            .map_err(|e| self.error(e))?
        {
            Ok(()) => Ok(()),
            Err(e) => {
                own.check(e.current.as_deref())?;
                // sled reported a mismatch the precondition does not see: report it as a
                // conflict all the same (nothing was written).
                Err(StoreError::Conflict {
                    key: key.to_vec(),
                    reason: strata_store::ConflictReason::Changed,
                })
            }
        }
    }

    /// Writes `mutations` as one atomic sled call. The caller holds `writers`.
    fn write(&self, mut mutations: Vec<Mutation>) -> Result<()> {
        if mutations.len() <= 1 {
            // One key is atomic on its own. `Tree::apply_batch` takes sled's global write
            // lock and seals (and writes) the current log buffer twice to delimit the
            // batch; a single insert or remove needs neither (it is what the bulk pass's
            // checkpoint-only batches are).
            let result = match mutations.pop() {
                Some(Mutation::Set { key, value }) => self.db.insert(key, value).map(drop),
                Some(Mutation::Delete { key }) => self.db.remove(key).map(drop),
                None => Ok(()),
            };
            return result.map_err(|e| self.error(e));
        }
        let mut batch = sled::Batch::default();
        for m in mutations {
            match m {
                Mutation::Set { key, value } => batch.insert(key, value),
                Mutation::Delete { key } => batch.remove(key),
            }
        }
        self.db.apply_batch(batch).map_err(|e| self.error(e))
    }
}

impl KvWrite for SledStore {
    fn apply(&self, batch: Batch) -> Result<()> {
        if batch.mutations().len() > 1 {
            // (One mutation cannot repeat a key.)
            batch.validate()?;
        }
        let (mutations, preconditions) = batch.into_parts();
        if preconditions.is_empty() {
            if mutations.is_empty() {
                return Ok(());
            }
            let _shared = self.writers.read().unwrap_or_else(PoisonError::into_inner);
            // A plain write of a cached guard key drops it from the cache (before the
            // shared side is released, so no conditional batch sees it stale).
            let cached = self.guards.lengths.load(Ordering::Acquire);
            if cached != 0 && mutations.iter().any(|m| length_bit(m.key()) & cached != 0) {
                let mut cache = self.guards.lock();
                for m in &mutations {
                    cache.forget(m.key());
                }
            }
            self.write(mutations)
        } else {
            // Exclusive: no other write lands between the checks and the write.
            let _exclusive = self.writers.write().unwrap_or_else(PoisonError::into_inner);
            self.apply_conditional(mutations, preconditions)
        }
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map(drop).map_err(|e| self.error(e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use strata_store::KvRead;

    #[test]
    fn single_mutation_batches_apply_and_keep_the_batch_rules() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        store
            .apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()))
            .unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), Some(b"1".to_vec()));
        store
            .apply(Batch::new().set(b"t/a".to_vec(), b"2".to_vec()))
            .unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), Some(b"2".to_vec()));
        store.apply(Batch::new().delete(b"t/a".to_vec())).unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), None);
        // Deleting an absent key is not an error; an empty batch writes nothing.
        store.apply(Batch::new().delete(b"t/a".to_vec())).unwrap();
        store.apply(Batch::new()).unwrap();
        // A failed precondition still refuses a one-mutation batch.
        let err = store
            .apply(
                Batch::new()
                    .require_eq(b"t/b".to_vec(), b"x".to_vec())
                    .set(b"t/b".to_vec(), b"y".to_vec()),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        assert_eq!(store.get(b"t/b").unwrap(), None);
        // Survives a reopen once flushed.
        store
            .apply(Batch::new().set(b"t/c".to_vec(), b"3".to_vec()))
            .unwrap();
        store.flush().unwrap();
        drop(store);
        let store = SledStore::open_existing(dir.path().join("db")).unwrap();
        assert_eq!(store.get(b"t/c").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn guard_cache_follows_every_write_of_a_guard_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        let guarded = |fence: Option<&[u8]>, doc: &[u8]| {
            Batch::new()
                .require(b"f".to_vec(), fence.map(<[u8]>::to_vec))
                .set(b"t/doc".to_vec(), doc.to_vec())
        };
        // Absent guard: cached as absent, then a plain write changes it.
        store.apply(guarded(None, b"1")).unwrap();
        assert!(store.guards.lock().get(b"f").is_some());
        store
            .apply(Batch::new().set(b"f".to_vec(), b"A".to_vec()))
            .unwrap();
        assert!(store.guards.lock().get(b"f").is_none());
        let err = store.apply(guarded(None, b"2")).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { ref key, .. } if key == b"f"),
            "{err}"
        );
        store.apply(guarded(Some(b"A"), b"2")).unwrap();
        // A conditional write of the guard key (a compare-and-swap) is seen too.
        store
            .apply(
                Batch::new()
                    .require_eq(b"f".to_vec(), b"A".to_vec())
                    .set(b"f".to_vec(), b"B".to_vec()),
            )
            .unwrap();
        assert!(store.apply(guarded(Some(b"A"), b"3")).is_err());
        store.apply(guarded(Some(b"B"), b"3")).unwrap();
        // A multi-key batch deleting it, through a clone of the store.
        store
            .clone()
            .apply(
                Batch::new()
                    .require_eq(b"t/doc".to_vec(), b"3".to_vec())
                    .delete(b"f".to_vec())
                    .set(b"t/other".to_vec(), b"x".to_vec()),
            )
            .unwrap();
        assert!(store.apply(guarded(Some(b"B"), b"4")).is_err());
        store.apply(guarded(None, b"4")).unwrap();
        assert_eq!(store.get(b"t/doc").unwrap(), Some(b"4".to_vec()));
        assert_eq!(store.get(b"f").unwrap(), None);
    }

    #[test]
    fn a_single_key_compare_and_swap_reports_the_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        let put = |old: Option<&[u8]>, new: &[u8]| {
            store.apply(
                Batch::new()
                    .require(b"t/k".to_vec(), old.map(<[u8]>::to_vec))
                    .set(b"t/k".to_vec(), new.to_vec()),
            )
        };
        put(None, b"1").unwrap();
        let reason = |e: StoreError| match e {
            StoreError::Conflict { reason, .. } => reason,
            other => panic!("{other}"),
        };
        assert_eq!(
            reason(put(None, b"2").unwrap_err()),
            strata_store::ConflictReason::Present
        );
        assert_eq!(
            reason(put(Some(b"0"), b"2").unwrap_err()),
            strata_store::ConflictReason::Changed
        );
        put(Some(b"1"), b"2").unwrap();
        let del = Batch::new()
            .require_eq(b"t/k".to_vec(), b"2".to_vec())
            .delete(b"t/k".to_vec());
        store.apply(del.clone()).unwrap();
        assert_eq!(
            reason(store.apply(del).unwrap_err()),
            strata_store::ConflictReason::Missing
        );
        assert_eq!(store.get(b"t/k").unwrap(), None);
    }
}
