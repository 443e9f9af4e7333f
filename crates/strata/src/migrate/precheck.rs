//! The read-only checks a migration runs on one table's metadata before it writes
//! anything: the schema header (corrupt, future, too old, another table's) and the
//! migration checkpoint (corrupt, out of the table prefix, past the table's last record,
//! stale, another step). [`check_checkpoint`] runs them alone (`strata status`); the
//! migrator runs them before every step.

use super::{MigrateError, MigrationCheckpoint, RecordStep, TableMigrations};
use crate::catalog::TableDef;
use crate::header::{checkpoint_key, header_key, SchemaHeader};
use strata_store::{escape_key, KvRead, ScanLimits, StoreError};

/// What a table's migration checkpoint says, as [`check_checkpoint`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckpointCheck {
    /// No checkpoint: nothing in progress.
    Absent,
    /// An interrupted step the next migration resumes.
    Resumable {
        /// The step's `from` version.
        from: u16,
        /// The step's `to` version.
        to: u16,
        /// The last processed key it resumes after (`None`: from the beginning).
        cursor: Option<Vec<u8>>,
    },
}

/// The read-only checks a migration runs on one table's metadata before writing anything:
/// the header (corrupt, future, too old) and the checkpoint (corrupt, out of the table
/// prefix, past the table's last record, stale, another step). `Ok` says whether a step
/// is in progress and where it resumes; `Err` is the error the migration would stop with.
pub fn check_checkpoint<S: KvRead + ?Sized>(
    store: &S,
    tm: &TableMigrations,
) -> Result<CheckpointCheck, MigrateError> {
    let t = tm.table();
    let store_err = |source: StoreError| MigrateError::Store {
        table: t.name().to_string(),
        source,
    };
    let version = match store.get(&header_key(t.name())).map_err(store_err)? {
        Some(b) => read_header(t, &b)?,
        None => 0,
    };
    if version > t.current_version() {
        return Err(MigrateError::FutureVersion {
            table: t.name().to_string(),
            found: version,
            current: t.current_version(),
        });
    }
    let ckey = checkpoint_key(t.name());
    let Some(bytes) = store.get(&ckey).map_err(store_err)? else {
        return Ok(CheckpointCheck::Absent);
    };
    if version == t.current_version() {
        return Err(MigrateError::StaleCheckpoint {
            table: t.name().to_string(),
            version,
            step: MigrationCheckpoint::decode(&bytes)
                .ok()
                .map(|c| (c.from, c.to)),
        });
    }
    if version < tm.oldest() {
        return Err(MigrateError::TooOld {
            table: t.name().to_string(),
            found: version,
            oldest: tm.oldest(),
        });
    }
    match tm.step_from(version) {
        Some(step) => Ok(CheckpointCheck::Resumable {
            from: step.from(),
            to: step.to(),
            cursor: precheck_checkpoint(store, t, step, &ckey, &bytes)?,
        }),
        None => Err(MigrateError::RegistryGap {
            table: t.name().to_string(),
            missing: version,
        }),
    }
}

/// Decodes a header and checks its table id.
pub(super) fn read_header(t: &TableDef, bytes: &[u8]) -> Result<u16, MigrateError> {
    let h = SchemaHeader::decode(bytes).map_err(|e| MigrateError::CorruptHeader {
        table: t.name().to_string(),
        reason: crate::pass::RecordError::from_error(e),
    })?;
    if h.table_id != t.id() {
        return Err(MigrateError::CorruptHeader {
            table: t.name().to_string(),
            reason: crate::pass::RecordError::new(format!(
                "header table id {} does not match table id {}",
                h.table_id,
                t.id()
            )),
        });
    }
    Ok(h.version)
}

/// The checks run before every step on an existing checkpoint: it decodes, names this
/// table, names this step, its cursor lies inside the table prefix and not past the
/// table's last record (a cursor there would make the step validate nothing and write the
/// header). Returns the cursor.
pub(super) fn precheck_checkpoint<S: KvRead + ?Sized>(
    store: &S,
    t: &TableDef,
    step: &RecordStep,
    key: &[u8],
    bytes: &[u8],
) -> Result<Option<Vec<u8>>, MigrateError> {
    let corrupt = |reason: crate::pass::RecordError| MigrateError::CorruptCheckpoint {
        table: t.name().to_string(),
        key: key.to_vec(),
        reason,
    };
    let c = MigrationCheckpoint::decode(bytes)
        .map_err(|e| corrupt(crate::pass::RecordError::from_error(e)))?;
    if c.table_id != t.id() {
        return Err(corrupt(crate::pass::RecordError::new(format!(
            "checkpoint table id {} does not match table id {}",
            c.table_id,
            t.id()
        ))));
    }
    if (c.from, c.to) != (step.from(), step.to()) {
        return Err(MigrateError::CheckpointMismatch {
            table: t.name().to_string(),
            found_from: c.from,
            found_to: c.to,
            expected_from: step.from(),
            expected_to: step.to(),
        });
    }
    if c.cursor.is_empty() {
        return Ok(None);
    }
    if !c.cursor.starts_with(t.prefix()) {
        return Err(MigrateError::CheckpointOutOfPrefix {
            table: t.name().to_string(),
            cursor: c.cursor,
            prefix: t.prefix().to_vec(),
        });
    }
    let store_err = |source: StoreError| MigrateError::Store {
        table: t.name().to_string(),
        source,
    };
    if !record_at_or_after(store, t.prefix(), &c.cursor).map_err(store_err)? {
        return Err(corrupt(crate::pass::RecordError::new(format!(
            "its cursor `{}` lies past the last record of the table (no record at or after it), so resuming would validate nothing",
            escape_key(&c.cursor)
        ))));
    }
    Ok(Some(c.cursor))
}

/// True when a key of `prefix` equal to or greater than `cursor` exists (`cursor` lies
/// inside `prefix`). Reads no value larger than 1 MiB: a record over that budget is proof
/// enough.
fn record_at_or_after<S: KvRead + ?Sized>(
    store: &S,
    prefix: &[u8],
    cursor: &[u8],
) -> Result<bool, StoreError> {
    // Every key starting with the cursor is at or after it.
    if store.prefix_exists(cursor)? {
        return Ok(true);
    }
    match store.scan(prefix, Some(cursor), ScanLimits::new(1, 1 << 20)?) {
        Ok(page) => Ok(!page.records.is_empty()),
        Err(StoreError::RecordTooLarge { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}
