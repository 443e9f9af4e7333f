//! The write path: the one primitive — plain batches, conditional batches and decided
//! writes (read, decided and checked under the exclusive side of the writer lock, guards
//! through the guard cache), a conditional single key as one sled compare-and-swap.

use crate::cache::{length_bit, GuardEntries};
use crate::SledStore;
use std::sync::atomic::Ordering;
use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};
use strata_store::{Batch, Decide, KvWrite, Mutation, Precondition, Result, StoreError};

impl SledStore {
    /// The exclusive side of `writers`, which holds the guard cache. A panic while it was
    /// held (inside sled, say) may have left an entry stale: the cache is emptied.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, GuardEntries> {
        self.writers.write().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            g.forget_all();
            self.writers.clear_poison();
            g
        })
    }

    /// The shared side of `writers` (plain writes; the guard cache is not read).
    fn shared(&self) -> RwLockReadGuard<'_, GuardEntries> {
        self.writers.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks `preconditions` and writes `mutations`. The caller holds the exclusive side
    /// of `writers`: `cache`.
    fn apply_conditional(
        &self,
        cache: &mut GuardEntries,
        mut mutations: Vec<Mutation>,
        preconditions: Vec<Precondition>,
    ) -> Result<()> {
        // Counted under the exclusive side of `writers`, so no other count runs at once: a
        // load and a store, not a locked read-modify-write.
        let checked = self.checks.load(Ordering::Relaxed);
        self.checks
            .store(checked + preconditions.len() as u64, Ordering::Relaxed);
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
                    self.check_guard(cache, p)?;
                }
            }
            if let Some(own) = own {
                // One traversal checks and writes the key; nothing else is written.
                if self.guards.lengths.load(Ordering::Acquire) & length_bit(key) != 0 {
                    cache.forget(key);
                }
                let expected = match own {
                    Precondition::Equals { value, .. } => Some(value.as_slice()),
                    Precondition::Absent { .. } => None,
                };
                return match mutations.pop() {
                    Some(Mutation::Set { key, value }) => self.cas(key, expected, Some(value)),
                    Some(Mutation::Delete { key }) => self.cas(key, expected, None),
                    None => Ok(()),
                };
            }
            // Several preconditions on the key itself: the general path below (the guard
            // preconditions were checked above; checking them again is cheap).
        }
        self.check_all(cache, &mutations, &preconditions)?;
        // A written key leaves the cache (it is filled again, from sled, when next
        // required): whatever the write's outcome, no entry can be stale.
        for m in &mutations {
            cache.forget(m.key());
        }
        self.write(mutations)
    }

    /// Checks `preconditions` of a batch writing `mutations`. The caller holds the
    /// exclusive side of `writers` and the guard cache.
    fn check_all(
        &self,
        cache: &mut GuardEntries,
        mutations: &[Mutation],
        preconditions: &[Precondition],
    ) -> Result<()> {
        // A set of the written keys only when there are many preconditions to sort out (a
        // batch whose row preconditions the write epoch vouched for has a few left).
        let written: Option<std::collections::HashSet<&[u8]>> =
            (preconditions.len() > 8).then(|| mutations.iter().map(Mutation::key).collect());
        let writes = |key: &[u8]| match &written {
            Some(set) => set.contains(key),
            None => mutations.iter().any(|m| m.key() == key),
        };
        for p in preconditions {
            if writes(p.key()) {
                let current = self.current(p.key())?;
                p.check(current.as_deref())?;
            } else {
                self.check_guard(cache, p)?;
            }
        }
        Ok(())
    }

    /// Checks a precondition on a key the batch does not write, through the guard cache
    /// (filled from sled on a miss). The caller holds the exclusive side of `writers`.
    fn check_guard(&self, cache: &mut GuardEntries, p: &Precondition) -> Result<()> {
        if let Some(current) = cache.get(p.key()) {
            return p.check(current.as_deref());
        }
        let current = self.current(p.key())?;
        let result = p.check(current.as_deref());
        cache.fill(&self.guards.lengths, p.key(), current.as_deref());
        result
    }

    /// One sled compare-and-swap of `key` from `old` (`None`: absent) to `new`. The
    /// caller holds `writers`: the exclusive side, or the shared side for a key that is
    /// not a cached guard (see [`SledStore::write_one_shared`]).
    fn cas(&self, key: Vec<u8>, old: Option<&[u8]>, new: Option<Vec<u8>>) -> Result<()> {
        let new = new.map(sled::IVec::from);
        let mut values = self.values.lock_key(&key);
        let result = match self.db.compare_and_swap(&key, old, new.clone()) {
            Ok(Ok(())) => {
                values.record(key, new);
                Ok(())
            }
            Ok(Err(e)) => {
                // Nothing was written, and sled reports the key's current value: with the
                // stripe locked no write of the key can land before it is recorded, so it
                // is exactly sled's value (a writer that guessed, see `Peek::Unread`,
                // reads it back from the cache).
                values.record(key.clone(), e.current.clone());
                drop(values);
                use strata_store::ConflictReason;
                let reason = match (old, e.current.as_deref()) {
                    (None, Some(_)) => ConflictReason::Present,
                    (Some(_), None) => ConflictReason::Missing,
                    // (Also a mismatch sled reported that the bytes do not show: a conflict
                    // all the same, nothing was written.)
                    _ => ConflictReason::Changed,
                };
                Err(StoreError::Conflict { key, reason })
            }
            Err(e) => {
                values.forget(&key);
                Err(self.error(e))
            }
        };
        // After the write (if any), under the writer lock.
        self.epoch.advance();
        result
    }

    /// The current value of `key`: the write cache's entry, else sled's.
    pub(crate) fn current(&self, key: &[u8]) -> Result<Option<sled::IVec>> {
        if let Some(v) = self.values.get(key) {
            return Ok(Some(v));
        }
        self.db.get(key).map_err(|e| self.error(e))
    }

    /// Writes `mutations` as one atomic sled call, then advances the write epoch. The
    /// caller holds `writers` (either side) until both are done.
    fn write(&self, mutations: Vec<Mutation>) -> Result<()> {
        let result = self.write_unstamped(mutations);
        // After the write, before the caller releases its side of the lock: a reader that
        // observes the new epoch reads what this write wrote (see `strata_store::epoch`).
        self.epoch.advance();
        result
    }

    /// Writes `mutations` as one atomic sled call, with the stripes of the write cache
    /// that hold its keys locked from before the call until its outcome is recorded.
    fn write_unstamped(&self, mut mutations: Vec<Mutation>) -> Result<()> {
        if mutations.len() <= 1 {
            // One key is atomic on its own. `Tree::apply_batch` takes sled's global write
            // lock and seals (and writes) the current log buffer twice to delimit the
            // batch; a single insert or remove needs neither (it is what the bulk pass's
            // checkpoint-only batches are).
            let (key, value) = match mutations.pop() {
                Some(Mutation::Set { key, value }) => (key, Some(sled::IVec::from(value))),
                Some(Mutation::Delete { key }) => (key, None),
                None => return Ok(()),
            };
            let mut values = self.values.lock_key(&key);
            let result = match &value {
                Some(v) => self.db.insert(&key, v.clone()),
                None => self.db.remove(&key),
            };
            return match result {
                Ok(_) => {
                    values.record(key, value);
                    Ok(())
                }
                Err(e) => {
                    values.forget(&key);
                    Err(self.error(e))
                }
            };
        }
        let mut values = self.values.lock_keys(mutations.iter().map(Mutation::key));
        let mut batch = sled::Batch::default();
        let mut written = Vec::with_capacity(mutations.len());
        for m in mutations {
            match m {
                Mutation::Set { key, value } => {
                    let value = sled::IVec::from(value);
                    batch.insert(key.as_slice(), value.clone());
                    written.push((key, Some(value)));
                }
                Mutation::Delete { key } => {
                    batch.remove(key.as_slice());
                    written.push((key, None));
                }
            }
        }
        let result = self.db.apply_batch(batch);
        let ok = result.is_ok();
        for (key, value) in written {
            values.record(key, if ok { value } else { None });
        }
        result.map_err(|e| self.error(e))
    }
}

/// How often [`SledStore::write_one_shared`] decides again after losing its key's
/// compare-and-swap to a concurrent writer of the same key, before it decides under the
/// exclusive side.
const SHARED_ATTEMPTS: usize = 16;

impl SledStore {
    /// A decided write of ONE key without the exclusive side of `writers`, so writers of
    /// different keys run in parallel: under the SHARED side, `reads[0]` (the key written)
    /// is read (write cache, else sled), every other key of `reads` is taken from the
    /// guard cache, the decision is made, the decided batch's guards are checked against
    /// the guard cache, and the key is written with one sled compare-and-swap over the
    /// value decided on (a concurrent writer of the same key makes it fail: read and
    /// decided again).
    ///
    /// Why this is the primitive's critical section all the same: the guard cache's
    /// entries change only under the exclusive side, which every write of a cached key
    /// takes (a conditional batch always, a plain batch whose key has a cached length,
    /// and this path refuses a key that is itself cached) — so no cached value read here
    /// can change before the write; and the compare-and-swap commits only over the very
    /// value decided on. The write linearizes at the compare-and-swap.
    ///
    /// `None` (nothing written, the decision's batch dropped) when the write does not fit
    /// — the batch writes another key or more than one, or requires or reads a key the
    /// guard cache does not hold (yet): the caller decides again under the exclusive side
    /// (which fills the cache), as the primitive's contract allows (a decision may be
    /// made more than once; only the last one's batch commits).
    fn write_one_shared(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<Option<bool>> {
        let Some((&key, others)) = reads.split_first() else {
            return Ok(None);
        };
        let cache = self.shared();
        if cache.get(key).is_some() || others.contains(&key) {
            return Ok(None);
        }
        // The other keys read: cached guards (stable while the shared side is held).
        let mut cached: Vec<Option<&[u8]>> = Vec::with_capacity(others.len());
        for k in others {
            match cache.get(k) {
                Some(v) => cached.push(v.as_deref()),
                None => return Ok(None),
            }
        }
        for _ in 0..SHARED_ATTEMPTS {
            let current = self.current(key)?;
            let decided = if cached.is_empty() {
                decide(&[current.as_deref()])
            } else {
                let mut values = Vec::with_capacity(reads.len());
                values.push(current.as_deref());
                values.extend_from_slice(&cached);
                decide(&values)
            };
            let Some(batch) = decided else {
                return Ok(Some(false));
            };
            match batch.mutations() {
                [m] if m.key() == key => {}
                [] if batch.preconditions().is_empty() => return Ok(Some(true)),
                _ => return Ok(None),
            }
            for p in batch.preconditions() {
                if p.key() != key && cache.get(p.key()).is_none() {
                    return Ok(None);
                }
            }
            self.checks
                .fetch_add(batch.preconditions().len() as u64, Ordering::Relaxed);
            for p in batch.preconditions() {
                if p.key() == key {
                    // The key's own precondition: checked on the value the
                    // compare-and-swap below requires.
                    p.check(current.as_deref())?;
                } else if let Some(value) = cache.get(p.key()) {
                    p.check(value.as_deref())?;
                }
            }
            let (mut mutations, _) = batch.into_parts();
            let new = match mutations.pop() {
                Some(Mutation::Set { value, .. }) => Some(value),
                _ => None,
            };
            match self.cas(key.to_vec(), current.as_deref(), new) {
                Ok(()) => return Ok(Some(true)),
                Err(StoreError::Conflict { key: k, .. }) if k == key => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// A batch (a write that reads nothing): a plain one takes the shared side of
    /// `writers`, a conditional one the exclusive side for its checks and its write.
    fn apply_batch(&self, batch: Batch) -> Result<()> {
        if batch.mutations().len() > 1 {
            // (One mutation cannot repeat a key.)
            batch.validate()?;
        }
        if batch.preconditions().is_empty() {
            let (mutations, _) = batch.into_parts();
            if mutations.is_empty() {
                return Ok(());
            }
            let shared = self.shared();
            // A plain write of a cached guard key drops it from the cache, which only the
            // exclusive side may change: such a write takes that side instead (its keys'
            // lengths are read under the shared side, where no guard can be cached).
            let cached = self.guards.lengths.load(Ordering::Acquire);
            if cached != 0 && mutations.iter().any(|m| length_bit(m.key()) & cached != 0) {
                drop(shared);
                let mut cache = self.exclusive();
                for m in &mutations {
                    cache.forget(m.key());
                }
                return self.write(mutations);
            }
            self.write(mutations)
        } else {
            // Exclusive: no other write lands between the checks and the write.
            let mut cache = self.exclusive();
            // Exclusive, so the epoch cannot move under the comparison: preconditions
            // observed at the current epoch are known to hold and are not read again.
            let (mutations, preconditions) = batch.into_parts_to_check(&self.epoch);
            self.apply_conditional(&mut cache, mutations, preconditions)
        }
    }
}

/// The write primitive. A write that reads keys is one critical section: the exclusive
/// side of `writers` (which every writer of the datastore takes, see the crate
/// documentation) is held while the keys are read (the write cache, else sled), the
/// decision is made, the decided batch's guards are checked (through the guard cache)
/// and its mutations written — no other write can land in between, so the values read
/// need no precondition of their own. A write that reads nothing is a batch
/// (`SledStore::apply_batch`).
impl KvWrite for SledStore {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        let written = self.decide_and_write(reads, decide)?;
        if written && self.flush_each_write {
            self.flush()?;
        }
        Ok(written)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map(drop).map_err(|e| self.error(e))
    }
}

impl SledStore {
    /// [`KvWrite::read_modify_write`] without the flush of [`SledDurability::Immediate`].
    ///
    /// [`SledDurability::Immediate`]: crate::SledDurability::Immediate
    fn decide_and_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        self.writable()?;
        if reads.is_empty() {
            let Some(batch) = decide(&[]) else {
                return Ok(false);
            };
            return self.apply_batch(batch).map(|()| true);
        }
        if let Some(written) = self.write_one_shared(reads, decide)? {
            return Ok(written);
        }
        let mut cache = self.exclusive();
        let mut current = Vec::with_capacity(reads.len());
        for key in reads {
            current.push(self.current(key)?);
        }
        let values: Vec<Option<&[u8]>> = current.iter().map(|v| v.as_deref()).collect();
        let Some(batch) = decide(&values) else {
            return Ok(false);
        };
        drop(values);
        if batch.mutations().len() > 1 {
            batch.validate()?;
        }
        // A write of the shape `write_one_shared` serves (it writes the first key read,
        // alone): the other keys it read (a deploy-window record, say) are guards of the
        // next such write, cached so that write can take the shared side.
        if matches!(batch.mutations(), [m] if reads.first() == Some(&m.key())) {
            for (key, value) in reads.iter().zip(&current).skip(1) {
                cache.fill(&self.guards.lengths, key, value.as_deref());
            }
        }
        if batch.is_empty() {
            return Ok(true);
        }
        let (mutations, preconditions) = batch.into_parts_to_check(&self.epoch);
        self.apply_conditional(&mut cache, mutations, preconditions)
            .map(|()| true)
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
        assert!(store.exclusive().get(b"f").is_some());
        store
            .apply(Batch::new().set(b"f".to_vec(), b"A".to_vec()))
            .unwrap();
        assert!(store.exclusive().get(b"f").is_none());
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
