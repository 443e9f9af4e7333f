//! The policy layer's one error type.

use strata_store::{escape_key, StoreError};

/// Renders a list of names as `[a, b]` (the seed's delta notation).
pub(crate) fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// Errors of the shape-policy layer: strategy rejections, the write fence, the drain
/// barrier and the cutover.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// `additive_only()` refused a non-additive change (text as in the seed).
    #[error("Non-additive schema change to \"{collection}\" (added: {}, removed: {}, changed: {}). Register a coordinated_cutover() strategy to migrate, or revert the change.", list(.added), list(.removed), list(.changed))]
    NonAdditiveSchemaChange {
        /// The collection.
        collection: String,
        /// New top-level properties.
        added: Vec<String>,
        /// Removed top-level properties.
        removed: Vec<String>,
        /// Changed top-level properties.
        changed: Vec<String>,
    },
    /// `lock_schema()` refused a change (text as in the seed).
    #[error("Schema for \"{collection}\" is locked; the change was refused.")]
    SchemaLocked {
        /// The collection.
        collection: String,
    },
    /// A user strategy refused a change.
    #[error("schema change to `{collection}` refused by strategy `{strategy}`: {reason}; revert the change or adjust the strategy")]
    Rejected {
        /// The collection.
        collection: String,
        /// The strategy's name.
        strategy: String,
        /// The strategy's reason.
        reason: String,
    },
    /// A coordinated cutover of the collection is pending: writes are fenced.
    #[error("writes to `{collection}` are fenced: a schema cutover is pending (fence {state}, generation {generation}); run run_schema_cutover() (or `strata fence` to inspect)")]
    SchemaFence {
        /// The collection.
        collection: String,
        /// The fence state when the write was refused.
        state: String,
        /// The schema generation.
        generation: u64,
    },
    /// The schema generation moved since this handle opened.
    #[error("migration required: the schema generation of this store moved from {opened} to {current} since this handle opened (write to `{collection}` refused); reopen the database to pick up the new schema")]
    MigrationRequired {
        /// The collection the write was for.
        collection: String,
        /// The generation this handle opened at.
        opened: u64,
        /// The store's current generation.
        current: u64,
    },
    /// Live clients did not acknowledge the drain in time.
    #[error("schema cutover timed out after {waited_ms} ms waiting for clients {} to quiesce; the fence stays draining: close or upgrade them and rerun, or run abort_schema_cutover() (`strata fence abort`)", list(.holdouts))]
    QuiesceTimeout {
        /// How long the barrier waited.
        waited_ms: u64,
        /// The live clients that never acknowledged.
        holdouts: Vec<String>,
    },
    /// Another coordinator holds the cutover lease.
    #[error("a schema cutover is already run by client `{coordinator}` (fence {state}, lease until {lease_until_ms} ms); wait for it, or rerun after its lease expires")]
    CutoverInProgress {
        /// The coordinator's client id.
        coordinator: String,
        /// The fence state.
        state: String,
        /// When the coordinator's lease expires (clock milliseconds).
        lease_until_ms: u64,
    },
    /// This handle lost the coordinator lease while running the cutover.
    #[error("lost the cutover lease to client `{coordinator}`; the other coordinator continues, nothing more is done here")]
    LeaseLost {
        /// The client now holding the lease (empty when none).
        coordinator: String,
    },
    /// A collection's cutover is pending but this handle has no transform for it.
    #[error("the cutover of `{collection}` is pending but this handle registered no coordinated_cutover() transform for it; open the collection with its coordinated_cutover() strategy and rerun")]
    NoTransform {
        /// The collection.
        collection: String,
    },
    /// A cutover transform failed on one record.
    #[error("cutover transform of `{collection}` failed on record `{}`: {reason}; nothing of its batch was written, fix the transform or the record and rerun", escape_key(.key))]
    Transform {
        /// The collection.
        collection: String,
        /// The record's full key.
        key: Vec<u8>,
        /// The transform's reason.
        reason: String,
    },
    /// A policy record could not be decoded.
    #[error("corrupted policy record `{}`: {reason}; {}", escape_key(.key), corrupted_remedy(.key))]
    Corrupted {
        /// The record's key.
        key: Vec<u8>,
        /// What is wrong.
        reason: String,
    },
    /// A compare-and-swap kept losing against concurrent writers.
    #[error("record `{}` kept changing under concurrent writers after {attempts} attempts; retry", escape_key(.key))]
    Contended {
        /// The record's key.
        key: Vec<u8>,
        /// Attempts made.
        attempts: u32,
    },
    /// Invalid options or arguments.
    #[error("invalid policy argument: {reason}")]
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// The bulk pass under the cutover failed.
    #[error("cutover pass over `{collection}` failed; the fence stays migrating, rerun run_schema_cutover() to resume from the checkpoint")]
    Pass {
        /// The collection.
        collection: String,
        /// The pass error.
        #[source]
        source: Box<crate::pass::PassError>,
    },
    /// Opening the database under the policy failed.
    #[error("cannot open the database")]
    Collection {
        /// The collections layer's error.
        #[source]
        source: Box<crate::collection::CollectionError>,
    },
    /// The store failed.
    #[error("store error in the policy layer at `{}`; retry", escape_key(.key))]
    Store {
        /// The key being read or written.
        key: Vec<u8>,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl PolicyError {
    /// Wraps a store error for `key`.
    pub(crate) fn store(key: &[u8], source: StoreError) -> Self {
        PolicyError::Store {
            key: key.to_vec(),
            source,
        }
    }

    /// A corrupted-record error.
    pub(crate) fn corrupted(key: &[u8], reason: impl Into<String>) -> Self {
        PolicyError::Corrupted {
            key: key.to_vec(),
            reason: reason.into(),
        }
    }

    /// True for a write refused by the fence (pending cutover).
    pub fn is_fenced(&self) -> bool {
        matches!(self, PolicyError::SchemaFence { .. })
    }

    /// True for a write refused because the generation moved (reopen needed).
    pub fn is_migration_required(&self) -> bool {
        matches!(self, PolicyError::MigrationRequired { .. })
    }

    /// True for a write refused by a strategy (non-additive, locked, user rejection).
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            PolicyError::NonAdditiveSchemaChange { .. }
                | PolicyError::SchemaLocked { .. }
                | PolicyError::Rejected { .. }
        )
    }
}

/// What to do about a corrupted policy record, by kind of record.
fn corrupted_remedy(key: &[u8]) -> &'static str {
    if key == super::fence::FENCE_KEY {
        "restore it from a backup, or rewrite it with `strata fence abort --reset-corrupt <generation>`"
    } else if key.starts_with(super::baseline::JSONSCHEMA_PREFIX) {
        "restore it from a backup, or delete it so the next declaration registers the current schema as the baseline"
    } else {
        "restore it from a backup, or delete it (a live client rewrites its presence record on its next heartbeat)"
    }
}
