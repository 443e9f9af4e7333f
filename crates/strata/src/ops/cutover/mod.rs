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
//!
//! Across processes and machines (a store on a shared server) the coordinator also holds
//! the store's named lease `cutover` ([`strata_store::NamedLease`]) for the whole run: a
//! second coordinator anywhere gets [`PolicyError::CutoverInProgress`] naming the holder
//! (what, pid and host), and a coordinator whose process died is taken over at once by
//! the next run, which resumes after the checkpoints without waiting for the fence's
//! lease to expire. The fence record's format is fixed, so the holder's batches are fenced
//! by the fence bytes they compare-and-swap (the coordinator's client id, unique per
//! handle, changes on every takeover) rather than by a numeric token.
//!
//! On a store one process opens at a time (redb and sled lock their files; a memory
//! store lives in one process) there is no named lease: a recorded coordinator that is no
//! policy handle open in this process ended without finishing (it was killed), so the next
//! run takes over at once instead of waiting for the fence's lease to expire; a handle of
//! this process that is still open keeps its lease.

mod checkpoint;
mod rewrite;

pub use checkpoint::{checkpoint_target, cutover_key, CutoverCheckpoint, CUTOVER_PREFIX};

/// Per collection: the tally its rewrite proved exact, and its scope armed since then
/// (a write through this store touching it sends `complete` back to a recount).
pub(super) type Certified = HashMap<
    String,
    (
        strata_store::manifest::Tally,
        strata_store::manifest::ArmedScope,
    ),
>;
use crate::keys::FENCE_KEY;
use crate::pass::PassLimits;
use crate::payload::upcaster::Upcaster;
use crate::policy::{
    baseline_key, list_clients, Fence, FenceDoc, FenceState, PolicyError, SchemaGate, Transform,
    Verdict,
};
use std::collections::HashMap;
use std::time::Duration;
use strata_store::{Batch, KvRead, KvWrite, NamedLease};

/// Default time the drain barrier waits for live clients.
pub const DEFAULT_QUIESCE_TIMEOUT_MS: u64 = 30_000;

/// The operation name of the manifests a cutover records
/// (`__nx/manifest/cutover/<collection>`).
pub const MANIFEST_OPERATION: &str = "cutover";

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
    /// collection's): never rewritten, left byte-identical. All of them are counted.
    pub skipped_ahead: u64,
    /// The document keys of the first [`MAX_LISTED_AHEAD`] (100) of those rows, in key
    /// order (`skipped_ahead` counts them all; a report stays small on any collection).
    pub ahead_keys: Vec<String>,
}

/// How many rows written by a newer build a [`CollectionCutover`] lists by key (the
/// count is always complete).
pub const MAX_LISTED_AHEAD: usize = 100;

impl CollectionCutover {
    fn new(
        collection: &str,
        records: u64,
        resumed_from: Option<Vec<u8>>,
        ahead: AheadRows,
    ) -> Self {
        CollectionCutover {
            collection: collection.to_string(),
            records,
            resumed_from,
            skipped_ahead: ahead.count,
            ahead_keys: ahead.listed,
        }
    }
}

/// The rows written by a newer build met by one collection's cutover: all counted, the
/// first [`MAX_LISTED_AHEAD`] kept by key. The pass meets rows in key order, and a batch
/// retried after a conflict (or a pass rerun after a takeover) meets rows again only from
/// an earlier cursor, so a row at or below the highest one counted was counted already.
#[derive(Debug, Default)]
struct AheadRows {
    count: u64,
    listed: Vec<String>,
    highest: Option<String>,
}

impl AheadRows {
    /// Counts the row `id` unless it was met already; true when newly counted.
    fn insert(&mut self, id: &str) -> bool {
        if self.highest.as_deref().is_some_and(|h| id <= h) {
            return false;
        }
        self.count += 1;
        if self.listed.len() < MAX_LISTED_AHEAD {
            self.listed.push(id.to_string());
        }
        self.highest = Some(id.to_string());
        true
    }
}

/// The transform, target baseline and upcaster of one pending collection.
#[derive(Debug)]
struct PendingRewrite {
    transform: Transform,
    target: crate::policy::Baseline,
    upcaster: Upcaster,
    /// The transform is the upcaster's last step (see [`Transform::into_step`]).
    in_chain: bool,
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
            let found = reg.get(&p.collection).and_then(|r| {
                r.cutover
                    .clone()
                    .map(|c| (c, r.upcaster.clone(), r.cutover_step, r.chain_known))
            });
            match found {
                Some(((transform, target), upcaster, in_chain, chain_known))
                    if target.hash == p.target_hash =>
                {
                    // A raw declaration (no chain) reshapes rows in place by design; a
                    // collection whose strategy declares no transform step is warned.
                    if !in_chain && chain_known {
                        tracing::warn!(collection = %p.collection, "the cutover's strategy declares no transform step (cutover_transform); rows are reshaped at their payload version, so an older build can still write the old shape");
                    }
                    out.insert(
                        p.collection.clone(),
                        PendingRewrite {
                            transform,
                            target,
                            upcaster,
                            in_chain,
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
    ///    fence stays draining (rerun, or [`Policy::abort_schema_cutover`](crate::policy::Policy::abort_schema_cutover));
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
    /// [`Refusal::MigrationRequired`](crate::policy::Refusal::MigrationRequired) on their next write.
    pub fn run_schema_cutover(
        &self,
        mut options: CutoverOptions<'_>,
    ) -> Result<CutoverReport, PolicyError> {
        let me = self.client_id().to_string();
        // This coordinator is alive in this process while it runs, whether or not the
        // handle whose gate this is still lives (a clone of the gate outlives it).
        let _alive = crate::alive::Alive::enter(crate::alive::Holder::PolicyClient, &me);
        // Across processes and machines: the store's named lease `cutover`, held until
        // this run returns. Another coordinator anywhere is refused naming its holder; a
        // coordinator whose process ended released it, so it is taken over at once.
        let cross = NamedLease::acquire(
            self.store(),
            "cutover",
            &strata_store::lease_holder(&format!("cutover coordinator {me}")),
            Duration::ZERO,
        )
        .map_err(|e| PolicyError::store(FENCE_KEY, e))?;
        // A store one process at a time opens: a coordinator that is no handle of this
        // process ended without finishing (killed), whatever its lease says.
        let local = matches!(cross, NamedLease::Local);
        let cross_held = match &cross {
            NamedLease::Busy { holder } => {
                let cur = Fence::read(self.store())?;
                return Err(PolicyError::CutoverInProgress {
                    coordinator: holder.clone(),
                    state: cur.state.to_string(),
                    lease_until_ms: cur.lease_until_ms,
                });
            }
            NamedLease::Held(held) => {
                tracing::info!(
                    token = held.fencing_token(),
                    "took the cross-process cutover lease"
                );
                true
            }
            NamedLease::Local => false,
        };
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
                    reason: crate::policy::Refusal::MigrationRequired {
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
                    // Holding the cross-process lease proves the recorded coordinator's
                    // process gone (every coordinator takes it first); on a store one
                    // process opens at a time, so does a coordinator open nowhere here.
                    let ended = local
                        && cur
                            .coordinator
                            .as_deref()
                            .is_some_and(|c| !crate::policy::coordinator_open_here(c));
                    let free = cur.coordinator.is_none()
                        || cur.lease_until_ms < now
                        || cross_held
                        || ended;
                    if !mine && !free {
                        return Err(PolicyError::CutoverInProgress {
                            coordinator: cur.coordinator.clone().unwrap_or_default(),
                            state: cur.state.to_string(),
                            lease_until_ms: cur.lease_until_ms,
                        });
                    }
                    if !mine {
                        tracing::warn!(previous = ?cur.coordinator, state = %cur.state, "taking over a cutover whose coordinator lease expired or whose process ended");
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
            // Collections whose rewrite proved its tally (kept armed until `complete`).
            let mut certified = HashMap::new();
            for p in &fence.pending {
                let Some(rewrite) = transforms.get(&p.collection) else {
                    continue;
                };
                collections.push(self.rewrite_collection(
                    &p.collection,
                    rewrite,
                    &mut options,
                    &mut certified,
                )?);
            }
            self.complete(&fence, &transforms, &certified)?;
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
            let mut reg = self.registry_mut();
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

    /// Migrating → complete: bumps the generation once, replaces the migrated
    /// collections' baselines, drops their checkpoints and pending entries — atomically.
    fn complete(
        &self,
        fence: &FenceDoc,
        migrated: &HashMap<String, PendingRewrite>,
        certified: &Certified,
    ) -> Result<FenceDoc, PolicyError> {
        for _ in 0..crate::policy::fence::CAS_ATTEMPTS {
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
                batch = crate::policy::history::append(
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
                let prefix = crate::collection::layout::doc_prefix(collection);
                // The tally its rewrite took, proven then and armed since: no recount.
                if let Some((tally, scope)) = certified.get(collection) {
                    if !scope.touched() {
                        let m = strata_store::manifest::Manifest::new(
                            MANIFEST_OPERATION,
                            collection,
                            &prefix,
                            tally,
                        );
                        batch = batch.set(m.key(), m.encode());
                        continue;
                    }
                }
                armed.push(self.store().arm_manifest_scope(&prefix));
                strata_store::manifest::Manifest::record(
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
            attempts: crate::policy::fence::CAS_ATTEMPTS,
        })
    }
}

impl crate::policy::Policy {
    /// Runs every pending coordinated cutover (see [`SchemaGate::run_schema_cutover`]).
    pub fn run_schema_cutover(
        &self,
        options: CutoverOptions<'_>,
    ) -> Result<CutoverReport, PolicyError> {
        self.gate().run_schema_cutover(options)
    }
}

impl crate::Database {
    /// Runs every pending coordinated cutover (see [`SchemaGate::run_schema_cutover`]);
    /// this handle must have declared each pending collection with its transform.
    pub fn run_schema_cutover(
        &self,
        mut options: CutoverOptions<'_>,
    ) -> Result<CutoverReport, PolicyError> {
        options.sealer = self.inner.sealer.as_ref().map(|live| {
            live.refresh(&self.inner.store)
                .unwrap_or_else(|_| live.current())
        });
        self.inner.policy.ensure()?.run_schema_cutover(options)
    }
}

#[cfg(test)]
mod ahead_tests {
    use super::*;

    /// Every row is counted once (rows met again from an earlier cursor are not), and only
    /// the first `MAX_LISTED_AHEAD` are listed, in key order.
    #[test]
    fn ahead_rows_are_counted_once_and_listed_up_to_the_cap() {
        let mut a = AheadRows::default();
        let ids: Vec<String> = (0..MAX_LISTED_AHEAD + 20)
            .map(|i| format!("k{i:05}"))
            .collect();
        for id in &ids[..50] {
            assert!(a.insert(id));
        }
        // A retried batch meets rows 40.. again.
        for id in &ids[40..50] {
            assert!(!a.insert(id));
        }
        for id in &ids[50..] {
            assert!(a.insert(id));
        }
        let report = CollectionCutover::new("c", 0, None, a);
        assert_eq!(report.skipped_ahead, ids.len() as u64);
        assert_eq!(report.ahead_keys, ids[..MAX_LISTED_AHEAD].to_vec());
    }
}
