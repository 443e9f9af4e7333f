//! `strata verify`: a read-only superset of `strata status`. It first checks the metadata
//! `status` checks (the catalog of collections and every table's schema header) and
//! fails with the same exit codes (4 future or corrupt, 3 migration required), plus the
//! fence record, the persisted schema baselines and the sweep markers (4 when one is
//! unreadable); then it certifies every record of every managed table (current tables
//! too). Exit 0 when all of that passes; exit 1 with the first bad table and key when a
//! record does not decode.

use crate::cmd::migrate::Reporter;
use crate::cmd::status::{inspect_tables, verdict};
use crate::db;
use crate::exit::{CmdResult, Failure, ERROR, MIGRATION_REQUIRED, UNSUPPORTED};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use strata::collection::layout::{sweep_key, FIRST_COLLECTION_ID};
use strata::migrate::{verify, VerifyReport};
use strata::pass::PassLimits;
use strata::payload::SweepMarker;
use strata::policy::{Baseline, Fence};
use strata::{Catalog, CollectionError};
use strata_store::{KvRead, Store};

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
    /// `ok`, `migration_required` or `unsupported` (as `strata status`).
    verdict: &'static str,
    /// Every metadata problem found (empty when the verdict is `ok`).
    problems: &'a [String],
    /// The record certification (absent when unsupported metadata stopped it).
    #[serde(flatten)]
    report: Option<&'a VerifyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<crate::cmd::copy::ManifestCheck>,
}

/// The exit code of a catalog that cannot be read: 4 for a corrupt catalog record (as
/// corrupt metadata), 1 for anything else (a store error).
pub(crate) fn catalog_failure(e: Box<dyn std::error::Error + Send + Sync>) -> Failure {
    let corrupt = matches!(
        e.downcast_ref::<CollectionError>(),
        Some(CollectionError::CorruptCatalog { .. })
    );
    Failure {
        code: if corrupt { UNSUPPORTED } else { ERROR },
        error: e,
    }
}

/// Unreadable policy and sweep metadata: the fence record, each collection's persisted
/// baseline and sweep marker.
fn policy_problems(store: &Store, catalog: &Catalog) -> Result<Vec<String>, Failure> {
    let mut problems = Vec::new();
    if let Err(e @ strata::PolicyError::Corrupted { .. }) = Fence::read(store) {
        problems.push(e.to_string());
    }
    for t in catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= FIRST_COLLECTION_ID)
    {
        if let Some((Err(e), _)) = Baseline::read(store, t.name())? {
            problems.push(e.to_string());
        }
        if let Some(bytes) = store.get(&sweep_key(t.name()))? {
            if let Err(e) = SweepMarker::decode(t.name(), &bytes) {
                problems.push(e.to_string());
            }
        }
    }
    Ok(problems)
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let store = db::open_existing(db_path)?;
    let catalog = db::catalog(&store).map_err(catalog_failure)?;
    // What `strata status` checks, with its exit codes.
    let (tables, mut problems) = inspect_tables(&store, &catalog)?;
    let (mut code, mut word) = verdict(&tables);
    let policy = policy_problems(&store, &catalog)?;
    if !policy.is_empty() {
        (code, word) = (UNSUPPORTED, "unsupported");
        problems.extend(policy);
    }
    let mut out = std::io::stdout().lock();
    if code == UNSUPPORTED {
        // This build must not trust the store: no record scan.
        if args.json {
            let doc = VerifyDoc {
                format: 1,
                db: db::describe(db_path),
                verdict: word,
                problems: &problems,
                report: None,
                manifest: None,
            };
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        } else {
            for p in &problems {
                writeln!(out, "{p}")?;
            }
            writeln!(
                out,
                "\nverification failed: future or corrupt metadata (as `strata status` reports); no record was scanned (`strata repair` lists what it can fix)"
            )?;
        }
        return Ok(code);
    }
    let mut progress = Reporter::new(&store, &catalog)?;
    let result = verify(&store, &catalog, PassLimits::default(), |p| {
        progress.verify_progress(p)
    });
    progress.finish();
    let report = result.map_err(Failure::error)?;
    let manifest = crate::cmd::copy::check_manifest(&store)?;
    if args.json {
        let doc = VerifyDoc {
            format: 1,
            db: db::describe(db_path),
            verdict: word,
            problems: &problems,
            report: Some(&report),
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
        if code == MIGRATION_REQUIRED {
            for p in &problems {
                writeln!(out, "{p}")?;
            }
            writeln!(
                out,
                "a migration is required: run `strata migrate` (it is resumable and safe to interrupt)"
            )?;
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
        _ => Ok(code),
    }
}
