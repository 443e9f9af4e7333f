//! `strata status`: the schema state of every managed table. Read-only: it does not even
//! initialize missing headers.

use crate::cmd::collections::{read_fence, survey};
use crate::cmd::verdict::{inspect_tables, summary, verdict};
use crate::db;
use crate::exit::catalog_failure;
use crate::exit::{CmdResult, UNSUPPORTED};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::validate::{TableState, TableStatus};

/// Arguments of `strata status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct StatusDoc<'a> {
    db: String,
    verdict: &'static str,
    tables: &'a [TableStatus],
    /// Collections with rows at an older payload version (not an error: they are upcast on
    /// read; the application's sweep rewrites them).
    sweep_pending: Vec<SweepPending>,
    /// Unfinished work: a copy into this store, a migration, cutover, rotation or sweep,
    /// each its own verdict and exit code ([`crate::cmd::unfinished::verdict`]).
    unfinished: &'a [crate::cmd::unfinished::Unfinished],
    /// Collections with rows stored below their retired versions (`retire`): every read
    /// refuses them (`strata verify` fails on them).
    retired_rows: Vec<RetiredRows>,
    /// Metadata outside the tables that makes the store unsupported (a corrupted database
    /// keyring), as `verify` reports it; absent when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    problems: Vec<String>,
    /// PostgreSQL: which servers answered (`status` reads the primary; the replica the
    /// URL names, when it answered, is listed too).
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<db::Hosts>,
}

/// Rows of one collection stored below its retired versions.
#[derive(Debug, Serialize)]
pub(crate) struct RetiredRows {
    collection: String,
    rows: u64,
    retired_below: Option<i32>,
}

/// One collection whose sweep is pending.
#[derive(Debug, Serialize)]
pub(crate) struct SweepPending {
    collection: String,
    rows: u64,
    rows_behind: u64,
    newest_version: Option<i32>,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let (store, hosts) = db::open_reading(db_path, db::Reads::Primary)?;
    let catalog = db::catalog(&store).map_err(catalog_failure)?;
    let (tables, _) = inspect_tables(&store, &catalog)?;
    let (mut code, mut word) = verdict(&tables);
    let shown = db::describe(db_path);
    let unfinished = crate::cmd::unfinished::find(&store, &catalog, &shown)?;
    // Only part of a copy's source: its tables' states say nothing of the store (the
    // copy beats every other verdict); other unfinished work replaces 0 and 3.
    (code, word) = crate::cmd::unfinished::combine(code, word, &unfinished);
    // Unreadable metadata, as in `verify` (and `repair` lists it): a database keyring that
    // does not decode (no sealed record can be opened), an unreadable fence (every write
    // under the policy is refused), baseline or sweep marker: the store is unsupported.
    let problems = policy_problems(&store, &catalog)?;
    if !problems.is_empty() {
        (code, word) = (UNSUPPORTED, "unsupported");
    }
    // Stale rows are a report, not an error: count them for readable collections.
    let fence = read_fence(&store)?;
    let mut pending = Vec::new();
    let mut retired = Vec::new();
    for (t, s) in catalog.tables().iter().zip(&tables) {
        if t.id() >= FIRST_COLLECTION_ID && s.state == TableState::Current {
            let survey = survey(&store, t, fence.as_ref(), None)?;
            if survey.rows_retired > 0 {
                retired.push(RetiredRows {
                    collection: survey.collection.clone(),
                    rows: survey.rows_retired,
                    retired_below: survey.retired_below,
                });
            }
            if survey.sweep_pending() {
                pending.push(SweepPending {
                    collection: survey.collection,
                    rows: survey.rows,
                    rows_behind: survey.rows_behind,
                    newest_version: survey.newest_version,
                });
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = StatusDoc {
            db: shown,
            verdict: word,
            tables: &tables,
            sweep_pending: pending,
            unfinished: &unfinished,
            retired_rows: retired,
            problems,
            hosts,
        };
        crate::json::emit(&mut out, &doc)?;
    } else {
        write_table(&mut out, &tables, &pending)?;
        for p in &problems {
            writeln!(out, "\n{p}")?;
        }
        writeln!(out, "\n{}", summary(code))?;
        for u in &unfinished {
            writeln!(out, "{}", u.line())?;
        }
        for r in &retired {
            writeln!(
                out,
                "{}",
                crate::cmd::collections::retired_line(&r.collection, r.rows, r.retired_below)
            )?;
        }
        if !pending.is_empty() {
            let names: Vec<&str> = pending.iter().map(|p| p.collection.as_str()).collect();
            writeln!(
                out,
                "sweep pending for {}: rows are stored at an older payload version (they are upcast on read; see `strata collections`, run the application's sweep to rewrite them)",
                names.join(", ")
            )?;
        }
        if let Some(h) = &hosts {
            writeln!(out, "{}", h.line())?;
        }
    }
    Ok(code)
}

/// Prints the status table; a collection in `pending` gets a "sweep pending" note.
pub(crate) fn write_table(
    out: &mut impl Write,
    tables: &[TableStatus],
    pending: &[SweepPending],
) -> std::io::Result<()> {
    let name_w = tables
        .iter()
        .map(|t| t.table.len())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(
        out,
        "{:<name_w$}  {:>3}  {:>5}  {:>7}  {:<7}  NOTE",
        "TABLE", "ID", "FOUND", "CURRENT", "STATE"
    )?;
    for t in tables {
        let found = t
            .found_version
            .map_or_else(|| "-".to_string(), |v| v.to_string());
        let note = match &t.state {
            TableState::Empty => "header will be initialized on open".to_string(),
            TableState::Current => match pending.iter().find(|p| p.collection == t.table) {
                Some(p) => format!(
                    "sweep pending: {} of {} rows below payload v{}",
                    p.rows_behind,
                    p.rows,
                    p.newest_version.unwrap_or_default()
                ),
                None => String::new(),
            },
            TableState::Legacy => "data without a header".to_string(),
            TableState::Older => "migration required".to_string(),
            TableState::Future => "written by a newer build".to_string(),
            TableState::Corrupt { reason } => reason.clone(),
        };
        let line = format!(
            "{:<name_w$}  {:>3}  {:>5}  {:>7}  {:<7}  {}",
            t.table,
            t.table_id,
            found,
            t.current_version,
            t.state.label(),
            note
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Unreadable policy and sweep metadata: the fence record, the database keyring, each
/// collection's persisted baseline and sweep marker (`verify` and `status` exit 4 on any).
pub(crate) fn policy_problems(
    store: &strata_store::Store,
    catalog: &strata::Catalog,
) -> Result<Vec<String>, crate::exit::Failure> {
    let mut problems = Vec::new();
    if let Err(e @ strata::policy::PolicyError::Corrupted { .. }) =
        strata::policy::Fence::read(store)
    {
        problems.push(crate::exit::render(&e));
    }
    // The database keyring decodes without the key; without it no sealed record opens.
    if let Err(e @ strata::seal::SealError::CorruptedKeyring { .. }) =
        strata::seal::Keyring::database().read(store)
    {
        problems.push(e.to_string());
    }
    for t in catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= strata::layout::catalog::FIRST_COLLECTION_ID)
    {
        if let Some((Err(e), _)) = strata::policy::Baseline::read(store, t.name())? {
            problems.push(e.to_string());
        }
        if let Some(bytes) =
            strata_store::KvRead::get(store, &strata::layout::keys::sweep_key(t.name()))?
        {
            if let Err(e) = strata::ops::sweep::SweepMarker::decode(t.name(), &bytes) {
                problems.push(e.to_string());
            }
        }
    }
    Ok(problems)
}
