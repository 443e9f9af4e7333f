//! The policy side of a [`Database`](crate::Database): the schema options of a collection
//! and the link from one database handle to its policy client.

use super::fence::{Fence, FenceDoc};
use super::gate::{check_fence, fence_precondition};
use super::{Policy, PolicyConfig, PolicyError, Strategy};
use serde_json::Value;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use strata_store::{Precondition, Store};

/// The schema side of a collection declaration (the seed's `persistJsonSchema` and
/// `schemaUpdate` options), built with chained calls and passed to
/// [`CollectionOptions::schema`](crate::collection::CollectionOptions::schema).
#[derive(Debug, Clone, Default)]
pub struct SchemaOptions {
    schema: Option<Value>,
    strategies: Vec<Strategy>,
}

impl SchemaOptions {
    /// Nothing persisted, no strategies (the collection is not watched).
    pub fn new() -> Self {
        Self::default()
    }

    /// Persists the JSON Schema of `T` (derived with schemars; normally the collection's
    /// document type) as the baseline to detect changes against.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
        Self::json(schema)
    }

    /// Persists `schema`, a JSON Schema the caller derived itself, as the baseline.
    pub fn json(schema: Value) -> Self {
        SchemaOptions {
            schema: Some(schema),
            strategies: Vec::new(),
        }
    }

    /// Appends a schema-update strategy (evaluated in order; the first non-allow decision
    /// wins). With none, changes are accepted silently; without a persisted schema,
    /// strategies are ignored.
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.strategies.push(s);
        self
    }

    /// True when a schema is persisted (the seed's `persistJsonSchema`).
    pub fn persists(&self) -> bool {
        self.schema.is_some()
    }

    /// The JSON Schema to persist, if any (what an admin's `schema check` compares with
    /// the stored baseline).
    pub fn schema_value(&self) -> Option<&Value> {
        self.schema.as_ref()
    }

    /// The strategies, in evaluation order.
    pub fn strategies(&self) -> &[Strategy] {
        &self.strategies
    }

    pub(crate) fn into_parts(self) -> (Option<Value>, Vec<Strategy>) {
        (self.schema, self.strategies)
    }
}

/// The policy side of one database handle: the configured policy client (opened with the
/// database) or the one opened the first time the handle writes a collection under
/// policy, and the schema generation the handle opened at.
///
/// Every write of every collection goes through [`PolicyLink::guard_write`], so the fence
/// is obeyed whether or not the database was opened with a policy configuration.
#[derive(Debug)]
pub(crate) struct PolicyLink {
    store: Store,
    config: PolicyConfig,
    opened_generation: u64,
    policy: OnceLock<Policy>,
    init: Mutex<()>,
    /// The fence record as this handle's writes last read it. A write checks against it
    /// and its batch requires exactly its bytes, so a stale copy can only make the write
    /// conflict (it then reads the fence again, see [`PolicyLink::forget_fence`]) or be
    /// refused on a re-read — never let a write through a fence that changed.
    seen_fence: RwLock<Option<Arc<SeenFence>>>,
}

/// A fence record as read: decoded, and its bytes (`None`: absent).
#[derive(Debug)]
struct SeenFence {
    doc: FenceDoc,
    raw: Option<Vec<u8>>,
}

/// The fence record a write was checked against ([`PolicyLink::guard_write_seen`]): the
/// write must still find exactly these bytes when it commits — as its batch's
/// precondition, or checked by its decision on a backend that decides once on what it
/// read in the write's own transaction. Shared, not copied, per write.
#[derive(Debug, Clone)]
pub(crate) struct SeenGuard(Arc<SeenFence>);

impl SeenGuard {
    /// The fence record's key.
    pub(crate) fn key(&self) -> &'static [u8] {
        super::fence::FENCE_KEY
    }

    /// True when `current` (the fence record as read now) is the record checked.
    pub(crate) fn holds(&self, current: Option<&[u8]>) -> bool {
        current == self.0.raw.as_deref()
    }

    /// The precondition that requires the record checked.
    pub(crate) fn precondition(&self) -> Precondition {
        fence_precondition(self.0.raw.clone())
    }
}

impl PolicyLink {
    /// Reads the generation the handle opens at; with a configuration, registers the
    /// policy client now.
    pub(crate) fn open(store: Store, config: Option<PolicyConfig>) -> Result<Self, PolicyError> {
        let opened_generation = Fence::read(&store)?.generation;
        let eager = config.is_some();
        let link = PolicyLink {
            store,
            config: config.unwrap_or_default(),
            opened_generation,
            policy: OnceLock::new(),
            init: Mutex::new(()),
            seen_fence: RwLock::new(None),
        };
        if eager {
            link.ensure()?;
        }
        Ok(link)
    }

    /// The policy client, if it was opened.
    pub(crate) fn get(&self) -> Option<&Policy> {
        self.policy.get()
    }

    /// The policy client, opened (presence record, heartbeat) at the handle's generation
    /// the first time.
    pub(crate) fn ensure(&self) -> Result<&Policy, PolicyError> {
        if let Some(p) = self.policy.get() {
            return Ok(p);
        }
        let _init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = self.policy.get() {
            return Ok(p);
        }
        let opened = Policy::open_at(
            self.store.clone(),
            self.config.clone(),
            self.opened_generation,
        )?;
        Ok(self.policy.get_or_init(|| opened))
    }

    /// The check every write of `collection` goes through; returns the precondition its
    /// batch carries (the fence bytes checked). `governed`: the collection is under policy
    /// (a persisted schema), so the writer registers its presence before its first write
    /// and the drain barrier waits for it.
    pub(crate) fn guard_write(
        &self,
        collection: &str,
        governed: bool,
    ) -> Result<Precondition, PolicyError> {
        if let Some(p) = self.policy.get() {
            return p.gate().guard_write(collection);
        }
        let (fence, raw) = Fence::read_raw(&self.store)?;
        check_fence(&fence, collection, self.opened_generation)?;
        if governed {
            return self.ensure()?.gate().guard_write(collection);
        }
        Ok(fence_precondition(raw))
    }

    /// [`PolicyLink::guard_write`] for the write path: checks against the fence record
    /// this handle last read instead of reading it for every write. Exact all the same:
    /// the write requires the bytes checked (as its batch's precondition, or checked by its
    /// decision against the record read in its transaction), so a write past a fence that
    /// changed since conflicts (the caller then calls [`PolicyLink::forget_fence`] and
    /// retries), and a refusal is only ever given after reading the fence again.
    pub(crate) fn guard_write_seen(
        &self,
        collection: &str,
        governed: bool,
    ) -> Result<SeenGuard, PolicyError> {
        {
            // Checked under the read lock; nothing below takes `seen_fence` (`ensure`
            // opens the policy client only). A refusal is given only after reading the
            // fence again, below.
            let seen = self.seen_fence.read().unwrap_or_else(|e| e.into_inner());
            if let Some(seen) = seen.as_ref() {
                // A handle without a policy client writing a collection not under policy:
                // the verdict is `check_fence`'s (inline, the commonest write).
                let holds = if !governed && self.policy.get().is_none() {
                    seen.doc.generation <= self.opened_generation
                        && !seen.doc.is_pending(collection)
                } else {
                    self.fence_verdict(collection, governed, &seen.doc).is_ok()
                };
                if holds {
                    return Ok(SeenGuard(Arc::clone(seen)));
                }
            }
        }
        let (doc, raw) = Fence::read_raw(&self.store)?;
        let seen = Arc::new(SeenFence { doc, raw });
        *self.seen_fence.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&seen));
        self.fence_verdict(collection, governed, &seen.doc)?;
        Ok(SeenGuard(seen))
    }

    /// Drops the fence record kept by [`PolicyLink::guard_write_seen`] (after a write
    /// conflicted: the fence may be what changed).
    pub(crate) fn forget_fence(&self) {
        *self.seen_fence.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// May a write of `collection` go ahead under the fence record `fence`?
    fn fence_verdict(
        &self,
        collection: &str,
        governed: bool,
        fence: &FenceDoc,
    ) -> Result<(), PolicyError> {
        if let Some(p) = self.policy.get() {
            return p.gate().fence_verdict(collection, fence);
        }
        check_fence(fence, collection, self.opened_generation)?;
        if governed {
            return self.ensure()?.gate().fence_verdict(collection, fence);
        }
        Ok(())
    }
}
