//! [`Admin`]: the `strata` command line embedded in an application's own binary, with
//! the subcommands that need the application's types.

use crate::cmd::collections::survey;
use crate::exit::{CmdResult, Failure, NON_ADDITIVE, OK};
use crate::{cli, db};
use clap::{ArgMatches, Args as _, FromArgMatches as _};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata::collection::layout::{doc_prefix, sweep_key};
use strata::payload::envelope;
use strata::payload::{SweepMarker, SweepOptions, SweepReport};
use strata::policy::{
    evaluate_strategies, Baseline, CutoverOptions, Fence, UpdateContext, UpdateDecision,
};
use strata::{Collection, CollectionError, CollectionOptions, Database, SchemaOptions};
use strata_store::{escape_key, KvRead, ScanLimits, Store};

/// The operations the admin needs from a typed collection.
trait AdminCollection {
    fn sweep(&self, options: SweepOptions) -> Result<SweepReport, CollectionError>;
    /// Reads one document through the upcast chain (nothing is written when the options
    /// have no read-repair).
    fn read(&self, id: &str) -> Result<(), CollectionError>;
    /// True when `doc` deserializes into the collection's type.
    fn binds(&self, doc: serde_json::Value) -> Result<(), String>;
}

impl<T: Serialize + DeserializeOwned> AdminCollection for Collection<T> {
    fn sweep(&self, options: SweepOptions) -> Result<SweepReport, CollectionError> {
        Collection::sweep(self, options)
    }

    fn read(&self, id: &str) -> Result<(), CollectionError> {
        self.get(id).map(|_| ())
    }

    fn binds(&self, doc: serde_json::Value) -> Result<(), String> {
        serde_json::from_value::<T>(doc)
            .map(|_| ())
            .map_err(|e| format!("does not bind to the collection's type: {e}"))
    }
}

type Opener = Arc<
    dyn Fn(&Database, &str, CollectionOptions) -> Result<Box<dyn AdminCollection>, CollectionError>
        + Send
        + Sync,
>;

/// One collection the application registered.
struct Registered {
    name: String,
    options: CollectionOptions,
    open: Opener,
}

impl Registered {
    /// The payload version the collection's chain reaches (1 + its steps).
    fn current_version(&self) -> i32 {
        self.options
            .steps()
            .iter()
            .map(|s| s.to())
            .max()
            .unwrap_or(strata::payload::INITIAL_PAYLOAD_VERSION)
    }
}

/// The `strata` command line embedded in an application's binary, the way sqlx and
/// refinery embed migrations: every `strata` subcommand, plus the ones that need the
/// application's types and upcast chains:
///
/// * `sweep <collection> [--dry-run] [--batch-size N] [--json]` — the eager sweep with the
///   collection's chain (leased, resumable after an interruption, progress on stderr);
///   `--dry-run` reads every stale row through the chain and names the ones that fail,
///   writing nothing. Exit 0 complete (or nothing to do), 1 failed rows or a live lease
///   held by another runner.
/// * `cutover [--json]` — runs the pending coordinated cutover with the transforms the
///   collections declare. Exit 0 done or nothing pending, 1 error.
/// * `schema check [<collection>…] [--json]` — compares each collection's current JSON
///   Schema (from its [`SchemaOptions`]) with the stored baseline under its strategies,
///   writing nothing: exit 0 compatible (or a cutover the strategies plan), 6 rejected —
///   the CI gate to run before deploying.
///
/// ```no_run
/// use strata::{CollectionOptions, SchemaOptions};
/// use strata::payload::Mode;
///
/// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// struct Account { id: String, balance_cents: i64 }
///
/// fn main() -> std::process::ExitCode {
///     strata_cli::Admin::new()
///         .name("bank-admin")
///         .database("./bank-data")
///         .collection::<Account>(
///             "accounts",
///             CollectionOptions::new()
///                 .identity_fields(["id"])
///                 .upcast(1, Mode::Eager, |obj| {
///                     let dollars = obj.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
///                     obj.insert("balance_cents".into(), (dollars * 100).into());
///                     Ok(())
///                 })
///                 .schema(SchemaOptions::of::<Account>().strategy(strata::policy::additive_only())),
///         )
///         .run()
/// }
/// ```
pub struct Admin {
    name: String,
    db: Option<PathBuf>,
    collections: Vec<Registered>,
}

impl Default for Admin {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.collections.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("Admin")
            .field("name", &self.name)
            .field("db", &self.db)
            .field("collections", &names)
            .finish()
    }
}

impl Admin {
    /// The plain `strata` command line (no collections, `--db` defaults to
    /// `./strata-data`).
    pub fn new() -> Self {
        Admin {
            name: "strata".into(),
            db: None,
            collections: Vec::new(),
        }
    }

    /// The program name shown in help and usage (default `strata`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The application's datastore: the default of `--db` (a path, `redb:PATH`,
    /// `sled:PATH` or a `postgres://` URL).
    pub fn database(mut self, db: impl Into<PathBuf>) -> Self {
        self.db = Some(db.into());
        self
    }

    /// Registers a collection with the options the application opens it with (its upcast
    /// chain, identity fields, schema options): `sweep`, `cutover` and `schema check` use
    /// them. The names are not checked here; a bad name fails the command that opens it.
    pub fn collection<T>(mut self, name: impl Into<String>, options: CollectionOptions) -> Self
    where
        T: Serialize + DeserializeOwned + 'static,
    {
        let open: Opener = Arc::new(|db: &Database, name: &str, options: CollectionOptions| {
            db.collection::<T>(name, options)
                .map(|c| Box::new(c) as Box<dyn AdminCollection>)
        });
        self.collections.push(Registered {
            name: name.into(),
            options,
            open,
        });
        self
    }

    /// Parses the process arguments and runs the command; returns the exit code.
    pub fn run(self) -> ExitCode {
        self.run_from(std::env::args_os())
    }

    /// Like [`Admin::run`] with explicit arguments (the program name first).
    pub fn run_from<I, S>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let ext = Extension { admin: self };
        cli::run(args, Some(&ext))
    }
}

/// What [`Admin`] adds to the generic command line.
pub(crate) struct Extension {
    admin: Admin,
}

/// Arguments of `sweep`.
#[derive(Debug, clap::Args)]
struct SweepArgs {
    /// The collection (one the application registered).
    collection: String,
    /// Read every stale row through the upcast chain and name the ones that fail; write
    /// nothing.
    #[arg(long)]
    dry_run: bool,
    /// Rows per batch.
    #[arg(long, value_name = "N", default_value = "256", value_parser = crate::size::parse_nonzero)]
    batch_size: usize,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cutover`.
#[derive(Debug, clap::Args)]
struct CutoverArgs {
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Arguments of `schema check`.
#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The collections to check (default: every registered collection with a schema).
    collections: Vec<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// Arguments of `schema plan`.
#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// The collection (one the application registered).
    collection: String,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

impl Extension {
    /// Adds the typed subcommands (when collections are registered) and the default
    /// `--db`.
    pub(crate) fn augment(&self, mut command: clap::Command) -> clap::Command {
        if self.admin.name != "strata" {
            command = command
                .name(self.admin.name.clone())
                .bin_name(self.admin.name.clone())
                .about(format!(
                    "{}: the strata command line over this application's datastore and collections",
                    self.admin.name
                ));
        }
        if let Some(db) = &self.admin.db {
            let db = db.clone().into_os_string();
            command = command.mut_arg("db", |a| a.default_value(db));
        }
        if self.admin.collections.is_empty() {
            return command;
        }
        command
            .subcommand(SweepArgs::augment_args(clap::Command::new("sweep")).about(
                "Run a collection's eager sweep with its upcast chain (resumable; --dry-run writes nothing)",
            ))
            .subcommand(CutoverArgs::augment_args(clap::Command::new("cutover")).about(
                "Run the pending coordinated cutover with the collections' transforms",
            ))
            .mut_subcommand("schema", |s| {
                s.subcommand(CheckArgs::augment_args(clap::Command::new("check")).about(
                    "Compare each collection's current JSON Schema with the stored baseline under its strategies (exit 0 ok, 6 rejected; read-only)",
                ))
                .subcommand(PlanArgs::augment_args(clap::Command::new("plan")).about(
                    "Preview this build on the real store without writing: rows per payload version, rows that would fail (key and reason), breaks the data settles, expected sweep or cutover work (exit 0, 1 failing rows, 6 rejected)",
                ))
            })
    }

    /// Runs a typed subcommand; `None` for a generic one.
    pub(crate) fn dispatch(&self, matches: &ArgMatches, db: &Path) -> Option<CmdResult> {
        let usage = |e: clap::Error| Failure::with_code(crate::exit::USAGE, e.to_string());
        match matches.subcommand() {
            Some(("sweep", m)) => Some(
                SweepArgs::from_arg_matches(m)
                    .map_err(usage)
                    .and_then(|a| self.sweep(db, a)),
            ),
            Some(("collections", m)) => Some(
                crate::cmd::collections::Args::from_arg_matches(m)
                    .map_err(usage)
                    .and_then(|a| {
                        let code = self
                            .admin
                            .collections
                            .iter()
                            .map(|c| (c.name.clone(), c.current_version()))
                            .collect();
                        crate::cmd::collections::run_with(db, a, &code)
                    }),
            ),
            Some(("cutover", m)) => Some(
                CutoverArgs::from_arg_matches(m)
                    .map_err(usage)
                    .and_then(|a| self.cutover(db, a)),
            ),
            Some(("schema", s)) => match s.subcommand() {
                Some(("check", m)) => Some(
                    CheckArgs::from_arg_matches(m)
                        .map_err(usage)
                        .and_then(|a| self.schema_check(db, a)),
                ),
                Some(("plan", m)) => Some(
                    PlanArgs::from_arg_matches(m)
                        .map_err(usage)
                        .and_then(|a| self.schema_plan(db, a)),
                ),
                _ => None,
            },
            _ => None,
        }
    }

    fn registered(&self, name: &str) -> Result<&Registered, Failure> {
        self.admin
            .collections
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self
                    .admin
                    .collections
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                Failure::error(format!(
                    "`{name}` is not a collection of this application; registered: {}",
                    names.join(", ")
                ))
            })
    }

    fn sweep(&self, db_path: &Path, args: SweepArgs) -> CmdResult {
        let reg = self.registered(&args.collection)?;
        let store = db::open_existing(db_path)?;
        let shown = db::describe(db_path);
        let recorded = strata::database::read_catalog(&store)
            .map_err(Failure::error)?
            .get(&reg.name)
            .cloned();
        let mut out = std::io::stdout().lock();
        let Some(table) = recorded else {
            let msg = format!(
                "collection `{}` is not recorded in `{shown}` yet: nothing to sweep",
                reg.name
            );
            if args.json {
                let doc = serde_json::json!({"format": 1, "db": shown, "collection": reg.name, "note": "not_recorded"});
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                writeln!(out, "{msg}")?;
            }
            return Ok(OK);
        };
        if args.dry_run {
            return self.sweep_dry_run(&store, &shown, reg, &table, &args);
        }
        let database = Database::builder(store.clone())
            .open()
            .map_err(Failure::error)?;
        let coll = (reg.open)(&database, &reg.name, reg.options.clone()).map_err(Failure::error)?;
        let before = survey(&store, &table, None, Some(reg.current_version()))?;
        eprintln!(
            "sweeping `{}` to payload v{}: {} of {} rows behind (resumable: an interrupted sweep continues from its cursor)",
            reg.name,
            reg.current_version(),
            before.rows_behind,
            before.rows
        );
        // Progress from the durable marker, about once a second.
        let progress_store = store.clone();
        let marker_key = sweep_key(&reg.name);
        let name = reg.name.clone();
        let last = std::sync::Mutex::new(Instant::now());
        let limits = strata::PassLimits::new(args.batch_size, strata::pass::DEFAULT_MAX_BYTES)
            .map_err(Failure::error)?;
        let options = SweepOptions::new().limits(limits).abort_when(move || {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() >= Duration::from_secs(1) {
                *last = Instant::now();
                if let Ok(Some(bytes)) = progress_store.get(&marker_key) {
                    if let Ok(m) = SweepMarker::decode(&name, &bytes) {
                        eprintln!(
                            "  {name}: {} rows scanned, {} rewritten",
                            m.counters.scanned, m.counters.rewritten
                        );
                    }
                }
            }
            false
        });
        let report = coll.sweep(options).map_err(Failure::error)?;
        strata_store::KvWrite::flush(&store)?;
        use strata::payload::sweep::SweepNote;
        let (code, word) = match report.note {
            SweepNote::Complete | SweepNote::AlreadyAt(_) | SweepNote::NoEagerStep => (OK, "ok"),
            SweepNote::Incomplete => (crate::exit::ERROR, "incomplete"),
            _ => (crate::exit::ERROR, "not_run"),
        };
        if args.json {
            let doc = serde_json::json!({
                "format": 1,
                "db": shown,
                "collection": reg.name,
                "verdict": word,
                "note": report.note.to_string(),
                "target_version": report.target_version,
                "current_version": report.current_version,
                "scanned": report.scanned(),
                "rewritten": report.rewritten(),
                "conflicted": report.conflicted(),
                "skipped_ahead": report.skipped_ahead(),
                "failed": report.failed(),
                "resumed": report.resumed_from.is_some(),
                "holder": report.holder,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            writeln!(
                out,
                "sweep of `{}`: {}; scanned {}, rewritten {}, conflicted {}, skipped (newer) {}, failed {}{}",
                reg.name,
                report.note,
                report.scanned(),
                report.rewritten(),
                report.conflicted(),
                report.skipped_ahead(),
                report.failed(),
                if report.resumed_from.is_some() { " (resumed)" } else { "" }
            )?;
            match report.note {
                SweepNote::Incomplete => writeln!(
                    out,
                    "some rows cannot be upcast; run `sweep {} --dry-run` to name them, fix them, then sweep again",
                    reg.name
                )?,
                SweepNote::NoEagerStep => writeln!(
                    out,
                    "the collection declares no eager step: rows are upcast on read only"
                )?,
                SweepNote::Complete | SweepNote::AlreadyAt(_) => {}
                _ => match &report.holder {
                    Some(holder) => writeln!(
                        out,
                        "the sweep of `{}` is running elsewhere: its lease is held by {holder}; run it again once that sweep ended (it resumes from its cursor)",
                        reg.name
                    )?,
                    None => writeln!(
                        out,
                        "the sweep did not run to the end: another runner holds or took its lease, or it was stopped; run it again later (it resumes from its cursor)"
                    )?,
                },
            }
        }
        Ok(code)
    }

    fn sweep_dry_run(
        &self,
        store: &Store,
        shown: &str,
        reg: &Registered,
        table: &strata::TableDef,
        args: &SweepArgs,
    ) -> CmdResult {
        // No read-repair, no schema declaration: reading writes nothing.
        let options = reg
            .options
            .clone()
            .read_repair(false)
            .schema(SchemaOptions::new());
        let database = Database::builder(store.clone())
            .open()
            .map_err(Failure::error)?;
        let coll = (reg.open)(&database, &reg.name, options).map_err(Failure::error)?;
        let current = reg.current_version();
        let prefix = doc_prefix(&reg.name);
        let limits = ScanLimits::new(args.batch_size, 64 << 20)?;
        let (mut rows, mut behind, mut ahead) = (0u64, 0u64, 0u64);
        let mut failing: Vec<(String, String)> = Vec::new();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let page = store.scan(table.prefix(), cursor.as_deref(), limits)?;
            for r in &page.records {
                rows += 1;
                let id = String::from_utf8_lossy(&r.key[prefix.len().min(r.key.len())..]);
                match envelope::decode(&r.value) {
                    Ok((env, _)) if env.payload_version < current => {
                        behind += 1;
                        if let Err(e) = coll.read(&id) {
                            failing.push((escape_key(&r.key), crate::exit::message(&e)));
                        }
                    }
                    Ok((env, _)) if env.payload_version > current => ahead += 1,
                    Ok(_) => {}
                    Err(e) => failing.push((escape_key(&r.key), e.to_string())),
                }
            }
            match page.cursor() {
                Some(c) if page.more => cursor = Some(c.to_vec()),
                _ => break,
            }
        }
        let code = if failing.is_empty() {
            OK
        } else {
            crate::exit::ERROR
        };
        let mut out = std::io::stdout().lock();
        if args.json {
            let failing_json: Vec<_> = failing
                .iter()
                .map(|(k, r)| serde_json::json!({"key": k, "reason": r}))
                .collect();
            let doc = serde_json::json!({
                "format": 1,
                "db": shown,
                "collection": reg.name,
                "dry_run": true,
                "current_version": current,
                "rows": rows,
                "would_rewrite": behind - failing.len() as u64,
                "rows_ahead": ahead,
                "failing": failing_json,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            writeln!(
                out,
                "dry run of the sweep of `{}` to v{current}: {rows} rows, {} would be rewritten, {ahead} ahead (left alone), {} would fail; nothing was written",
                reg.name,
                behind.saturating_sub(failing.len() as u64),
                failing.len()
            )?;
            for (k, r) in failing.iter().take(50) {
                writeln!(out, "  {k}: {r}")?;
            }
            if failing.len() > 50 {
                writeln!(out, "  … and {} more", failing.len() - 50)?;
            }
        }
        Ok(code)
    }

    fn cutover(&self, db_path: &Path, args: CutoverArgs) -> CmdResult {
        let store = db::open_existing(db_path)?;
        let shown = db::describe(db_path);
        let database = Database::builder(store.clone())
            .open()
            .map_err(Failure::error)?;
        // Opening each collection under policy declares its schema with its transform
        // (which registers a cutover the strategies plan).
        let mut opened = Vec::new();
        for reg in &self.admin.collections {
            if reg.options.schema_options().persists() {
                opened.push(
                    (reg.open)(&database, &reg.name, reg.options.clone())
                        .map_err(Failure::error)?,
                );
            }
        }
        let fence = Fence::read(&store)?;
        let mut out = std::io::stdout().lock();
        if fence.pending.is_empty() {
            if args.json {
                let doc = serde_json::json!({"format": 1, "db": shown, "migrated": 0, "records": 0, "generation": fence.generation, "collections": []});
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                writeln!(
                    out,
                    "no cutover pending (generation {}): nothing to do",
                    fence.generation
                )?;
            }
            return Ok(OK);
        }
        for p in &fence.pending {
            self.registered(&p.collection).map_err(|_| {
                Failure::error(format!(
                    "a cutover of `{}` is pending but this application does not register that collection; run the cutover from the application that declares its transform",
                    p.collection
                ))
            })?;
        }
        let names: Vec<&str> = fence
            .pending
            .iter()
            .map(|p| p.collection.as_str())
            .collect();
        eprintln!(
            "running the cutover of {} (generation {} -> {}); writes stay fenced until it completes",
            names.join(", "),
            fence.generation,
            fence.generation + 1
        );
        let options = CutoverOptions::new().on_progress(|p| {
            if p.done {
                eprintln!("  {}: {} records rewritten, done", p.collection, p.records);
            } else {
                eprintln!("  {}: {} records rewritten", p.collection, p.records);
            }
        });
        let report = database.run_schema_cutover(options)?;
        drop(opened);
        strata_store::KvWrite::flush(&store)?;
        if args.json {
            let collections: Vec<_> = report
                .collections
                .iter()
                .map(|c| serde_json::json!({"collection": c.collection, "records": c.records, "resumed": c.resumed_from.is_some()}))
                .collect();
            let doc = serde_json::json!({
                "format": 1,
                "db": shown,
                "migrated": report.migrated,
                "records": report.records,
                "generation": report.generation,
                "collections": collections,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            writeln!(
                out,
                "cutover complete: {} collection(s), {} records rewritten; generation {}",
                report.migrated, report.records, report.generation
            )?;
        }
        Ok(OK)
    }

    fn schema_check(&self, db_path: &Path, args: CheckArgs) -> CmdResult {
        let store = db::open_existing(db_path)?;
        let shown = db::describe(db_path);
        let selected: Vec<&Registered> = if args.collections.is_empty() {
            self.admin.collections.iter().collect()
        } else {
            args.collections
                .iter()
                .map(|n| self.registered(n))
                .collect::<Result<_, _>>()?
        };
        let mut code = OK;
        let mut results = Vec::new();
        for reg in selected {
            let schema_options = reg.options.schema_options();
            let Some(schema) = schema_options.schema_value() else {
                if !args.collections.is_empty() {
                    results.push(serde_json::json!({"collection": reg.name, "verdict": "not_under_policy", "detail": "no persisted schema: nothing to check"}));
                }
                continue;
            };
            let strategies: Vec<&str> = schema_options
                .strategies()
                .iter()
                .map(|s| s.name())
                .collect();
            let Some(baseline) = Baseline::load(&store, &reg.name)? else {
                results.push(serde_json::json!({"collection": reg.name, "verdict": "new", "strategies": strategies, "detail": "no baseline stored yet: the first open records this schema"}));
                continue;
            };
            let delta = strata_schema::diff(&reg.name, &baseline.schema, schema).map_err(|e| {
                Failure::error(format!(
                    "cannot compare the schema of `{}` with its baseline: {e}",
                    reg.name
                ))
            })?;
            if delta.is_none() {
                results.push(serde_json::json!({"collection": reg.name, "verdict": "unchanged", "strategies": strategies, "detail": "the schema equals the stored baseline"}));
                continue;
            }
            let current = reg.current_version();
            let covers = baseline.payload_version.is_some_and(|b| {
                (b..current).all(|v| reg.options.steps().iter().any(|s| s.from() == v))
            });
            let ctx = UpdateContext::new(reg.name.clone()).with_payload(
                baseline.payload_version,
                current,
                covers,
            );
            let eval = evaluate_strategies(schema_options.strategies(), &delta, &ctx);
            let by = eval
                .strategy
                .clone()
                .unwrap_or_else(|| "every strategy".into());
            let (verdict, detail) = match &eval.decision {
                UpdateDecision::Allow => ("allowed", format!("allowed by {by}")),
                UpdateDecision::Cutover(_) => (
                    "cutover",
                    format!("{by} plans a coordinated cutover: writes are fenced after deploy until `cutover` runs"),
                ),
                UpdateDecision::Reject(r) => {
                    code = NON_ADDITIVE;
                    ("rejected", r.to_error(&reg.name, &by).to_string())
                }
            };
            results.push(serde_json::json!({
                "collection": reg.name,
                "verdict": verdict,
                "strategies": strategies,
                "detail": detail,
                "delta": delta,
            }));
        }
        let mut out = std::io::stdout().lock();
        if args.json {
            let doc = serde_json::json!({"format": 1, "db": shown, "ok": code == OK, "collections": results});
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            if results.is_empty() {
                writeln!(
                    out,
                    "no registered collection persists a schema: nothing to check"
                )?;
            }
            for r in &results {
                writeln!(
                    out,
                    "{:<20} {:<10} {}",
                    r["collection"].as_str().unwrap_or_default(),
                    r["verdict"].as_str().unwrap_or_default(),
                    r["detail"].as_str().unwrap_or_default()
                )?;
                if let Some(delta) = r.get("delta").and_then(|d| {
                    serde_json::from_value::<strata_schema::SchemaDelta>(d.clone()).ok()
                }) {
                    for line in strata_schema::render_human(&delta).lines() {
                        writeln!(out, "    {line}")?;
                    }
                }
            }
            if code != OK {
                writeln!(out, "\nschema check failed: a change the strategies reject; revert it or register a strategy that accepts it")?;
            }
        }
        Ok(code)
    }

    fn schema_plan(&self, db_path: &Path, args: PlanArgs) -> CmdResult {
        use std::collections::{BTreeMap, BTreeSet};
        let reg = self.registered(&args.collection)?;
        let store = db::open_existing(db_path)?;
        let shown = db::describe(db_path);
        let Some(table) = strata::database::read_catalog(&store)
            .map_err(Failure::error)?
            .get(&reg.name)
            .cloned()
        else {
            return Err(Failure::error(format!(
                "collection `{}` is not recorded in `{shown}` yet: the first open creates it, there is nothing to plan",
                reg.name
            )));
        };
        // Reads only: no read-repair, no schema declaration.
        let options = reg
            .options
            .clone()
            .read_repair(false)
            .schema(SchemaOptions::new());
        let database = Database::builder(store.clone())
            .open()
            .map_err(Failure::error)?;
        let coll = (reg.open)(&database, &reg.name, options).map_err(Failure::error)?;
        let current = reg.current_version();
        let prefix = doc_prefix(&reg.name);
        let limits = ScanLimits::new(512, 64 << 20)?;
        // The shape change against the stored baseline, under the strategies.
        let schema_options = reg.options.schema_options();
        let mut verdict = "not_under_policy".to_string();
        let mut detail = "no persisted schema".to_string();
        let mut transform: Option<strata::policy::Transform> = None;
        let mut rejected = false;
        let mut stored_baseline: Option<Baseline> = None;
        if let Some(schema) = schema_options.schema_value() {
            match Baseline::load(&store, &reg.name)? {
                None => {
                    verdict = "new".into();
                    detail = "no baseline stored yet: the first open records this schema".into();
                }
                Some(baseline) => {
                    let ctx = UpdateContext::new(reg.name.clone()).with_payload(
                        baseline.payload_version,
                        current,
                        baseline.payload_version.is_some_and(|b| {
                            (b..current).all(|v| reg.options.steps().iter().any(|s| s.from() == v))
                        }),
                    );
                    let typed =
                        strata_schema::diff(&reg.name, &baseline.schema, schema).map_err(|e| {
                            Failure::error(format!(
                                "cannot compare the schema of `{}` with its baseline: {e}",
                                reg.name
                            ))
                        })?;
                    if typed.is_none() {
                        verdict = "unchanged".into();
                        detail = "the schema equals the stored baseline".into();
                    } else {
                        let eval = evaluate_strategies(schema_options.strategies(), &typed, &ctx);
                        let by = eval
                            .strategy
                            .clone()
                            .unwrap_or_else(|| "every strategy".into());
                        match &eval.decision {
                            UpdateDecision::Allow => {
                                verdict = "allowed".into();
                                detail = format!("allowed by {by}");
                            }
                            UpdateDecision::Cutover(t) => {
                                verdict = "cutover".into();
                                detail = format!("{by} plans a coordinated cutover of every row (rows are checked through its transform)");
                                transform = Some(t.clone());
                            }
                            UpdateDecision::Reject(r) => {
                                verdict = "rejected".into();
                                detail = r.to_error(&reg.name, &by).to_string();
                                rejected = true;
                            }
                        }
                    }
                    stored_baseline = Some(baseline);
                }
            }
        }
        let cutover = transform.is_some();
        let started = Instant::now();
        let mut versions: BTreeMap<i32, u64> = BTreeMap::new();
        let (mut rows, mut bytes, mut behind, mut behind_bytes, mut ahead) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut failing: Vec<(String, String)> = Vec::new();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let page = store.scan(table.prefix(), cursor.as_deref(), limits)?;
            for r in &page.records {
                rows += 1;
                bytes += r.value.len() as u64;
                let id = String::from_utf8_lossy(&r.key[prefix.len().min(r.key.len())..]);
                let (env, json) = match envelope::decode(&r.value) {
                    Ok(ok) => ok,
                    Err(e) => {
                        failing.push((escape_key(&r.key), e.to_string()));
                        continue;
                    }
                };
                *versions.entry(env.payload_version).or_insert(0) += 1;
                if let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(json) {
                    used.extend(m.keys().cloned());
                }
                if env.payload_version > current {
                    ahead += 1;
                    continue;
                }
                if env.payload_version < current {
                    behind += 1;
                    behind_bytes += r.value.len() as u64;
                }
                // What this build would do with the row: the cutover's transform (then the
                // type), else a read through the chain into the type.
                let outcome = match &transform {
                    Some(t) => serde_json::from_slice::<serde_json::Value>(json)
                        .map_err(|e| format!("the document JSON is invalid: {e}"))
                        .and_then(|doc| {
                            t.apply(doc)
                                .map_err(|e| format!("the cutover transform fails: {e}"))
                        })
                        .and_then(|doc| {
                            coll.binds(doc).map_err(|e| {
                                format!("after the cutover transform, the document {e}")
                            })
                        }),
                    None => coll.read(&id).map_err(|e| crate::exit::message(&e)),
                };
                if let Err(reason) = outcome {
                    failing.push((escape_key(&r.key), reason));
                }
            }
            match page.cursor() {
                Some(c) if page.more => cursor = Some(c.to_vec()),
                _ => break,
            }
        }
        let secs = started.elapsed().as_secs_f64().max(1e-6);
        let rate = rows as f64 / secs;
        // What the data settles: under the registry rule (strict open content), a property
        // added to an open model breaks old data only if a stored row already uses it.
        let mut settled: Vec<String> = Vec::new();
        let mut breaks: Vec<String> = Vec::new();
        if let (Some(schema), Some(baseline)) = (schema_options.schema_value(), &stored_baseline) {
            let strict = strata_schema::DiffOptions {
                open_content: strata_schema::OpenContentPolicy::Strict,
            };
            let delta = strata_schema::diff_with(&reg.name, &baseline.schema, schema, &strict)
                .map_err(|e| Failure::error(e.to_string()))?;
            for c in &delta.paths {
                if c.backward {
                    continue;
                }
                let top_level_add = matches!(
                    c.change,
                    strata_schema::ChangeKind::PropertyAdded { required: false }
                ) && c
                    .field
                    .as_deref()
                    .is_some_and(|f| c.path == format!("/{f}"));
                match &c.field {
                    Some(f) if top_level_add && !used.contains(f) => settled.push(format!(
                        "{}: {} — no stored row uses `{f}`, so no stored row breaks",
                        c.path, c.change
                    )),
                    _ => breaks.push(format!("{}: {}", c.path, c.change)),
                }
            }
        }
        let eager = reg
            .options
            .steps()
            .iter()
            .any(|s| s.mode() == strata::Mode::Eager);
        let (work, work_rows, work_bytes) = if cutover {
            ("cutover", rows, bytes)
        } else if eager && behind > 0 {
            ("sweep", behind, behind_bytes)
        } else {
            ("none", 0, 0)
        };
        let est_secs = (work_rows as f64 / rate.max(1.0)).ceil() as u64;
        let code = if rejected {
            NON_ADDITIVE
        } else if failing.is_empty() {
            OK
        } else {
            crate::exit::ERROR
        };
        let mut out = std::io::stdout().lock();
        if args.json {
            let failing_json: Vec<_> = failing
                .iter()
                .map(|(k, r)| serde_json::json!({"key": k, "reason": r}))
                .collect();
            let doc = serde_json::json!({
                "format": 1,
                "db": shown,
                "collection": reg.name,
                "current_version": current,
                "rows": rows,
                "versions": versions,
                "rows_behind": behind,
                "rows_ahead": ahead,
                "failing": failing_json,
                "schema": {"verdict": verdict, "detail": detail, "breaks": breaks, "settled_by_data": settled},
                "work": {"kind": work, "rows": work_rows, "bytes": work_bytes, "estimated_seconds": est_secs, "read_rate_rows_per_s": rate.round() as u64},
                "written": false,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(code);
        }
        let hist: Vec<String> = versions.iter().map(|(v, n)| format!("v{v}:{n}")).collect();
        writeln!(
            out,
            "plan for `{}` in `{shown}` (this build: payload v{current}); nothing was written",
            reg.name
        )?;
        writeln!(
            out,
            "  rows            {rows} ({})",
            if hist.is_empty() {
                "-".into()
            } else {
                hist.join(" ")
            }
        )?;
        writeln!(out, "  behind / ahead  {behind} / {ahead}")?;
        writeln!(out, "  schema          {verdict}: {detail}")?;
        for b in &breaks {
            writeln!(out, "    break         {b}")?;
        }
        for s in &settled {
            writeln!(out, "    settled       {s}")?;
        }
        writeln!(out, "  failing rows    {}", failing.len())?;
        for (k, r) in failing.iter().take(50) {
            writeln!(out, "    {k}: {r}")?;
        }
        match work {
            "none" => writeln!(out, "  work            none (rows are upcast on read)")?,
            kind => writeln!(
                out,
                "  work            {kind} of {work_rows} rows, {work_bytes} bytes rewritten; about {est_secs} s at the {} rows/s this plan read (writes are slower)",
                rate.round() as u64
            )?,
        }
        Ok(code)
    }
}
