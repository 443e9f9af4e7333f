//! The vocabulary of the bulk pass: its limits, the checkpoint codec, the record view and
//! processor, and what it reports.

use super::{PassError, RecordError};
use std::time::Duration;
use strata_store::Mutation;

/// Default record limit of one batch.
pub const DEFAULT_MAX_RECORDS: usize = 512;
/// Default byte budget of one batch (4 MiB).
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The two bounds of one batch: a record count and one shared byte budget.
///
/// Every bulk rewrite takes its settings the same way — one `PassLimits` (`.limits(..)`)
/// and one abort check (`.abort_when(..)`, polled at every batch boundary) — on
/// [`Migrator`](crate::migrate::Migrator),
/// [`SweepOptions`](crate::ops::sweep::SweepOptions) and
/// [`CutoverOptions`](crate::ops::cutover::CutoverOptions), with the one set of defaults below
/// ([`DEFAULT_MAX_RECORDS`] records, [`DEFAULT_MAX_BYTES`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassLimits {
    max_records: usize,
    max_bytes: usize,
}

impl Default for PassLimits {
    /// 512 records and 4 MiB.
    fn default() -> Self {
        PassLimits {
            max_records: DEFAULT_MAX_RECORDS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl PassLimits {
    /// Both limits must be at least 1.
    pub fn new(max_records: usize, max_bytes: usize) -> Result<Self, PassError> {
        if max_records == 0 {
            return Err(PassError::InvalidLimits {
                reason: "the record limit must be at least 1".into(),
            });
        }
        if max_bytes == 0 {
            return Err(PassError::InvalidLimits {
                reason: "the byte budget must be at least 1 byte".into(),
            });
        }
        Ok(PassLimits {
            max_records,
            max_bytes,
        })
    }

    /// The record limit of one batch.
    pub fn max_records(&self) -> usize {
        self.max_records
    }

    /// The byte budget of one batch (scanned keys + values + generated mutations).
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// Where a pass keeps its cursor and how it encodes it. Migrations use the `NXMG` record
/// at `__nx/migration/<table>` ([`crate::migrate::MigrationCheckpointCodec`]); sweeps and
/// cutovers bring their own.
pub trait CheckpointCodec {
    /// The key the checkpoint is stored at. Processors may never touch it.
    fn key(&self) -> &[u8];

    /// The stored value for `cursor` (the last processed full key).
    fn encode(&self, cursor: &[u8]) -> Vec<u8>;

    /// The cursor stored in `value` (empty: no record processed yet), or a lowercase reason
    /// why the value is not a valid checkpoint of this pass.
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError>;

    /// What the checkpoint key holds once the scan is complete: `None` (the default)
    /// deletes it; `Some(value)` writes `value` (for example a "done" marker).
    fn finished(&self) -> Option<Vec<u8>> {
        None
    }

    /// [`CheckpointCodec::encode`] with the per-row counters of the batch this value
    /// commits (after any narrowing: exactly the rows the batch writes), for a checkpoint
    /// that carries counters. The default ignores them.
    fn encode_counted(&self, cursor: &[u8], batch: &RowCounters) -> Vec<u8> {
        let _ = batch;
        self.encode(cursor)
    }

    /// [`CheckpointCodec::finished`] with the counters of the final batch. The default
    /// ignores them.
    fn finished_counted(&self, batch: &RowCounters) -> Option<Vec<u8>> {
        let _ = batch;
        self.finished()
    }
}

impl<T: CheckpointCodec + ?Sized> CheckpointCodec for &T {
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        (**self).encode(cursor)
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        (**self).decode(value)
    }
    fn finished(&self) -> Option<Vec<u8>> {
        (**self).finished()
    }
    fn encode_counted(&self, cursor: &[u8], batch: &RowCounters) -> Vec<u8> {
        (**self).encode_counted(cursor, batch)
    }
    fn finished_counted(&self, batch: &RowCounters) -> Option<Vec<u8>> {
        (**self).finished_counted(batch)
    }
}

/// The simplest checkpoint: the value is the raw cursor bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCheckpoint {
    key: Vec<u8>,
}

impl RawCheckpoint {
    /// A raw checkpoint stored at `key`.
    pub fn new(key: Vec<u8>) -> Self {
        RawCheckpoint { key }
    }
}

impl CheckpointCodec for RawCheckpoint {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        cursor.to_vec()
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        Ok(value.to_vec())
    }
}

/// One scanned record as a processor sees it.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The table being scanned.
    pub table: &'a str,
    /// The record's full key (table prefix included).
    pub key: &'a [u8],
    /// The record's value.
    pub value: &'a [u8],
}

impl RecordRef<'_> {
    /// Replaces this record's value (the key stays).
    pub fn replace(&self, value: Vec<u8>) -> Mutation {
        Mutation::Set {
            key: self.key.to_vec(),
            value,
        }
    }

    /// Deletes this record.
    pub fn delete(&self) -> Mutation {
        Mutation::Delete {
            key: self.key.to_vec(),
        }
    }

    /// Moves this record to `key` (which must lie in another namespace) with `value`:
    /// deletes the source key and sets the new one.
    pub fn move_to(&self, key: Vec<u8>, value: Vec<u8>) -> [Mutation; 2] {
        [self.delete(), Mutation::Set { key, value }]
    }

    /// Creates (or overwrites) `key` — which must lie in another namespace — with `value`.
    pub fn create(key: Vec<u8>, value: Vec<u8>) -> Mutation {
        Mutation::Set { key, value }
    }
}

/// What became of one record in a pass (counted in [`RowCounters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowOutcome {
    /// The record is rewritten (a mutation of its own key).
    Rewritten,
    /// Left as it is.
    Unchanged,
    /// Left as it is because a newer build wrote it.
    SkippedAhead,
    /// Left as it is because it could not be processed (the pass goes on).
    Failed,
}

/// Per-row counters of a pass (of one batch, or of a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowCounters {
    /// Records processed.
    pub scanned: u64,
    /// Records rewritten.
    pub rewritten: u64,
    /// Records left unchanged.
    pub unchanged: u64,
    /// Records dropped from their batch because a concurrent write changed them after
    /// they were read (see [`crate::pass::Pass::row_conditions`]); left as that write made
    /// them.
    pub conflicted: u64,
    /// Records left unchanged because a newer build wrote them.
    pub skipped_ahead: u64,
    /// Records that could not be processed (left unchanged).
    pub failed: u64,
}

impl RowCounters {
    /// Counts one record.
    pub fn count(&mut self, outcome: RowOutcome) {
        self.scanned += 1;
        match outcome {
            RowOutcome::Rewritten => self.rewritten += 1,
            RowOutcome::Unchanged => self.unchanged += 1,
            RowOutcome::SkippedAhead => self.skipped_ahead += 1,
            RowOutcome::Failed => self.failed += 1,
        }
    }

    /// Adds `other` to these counters.
    pub fn add(&mut self, other: &RowCounters) {
        self.scanned += other.scanned;
        self.rewritten += other.rewritten;
        self.unchanged += other.unchanged;
        self.conflicted += other.conflicted;
        self.skipped_ahead += other.skipped_ahead;
        self.failed += other.failed;
    }
}

/// Per-record logic of a pass: inspects one record and pushes the mutations it needs onto
/// `out` (nothing, for a pure validation). Any closure
/// `FnMut(&RecordRef<'_>, &mut Vec<Mutation>) -> Result<(), RecordError>` is a processor.
pub trait Processor {
    /// Processes one record. An error stops the pass; nothing of the current batch is
    /// written.
    fn process(
        &mut self,
        record: &RecordRef<'_>,
        out: &mut Vec<Mutation>,
    ) -> Result<(), RecordError>;

    /// The typed outcome of the record just processed. `None` (the default): the pass
    /// infers it — [`RowOutcome::Rewritten`] when the record's mutations write its own
    /// key, [`RowOutcome::Unchanged`] otherwise.
    fn outcome(&mut self) -> Option<RowOutcome> {
        None
    }
}

impl<F> Processor for F
where
    F: FnMut(&RecordRef<'_>, &mut Vec<Mutation>) -> Result<(), RecordError>,
{
    fn process(
        &mut self,
        record: &RecordRef<'_>,
        out: &mut Vec<Mutation>,
    ) -> Result<(), RecordError> {
        self(record, out)
    }
}

/// A progress event, emitted after every committed batch (cumulative for this run).
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The table being scanned.
    pub table: &'a str,
    /// Records processed so far in this run.
    pub records: u64,
    /// Bytes scanned so far (keys + values).
    pub bytes: u64,
    /// Batches committed so far (or, in a dry run, that would have been).
    pub batches: u64,
    /// Time since the pass started.
    pub elapsed: Duration,
    /// The cursor after the batch (the last processed key).
    pub cursor: Option<&'a [u8]>,
    /// True for the final batch (the scan is complete).
    pub done: bool,
    /// Per-row counters of the committed batches of this run.
    pub counters: RowCounters,
}

/// What the per-batch hook learns about the batch it may extend.
#[derive(Debug, Clone, Copy)]
pub struct BatchInfo<'a> {
    /// The table being scanned.
    pub table: &'a str,
    /// Records in this batch.
    pub records: usize,
    /// Bytes this batch used from the budget (records + mutations).
    pub bytes: usize,
    /// The cursor the batch commits (`None` only for an empty final batch of a pass that
    /// never processed a record).
    pub cursor: Option<&'a [u8]>,
    /// True for the final batch (the one that completes the pass).
    pub done: bool,
    /// On the final batch of a pass with [`Pass::tally_scope`](super::Pass::tally_scope):
    /// the scope exactly as this batch leaves it, when the pass could prove it.
    pub tally: Option<&'a strata_store::manifest::Tally>,
}

/// What a completed pass did (in this run; a resumed pass counts only what it did after
/// resuming).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// The table scanned.
    pub table: String,
    /// Records processed.
    pub records: u64,
    /// Bytes scanned (keys + values).
    pub bytes: u64,
    /// Mutations generated.
    pub mutations: u64,
    /// Batches committed (in a dry run: that would have been committed).
    pub batches: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// The cursor the pass resumed after, if it found a checkpoint.
    pub resumed_from: Option<Vec<u8>>,
    /// True when nothing was written.
    pub dry_run: bool,
    /// Per-row counters of this run.
    pub counters: RowCounters,
    /// With [`Pass::tally_scope`](super::Pass::tally_scope): the scope exactly as the
    /// pass left it, when it could prove it (see there).
    pub tally: Option<strata_store::manifest::Tally>,
}
