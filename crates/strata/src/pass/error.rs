//! The bulk pass's error type.

use std::fmt;
use strata_store::{escape_key, StoreError};

use crate::record_error::RecordError;

/// Renders an optional cursor for messages: the escaped key, or `none` (no record of the
/// table has been committed yet).
pub(crate) struct CursorDisplay<'a>(pub(crate) Option<&'a [u8]>);

impl fmt::Display for CursorDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(c) => write!(f, "`{}`", strata_store::shown_key(c)),
            None => f.write_str("none"),
        }
    }
}

/// Which rule a generated mutation broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MutationRule {
    /// It writes or deletes a key inside the table being scanned other than the record's
    /// own key (new keys and moves must target another namespace).
    SiblingKey,
    /// It writes or deletes engine metadata (`__nx/schema/`, `__nx/migration/` or the
    /// pass's own checkpoint key).
    EngineMetadata,
    /// It touches a key already set or deleted in the same batch.
    Duplicate,
}

impl fmt::Display for MutationRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MutationRule::SiblingKey => {
                "inside the scanned table a step may only touch its own source key; write new keys and moves to another namespace"
            }
            MutationRule::EngineMetadata => {
                "only the engine writes `__nx/schema/`, `__nx/migration/` and the pass checkpoint"
            }
            MutationRule::Duplicate => {
                "the key is already set or deleted in this batch; emit each key at most once"
            }
        })
    }
}

/// The boxed error of the layer above the pass (a policy or collection error), carried as
/// the source of a [`HookError`].
type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a batch or completion hook stopped the pass (what hooks can fail with). The
/// hook's own error, when it has one, is the [`source`](std::error::Error::source): the
/// messages here never repeat it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The runner no longer holds the lease its batches are conditioned on: another runner
    /// took it over, or it expired.
    #[error("the lease was lost{}", match .holder { Some(h) => format!(" to `{h}`"), None => String::new() })]
    LeaseLost {
        /// Who holds it now, when known.
        holder: Option<String>,
    },
    /// A write guard (a fence, a policy rule) refuses writes to the table.
    #[error("a write guard refused the batch")]
    Refused {
        /// The guard's refusal.
        #[source]
        source: Cause,
    },
    /// The hook could not make its check: reading what it checks failed (a store error, a
    /// corrupt record).
    #[error("the batch hook could not make its check")]
    Check {
        /// What failed.
        #[source]
        source: Cause,
    },
}

impl HookError {
    /// A guard's refusal (`source` is kept as the source).
    pub fn refused(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        HookError::Refused {
            source: Box::new(source),
        }
    }

    /// A failed check (`source` is kept as the source).
    pub fn check(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        HookError::Check {
            source: Box::new(source),
        }
    }

    /// The hook's own error back as `E` when it is one (a refusal or a failed check
    /// carrying an `E`); otherwise `self` unchanged.
    pub fn into_cause<E: std::error::Error + 'static>(self) -> Result<E, Self> {
        match self {
            HookError::Refused { source } => source
                .downcast::<E>()
                .map(|e| *e)
                .map_err(|source| HookError::Refused { source }),
            HookError::Check { source } => source
                .downcast::<E>()
                .map(|e| *e)
                .map_err(|source| HookError::Check { source }),
            other => Err(other),
        }
    }
}

/// Why a bulk pass stopped. Every variant that can happen after the pass started carries
/// `checkpoint`: the last **durable** cursor (the last key whose batch was committed;
/// `None` when no batch of this pass or an earlier run was committed). Nothing of the
/// failed batch was applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PassError {
    /// The batch limits are unusable.
    #[error("invalid pass limits: {reason}")]
    InvalidLimits {
        /// Why.
        reason: String,
    },
    /// The processor rejected a record.
    #[error("invalid record `{}` in table `{table}`: {reason}; nothing of its batch was written (checkpoint {}), repair or remove the record and rerun", strata_store::shown_key(.key), CursorDisplay(.checkpoint.as_deref()))]
    InvalidRecord {
        /// The table.
        table: String,
        /// The record's full key.
        key: Vec<u8>,
        /// The processor's verdict: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), whatever caused it.
        #[source]
        reason: RecordError,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// A single stored record is larger than the byte budget (raised before its value
    /// was copied).
    #[error("record `{}` in table `{table}` is {size} bytes (key + value), larger than the batch byte budget of {limit} bytes; nothing was written (checkpoint {}), raise the byte budget", strata_store::shown_key(.key), CursorDisplay(.checkpoint.as_deref()))]
    RecordTooLarge {
        /// The table.
        table: String,
        /// The record's full key.
        key: Vec<u8>,
        /// Key + value length.
        size: usize,
        /// The byte budget.
        limit: usize,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// One record plus the mutations generated for it exceed the byte budget even in a
    /// batch of its own.
    #[error("record `{}` in table `{table}` and its generated mutations need {size} bytes, more than the batch byte budget of {limit} bytes; nothing of it was written (checkpoint {}), raise the byte budget", strata_store::shown_key(.key), CursorDisplay(.checkpoint.as_deref()))]
    BatchTooLarge {
        /// The table.
        table: String,
        /// The record's full key.
        key: Vec<u8>,
        /// Record size plus the size of its mutations.
        size: usize,
        /// The byte budget.
        limit: usize,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// The checkpoint value the pass would commit (its codec's encoding of the cursor) is,
    /// with its key, larger than [`DEFAULT_MAX_BYTES`](crate::pass::DEFAULT_MAX_BYTES): no
    /// reader could read it back under the default budget, so it is not written.
    #[error("checkpoint `{}` of table `{table}` would be {size} bytes (key + value), more than the record limit of {limit} bytes; nothing of its batch was written (checkpoint {}), shorten the keys of the table (the cursor is the last key processed)", strata_store::shown_key(.key), CursorDisplay(.checkpoint.as_deref()))]
    CheckpointTooLarge {
        /// The table.
        table: String,
        /// The checkpoint key.
        key: Vec<u8>,
        /// Key + encoded checkpoint length.
        size: usize,
        /// The limit.
        limit: usize,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// A generated mutation broke one of the pass rules.
    #[error("the step for record `{}` in table `{table}` touches `{}`: {rule}; nothing of its batch was written (checkpoint {})", strata_store::shown_key(.key), strata_store::shown_key(.target), CursorDisplay(.checkpoint.as_deref()))]
    ForbiddenMutation {
        /// The table.
        table: String,
        /// The source record's full key.
        key: Vec<u8>,
        /// The key the mutation touches.
        target: Vec<u8>,
        /// The rule it broke.
        rule: MutationRule,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// The stored checkpoint cannot be decoded.
    #[error("corrupted checkpoint `{}` of table `{table}`: {reason}; restore it from a backup or delete it to restart the pass from the beginning", strata_store::shown_key(.key))]
    CorruptCheckpoint {
        /// The table.
        table: String,
        /// The checkpoint key.
        key: Vec<u8>,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the decode error behind it.
        #[source]
        reason: RecordError,
    },
    /// The stored checkpoint's cursor does not lie inside the table's prefix.
    #[error("checkpoint of table `{table}` points at `{}`, outside the table prefix `{}`; delete the checkpoint to restart the pass from the beginning", escape_key(.cursor), escape_key(.prefix))]
    CheckpointOutOfPrefix {
        /// The table.
        table: String,
        /// The cursor found.
        cursor: Vec<u8>,
        /// The table prefix.
        prefix: Vec<u8>,
    },
    /// The abort check asked the pass to stop at a batch boundary.
    #[error("pass over table `{table}` aborted at a batch boundary (checkpoint {}); rerun to resume", CursorDisplay(.checkpoint.as_deref()))]
    Aborted {
        /// The table.
        table: String,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
    },
    /// A batch or completion hook refused the batch.
    #[error("pass over table `{table}` stopped by its batch hook; nothing of the batch was written (checkpoint {})", CursorDisplay(.checkpoint.as_deref()))]
    Hook {
        /// The table.
        table: String,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
        /// The hook's error.
        #[source]
        source: HookError,
    },
    /// The store failed (reading, or applying a batch: then nothing of it was written).
    #[error("store error during the pass over table `{table}` (checkpoint {}); rerun to resume", CursorDisplay(.checkpoint.as_deref()))]
    Store {
        /// The table.
        table: String,
        /// The last durable cursor.
        checkpoint: Option<Vec<u8>>,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl PassError {
    /// The last durable cursor when the pass stopped (`None`: nothing committed yet, or the
    /// error happened before the pass started).
    pub fn checkpoint(&self) -> Option<&[u8]> {
        match self {
            PassError::InvalidRecord { checkpoint, .. }
            | PassError::RecordTooLarge { checkpoint, .. }
            | PassError::BatchTooLarge { checkpoint, .. }
            | PassError::CheckpointTooLarge { checkpoint, .. }
            | PassError::ForbiddenMutation { checkpoint, .. }
            | PassError::Aborted { checkpoint, .. }
            | PassError::Hook { checkpoint, .. }
            | PassError::Store { checkpoint, .. } => checkpoint.as_deref(),
            PassError::InvalidLimits { .. }
            | PassError::CorruptCheckpoint { .. }
            | PassError::CheckpointOutOfPrefix { .. } => None,
        }
    }

    /// The table the pass was scanning, when known.
    pub fn table(&self) -> Option<&str> {
        match self {
            PassError::InvalidLimits { .. } => None,
            PassError::InvalidRecord { table, .. }
            | PassError::RecordTooLarge { table, .. }
            | PassError::BatchTooLarge { table, .. }
            | PassError::CheckpointTooLarge { table, .. }
            | PassError::ForbiddenMutation { table, .. }
            | PassError::CorruptCheckpoint { table, .. }
            | PassError::CheckpointOutOfPrefix { table, .. }
            | PassError::Aborted { table, .. }
            | PassError::Hook { table, .. }
            | PassError::Store { table, .. } => Some(table),
        }
    }

    /// The record key the error is about, if any.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            PassError::InvalidRecord { key, .. }
            | PassError::RecordTooLarge { key, .. }
            | PassError::BatchTooLarge { key, .. }
            | PassError::ForbiddenMutation { key, .. } => Some(key),
            _ => None,
        }
    }

    /// True when rerunning may succeed without changing data or limits (an abort, a store
    /// failure or a write conflict).
    pub fn is_retryable(&self) -> bool {
        matches!(self, PassError::Aborted { .. } | PassError::Store { .. })
    }
}
