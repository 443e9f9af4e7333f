//! The migration layer's error type.

use crate::pass::PassError;
use strata_store::{escape_key, StoreError};

/// Why a migration (or `verify`) stopped. Nothing of the failing batch was written; every
/// batch committed before it is durable and the next run resumes after it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The registry of a table does not start at its oldest supported version.
    #[error("migration registry of `{table}` starts at version {first}, but the oldest supported version is {oldest}; register a step from version {oldest}")]
    RegistryStart {
        /// The table.
        table: String,
        /// The `from` of its first step.
        first: u16,
        /// The oldest supported version.
        oldest: u16,
    },
    /// A step does not advance by exactly one version.
    #[error("migration step {from} -> {to} of `{table}` does not advance by exactly one version; register N -> N+1 steps only")]
    RegistryNotSequential {
        /// The table.
        table: String,
        /// The step's `from`.
        from: u16,
        /// The step's `to`.
        to: u16,
    },
    /// Two steps start at one version.
    #[error("migration registry of `{table}` has two steps from version {from}; register each step once")]
    RegistryDuplicate {
        /// The table.
        table: String,
        /// The duplicated `from`.
        from: u16,
    },
    /// A version has no step leading away from it.
    #[error("migration registry of `{table}` has a gap: no step from version {missing}; register the missing step")]
    RegistryGap {
        /// The table.
        table: String,
        /// The version with no step.
        missing: u16,
    },
    /// The last step does not reach the current version.
    #[error("migration registry of `{table}` ends at version {last}, but the current version is {current}; register the remaining steps")]
    RegistryEnd {
        /// The table.
        table: String,
        /// Where the steps end.
        last: u16,
        /// The table's current version.
        current: u16,
    },
    /// One table registered twice.
    #[error(
        "table `{table}` is registered twice in the migration registry; register each table once"
    )]
    RegistryDuplicateTable {
        /// The table.
        table: String,
    },
    /// The schema header cannot be trusted.
    #[error("corrupted schema metadata for {table}: {reason}; restore `__nx/schema/{table}` from a backup")]
    CorruptHeader {
        /// The table.
        table: String,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// The store was written by a newer build.
    #[error("unsupported future schema for {table}: found version {found}, current version is {current}; upgrade strata to migrate this store")]
    FutureVersion {
        /// The table.
        table: String,
        /// Version found.
        found: u16,
        /// Version this build writes.
        current: u16,
    },
    /// The store is older than the oldest version this build can migrate.
    #[error("schema for {table} is at version {found}, older than the oldest version this build migrates ({oldest}); migrate with an older release first")]
    TooOld {
        /// The table.
        table: String,
        /// Version found.
        found: u16,
        /// Oldest supported version.
        oldest: u16,
    },
    /// The checkpoint cannot be decoded (or names another table id).
    #[error("corrupted migration checkpoint `{}`: {reason}; restore it from a backup or delete it to restart this table's step from the beginning", escape_key(.key))]
    CorruptCheckpoint {
        /// The table.
        table: String,
        /// The checkpoint key.
        key: Vec<u8>,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the decode error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// The checkpoint's cursor lies outside the table's prefix.
    #[error("migration checkpoint of {table} points at `{}`, outside the table prefix `{}`; delete `__nx/migration/{table}` to restart this table's step from the beginning", escape_key(.cursor), escape_key(.prefix))]
    CheckpointOutOfPrefix {
        /// The table.
        table: String,
        /// The cursor found.
        cursor: Vec<u8>,
        /// The table prefix.
        prefix: Vec<u8>,
    },
    /// A checkpoint remains on a table whose header is already current.
    #[error("stale migration checkpoint for {table}: the table is already at the current version {version}; delete `__nx/migration/{table}` after verifying the table")]
    StaleCheckpoint {
        /// The table.
        table: String,
        /// The (current) version in the header.
        version: u16,
        /// The step the checkpoint names (`from`, `to`), when it decodes.
        step: Option<(u16, u16)>,
    },
    /// The checkpoint belongs to another step than the one the header calls for.
    #[error("migration checkpoint of {table} is for step {found_from} -> {found_to}, but the registered step is {expected_from} -> {expected_to}; restore the matching release or delete `__nx/migration/{table}`")]
    CheckpointMismatch {
        /// The table.
        table: String,
        /// The checkpoint's `from`.
        found_from: u16,
        /// The checkpoint's `to`.
        found_to: u16,
        /// The step the header calls for: `from`.
        expected_from: u16,
        /// The step the header calls for: `to`.
        expected_to: u16,
    },
    /// `verify` found a record that does not decode.
    #[error("record `{}` of table `{table}` does not decode: {reason}; repair or remove it (verify is read-only and changed nothing)", escape_key(.key))]
    VerifyFailed {
        /// The table.
        table: String,
        /// The record's full key.
        key: Vec<u8>,
        /// The decoder's reason.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// The bulk pass stopped (invalid record, budget, forbidden mutation, abort, store).
    #[error(transparent)]
    Pass(#[from] PassError),
    /// Reading a table failed during the read-only [`verify`](crate::migrate::verify)
    /// scan (nothing is written by it, so nothing needs resuming).
    #[error("store error while verifying `{table}`; nothing was written, check the store and verify again")]
    VerifyStore {
        /// The table.
        table: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The store failed outside a pass.
    #[error("store error while migrating {table}; rerun to resume")]
    Store {
        /// The table.
        table: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl MigrateError {
    /// The table the error is about, if any.
    pub fn table(&self) -> Option<&str> {
        match self {
            MigrateError::RegistryStart { table, .. }
            | MigrateError::RegistryNotSequential { table, .. }
            | MigrateError::RegistryDuplicate { table, .. }
            | MigrateError::RegistryGap { table, .. }
            | MigrateError::RegistryEnd { table, .. }
            | MigrateError::RegistryDuplicateTable { table }
            | MigrateError::CorruptHeader { table, .. }
            | MigrateError::FutureVersion { table, .. }
            | MigrateError::TooOld { table, .. }
            | MigrateError::CorruptCheckpoint { table, .. }
            | MigrateError::CheckpointOutOfPrefix { table, .. }
            | MigrateError::StaleCheckpoint { table, .. }
            | MigrateError::CheckpointMismatch { table, .. }
            | MigrateError::VerifyFailed { table, .. }
            | MigrateError::VerifyStore { table, .. }
            | MigrateError::Store { table, .. } => Some(table),
            MigrateError::Pass(p) => p.table(),
        }
    }

    /// The record key the error is about (an invalid or oversized record), if any.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            MigrateError::Pass(p) => p.key(),
            MigrateError::VerifyFailed { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The last durable checkpoint cursor of the step that failed, if the failure happened
    /// inside a pass that had one.
    pub fn checkpoint(&self) -> Option<&[u8]> {
        match self {
            MigrateError::Pass(p) => p.checkpoint(),
            _ => None,
        }
    }

    /// True for an invalid migration registry (a programming error, found before anything
    /// ran).
    pub fn is_registry(&self) -> bool {
        matches!(
            self,
            MigrateError::RegistryStart { .. }
                | MigrateError::RegistryNotSequential { .. }
                | MigrateError::RegistryDuplicate { .. }
                | MigrateError::RegistryGap { .. }
                | MigrateError::RegistryEnd { .. }
                | MigrateError::RegistryDuplicateTable { .. }
        )
    }

    /// True for a migration checkpoint that stops the migration: corrupt, pointing outside
    /// or past the table, stale (the table is already current) or for another step.
    pub fn is_checkpoint(&self) -> bool {
        matches!(
            self,
            MigrateError::CorruptCheckpoint { .. }
                | MigrateError::CheckpointOutOfPrefix { .. }
                | MigrateError::StaleCheckpoint { .. }
                | MigrateError::CheckpointMismatch { .. }
                | MigrateError::Pass(PassError::CorruptCheckpoint { .. })
                | MigrateError::Pass(PassError::CheckpointOutOfPrefix { .. })
        )
    }

    /// True for future or corrupt metadata (exit code 4 of the CLI).
    pub fn is_unsupported_or_corrupt(&self) -> bool {
        matches!(
            self,
            MigrateError::CorruptHeader { .. }
                | MigrateError::FutureVersion { .. }
                | MigrateError::CorruptCheckpoint { .. }
                | MigrateError::CheckpointOutOfPrefix { .. }
                | MigrateError::StaleCheckpoint { .. }
                | MigrateError::CheckpointMismatch { .. }
                | MigrateError::Pass(PassError::CorruptCheckpoint { .. })
                | MigrateError::Pass(PassError::CheckpointOutOfPrefix { .. })
        )
    }
}
