//! The store's verdict from its tables' states (what `status`, `verify`, `collections`
//! and `demo` report and exit with), beside unfinished work ([`crate::cmd::unfinished`]).

use crate::exit::{Failure, MIGRATION_REQUIRED, OK, UNSUPPORTED};
use strata::migrate::{check_checkpoint, MigrateError, Registry};
use strata::validate::{inspect, status_error, TableState, TableStatus};
use strata::Catalog;
use strata_store::Store;

/// Exit code for a set of statuses: 4 beats 3 beats 0.
pub(crate) fn verdict(tables: &[TableStatus]) -> (u8, &'static str) {
    let bad = |pred: fn(&TableState) -> bool| tables.iter().any(|t| pred(&t.state));
    if bad(|s| matches!(s, TableState::Future | TableState::Corrupt { .. })) {
        (UNSUPPORTED, "unsupported")
    } else if bad(|s| matches!(s, TableState::Legacy | TableState::Older)) {
        (MIGRATION_REQUIRED, "migration_required")
    } else {
        (OK, "ok")
    }
}

/// The summary line of a store's verdict `code` (as [`verdict`] and unfinished work
/// give it).
pub(crate) fn summary(code: u8) -> &'static str {
    crate::cmd::unfinished::summary(code).unwrap_or(match code {
        OK => "every table is current or empty",
        MIGRATION_REQUIRED => {
            "a migration is required: run `strata migrate` (it is resumable and safe to interrupt)"
        }
        _ => "this build cannot open the store: future or corrupt schema metadata (`strata repair` lists what it can fix)",
    })
}

/// Every table's state as [`inspect`] finds it from its header, with a table whose
/// migration checkpoint would stop `strata migrate` (corrupt, outside or past the table,
/// stale, another step) reported as corrupt — what `status` says, `migrate` does — and
/// one message per table that does not pass.
pub(crate) fn inspect_tables(
    store: &Store,
    catalog: &Catalog,
) -> Result<(Vec<TableStatus>, Vec<String>), Failure> {
    let mut tables = inspect(store, catalog)?;
    let mut problems = Vec::new();
    let registry = Registry::certification(catalog);
    for (s, tm) in tables.iter_mut().zip(registry.tables()) {
        if !matches!(s.state, TableState::Future | TableState::Corrupt { .. }) {
            match check_checkpoint(store, tm) {
                Err(e) if e.is_checkpoint() => {
                    problems.push(e.to_string());
                    s.state = TableState::Corrupt {
                        reason: e.to_string(),
                    };
                    continue;
                }
                Err(MigrateError::Store { source, .. }) => return Err(source.into()),
                _ => {}
            }
        }
        problems.extend(status_error(s).map(|e| crate::exit::render(&e)));
    }
    Ok((tables, problems))
}
