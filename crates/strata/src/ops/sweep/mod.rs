//! The eager sweep: rewrite every stale document of a collection in bulk, on the
//! [bulk pass](crate::pass).
//!
//! The sweep is not a second migration engine nor a second rewriter: each document goes
//! through the collection's one row rewrite (envelope → chain → bind check, the ahead
//! guard) and the bulk pass writes it back **update-only** with its per-row conditions
//! ([`Pass::row_conditions`](crate::pass::Pass::row_conditions)): every rewritten row
//! carries a compare-and-swap against the bytes that were read. When a concurrent write
//! beats the sweep to some rows of a batch, the pass re-reads the batch's rows, drops each
//! changed or deleted one (counted as [conflicted](SweepCounters::conflicted); a deleted row
//! is never resurrected, a changed one never overwritten) and commits the other rows of
//! the batch — still each under its own compare-and-swap, no step run twice. A sweep never
//! writes into a fenced collection: every batch runs the policy's check and carries the
//! fence bytes it checked.
//!
//! Single runner: the marker at `__nx/sweep/<collection>` is also a lease. A sweep claims
//! it by compare-and-swap, and every batch renews it in the same atomic batch that writes
//! the documents and advances the cursor (the pass's checkpoint *is* the marker). A batch
//! that finds the marker changed means another instance took the lease over: the sweep
//! stops with "lease lost". An aborted or killed sweep resumes after its cursor.
//!
//! Across processes and machines (a store on a shared server, see
//! [`strata_store::NamedLease`]) the sweep first takes the store's named lease
//! `sweep/<collection>`: a second sweeper anywhere finds it held and returns "contended"
//! naming the holder (after waiting up to [`SweepOptions::lease_wait`]). The lease's
//! fencing token is written into the claimed marker (`token`), so every batch of the
//! holder, which compare-and-swaps the marker, preconditions on it. The lease ends with
//! its holder's process, so a sweeper killed mid-run is taken over at once by the next
//! one, which resumes after the cursor without waiting for the marker's expiry (the
//! cross-process lease proves the previous runner gone). On backends one process opens at
//! a time (sled's file lock) the marker's expiry alone decides, as in one process.
//!
//! The marker is a hint: per-document payload versions stay the truth, and the lazy read
//! path never consults it. Its only use is to let a completed sweep skip the scan.

use crate::clock::SharedClock;
use crate::collection::layout::sweep_key;
use crate::collection::rewrite::RowRewrite;
use crate::collection::{Collection, CollectionError};
use crate::pass::{
    BatchInfo, CheckpointCodec, HookError, Pass, PassError, PassLimits, Processor, RecordError,
    RecordRef, RowCounters, RowOutcome,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use strata_store::{manifest::Manifest, Batch, KvRead, KvWrite, Mutation, NamedLease, StoreError};

/// Consecutive batch conflicts not explained by a changed row (a write guard's state moved)
/// tolerated before the sweep gives up for this run.
const MAX_CONFLICT_RETRIES: u64 = 1_000;
/// The operation name of the manifests a sweep records
/// (`__nx/manifest/sweep/<collection>`).
pub const MANIFEST_OPERATION: &str = "sweep";

mod marker;
mod options;

pub use marker::{SweepCounters, SweepMarker};
pub use options::{SweepOptions, DEFAULT_BATCH_SIZE, DEFAULT_LEASE_MS, DEFAULT_PROGRESS_LOG_MS};

/// Why a sweep ended as it did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SweepNote {
    /// The collection declares no eager step: nothing to do, no marker written.
    NoEagerStep,
    /// The marker says a sweep to this version already completed: no scan.
    AlreadyAt(i32),
    /// Another instance holds a live lease.
    Contended,
    /// The lease compare-and-swap lost a race.
    LeaseNotClaimed,
    /// The abort check stopped the sweep; the lease was released and the cursor kept.
    Aborted,
    /// Another instance took the lease over mid-sweep.
    LeaseLost,
    /// Every row was scanned and none failed: the marker advanced.
    Complete,
    /// Every row was scanned but some failed: the marker did not advance.
    Incomplete,
    /// A deploy window holds the collection at this operational version: rows stay
    /// there until the window completes (which sweeps them).
    WindowOpen(i32),
}

impl fmt::Display for SweepNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepNote::NoEagerStep => f.write_str("no eager step"),
            SweepNote::AlreadyAt(v) => write!(f, "already at v{v}"),
            SweepNote::Contended => f.write_str("contended (live lease held by another instance)"),
            SweepNote::LeaseNotClaimed => f.write_str("lease not claimed"),
            SweepNote::Aborted => f.write_str("aborted"),
            SweepNote::LeaseLost => f.write_str("lease lost"),
            SweepNote::Complete => f.write_str("complete"),
            SweepNote::Incomplete => f.write_str("incomplete"),
            SweepNote::WindowOpen(v) => write!(
                f,
                "deploy window open at v{v} (complete the window to sweep)"
            ),
        }
    }
}

/// What one sweep run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// The collection.
    pub collection: String,
    /// The eager target version (`None`: no eager step).
    pub target_version: Option<i32>,
    /// The version stale rows were rewritten at (this build's current version).
    pub current_version: i32,
    /// Counters of this run.
    pub counters: SweepCounters,
    /// True when this run advanced the marker's completed version.
    pub marker_advanced: bool,
    /// The cursor this run resumed after (`None`: from the beginning).
    pub resumed_from: Option<Vec<u8>>,
    /// Why the run ended.
    pub note: SweepNote,
    /// Who holds the lease when the note is [`SweepNote::Contended`].
    pub holder: Option<String>,
    /// The fencing token this run claimed the marker with (stores shared by several
    /// processes).
    pub fencing_token: Option<u64>,
}

impl SweepReport {
    /// Rows read.
    pub fn scanned(&self) -> u64 {
        self.counters.scanned
    }
    /// Rows rewritten.
    pub fn rewritten(&self) -> u64 {
        self.counters.rewritten
    }
    /// Rows a concurrent write changed or deleted between the sweep's read and its write
    /// (left as that write made them).
    pub fn conflicted(&self) -> u64 {
        self.counters.conflicted
    }
    /// Rows left alone because a newer build wrote them.
    pub fn skipped_ahead(&self) -> u64 {
        self.counters.skipped_ahead
    }
    /// Rows that could not be read.
    pub fn failed(&self) -> u64 {
        self.counters.failed
    }
}

/// State shared between the checkpoint codec and the hooks of one sweep. The per-row
/// counters are the pass's ([`RowCounters`]): it counts each row once, in the batch that
/// commits it, after any narrowing.
struct RunShared {
    marker: SweepMarker,
    /// Counters committed (marker) before this sweep + by this sweep.
    committed: SweepCounters,
    /// Counters committed by this sweep (over its pass runs).
    run: SweepCounters,
    /// `committed` and `run` when the current pass run started.
    base: (SweepCounters, SweepCounters),
    /// Set when the marker turned out to belong to another runner.
    lease_lost: bool,
}

impl RunShared {
    /// A pass run starts: its counters add to what is committed so far.
    fn start_pass(&mut self) {
        self.base = (self.committed, self.run);
    }

    /// A batch of the current pass run committed: `pass` is the run's total so far.
    fn committed_pass(&mut self, pass: &RowCounters) {
        let c = SweepCounters::from_rows(pass);
        let (mut committed, mut run) = self.base;
        committed.add(&c);
        run.add(&c);
        self.committed = committed;
        self.run = run;
    }
}

struct Shared {
    state: Mutex<RunShared>,
    key: Vec<u8>,
    clock: SharedClock,
    lease_ms: u64,
    target: i32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, RunShared> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pass checkpoint of a sweep: the marker itself. Encoding a cursor renews the lease.
struct MarkerCodec<'a>(&'a Shared);

impl CheckpointCodec for MarkerCodec<'_> {
    fn key(&self) -> &[u8] {
        &self.0.key
    }

    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        self.encode_counted(cursor, &RowCounters::default())
    }

    fn encode_counted(&self, cursor: &[u8], batch: &RowCounters) -> Vec<u8> {
        let g = self.0.lock();
        let mut m = g.marker.clone();
        m.in_progress = Some(self.0.target);
        m.cursor_hex = (!cursor.is_empty()).then(|| strata_store::to_hex(cursor));
        m.lease_expires_ms = self.0.clock.now_ms().saturating_add(self.0.lease_ms);
        let mut c = g.committed;
        c.add(&SweepCounters::from_rows(batch));
        m.counters = c;
        m.encode()
    }

    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        let m = SweepMarker::decode("", value).map_err(RecordError::from_error)?;
        let mut g = self.0.lock();
        if m.runner != g.marker.runner
            || m.token != g.marker.token
            || m.in_progress != Some(self.0.target)
        {
            g.lease_lost = true;
            return Err("the sweep lease was taken over by another instance".into());
        }
        Ok(m.cursor().unwrap_or_default())
    }

    fn finished(&self) -> Option<Vec<u8>> {
        self.finished_counted(&RowCounters::default())
    }

    fn finished_counted(&self, batch: &RowCounters) -> Option<Vec<u8>> {
        let g = self.0.lock();
        let mut total = g.committed;
        total.add(&SweepCounters::from_rows(batch));
        let mut m = g.marker.clone();
        if total.failed == 0 {
            m.completed = m.completed.max(self.0.target);
        }
        m.in_progress = None;
        m.lease_expires_ms = 0;
        m.cursor_hex = None;
        m.counters = total;
        Some(m.encode())
    }
}

/// Removes the collection from the in-process "sweeping" set when the sweep ends.
struct SweepingGuard<'a> {
    set: &'a Mutex<std::collections::HashSet<String>>,
    name: String,
}

impl Drop for SweepingGuard<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.name);
    }
}

enum Outcome {
    Finished { complete: bool },
    LeaseLost,
    Failed(CollectionError),
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Runs the eager sweep (see the [module docs](crate::ops::sweep)).
    ///
    /// Returns a report whose [`SweepNote`] says how it ended; errors only for store
    /// failures, a refusing write guard, a corrupt marker, or a pass failure (rerun to
    /// resume).
    pub fn sweep(&self, options: SweepOptions) -> Result<SweepReport, CollectionError> {
        let name = self.name().to_string();
        let current = self.current_version();
        let mut report = SweepReport {
            collection: name.clone(),
            target_version: self.eager_target_version(),
            current_version: current,
            counters: SweepCounters::default(),
            marker_advanced: false,
            resumed_from: None,
            note: SweepNote::NoEagerStep,
            holder: None,
            fencing_token: None,
        };
        let Some(target) = report.target_version else {
            return Ok(report);
        };
        let store = self.store();
        let st = |e| CollectionError::store(&name, e);
        let key = sweep_key(&name);
        let stored = store.get(&key).map_err(st)?;
        let marker = match &stored {
            Some(b) => SweepMarker::decode(&name, b)?,
            None => SweepMarker {
                format: 1,
                ..SweepMarker::default()
            },
        };
        if marker.completed >= target && marker.in_progress.is_none() {
            report.note = SweepNote::AlreadyAt(target);
            return Ok(report);
        }
        // Inside a deploy window rows stay at its operational version (checked after
        // the marker, so a completed sweep still costs one read).
        let window = crate::collection::layout::window_operational(store, &name)?;
        if let Some(operational) = window {
            if operational < target {
                report.note = SweepNote::WindowOpen(operational);
                return Ok(report);
            }
        }
        // Across processes: the named lease of this collection's sweep (held until the
        // sweep returns).
        let holder = strata_store::lease_holder(&format!(
            "sweep of `{name}` (runner {})",
            options.runner_id
        ));
        let cross =
            NamedLease::acquire(store, &format!("sweep/{name}"), &holder, options.lease_wait)
                .map_err(st)?;
        let token = match &cross {
            NamedLease::Busy { holder } => {
                report.note = SweepNote::Contended;
                report.holder = Some(holder.clone());
                return Ok(report);
            }
            NamedLease::Held(held) => Some(held.fencing_token()),
            NamedLease::Local => None,
        };
        let now = options.clock.now_ms();
        // Registered before the claim is written: a sweep of this process that sees the
        // claim finds its runner running.
        let _running =
            crate::alive::Alive::enter(crate::alive::Holder::SweepRunner, &options.runner_id);
        if marker.held_by_other(&options.runner_id, now) {
            let running_here = marker.runner.as_deref().is_some_and(|r| {
                crate::alive::Alive::contains(crate::alive::Holder::SweepRunner, r)
            });
            if token.is_none() && running_here {
                report.note = SweepNote::Contended;
                report.holder = marker.runner.clone();
                return Ok(report);
            }
            // The cross-process lease is ours, or (a store one process opens at a time)
            // the marker's runner is not running here: its sweep ended without releasing
            // the lease (killed, or the release failed on a full disk).
            tracing::warn!(collection = %name, previous = ?marker.runner, "taking over the sweep of a runner that ended before its marker lease expired");
        }
        self.check_guards()?;
        // Claim: the same target resumes its cursor and counters; another target restarts.
        let mut claimed = marker.clone();
        if claimed.in_progress != Some(target) {
            claimed.cursor_hex = None;
            claimed.counters = SweepCounters::default();
        }
        claimed.in_progress = Some(target);
        claimed.runner = Some(options.runner_id.clone());
        claimed.lease_expires_ms = now.saturating_add(options.lease_ms);
        // A fencing token larger than every earlier claim's (the cross-process lease's
        // when there is one).
        claimed.token = token.map(|t| t.max(marker.token.map_or(0, |m| m.saturating_add(1))));
        report.fencing_token = claimed.token;
        let claim = Batch::new()
            .require(key.clone(), stored)
            .set(key.clone(), claimed.encode());
        match store.apply(claim) {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                report.note = SweepNote::LeaseNotClaimed;
                return Ok(report);
            }
            Err(e) => return Err(st(e)),
        }
        report.resumed_from = claimed.cursor();
        let _sweeping = {
            let set = &self.inner.sweeping;
            set.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone());
            SweepingGuard {
                set,
                name: name.clone(),
            }
        };
        tracing::info!(collection = %name, target, current, runner = %options.runner_id, resumed = report.resumed_from.is_some(), "sweep started");
        let shared = Shared {
            state: Mutex::new(RunShared {
                committed: claimed.counters,
                base: (claimed.counters, SweepCounters::default()),
                marker: claimed,
                run: SweepCounters::default(),
                lease_lost: false,
            }),
            key: key.clone(),
            clock: Arc::clone(&options.clock),
            lease_ms: options.lease_ms,
            target,
        };
        let limits = options.limits;
        let mut conflicts_in_a_row = 0u64;
        let outcome = loop {
            shared.lock().start_pass();
            let result = self.run_pass(&shared, limits, &options);
            let g = shared.lock();
            match result {
                Ok(()) => {
                    break Outcome::Finished {
                        complete: g.committed.failed == 0,
                    }
                }
                Err(PassError::Store {
                    source: StoreError::Conflict { key: k, .. },
                    ..
                }) if k != key => {
                    // Not explained by a changed row (the pass narrowed those away): a
                    // write guard's key moved (or the keyring: refresh the keys). Rerun from
                    // the cursor; the batch hook checks the guards again.
                    conflicts_in_a_row += 1;
                    if let Err(e) = self.refresh_sealer() {
                        break Outcome::Failed(e);
                    }
                    if conflicts_in_a_row > MAX_CONFLICT_RETRIES {
                        break Outcome::Failed(CollectionError::Sweep {
                            collection: name.clone(),
                            reason: "concurrent writes kept conflicting with the sweep".into(),
                            source: None,
                        });
                    }
                }
                Err(PassError::Store {
                    source: StoreError::Conflict { .. },
                    ..
                }) => break Outcome::LeaseLost,
                Err(PassError::CorruptCheckpoint { .. }) if g.lease_lost => {
                    break Outcome::LeaseLost
                }
                Err(PassError::Hook { source, .. }) => {
                    break Outcome::Failed(match source.into_cause::<CollectionError>() {
                        Ok(e) => e,
                        Err(source) => self.guard_refusal(Box::new(source)),
                    });
                }
                Err(PassError::Aborted { .. }) => {
                    let run = g.run;
                    drop(g);
                    self.release_lease(&shared, &options)?;
                    report.counters = run;
                    report.note = SweepNote::Aborted;
                    tracing::info!(collection = %name, "sweep aborted; lease released, rerun to resume");
                    return Ok(report);
                }
                Err(e) => {
                    // The pass error is the source (printed once, by the chain).
                    break Outcome::Failed(CollectionError::Sweep {
                        collection: name.clone(),
                        reason: "the bulk pass failed".into(),
                        source: Some(Box::new(e)),
                    });
                }
            }
        };
        report.counters = shared.lock().run;
        match outcome {
            Outcome::Finished { complete: true } => {
                report.note = SweepNote::Complete;
                report.marker_advanced = true;
            }
            Outcome::Finished { complete: false } => report.note = SweepNote::Incomplete,
            Outcome::LeaseLost => report.note = SweepNote::LeaseLost,
            Outcome::Failed(e) => {
                // Leave the lease to expire only if we cannot release it cleanly.
                let _ = self.release_lease(&shared, &options);
                return Err(e);
            }
        }
        tracing::info!(collection = %name, note = %report.note, scanned = report.counters.scanned, rewritten = report.counters.rewritten, conflicted = report.counters.conflicted, failed = report.counters.failed, "sweep finished");
        Ok(report)
    }

    /// One run of the bulk pass from the marker's cursor to the end of the collection.
    fn run_pass(
        &self,
        shared: &Shared,
        limits: PassLimits,
        options: &SweepOptions,
    ) -> Result<(), PassError> {
        let name = self.name();
        let abort = options.abort.clone();
        let started = Instant::now();
        let mut last_log = Instant::now();
        let spacing = Duration::from_millis(options.progress_log_ms);
        // One snapshot of the keys per pass run: every row is sealed with it and every
        // batch carries its keyring precondition.
        let sealer = self.sealer_now();
        let keyring = sealer.as_ref().map(|s| s.keyring_precondition());
        let processor = SweepProcessor {
            coll: self,
            prefix_len: self.inner.prefix.len(),
            last: None,
            sealer: sealer.clone(),
        };
        let codec = MarkerCodec(shared);
        // Armed while the final batch is tallied and committed: a manifest whose
        // collection an application write touched meanwhile is not recorded.
        let armed: std::cell::RefCell<Option<strata_store::manifest::ArmedScope>> =
            Default::default();
        let result = Pass::new(name, self.inner.prefix.clone(), codec)
            .limits(limits)
            // The marker compare-and-swap on every batch IS the lease renewal.
            .guard_checkpoint(true)
            .abort_when(move || abort.as_ref().is_some_and(|a| a()))
            // Every rewritten row is written only over the bytes read; a batch whose rows
            // changed meanwhile is narrowed by the pass, the dropped rows count as
            // conflicted.
            .row_conditions(true)
            // The rows as the pass leaves them: when nothing else wrote meanwhile, the
            // manifest is recorded from this tally instead of a second scan.
            .tally_scope(true)
            .on_batch(|batch: &mut Batch, info: &BatchInfo<'_>| -> Result<(), HookError> {
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
                if info.done {
                    // The collection as this final batch leaves it (armed in
                    // `on_complete`, before the pass proved its tally).
                    match info.tally {
                        Some(tally) => {
                            let m = Manifest::new(
                                MANIFEST_OPERATION,
                                name,
                                &self.inner.prefix,
                                tally,
                            );
                            batch.push(Mutation::Set {
                                key: m.key(),
                                value: m.encode(),
                            });
                        }
                        None => {
                            Manifest::record(
                                self.store(),
                                MANIFEST_OPERATION,
                                name,
                                &self.inner.prefix,
                                batch,
                            )
                            .map_err(|e| HookError::check(CollectionError::store(name, e)))?;
                        }
                    }
                }
                Ok(())
            })
            .on_complete(|_: &mut Batch| -> Result<(), HookError> {
                armed.replace(Some(self.store().arm_manifest_scope(&self.inner.prefix)));
                Ok(())
            })
            .on_progress(|p| {
                let mut g = shared.lock();
                g.committed_pass(&p.counters);
                if last_log.elapsed() >= spacing || p.done {
                    last_log = Instant::now();
                    tracing::info!(collection = %name, scanned = g.run.scanned, rewritten = g.run.rewritten, elapsed_ms = started.elapsed().as_millis() as u64, done = p.done, "sweep progress");
                }
            })
            .run(self.store(), processor)
            .map(|_| ());
        drop(armed);
        result
    }

    /// Decides what the sweep does with one stored row: the one row rewrite, checking
    /// that the rewritten row binds to the collection's type. The check binds the tree by
    /// value, as the read path binds an upcast row (`serde_json::from_value`): serde_json's
    /// by-value and by-reference tree deserializers differ only in handing strings over
    /// owned rather than borrowed, which the derived and standard `Deserialize` impls
    /// treat alike, and by value the strings move instead of being copied.
    fn sweep_row(
        &self,
        full_key: &[u8],
        id: &str,
        bytes: &[u8],
        sealer: Option<&crate::seal::Sealer>,
    ) -> Result<RowAction, CollectionError> {
        let check = |tree: serde_json::Value| T::deserialize(tree).map(|_| ());
        Ok(
            match self
                .rewriter(None, sealer)
                .rewrite_at(full_key, id, bytes, check)?
            {
                RowRewrite::Keep => RowAction::Keep,
                RowRewrite::Ahead { .. } => RowAction::Ahead,
                RowRewrite::Rewrite(value) => RowAction::Rewrite(value),
            },
        )
    }

    /// Releases this runner's lease (expiry 0), keeping the cursor so the next run
    /// resumes. Does nothing when the marker is no longer ours.
    fn release_lease(
        &self,
        shared: &Shared,
        options: &SweepOptions,
    ) -> Result<(), CollectionError> {
        let name = self.name();
        let st = |e| CollectionError::store(name, e);
        let Some(bytes) = self.store().get(&shared.key).map_err(st)? else {
            return Ok(());
        };
        let mut m = SweepMarker::decode(name, &bytes)?;
        if m.runner.as_deref() != Some(options.runner_id.as_str()) {
            return Ok(());
        }
        m.lease_expires_ms = 0;
        let batch = Batch::new()
            .require_eq(shared.key.clone(), bytes)
            .set(shared.key.clone(), m.encode());
        match self.store().apply(batch) {
            Ok(()) => Ok(()),
            Err(e) if e.is_conflict() => Ok(()),
            Err(e) => Err(st(e)),
        }
    }
}

/// The sweep's processor: the one row rewrite per row, with a typed outcome.
struct SweepProcessor<'c, T> {
    coll: &'c Collection<T>,
    prefix_len: usize,
    last: Option<RowOutcome>,
    sealer: Option<crate::seal::Sealer>,
}

impl<T: Serialize + DeserializeOwned> Processor for SweepProcessor<'_, T> {
    fn process(&mut self, r: &RecordRef<'_>, out: &mut Vec<Mutation>) -> Result<(), RecordError> {
        let name = self.coll.name();
        let id_bytes = &r.key[self.prefix_len.min(r.key.len())..];
        let outcome = match std::str::from_utf8(id_bytes) {
            Err(_) => {
                tracing::warn!(collection = %name, key = %strata_store::escape_key(r.key), "sweep: document key is not UTF-8; row left as is");
                RowOutcome::Failed
            }
            Ok(id) => match self
                .coll
                .sweep_row(r.key, id, r.value, self.sealer.as_ref())
            {
                Ok(RowAction::Keep) => RowOutcome::Unchanged,
                Ok(RowAction::Ahead) => RowOutcome::SkippedAhead,
                Ok(RowAction::Rewrite(value)) => {
                    out.push(r.replace(value));
                    RowOutcome::Rewritten
                }
                Err(e) => {
                    let error = crate::collection::with_causes(&e);
                    tracing::warn!(collection = %name, error, "sweep: row cannot be upcast; it blocks completion");
                    RowOutcome::Failed
                }
            },
        };
        self.last = Some(outcome);
        Ok(())
    }

    fn outcome(&mut self) -> Option<RowOutcome> {
        self.last.take()
    }
}

enum RowAction {
    Keep,
    Ahead,
    Rewrite(Vec<u8>),
}
