//! The capability traits every backend implements.

use crate::{Batch, KeyWrite, Result, ScanLimits, ScanPage};

/// Reading: point lookups and bounded, cursor-resumed prefix scans.
pub trait KvRead {
    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Records whose key starts with `prefix` and is strictly greater than `after` (when
    /// given), in ascending byte order, bounded by `limits`:
    ///
    /// * at most `max_records` records;
    /// * the sum of key+value lengths never exceeds `max_bytes`: the scan stops *before*
    ///   the record that would overflow (the first record is always taken when it fits);
    /// * a record whose key+value alone exceeds `max_bytes` is
    ///   [`StoreError::RecordTooLarge`](crate::StoreError::RecordTooLarge), raised before
    ///   its value is copied (when it is the first record of the page; otherwise the page
    ///   ends before it and the next page reports it).
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage>;

    /// True when at least one key starts with `prefix`.
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool>;

    /// The backend's current write epoch, observed by a caller about to read values it
    /// will write back only if they are unchanged (see [`Batch::observed_at`] and
    /// [`crate::epoch`]). `None` (the default) for a backend that keeps no epoch — one
    /// whose writers are not all ordered by one in-process lock, such as PostgreSQL —
    /// and for wrappers that do not forward it: their batches' preconditions are all
    /// checked.
    fn write_epoch(&self) -> Option<crate::WriteEpoch> {
        None
    }

    /// What the backend knows of `key` without reading the store itself: its value, or
    /// [`Peek::Unread`] when learning it would take a read that a writer may skip by
    /// trying its conditional write on a guess first. The default reads
    /// ([`Peek::Value`] of [`KvRead::get`]): a backend answers `Unread` only when it keeps
    /// the promise documented on that variant.
    fn peek(&self, key: &[u8]) -> Result<Peek> {
        self.get(key).map(Peek::Value)
    }

    /// The records [`KvRead::scan`] would return, handed to `visit` one at a time as
    /// borrowed slices (no copy where the backend can avoid one), in order, under the same
    /// limits and errors. `visit` may end the page early with [`Visit::Stop`] (the record
    /// it just saw counts as taken). The default implementation goes through `scan`.
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        Ok(self.scan(prefix, after, limits)?.visit(visit))
    }
}

/// What [`KvRead::peek`] knows of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek {
    /// The key's current value (`None`: absent), exactly what [`KvRead::get`] returns.
    Value(Option<Vec<u8>>),
    /// Not known without a read of the store. The backend promises that a batch
    /// conditioned on this key that fails on the key's own precondition costs about what
    /// the read would have, and that it leaves the key's current value where the next
    /// [`KvRead::get`] of it is served without reading the store (when the value fits the
    /// backend's memory bounds). So a writer may apply its batch conditioned on a guess
    /// (typically "absent") and read only after a conflict on that key: never more reads
    /// of the store than reading first.
    Unread,
}

/// What a [`KvRead::scan_visit`] visitor wants after a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Hand over the next record.
    Continue,
    /// End the page here.
    Stop,
}

/// How a [`KvRead::scan_visit`] page ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisitEnd {
    /// Records handed to the visitor.
    pub records: usize,
    /// True when the page stopped before the prefix was exhausted (at a limit or on
    /// [`Visit::Stop`]; there may be no record left in the latter case).
    pub more: bool,
}

/// Writing: atomic conditional batches and durability.
pub trait KvWrite {
    /// Applies `batch` atomically: every precondition is checked and every mutation
    /// applied, or — on the first failed precondition — nothing is written and
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) is returned. A batch that
    /// touches one key twice is refused with
    /// [`StoreError::DuplicateKey`](crate::StoreError::DuplicateKey).
    fn apply(&self, batch: Batch) -> Result<()>;

    /// [`KvWrite::apply`] for a caller that may retry a refused batch (narrowed, say):
    /// when a precondition fails ([`StoreError::is_conflict`](crate::StoreError::is_conflict))
    /// the batch comes back in the [`Refused`] error, with its mutations and preconditions
    /// as given, in order (its [observation](Batch::observed_at) dropped), so the caller
    /// need not keep a copy of it. Any other error consumes it. The default keeps a copy
    /// of a batch that has preconditions; a backend that can hand the batch back without
    /// one overrides it. Same atomicity and rules as [`KvWrite::apply`].
    fn apply_or_return(&self, batch: Batch) -> std::result::Result<(), Refused> {
        let copy = (!batch.preconditions().is_empty()).then(|| batch.clone());
        self.apply(batch).map_err(|error| Refused::new(error, copy))
    }

    /// Applies one [`KeyWrite`]: exactly [`KvWrite::apply`] of
    /// [`KeyWrite::into_batch`] (same atomicity, same conflicts), which is the default. A
    /// backend that can check and write one key without a batch (sled: its guard cache and
    /// one compare-and-swap) overrides it.
    fn compare_and_swap(&self, write: KeyWrite) -> Result<()> {
        self.apply(write.into_batch())
    }

    /// Makes every applied batch durable.
    fn flush(&self) -> Result<()>;
}

/// A batch [`KvWrite::apply_or_return`] did not apply: nothing of it was written.
#[derive(Debug)]
pub struct Refused {
    /// Why.
    pub error: crate::StoreError,
    /// On a failed precondition: the batch as it was given (see
    /// [`KvWrite::apply_or_return`]); `None` for any other error.
    pub batch: Option<Box<Batch>>,
}

impl Refused {
    /// The refusal of `batch` for `error`: the batch is kept only for a conflict.
    pub fn new(error: crate::StoreError, batch: Option<Batch>) -> Self {
        let batch = if error.is_conflict() {
            batch.map(Box::new)
        } else {
            None
        };
        Refused { error, batch }
    }
}

impl From<Refused> for crate::StoreError {
    fn from(r: Refused) -> Self {
        r.error
    }
}

/// A complete backend: [`KvRead`] + [`KvWrite`], shareable across threads.
pub trait Backend: KvRead + KvWrite + Send + Sync + std::fmt::Debug {
    /// Short backend name for messages (`memory`, `sled`, `postgres`).
    fn name(&self) -> &'static str;

    /// The backend's store lease that is exclusive across processes, for backends that
    /// several processes write to (PostgreSQL). `None` (the default) for backends opened
    /// by one process at a time (sled's and redb's file lock, memory): there the
    /// in-process write lease already excludes every other writer. See
    /// [`ExclusiveSession`](crate::ExclusiveSession).
    fn cross_process_lease(&self) -> Option<&dyn crate::CrossProcessLease> {
        None
    }

    /// True when every read is a round trip to a server (PostgreSQL), so that a writer
    /// that can skip one — a collection handle's write hints — should. `false` (the
    /// default) for embedded backends, whose reads cost less than remembering values.
    fn remote_reads(&self) -> bool {
        false
    }

    /// True when [`Backend::write_key_with`] reads the key under the lock it writes with
    /// (sled), so a writer gains by using it instead of a read and a
    /// [`KvWrite::compare_and_swap`]. `false` (the default): it is that read and that
    /// write.
    fn reads_under_write(&self) -> bool {
        false
    }

    /// Writes `key` with what `decide` makes of its current value (`None`: absent),
    /// atomically: the decision is applied only if the key still holds the value it was
    /// given and every guard holds ([`KeyWrite`]'s rules). `decide` may be called more
    /// than once (a value that changed under a decision is decided again) and must not
    /// call into the store; [`KeyDecision::Nothing`] writes nothing. A failed guard is the
    /// guard's [`StoreError::Conflict`](crate::StoreError::Conflict). The default reads,
    /// decides and applies a [`KeyWrite`], again when the key itself conflicts.
    fn write_key_with(
        &self,
        key: Vec<u8>,
        guards: Vec<crate::Precondition>,
        decide: &mut dyn FnMut(Option<&[u8]>) -> KeyDecision,
    ) -> Result<()> {
        write_key_with_reads(self, self, key, guards, decide)
    }
}

/// What [`Backend::write_key_with`]'s decision wants done with the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyDecision {
    /// Set it to these bytes.
    Set(Vec<u8>),
    /// Delete it.
    Delete,
    /// Write nothing (a refusal, or nothing to do).
    Nothing,
}

/// How often [`write_key_with_reads`] reads and decides again after the key changed.
const KEY_WRITE_ATTEMPTS: usize = 64;

/// [`Backend::write_key_with`] by a read through `read` and a [`KvWrite::compare_and_swap`]
/// through `write`, again (at most 64 times) when the key changed in between: the
/// default, and the path of any backend or wrapper that does not read under its write.
pub fn write_key_with_reads<R: KvRead + ?Sized, W: KvWrite + ?Sized>(
    read: &R,
    write: &W,
    key: Vec<u8>,
    guards: Vec<crate::Precondition>,
    decide: &mut dyn FnMut(Option<&[u8]>) -> KeyDecision,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = read.get(&key)?;
        let new = match decide(current.as_deref()) {
            KeyDecision::Set(v) => Some(v),
            KeyDecision::Delete => None,
            KeyDecision::Nothing => return Ok(()),
        };
        let last = attempt >= KEY_WRITE_ATTEMPTS;
        let result = write.compare_and_swap(KeyWrite {
            key: key.clone(),
            expected: current,
            new,
            guards: guards.clone(),
        });
        match result {
            Err(crate::StoreError::Conflict { key: k, .. }) if k == key && !last => continue,
            other => return other,
        }
    }
}

impl<T: KvRead + ?Sized> KvRead for &T {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        (**self).scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        (**self).prefix_exists(prefix)
    }
    fn write_epoch(&self) -> Option<crate::WriteEpoch> {
        (**self).write_epoch()
    }
    fn peek(&self, key: &[u8]) -> Result<Peek> {
        (**self).peek(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        (**self).scan_visit(prefix, after, limits, visit)
    }
}

impl<T: KvWrite + ?Sized> KvWrite for &T {
    fn apply(&self, batch: Batch) -> Result<()> {
        (**self).apply(batch)
    }
    fn apply_or_return(&self, batch: Batch) -> std::result::Result<(), Refused> {
        (**self).apply_or_return(batch)
    }
    fn compare_and_swap(&self, write: KeyWrite) -> Result<()> {
        (**self).compare_and_swap(write)
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
}
