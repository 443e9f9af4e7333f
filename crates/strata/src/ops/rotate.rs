//! Data-key rotation: a fresh data key for the database keyring, every sealed record
//! re-encrypted under it by the [bulk pass](crate::pass), then the old key removed.
//!
//! 1. **Begin** (one atomic keyring write, [`Keyring::begin_rotation`]): the new key
//!    becomes active, the old one is kept as *retiring*, both wrapped under every entry.
//!    From here every writer seals under the new key: a writer still holding the old
//!    keyring snapshot fails its keyring precondition and refreshes.
//! 2. **Re-seal** every collection of the catalog on the bulk pass: each sealed record
//!    whose body names another key than the active one is opened and sealed again under
//!    the active key (same envelope: payload and lock version unchanged — a rotation is not
//!    a document write). Each row is written only over the bytes read (per-row
//!    conditions: a concurrent write wins and is never overwritten), every batch carries
//!    the keyring bytes the pass unlocked, and the cursor commits in the same batch
//!    (`__nx/rotate/<collection>`, [`ROTATION_CHECKPOINT_PREFIX`]). Killed at any point,
//!    the rotation resumes from the last committed batch; both keys open every record
//!    until it finishes.
//! 3. **Finish** (one atomic write guarded by the keyring bytes read): the retiring key
//!    is removed from every entry and the rotation checkpoints are deleted. Refused while
//!    any sealed record failed to open (it would become unreadable for good).
//!
//! Clear records (envelope format 1) are left alone. [`rotate_data_key`] runs all three
//! steps and is resumable: call it again after a kill or an abort.

use crate::collection::layout;
use crate::pass::{
    CheckpointCodec, HookError, Pass, PassError, PassLimits, Processor, RecordError, RecordRef,
    RowCounters, RowOutcome,
};
use crate::payload::envelope::ENVELOPE_HEADER_LEN;
use crate::seal::{
    body_key_id, open_document, peek, seal_document, Credential, Keyring, SealError, Sealer,
};
use std::cell::Cell;
use strata_store::{Batch, KvRead, KvWrite, Mutation, Store, StoreError};

/// Prefix of the rotation checkpoints: `__nx/rotate/<collection>`.
pub const ROTATION_CHECKPOINT_PREFIX: &[u8] = b"__nx/rotate/";
const CHECKPOINT_MAGIC: &[u8; 4] = b"NXRT";
const CHECKPOINT_FORMAT: u8 = 1;
const STATE_RUNNING: u8 = 0;
const STATE_DONE: u8 = 1;
/// How many times a collection's pass is rerun after the keyring changed under it (an
/// entry added or re-wrapped concurrently).
const MAX_KEYRING_RETRIES: usize = 16;

/// The rotation checkpoint key of `collection`.
pub fn rotation_checkpoint_key(collection: &str) -> Vec<u8> {
    let mut k = ROTATION_CHECKPOINT_PREFIX.to_vec();
    k.extend_from_slice(collection.as_bytes());
    k
}

type ProgressFn<'a> = Box<dyn FnMut(&RotationProgress<'_>) + 'a>;

/// Knobs of [`rotate_data_key`].
pub struct RotateOptions<'a> {
    limits: PassLimits,
    abort: Option<Box<dyn FnMut() -> bool + 'a>>,
    progress: Option<ProgressFn<'a>>,
    finish: bool,
}

impl std::fmt::Debug for RotateOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotateOptions")
            .field("limits", &self.limits)
            .field("abort", &self.abort.is_some())
            .field("progress", &self.progress.is_some())
            .field("finish", &self.finish)
            .finish()
    }
}

impl Default for RotateOptions<'_> {
    fn default() -> Self {
        RotateOptions {
            limits: PassLimits::default(),
            abort: None,
            progress: None,
            finish: true,
        }
    }
}

impl<'a> RotateOptions<'a> {
    /// Default pass limits, never aborts, finishes the rotation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bulk pass's batch limits.
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Polled at every batch boundary; `true` stops the rotation (resumable).
    pub fn abort_when(mut self, check: impl FnMut() -> bool + 'a) -> Self {
        self.abort = Some(Box::new(check));
        self
    }

    /// Called after every committed batch.
    pub fn on_progress(mut self, f: impl FnMut(&RotationProgress<'_>) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Whether to remove the old key once every record is re-sealed (default `true`).
    /// With `false` the rotation stays in progress: both keys keep opening every record.
    pub fn finish(mut self, finish: bool) -> Self {
        self.finish = finish;
        self
    }
}

/// A progress event: one batch of one collection committed.
#[derive(Debug, Clone, Copy)]
pub struct RotationProgress<'a> {
    /// The collection being re-sealed.
    pub collection: &'a str,
    /// The pass's counters for this collection in this run.
    pub counters: RowCounters,
    /// The cursor committed.
    pub cursor: Option<&'a [u8]>,
    /// True for the collection's final batch.
    pub done: bool,
}

/// What a rotation run did in one collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionRotation {
    /// The collection.
    pub collection: String,
    /// True when an earlier run had already completed it (no scan).
    pub already_done: bool,
    /// The cursor this run resumed after.
    pub resumed_from: Option<Vec<u8>>,
    /// Records read.
    pub scanned: u64,
    /// Records re-sealed under the new key.
    pub resealed: u64,
    /// Records left as they were: already under the new key, or clear.
    pub unchanged: u64,
    /// Records a concurrent write changed between the read and the write (that write
    /// sealed them under the new key).
    pub conflicted: u64,
    /// Sealed records that failed to open (tampered, corrupt), counted over every run of
    /// this rotation: they block finishing.
    pub failed: u64,
}

/// What [`rotate_data_key`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationReport {
    /// The data key every record is now sealed under.
    pub new_key_id: u32,
    /// The data key being retired.
    pub old_key_id: u32,
    /// True when this run started the rotation (false: it resumed one).
    pub began: bool,
    /// True when this run removed the old key (the rotation is complete).
    pub finished: bool,
    /// True when the abort check stopped the run (rerun to resume).
    pub aborted: bool,
    /// Per collection, in catalog order.
    pub collections: Vec<CollectionRotation>,
}

impl RotationReport {
    /// Records re-sealed by this run.
    pub fn resealed(&self) -> u64 {
        self.collections.iter().map(|c| c.resealed).sum()
    }
}

/// The stored checkpoint of one collection.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    key_id: u32,
    done: bool,
    failed: u64,
    cursor: Vec<u8>,
}

fn encode_checkpoint(s: &Stored) -> Vec<u8> {
    let mut v = Vec::with_capacity(18 + s.cursor.len());
    v.extend_from_slice(CHECKPOINT_MAGIC);
    v.push(CHECKPOINT_FORMAT);
    v.extend_from_slice(&s.key_id.to_be_bytes());
    v.push(if s.done { STATE_DONE } else { STATE_RUNNING });
    v.extend_from_slice(&s.failed.to_be_bytes());
    v.extend_from_slice(&s.cursor);
    v
}

fn decode_checkpoint(v: &[u8]) -> Result<Stored, String> {
    if v.len() < 18 || &v[..4] != CHECKPOINT_MAGIC {
        return Err("not a rotation checkpoint (`NXRT`)".into());
    }
    if v[4] != CHECKPOINT_FORMAT {
        return Err(format!(
            "rotation checkpoint format {} is not supported",
            v[4]
        ));
    }
    let key_id = u32::from_be_bytes([v[5], v[6], v[7], v[8]]);
    let done = match v[9] {
        STATE_RUNNING => false,
        STATE_DONE => true,
        s => return Err(format!("unknown rotation checkpoint state {s}")),
    };
    let mut failed = [0u8; 8];
    failed.copy_from_slice(&v[10..18]);
    Ok(Stored {
        key_id,
        done,
        failed: u64::from_be_bytes(failed),
        cursor: v[18..].to_vec(),
    })
}

/// The pass checkpoint: cursor, target key id and the failures committed so far.
struct Codec {
    key: Vec<u8>,
    key_id: u32,
    /// Failures committed before the current batch (earlier runs + earlier batches).
    failed: Cell<u64>,
}

impl CheckpointCodec for Codec {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        self.encode_counted(cursor, &RowCounters::default())
    }
    fn encode_counted(&self, cursor: &[u8], batch: &RowCounters) -> Vec<u8> {
        encode_checkpoint(&Stored {
            key_id: self.key_id,
            done: false,
            failed: self.failed.get() + batch.failed,
            cursor: cursor.to_vec(),
        })
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        let s = decode_checkpoint(value)?;
        // A checkpoint of an earlier rotation (or a completed pass with failures, rerun
        // from the start) gives no cursor.
        if s.key_id != self.key_id || s.done {
            return Ok(Vec::new());
        }
        Ok(s.cursor)
    }
    fn finished(&self) -> Option<Vec<u8>> {
        self.finished_counted(&RowCounters::default())
    }
    fn finished_counted(&self, batch: &RowCounters) -> Option<Vec<u8>> {
        Some(encode_checkpoint(&Stored {
            key_id: self.key_id,
            done: true,
            failed: self.failed.get() + batch.failed,
            cursor: Vec::new(),
        }))
    }
}

/// Re-seals one record under the active key.
struct Reseal<'s> {
    sealer: &'s Sealer,
    table_id: u16,
    last: Option<RowOutcome>,
}

impl Processor for Reseal<'_> {
    fn process(&mut self, r: &RecordRef<'_>, out: &mut Vec<Mutation>) -> Result<(), RecordError> {
        let outcome = match peek(r.value) {
            Some((_, true))
                if body_key_id(&r.value[ENVELOPE_HEADER_LEN..])
                    != Some(self.sealer.active_key_id()) =>
            {
                match open_document(self.sealer, r.key, self.table_id, r.value) {
                    Ok((env, json)) => {
                        let value = seal_document(self.sealer, r.key, self.table_id, env, &json)
                            .map_err(RecordError::from_error)?;
                        out.push(r.replace(value));
                        RowOutcome::Rewritten
                    }
                    Err(e) => {
                        tracing::warn!(table = %r.table, error = %e, "data-key rotation: record cannot be opened; it blocks finishing the rotation");
                        RowOutcome::Failed
                    }
                }
            }
            _ => RowOutcome::Unchanged,
        };
        self.last = Some(outcome);
        Ok(())
    }

    fn outcome(&mut self) -> Option<RowOutcome> {
        self.last.take()
    }
}

/// Unlocks the keyring with the first credential that opens it.
fn unlock_any(ring: &Keyring, store: &Store, creds: &[&Credential]) -> Result<Sealer, SealError> {
    let mut last = None;
    for c in creds {
        match ring.unlock(store, c) {
            Ok(s) => return Ok(s),
            Err(e) if e.is_wrong_key() => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| SealError::WrongKey {
        scope: ring.scope().to_string(),
        keyring: ring.store_key().to_vec(),
    }))
}

/// Rotates the database's data key (see the [module docs](self)), or resumes a rotation
/// in progress. Starting one needs a credential for every wrapping entry of the keyring;
/// resuming needs any one. Returns when the rotation is complete (the old key removed),
/// was aborted, or — with [`RotateOptions::finish`]`(false)` — every record is re-sealed.
pub fn rotate_data_key(
    store: &Store,
    credentials: &[&Credential],
    mut options: RotateOptions<'_>,
) -> Result<RotationReport, SealError> {
    let ring = Keyring::database();
    let Some((_, rec)) = ring.read(store)? else {
        return Err(SealError::NoKeyring {
            scope: ring.scope().to_string(),
            keyring: ring.store_key().to_vec(),
        });
    };
    let began = rec.retiring_key_id().is_none();
    let mut sealer = if began {
        ring.begin_rotation(store, credentials)?
    } else {
        unlock_any(&ring, store, credentials)?
    };
    let new_key_id = sealer.active_key_id();
    let old_key_id = sealer
        .key_ids()
        .into_iter()
        .find(|id| *id != new_key_id)
        .unwrap_or(new_key_id);
    tracing::info!(
        new_key = new_key_id,
        old_key = old_key_id,
        began,
        "data-key rotation running"
    );
    // Read after the begin: every collection that can hold an old-key record is listed.
    let catalog = crate::database::read_catalog(store).map_err(|e| match e {
        crate::collection::CollectionError::Store { source, .. } => SealError::Store(source),
        other => SealError::InvalidParameters {
            reason: other.to_string(),
        },
    })?;
    let mut report = RotationReport {
        new_key_id,
        old_key_id,
        began,
        finished: false,
        aborted: false,
        collections: Vec::new(),
    };
    for def in catalog.tables() {
        let name = def.name().to_string();
        let ck_key = rotation_checkpoint_key(&name);
        let stored =
            match store.get(&ck_key)? {
                Some(v) => Some(decode_checkpoint(&v).map_err(|reason| {
                    SealError::CorruptedCheckpoint {
                        key: ck_key.clone(),
                        reason,
                    }
                })?),
                None => None,
            };
        let mut row = CollectionRotation {
            collection: name.clone(),
            already_done: false,
            resumed_from: None,
            scanned: 0,
            resealed: 0,
            unchanged: 0,
            conflicted: 0,
            failed: 0,
        };
        if let Some(s) = &stored {
            if s.key_id == new_key_id && s.done && s.failed == 0 {
                row.already_done = true;
                report.collections.push(row);
                continue;
            }
        }
        // A fresh start (no checkpoint of this rotation, or a completed pass that had
        // failures) counts failures from zero.
        let mut base_failed = match &stored {
            Some(s) if s.key_id == new_key_id && !s.done => s.failed,
            _ => 0,
        };
        let mut attempts = 0;
        loop {
            let codec = Codec {
                key: ck_key.clone(),
                key_id: new_key_id,
                failed: Cell::new(base_failed),
            };
            let (result, counters) = run_collection(
                store,
                &name,
                def.id(),
                &sealer,
                &codec,
                base_failed,
                &mut options,
            );
            match result {
                Ok(pass) => {
                    row.resumed_from = pass.resumed_from.clone();
                    add(&mut row, &counters);
                    row.failed = codec.failed.get();
                    break;
                }
                Err(e) => {
                    add(&mut row, &counters);
                    base_failed = codec.failed.get();
                    match e {
                        PassError::Aborted { .. } => {
                            report.aborted = true;
                            report.collections.push(row);
                            tracing::info!("data-key rotation aborted; rerun to resume");
                            return Ok(report);
                        }
                        PassError::Store {
                            source: StoreError::Conflict { key, .. },
                            ..
                        } if key == ring.store_key() && attempts < MAX_KEYRING_RETRIES => {
                            // The keyring changed (an entry added or re-wrapped, or
                            // another runner finished): re-open it and go on.
                            attempts += 1;
                            sealer = sealer.refresh(store)?;
                            if sealer.active_key_id() != new_key_id || sealer.key_ids().len() == 1 {
                                return Err(SealError::RotationState {
                                    keyring: ring.store_key().to_vec(),
                                    state: "was finished or restarted by another runner during this rotation",
                                    remedy: "rerun the rotation to check that every record is sealed under the active key",
                                });
                            }
                        }
                        PassError::Store {
                            source: StoreError::Conflict { key, .. },
                            ..
                        } if key == ck_key => {
                            return Err(SealError::RotationContended { checkpoint: ck_key });
                        }
                        other => {
                            return Err(SealError::Rotation {
                                collection: name,
                                source: Box::new(other),
                            })
                        }
                    }
                }
            }
        }
        report.collections.push(row);
    }
    if !options.finish {
        return Ok(report);
    }
    finish(store, &ring, &catalog, new_key_id, old_key_id)?;
    report.finished = true;
    tracing::info!(
        new_key = new_key_id,
        old_key = old_key_id,
        resealed = report.resealed(),
        "data-key rotation finished; the old key is removed"
    );
    Ok(report)
}

fn add(row: &mut CollectionRotation, c: &RowCounters) {
    row.scanned += c.scanned;
    row.resealed += c.rewritten;
    row.unchanged += c.unchanged;
    row.conflicted += c.conflicted;
}

/// One pass over a collection, and the counters its committed batches reached (what an
/// error leaves durable).
fn run_collection(
    store: &Store,
    name: &str,
    table_id: u16,
    sealer: &Sealer,
    codec: &Codec,
    base_failed: u64,
    options: &mut RotateOptions<'_>,
) -> (Result<crate::pass::PassReport, PassError>, RowCounters) {
    let committed = Cell::new(RowCounters::default());
    let keyring = sealer.keyring_precondition();
    let mut pass = Pass::new(name, layout::doc_prefix(name), codec)
        .limits(options.limits)
        .row_conditions(true)
        .on_batch(|batch: &mut Batch, _| -> Result<(), HookError> {
            batch.push_precondition(keyring.clone());
            Ok(())
        })
        .on_progress(|p| {
            committed.set(p.counters);
            codec.failed.set(base_failed + p.counters.failed);
            if let Some(f) = options.progress.as_mut() {
                f(&RotationProgress {
                    collection: name,
                    counters: p.counters,
                    cursor: p.cursor,
                    done: p.done,
                });
            }
        });
    if let Some(a) = options.abort.as_mut() {
        pass = pass.abort_when(a);
    }
    let processor = Reseal {
        sealer,
        table_id,
        last: None,
    };
    let result = pass.run(store, processor);
    (result, committed.get())
}

/// Ends the rotation: the keyring without the retiring key and the rotation checkpoints
/// deleted, in one atomic write guarded by the keyring bytes read. Refused while a
/// collection's checkpoint says it is not done or had failures.
fn finish(
    store: &Store,
    ring: &Keyring,
    catalog: &crate::catalog::Catalog,
    new_key_id: u32,
    old_key_id: u32,
) -> Result<(), SealError> {
    let mut batch = Batch::new();
    // Every collection whose records failed to open, and how many (all are named).
    let mut failing: Vec<(String, u64)> = Vec::new();
    for def in catalog.tables() {
        let key = rotation_checkpoint_key(def.name());
        let v = store.get(&key)?;
        let s = v
            .as_deref()
            .map(decode_checkpoint)
            .transpose()
            .map_err(|reason| SealError::CorruptedCheckpoint {
                key: key.clone(),
                reason,
            })?;
        match s {
            Some(s) if s.key_id == new_key_id && s.done && s.failed == 0 => {}
            Some(s) if s.key_id == new_key_id && s.done => {
                failing.push((def.name().to_string(), s.failed));
                continue;
            }
            _ => {
                return Err(SealError::RotationState {
                    keyring: ring.store_key().to_vec(),
                    state: "has a data-key rotation whose re-sealing pass has not completed",
                    remedy: "rerun the rotation",
                })
            }
        }
        batch = batch.require(key.clone(), v).delete(key);
    }
    if !failing.is_empty() {
        let failed = failing.iter().map(|(_, n)| n).sum();
        let names: Vec<&str> = failing.iter().map(|(c, _)| c.as_str()).collect();
        // Rendered inside backticks: `accounts`, `invoices`.
        return Err(SealError::RotationIncomplete {
            collection: names.join("`, `"),
            failed,
        });
    }
    let Some((read, rec)) = ring.read(store)? else {
        return Err(SealError::NoKeyring {
            scope: ring.scope().to_string(),
            keyring: ring.store_key().to_vec(),
        });
    };
    if rec.active_key_id() != new_key_id || rec.retiring_key_id() != Some(old_key_id) {
        return Err(SealError::RotationState {
            keyring: ring.store_key().to_vec(),
            state: "was finished or restarted by another runner during this rotation",
            remedy: "rerun the rotation to check that every record is sealed under the active key",
        });
    }
    let next = rec.finish_rotation(ring.store_key())?;
    let batch = batch
        .require_eq(ring.store_key().to_vec(), read)
        .set(ring.store_key().to_vec(), next.encode());
    store.apply(batch).map_err(|e| {
        if e.is_conflict() {
            SealError::KeyringChanged {
                keyring: ring.store_key().to_vec(),
            }
        } else {
            SealError::Store(e)
        }
    })
}

impl crate::Database {
    /// Rotates the database's data key, or resumes a rotation in progress: a fresh key
    /// becomes active, every sealed record of every collection is re-encrypted under it on
    /// the bulk pass (checkpointed, resumable after a kill), then the old key is removed in
    /// one atomic write. Both keys open every record until then. Starting needs a
    /// credential for every wrapping entry; resuming needs any one. See
    /// [`rotate_data_key`].
    pub fn rotate_data_key(
        &self,
        credentials: &[&Credential],
        options: RotateOptions<'_>,
    ) -> Result<RotationReport, SealError> {
        let report = rotate_data_key(&self.inner.store, credentials, options)?;
        if let Some(live) = &self.inner.sealer {
            live.refresh(&self.inner.store)?;
        }
        Ok(report)
    }
}
