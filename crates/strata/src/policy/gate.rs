//! The write gate: collection declarations (persist / compare / evaluate) and the check
//! every write goes through.

use super::baseline::Baseline;
use super::fence::{Fence, CAS_ATTEMPTS, FENCE_KEY};
use super::presence::{Presence, PresenceConfig};
use super::strategy::{
    evaluate_strategies, Rejection, SchemaDelta, Strategy, Transform, UpdateContext, UpdateDecision,
};
use super::{PolicyConfig, PolicyError, Refusal};
use crate::clock::SharedClock;
use crate::payload::upcaster::Upcaster;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use strata_store::{Precondition, Store};

/// What a collection declares to the policy layer when it is opened with a persisted
/// schema, built with chained calls.
#[derive(Debug, Clone)]
pub struct SchemaDeclaration {
    pub(crate) collection: String,
    pub(crate) schema: Value,
    pub(crate) payload_version: Option<i32>,
    pub(crate) upcast_froms: Vec<i32>,
    pub(crate) strategies: Vec<Strategy>,
    /// The collection's upcaster (chain + protected fields), when declared by opening a
    /// collection: the cutover rewrites rows through it.
    pub(crate) upcaster: Option<Upcaster>,
    /// True when the upcaster's last step is the cutover strategy's transform (a
    /// collection opened with `coordinated_cutover`): the cutover then moves rows to
    /// the next payload version through the chain instead of reshaping them in place.
    pub(crate) cutover_step: bool,
}

impl SchemaDeclaration {
    /// `collection` with the JSON Schema derived from its type (e.g.
    /// `serde_json::to_value(schemars::schema_for!(T))`); no strategies (changes are
    /// accepted silently), no payload version.
    pub fn new(collection: impl Into<String>, schema: Value) -> Self {
        SchemaDeclaration {
            collection: collection.into(),
            schema,
            payload_version: None,
            upcast_froms: Vec::new(),
            strategies: Vec::new(),
            upcaster: None,
            cutover_step: false,
        }
    }

    /// Derives the schema of `T` with schemars.
    pub fn of<T: schemars::JsonSchema>(collection: impl Into<String>) -> Self {
        let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
        Self::new(collection, schema)
    }

    /// Appends a strategy (evaluated in order).
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.strategies.push(s);
        self
    }

    /// Appends strategies (evaluated in order).
    pub fn strategies<I: IntoIterator<Item = Strategy>>(mut self, s: I) -> Self {
        self.strategies.extend(s);
        self
    }

    /// The collection's current payload version and the `from` version of each upcast
    /// step it registers (persisted with the baseline; lets
    /// [`covered_by_upcasts`](super::covered_by_upcasts) see that the version moved).
    pub fn payload(mut self, version: i32, upcast_froms: impl IntoIterator<Item = i32>) -> Self {
        self.payload_version = Some(version);
        self.upcast_froms = upcast_froms.into_iter().collect();
        self
    }

    /// The collection name.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// The declared JSON Schema.
    pub fn schema_value(&self) -> &Value {
        &self.schema
    }

    fn upcasts_cover(&self, from: Option<i32>) -> bool {
        match (from, self.payload_version) {
            (Some(b), Some(c)) if c > b => (b..c).all(|v| self.upcast_froms.contains(&v)),
            _ => false,
        }
    }
}

/// The verdict recorded for a declared collection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Verdict {
    /// First registration: the schema was persisted as the baseline.
    Registered,
    /// The schema equals the baseline.
    Unchanged,
    /// The change was allowed and the baseline replaced.
    Allowed,
    /// A strategy rejected the change: every write fails until it is fixed.
    Rejected {
        /// The deciding strategy.
        strategy: String,
        /// Why.
        rejection: Rejection,
    },
    /// A coordinated cutover is pending: writes are fenced until it runs.
    CutoverPending {
        /// The deciding strategy.
        strategy: String,
    },
    /// A newer build moved the collection to a payload version above this build's, with
    /// a different schema (a cutover or an upcast-covered change): every write of this
    /// handle is refused with [`Refusal::BuildBehind`] — upgrade this instance. The
    /// baseline is never moved back.
    Behind {
        /// The payload version the store's baseline records.
        stored: i32,
        /// The payload version this build declares.
        build: i32,
    },
    /// A newer build moved the collection to a payload version above this build's with an
    /// **additive** change (new optional top-level properties only): this build keeps
    /// writing; its writes of rows the newer build wrote keep those properties and the
    /// row's version (see `CollectionOptions::keep_newer_fields`). The baseline is never
    /// moved back.
    BehindAdditive {
        /// The payload version the store's baseline records.
        stored: i32,
        /// The payload version this build declares.
        build: i32,
        /// The properties the newer build added.
        added: Vec<String>,
    },
    /// The delta could not be computed (storage error, corrupted baseline): logged, and
    /// writes are not blocked.
    DetectionFailed {
        /// Why.
        reason: String,
    },
}

/// What [`SchemaGate::declare`] found.
#[derive(Debug, Clone)]
pub struct DeclareOutcome {
    /// The collection.
    pub collection: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The delta against the baseline, when one was computed.
    pub delta: Option<SchemaDelta>,
}

#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) verdict: Verdict,
    pub(crate) strategy_names: Vec<String>,
    /// The transform and target of a pending cutover.
    pub(crate) cutover: Option<(Transform, Baseline)>,
    /// The collection's upcaster: the one it was opened with, or for a raw declaration
    /// one that knows only the declared payload version (taken as 1 when none is given).
    pub(crate) upcaster: Upcaster,
    /// See [`SchemaDeclaration::cutover_step`].
    pub(crate) cutover_step: bool,
    /// True when the declaration came with the collection's own chain (a collection
    /// opened with its options), false for a raw declaration (schema and version only).
    pub(crate) chain_known: bool,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) config: PolicyConfig,
    pub(crate) presence: Arc<Presence>,
    pub(crate) generation: AtomicU64,
    /// The declared collections' verdicts: read by every write of a governed collection
    /// (shared), changed only when a collection is declared or a cutover completes.
    pub(crate) registry: RwLock<HashMap<String, Registration>>,
}

/// The write gate of one handle: every write of a collection goes through
/// [`SchemaGate::check_write`] (it implements the collections' `WriteGuard`). Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct SchemaGate {
    pub(crate) inner: Arc<Inner>,
}

impl SchemaGate {
    /// Registers a client of `store` (presence record, no heartbeat thread — [`super::Policy`]
    /// starts one) at schema `generation` (a database
    /// whose policy starts at its first write under policy keeps the generation it opened
    /// at, so a bump in between still makes it reopen).
    pub(crate) fn open_at(
        store: Store,
        config: PolicyConfig,
        generation: u64,
    ) -> Result<Self, PolicyError> {
        let presence = Presence::register(store.clone(), config.clock_ref().clone(), generation)?;
        Ok(SchemaGate {
            inner: Arc::new(Inner {
                store,
                config,
                presence,
                generation: AtomicU64::new(generation),
                registry: RwLock::new(HashMap::new()),
            }),
        })
    }

    /// The registry, shared (the write path's check: writers never wait for each other).
    pub(crate) fn registry(&self) -> RwLockReadGuard<'_, HashMap<String, Registration>> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The registry, to change it (a declaration, a completed cutover).
    pub(crate) fn registry_mut(&self) -> RwLockWriteGuard<'_, HashMap<String, Registration>> {
        self.inner
            .registry
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.inner.config
    }

    /// The clock.
    pub fn clock(&self) -> &SharedClock {
        self.inner.config.clock_ref()
    }

    /// The presence timing.
    pub fn presence_config(&self) -> PresenceConfig {
        self.inner.config.presence()
    }

    /// This handle's presence.
    pub fn presence(&self) -> Arc<Presence> {
        Arc::clone(&self.inner.presence)
    }

    /// This client's id.
    pub fn client_id(&self) -> &str {
        self.inner.presence.id()
    }

    /// The schema generation this handle runs at.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::SeqCst)
    }

    /// The verdict recorded for `collection`, if it was declared.
    pub fn verdict(&self, collection: &str) -> Option<Verdict> {
        self.registry().get(collection).map(|r| r.verdict.clone())
    }

    /// The names of `collection`'s registered strategies, in order.
    pub fn strategy_names(&self, collection: &str) -> Vec<String> {
        self.registry()
            .get(collection)
            .map(|r| r.strategy_names.clone())
            .unwrap_or_default()
    }

    fn record(
        &self,
        decl: &SchemaDeclaration,
        verdict: Verdict,
        delta: Option<SchemaDelta>,
        cutover: Option<(Transform, Baseline)>,
    ) -> DeclareOutcome {
        self.registry_mut().insert(
            decl.collection.clone(),
            Registration {
                verdict: verdict.clone(),
                strategy_names: decl
                    .strategies
                    .iter()
                    .map(|s| s.name().to_string())
                    .collect(),
                cutover,
                upcaster: decl
                    .upcaster
                    .clone()
                    .unwrap_or_else(|| Upcaster::identity_to(decl.payload_version.unwrap_or(1))),
                cutover_step: decl.cutover_step,
                chain_known: decl.upcaster.is_some(),
            },
        );
        DeclareOutcome {
            collection: decl.collection.clone(),
            verdict,
            delta,
        }
    }

    fn detection_failed(
        &self,
        decl: &SchemaDeclaration,
        e: &dyn std::fmt::Display,
    ) -> DeclareOutcome {
        tracing::warn!(collection = %decl.collection, error = %e, "schema change detection failed; writes are not blocked");
        self.record(
            decl,
            Verdict::DetectionFailed {
                reason: e.to_string(),
            },
            None,
            None,
        )
    }

    /// Declares a collection: persists its schema on first registration, otherwise
    /// compares it with the baseline, runs the strategies in order and records the
    /// verdict. Never fails (see [`Verdict`]). A rejected or cutover change leaves the
    /// baseline as it was; an allowed change replaces it by compare-and-swap (when a
    /// concurrent writer replaced it first, the new baseline is compared again).
    pub fn declare(&self, decl: SchemaDeclaration) -> DeclareOutcome {
        let store = &self.inner.store;
        let c = decl.collection.clone();
        let new = Baseline::new(&decl.schema, decl.payload_version);
        for _ in 0..CAS_ATTEMPTS {
            let read = match Baseline::read(store, &c) {
                Ok(r) => r,
                Err(e) => return self.detection_failed(&decl, &e),
            };
            let (old, raw) = match read {
                None => match new.compare_and_swap(store, &c, None) {
                    Ok(true) => return self.record(&decl, Verdict::Registered, None, None),
                    Ok(false) => continue,
                    Err(e) => return self.detection_failed(&decl, &e),
                },
                Some((Err(e), _)) => return self.detection_failed(&decl, &e),
                Some((Ok(old), raw)) => (old, raw),
            };
            // A newer build declared the collection at a higher payload version: the
            // baseline is never moved back. The same schema (a lazy step added, say)
            // leaves this build writing the rows it knows; a different one means the
            // stored shape moved past this build (a cutover): it must upgrade.
            if let (Some(stored), Some(build)) = (old.payload_version, new.payload_version) {
                if stored > build {
                    if old.hash == new.hash {
                        return self.record(&decl, Verdict::Unchanged, None, None);
                    }
                    // The newer build only added optional properties: this build writes
                    // on (the collection keeps what it does not know).
                    if let Ok(d) = strata_schema::diff(&c, &new.schema, &old.schema) {
                        if d.kind == strata_schema::DeltaKind::Additive {
                            tracing::info!(collection = %c, stored, build, added = ?d.added, "a newer build added optional properties; this build keeps writing and keeps them");
                            let verdict = Verdict::BehindAdditive {
                                stored,
                                build,
                                added: d.added.clone(),
                            };
                            return self.record(&decl, verdict, Some(d), None);
                        }
                    }
                    tracing::warn!(collection = %c, stored, build, "a newer build moved this collection's schema and payload version; this build's writes are refused until it is upgraded");
                    return self.record(&decl, Verdict::Behind { stored, build }, None, None);
                }
            }
            if old.hash == new.hash {
                if old.payload_version != new.payload_version {
                    match new.compare_and_swap(store, &c, Some(raw)) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => return self.detection_failed(&decl, &e),
                    }
                }
                return self.record(&decl, Verdict::Unchanged, None, None);
            }
            let delta = match strata_schema::diff(&c, &old.schema, &new.schema) {
                Ok(d) => d,
                Err(e) => return self.detection_failed(&decl, &e),
            };
            let ctx = UpdateContext::new(&c).with_payload(
                old.payload_version,
                decl.payload_version.unwrap_or(0),
                decl.upcasts_cover(old.payload_version),
            );
            let eval = evaluate_strategies(&decl.strategies, &delta, &ctx);
            let strategy = eval.strategy.unwrap_or_default();
            match eval.decision {
                UpdateDecision::Allow | UpdateDecision::Accept => {
                    match new.compare_and_swap(store, &c, Some(raw)) {
                        Ok(true) => return self.record(&decl, Verdict::Allowed, Some(delta), None),
                        Ok(false) => continue,
                        Err(e) => return self.detection_failed(&decl, &e),
                    }
                }
                UpdateDecision::Reject(rejection) => {
                    tracing::warn!(collection = %c, strategy = %strategy, "schema change rejected; writes will fail until it is fixed");
                    return self.record(
                        &decl,
                        Verdict::Rejected {
                            strategy,
                            rejection,
                        },
                        Some(delta),
                        None,
                    );
                }
                UpdateDecision::Cutover(transform) => {
                    if let Err(e) = Fence::add_pending(store, &c, &new.hash) {
                        // The local verdict still fences this handle's writes.
                        tracing::warn!(collection = %c, error = %e, "could not record the pending cutover in the fence");
                    }
                    tracing::info!(collection = %c, "coordinated cutover pending; writes are fenced until run_schema_cutover()");
                    return self.record(
                        &decl,
                        Verdict::CutoverPending { strategy },
                        Some(delta),
                        Some((transform, new)),
                    );
                }
            }
        }
        self.detection_failed(
            &decl,
            &PolicyError::Contended {
                key: super::baseline_key(&c),
                attempts: CAS_ATTEMPTS,
            },
        )
    }

    /// Checks one write to `collection`, reading the fence from the store (uncached):
    /// refused with [`Refusal::MigrationRequired`] when the generation moved since
    /// this handle opened, [`Refusal::Fenced`] while a cutover of the collection
    /// is pending, and the strategy's error while the collection's change is rejected.
    pub fn check_write(&self, collection: &str) -> Result<(), PolicyError> {
        self.guard_write(collection).map(|_| ())
    }

    /// [`SchemaGate::check_write`], returning the precondition that keeps its verdict true
    /// until the write commits: the fence record still holds the bytes that were checked.
    /// A write that passed the gate just before a cutover started draining therefore
    /// conflicts, is re-checked, and is refused — it can never land behind the rewrite.
    pub fn guard_write(&self, collection: &str) -> Result<Precondition, PolicyError> {
        let (fence, raw) = Fence::read_raw(&self.inner.store)?;
        self.guard_fence(collection, &fence, raw)
    }

    /// [`SchemaGate::guard_write`] against a fence record the caller read (`raw`: its
    /// bytes, `None` when absent): the returned precondition requires exactly those bytes.
    pub(crate) fn guard_fence(
        &self,
        collection: &str,
        fence: &super::FenceDoc,
        raw: Option<Vec<u8>>,
    ) -> Result<Precondition, PolicyError> {
        self.fence_verdict(collection, fence)?;
        Ok(fence_precondition(raw))
    }

    /// The verdict of [`SchemaGate::guard_fence`] alone: may a write of `collection` go
    /// ahead under the fence record `fence`?
    pub(crate) fn fence_verdict(
        &self,
        collection: &str,
        fence: &super::FenceDoc,
    ) -> Result<(), PolicyError> {
        check_fence(fence, collection, self.generation())?;
        let fenced = || PolicyError::Refused {
            collection: collection.to_string(),
            reason: Refusal::Fenced {
                state: fence.state,
                generation: fence.generation,
            },
        };
        match self.registry().get(collection).map(|r| &r.verdict) {
            Some(Verdict::Rejected {
                strategy,
                rejection,
            }) => Err(rejection.to_error(collection, strategy)),
            Some(Verdict::CutoverPending { .. }) => Err(fenced()),
            Some(Verdict::Behind { stored, build }) => Err(PolicyError::Refused {
                collection: collection.to_string(),
                reason: Refusal::BuildBehind {
                    stored: *stored,
                    build: *build,
                },
            }),
            _ => Ok(()),
        }
    }
}

/// The fence's verdict on a write of `collection` by a handle that opened at generation
/// `opened`: migration required when the generation moved, fenced while a cutover of the
/// collection is pending. Every handle that can write runs this, with or without a policy
/// configuration: the fence is a property of the stored collection.
pub(crate) fn check_fence(
    fence: &super::FenceDoc,
    collection: &str,
    opened: u64,
) -> Result<(), PolicyError> {
    if fence.generation > opened {
        return Err(PolicyError::Refused {
            collection: collection.to_string(),
            reason: Refusal::MigrationRequired {
                opened,
                current: fence.generation,
            },
        });
    }
    if fence.is_pending(collection) {
        return Err(PolicyError::Refused {
            collection: collection.to_string(),
            reason: Refusal::Fenced {
                state: fence.state,
                generation: fence.generation,
            },
        });
    }
    Ok(())
}

/// The precondition that keeps a fence check true until the write commits: the fence
/// record still holds the bytes that were checked (or is still absent).
pub(crate) fn fence_precondition(raw: Option<Vec<u8>>) -> Precondition {
    match raw {
        Some(bytes) => Precondition::Equals {
            key: FENCE_KEY.to_vec(),
            value: bytes,
        },
        None => Precondition::Absent {
            key: FENCE_KEY.to_vec(),
        },
    }
}
