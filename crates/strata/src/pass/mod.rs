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

mod error;
pub mod testing;
mod types;

pub use error::{HookError, MutationRule, PassError, RecordError};
pub use types::{
    BatchInfo, CheckpointCodec, PassLimits, PassReport, Processor, Progress, RawCheckpoint,
    RecordRef, RowCounters, RowOutcome, DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS,
};

use crate::header::{MIGRATION_PREFIX, SCHEMA_PREFIX};
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
        }
    }

    /// Per-row conditional writes (off by default): every record whose mutations write its
    /// own key is written only if it still holds the bytes the pass read (the batch carries
    /// one precondition per such row). When a batch fails because rows changed since they
    /// were read, the pass re-reads its rows, drops the changed ones (and their
    /// mutations), tells [`Pass::on_narrow`] which, re-encodes the checkpoint and retries
    /// the narrowed batch; a conflict no row explains is returned. Every retry drops at
    /// least one row, so a batch is tried at most rows + 1 times. Not in a dry run. The
    /// pass keeps the rows and their mutations for the retry (the batch carries copies).
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
    /// certify it ([`strata_store::Manifest`]) without scanning it again: every row the
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
    pub fn run<S, P>(mut self, store: &S, mut processor: P) -> Result<PassReport, PassError>
    where
        S: KvRead + KvWrite + ?Sized,
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
            tally: tally_start.map(|start| (start, strata_store::Tally::default())),
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
                acc.page_epoch = store.capabilities().write_epoch();
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
                store.scan_visit(&self.prefix, cursor.as_deref(), scan_limits, &mut visit)
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
                    let value = store
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

    /// Processes one scanned record and adds it to the batch: `Ok(None)`. When the batch
    /// must be committed first, returns `Ok(Some(cost))` with the record's mutations left
    /// in `scratch` (nothing added yet).
    #[allow(clippy::too_many_arguments)]
    fn take<P: Processor>(
        &self,
        key: &[u8],
        value: &[u8],
        processor: &mut P,
        scratch: &mut Vec<Mutation>,
        acc: &mut Acc,
        st: &mut RunState,
        ck_key: &[u8],
    ) -> Result<Option<(usize, RowOutcome)>, PassError> {
        scratch.clear();
        let view = RecordRef {
            table: &self.table,
            key,
            value,
        };
        if let Err(e) = processor.process(&view, scratch) {
            return Err(PassError::InvalidRecord {
                table: self.table.clone(),
                key: key.to_vec(),
                reason: e.reason().to_string(),
                checkpoint: st.durable_cursor.clone(),
            });
        }
        let row = processor.outcome().unwrap_or_else(|| {
            if scratch.iter().any(|m| m.key() == key) {
                RowOutcome::Rewritten
            } else {
                RowOutcome::Unchanged
            }
        });
        let mut cost = key.len() + value.len();
        for (i, m) in scratch.iter().enumerate() {
            let rule = self.rule_violation(m.key(), key, ck_key).or_else(|| {
                scratch[..i]
                    .iter()
                    .any(|o| o.key() == m.key())
                    .then_some(MutationRule::Duplicate)
            });
            if let Some(rule) = rule {
                return Err(self.forbidden(st, key, m.key(), rule));
            }
            cost = cost.saturating_add(m.size());
        }
        if cost > self.limits.max_bytes() && !self.read_only {
            return Err(PassError::BatchTooLarge {
                table: self.table.clone(),
                key: key.to_vec(),
                size: cost,
                limit: self.limits.max_bytes(),
                checkpoint: st.durable_cursor.clone(),
            });
        }
        if acc.records > 0
            && (acc.records >= self.limits.max_records()
                || acc.bytes.saturating_add(cost) > self.limits.max_bytes())
        {
            return Ok(Some((cost, row)));
        }
        self.admit(key, Some(value), value.len(), cost, row, scratch, acc, st)?;
        Ok(None)
    }

    /// Adds a processed record (its mutations are in `scratch`) to the batch.
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        value_len: usize,
        cost: usize,
        row: RowOutcome,
        scratch: &mut Vec<Mutation>,
        acc: &mut Acc,
        st: &mut RunState,
    ) -> Result<(), PassError> {
        // A row's own key needs no entry in `acc.keys`: rows come in strictly ascending
        // key order (each once), and a mutation of any other key under the prefix is
        // refused (`MutationRule::SiblingKey`), so no other mutation can write it.
        for m in scratch.iter() {
            if m.key() != key && acc.keys.contains(m.key()) {
                return Err(self.forbidden(st, key, m.key(), MutationRule::Duplicate));
            }
        }
        if acc.records == 0 {
            // The batch's first row: the epoch observed before the page it was read in
            // (later pages of the batch observed the same epoch or a later one).
            acc.epoch = acc.page_epoch;
        }
        if let Some((_, tally)) = st.tally.as_mut() {
            // The value this row is left with once the batch commits.
            match scratch.iter().find(|m| m.key() == key) {
                Some(Mutation::Set { value, .. }) => tally.add(key, value),
                Some(Mutation::Delete { .. }) => {}
                None => match value {
                    Some(v) => tally.add(key, v),
                    None => st.tally = None,
                },
            }
        }
        let start = acc.mutations.len();
        let own = self.row_conditions && scratch.iter().any(|m| m.key() == key);
        for m in scratch.drain(..) {
            if m.key() != key {
                acc.keys.insert(m.key().to_vec());
            }
            acc.mutations.push(m);
        }
        if own {
            if let Some(old) = value {
                acc.rows.push(RowCond {
                    key: key.to_vec(),
                    old: old.to_vec(),
                    mutations: start..acc.mutations.len(),
                });
            }
        }
        acc.records += 1;
        acc.bytes += cost;
        acc.counters.count(row);
        st.records += 1;
        st.bytes += (key.len() + value_len) as u64;
        // Reuse the cursor buffer within a batch (the commit takes it).
        match &mut acc.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => acc.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    fn poll_abort(&mut self, st: &RunState) -> Result<(), PassError> {
        if let Some(abort) = self.abort.as_mut() {
            if abort() {
                tracing::warn!(table = %self.table, "pass aborted at a batch boundary");
                return Err(PassError::Aborted {
                    table: self.table.clone(),
                    checkpoint: st.durable_cursor.clone(),
                });
            }
        }
        Ok(())
    }

    fn rule_violation(&self, target: &[u8], source: &[u8], ck_key: &[u8]) -> Option<MutationRule> {
        if target.starts_with(SCHEMA_PREFIX)
            || target.starts_with(MIGRATION_PREFIX)
            || target == ck_key
        {
            Some(MutationRule::EngineMetadata)
        } else if target.starts_with(&self.prefix) && target != source {
            Some(MutationRule::SiblingKey)
        } else {
            None
        }
    }

    fn forbidden(&self, st: &RunState, key: &[u8], target: &[u8], rule: MutationRule) -> PassError {
        PassError::ForbiddenMutation {
            table: self.table.clone(),
            key: key.to_vec(),
            target: target.to_vec(),
            rule,
            checkpoint: st.durable_cursor.clone(),
        }
    }

    fn store_err(&self, st: &RunState, source: StoreError) -> PassError {
        PassError::Store {
            table: self.table.clone(),
            checkpoint: st.durable_cursor.clone(),
            source,
        }
    }

    /// Commits the accumulated batch (plus checkpoint, plus hooks) and resets `acc`.
    /// With per-row conditions, a batch that conflicts because rows changed is narrowed
    /// and retried (see [`Pass::row_conditions`]).
    fn commit<S>(
        &mut self,
        store: &S,
        acc: &mut Acc,
        st: &mut RunState,
        done: bool,
    ) -> Result<(), PassError>
    where
        S: KvRead + KvWrite + ?Sized,
    {
        let new_cursor = acc.last_key.take().or_else(|| st.cursor.clone());
        let ck_key = self.checkpoint.key().to_vec();
        // The next batch is likely as large: its vectors are allocated once, with room for
        // what the checkpoint and the hooks add, instead of growing row by row.
        let (n, r) = (acc.mutations.len(), acc.rows.len());
        let mut mutations = std::mem::replace(
            &mut acc.mutations,
            Vec::with_capacity(n.saturating_add(BATCH_SLACK)),
        );
        let mut rows = std::mem::replace(&mut acc.rows, Vec::with_capacity(r));
        let mut counters = std::mem::take(&mut acc.counters);
        let info_records = acc.records;
        let info_bytes = acc.bytes;
        acc.records = 0;
        acc.bytes = 0;
        acc.keys.clear();
        let conditioned = self.row_conditions && !self.dry_run && !rows.is_empty();
        // Only the first attempt: a narrowed retry re-read its rows without an epoch.
        let mut observed = acc.epoch.take();
        let (n_mutations, new_value) = loop {
            let n_mutations = mutations.len() as u64;
            let mut batch = if conditioned {
                // Copied: a batch refused by a failed precondition is narrowed from the
                // rows and mutations kept here.
                let mut preconditions = Vec::with_capacity(rows.len().saturating_add(BATCH_SLACK));
                for r in &rows {
                    preconditions.push(strata_store::Precondition::Equals {
                        key: r.key.clone(),
                        value: r.old.clone(),
                    });
                }
                let mut batch = Batch::from_parts(mutations.clone(), preconditions);
                // Each row's bytes were read after the page's epoch was observed: a
                // backend whose epoch has not moved since need not read them again. The
                // checkpoint and hook preconditions pushed below are always checked.
                if let Some(epoch) = observed.take() {
                    batch.observed_at(epoch);
                }
                batch
            } else {
                Batch::from_parts(std::mem::take(&mut mutations), Vec::new())
            };
            let new_value = if done {
                self.checkpoint.finished_counted(&counters)
            } else {
                Some(
                    self.checkpoint
                        .encode_counted(new_cursor.as_deref().unwrap_or_default(), &counters),
                )
            };
            if let Some(v) = &new_value {
                let size = ck_key.len().saturating_add(v.len());
                if size > DEFAULT_MAX_BYTES {
                    return Err(PassError::CheckpointTooLarge {
                        table: self.table.clone(),
                        key: ck_key,
                        size,
                        limit: DEFAULT_MAX_BYTES,
                        checkpoint: st.durable_cursor.clone(),
                    });
                }
            }
            if self.dry_run {
                break (n_mutations, new_value);
            }
            if self.guard_checkpoint {
                batch.push_precondition(match &st.durable_value {
                    Some(v) => strata_store::Precondition::Equals {
                        key: ck_key.clone(),
                        value: v.clone(),
                    },
                    None => strata_store::Precondition::Absent {
                        key: ck_key.clone(),
                    },
                });
            }
            match &new_value {
                Some(v) => batch.push(Mutation::Set {
                    key: ck_key.clone(),
                    value: v.clone(),
                }),
                None => batch.push(Mutation::Delete {
                    key: ck_key.clone(),
                }),
            }
            let hook_err = |source: HookError| PassError::Hook {
                table: self.table.clone(),
                checkpoint: st.durable_cursor.clone(),
                source,
            };
            if done {
                if let Some(f) = self.on_complete.as_mut() {
                    f(&mut batch).map_err(hook_err)?;
                }
                // After the completion hook (which may arm the scope): nothing but this
                // pass's own batches wrote since the pass began reading.
                st.proven = st.tally.as_ref().and_then(|(start, tally)| {
                    let now = store.capabilities().write_epoch()?;
                    (now.writes_since(*start) == Some(st.batches)).then_some(*tally)
                });
            }
            if let Some(f) = self.on_batch.as_mut() {
                let info = BatchInfo {
                    table: &self.table,
                    records: info_records,
                    bytes: info_bytes,
                    cursor: new_cursor.as_deref(),
                    done,
                    tally: st.proven.as_ref(),
                };
                f(&mut batch, &info).map_err(|source| PassError::Hook {
                    table: self.table.clone(),
                    checkpoint: st.durable_cursor.clone(),
                    source,
                })?;
            }
            if !conditioned {
                match store.apply(batch) {
                    Ok(()) => break (n_mutations, new_value),
                    Err(source) => return Err(self.store_err(st, source)),
                }
            }
            let source = match store.apply(batch) {
                Ok(()) => break (n_mutations, new_value),
                Err(source) => source,
            };
            if !source.is_conflict() {
                return Err(self.store_err(st, source));
            }
            // Which rows changed since they were read?
            let mut changed = Vec::new();
            for (i, r) in rows.iter().enumerate() {
                let now = store.get(&r.key).map_err(|e| self.store_err(st, e))?;
                if now.as_deref() != Some(r.old.as_slice()) {
                    changed.push(i);
                }
            }
            if changed.is_empty() {
                return Err(self.store_err(st, source));
            }
            tracing::debug!(table = %self.table, rows = changed.len(), "concurrent writes changed rows of a batch; committing the others");
            let dropped: Vec<Vec<u8>> = changed.iter().map(|&i| rows[i].key.clone()).collect();
            let mut keep = vec![true; mutations.len()];
            for &i in &changed {
                for j in rows[i].mutations.clone() {
                    keep[j] = false;
                }
            }
            // Re-index the remaining rows' mutation ranges.
            let mut new_index = Vec::with_capacity(mutations.len());
            let mut next = 0;
            for k in &keep {
                new_index.push(next);
                if *k {
                    next += 1;
                }
            }
            let mut idx = 0;
            mutations.retain(|_| {
                let k = keep[idx];
                idx += 1;
                k
            });
            let mut i = 0;
            rows.retain(|_| {
                let k = !changed.contains(&i);
                i += 1;
                k
            });
            for r in &mut rows {
                let start = new_index[r.mutations.start];
                r.mutations = start..start + r.mutations.len();
            }
            let n = dropped.len() as u64;
            counters.rewritten = counters.rewritten.saturating_sub(n);
            counters.conflicted += n;
            // The dropped rows hold what another writer left: not what was tallied.
            st.tally = None;
            if let Some(f) = self.on_narrow.as_mut() {
                f(&dropped);
            }
        };
        if !self.dry_run {
            st.durable_value = new_value;
            st.durable_cursor = new_cursor.clone();
        }
        st.cursor = new_cursor.clone();
        st.batches += 1;
        st.mutations += n_mutations;
        st.counters.add(&counters);
        tracing::debug!(table = %self.table, records = info_records, bytes = info_bytes, done, "pass batch committed");
        if let Some(f) = self.progress.as_mut() {
            f(&Progress {
                table: &self.table,
                records: st.records,
                bytes: st.bytes,
                batches: st.batches,
                elapsed: st.started.elapsed(),
                cursor: new_cursor.as_deref(),
                done,
                counters: st.counters,
            });
        }
        Ok(())
    }
}

struct RunState {
    /// Per-row counters of the committed batches.
    counters: RowCounters,
    /// With [`Pass::tally_scope`]: the write epoch observed before the first read and
    /// the tally of the rows admitted so far (`None` once it cannot be exact).
    tally: Option<(strata_store::WriteEpoch, strata_store::Tally)>,
    /// The tally proven exact at the final batch.
    proven: Option<strata_store::Tally>,
    /// What the checkpoint key holds in the store (the precondition of the next batch).
    durable_value: Option<Vec<u8>>,
    /// The cursor of the last committed batch.
    durable_cursor: Option<Vec<u8>>,
    /// The cursor after the last processed batch (equals `durable_cursor` unless dry).
    cursor: Option<Vec<u8>>,
    records: u64,
    bytes: u64,
    mutations: u64,
    batches: u64,
    started: Instant,
}

/// How the visit of one page ended, besides the scan's own result.
enum PageOutcome {
    /// Every visited record was added to the batch.
    Scanned,
    /// The last visited record was processed but the batch must be committed first.
    Overflow {
        key: Vec<u8>,
        /// The value read (kept only for per-row conditions).
        value: Option<Vec<u8>>,
        value_len: usize,
        cost: usize,
        row: RowOutcome,
    },
    /// Processing a record failed.
    Failed(PassError),
}

/// The store of a read-only pass: reads pass through, a write is a bug (a dry run never
/// writes) and is refused.
struct ReadOnly<'s, S: ?Sized>(&'s S);

impl<S: KvRead + ?Sized> KvRead for ReadOnly<'_, S> {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.0.capabilities()
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.0.scan_visit(prefix, after, limits, visit)
    }
}

impl<S: ?Sized> KvWrite for ReadOnly<'_, S> {
    fn read_modify_write(
        &self,
        _: &[&[u8]],
        _: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        Err(StoreError::InvalidArgument(
            "a read-only pass does not write".into(),
        ))
    }
    fn flush(&self) -> strata_store::Result<()> {
        Ok(())
    }
}

/// One conditioned row of a batch: its key, the bytes read, its mutations' range.
struct RowCond {
    key: Vec<u8>,
    old: Vec<u8>,
    mutations: std::ops::Range<usize>,
}

#[derive(Default)]
struct Acc {
    /// The write epoch observed before the page being read (per-row conditions only).
    page_epoch: Option<strata_store::WriteEpoch>,
    /// The epoch observed before the batch's first row was read.
    epoch: Option<strata_store::WriteEpoch>,
    mutations: Vec<Mutation>,
    rows: Vec<RowCond>,
    counters: RowCounters,
    keys: HashSet<Vec<u8>>,
    records: usize,
    bytes: usize,
    last_key: Option<Vec<u8>>,
}
