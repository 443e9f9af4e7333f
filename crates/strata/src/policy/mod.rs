//! Shape policy: the persisted JSON Schema of each collection, the schema-update
//! strategies run on every open, the write gate, the per-store fence, client presence and
//! the drain barrier. The crash-safe coordinated cutover that completes a pending change
//! lives above collections, in [`crate::ops::cutover`].
//!
//! One [`Policy`] per open database handle (opened with
//! [`DatabaseBuilder::policy`](crate::DatabaseBuilder::policy), reached through
//! [`Database::policy`](crate::Database::policy)): it registers the handle as a client of the
//! store (presence record and heartbeat), records each declared collection's verdict, and
//! checks every write through its [`SchemaGate`].
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use strata::clock::ManualClock;
//! use strata::policy::{additive_only, PolicyConfig, SchemaDeclaration};
//! use strata::Database;
//! use strata_store::{MemoryStore, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::new(MemoryStore::new());
//! let config = PolicyConfig::new().clock(Arc::new(ManualClock::new(0))).heartbeat(None);
//! let v1 = json!({"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"number"}},"required":["id","amount"]});
//! let v2 = json!({"type":"object","properties":{"id":{"type":"string"}},"required":["id"]});
//!
//! let db0 = Database::builder(store.clone()).policy(config.clone()).open()?;
//! let gen0 = db0.policy().ok_or("no policy")?;
//! gen0.declare(SchemaDeclaration::new("invoices", v1).strategy(additive_only()));
//! drop(db0);
//!
//! let db1 = Database::builder(store).policy(config).open()?;
//! let gen1 = db1.policy().ok_or("no policy")?;
//! gen1.declare(SchemaDeclaration::new("invoices", v2).strategy(additive_only())); // never fails
//! let err = gen1.check_write("invoices").unwrap_err(); // …the next write does
//! assert_eq!(err.to_string(), "Non-additive schema change to \"invoices\" (added: [], removed: [amount], changed: []). Register a coordinated_cutover() strategy to migrate, or revert the change.");
//! assert!(gen1.check_write("other").is_ok());
//! # Ok(()) }
//! ```

mod baseline;
mod database;
mod error;
pub(crate) mod fence;
mod gate;
pub(crate) mod history;
mod presence;
mod state;
mod strategy;

pub use baseline::{baseline_key, Baseline, BASELINE_FORMAT};
pub use database::SchemaOptions;
pub(crate) use database::{PolicyLink, SeenGuard};
pub use error::{PolicyError, Refusal, RefusalMessage};
pub use fence::{Fence, FenceDoc, PendingCutover, FENCE_FORMAT};
pub use gate::{DeclareOutcome, SchemaDeclaration, SchemaGate, Verdict};
pub use history::{history_key, history_prefix, read_history, SchemaVersion};
pub use presence::{
    client_key, list_clients, new_client_id, remove_client, ClientRecord, Heartbeat, Presence,
    PresenceConfig, CLIENT_FORMAT, DEFAULT_HEARTBEAT_MS, DEFAULT_STALE_AFTER_MS,
};
pub use state::FenceState;
pub use strategy::{
    additive_only, blind_update, coordinated_cutover, covered_by_upcasts, evaluate_strategies,
    lock_schema, lock_schema_fields, DeltaKind, Evaluation, FieldChange, Rejection, SchemaDelta,
    SchemaUpdateStrategy, Strategy, Transform, UpdateContext, UpdateDecision,
};

use crate::clock::{SharedClock, SystemClock};
use std::time::Duration;
use strata_store::Store;

/// True while a policy handle of this process is the client `client` (see
/// [`crate::alive`]): on a store one process opens at a time, a recorded coordinator
/// that is not is gone.
pub(crate) fn coordinator_open_here(client: &str) -> bool {
    crate::alive::Alive::contains(crate::alive::Holder::PolicyClient, client)
}

/// Default cutover lease: a coordinator silent for longer can be taken over.
pub const DEFAULT_LEASE_MS: u64 = 30_000;

/// Configuration of a [`Policy`] handle, built with chained calls.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    clock: SharedClock,
    presence: PresenceConfig,
    lease_ms: u64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            clock: SystemClock::shared(),
            presence: PresenceConfig::default(),
            lease_ms: DEFAULT_LEASE_MS,
        }
    }
}

impl PolicyConfig {
    /// System clock, 2 s heartbeat, 15 s stale window, 30 s cutover lease.
    pub fn new() -> Self {
        Self::default()
    }

    /// The clock every time-dependent decision reads.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The heartbeat interval of the background thread (`None`: no thread; call
    /// [`Policy::heartbeat`] yourself).
    pub fn heartbeat(mut self, interval: Option<Duration>) -> Self {
        self.presence.heartbeat = interval;
        self
    }

    /// The stale window: clients silent for longer are not waited for by the drain.
    pub fn stale_after_ms(mut self, ms: u64) -> Self {
        self.presence.stale_after_ms = ms;
        self
    }

    /// The cutover coordinator's lease; renewed at every barrier poll and every batch.
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.lease_ms = ms;
        self
    }

    /// The configured clock.
    pub fn clock_ref(&self) -> &SharedClock {
        &self.clock
    }

    /// The presence timing.
    pub fn presence(&self) -> PresenceConfig {
        self.presence
    }

    /// The cutover lease in milliseconds.
    pub fn lease(&self) -> u64 {
        self.lease_ms
    }
}

/// The policy side of one open database handle: a client of the store with a presence
/// record and heartbeat, the verdicts of its declared collections, the write gate and the
/// cutover coordinator. Dropping it stops the heartbeat and removes the presence record.
#[derive(Debug)]
pub struct Policy {
    gate: SchemaGate,
    heartbeat: Option<Heartbeat>,
    /// This client, registered as open in this process while the handle lives.
    _open_here: crate::alive::Alive,
}

impl Policy {
    /// Registers this handle as a client of `store` at schema `generation` (the one the
    /// database handle opened at), and starts the heartbeat thread when configured.
    pub(crate) fn open_at(
        store: Store,
        config: PolicyConfig,
        generation: u64,
    ) -> Result<Self, PolicyError> {
        let gate = SchemaGate::open_at(store, config, generation)?;
        let heartbeat = match gate.config().presence.heartbeat {
            Some(interval) => Some(Heartbeat::start(gate.presence(), interval)?),
            None => None,
        };
        let open_here =
            crate::alive::Alive::enter(crate::alive::Holder::PolicyClient, gate.client_id());
        Ok(Policy {
            gate,
            heartbeat,
            _open_here: open_here,
        })
    }

    /// The write gate (cloneable; implements the collections' `WriteGuard`).
    pub fn gate(&self) -> &SchemaGate {
        &self.gate
    }

    /// This client's id.
    pub fn client_id(&self) -> &str {
        self.gate.client_id()
    }

    /// The schema generation this handle runs at.
    pub fn generation(&self) -> u64 {
        self.gate.generation()
    }

    /// Declares a collection's schema: persists it on first registration, otherwise
    /// compares it with the baseline and runs the strategies. Never fails: a rejection
    /// surfaces on the next write, a detection failure is logged and blocks nothing.
    pub fn declare(&self, decl: SchemaDeclaration) -> DeclareOutcome {
        self.gate.declare(decl)
    }

    /// Checks one write to `collection` (what the `WriteGuard` does).
    pub fn check_write(&self, collection: &str) -> Result<(), PolicyError> {
        self.gate.check_write(collection)
    }

    /// One manual heartbeat (acknowledges a draining fence).
    pub fn heartbeat(&self) -> Result<(), PolicyError> {
        self.gate.presence().tick()
    }

    /// The fence, read from the store (uncached).
    pub fn fence_state(&self) -> Result<FenceDoc, PolicyError> {
        Fence::read(self.gate.store())
    }

    /// Resets the fence to normal without bumping the generation.
    pub fn abort_schema_cutover(&self) -> Result<FenceDoc, PolicyError> {
        Fence::abort(self.gate.store())
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        drop(self.heartbeat.take());
        if let Err(e) = self.gate.presence().close() {
            tracing::warn!(client = %self.gate.client_id(), error = %e, "could not remove the client presence record");
        }
    }
}
