//! Revert: take a collection whose newer version is complete back down to an older one,
//! through the downcasts the newer build declares.
//!
//! A deploy window ([`super::window`]) makes a rollback free until it completes. After
//! `complete` the eager sweep moved the rows to N+1, and build N cannot read them. A
//! revert ([`Collection::revert`]) undoes that, from build N+1 (the build that knows the
//! downcasts):
//!
//! 1. **Back into the window.** One atomic batch puts the collection back where it was
//!    before `complete`: the deploy window at the operational version N (every build N+1
//!    still running writes at N through its downcasts from this moment), the schema
//!    baseline restored to the last one the schema history records at payload version N
//!    (so a build N opened afterwards is not told it is behind), the sweep marker's
//!    completed version lowered to N (so completing the window again sweeps the rows up
//!    again), and the revert record `__nx/revert/<collection>` (`NXRB`, see below).
//! 2. **The downcast sweep.** On the [bulk pass](crate::pass), like the eager sweep:
//!    every row above N and not above this build's version is upcast to this build's
//!    version (merging back fields an earlier downcast kept) and downcast to N; what N
//!    cannot express is kept under [`KEPT_FIELD`](crate::payload::KEPT_FIELD) (build N
//!    carries it over on its writes, build N+1 gets it back on read) unless the options
//!    say to drop it. Lock versions are kept (the same document in an older shape); each
//!    row is written under a compare-and-swap on the bytes read, so a concurrent write
//!    is never overwritten; every batch carries the fence and write-guard preconditions
//!    and requires the window still at N. The record's cursor advances with every batch:
//!    a killed revert resumes where it stopped (run it again with the same version).
//! 3. Rows **newer than this build knows** are never touched (counted as ahead); a row
//!    whose upcast or downcast fails is left as it is and reported by key with the reason.
//!
//! A dry run ([`RevertOptions::dry_run`]) reads only: it counts the rows a revert would
//! move and lists those whose newer-only content the downcast cannot express.
//!
//! Afterwards the collection is in a deploy window at N: deploy build N again (it reads
//! and writes every row), and complete the window from a newer build when it is fixed.
//!
//! ```text
//! key:   __nx/revert/<collection>
//! value: b"NXRB" | format u8 (= 1) | target version i32 BE | cursor (the last full key
//!        processed; empty: none yet)
//! ```

use crate::collection::layout::{doc_prefix, sweep_key};
use crate::collection::{Collection, CollectionError};
use crate::keys::REVERT_PREFIX;
use crate::pass::{
    BatchInfo, CheckpointCodec, HookError, Pass, PassError, PassLimits, Processor, RecordError,
    RecordRef, RowCounters, RowOutcome,
};
use crate::payload::envelope::{self, Envelope};
use crate::payload::window::{encode_window, window_key};
use crate::payload::JsonObject;
use crate::policy::{read_history, Baseline};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use strata_store::{Batch, KvRead, KvWrite, Mutation, Pages, ScanLimits, StoreError};

/// The revert record's magic.
pub const REVERT_MAGIC: [u8; 4] = *b"NXRB";
/// The revert record's format.
pub const REVERT_FORMAT: u8 = 1;
/// How many rows a report names (failures, rows whose content would be dropped).
pub const REPORT_LIMIT: usize = 100;

/// The key of a collection's revert record: `__nx/revert/<collection>`.
pub fn revert_key(collection: &str) -> Vec<u8> {
    [REVERT_PREFIX, collection.as_bytes()].concat()
}

fn encode_record(target: i32, cursor: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + cursor.len());
    out.extend_from_slice(&REVERT_MAGIC);
    out.push(REVERT_FORMAT);
    out.extend_from_slice(&target.to_be_bytes());
    out.extend_from_slice(cursor);
    out
}

/// The target version and cursor of a revert record, or why it cannot be read.
pub fn decode_record(bytes: &[u8]) -> Result<(i32, Vec<u8>), String> {
    if bytes.len() < 9 {
        return Err(format!("expected at least 9 bytes, found {}", bytes.len()));
    }
    if bytes[..4] != REVERT_MAGIC {
        return Err("wrong magic (expected NXRB)".into());
    }
    if bytes[4] != REVERT_FORMAT {
        return Err(format!(
            "unsupported format {} (this build reads format {REVERT_FORMAT})",
            bytes[4]
        ));
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&bytes[5..9]);
    Ok((i32::from_be_bytes(v), bytes[9..].to_vec()))
}

/// The target version of `collection`'s unfinished revert (`None`: none).
pub fn unfinished<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Option<i32>, CollectionError> {
    let key = revert_key(collection);
    let Some(bytes) = store
        .get(&key)
        .map_err(|e| CollectionError::store(collection, e))?
    else {
        return Ok(None);
    };
    decode_record(&bytes)
        .map(|(t, _)| Some(t))
        .map_err(|reason| corrupt(collection, reason))
}

fn corrupt(collection: &str, reason: String) -> CollectionError {
    CollectionError::CorruptMarker {
        collection: collection.to_string(),
        reason: format!(
            "the revert record `{}` is damaged ({reason}); delete it and run the revert again (rows already reverted are left as they are)",
            strata_store::escape_key(&revert_key(collection))
        )
        .into(),
    }
}

type AbortCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Knobs of [`Collection::revert`].
#[derive(Clone)]
pub struct RevertOptions {
    dry_run: bool,
    drop_newer: bool,
    limits: PassLimits,
    abort: Option<AbortCheck>,
}

impl std::fmt::Debug for RevertOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevertOptions")
            .field("dry_run", &self.dry_run)
            .field("drop_newer", &self.drop_newer)
            .field("limits", &self.limits)
            .field("abort", &self.abort.is_some())
            .finish()
    }
}

impl Default for RevertOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl RevertOptions {
    /// Defaults: a real run, newer-only content kept with the rows, the sweep's batch
    /// limits (256 rows, 4 MiB), never aborts.
    pub fn new() -> Self {
        RevertOptions {
            dry_run: false,
            drop_newer: false,
            limits: PassLimits::new(
                crate::ops::sweep::DEFAULT_BATCH_SIZE,
                crate::pass::DEFAULT_MAX_BYTES,
            )
            .unwrap_or_default(),
            abort: None,
        }
    }

    /// Reads only: counts what a revert would do and lists the rows whose newer-only
    /// content the downcast cannot express. Nothing is written.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Drops the content the downcast cannot express instead of keeping it with the row
    /// under [`KEPT_FIELD`](crate::payload::KEPT_FIELD): the rows become exactly what the older build wrote, and the
    /// newer fields are gone for good (completing the window again cannot bring them
    /// back).
    pub fn drop_newer_fields(mut self, yes: bool) -> Self {
        self.drop_newer = yes;
        self
    }

    /// The batch limits of the pass under the revert.
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Polled at every batch boundary (after the batch committed); `true` stops the
    /// revert, leaving it resumable.
    pub fn abort_when(mut self, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.abort = Some(Arc::new(check));
        self
    }
}

/// One row a revert names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertRow {
    /// The document key.
    pub key: String,
    /// What about it: the reason it failed, or the newer-only fields (dotted paths) the
    /// downcast cannot express.
    pub detail: String,
}

/// What [`Collection::revert`] did (or, for a dry run, would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertReport {
    /// The collection.
    pub collection: String,
    /// The version rows were taken down to.
    pub to: i32,
    /// This build's version (the highest a revert touches).
    pub from: i32,
    /// True for a dry run (nothing written).
    pub dry_run: bool,
    /// True when this run resumed an unfinished revert.
    pub resumed: bool,
    /// True when every row was scanned (false: aborted; run it again to resume).
    pub finished: bool,
    /// Rows read.
    pub scanned: u64,
    /// Rows taken down (dry run: that would be).
    pub reverted: u64,
    /// Rows already at or below the target.
    pub unchanged: u64,
    /// Rows newer than this build knows: never touched.
    pub ahead: u64,
    /// Rows a concurrent write changed between the revert's read and its write (left as
    /// that write made them: inside the window it wrote them at the target version).
    pub conflicted: u64,
    /// Rows whose upcast or downcast failed: left as they are.
    pub failed: u64,
    /// Rows with content the downcast cannot express (kept with the row, or dropped with
    /// [`RevertOptions::drop_newer_fields`]).
    pub newer_content: u64,
    /// The first [`REPORT_LIMIT`] failed rows, with the reason.
    pub failures: Vec<RevertRow>,
    /// The first [`REPORT_LIMIT`] rows with newer-only content, with its fields.
    pub newer_rows: Vec<RevertRow>,
}

impl RevertReport {
    /// True when the revert finished and no row failed: build N reads every row it
    /// knows.
    pub fn is_complete(&self) -> bool {
        self.finished && self.failed == 0
    }
}

/// Rows named by the processor, shared with the caller.
#[derive(Default)]
struct Named {
    failures: Vec<RevertRow>,
    newer_rows: Vec<RevertRow>,
    newer_content: u64,
}

/// The dotted paths of the leaves in `kept` (a newer build's layer nested in it, see
/// [`crate::payload::Upcaster::keep`], contributes its leaves; versions are no leaves).
fn leaf_paths(kept: &JsonObject) -> Vec<String> {
    fn walk(prefix: &str, obj: &JsonObject, out: &mut Vec<String>) {
        for (k, v) in obj {
            match (k.as_str(), v) {
                (crate::payload::chain::KEPT_AT_FIELD, _) => continue,
                (crate::payload::KEPT_FIELD, serde_json::Value::Object(o)) => {
                    walk(prefix, o, out);
                    continue;
                }
                _ => {}
            }
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                serde_json::Value::Object(o) if !o.is_empty() => walk(&path, o, out),
                _ => out.push(path),
            }
        }
    }
    let mut out = Vec::new();
    walk("", kept, &mut out);
    out
}

/// The checkpoint of a revert: its record.
struct RevertCodec {
    key: Vec<u8>,
    target: i32,
    collection: String,
}

impl CheckpointCodec for RevertCodec {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        encode_record(self.target, cursor)
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        let (target, cursor) = decode_record(value)?;
        if target != self.target {
            return Err(RecordError::new(format!(
                "the revert record of `{}` is for v{target}, not v{}",
                self.collection, self.target
            )));
        }
        Ok(cursor)
    }
}

/// The revert's processor: one row up to this build's version and down to the target.
struct RevertProcessor<'c, T> {
    coll: &'c Collection<T>,
    target: i32,
    drop_newer: bool,
    /// A dry run: decide, never emit a mutation.
    dry_run: bool,
    sealer: Option<crate::seal::Sealer>,
    named: &'c Mutex<Named>,
    last: Option<RowOutcome>,
}

impl<T: Serialize + DeserializeOwned> RevertProcessor<'_, T> {
    /// The row's new bytes (`None`: left as it is) and the outcome.
    fn revert_row(&self, full: &[u8], id: &str, bytes: &[u8]) -> Result<RowStep, CollectionError> {
        let name = self.coll.name();
        let table_id = self.coll.inner.table_id;
        let (clear, was_sealed) =
            crate::seal::unseal_row(self.sealer.as_ref(), false, full, table_id, bytes).map_err(
                |source| CollectionError::Seal {
                    collection: name.to_string(),
                    source,
                },
            )?;
        let (env, json) = envelope::decode(&clear).map_err(|e| CollectionError::Corrupted {
            collection: name.to_string(),
            key: id.to_string(),
            reason: crate::pass::RecordError::from_error(e),
        })?;
        let upcaster = &self.coll.inner.upcaster;
        if env.payload_version <= self.target {
            return Ok(RowStep::Unchanged);
        }
        if upcaster.is_ahead(env.payload_version) {
            return Ok(RowStep::Ahead);
        }
        let mut obj: JsonObject =
            serde_json::from_slice(json).map_err(|e| CollectionError::Bind {
                collection: name.to_string(),
                key: id.to_string(),
                stored: env.payload_version,
                version: env.payload_version,
                source: e,
            })?;
        upcaster
            .upcast(&mut obj, env.payload_version)
            .map_err(|f| CollectionError::upcast_failure(name, id, env.payload_version, f))?;
        let kept = upcaster.downcast(&mut obj, self.target).map_err(|f| {
            CollectionError::upcast_failure(name, id, self.coll.current_version(), f)
        })?;
        let newer = (!kept.is_empty()).then(|| leaf_paths(&kept).join(", "));
        if !self.drop_newer {
            upcaster.keep(&mut obj, kept);
        }
        if self.dry_run {
            return Ok(RowStep::Revert(None, newer));
        }
        let mut out = Vec::with_capacity(envelope::ENVELOPE_HEADER_LEN + json.len());
        out.extend_from_slice(&Envelope::new(self.target, env.lock_version).header_bytes());
        serde_json::to_writer(&mut out, &obj).map_err(|e| CollectionError::Encode {
            collection: name.to_string(),
            key: id.to_string(),
            reason: e.to_string(),
        })?;
        let out = match (&self.sealer, was_sealed || self.coll.inner.sealer.is_some()) {
            (Some(s), true) => {
                crate::seal::seal_clear_row(s, full, table_id, &out).map_err(|source| {
                    CollectionError::Seal {
                        collection: name.to_string(),
                        source,
                    }
                })?
            }
            _ => out,
        };
        Ok(RowStep::Revert(Some(out), newer))
    }
}

enum RowStep {
    Unchanged,
    Ahead,
    /// The new bytes (`None` in a dry run) and the newer-only fields, if any.
    Revert(Option<Vec<u8>>, Option<String>),
}

fn lock(named: &Mutex<Named>) -> std::sync::MutexGuard<'_, Named> {
    named.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T: Serialize + DeserializeOwned> Processor for RevertProcessor<'_, T> {
    fn process(&mut self, r: &RecordRef<'_>, out: &mut Vec<Mutation>) -> Result<(), RecordError> {
        let prefix_len = self.coll.inner.prefix.len();
        let id_bytes = &r.key[prefix_len.min(r.key.len())..];
        let id = String::from_utf8_lossy(id_bytes).into_owned();
        let outcome = match self.revert_row(r.key, &id, r.value) {
            Ok(RowStep::Unchanged) => RowOutcome::Unchanged,
            Ok(RowStep::Ahead) => RowOutcome::SkippedAhead,
            Ok(RowStep::Revert(bytes, newer)) => {
                if let Some(fields) = newer {
                    let mut n = lock(self.named);
                    n.newer_content += 1;
                    if n.newer_rows.len() < REPORT_LIMIT {
                        n.newer_rows.push(RevertRow {
                            key: id.clone(),
                            detail: fields,
                        });
                    }
                }
                match bytes {
                    Some(b) => {
                        out.push(r.replace(b));
                        RowOutcome::Rewritten
                    }
                    // A dry run counts the row as one a revert would rewrite.
                    None => RowOutcome::Rewritten,
                }
            }
            Err(e) => {
                let reason = crate::collection::with_causes(&e);
                tracing::warn!(collection = %self.coll.name(), key = %id, error = %reason, "revert: row left as it is");
                let mut n = lock(self.named);
                if n.failures.len() < REPORT_LIMIT {
                    n.failures.push(RevertRow {
                        key: id,
                        detail: reason,
                    });
                }
                RowOutcome::Failed
            }
        };
        self.last = Some(outcome);
        Ok(())
    }

    fn outcome(&mut self) -> Option<RowOutcome> {
        self.last.take()
    }
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Every check a [`Collection::revert`] to `to` makes before it writes, on reads only
    /// (a store opened read-only will do): `Ok` when the revert would start or resume.
    /// The embedded admin runs it on a read-only open first, so a refused revert changes
    /// not one byte.
    pub fn check_revert(&self, to: i32) -> Result<(), CollectionError> {
        let (resumed, window) = self.revert_preflight(to)?;
        if !resumed {
            self.revert_start_batch(to, window.is_some())?;
        }
        Ok(())
    }

    /// The checks of a revert that need no row: (an unfinished revert to `to` is
    /// resumed, the open window's operational version).
    fn revert_preflight(&self, to: i32) -> Result<(bool, Option<i32>), CollectionError> {
        let name = self.name().to_string();
        let store = self.store();
        let st = |e: StoreError| CollectionError::store(&name, e);
        let current = self.current_version();
        let refuse = |reason: String| CollectionError::Revert {
            collection: name.clone(),
            to,
            reason: reason.into(),
        };
        if to >= current {
            return Err(refuse(format!(
                "this build is at v{current}; a revert goes to a lower version"
            )));
        }
        if to < crate::payload::INITIAL_PAYLOAD_VERSION {
            return Err(refuse("payload versions start at 1".into()));
        }
        let lowest = self.inner.upcaster.chain().lowest_writable();
        if to < lowest {
            return Err(refuse(format!(
                "this build declares downcasts only down to v{lowest}; declare `CollectionOptions::downcast(..)` for every version from v{current} down to v{to}"
            )));
        }
        // The store's retirement, read now (it may have been recorded after this handle
        // opened): a row taken below it would be refused by every reader, and the window
        // at `to` would make every write of this build fail.
        if let Some(below) = crate::collection::layout::retired_below(store, &name)? {
            if to < below {
                return Err(refuse(format!(
                    "the versions below v{below} are retired in this store (`{}`), so no reader accepts a row at v{to}; revert to v{below} or above (nothing was changed)",
                    strata_store::escape_key(&crate::payload::retired::retired_key(&name))
                )));
            }
        }
        let key = revert_key(&name);
        let record = store.get(&key).map_err(st)?;
        let resumed = match &record {
            Some(bytes) => {
                let (target, _) = decode_record(bytes).map_err(|r| corrupt(&name, r))?;
                if target != to {
                    return Err(refuse(format!(
                        "a revert to v{target} is unfinished; finish it first (revert `{name}` to v{target})"
                    )));
                }
                true
            }
            None => false,
        };
        let window = crate::collection::layout::window_operational(store, &name)?;
        if let Some(op) = window {
            if op != to {
                return Err(refuse(format!(
                    "a deploy window holds it at v{op}; complete that window (or revert to v{op}) first"
                )));
            }
        }
        Ok((resumed, window))
    }

    /// Takes the collection back down to payload version `to` through this build's
    /// downcasts (see the [module docs](self)): back into a deploy window at `to`, the
    /// schema baseline of `to` restored, then every row above `to` (and not above this
    /// build's version) downcast, resumable. With [`RevertOptions::dry_run`] nothing is
    /// written.
    ///
    /// Refused ([`CollectionError::Revert`], nothing changed) when `to` is not below this
    /// build's version, when this build declares no downcasts down to `to`, when a window
    /// is open at another version, when an eager sweep or another revert is unfinished,
    /// or when the schema history records no schema at `to`; a fenced collection refuses
    /// as a write does.
    pub fn revert(&self, to: i32, options: RevertOptions) -> Result<RevertReport, CollectionError> {
        let name = self.name().to_string();
        let store = self.store();
        let current = self.current_version();
        let (resumed, window) = self.revert_preflight(to)?;
        let key = revert_key(&name);
        let wkey = window_key(&name);
        let mut report = RevertReport {
            collection: name.clone(),
            to,
            from: current,
            dry_run: options.dry_run,
            resumed,
            finished: false,
            scanned: 0,
            reverted: 0,
            unchanged: 0,
            ahead: 0,
            conflicted: 0,
            failed: 0,
            newer_content: 0,
            failures: Vec::new(),
            newer_rows: Vec::new(),
        };
        let named = Mutex::new(Named::default());
        if options.dry_run {
            if !resumed {
                // The refusals a real run would meet before its first row.
                self.revert_start_batch(to, window.is_some())?;
            }
            let counters = self.revert_dry_run(to, &options, &named)?;
            report.finished = true;
            fill(&mut report, &counters, named);
            return Ok(report);
        }
        // A write from here on: the fence and the write guards decide (a dry run reads
        // only, on a store that may be open read-only).
        self.check_guards()?;
        if !resumed {
            let batch = self.revert_start_batch(to, window.is_some())?;
            store.apply(batch).map_err(|e| {
                if e.is_conflict() {
                    CollectionError::WindowChanged {
                        collection: name.clone(),
                    }
                } else {
                    CollectionError::store(&name, e)
                }
            })?;
            tracing::info!(collection = %name, to, "revert: back in a deploy window at v{to}; the schema baseline of v{to} restored");
        }
        tracing::info!(collection = %name, to, from = current, resumed, "revert started");
        let sealer = self.sealer_now();
        let keyring = sealer.as_ref().map(|s| s.keyring_precondition());
        let processor = RevertProcessor {
            coll: self,
            target: to,
            drop_newer: options.drop_newer,
            dry_run: false,
            sealer,
            named: &named,
            last: None,
        };
        let codec = RevertCodec {
            key: key.clone(),
            target: to,
            collection: name.clone(),
        };
        let abort = options.abort.clone();
        let window_bytes = encode_window(to).to_vec();
        let mut counters = RowCounters::default();
        let result = Pass::new(&name, doc_prefix(&name), codec)
            .limits(options.limits)
            .guard_checkpoint(true)
            .abort_when(move || abort.as_ref().is_some_and(|a| a()))
            .row_conditions(true)
            .on_batch(
                |batch: &mut Batch, _: &BatchInfo<'_>| -> Result<(), HookError> {
                    let guarded = self.check_guards().map_err(|e| match e {
                        CollectionError::Store { .. } => HookError::check(e),
                        refusal => HookError::refused(refusal),
                    })?;
                    for p in guarded {
                        batch.push_precondition(p);
                    }
                    if let Some(k) = &keyring {
                        batch.push_precondition(k.clone());
                    }
                    // The window must still hold the collection at the target: a build N+1
                    // writes there only while it does.
                    batch.push_precondition(strata_store::Precondition::Equals {
                        key: wkey.clone(),
                        value: window_bytes.clone(),
                    });
                    Ok(())
                },
            )
            .on_progress(|p| counters = p.counters)
            .run(store, processor);
        match result {
            Ok(_) => report.finished = true,
            Err(PassError::Aborted { .. }) => {
                tracing::info!(collection = %name, "revert aborted; run it again to resume");
            }
            Err(PassError::Hook { source, .. }) => {
                return Err(match source.into_cause::<CollectionError>() {
                    Ok(e) => e,
                    Err(source) => self.guard_refusal(Box::new(source)),
                });
            }
            Err(PassError::Store {
                source: StoreError::Conflict { key: k, .. },
                ..
            }) if k == wkey => {
                return Err(CollectionError::WindowChanged { collection: name });
            }
            Err(source) => {
                return Err(CollectionError::RevertPass {
                    collection: name,
                    to,
                    source: Box::new(source),
                });
            }
        }
        fill(&mut report, &counters, named);
        tracing::info!(collection = %report.collection, to, reverted = report.reverted, failed = report.failed, ahead = report.ahead, finished = report.finished, "revert ended");
        Ok(report)
    }

    /// Step 1 (see the module docs): the window at `to`, the baseline of `to`, the sweep
    /// marker lowered and the revert record, as one batch (read here, not applied).
    fn revert_start_batch(&self, to: i32, window_open: bool) -> Result<Batch, CollectionError> {
        let name = self.name();
        let store = self.store();
        let st = |e: StoreError| CollectionError::store(name, e);
        let refuse = |reason: String| CollectionError::Revert {
            collection: name.to_string(),
            to,
            reason: reason.into(),
        };
        // The retirement the preflight checked must still be the store's when it commits.
        let retired = crate::payload::retired::retired_key(name);
        let retired_bytes = store.get(&retired).map_err(st)?;
        let mut batch = Batch::new()
            .require(retired, retired_bytes)
            .require_absent(revert_key(name))
            .set(revert_key(name), encode_record(to, &[]));
        let wkey = window_key(name);
        if !window_open {
            batch = batch
                .require_absent(wkey.clone())
                .set(wkey, encode_window(to).to_vec());
        }
        // The sweep marker: no sweep may be running; its completed version goes down.
        let skey = sweep_key(name);
        let marker_bytes = store.get(&skey).map_err(st)?;
        if let Some(bytes) = &marker_bytes {
            let mut marker = crate::ops::sweep::SweepMarker::decode(name, bytes)?;
            if marker.in_progress.is_some() {
                return Err(refuse(
                    "an eager sweep of it is unfinished; run the sweep to its end first (a window's `complete` does)".into(),
                ));
            }
            if marker.completed > to {
                marker.completed = to;
                batch = batch
                    .require_eq(skey.clone(), bytes.clone())
                    .set(skey, marker.encode());
            }
        }
        // The schema baseline of `to`, from the schema history.
        let policy_key = crate::policy::baseline_key(name);
        if let Some((decoded, raw)) =
            Baseline::read(store, name).map_err(|e| CollectionError::policy(name, e))?
        {
            let current = decoded.map_err(|e| CollectionError::policy(name, e))?;
            if current.payload_version.is_some_and(|v| v > to) {
                let history =
                    read_history(store, name).map_err(|e| CollectionError::policy(name, e))?;
                let Some(old) = history
                    .iter()
                    .rev()
                    .find(|v| v.baseline.payload_version == Some(to))
                else {
                    return Err(refuse(format!(
                        "its schema history records no schema at payload v{to} (strata cannot tell what build v{to} declared); nothing was changed"
                    )));
                };
                let bytes = old.baseline.encode();
                batch = batch
                    .require_eq(policy_key.clone(), raw.clone())
                    .set(policy_key, bytes.clone());
                batch = crate::policy::history::append(store, batch, name, Some(&raw), bytes)
                    .map_err(|e| CollectionError::policy(name, e))?;
            }
        }
        Ok(batch)
    }

    /// A dry run: every row decided, nothing written.
    fn revert_dry_run(
        &self,
        to: i32,
        options: &RevertOptions,
        named: &Mutex<Named>,
    ) -> Result<RowCounters, CollectionError> {
        let name = self.name();
        let mut processor = RevertProcessor {
            coll: self,
            target: to,
            drop_newer: options.drop_newer,
            dry_run: true,
            sealer: self.sealer_now(),
            named,
            last: None,
        };
        let limits = ScanLimits::new(options.limits.max_records(), options.limits.max_bytes())
            .map_err(|e| CollectionError::store(name, e))?;
        let mut counters = RowCounters::default();
        let mut scratch = Vec::new();
        for r in Pages::new(self.store(), &self.inner.prefix, limits).records() {
            let r = r.map_err(|e| CollectionError::store(name, e))?;
            let rec = RecordRef {
                table: name,
                key: &r.key,
                value: &r.value,
            };
            processor
                .process(&rec, &mut scratch)
                .map_err(|e| CollectionError::Revert {
                    collection: name.to_string(),
                    to,
                    reason: e,
                })?;
            scratch.clear();
            if let Some(o) = processor.outcome() {
                counters.count(o);
            }
        }
        Ok(counters)
    }
}

fn fill(report: &mut RevertReport, c: &RowCounters, named: Mutex<Named>) {
    report.scanned = c.scanned;
    report.reverted = c.rewritten;
    report.unchanged = c.unchanged;
    report.ahead = c.skipped_ahead;
    report.conflicted = c.conflicted;
    report.failed = c.failed;
    let n = named.into_inner().unwrap_or_else(|e| e.into_inner());
    report.newer_content = n.newer_content;
    report.failures = n.failures;
    report.newer_rows = n.newer_rows;
}
