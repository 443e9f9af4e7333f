//! How a collection is declared: protected fields, the upcast chain, read-repair, guards.

use crate::collection::GuardError;
use crate::payload::chain::{JsonObject, Mode, StepError, UpcastStep};
use crate::policy::SchemaOptions;
use std::fmt::Debug;
use std::sync::Arc;
use strata_store::Precondition;

/// A pre-write check run before every write of a collection (`put`, `insert`, `update`,
/// `delete`, read-repair and sweep rewrites), after the shape policy's own check (which
/// every collection runs, see [`crate::policy`]); returning an error refuses the write with
/// [`CollectionError::Guard`](crate::collection::CollectionError::Guard) and nothing is
/// written.
pub trait WriteGuard: Send + Sync + Debug {
    /// Checks one write to `collection`.
    fn check_write(&self, collection: &str) -> Result<(), GuardError>;

    /// Checks one write and returns the preconditions its batch must carry so that the
    /// check is still true when the batch commits (for example "the fence record still
    /// holds the bytes I checked"). If a precondition fails, the collection re-runs the
    /// guard before retrying, so a write can never slip past a state change that happened
    /// between the check and the commit. The default runs [`WriteGuard::check_write`] and
    /// adds no precondition.
    fn guard_write(&self, collection: &str) -> Result<Vec<Precondition>, GuardError> {
        self.check_write(collection).map(|()| Vec::new())
    }
}

/// The declaration of a collection, built with chained calls and passed to
/// [`Database::collection`](crate::database::Database::collection). The upcast chain lives
/// here, with the collection — there is no global registry.
///
/// ```
/// use serde_json::json;
/// use strata::CollectionOptions;
/// use strata::{Mode, StepError};
///
/// let options = CollectionOptions::new()
///     .identity_fields(["id"])
///     .upcast(1, Mode::Lazy, |obj| {
///         // v1 stored `balance` in dollars; v2 stores `balance_cents`.
///         let dollars = obj.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
///         obj.insert("balance_cents".into(), json!(dollars * 100));
///         Ok::<(), StepError>(())
///     });
/// assert_eq!(options.steps().len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct CollectionOptions {
    identity: Vec<String>,
    lock_field: Option<String>,
    version_field: Option<String>,
    steps: Vec<UpcastStep>,
    downs: Vec<crate::payload::DowncastStep>,
    read_repair: bool,
    guards: Vec<Arc<dyn WriteGuard>>,
    schema: SchemaOptions,
    sealed: bool,
    retired_below: Option<i32>,
    /// Off: an older build is refused on rows of a newer build even when the schema
    /// history proves the change additive (see [`CollectionOptions::keep_newer_fields`]).
    refuse_newer: bool,
}

impl CollectionOptions {
    /// Defaults: no protected fields, no steps (current version 1), no read-repair.
    pub fn new() -> Self {
        Self::default()
    }

    /// The identity fields of the JSON object: snapshotted before every upcast step and
    /// restored after it, so a step cannot re-key a document.
    pub fn identity_fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.identity.extend(fields.into_iter().map(Into::into));
        self
    }

    /// The name of an optimistic-lock field inside the user's JSON, if the type carries
    /// one; it is protected like an identity field. (The engine's own lock version lives in
    /// the envelope and is never visible to steps.)
    pub fn lock_field(mut self, field: impl Into<String>) -> Self {
        self.lock_field = Some(field.into());
        self
    }

    /// A field of the JSON object into which the engine stamps the payload version while
    /// upcasting: before each step (a step always sees its `from` version) and after the
    /// last. A step cannot change it.
    pub fn version_field(mut self, field: impl Into<String>) -> Self {
        self.version_field = Some(field.into());
        self
    }

    /// Declares the step `from → from + 1`, a pure function over the raw JSON object.
    /// The chain is validated when the collection is opened.
    pub fn upcast<F>(mut self, from: i32, mode: Mode, step: F) -> Self
    where
        F: Fn(&mut JsonObject) -> Result<(), StepError> + Send + Sync + 'static,
    {
        self.steps.push(UpcastStep::new(from, mode, step));
        self
    }

    /// Declares the downcast step `from → from - 1`, the reverse of the upcast step
    /// `from - 1 → from` (which must be declared too; checked when the collection is
    /// opened). With a downcast from its current version a build can take part in a
    /// deploy window: while the store's operational version for the collection is
    /// `from - 1` (an older build still runs), this build reads everything through its
    /// upcasts and writes rows at `from - 1` through the downcast, so the older build
    /// keeps reading and writing every document (see [`crate::ops::window`]). The
    /// protected fields are restored after the step, as for upcasts. A field the
    /// downcast cannot express (one that the round trip, downcast then upcast, does not
    /// produce) is kept with the row under [`KEPT_FIELD`](crate::payload::KEPT_FIELD) and
    /// comes back when a build at `from` reads it.
    pub fn downcast<F>(mut self, from: i32, step: F) -> Self
    where
        F: Fn(&mut JsonObject) -> Result<(), StepError> + Send + Sync + 'static,
    {
        self.downs
            .push(crate::payload::DowncastStep::new(from, step));
        self
    }

    /// The declared downcast steps, in declaration order.
    pub fn downcasts(&self) -> &[crate::payload::DowncastStep] {
        &self.downs
    }

    /// Declares that this build's chain starts at `version`: the steps below it were
    /// retired and are no longer declared. Accepted only when the store records a
    /// retirement of the versions below `version` (or higher), made by
    /// [`crate::ops::retire::retire`] (`retire <collection> --below K` in the admin) after
    /// it proved that no row is stored below it; opening the collection otherwise fails
    /// with [`CollectionError::RetirementMissing`](crate::collection::CollectionError::RetirementMissing).
    /// Steps are then declared from `version` up.
    pub fn retired_below(mut self, version: i32) -> Self {
        self.retired_below = Some(version);
        self
    }

    /// The version declared with [`CollectionOptions::retired_below`], if any.
    pub fn retired_below_version(&self) -> Option<i32> {
        self.retired_below
    }

    /// The protected fields (identity fields, then the lock field), as the engine
    /// restores them after every step.
    pub fn protected_fields(&self) -> Vec<String> {
        let mut protected = self.identity.clone();
        if let Some(l) = &self.lock_field {
            if !protected.contains(l) {
                protected.push(l.clone());
            }
        }
        protected
    }

    /// The declared upcast steps plus, when the schema options persist a schema and
    /// declare a coordinated cutover, its transform as the step on top of them (a
    /// cutover is a payload step: [`Transform::into_step`](crate::policy::Transform::into_step));
    /// the flag says whether that step was added.
    pub(crate) fn chain_steps(
        &self,
        collection: &str,
    ) -> Result<(Vec<UpcastStep>, bool), crate::payload::chain::ChainError> {
        let start = self
            .retired_below
            .unwrap_or(crate::payload::chain::INITIAL_PAYLOAD_VERSION);
        let mut steps = self.steps.clone();
        // The first strategy that declares a transform (only the first cutover strategy
        // of a list can ever decide); strategies count only with a persisted schema.
        let transform = self
            .schema
            .strategies()
            .iter()
            .find_map(|s| s.cutover_transform())
            .filter(|_| self.schema.persists());
        let Some(transform) = transform else {
            return Ok((steps, false));
        };
        let top =
            crate::payload::chain::UpcastChain::starting_at(collection, start, steps.clone())?
                .current_version();
        steps.push(transform.into_step(top));
        Ok((steps, true))
    }

    /// The payload version these options write: the top of the declared chain (its
    /// start, 1 unless retired, plus one per step), plus one for a coordinated cutover's
    /// step (the chain this build declares). An invalid chain counts its steps
    /// as declared.
    pub fn current_version(&self) -> i32 {
        let start = self
            .retired_below
            .unwrap_or(crate::payload::chain::INITIAL_PAYLOAD_VERSION);
        let cutover = self.schema.persists()
            && self
                .schema
                .strategies()
                .iter()
                .any(|s| s.cutover_transform().is_some());
        let steps = i32::try_from(self.steps.len()).unwrap_or(i32::MAX);
        start
            .saturating_add(steps)
            .saturating_add(i32::from(cutover))
    }

    /// The upcaster these options declare for `collection` (chain validated as
    /// [`Database::collection`](crate::database::Database::collection) validates it, protected
    /// fields, version field), without a store: what a test of the chain runs. The store's
    /// retirement record is not consulted.
    pub fn upcaster(
        &self,
        collection: &str,
    ) -> Result<crate::payload::upcaster::Upcaster, crate::payload::chain::ChainError> {
        let start = self
            .retired_below
            .unwrap_or(crate::payload::chain::INITIAL_PAYLOAD_VERSION);
        let (steps, _) = self.chain_steps(collection)?;
        let chain = crate::payload::chain::UpcastChain::starting_at(collection, start, steps)?
            .with_downcasts(collection, self.downs.clone())?;
        Ok(crate::payload::upcaster::Upcaster::new(
            chain,
            self.protected_fields(),
            self.version_field.clone(),
        ))
    }

    /// Adds an already built step.
    pub fn step(mut self, step: UpcastStep) -> Self {
        self.steps.push(step);
        self
    }

    /// When true, a read that upcast a document writes the upcast form back with a
    /// compare-and-swap against the bytes it read (never resurrecting a deleted document
    /// nor overwriting a concurrent write). Off by default. Never while a deploy window
    /// is open ([`crate::ops::window`]), whatever this build's version: see
    /// [`Collection`](crate::Collection)'s read path (the repair would move rows above
    /// the version the older build still running reads).
    pub fn read_repair(mut self, on: bool) -> Self {
        self.read_repair = on;
        self
    }

    /// Seals the collection's documents at rest with the database's data key (the
    /// database must be opened with [`DatabaseBuilder::key`](crate::database::DatabaseBuilder::key)):
    /// every write stores the JSON encrypted behind a clear envelope header (envelope
    /// format 2), every read authenticates and decrypts it. Document ids stay in clear.
    pub fn sealed(mut self) -> Self {
        self.sealed = true;
        self
    }

    /// True when these options declare the collection [sealed](CollectionOptions::sealed).
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    /// These options without [`CollectionOptions::sealed`]: the same collection over
    /// documents in clear (how `strata-testkit` replays a sealed collection's fixture,
    /// whose bodies are stored decrypted).
    pub fn unsealed(mut self) -> Self {
        self.sealed = false;
        self
    }

    /// Whether this build may write rows a newer build wrote when the store's schema
    /// history proves the newer build's change **additive** — new optional top-level
    /// properties only, the schema `diff` classification `additive` — (on by default:
    /// it is provably safe). The write keeps the properties this build's type does not
    /// have, as stored, and the row's payload version; this build reads such rows (its
    /// type ignores the new properties). Rows of a newer version whose schema is not an
    /// additive change of this build's (or that the history does not record) are refused
    /// by the ahead guard ("written by a newer build, upgrade this instance"), as with
    /// `false`. It needs the collection under policy ([`CollectionOptions::schema`]):
    /// the proof compares this build's declared schema with the history's.
    pub fn keep_newer_fields(mut self, on: bool) -> Self {
        self.refuse_newer = !on;
        self
    }

    /// Adds a write guard for this collection (in addition to the database's guards).
    pub fn write_guard(mut self, guard: Arc<dyn WriteGuard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// The shape policy of the collection: persist its JSON Schema (derived from the
    /// document type) and run schema-update strategies on open. See
    /// [`crate::policy`].
    pub fn schema(mut self, schema: SchemaOptions) -> Self {
        self.schema = schema;
        self
    }

    /// The declared steps, in declaration order.
    pub fn steps(&self) -> &[UpcastStep] {
        &self.steps
    }

    /// The schema options given with [`CollectionOptions::schema`].
    pub fn schema_options(&self) -> &SchemaOptions {
        &self.schema
    }

    pub(crate) fn into_parts(self) -> OptionParts {
        let mut protected = self.identity;
        if let Some(l) = self.lock_field {
            if !protected.contains(&l) {
                protected.push(l);
            }
        }
        OptionParts {
            protected,
            retired_below: self.retired_below,
            version_field: self.version_field,
            downs: self.downs,
            read_repair: self.read_repair,
            guards: self.guards,
            schema: self.schema,
            sealed: self.sealed,
            keep_newer: !self.refuse_newer,
        }
    }
}

pub(crate) struct OptionParts {
    pub(crate) protected: Vec<String>,
    pub(crate) retired_below: Option<i32>,
    pub(crate) version_field: Option<String>,
    pub(crate) downs: Vec<crate::payload::DowncastStep>,
    pub(crate) read_repair: bool,
    pub(crate) guards: Vec<Arc<dyn WriteGuard>>,
    pub(crate) schema: SchemaOptions,
    pub(crate) sealed: bool,
    pub(crate) keep_newer: bool,
}

/// The policy's gate guards the writes of the collections it watches (implemented here,
/// in the collections layer, so the policy does not depend on collections).
impl WriteGuard for crate::policy::SchemaGate {
    fn check_write(&self, collection: &str) -> Result<(), GuardError> {
        crate::policy::SchemaGate::check_write(self, collection).map_err(|e| Box::new(e) as _)
    }

    fn guard_write(&self, collection: &str) -> Result<Vec<Precondition>, GuardError> {
        crate::policy::SchemaGate::guard_write(self, collection)
            .map(|p| vec![p])
            .map_err(|e| Box::new(e) as _)
    }
}
