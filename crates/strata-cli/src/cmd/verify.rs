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
use strata::migrate::{verify, StoreVerification};
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
    /// With the key, every sealed record is authenticated; without, only its envelope is
    /// checked (and the output says so).
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
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
    report: Option<&'a StoreVerification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<crate::cmd::copy::ManifestCheck>,
    /// Sealed records: authenticated with the key, or envelopes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    sealed: Option<&'a strata::seal::SealedReport>,
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
                sealed: None,
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
    // A wrong key fails here, before any record is read.
    let sealer = args.key.unlock(&store)?;
    let mut progress = Reporter::new(&store, &catalog)?;
    let result = verify(&store, &catalog, PassLimits::default(), |p| {
        progress.verify_progress(p)
    });
    progress.finish();
    let report = result.map_err(Failure::error)?;
    let manifest = crate::cmd::copy::check_manifest(&store)?;
    let sealed = strata::seal::verify_sealed(&store, &catalog, sealer.as_ref())?;
    if args.json {
        let doc = VerifyDoc {
            format: 1,
            db: db::describe(db_path),
            verdict: word,
            problems: &problems,
            report: Some(&report),
            manifest: manifest.clone(),
            sealed: (sealed.sealed() > 0 || sealer.is_some()).then_some(&sealed),
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
        write_sealed(&mut out, &sealed)?;
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
    if sealed.failed() > 0 {
        let first = &sealed.failures[0];
        return Err(Failure::error(format!(
            "{} sealed record(s) failed {}; the first: `{}` in collection `{}`: {}",
            sealed.failed(),
            if sealed.authenticated_with_key {
                "authentication"
            } else {
                "the envelope check"
            },
            first.key,
            first.collection,
            first.reason
        )));
    }
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

/// The sealed-records lines: authenticated with the key, or envelopes only — said plainly.
fn write_sealed(out: &mut impl Write, sealed: &strata::seal::SealedReport) -> std::io::Result<()> {
    if sealed.sealed() == 0 && !sealed.authenticated_with_key {
        return Ok(());
    }
    for c in sealed.collections.iter().filter(|c| c.sealed > 0) {
        if sealed.authenticated_with_key {
            writeln!(
                out,
                "{:<26} {:>9} sealed records authenticated, {} failed",
                c.collection, c.authenticated, c.failed
            )?;
        } else {
            writeln!(
                out,
                "{:<26} {:>9} sealed records: envelope checked only",
                c.collection, c.sealed
            )?;
        }
    }
    if sealed.authenticated_with_key {
        writeln!(
            out,
            "sealed records: {} of {} authenticated with the key",
            sealed.authenticated(),
            sealed.sealed()
        )
    } else {
        writeln!(
            out,
            "sealed records: {} checked by their envelope only, NOT authenticated (no key given: pass `--passphrase-env VAR` or `--key-file PATH` to authenticate them)",
            sealed.sealed()
        )
    }
}
