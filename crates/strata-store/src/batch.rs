//! Atomic write batches with optional preconditions.

use crate::{EpochClock, Result, StoreError, WriteEpoch};
use std::collections::HashSet;

/// One write of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Set `key` to `value`.
    Set {
        /// The key.
        key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
    },
    /// Delete `key` (deleting an absent key is not an error).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

impl Mutation {
    /// The key this mutation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            Mutation::Set { key, .. } | Mutation::Delete { key } => key,
        }
    }

    /// Bytes this mutation costs against a byte budget: key + value for a set, key for a
    /// delete.
    pub fn size(&self) -> usize {
        match self {
            Mutation::Set { key, value } => key.len() + value.len(),
            Mutation::Delete { key } => key.len(),
        }
    }
}

/// A condition that must hold, when the batch is applied, for any of it to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// `key` holds exactly `value`.
    Equals {
        /// The key.
        key: Vec<u8>,
        /// The value it must hold.
        value: Vec<u8>,
    },
    /// `key` is absent.
    Absent {
        /// The key.
        key: Vec<u8>,
    },
}

impl Precondition {
    /// The key this precondition reads.
    pub fn key(&self) -> &[u8] {
        match self {
            Precondition::Equals { key, .. } | Precondition::Absent { key } => key,
        }
    }

    /// Checks the precondition against the current value of its key.
    pub fn check(&self, current: Option<&[u8]>) -> Result<()> {
        let reason = match (self, current) {
            (Precondition::Absent { .. }, None) => return Ok(()),
            (Precondition::Absent { .. }, Some(_)) => crate::ConflictReason::Present,
            (Precondition::Equals { .. }, None) => crate::ConflictReason::Missing,
            (Precondition::Equals { value, .. }, Some(cur)) if cur == value.as_slice() => {
                return Ok(())
            }
            (Precondition::Equals { .. }, Some(_)) => crate::ConflictReason::Changed,
        };
        Err(StoreError::Conflict {
            key: self.key().to_vec(),
            reason,
        })
    }
}

/// The commonest conditional write: one key set (or deleted) over the value it must hold
/// now, plus preconditions on other keys (*guards*: a fence record, a keyring) that must
/// hold too — a document written over the bytes it was read with.
/// [`KvWrite::compare_and_swap`](crate::KvWrite::compare_and_swap) applies exactly
/// [`KeyWrite::into_batch`].
///
/// ```
/// use strata_store::{KeyWrite, KvRead, KvWrite, MemoryStore, Store};
/// # fn main() -> Result<(), strata_store::StoreError> {
/// let store = Store::new(MemoryStore::new());
/// store.compare_and_swap(KeyWrite::set(b"t/k".to_vec(), None, b"1".to_vec()))?;
/// let stale = KeyWrite::set(b"t/k".to_vec(), None, b"2".to_vec());
/// assert!(store.compare_and_swap(stale).unwrap_err().is_conflict());
/// assert_eq!(store.get(b"t/k")?, Some(b"1".to_vec()));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWrite {
    /// The key written, and required.
    pub key: Vec<u8>,
    /// What `key` must hold: exactly these bytes (`Some`), or nothing (`None`: absent).
    pub expected: Option<Vec<u8>>,
    /// What `key` is set to (`None`: it is deleted).
    pub new: Option<Vec<u8>>,
    /// Preconditions on other keys, checked before the key's own. (A guard on `key`
    /// itself is allowed and checked as in a batch, on the general path.)
    pub guards: Vec<Precondition>,
}

impl KeyWrite {
    /// Sets `key` to `new` if it holds `expected` (`None`: if it is absent); no guards.
    pub fn set(key: Vec<u8>, expected: Option<Vec<u8>>, new: Vec<u8>) -> Self {
        KeyWrite {
            key,
            expected,
            new: Some(new),
            guards: Vec::new(),
        }
    }

    /// Deletes `key` if it holds `expected`; no guards.
    pub fn delete(key: Vec<u8>, expected: Vec<u8>) -> Self {
        KeyWrite {
            key,
            expected: Some(expected),
            new: None,
            guards: Vec::new(),
        }
    }

    /// Also requires `guard`.
    pub fn guard(mut self, guard: Precondition) -> Self {
        self.guards.push(guard);
        self
    }

    /// The same write as a [`Batch`]: the guards, then the key's own precondition; one
    /// mutation.
    pub fn into_batch(self) -> Batch {
        let KeyWrite {
            key,
            expected,
            new,
            mut guards,
        } = self;
        guards.push(match expected {
            Some(value) => Precondition::Equals {
                key: key.clone(),
                value,
            },
            None => Precondition::Absent { key: key.clone() },
        });
        let m = match new {
            Some(value) => Mutation::Set { key, value },
            None => Mutation::Delete { key },
        };
        Batch::from_parts(vec![m], guards)
    }
}

/// An atomic group of writes: either every mutation is applied or none is.
///
/// Built with chained calls:
///
/// ```
/// use strata_store::Batch;
/// let batch = Batch::new()
///     .require_absent(b"k".to_vec())
///     .set(b"k".to_vec(), b"v".to_vec())
///     .delete(b"old".to_vec());
/// assert_eq!(batch.mutations().len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    mutations: Vec<Mutation>,
    preconditions: Vec<Precondition>,
    /// The first `count` preconditions were read after `epoch` was observed.
    observed: Option<Observed>,
    /// Set by [`Batch::copying_records`]: the [`Store`](crate::Store) handle does not
    /// refuse its keys over [`MAX_KEY_BYTES`].
    copying: bool,
}

/// See [`Batch::observed_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Observed {
    epoch: WriteEpoch,
    count: usize,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `mutations` mutations.
    pub fn with_capacity(mutations: usize) -> Self {
        Batch {
            mutations: Vec::with_capacity(mutations),
            ..Self::default()
        }
    }

    /// Adds a set.
    pub fn set(mut self, key: Vec<u8>, value: Vec<u8>) -> Self {
        self.push(Mutation::Set { key, value });
        self
    }

    /// Adds a delete.
    pub fn delete(mut self, key: Vec<u8>) -> Self {
        self.push(Mutation::Delete { key });
        self
    }

    /// Requires `key` to hold exactly `value`.
    pub fn require_eq(mut self, key: Vec<u8>, value: Vec<u8>) -> Self {
        self.preconditions.push(Precondition::Equals { key, value });
        self
    }

    /// Requires `key` to be absent.
    pub fn require_absent(mut self, key: Vec<u8>) -> Self {
        self.preconditions.push(Precondition::Absent { key });
        self
    }

    /// Requires `key` to hold `value` (`Some`) or to be absent (`None`).
    pub fn require(self, key: Vec<u8>, value: Option<Vec<u8>>) -> Self {
        match value {
            Some(v) => self.require_eq(key, v),
            None => self.require_absent(key),
        }
    }

    /// Adds a mutation in place.
    pub fn push(&mut self, m: Mutation) {
        self.mutations.push(m);
    }

    /// Adds a precondition in place.
    pub fn push_precondition(&mut self, p: Precondition) {
        self.preconditions.push(p);
    }

    /// Appends all mutations and preconditions of `other`. `other`'s
    /// [observation](Batch::observed_at) carries over only into a batch that has no
    /// precondition yet.
    pub fn extend(&mut self, other: Batch) {
        if self.preconditions.is_empty() {
            self.observed = other.observed;
        }
        self.mutations.extend(other.mutations);
        self.preconditions.extend(other.preconditions);
    }

    /// Declares that every precondition pushed **so far** states what the caller read
    /// from the store this batch will be applied to, after it observed `epoch` there
    /// ([`Capabilities::write_epoch`](crate::Capabilities::write_epoch)) — for example the bytes of
    /// each row of a page scanned after the observation. A backend whose epoch is still
    /// `epoch` when it applies the batch knows that nothing was written since, so those
    /// preconditions hold and need not be read again; preconditions pushed later are
    /// always checked (see [`crate::epoch`] for the ordering argument).
    ///
    /// Declaring it for a value not read after the observation (one remembered from an
    /// earlier read, or computed) would let a stale precondition pass: don't.
    pub fn observed_at(&mut self, epoch: WriteEpoch) {
        self.observed = Some(Observed {
            epoch,
            count: self.preconditions.len(),
        });
    }

    /// The epoch declared with [`Batch::observed_at`] and how many of the first
    /// preconditions it covers.
    pub fn observed(&self) -> Option<(WriteEpoch, usize)> {
        self.observed.map(|o| (o.epoch, o.count))
    }

    /// The mutations in order.
    pub fn mutations(&self) -> &[Mutation] {
        &self.mutations
    }

    /// The preconditions.
    pub fn preconditions(&self) -> &[Precondition] {
        &self.preconditions
    }

    /// Splits the batch into its parts (every precondition: the
    /// [observation](Batch::observed_at) is dropped).
    pub fn into_parts(self) -> (Vec<Mutation>, Vec<Precondition>) {
        (self.mutations, self.preconditions)
    }

    /// Splits the batch into its mutations and the preconditions the backend must still
    /// check: all of them, unless the batch was [observed](Batch::observed_at) at an epoch
    /// `clock` says is still current — then the observed ones are left out. Call only
    /// while holding the writer lock exclusively (see [`crate::epoch`]).
    pub fn into_parts_to_check(self, clock: &EpochClock) -> (Vec<Mutation>, Vec<Precondition>) {
        let mut preconditions = self.preconditions;
        if let Some(o) = self.observed {
            if o.count > 0 && clock.unchanged_since(o.epoch) {
                preconditions.drain(..o.count.min(preconditions.len()));
            }
        }
        (self.mutations, preconditions)
    }

    /// Reassembles a batch from its parts (no [observation](Batch::observed_at)).
    pub fn from_parts(mutations: Vec<Mutation>, preconditions: Vec<Precondition>) -> Self {
        Batch {
            mutations,
            preconditions,
            observed: None,
            copying: false,
        }
    }

    /// Splits the batch like [`Batch::into_parts_to_check`] but keeps every precondition:
    /// the first `n` returned (`n` the third value) need no check. The caller can
    /// reassemble the batch ([`Batch::from_parts`]) to hand it back. Call only while
    /// holding the writer lock exclusively (see [`crate::epoch`]).
    pub fn into_parts_observed(
        self,
        clock: &EpochClock,
    ) -> (Vec<Mutation>, Vec<Precondition>, usize) {
        let skip = match self.observed {
            Some(o) if o.count > 0 && clock.unchanged_since(o.epoch) => {
                o.count.min(self.preconditions.len())
            }
            _ => 0,
        };
        (self.mutations, self.preconditions, skip)
    }

    /// True when the batch has no mutations and no preconditions.
    pub fn is_empty(&self) -> bool {
        self.mutations.is_empty() && self.preconditions.is_empty()
    }

    /// Bytes the mutations cost against a byte budget.
    pub fn size(&self) -> usize {
        self.mutations.iter().map(Mutation::size).sum()
    }

    /// Marks a batch that writes records copied as they are from another store (`strata
    /// copy`): the [`Store`](crate::Store) handle then keeps keys longer than
    /// [`MAX_KEY_BYTES`] that an older build or another tool stored in a redb or sled
    /// datastore, so a copy between embedded backends loses no record. The PostgreSQL
    /// backend still refuses them ([`StoreError::KeyTooLong`]): its index cannot hold
    /// them. Nothing else should use it.
    pub fn copying_records(mut self) -> Self {
        self.copying = true;
        self
    }

    /// True for a batch marked with [`Batch::copying_records`].
    pub fn is_copying_records(&self) -> bool {
        self.copying
    }

    /// Rejects a batch that sets a key longer than [`MAX_KEY_BYTES`]
    /// ([`StoreError::KeyTooLong`]), whatever [`Batch::copying_records`] says. Every
    /// write through a [`Store`](crate::Store) handle is checked (except a copy's
    /// records), and the PostgreSQL backend checks every batch, so a long key gets the same
    /// error on every backend.
    pub fn check_key_lengths(&self) -> Result<()> {
        for m in &self.mutations {
            if let Mutation::Set { key, .. } = m {
                check_key_length(key)?;
            }
        }
        Ok(())
    }

    /// Rejects a batch that writes the same key twice (set twice, set and deleted, deleted
    /// twice): its meaning would depend on order. Every backend calls this before applying.
    pub fn validate(&self) -> Result<()> {
        // Keys in strictly increasing order (a bulk load's usual order) are distinct: one
        // comparison each, no set.
        if self.mutations.windows(2).all(|w| w[0].key() < w[1].key()) {
            return Ok(());
        }
        let mut seen = HashSet::with_capacity(self.mutations.len());
        for m in &self.mutations {
            if !seen.insert(m.key()) {
                return Err(StoreError::DuplicateKey {
                    key: m.key().to_vec(),
                });
            }
        }
        Ok(())
    }
}

/// The longest key of a strata record, on every backend: PostgreSQL's btree index refuses
/// an index row over about 2,704 bytes (a third of a page), so keys are held below it with
/// room for the row's own overhead. Every write through a [`Store`](crate::Store) handle
/// (and so every write of strata: collections, migrations, sweeps, the CLI) refuses a
/// longer key on every backend ([`StoreError::KeyTooLong`], before the backend sees it);
/// the PostgreSQL backend refuses it in any batch. Longer keys already stored in a redb or
/// sled datastore (by an older build, or another tool through the backend's own API) stay
/// readable, and `strata copy` keeps them between embedded backends
/// ([`Batch::copying_records`]).
pub const MAX_KEY_BYTES: usize = 2048;

/// Refuses a key longer than [`MAX_KEY_BYTES`] with [`StoreError::KeyTooLong`].
pub fn check_key_length(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(StoreError::KeyTooLong {
            key: key.to_vec(),
            len: key.len(),
            limit: MAX_KEY_BYTES,
        });
    }
    Ok(())
}
