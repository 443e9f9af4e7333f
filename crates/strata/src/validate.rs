//! Startup validation: map every managed table to one of the six states of the Numax
//! schema-versioning seed, and initialize missing headers only when all tables pass.
//!
//! | found | data | state | result |
//! |---|---|---|---|
//! | no header | no | [`TableState::Empty`] | header written (one batch for all tables) |
//! | current header | any | [`TableState::Current`] | continue |
//! | no header | yes | [`TableState::Legacy`] | [`ValidationError::Legacy`] |
//! | older header (incl. v0) | any | [`TableState::Older`] | [`ValidationError::MigrationRequired`] |
//! | newer header | any | [`TableState::Future`] | [`ValidationError::Unsupported`] |
//! | bad magic / length / id | any | [`TableState::Corrupt`] | [`ValidationError::Corrupted`] |

use crate::catalog::{Catalog, TableDef};
use crate::header::{header_key, SchemaHeader};
use serde::Serialize;
use strata_store::{Batch, KvRead, KvWrite, StoreError};

/// The state of one managed table as found in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum TableState {
    /// No header and no data: a header will be initialized.
    Empty,
    /// The header carries the current version.
    Current,
    /// Data without a header: an explicit migration (v0→v1) is required.
    Legacy,
    /// The header carries an older version (0 included): a migration is required.
    Older,
    /// The header carries a version newer than this build understands.
    Future,
    /// The header is not a valid header for this table.
    Corrupt {
        /// What is wrong with it.
        reason: String,
    },
}

impl TableState {
    /// A short lowercase label (`empty`, `current`, `legacy`, `older`, `future`, `corrupt`).
    pub fn label(&self) -> &'static str {
        match self {
            TableState::Empty => "empty",
            TableState::Current => "current",
            TableState::Legacy => "legacy",
            TableState::Older => "older",
            TableState::Future => "future",
            TableState::Corrupt { .. } => "corrupt",
        }
    }
}

/// What startup validation found for one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableStatus {
    /// The table name.
    pub table: String,
    /// The table id from the catalog.
    pub table_id: u16,
    /// The version found in the header (`None` without a valid header).
    pub found_version: Option<u16>,
    /// The version this build expects.
    pub current_version: u16,
    /// True when at least one record exists under the table prefix.
    pub has_data: bool,
    /// The classified state.
    #[serde(flatten)]
    pub state: TableState,
}

/// Why a store cannot be opened as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// Data without a header.
    #[error("legacy unversioned data found in {table}; an explicit migration is required (run the migrator)")]
    Legacy {
        /// The table.
        table: String,
    },
    /// An older header.
    #[error("schema for {table} is at version {found}, current version is {current}; an explicit migration is required (run the migrator)")]
    MigrationRequired {
        /// The table.
        table: String,
        /// Version found.
        found: u16,
        /// Version expected.
        current: u16,
    },
    /// A newer header.
    #[error("unsupported future schema for {table}: found version {found}, current version is {current}; upgrade strata to open this store")]
    Unsupported {
        /// The table.
        table: String,
        /// Version found.
        found: u16,
        /// Version expected.
        current: u16,
    },
    /// An invalid header.
    #[error("corrupted schema metadata for {table}: {reason}; restore `__nx/schema/{table}` from a backup")]
    Corrupted {
        /// The table.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// The store failed.
    #[error("store error during schema validation")]
    Store(#[from] StoreError),
}

impl ValidationError {
    /// True for legacy and older tables: `strata migrate` can fix the store.
    pub fn is_migration_required(&self) -> bool {
        matches!(
            self,
            ValidationError::Legacy { .. } | ValidationError::MigrationRequired { .. }
        )
    }

    /// True for future and corrupt metadata: this build must not touch the store.
    pub fn is_unsupported_or_corrupt(&self) -> bool {
        matches!(
            self,
            ValidationError::Unsupported { .. } | ValidationError::Corrupted { .. }
        )
    }
}

/// Classifies one table without writing anything.
pub fn inspect_table(store: &impl KvRead, table: &TableDef) -> Result<TableStatus, StoreError> {
    let header = store.get(&header_key(table.name()))?;
    let has_data = store.prefix_exists(table.prefix())?;
    let (found_version, state) = match header {
        None if has_data => (None, TableState::Legacy),
        None => (None, TableState::Empty),
        Some(bytes) => match SchemaHeader::decode(&bytes) {
            Err(e) => (
                None,
                TableState::Corrupt {
                    reason: e.to_string(),
                },
            ),
            Ok(h) if h.table_id != table.id() => (
                Some(h.version),
                TableState::Corrupt {
                    reason: format!(
                        "header table id {} does not match table id {}",
                        h.table_id,
                        table.id()
                    ),
                },
            ),
            Ok(h) if h.version == table.current_version() => (Some(h.version), TableState::Current),
            Ok(h) if h.version < table.current_version() => (Some(h.version), TableState::Older),
            Ok(h) => (Some(h.version), TableState::Future),
        },
    };
    Ok(TableStatus {
        table: table.name().to_string(),
        table_id: table.id(),
        found_version,
        current_version: table.current_version(),
        has_data,
        state,
    })
}

/// Classifies every table of the catalog without writing anything (what `strata status`
/// shows).
pub fn inspect(store: &impl KvRead, catalog: &Catalog) -> Result<Vec<TableStatus>, StoreError> {
    catalog
        .tables()
        .iter()
        .map(|t| inspect_table(store, t))
        .collect()
}

/// The error a table status maps to, if any.
pub fn status_error(s: &TableStatus) -> Option<ValidationError> {
    let table = s.table.clone();
    match &s.state {
        TableState::Empty | TableState::Current => None,
        TableState::Legacy => Some(ValidationError::Legacy { table }),
        TableState::Older => Some(ValidationError::MigrationRequired {
            table,
            found: s.found_version.unwrap_or(0),
            current: s.current_version,
        }),
        TableState::Future => Some(ValidationError::Unsupported {
            table,
            found: s.found_version.unwrap_or(0),
            current: s.current_version,
        }),
        TableState::Corrupt { reason } => Some(ValidationError::Corrupted {
            table,
            reason: reason.clone(),
        }),
    }
}

/// What a successful validation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationReport {
    /// Every table's status before initialization.
    pub tables: Vec<TableStatus>,
    /// Names of tables whose header was initialized.
    pub initialized: Vec<String>,
}

/// Startup validation: classifies every table; when all are current or empty, writes the
/// missing headers of the empty ones in ONE atomic batch (each guarded by an "absent"
/// precondition, so a concurrent initializer cannot be overwritten). On the first table
/// that does not pass, returns its error and writes nothing. Never migrates.
pub fn validate_and_init<S: KvRead + KvWrite>(
    store: &S,
    catalog: &Catalog,
) -> Result<ValidationReport, ValidationError> {
    // A concurrent initializer can make our guarded batch conflict; re-validate then.
    let mut attempts = 0;
    loop {
        let tables = inspect(store, catalog)?;
        if let Some(err) = tables.iter().find_map(status_error) {
            return Err(err);
        }
        let mut batch = Batch::new();
        let mut initialized = Vec::new();
        for (s, t) in tables.iter().zip(catalog.tables()) {
            if s.state == TableState::Empty {
                let key = header_key(t.name());
                batch = batch.require_absent(key.clone()).set(
                    key,
                    SchemaHeader::new(t.current_version(), t.id())
                        .encode()
                        .to_vec(),
                );
                initialized.push(t.name().to_string());
            }
        }
        if batch.is_empty() {
            return Ok(ValidationReport {
                tables,
                initialized,
            });
        }
        match store.apply(batch) {
            Ok(()) => {
                tracing::info!(tables = ?initialized, "initialized schema headers");
                return Ok(ValidationReport {
                    tables,
                    initialized,
                });
            }
            Err(e) if e.is_conflict() && attempts < 3 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}
