//! The sync layer's one error type.

use strata::numax::decode::DecodeError;
use strata::validate::ValidationError;
use strata_store::StoreError;

/// Errors of the sync store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// Startup validation refused the store (legacy, older, future or corrupt schema).
    /// Nothing was hydrated and nothing was written.
    #[error(transparent)]
    Schema {
        /// The validation error (names the table and versions).
        source: ValidationError,
    },
    /// A stored record does not decode (or a value failed to encode).
    #[error(transparent)]
    Decode {
        /// The decode error (names the table and key).
        source: DecodeError,
    },
    /// The store failed.
    #[error(transparent)]
    Store {
        /// The store error.
        source: StoreError,
    },
    /// An op was refused before anything was written.
    #[error("op `{op_id}` is invalid: {reason}; fix the op and apply it again")]
    InvalidOp {
        /// The op id (possibly empty).
        op_id: String,
        /// Why.
        reason: String,
    },
    /// A write would store a record larger than the byte budget its readers use
    /// (hydration scans, `strata migrate`): it could not be read back. Nothing was
    /// written.
    #[error("sync write refused: record `{key}` of table `{table}` would be {size} bytes (key + value), more than the read byte budget of {limit} bytes; nothing was written, store a smaller value")]
    RecordTooLarge {
        /// The table of the record.
        table: &'static str,
        /// The record's key (escaped).
        key: String,
        /// Key length plus value length.
        size: usize,
        /// The limit ([`crate::MAX_RECORD_BYTES`] or a smaller scan budget).
        limit: usize,
    },
    /// The store refused a write because it is not empty / not legacy, or another
    /// precondition of a helper does not hold.
    #[error("{reason}")]
    Refused {
        /// Why, naming the table or key and what to do.
        reason: String,
    },
}

impl SyncError {
    /// True when opening failed because the store needs `strata migrate`.
    pub fn is_migration_required(&self) -> bool {
        matches!(self, SyncError::Schema { source } if source.is_migration_required())
    }

    /// True when opening failed on a future or corrupt schema header.
    pub fn is_unsupported_or_corrupt(&self) -> bool {
        matches!(self, SyncError::Schema { source } if source.is_unsupported_or_corrupt())
    }
}

impl From<ValidationError> for SyncError {
    fn from(source: ValidationError) -> Self {
        match source {
            ValidationError::Store(source) => SyncError::Store { source },
            source => SyncError::Schema { source },
        }
    }
}

impl From<DecodeError> for SyncError {
    fn from(source: DecodeError) -> Self {
        SyncError::Decode { source }
    }
}

impl From<StoreError> for SyncError {
    fn from(source: StoreError) -> Self {
        SyncError::Store { source }
    }
}
