//! `strata migrate`: the explicit, resumable, memory-bounded migration of every managed
//! table (legacy v0 → v1 certification for the Numax tables). Safe to interrupt at any
//! instant and rerun: it resumes after the last committed batch.

use crate::db;
use crate::exit::{CmdResult, Failure, OK, UNSUPPORTED};
use crate::size::{parse_nonzero, parse_size};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use strata::migrate::{MigrateError, MigrationEvent, MigrationReport, Migrator, Registry};
use strata::pass::PassLimits;
use strata::Catalog;
use strata_store::{ScanLimits, Store};

/// Arguments of `strata migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Records per batch (at least 1). Without it, the migrator's defaults: 512 records
    /// per batch of a step that rewrites records, and a certification (which writes only
    /// its checkpoint) checkpoints every 4096 records. Given, it applies to every step.
    #[arg(long, value_name = "N", value_parser = parse_nonzero)]
    max_records: Option<usize>,
    /// Byte budget per batch, shared by the scanned records and the writes they generate:
    /// 4MiB, 512KiB, 100B or a bare number of bytes (not zero).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    max_bytes: usize,
    /// Validate every record of every pending step and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON summary document on stdout.
    #[arg(long)]
    json: bool,
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct MigrateDoc<'a> {
    db: String,
    #[serde(flatten)]
    report: &'a MigrationReport,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let limits = match args.max_records {
        Some(records) => {
            BatchLimits::Explicit(PassLimits::new(records, args.max_bytes).map_err(Failure::error)?)
        }
        None => BatchLimits::Default {
            max_bytes: args.max_bytes,
        },
    };
    // Checked on a read-only open, so a refusal writes nothing: an unfinished copy is
    // never certified or migrated (resume the copy or delete the store).
    let reading = db::open_for_reading(db_path)?;
    crate::cmd::unfinished::refuse_partial_copy(
        &reading,
        &db::describe(db_path),
        "strata migrate",
    )?;
    let store = if args.dry_run {
        reading
    } else {
        drop(reading);
        db::open_existing(db_path)?
    };
    let report = migrate_with_progress(&store, limits, args.dry_run)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = MigrateDoc {
            db: db::describe(db_path),
            report: &report,
        };
        crate::json::emit(&mut out, &doc)?;
    } else {
        for t in &report.tables {
            writeln!(
                out,
                "{:<26} v{} -> v{}  {:>9} records  {:>6} batches  {:>8.2}s  {}",
                t.table,
                t.from,
                t.to,
                t.records,
                t.batches,
                t.seconds,
                serde_json::to_value(t.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            )?;
        }
        if report.dry_run {
            writeln!(
                out,
                "\ndry run: every record validated, nothing was written"
            )?;
        } else {
            writeln!(out, "\nmigration complete: every table is current")?;
        }
    }
    out.flush()?;
    Ok(OK)
}

/// The batch limits of a migration.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BatchLimits {
    /// The migrator's default record limits (certification checkpoints every
    /// [`strata::migrate::CERTIFY_MAX_RECORDS`] records) with this byte budget.
    Default { max_bytes: usize },
    /// Both limits as given, for every step.
    Explicit(PassLimits),
}

impl From<PassLimits> for BatchLimits {
    fn from(limits: PassLimits) -> Self {
        BatchLimits::Explicit(limits)
    }
}

/// Migrates every managed table of `store` (certification of legacy tables), reporting
/// progress on stderr, and flushes before returning — whatever happened, every committed
/// batch is durable. Shared by `strata migrate` and `strata demo`.
pub(crate) fn migrate_with_progress(
    store: &Store,
    limits: impl Into<BatchLimits>,
    dry_run: bool,
) -> Result<MigrationReport, Failure> {
    let catalog = db::catalog(store).map_err(crate::exit::catalog_failure)?;
    let registry = Registry::certification(&catalog);
    let mut progress = Reporter::new(store, &catalog)?;
    progress.dry_run = dry_run;
    let migrator = Migrator::new(registry).map_err(Failure::error)?;
    let migrator = match limits.into() {
        BatchLimits::Explicit(limits) => migrator.limits(limits),
        BatchLimits::Default { max_bytes } => {
            migrator.max_bytes(max_bytes).map_err(Failure::error)?
        }
    };
    let result = migrator
        .dry_run(dry_run)
        .on_event(|e| progress.event(e))
        .run(store);
    progress.finish();
    let flushed = strata_store::KvWrite::flush(store);
    let report = result.map_err(failure)?;
    flushed?;
    Ok(report)
}

/// Maps a migration error to its exit code: 4 for future or corrupt metadata, 1 otherwise.
/// A record over the byte budget names the flag that raises it.
fn failure(e: MigrateError) -> Failure {
    use strata::pass::PassError;
    if e.is_unsupported_or_corrupt() {
        return Failure::with_code(UNSUPPORTED, e);
    }
    match &e {
        MigrateError::Pass(
            PassError::RecordTooLarge { size, .. } | PassError::BatchTooLarge { size, .. },
        ) => {
            let advice = format!("pass `--max-bytes {size}` or more");
            Failure::with_advice(e, advice)
        }
        _ => Failure::error(e),
    }
}

/// Counts the records of every table (for the progress bar's length and ETA), under the
/// read-only oversize rule of [`crate::scan`].
pub(crate) fn count_records(store: &Store, catalog: &Catalog) -> Result<u64, Failure> {
    count_records_within(store, catalog, crate::scan::limits()?)
}

fn count_records_within(
    store: &Store,
    catalog: &Catalog,
    limits: ScanLimits,
) -> Result<u64, Failure> {
    let mut total = 0u64;
    for t in catalog.tables() {
        crate::scan::each_record(store, t.prefix(), limits, |_, _| total += 1)?;
    }
    Ok(total)
}

/// Progress on stderr: a bar with records/s and an ETA on a terminal, plain lines (at most
/// one per second per table, plus step start and end) otherwise.
pub(crate) struct Reporter {
    bar: Option<ProgressBar>,
    /// Records of finished steps (the bar position is this plus the current step's count).
    done: u64,
    last_line: Instant,
    /// A migration dry run: its steps validate, they do not migrate.
    dry_run: bool,
}

impl Reporter {
    /// A reporter for `store`; on a terminal it first counts the records to size the bar.
    pub(crate) fn new(store: &Store, catalog: &Catalog) -> Result<Self, Failure> {
        let bar = if std::io::stderr().is_terminal() {
            let total = count_records(store, catalog)?;
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>26} [{bar:30}] {human_pos}/{human_len} records  {rate}  ETA {eta}",
            ) {
                // Rates as whole numbers (indicatif's `{per_sec}` prints fractions).
                let style = style.with_key(
                    "rate",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0} records/s", state.per_sec());
                    },
                );
                bar.set_style(style.progress_chars("=> "));
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            Some(bar)
        } else {
            None
        };
        Ok(Reporter {
            bar,
            done: 0,
            last_line: Instant::now(),
            dry_run: false,
        })
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    /// Handles one migration event.
    pub(crate) fn event(&mut self, e: &MigrationEvent<'_>) {
        match e {
            MigrationEvent::StepStarted {
                table,
                from,
                to,
                resumed_after,
            } => {
                if let Some(bar) = &self.bar {
                    bar.set_prefix(table.to_string());
                }
                let resumed = match resumed_after {
                    Some(c) => format!(" (resuming after `{}`)", strata_store::escape_key(c)),
                    None => String::new(),
                };
                if self.dry_run {
                    self.line(&format!(
                        "validating {table} (dry run): v{from} -> v{to}{resumed}"
                    ));
                } else {
                    self.line(&format!("migrating {table}: v{from} -> v{to}{resumed}"));
                }
            }
            MigrationEvent::Progress { progress, .. } => {
                if progress.done {
                    self.done += progress.records;
                }
                match &self.bar {
                    Some(bar) => {
                        let pos = if progress.done {
                            self.done
                        } else {
                            self.done + progress.records
                        };
                        bar.set_position(pos);
                    }
                    None => {
                        if !progress.done && self.last_line.elapsed() >= Duration::from_secs(1) {
                            self.last_line = Instant::now();
                            let secs = progress.elapsed.as_secs_f64().max(1e-9);
                            eprintln!(
                                "  {}: {} records, {} batches, {:.0} records/s",
                                progress.table,
                                progress.records,
                                progress.batches,
                                progress.records as f64 / secs
                            );
                        }
                    }
                }
            }
            MigrationEvent::TableFinished { report }
                if report.records > 0 || report.from != report.to =>
            {
                self.line(&format!(
                    "  {}: v{} -> v{}, {} records in {} batches, {:.2}s",
                    report.table,
                    report.from,
                    report.to,
                    report.records,
                    report.batches,
                    report.seconds
                ));
            }
            _ => {}
        }
    }

    /// Handles one verification progress event.
    pub(crate) fn verify_progress(&mut self, p: &strata::pass::Progress<'_>) {
        if let Some(bar) = &self.bar {
            bar.set_prefix(p.table.to_string());
            bar.set_position(self.done + p.records);
        } else if p.done || self.last_line.elapsed() >= Duration::from_secs(1) {
            self.last_line = Instant::now();
            eprintln!("  {}: {} records verified", p.table, p.records);
        }
        if p.done {
            self.done += p.records;
        }
    }

    /// Clears the bar.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use strata::TableDef;
    use strata_store::{Batch, KvWrite, MemoryStore};

    /// The progress bar's count includes a record larger than the page budget (read alone,
    /// the read-only rule), and counts nothing outside the tables.
    #[test]
    fn count_includes_oversize_records() {
        let store = Store::new(MemoryStore::new());
        let catalog = Catalog::new()
            .with(TableDef::new("a", 1, b"__nx/crdt/a/".to_vec(), 1))
            .unwrap()
            .with(TableDef::new("b", 2, b"__nx/crdt/b/".to_vec(), 1))
            .unwrap();
        let mut batch = Batch::new();
        for (k, len) in [
            ("a/1", 4),
            ("a/2", 400),
            ("a/3", 4),
            ("b/1", 900),
            ("c/1", 4),
        ] {
            let key = format!("__nx/crdt/{k}");
            batch = batch.set(key.into_bytes(), vec![b'x'; len]);
        }
        store.apply(batch).unwrap();
        let limits = ScanLimits::new(2, 100).unwrap();
        assert_eq!(count_records_within(&store, &catalog, limits).unwrap(), 4);
        assert_eq!(count_records(&store, &catalog).unwrap(), 4);
    }
}
