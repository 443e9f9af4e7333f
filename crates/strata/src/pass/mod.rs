//! The bulk pass: the one batched, checkpointed, resumable scan-and-rewrite engine.
//!
//! Certification (v0→v1), N→N+1 record steps, coordinated cutover transforms and eager
//! payload sweeps are the same loop, written once here:
//!
//! 1. read the caller's checkpoint (its key and encoding are the caller's
//!    [`CheckpointCodec`]) and resume after its cursor;
//! 2. scan the table prefix in batches bounded by [`PassLimits`]: at most `max_records`
//!    records and ONE shared byte budget of `max_bytes` that covers the scanned keys and
//!    values **and** every generated mutation (set: key + value, delete: key);
//! 3. hand every record to the caller's [`Processor`], which emits mutations; the pass
//!    enforces the mutation rules (see [`MutationRule`]);
//! 4. commit the mutations and the advanced checkpoint in ONE atomic batch (guarded by a
//!    precondition that the checkpoint still holds what this pass last wrote), after the
//!    caller's per-batch hook had its chance to add preconditions and mutations;
//! 5. when the scan is exhausted, the last batch deletes the checkpoint (or writes the
//!    codec's "finished" value) and carries the completion hook's mutations (a migration
//!    writes the new schema header there).
//!
//! The abort check is polled at every batch boundary and progress is reported after every
//! batch. A batch that fails for any reason applies nothing; errors carry the last durable
//! cursor. Memory is bounded by the batch limits: one page of records, the mutations of
//! one batch and the set of keys they touch — never by the table size.
//!
//! ```
//! use strata::pass::{Pass, PassLimits, RecordRef, RecordError, RawCheckpoint};
//! use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Mutation, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::new(MemoryStore::new());
//! store.apply(Batch::new().set(b"__nx/t/a".to_vec(), b"1".to_vec()).set(b"__nx/t/b".to_vec(), b"2".to_vec()))?;
//! let checkpoint = RawCheckpoint::new(b"__nx/sweep/t".to_vec());
//! let report = Pass::new("t", b"__nx/t/".to_vec(), &checkpoint)
//!     .limits(PassLimits::new(1, 1024)?)
//!     .run(&store, |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
//!         // Copy every record into another namespace.
//!         let mut key = b"__nx/copy/".to_vec();
//!         key.extend_from_slice(r.key);
//!         out.push(Mutation::Set { key, value: r.value.to_vec() });
//!         Ok(())
//!     })?;
//! assert_eq!(report.records, 2);
//! assert_eq!(report.batches, 2);
//! assert_eq!(store.get(b"__nx/copy/__nx/t/b")?, Some(b"2".to_vec()));
//! assert_eq!(store.get(b"__nx/sweep/t")?, None); // checkpoint removed at the end
//! # Ok(()) }
//! ```

mod batch;
mod error;
mod kept;
mod read_only;
pub mod testing;
mod types;

pub use crate::record_error::RecordError;
pub use error::{HookError, MutationRule, PassError};
pub use types::{
    BatchInfo, CheckpointCodec, PassLimits, PassReport, Processor, Progress, RawCheckpoint,
    RecordRef, RowCounters, RowOutcome, DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS,
};

use crate::header::{MIGRATION_PREFIX, SCHEMA_PREFIX};
use batch::{Acc, PageOutcome, RunState};
use read_only::ReadOnly;
use std::collections::HashSet;
use std::time::Instant;
use strata_store::{Batch, KvRead, KvWrite, Mutation, ScanLimits, StoreError, Visit};

/// Room kept in a batch's vectors for what the checkpoint and the hooks add.
const BATCH_SLACK: usize = 8;

type AbortFn<'a> = Box<dyn FnMut() -> bool + 'a>;
type ProgressFn<'a> = Box<dyn FnMut(&Progress<'_>) + 'a>;
type BatchHookFn<'a> = Box<dyn FnMut(&mut Batch, &BatchInfo<'_>) -> Result<(), HookError> + 'a>;
type CompleteHookFn<'a> = Box<dyn FnMut(&mut Batch) -> Result<(), HookError> + 'a>;
type NarrowFn<'a> = Box<dyn FnMut(&[Vec<u8>]) + 'a>;

/// A configured bulk pass over one table (see the [module docs](self)).
pub struct Pass<'a> {
    table: String,
    prefix: Vec<u8>,
    checkpoint: Box<dyn CheckpointCodec + 'a>,
    limits: PassLimits,
    dry_run: bool,
    guard_checkpoint: bool,
    abort: Option<AbortFn<'a>>,
    progress: Option<ProgressFn<'a>>,
    on_batch: Option<BatchHookFn<'a>>,
    on_complete: Option<CompleteHookFn<'a>>,
    row_conditions: bool,
    on_narrow: Option<NarrowFn<'a>>,
    read_only: bool,
    tally: bool,
    /// [`Pass::run_between`]: every record is written verbatim into another store.
    verbatim: bool,
}

impl std::fmt::Debug for Pass<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("table", &self.table)
            .field("prefix", &strata_store::escape_key(&self.prefix))
            .field(
                "checkpoint",
                &strata_store::escape_key(self.checkpoint.key()),
            )
            .field("limits", &self.limits)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

impl<'a> Pass<'a> {
    /// A pass over the records under `prefix` of `table`, keeping its cursor with
    /// `checkpoint`. Default limits, not a dry run, no hooks.
    pub fn new(
        table: impl Into<String>,
        prefix: Vec<u8>,
        checkpoint: impl CheckpointCodec + 'a,
    ) -> Self {
        Pass {
            table: table.into(),
            prefix,
            checkpoint: Box::new(checkpoint),
            limits: PassLimits::default(),
            dry_run: false,
            guard_checkpoint: true,
            abort: None,
            progress: None,
            on_batch: None,
            on_complete: None,
            row_conditions: false,
            on_narrow: None,
            read_only: false,
            tally: false,
            verbatim: false,
        }
    }

    /// Per-row conditional writes (off by default): every record whose mutations write its
    /// own key is written only if it still holds the bytes the pass read (the batch carries
    /// one precondition per such row). When a batch fails because rows changed since they
    /// were read, the pass re-reads its rows, drops the changed ones (and their
    /// mutations), tells [`Pass::on_narrow`] which, re-encodes the checkpoint and retries
    /// the narrowed batch; a conflict no row explains is returned. Every retry drops at
    /// least one row, so a batch is tried at most rows + 1 times. Not in a dry run. The
    /// store consumes the batch it refuses, so the pass keeps the rows (key, bytes read)
    /// and the batch's mutations for the retry: copied into one buffer it reuses batch
    /// after batch, not allocated per row.
    ///
    /// On a backend that keeps a [write epoch](strata_store::epoch) (sled, memory) the pass
    /// observes it before reading each page and marks the row preconditions
    /// [observed](Batch::observed_at) at the epoch seen before the batch's first row: when
    /// nothing was written in between, the backend commits without reading the rows again.
    pub fn row_conditions(mut self, on: bool) -> Self {
        self.row_conditions = on;
        self
    }

    /// Tallies the scope as the pass leaves it (off by default), so a bulk operation can
    /// certify it ([`strata_store::manifest::Manifest`]) without scanning it again: every row the
    /// pass read, with the value its mutations leave (the bytes read when it writes none).
    ///
    /// The tally is handed out ([`BatchInfo::tally`] on the final batch,
    /// [`PassReport::tally`]) only when it is exact: the pass read the whole prefix in this
    /// run (not resumed), narrowed no batch, and — through the backend's
    /// [write epoch](strata_store::epoch), observed before the pass's first read — no
    /// write other than the pass's own batches reached the store up to the final batch
    /// (the epoch moved by exactly the batches it committed). Otherwise (a backend without
    /// an epoch, a concurrent writer anywhere in the store, a resumed run) it is `None`
    /// and the caller recounts the scope. A write after that check is the caller's to
    /// exclude (an armed manifest scope, see [`strata_store::Store::arm_manifest_scope`]).
    pub fn tally_scope(mut self, on: bool) -> Self {
        self.tally = on;
        self
    }

    /// Called with the full keys of the rows dropped from a batch because they changed
    /// since they were read (see [`Pass::row_conditions`]), before the checkpoint of the
    /// narrowed batch is encoded.
    pub fn on_narrow(mut self, f: impl FnMut(&[Vec<u8>]) + 'a) -> Self {
        self.on_narrow = Some(Box::new(f));
        self
    }

    /// Sets the batch limits.
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = limits;
        self
    }

    /// In a dry run every record is processed and every rule and budget checked, but
    /// nothing is written (no mutation, no checkpoint, no hook mutation).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Whether every batch carries a precondition that the checkpoint still holds what this
    /// pass last read or wrote (on by default). It detects a second pass racing on the same
    /// checkpoint; a caller that already excludes one (an exclusive [`strata_store::WriteLease`]
    /// plus the backend's process lock) may turn it off: on sled a conditional batch runs
    /// as a transaction, a plain one does not.
    pub fn guard_checkpoint(mut self, guard: bool) -> Self {
        self.guard_checkpoint = guard;
        self
    }

    /// An abort check polled at every batch boundary; when it returns true the pass stops
    /// with [`PassError::Aborted`].
    pub fn abort_when(mut self, check: impl FnMut() -> bool + 'a) -> Self {
        self.abort = Some(Box::new(check));
        self
    }

    /// Receives a [`Progress`] event after every batch.
    pub fn on_progress(mut self, f: impl FnMut(&Progress<'_>) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Called with every batch just before it is committed (the final one included): may
    /// add preconditions (a lease compare-and-swap) and mutations (they are not subject to
    /// the processor rules, but a key may still appear only once per batch). An error
    /// stops the pass with [`PassError::Hook`] and the batch is not written. Not called in
    /// a dry run.
    pub fn on_batch(
        mut self,
        f: impl FnMut(&mut Batch, &BatchInfo<'_>) -> Result<(), HookError> + 'a,
    ) -> Self {
        self.on_batch = Some(Box::new(f));
        self
    }

    /// Called once with the final batch (the scan is complete) before the per-batch hook:
    /// adds what completes the pass, for example a new schema header. Not called in a dry
    /// run.
    pub fn on_complete(mut self, f: impl FnMut(&mut Batch) -> Result<(), HookError> + 'a) -> Self {
        self.on_complete = Some(Box::new(f));
        self
    }

    /// Runs the pass read-only over a store that need not be writable (verification):
    /// a dry run whose byte budget bounds only what one page reads. The one oversize rule:
    /// the budget binds what a batch commits, so a writing pass (and its dry run) refuses
    /// a record it could not commit within it ([`PassError::RecordTooLarge`]), while a
    /// read-only pass, which commits nothing, reads such a record on its own.
    pub fn run_read_only<S, P>(mut self, store: &S, processor: P) -> Result<PassReport, PassError>
    where
        S: KvRead + ?Sized,
        P: Processor,
    {
        self.dry_run = true;
        self.read_only = true;
        self.run(&ReadOnly(store), processor)
    }

    /// Runs the pass to completion over `store` (a [`strata_store::Store`], a
    /// [`strata_store::WriteLease`], or any `KvRead + KvWrite`).
    pub fn run<S, P>(self, store: &S, processor: P) -> Result<PassReport, PassError>
    where
        S: KvRead + KvWrite + ?Sized,
        P: Processor,
    {
        self.run_on(store, store, processor)
    }

    /// Runs the pass reading `source` and committing into `target` (another store): the
    /// checkpoint lives in `target`, and the processor may emit only the scanned record's
    /// own key, which it writes **verbatim** into the target — engine metadata included
    /// (`strata copy` is this pass). A record costs its key and value once against the
    /// byte budget (its copy is the same bytes). Per-row conditions and the scope tally
    /// compare a store with itself and are off.
    pub fn run_between<R, W, P>(
        mut self,
        source: &R,
        target: &W,
        processor: P,
    ) -> Result<PassReport, PassError>
    where
        R: KvRead + ?Sized,
        W: KvRead + KvWrite + ?Sized,
        P: Processor,
    {
        self.verbatim = true;
        self.row_conditions = false;
        self.tally = false;
        self.run_on(source, target, processor)
    }

    /// The pass: records read from `read`, batches and the checkpoint committed to
    /// `write` (the same store but for [`Pass::run_between`]).
    fn run_on<R, W, P>(
        mut self,
        read: &R,
        store: &W,
        mut processor: P,
    ) -> Result<PassReport, PassError>
    where
        R: KvRead + ?Sized,
        W: KvRead + KvWrite + ?Sized,
        P: Processor,
    {
        let started = Instant::now();
        let ck_key = self.checkpoint.key().to_vec();
        let stored = store.get(&ck_key).map_err(|source| PassError::Store {
            table: self.table.clone(),
            checkpoint: None,
            source,
        })?;
        let mut cursor = match &stored {
            None => None,
            Some(value) => {
                let c = self.checkpoint.decode(value).map_err(|reason| {
                    PassError::CorruptCheckpoint {
                        table: self.table.clone(),
                        key: ck_key.clone(),
                        reason,
                    }
                })?;
                if c.is_empty() {
                    None
                } else if !c.starts_with(&self.prefix) {
                    return Err(PassError::CheckpointOutOfPrefix {
                        table: self.table.clone(),
                        cursor: c,
                        prefix: self.prefix.clone(),
                    });
                } else {
                    Some(c)
                }
            }
        };
        let resumed_from = cursor.clone();
        // Observed before the first read of the prefix.
        let tally_start = if self.tally && !self.dry_run && cursor.is_none() {
            store.capabilities().write_epoch()
        } else {
            None
        };
        if let Some(c) = &resumed_from {
            tracing::info!(table = %self.table, cursor = %strata_store::escape_key(c), "resuming pass after checkpoint");
        }
        let mut st = RunState {
            durable_value: stored,
            durable_cursor: cursor.clone(),
            cursor: cursor.clone(),
            records: 0,
            bytes: 0,
            mutations: 0,
            batches: 0,
            started,
            counters: RowCounters::default(),
            tally: tally_start.map(|start| (start, strata_store::manifest::Tally::default())),
            proven: None,
        };
        let mut acc = Acc::default();
        let mut scratch: Vec<Mutation> = Vec::new();
        self.poll_abort(&st)?;
        loop {
            // The batch being filled may span pages: scan only what still fits in it.
            let room_records = self.limits.max_records().saturating_sub(acc.records);
            let room_bytes = self.limits.max_bytes().saturating_sub(acc.bytes);
            if acc.records > 0 && (room_records == 0 || room_bytes == 0) {
                self.commit(store, &mut acc, &mut st, false)?;
                self.poll_abort(&st)?;
                continue;
            }
            let scan_limits = ScanLimits::new(room_records, room_bytes).map_err(|e| {
                PassError::InvalidLimits {
                    reason: e.to_string(),
                }
            })?;
            // Observed before the page is read: the rows' preconditions were read after it
            // (see `Batch::observed_at`).
            if self.row_conditions && !self.dry_run {
                acc.page_epoch = read.capabilities().write_epoch();
            }
            // Records are processed in place, as the backend hands them over (no copy).
            let mut outcome = PageOutcome::Scanned;
            let scanned = {
                let this = &self;
                let mut visit = |key: &[u8], value: &[u8]| -> Visit {
                    match this.take(
                        key,
                        value,
                        &mut processor,
                        &mut scratch,
                        &mut acc,
                        &mut st,
                        &ck_key,
                    ) {
                        Ok(None) => Visit::Continue,
                        Ok(Some((cost, row))) => {
                            outcome = PageOutcome::Overflow {
                                key: key.to_vec(),
                                value: (this.row_conditions || this.tally).then(|| value.to_vec()),
                                value_len: value.len(),
                                cost,
                                row,
                            };
                            Visit::Stop
                        }
                        Err(e) => {
                            outcome = PageOutcome::Failed(e);
                            Visit::Stop
                        }
                    }
                };
                read.scan_visit(&self.prefix, cursor.as_deref(), scan_limits, &mut visit)
            };
            if let PageOutcome::Failed(e) = outcome {
                return Err(e);
            }
            let end = match scanned {
                Ok(end) => end,
                Err(StoreError::RecordTooLarge { key, .. }) if self.read_only => {
                    // Nothing is committed: read the record on its own.
                    if acc.records > 0 {
                        self.commit(store, &mut acc, &mut st, false)?;
                        self.poll_abort(&st)?;
                    }
                    let value = read
                        .get(&key)
                        .map_err(|e| self.store_err(&st, e))?
                        .unwrap_or_default();
                    self.take(
                        &key,
                        &value,
                        &mut processor,
                        &mut scratch,
                        &mut acc,
                        &mut st,
                        &ck_key,
                    )?;
                    cursor = Some(key);
                    continue;
                }
                Err(StoreError::RecordTooLarge { .. }) if acc.records > 0 => {
                    // The next record does not fit in what is left of this batch.
                    self.commit(store, &mut acc, &mut st, false)?;
                    self.poll_abort(&st)?;
                    continue;
                }
                Err(StoreError::RecordTooLarge { key, size, limit }) => {
                    return Err(PassError::RecordTooLarge {
                        table: self.table.clone(),
                        key,
                        size,
                        limit,
                        checkpoint: st.durable_cursor.clone(),
                    })
                }
                Err(source) => return Err(self.store_err(&st, source)),
            };
            if let PageOutcome::Overflow {
                key,
                value,
                value_len,
                cost,
                row,
            } = outcome
            {
                // Commit what the batch holds; this record starts the next one.
                self.commit(store, &mut acc, &mut st, false)?;
                self.poll_abort(&st)?;
                self.admit(
                    &key,
                    value.as_deref(),
                    value_len,
                    cost,
                    row,
                    &mut scratch,
                    &mut acc,
                    &mut st,
                )?;
            }
            if let Some(k) = &acc.last_key {
                cursor = Some(k.clone());
            }
            if !end.more {
                self.commit(store, &mut acc, &mut st, true)?;
                break;
            }
        }
        Ok(PassReport {
            table: self.table,
            records: st.records,
            bytes: st.bytes,
            mutations: st.mutations,
            batches: st.batches,
            elapsed: started.elapsed(),
            resumed_from,
            dry_run: self.dry_run,
            counters: st.counters,
            tally: st.proven.take(),
        })
    }
}
