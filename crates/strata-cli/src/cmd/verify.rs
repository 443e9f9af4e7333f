//! `strata verify`: a read-only full certification scan of every record of every managed
//! table (current tables too). Exit 0 when every record decodes; otherwise exit 1 with the
//! first bad table and key.

use crate::cmd::migrate::Reporter;
use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use strata::migrate::{verify, VerifyReport};
use strata::pass::PassLimits;

/// Arguments of `strata verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON summary document on stdout.
    #[arg(long)]
    json: bool,
    /// Fail (exit 1) when the store differs from the manifest its last bulk operation
    /// (`copy`) recorded: use it on a store nothing wrote since, e.g. a restored copy.
    #[arg(long)]
    strict_manifest: bool,
}

/// The `--json` document (format 1).
#[derive(Debug, Serialize)]
struct VerifyDoc<'a> {
    format: u32,
    db: String,
    #[serde(flatten)]
    report: &'a VerifyReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<crate::cmd::copy::ManifestCheck>,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let store = db::open_existing(db_path)?;
    let catalog = db::catalog(&store).map_err(Failure::error)?;
    let mut progress = Reporter::new(&store, &catalog)?;
    let result = verify(&store, &catalog, PassLimits::default(), |p| {
        progress.verify_progress(p)
    });
    progress.finish();
    let report = result.map_err(Failure::error)?;
    let manifest = crate::cmd::copy::check_manifest(&store)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = VerifyDoc {
            format: 1,
            db: db::describe(db_path),
            report: &report,
            manifest: manifest.clone(),
        };
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        let total: u64 = report.tables.iter().map(|t| t.records).sum();
        for t in &report.tables {
            writeln!(out, "{:<26} {:>9} records ok", t.table, t.records)?;
        }
        writeln!(
            out,
            "\nverified {total} records in {} tables: every record decodes",
            report.tables.len()
        )?;
        if let Some(m) = &manifest {
            writeln!(out, "{}", m.describe())?;
        }
    }
    out.flush()?;
    match manifest {
        Some(m) if args.strict_manifest && !m.matches => Err(Failure::error(
            crate::cmd::copy::CopyError::ManifestDiffers {
                operation: m.operation,
                records: m.records,
                now: m.now_records,
            },
        )),
        _ => Ok(OK),
    }
}
