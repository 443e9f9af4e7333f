//! [`PolicyDatabase`]: a [`Database`] whose collections persist their JSON Schema, run
//! their schema-update strategies on open and write through the policy gate.

use super::gate::{DeclareOutcome, SchemaDeclaration, Verdict};
use super::{CutoverOptions, CutoverReport, FenceDoc, Policy, PolicyConfig, PolicyError, Strategy};
use crate::collection::{Collection, CollectionError, CollectionOptions, WriteGuard};
use crate::database::Database;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;
use strata_store::Store;

/// The schema side of a collection declaration (the seed's `persistJsonSchema` and
/// `schemaUpdate` options), built with chained calls.
#[derive(Debug, Clone, Default)]
pub struct SchemaOptions {
    persist: bool,
    strategies: Vec<Strategy>,
}

impl SchemaOptions {
    /// Nothing persisted, no strategies (the collection is not watched).
    pub fn new() -> Self {
        Self::default()
    }

    /// Persists the collection's JSON Schema as the baseline to detect changes against.
    /// Strategies are ignored without it.
    pub fn persist_json_schema(mut self, on: bool) -> Self {
        self.persist = on;
        self
    }

    /// Appends a schema-update strategy (evaluated in order; the first non-allow decision
    /// wins). With none, changes are accepted silently.
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.strategies.push(s);
        self
    }
}

/// A [`Database`] plus its [`Policy`]: every collection's writes go through the policy
/// gate; collections opened with [`SchemaOptions::persist_json_schema`] persist their
/// schema and run their strategies.
///
/// ```
/// use std::sync::Arc;
/// use serde::{Deserialize, Serialize};
/// use strata::clock::ManualClock;
/// use strata::collection::CollectionOptions;
/// use strata::policy::{additive_only, PolicyConfig, PolicyDatabase, SchemaOptions};
/// use strata_store::{MemoryStore, Store};
///
/// #[derive(Serialize, Deserialize, schemars::JsonSchema)]
/// struct Invoice { id: String, amount: f64 }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::new(MemoryStore::new());
/// let config = PolicyConfig::new().clock(Arc::new(ManualClock::new(0))).heartbeat(None);
/// let db = PolicyDatabase::open(store, config)?;
/// let invoices = db.collection::<Invoice>(
///     "invoices",
///     CollectionOptions::new(),
///     SchemaOptions::new().persist_json_schema(true).strategy(additive_only()),
/// )?;
/// invoices.put("i1", &Invoice { id: "i1".into(), amount: 10.0 })?;
/// assert_eq!(db.fence_state()?.generation, 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PolicyDatabase {
    policy: Policy,
    db: Database,
}

impl PolicyDatabase {
    /// Registers a policy client on `store` and opens the database with its gate.
    pub fn open(store: Store, config: PolicyConfig) -> Result<Self, PolicyError> {
        let policy = Policy::open(store.clone(), config)?;
        let gate: Arc<dyn WriteGuard> = Arc::new(policy.gate().clone());
        let db =
            Database::open_with_guards(store, vec![gate]).map_err(|e| PolicyError::Collection {
                source: Box::new(e),
            })?;
        Ok(PolicyDatabase { policy, db })
    }

    /// Opens the collection `name` (see [`Database::collection`]); with
    /// [`SchemaOptions::persist_json_schema`], declares its schema (derived from `T` with
    /// schemars, with the collection's payload version and upcast steps). Never fails
    /// because of a rejected change — the next write does.
    pub fn collection<T>(
        &self,
        name: &str,
        options: CollectionOptions,
        schema: SchemaOptions,
    ) -> Result<Collection<T>, CollectionError>
    where
        T: Serialize + DeserializeOwned + JsonSchema,
    {
        let collection = self.db.collection::<T>(name, options)?;
        if schema.persist {
            let froms: Vec<i32> = collection
                .chain()
                .steps()
                .iter()
                .map(|s| s.from())
                .collect();
            let decl = SchemaDeclaration::of::<T>(name)
                .payload(collection.current_version(), froms)
                .strategies(schema.strategies);
            self.policy.declare(decl);
        }
        Ok(collection)
    }

    /// Declares a raw schema for `name` (for callers that derive it themselves).
    pub fn declare(&self, decl: SchemaDeclaration) -> DeclareOutcome {
        self.policy.declare(decl)
    }

    /// The verdict recorded for `collection`.
    pub fn verdict(&self, collection: &str) -> Option<Verdict> {
        self.policy.gate().verdict(collection)
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The policy handle.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The fence, read from the store (uncached).
    pub fn fence_state(&self) -> Result<FenceDoc, PolicyError> {
        self.policy.fence_state()
    }

    /// Runs every pending coordinated cutover (see
    /// [`SchemaGate::run_schema_cutover`](super::SchemaGate::run_schema_cutover)).
    pub fn run_schema_cutover(
        &self,
        options: CutoverOptions<'_>,
    ) -> Result<CutoverReport, PolicyError> {
        self.policy.run_schema_cutover(options)
    }

    /// Resets the fence to normal without bumping the generation.
    pub fn abort_schema_cutover(&self) -> Result<FenceDoc, PolicyError> {
        self.policy.abort_schema_cutover()
    }
}
