//! `strata retire <collection> --below K [--dry-run] [--json]`: proves that no row of the
//! collection is stored below payload version K and records it (`__nx/retired/<collection>`),
//! so the application may drop its upcast steps below K (see `strata::ops::retire`).

use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::Path;
use strata::ops::retire::{retire, RetireError};

/// Arguments of `strata retire`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The collection.
    collection: String,
    /// Retire every payload version below this one (2 or more).
    #[arg(long, value_name = "K")]
    below: i32,
    /// Prove without recording (opens the store read-only).
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    // Refusals are decided read-only first: a store that cannot be retired is never
    // opened for writing. Only part of a copy's source proves nothing about the rows
    // below a version (the rest may not have come yet): refused, dry run or not.
    let reading = db::open_for_reading(db_path)?;
    crate::cmd::unfinished::refuse_partial_copy(&reading, &db::describe(db_path), "strata retire")?;
    let store = if args.dry_run {
        reading
    } else {
        retire(&reading, &args.collection, args.below, true).map_err(refusal)?;
        drop(reading);
        db::open_existing(db_path)?
    };
    let report = retire(&store, &args.collection, args.below, args.dry_run).map_err(refusal)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = serde_json::json!({
            "db": db::describe(db_path),
            "collection": report.collection,
            "below": report.below,
            "previous": report.previous,
            "rows": report.rows,
            "versions": report.versions,
            "recorded": report.recorded,
            "dry_run": args.dry_run,
        });
        crate::json::emit(&mut out, &doc)?;
        return Ok(OK);
    }
    let versions: Vec<String> = report
        .versions
        .iter()
        .map(|(v, n)| format!("v{v}: {n}"))
        .collect();
    let seen = if versions.is_empty() {
        "no rows".to_string()
    } else {
        versions.join(", ")
    };
    let what = if args.dry_run {
        "can be retired (dry run: nothing recorded)"
    } else if report.recorded {
        "retired"
    } else {
        "were already retired"
    };
    writeln!(
        out,
        "{}: versions below v{} {what}; {} row(s) checked ({seen}). The application may now declare `retired_below({})` and drop its steps below v{}.",
        report.collection, report.below, report.rows, report.below, report.below
    )?;
    Ok(OK)
}

fn refusal(e: RetireError) -> Failure {
    match &e {
        // A Numax sync table's name is no collection's (collections are recorded under
        // their own names, sync tables are fixed): say so rather than "not recorded".
        RetireError::UnknownCollection { collection }
            if strata::numax::catalog().get(collection).is_some() =>
        {
            Failure::error(format!(
                "`{collection}` is a Numax sync table, not a collection: retire applies to the payload versions of a collection (`strata collections` lists them)"
            ))
        }
        _ => Failure::error(e),
    }
}
