//! `strata verify`: a read-only superset of `strata status`. It first checks the metadata
//! `status` checks (the catalog of collections and every table's schema header) and
//! fails with the same exit codes (4 future or corrupt, 3 migration required), plus the
//! fence record, the persisted schema baselines, the sweep markers and the database
//! keyring (4 when one is unreadable); then it certifies every record of every managed
//! table (current tables too). Exit 0 when all of that passes; exit 1 with the first bad
//! table and key when a record does not decode, or when a sealed record fails
//! authentication (with the key) or its envelope check (without). Exit 4 when sealed
//! records exist but the keyring that sealed them does not. Last it recounts every table
//! and collection a bulk operation certified (`__nx/manifest/…`, see
//! `strata_store::manifest`): exit 4 when certified records are missing (fewer than
//! certified) although nothing wrote to that scope through strata; records added or
//! changed since are reported as such, never as an alarm.

use crate::cmd::migrate::Reporter;
use crate::cmd::verdict::{inspect_tables, verdict};
use crate::db;
use crate::exit::{catalog_failure, CmdResult, Failure, MIGRATION_REQUIRED, UNSUPPORTED};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::migrate::{verify, StoreVerification};
use strata::pass::PassLimits;
use strata::Catalog;
use strata_store::{manifest, Store};

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
    /// Byte budget of each page read (keys + values), as `strata copy` and `migrate`
    /// take it: 4MiB, 16MiB or a bare number. A record larger than it is reported naming
    /// its key; raise it for a store copied with a larger `--max-bytes`.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = crate::size::parse_size)]
    max_bytes: usize,
    /// With the key, every sealed record is authenticated; without, only its envelope is
    /// checked (and the output says so).
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
    /// PostgreSQL: a commit receipt (`TIMELINE:LSN`, `status --json` `hosts.receipt`)
    /// taken after writes were acknowledged: checks on the primary that every commit
    /// acknowledged before it is there (after a failover to an asynchronous standby;
    /// exit 4 when some may be lost).
    #[arg(long, value_name = "TIMELINE:LSN")]
    receipt: Option<String>,
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct VerifyDoc<'a> {
    db: String,
    /// `ok`, `migration_required`, `unsupported`, `failed` or a verdict of unfinished work
    /// (as `strata status`).
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
    sealed: Option<&'a strata::ops::verify::SealedReport>,
    /// Every bulk-operation manifest compared with its scope.
    scopes: &'a [ScopeCheck],
    /// Rows stored below their collection's retired versions (`retire`): no build reads
    /// them; the verdict is `failed` (exit 1).
    retired_rows: &'a [RetiredRows],
    /// Unfinished work (see `strata status`); an unfinished copy is the verdict
    /// `unfinished_copy` (exit 7) and nothing is scanned.
    unfinished: &'a [crate::cmd::unfinished::Unfinished],
    /// Why the run fails (the stderr line and the exit code), when it does: the one
    /// document of a failed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDoc>,
    /// PostgreSQL: which servers answered (`read_from` is `replica` when the URL names a
    /// read replica that answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<db::Hosts>,
    /// What `--receipt` found (`kept`, `may_be_lost`, `not_in_history`).
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<db::ReceiptReport>,
    /// redb: why its pages' checksums were not checked (no room for the private copy),
    /// when they were not; absent when they were checked (or on another backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pages_not_checked: Option<String>,
}

impl<'a> VerifyDoc<'a> {
    /// The document of a run that scanned no record (an unfinished copy, or metadata this
    /// build must not trust).
    fn unscanned(
        db: String,
        verdict: &'static str,
        problems: &'a [String],
        unfinished: &'a [crate::cmd::unfinished::Unfinished],
    ) -> Self {
        VerifyDoc {
            db,
            verdict,
            problems,
            report: None,
            manifest: None,
            sealed: None,
            scopes: &[],
            retired_rows: &[],
            unfinished,
            error: None,
            hosts: None,
            receipt: None,
            pages_not_checked: None,
        }
    }
}

/// Rows of one collection stored below its retired versions.
#[derive(Debug, Clone, Serialize)]
pub struct RetiredRows {
    /// The collection.
    pub collection: String,
    /// Versions below this one are retired.
    pub retired_below: i32,
    /// How many rows are stored below it.
    pub rows: u64,
    /// The first such row's document key (escaped).
    pub first: String,
}

/// Every collection's rows stored below its retired versions (read from the envelope
/// headers, clear or sealed: no key needed). A damaged retirement record is an error.
fn retired_rows(store: &Store, catalog: &Catalog) -> Result<Vec<RetiredRows>, Failure> {
    let mut out = Vec::new();
    for t in catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= FIRST_COLLECTION_ID)
    {
        let Some(below) =
            strata::ops::retire::retired_below(store, t.name()).map_err(Failure::error)?
        else {
            continue;
        };
        let mut found: Option<RetiredRows> = None;
        crate::scan::each_record(store, t.prefix(), crate::scan::limits()?, |key, value| {
            let version = match strata::layout::envelope::decode(value) {
                Ok((env, _)) => Some(env.payload_version),
                Err(_) => strata::seal::peek(value).map(|(env, _)| env.payload_version),
            };
            if version.is_some_and(|v| v < below) {
                let r = found.get_or_insert_with(|| RetiredRows {
                    collection: t.name().to_string(),
                    retired_below: below,
                    rows: 0,
                    first: strata_store::escape_key(&key[t.prefix().len().min(key.len())..]),
                });
                r.rows += 1;
            }
        })?;
        out.extend(found);
    }
    Ok(out)
}

/// One bulk-operation manifest (`__nx/manifest/<operation>/<scope>`) compared with its
/// scope as the store holds it now.
#[derive(Debug, Clone, Serialize)]
pub struct ScopeCheck {
    /// The manifest key, escaped.
    pub key: String,
    /// The operation that certified the scope (absent when the manifest is unreadable).
    pub operation: Option<String>,
    /// The table or collection.
    pub scope: Option<String>,
    /// When it was certified (UTC).
    pub at: Option<String>,
    /// Records certified.
    pub records: u64,
    /// Records now.
    pub now_records: u64,
    /// Digest certified.
    pub digest: Option<String>,
    /// Digest now.
    pub now_digest: Option<String>,
    /// The key prefix whose records were compared, escaped (absent when the manifest is
    /// unreadable).
    pub prefix: Option<String>,
    /// What was compared: [`COMPARED`].
    pub compared: &'static str,
    /// `intact`, `missing` (fewer records than certified: records are provably missing),
    /// `changed` (as many or more, different digest: records were added or changed
    /// since, which is not an error) or `unreadable`.
    pub verdict: &'static str,
}

/// What `verify` compares for each bulk-operation manifest.
pub const COMPARED: &str =
    "the record count and the order-independent digest of every key and value under the prefix";

impl ScopeCheck {
    /// True unless records are provably missing or the manifest is unreadable: records
    /// added or changed since are another writer's legitimate work, never an alarm.
    fn ok(&self) -> bool {
        matches!(self.verdict, "intact" | "changed")
    }

    fn describe(&self) -> String {
        let op = self.operation.as_deref().unwrap_or("?");
        let scope = self.scope.as_deref().unwrap_or("?");
        let at = self.at.as_deref().unwrap_or("?");
        let prefix = self.prefix.as_deref().unwrap_or("?");
        match self.verdict {
            "intact" => format!(
                "manifest: `{scope}` holds exactly the {} records `{op}` certified at {at} (compared the record count and the digest of every key and value under `{prefix}`)",
                self.records
            ),
            "changed" => format!(
                "manifest: `{scope}` was written since `{op}` certified it at {at} ({} records then, {} now, different digest of the keys and values under `{prefix}`): records were added or changed since, none is missing by count; this is not an error and nothing needs restoring",
                self.records, self.now_records
            ),
            _ => VerifyError::from(self).to_string(),
        }
    }
}

/// What `verify` found wrong with a certified scope.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Fewer records than certified, and nothing wrote to the scope through strata since.
    #[error("{missing} records certified by `{operation}` at {at} are missing from `{scope}` ({records} certified, {now} now, and nothing wrote to it through strata since): the store lost records; restore it from a backup or copy it again from its source")]
    Missing {
        /// Certified minus now.
        missing: u64,
        /// The certifying operation.
        operation: String,
        /// When.
        at: String,
        /// The table or collection.
        scope: String,
        /// Records certified.
        records: u64,
        /// Records now.
        now: u64,
    },
    /// The manifest record does not decode.
    #[error("the bulk-operation manifest `{key}` is unreadable; delete it (only the loss check of its scope is lost) or restore the store from a backup")]
    Unreadable {
        /// Its key, escaped.
        key: String,
    },
}

impl From<&ScopeCheck> for VerifyError {
    fn from(c: &ScopeCheck) -> Self {
        let operation = c.operation.clone().unwrap_or_default();
        let at = c.at.clone().unwrap_or_default();
        let scope = c.scope.clone().unwrap_or_default();
        match c.verdict {
            "missing" => VerifyError::Missing {
                missing: c.records - c.now_records,
                operation,
                at,
                scope,
                records: c.records,
                now: c.now_records,
            },
            _ => VerifyError::Unreadable { key: c.key.clone() },
        }
    }
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Compares every live bulk-operation manifest with its scope (one scan per manifest).
pub fn check_scopes(store: &Store) -> Result<Vec<ScopeCheck>, strata_store::StoreError> {
    let mut out = Vec::new();
    for (key, m) in manifest::read_manifests(store)? {
        let key = strata_store::escape_key(&key);
        let m = match m {
            Ok(m) => m,
            Err(_) => {
                out.push(ScopeCheck {
                    key,
                    operation: None,
                    scope: None,
                    at: None,
                    records: 0,
                    now_records: 0,
                    digest: None,
                    now_digest: None,
                    prefix: None,
                    compared: COMPARED,
                    verdict: "unreadable",
                });
                continue;
            }
        };
        let now = manifest::tally_scope(store, &m.prefix_bytes(), None)?;
        let verdict = if now.records == m.records && now.digest() == m.digest {
            "intact"
        } else if now.records < m.records {
            "missing"
        } else {
            "changed"
        };
        out.push(ScopeCheck {
            key,
            at: Some(utc(m.at_ms)),
            records: m.records,
            now_records: now.records,
            now_digest: Some(now.digest()),
            prefix: Some(strata_store::escape_key(&m.prefix_bytes())),
            compared: COMPARED,
            digest: Some(m.digest),
            operation: Some(m.operation),
            scope: Some(m.scope),
            verdict,
        });
    }
    Ok(out)
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    // Stale-tolerant: a read replica the URL names answers (nothing here decides a write).
    let (store, hosts) = db::open_reading(db_path, db::Reads::StaleTolerant)?;
    // redb checks its pages' checksums only when asked: every page of the file, on a
    // private copy, while the store is open here (no other process writes it meanwhile).
    // Without room for the copy the pages are not judged, and the output says so.
    let pages_not_checked = match db::target(db_path, false) {
        Ok(db::Target::Redb(path)) => match strata_redb::check_pages(&path)? {
            strata_redb::PageCheck::NotChecked { reason } => Some(reason),
            pages => {
                tracing::debug!(path = %path.display(), ?pages, "redb page checksums");
                None
            }
        },
        _ => None,
    };
    // Checked on the primary (never a replica: the question is what the primary has).
    let receipt = match &args.receipt {
        Some(r) => Some(db::check_receipt(db_path, r)?),
        None => None,
    };
    let lost = receipt
        .as_ref()
        .filter(|r| r.verdict != "kept")
        .map(|r| Failure::with_code(UNSUPPORTED, r.detail.clone()));
    let catalog = db::catalog(&store).map_err(catalog_failure)?;
    // What `strata status` checks, with its exit codes.
    let (tables, mut problems) = inspect_tables(&store, &catalog)?;
    let (mut code, mut word) = verdict(&tables);
    let policy = crate::cmd::status::policy_problems(&store, &catalog)?;
    if !policy.is_empty() {
        (code, word) = (UNSUPPORTED, "unsupported");
        problems.extend(policy);
    }
    let unfinished = crate::cmd::unfinished::find(&store, &catalog, &db::describe(db_path))?;
    let mut out = std::io::stdout().lock();
    if let Some(copy) = unfinished.iter().find(|u| u.operation == "copy") {
        // Part of a source: nothing here is certified or judged, not even what it holds.
        if args.json {
            let mut doc = VerifyDoc::unscanned(
                db::describe(db_path),
                "unfinished_copy",
                &problems,
                &unfinished,
            );
            doc.hosts = hosts.clone();
            doc.receipt = receipt.clone();
            crate::json::emit(&mut out, &doc)?;
        } else {
            writeln!(out, "{}", copy.line())?;
            if let Some(r) = &receipt {
                writeln!(out, "{}", r.detail)?;
            }
            writeln!(
                out,
                "\nverification not done: this store is an unfinished copy; no record was certified"
            )?;
        }
        return Ok(crate::exit::UNFINISHED);
    }
    if code == UNSUPPORTED {
        // This build must not trust the store: no record scan.
        if args.json {
            let mut doc = VerifyDoc::unscanned(db::describe(db_path), word, &problems, &unfinished);
            doc.hosts = hosts.clone();
            doc.receipt = receipt.clone();
            crate::json::emit(&mut out, &doc)?;
        } else {
            for p in &problems {
                writeln!(out, "{p}")?;
            }
            if let Some(r) = &receipt {
                writeln!(out, "{}", r.detail)?;
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
    let limits = PassLimits::new(strata::pass::DEFAULT_MAX_RECORDS, args.max_bytes)
        .map_err(Failure::error)?;
    let result = verify(&store, &catalog, limits, |p| progress.verify_progress(p));
    progress.finish();
    let report = result.map_err(Failure::error)?;
    let manifest = crate::cmd::copy::check_manifest(
        &store,
        strata_store::ScanLimits::new(10_000, args.max_bytes).map_err(Failure::error)?,
    )?;
    let scopes = check_scopes(&store)?;
    let sealed = strata::ops::verify::verify_sealed(&store, &catalog, sealer.as_ref())?;
    // The verdict the exit code below gives: certified records gone or sealed records
    // without their keyring are corrupt data (4), sealed records that fail are errors (1).
    let keyring_lost = sealed.sealed() > 0 && !strata::ops::verify::has_keyring(&store)?;
    let retired = retired_rows(&store, &catalog)?;
    if scopes.iter().any(|c| !c.ok()) || keyring_lost {
        word = "unsupported";
    } else if sealed.failed() > 0 || !retired.is_empty() {
        word = "failed";
    }
    // The failure the exit code below reports, decided before anything is printed so
    // that `--json` prints one document carrying it.
    let failure = match final_failure(&store, &scopes, keyring_lost, &sealed, &manifest, &args)? {
        None => retired.first().map(|r| {
            Failure::error(format!(
                "{} row(s) of collection `{}` are stored below v{}, whose versions were retired: no build reads them (the first: `{}`); delete them or rewrite them at v{} or newer",
                r.rows, r.collection, r.retired_below, r.first, r.retired_below
            ))
        }),
        other => other,
    };
    // Commits acknowledged before the receipt that the primary may lack: data missing.
    let failure = failure.or(lost);
    if failure.as_ref().is_some_and(|f| f.code == UNSUPPORTED) {
        word = "unsupported";
    }
    if failure.is_none() && matches!(word, "ok" | "migration_required") {
        // Every record checked and nothing failed: unfinished work is the verdict.
        (code, word) = crate::cmd::unfinished::combine(code, word, &unfinished);
    }
    if args.json {
        let error = failure.as_ref().map(|f| ErrorDoc {
            message: crate::exit::failure_line(f),
            exit_code: f.code,
        });
        let doc = VerifyDoc {
            db: db::describe(db_path),
            verdict: word,
            problems: &problems,
            report: Some(&report),
            manifest: manifest.clone(),
            sealed: (sealed.sealed() > 0 || sealer.is_some()).then_some(&sealed),
            scopes: &scopes,
            retired_rows: &retired,
            unfinished: &unfinished,
            error,
            hosts: hosts.clone(),
            receipt: receipt.clone(),
            pages_not_checked: pages_not_checked.clone(),
        };
        crate::json::emit(&mut out, &doc)?;
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
        for c in &scopes {
            writeln!(out, "{}", c.describe())?;
        }
        write_sealed(&mut out, &sealed)?;
        if let Some(reason) = &pages_not_checked {
            writeln!(
                out,
                "redb page checksums were not checked: {reason}; the records above decode, but a bit changed inside one would not be seen"
            )?;
        }
        for r in &retired {
            writeln!(
                out,
                "{}",
                crate::cmd::collections::retired_line(&r.collection, r.rows, Some(r.retired_below))
            )?;
        }
        for u in &unfinished {
            writeln!(out, "{}", u.line())?;
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
        if let Some(summary) = crate::cmd::unfinished::summary(code) {
            for p in problems
                .iter()
                .filter(|_| code == crate::exit::UNFINISHED_MIGRATION)
            {
                writeln!(out, "{p}")?;
            }
            writeln!(out, "{summary}")?;
        }
        if let Some(r) = &receipt {
            writeln!(out, "{}", r.detail)?;
        }
        if let Some(h) = &hosts {
            writeln!(out, "{}", h.line())?;
        }
    }
    out.flush()?;
    match failure {
        Some(f) if args.json => Err(f.reported_in_json()),
        Some(f) => Err(f),
        None => Ok(code),
    }
}

/// The `error` member of `verify --json` when the run fails: the message of the stderr
/// line (without `strata: `) and the exit code.
#[derive(Debug, Serialize)]
struct ErrorDoc {
    message: String,
    exit_code: u8,
}

/// The failure `verify` ends with, if any: certified records missing (4), sealed records
/// without their keyring (4), sealed records that fail (1), a copy manifest that differs
/// under `--strict-manifest` (1).
fn final_failure(
    store: &Store,
    scopes: &[ScopeCheck],
    keyring_lost: bool,
    sealed: &strata::ops::verify::SealedReport,
    manifest: &Option<crate::cmd::copy::ManifestCheck>,
    args: &Args,
) -> Result<Option<Failure>, Failure> {
    if let Some(bad) = scopes.iter().find(|c| !c.ok()) {
        // Records strata certified are provably gone (fewer than certified) without a
        // write through strata: corrupt data, as `strata status` reports corrupt metadata.
        return Ok(Some(Failure::with_code(
            UNSUPPORTED,
            VerifyError::from(bad),
        )));
    }
    if keyring_lost {
        // Sealed records whose keyring is gone (with the key, unlocking said so already).
        if let Some(record) = strata::seal::first_sealed_document(store, None)? {
            return Ok(Some(Failure::with_code(
                UNSUPPORTED,
                strata::seal::SealError::KeyringMissing {
                    keyring: strata::seal::DATABASE_KEYRING_KEY.to_vec(),
                    record,
                },
            )));
        }
    }
    if sealed.failed() > 0 {
        let first = &sealed.failures[0];
        return Ok(Some(Failure::error(format!(
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
        ))));
    }
    match manifest {
        Some(m) if args.strict_manifest && !m.matches => Ok(Some(Failure::error(
            crate::cmd::copy::CopyError::ManifestDiffers {
                operation: m.operation.clone(),
                records: m.records,
                now: m.now_records,
            },
        ))),
        _ => Ok(None),
    }
}

/// The sealed-records lines: authenticated with the key, or envelopes only — said plainly.
fn write_sealed(
    out: &mut impl Write,
    sealed: &strata::ops::verify::SealedReport,
) -> std::io::Result<()> {
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
