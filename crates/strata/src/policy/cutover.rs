//! The coordinated cutover: the drain barrier, then every pending collection rewritten
//! through its transform on the bulk pass (batched, checkpointed, lease-fenced), then one
//! generation bump.
//!
//! Per-collection checkpoint (the bulk pass's cursor):
//!
//! ```text
//! key:   __nx/cutover/<collection>
//! value: offset 0  len 4  magic        b"NXCU"
//!        offset 4  len 1  format       u8 (= 1)
//!        offset 5  len 1  state        u8: 0 = in progress, 1 = done
//!        offset 6  len 1  hash length  u8 (n)
//!        offset 7  len n  target schema hash (ASCII hex)
//!        offset 7+n ...   cursor: the last rewritten document key (empty: none yet)
//! ```
//!
//! Each batch commits the rewritten documents, the advanced checkpoint and the renewed
//! coordinator lease in the fence (compare-and-swap on the fence bytes) atomically, so a
//! coordinator killed at any instant — or one that lost its lease — leaves every document
//! transformed exactly once or not at all, and a rerun resumes after the checkpoint.

use super::baseline::baseline_key;
use super::fence::{Fence, FenceDoc, FenceState, FENCE_KEY};
use super::gate::{SchemaGate, Verdict};
use super::presence::list_clients;
use super::strategy::Transform;
use super::PolicyError;
use crate::collection::layout::doc_prefix;
use crate::collection::rewrite::{RowRewrite, RowRewriter};
use crate::collection::CollectionError;
use crate::pass::{
    CheckpointCodec, HookError, Pass, PassError, PassLimits, RecordError, RecordRef,
};
use crate::payload::chain::Upcaster;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use strata_store::{Batch, KvRead, KvWrite, Mutation, Precondition};

/// Prefix of cutover checkpoints.
pub const CUTOVER_PREFIX: &[u8] = crate::keys::CUTOVER_PREFIX;
/// Magic of a cutover checkpoint.
pub const CUTOVER_MAGIC: [u8; 4] = *b"NXCU";
/// Default time the drain barrier waits for live clients.
pub const DEFAULT_QUIESCE_TIMEOUT_MS: u64 = 30_000;
const PASS_RETRIES: u32 = 16;

/// The operation name of the manifests a cutover records
/// (`__nx/manifest/cutover/<collection>`).
pub const MANIFEST_OPERATION: &str = "cutover";

/// The key of `collection`'s cutover checkpoint.
pub fn cutover_key(collection: &str) -> Vec<u8> {
    [CUTOVER_PREFIX, collection.as_bytes()].concat()
}

/// The cutover checkpoint codec (see the module docs for the bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutoverCheckpoint {
    key: Vec<u8>,
    target_hash: String,
}

impl CutoverCheckpoint {
    /// The checkpoint of `collection`'s cutover toward `target_hash`.
    pub fn new(collection: &str, target_hash: &str) -> Self {
        CutoverCheckpoint {
            key: cutover_key(collection),
            target_hash: target_hash.to_string(),
        }
    }

    fn bytes(&self, done: bool, cursor: &[u8]) -> Vec<u8> {
        let hash = self.target_hash.as_bytes();
        let mut out = Vec::with_capacity(7 + hash.len() + cursor.len());
        out.extend_from_slice(&CUTOVER_MAGIC);
        out.push(1);
        out.push(u8::from(done));
        out.push(u8::try_from(hash.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&hash[..hash.len().min(255)]);
        out.extend_from_slice(cursor);
        out
    }

    /// Decodes a stored value: `(done, cursor)`.
    pub fn parse(&self, value: &[u8]) -> Result<(bool, Vec<u8>), String> {
        if value.len() < 7 || value[..4] != CUTOVER_MAGIC {
            return Err("not a cutover checkpoint (missing `NXCU` magic)".into());
        }
        if value[4] != 1 {
            return Err(format!(
                "unsupported cutover checkpoint format {}",
                value[4]
            ));
        }
        let done = match value[5] {
            0 => false,
            1 => true,
            s => return Err(format!("invalid cutover checkpoint state {s}")),
        };
        let n = usize::from(value[6]);
        let Some(hash) = value.get(7..7 + n) else {
            return Err("truncated cutover checkpoint".into());
        };
        if hash != self.target_hash.as_bytes() {
            return Err(format!(
                "the checkpoint belongs to a cutover toward schema {}, not {}; finish or revert that cutover first",
                String::from_utf8_lossy(hash),
                self.target_hash
            ));
        }
        Ok((done, value[7 + n..].to_vec()))
    }
}

impl CheckpointCodec for CutoverCheckpoint {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        self.bytes(false, cursor)
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, String> {
        match self.parse(value)? {
            (false, cursor) => Ok(cursor),
            (true, _) => Err("the cutover of this collection is already done".into()),
        }
    }
    fn finished(&self) -> Option<Vec<u8>> {
        Some(self.bytes(true, b""))
    }
}

type ProgressFn<'a> = Box<dyn FnMut(&CutoverProgress<'_>) + 'a>;

/// A progress event of the rewrite, after every committed batch.
#[derive(Debug, Clone, Copy)]
pub struct CutoverProgress<'a> {
    /// The collection being rewritten.
    pub collection: &'a str,
    /// Records rewritten in this run so far (this collection).
    pub records: u64,
    /// Batches committed in this run so far (this collection).
    pub batches: u64,
    /// True for the collection's final batch.
    pub done: bool,
}

/// Options of [`SchemaGate::run_schema_cutover`], built with chained calls.
pub struct CutoverOptions<'a> {
    poll: Option<Box<dyn FnMut() + 'a>>,
    abort: Option<Box<dyn FnMut() -> bool + 'a>>,
    progress: Option<ProgressFn<'a>>,
    poll_interval: Duration,
    quiesce_timeout_ms: u64,
    limits: PassLimits,
    /// The database's data keys: sealed rows are opened, rewritten and sealed again.
    pub(crate) sealer: Option<crate::seal::Sealer>,
}

impl std::fmt::Debug for CutoverOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutoverOptions")
            .field("poll", &self.poll.is_some())
            .field("abort", &self.abort.is_some())
            .field("progress", &self.progress.is_some())
            .field("poll_interval", &self.poll_interval)
            .field("quiesce_timeout_ms", &self.quiesce_timeout_ms)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for CutoverOptions<'_> {
    fn default() -> Self {
        CutoverOptions {
            poll: None,
            abort: None,
            progress: None,
            poll_interval: Duration::from_millis(50),
            quiesce_timeout_ms: DEFAULT_QUIESCE_TIMEOUT_MS,
            limits: PassLimits::default(),
            sealer: None,
        }
    }
}

impl<'a> CutoverOptions<'a> {
    /// 30 s quiesce timeout, default pass limits, sleeps 50 ms between barrier checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called between barrier checks instead of sleeping (the seed's `onPoll`): tests
    /// advance the clock and tick other clients here.
    pub fn poll(mut self, f: impl FnMut() + 'a) -> Self {
        self.poll = Some(Box::new(f));
        self
    }

    /// Receives a [`CutoverProgress`] after every committed batch of the rewrite.
    pub fn on_progress(mut self, f: impl FnMut(&CutoverProgress<'_>) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// The sleep between barrier checks when no poll hook is set.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }

    /// How long (clock milliseconds) the barrier waits for live clients to acknowledge.
    pub fn quiesce_timeout_ms(mut self, ms: u64) -> Self {
        self.quiesce_timeout_ms = ms;
        self
    }

    /// Polled between barrier checks and at every batch boundary of the rewrite; `true`
    /// stops the run with [`PolicyError::Aborted`]. The fence stays where it was (draining
    /// or migrating, with the checkpoint of every committed batch): rerun to resume, or
    /// abort the cutover.
    pub fn abort_when(mut self, check: impl FnMut() -> bool + 'a) -> Self {
        self.abort = Some(Box::new(check));
        self
    }

    /// The batch limits of the rewrite (default [`PassLimits::default`]).
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// What one collection's cutover did in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionCutover {
    /// The collection.
    pub collection: String,
    /// Records rewritten in this run.
    pub records: u64,
    /// The cursor this run resumed after (`None`: started from the beginning, or the
    /// collection was already done).
    pub resumed_from: Option<Vec<u8>>,
    /// Rows met in this run that a newer build wrote (payload version above the
    /// collection's): never rewritten, left byte-identical.
    pub skipped_ahead: u64,
    /// The document keys of those rows, in key order.
    pub ahead_keys: Vec<String>,
}

impl CollectionCutover {
    fn new(
        collection: &str,
        records: u64,
        resumed_from: Option<Vec<u8>>,
        ahead: BTreeSet<String>,
    ) -> Self {
        CollectionCutover {
            collection: collection.to_string(),
            records,
            resumed_from,
            skipped_ahead: ahead.len() as u64,
            ahead_keys: ahead.into_iter().collect(),
        }
    }
}

/// The transform, target baseline and upcaster of one pending collection.
#[derive(Debug)]
struct PendingRewrite {
    transform: Transform,
    target: super::Baseline,
    upcaster: Upcaster,
}

/// What [`SchemaGate::run_schema_cutover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutoverReport {
    /// Collections migrated (the seed's `migrated`).
    pub migrated: usize,
    /// Records processed in this run, over all collections.
    pub records: u64,
    /// Rows written by a newer build, left unchanged, over all collections (see
    /// [`CollectionCutover::ahead_keys`]).
    pub skipped_ahead: u64,
    /// The schema generation after the run.
    pub generation: u64,
    /// Per collection.
    pub collections: Vec<CollectionCutover>,
}

fn lease_lost(fence: &FenceDoc) -> PolicyError {
    PolicyError::LeaseLost {
        coordinator: fence.coordinator.clone().unwrap_or_default(),
    }
}

impl SchemaGate {
    fn owns(&self, fence: &FenceDoc) -> bool {
        fence.coordinator.as_deref() == Some(self.client_id())
    }

    /// The transforms this handle registered for `fence`'s pending collections, or
    /// [`PolicyError::NoTransform`] for the first one it lacks.
    fn transforms_for(
        &self,
        fence: &FenceDoc,
    ) -> Result<HashMap<String, PendingRewrite>, PolicyError> {
        let reg = self.registry();
        let mut out = HashMap::new();
        for p in &fence.pending {
            let found = reg
                .get(&p.collection)
                .and_then(|r| r.cutover.clone().map(|c| (c, r.upcaster.clone())));
            match found {
                Some(((transform, target), upcaster)) if target.hash == p.target_hash => {
                    out.insert(
                        p.collection.clone(),
                        PendingRewrite {
                            transform,
                            target,
                            upcaster,
                        },
                    );
                }
                _ => {
                    return Err(PolicyError::NoTransform {
                        collection: p.collection.clone(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Renews the lease if this handle still coordinates the cutover in `state`.
    fn renew(&self, state: FenceState) -> Result<FenceDoc, PolicyError> {
        let now = self.clock().now_ms();
        let lease = self.config().lease();
        Fence::update(self.store(), |cur| {
            if !self.owns(cur) || cur.state != state {
                return Err(lease_lost(cur));
            }
            let mut next = cur.clone();
            next.lease_until_ms = now.saturating_add(lease);
            Ok(Some(next))
        })
    }

    /// Moves the fence from `from` to `to` if this handle still coordinates.
    fn transition(&self, from: FenceState, to: FenceState) -> Result<FenceDoc, PolicyError> {
        let now = self.clock().now_ms();
        let lease = self.config().lease();
        Fence::update(self.store(), |cur| {
            if !self.owns(cur) || cur.state != from {
                return Err(lease_lost(cur));
            }
            let mut next = cur.clone();
            next.state = to;
            next.lease_until_ms = now.saturating_add(lease);
            Ok(Some(next))
        })
    }

    /// Runs every pending coordinated cutover of the store:
    ///
    /// 1. claims the fence (`normal` → `draining`, this client as coordinator with a
    ///    lease) — or resumes a run this client coordinates, or takes over one whose
    ///    coordinator's lease expired; another live coordinator is
    ///    [`PolicyError::CutoverInProgress`];
    /// 2. drain barrier: waits until every live client other than this one acknowledged
    ///    the next generation (clients silent past the stale window are not waited for);
    ///    after `quiesce_timeout_ms` it fails with [`PolicyError::QuiesceTimeout`] and the
    ///    fence stays draining (rerun, or [`super::Policy::abort_schema_cutover`]);
    /// 3. `migrating`: rewrites every document of each pending collection on the bulk
    ///    pass (resuming from the checkpoint) through the collection's one row rewrite:
    ///    upcast to the current payload version, the transform, protected fields
    ///    restored, encoded at the current version with the lock version bumped. A row
    ///    written by a newer build is never rewritten: it stays byte-identical and is
    ///    reported ([`CollectionCutover::ahead_keys`]);
    /// 4. bumps the generation once, replaces the migrated collections' baselines and
    ///    clears them from the pending list (one atomic batch), then returns to `normal`.
    ///
    /// This handle moves to the new generation; other handles get
    /// [`super::Refusal::MigrationRequired`] on their next write.
    pub fn run_schema_cutover(
        &self,
        mut options: CutoverOptions<'_>,
    ) -> Result<CutoverReport, PolicyError> {
        let me = self.client_id().to_string();
        let started = self.clock().now_ms();
        let lease = self.config().lease();
        let mut fence = Fence::update(self.store(), |cur| {
            let now = self.clock().now_ms();
            if cur.generation > self.generation() {
                return Err(PolicyError::Refused {
                    collection: cur
                        .pending
                        .first()
                        .map(|p| p.collection.clone())
                        .unwrap_or_default(),
                    reason: super::Refusal::MigrationRequired {
                        opened: self.generation(),
                        current: cur.generation,
                    },
                });
            }
            let mut next = cur.clone();
            match cur.state {
                FenceState::Normal => {
                    if cur.pending.is_empty() {
                        return Ok(None);
                    }
                    self.transforms_for(cur)?;
                    next.state = FenceState::Draining;
                }
                _ => {
                    let mine = self.owns(cur);
                    let free = cur.coordinator.is_none() || cur.lease_until_ms < now;
                    if !mine && !free {
                        return Err(PolicyError::CutoverInProgress {
                            coordinator: cur.coordinator.clone().unwrap_or_default(),
                            state: cur.state.to_string(),
                            lease_until_ms: cur.lease_until_ms,
                        });
                    }
                    if !mine {
                        tracing::warn!(previous = ?cur.coordinator, state = %cur.state, "taking over a cutover whose coordinator lease expired");
                    }
                    if cur.state != FenceState::Complete {
                        self.transforms_for(cur)?;
                    }
                }
            }
            next.coordinator = Some(me.clone());
            next.lease_until_ms = now.saturating_add(lease);
            Ok(Some(next))
        })?;
        if fence.state == FenceState::Normal {
            return Ok(CutoverReport {
                migrated: 0,
                records: 0,
                skipped_ahead: 0,
                generation: fence.generation,
                collections: Vec::new(),
            });
        }
        if fence.state == FenceState::Draining {
            self.barrier(&fence, started, &mut options)?;
            // Finish this handle's own in-flight writes too.
            drop(self.store().lease());
            fence = self.transition(FenceState::Draining, FenceState::Migrating)?;
        }
        let mut collections = Vec::new();
        if fence.state == FenceState::Migrating {
            let transforms = self.transforms_for(&fence)?;
            for p in &fence.pending {
                let Some(rewrite) = transforms.get(&p.collection) else {
                    continue;
                };
                collections.push(self.rewrite_collection(&p.collection, rewrite, &mut options)?);
            }
            self.complete(&fence, &transforms)?;
        }
        // Complete → normal.
        Fence::update(self.store(), |cur| {
            if cur.state != FenceState::Complete {
                return Ok(None);
            }
            if !self.owns(cur) {
                return Err(lease_lost(cur));
            }
            let mut next = cur.clone();
            next.state = FenceState::Normal;
            next.coordinator = None;
            next.lease_until_ms = 0;
            Ok(Some(next))
        })?;
        let generation = Fence::read(self.store())?.generation;
        self.inner
            .generation
            .store(generation, std::sync::atomic::Ordering::SeqCst);
        self.presence().advance(generation)?;
        {
            let mut reg = self.registry();
            for c in &collections {
                if let Some(r) = reg.get_mut(&c.collection) {
                    r.verdict = Verdict::Allowed;
                    r.cutover = None;
                }
            }
        }
        let report = CutoverReport {
            migrated: collections.len(),
            records: collections.iter().map(|c| c.records).sum(),
            skipped_ahead: collections.iter().map(|c| c.skipped_ahead).sum(),
            generation,
            collections,
        };
        tracing::info!(
            migrated = report.migrated,
            records = report.records,
            generation,
            "schema cutover complete"
        );
        Ok(report)
    }

    /// Waits until every live client other than this one acknowledged `fence.generation
    /// + 1`.
    fn barrier(
        &self,
        fence: &FenceDoc,
        started: u64,
        options: &mut CutoverOptions<'_>,
    ) -> Result<(), PolicyError> {
        let target = fence.generation.saturating_add(1);
        let stale = self.presence_config().stale_after_ms;
        loop {
            self.renew(FenceState::Draining)?;
            let now = self.clock().now_ms();
            let holdouts: Vec<String> = list_clients(self.store())?
                .into_iter()
                .filter(|c| c.client != self.client_id())
                .filter(|c| c.is_live(now, stale))
                .filter(|c| c.acked_generation.is_none_or(|a| a < target))
                .map(|c| c.client)
                .collect();
            if holdouts.is_empty() {
                return Ok(());
            }
            let waited = now.saturating_sub(started);
            if waited >= options.quiesce_timeout_ms {
                return Err(PolicyError::QuiesceTimeout {
                    waited_ms: waited,
                    holdouts,
                });
            }
            if options.abort.as_mut().is_some_and(|a| a()) {
                return Err(PolicyError::Aborted {
                    state: FenceState::Draining,
                });
            }
            tracing::debug!(?holdouts, "waiting for clients to quiesce");
            match options.poll.as_mut() {
                Some(poll) => poll(),
                None => std::thread::sleep(options.poll_interval),
            }
        }
    }

    /// Rewrites one collection on the bulk pass, resuming from its checkpoint.
    fn rewrite_collection(
        &self,
        collection: &str,
        rewrite: &PendingRewrite,
        options: &mut CutoverOptions<'_>,
    ) -> Result<CollectionCutover, PolicyError> {
        let limits = options.limits;
        let codec = CutoverCheckpoint::new(collection, &rewrite.target.hash);
        let ck_key = cutover_key(collection);
        let prefix = doc_prefix(collection);
        let table_id = match &options.sealer {
            None => 0,
            Some(_) => match self
                .store()
                .get(&crate::collection::layout::catalog_key(collection))
                .map_err(|e| PolicyError::store(collection.as_bytes(), e))?
            {
                Some(b) => {
                    crate::collection::layout::decode_catalog_record(collection, &b).unwrap_or(0)
                }
                None => 0,
            },
        };
        let rewriter = RowRewriter {
            collection,
            upcaster: &rewrite.upcaster,
            transform: Some(&rewrite.transform),
            seal: options
                .sealer
                .as_ref()
                .map(|sealer| crate::collection::rewrite::RowSeal {
                    sealer,
                    table_id,
                    strict: false,
                }),
        };
        let mut records = 0;
        let mut resumed_from = None;
        // Rows written by a newer build: left byte-identical, reported (a set: a batch
        // retried after a conflict meets its rows again).
        let mut ahead: BTreeSet<String> = BTreeSet::new();
        for attempt in 0..PASS_RETRIES {
            if let Some(v) = self
                .store()
                .get(&ck_key)
                .map_err(|e| PolicyError::store(&ck_key, e))?
            {
                if let Ok((true, _)) = codec.parse(&v) {
                    return Ok(CollectionCutover::new(
                        collection,
                        records,
                        resumed_from,
                        ahead,
                    ));
                }
            }
            let lease = self.config().lease();
            let store = self.store();
            let hook =
                |batch: &mut Batch, _: &crate::pass::BatchInfo<'_>| -> Result<(), HookError> {
                    let (cur, raw) = Fence::read_raw(store)?;
                    if !self.owns(&cur) || cur.state != FenceState::Migrating {
                        return Err(Box::new(lease_lost(&cur)));
                    }
                    let mut next = cur.clone();
                    next.lease_until_ms = self.clock().now_ms().saturating_add(lease);
                    match raw {
                        Some(raw) => batch.push_precondition(Precondition::Equals {
                            key: FENCE_KEY.to_vec(),
                            value: raw,
                        }),
                        None => batch.push_precondition(Precondition::Absent {
                            key: FENCE_KEY.to_vec(),
                        }),
                    }
                    batch.push(Mutation::Set {
                        key: FENCE_KEY.to_vec(),
                        value: next.encode(),
                    });
                    Ok(())
                };
            let ahead_rows = &mut ahead;
            let processor = |r: &RecordRef<'_>,
                             out: &mut Vec<Mutation>|
             -> Result<(), RecordError> {
                let suffix = r.key.get(prefix.len()..).unwrap_or_default();
                let Ok(id) = std::str::from_utf8(suffix) else {
                    return Err(RecordError::new("the document key is not UTF-8"));
                };
                match rewriter.rewrite(id, r.value, |_| Ok(())) {
                    Ok(RowRewrite::Rewrite(value)) => out.push(r.replace(value)),
                    Ok(RowRewrite::Keep) => {}
                    Ok(RowRewrite::Ahead { stored }) => {
                        if ahead_rows.insert(id.to_string()) {
                            tracing::warn!(collection, key = %strata_store::escape_key(suffix), stored, "cutover: row written by a newer build left unchanged");
                        }
                    }
                    Err(CollectionError::Transform { reason, .. }) => {
                        return Err(RecordError::new(reason))
                    }
                    Err(e) => return Err(RecordError::new(e.to_string())),
                }
                Ok(())
            };
            let progress = options.progress.as_mut();
            let abort = options.abort.as_mut();
            let mut pass = Pass::new(collection, doc_prefix(collection), &codec)
                .limits(limits)
                .on_batch(hook);
            if let Some(a) = abort {
                pass = pass.abort_when(a);
            }
            if let Some(f) = progress {
                pass = pass.on_progress(move |p: &crate::pass::Progress<'_>| {
                    f(&CutoverProgress {
                        collection,
                        records: p.records,
                        batches: p.batches,
                        done: p.done,
                    })
                });
            }
            let result = pass.run(store, processor);
            match result {
                Ok(report) => {
                    records += report.records;
                    if attempt == 0 {
                        resumed_from = report.resumed_from;
                    }
                    return Ok(CollectionCutover::new(
                        collection,
                        records,
                        resumed_from,
                        ahead,
                    ));
                }
                Err(PassError::Hook {
                    source,
                    table,
                    checkpoint,
                }) => {
                    return Err(match source.downcast::<PolicyError>() {
                        Ok(e) => *e,
                        // Kept as the source, not flattened into a string.
                        Err(source) => PolicyError::Pass {
                            collection: collection.to_string(),
                            source: Box::new(PassError::Hook {
                                table,
                                checkpoint,
                                source,
                            }),
                        },
                    });
                }
                Err(PassError::Aborted { .. }) => {
                    return Err(PolicyError::Aborted {
                        state: FenceState::Migrating,
                    })
                }
                Err(PassError::InvalidRecord { key, reason, .. }) => {
                    return Err(PolicyError::Transform {
                        collection: collection.to_string(),
                        key,
                        reason,
                    })
                }
                Err(PassError::Store { source, .. }) if source.is_conflict() => {
                    // The fence changed between the hook's read and the commit (a pending
                    // registration, a heartbeat-free update): retry from the checkpoint
                    // while this handle still owns the lease.
                    let cur = Fence::read(self.store())?;
                    if !self.owns(&cur) || cur.state != FenceState::Migrating {
                        return Err(lease_lost(&cur));
                    }
                    tracing::debug!(
                        collection,
                        "fence changed under the cutover batch; resuming"
                    );
                    continue;
                }
                Err(source) => {
                    return Err(PolicyError::Pass {
                        collection: collection.to_string(),
                        source: Box::new(source),
                    })
                }
            }
        }
        Err(PolicyError::Contended {
            key: FENCE_KEY.to_vec(),
            attempts: PASS_RETRIES,
        })
    }

    /// Migrating → complete: bumps the generation once, replaces the migrated
    /// collections' baselines, drops their checkpoints and pending entries — atomically.
    fn complete(
        &self,
        fence: &FenceDoc,
        migrated: &HashMap<String, PendingRewrite>,
    ) -> Result<FenceDoc, PolicyError> {
        for _ in 0..super::fence::CAS_ATTEMPTS {
            let (cur, raw) = Fence::read_raw(self.store())?;
            if !self.owns(&cur) || cur.state != FenceState::Migrating {
                return Err(lease_lost(&cur));
            }
            let mut next = cur.clone();
            next.generation = fence.generation.saturating_add(1);
            next.state = FenceState::Complete;
            next.pending
                .retain(|p| !migrated.contains_key(&p.collection));
            let mut batch = Batch::new()
                .require(FENCE_KEY.to_vec(), raw)
                .set(FENCE_KEY.to_vec(), next.encode());
            for (collection, rewrite) in migrated {
                let key = baseline_key(collection);
                let previous = self
                    .store()
                    .get(&key)
                    .map_err(|e| PolicyError::store(&key, e))?;
                let target = rewrite.target.encode();
                batch = super::history::append(
                    self.store(),
                    batch,
                    collection,
                    previous.as_deref(),
                    target.clone(),
                )?
                .set(key, target)
                .delete(cutover_key(collection));
            }
            // Each migrated collection as this batch leaves it: `strata verify` compares
            // against it until the next write to the collection. Armed, so a manifest
            // whose collection a (non-fenced) writer touched meanwhile is not recorded.
            let mut armed = Vec::with_capacity(migrated.len());
            for collection in migrated.keys() {
                let prefix = doc_prefix(collection);
                armed.push(self.store().arm_manifest_scope(&prefix));
                strata_store::Manifest::record(
                    self.store(),
                    MANIFEST_OPERATION,
                    collection,
                    &prefix,
                    &mut batch,
                )
                .map_err(|e| PolicyError::store(&prefix, e))?;
            }
            let applied = self.store().apply(batch);
            drop(armed);
            match applied {
                Ok(()) => return Ok(next),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(PolicyError::store(FENCE_KEY, e)),
            }
        }
        Err(PolicyError::Contended {
            key: FENCE_KEY.to_vec(),
            attempts: super::fence::CAS_ATTEMPTS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_bytes_roundtrip() {
        let c = CutoverCheckpoint::new("inv", "ab12");
        let v = c.encode(b"__nx/doc/inv/k");
        assert_eq!(v, b"NXCU\x01\x00\x04ab12__nx/doc/inv/k".to_vec());
        assert_eq!(c.decode(&v).unwrap(), b"__nx/doc/inv/k".to_vec());
        assert_eq!(c.finished().unwrap(), b"NXCU\x01\x01\x04ab12".to_vec());
        assert!(c.decode(&c.finished().unwrap()).is_err());
        let other = CutoverCheckpoint::new("inv", "ffff");
        assert!(other.decode(&v).unwrap_err().contains("toward schema ab12"));
        assert!(c.decode(b"NXMG\x01").is_err());
    }
}
