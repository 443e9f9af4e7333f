//! [`Admin`]: the `strata` command line embedded in an application's own binary, with
//! the subcommands that need the application's types.

mod cutover;
mod revert;
mod schema;
mod sweep;
mod window;

use crate::cli;
use crate::exit::{CmdResult, Failure};
use clap::{ArgMatches, Args as _, FromArgMatches as _};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use strata::ops::sweep::{SweepOptions, SweepReport};
use strata::{Collection, CollectionError, CollectionOptions, Database};
use strata_store::Store;

/// The operations the admin needs from a typed collection.
trait AdminCollection {
    fn sweep(&self, options: SweepOptions) -> Result<SweepReport, CollectionError>;
    /// Reads one document through the upcast chain (nothing is written when the options
    /// have no read-repair).
    fn read(&self, id: &str) -> Result<(), CollectionError>;
    /// True when `doc` deserializes into the collection's type.
    fn binds(&self, doc: serde_json::Value) -> Result<(), String>;
    /// Completes the collection's deploy window.
    fn complete_window(
        &self,
        options: strata::ops::window::WindowOptions<'_>,
    ) -> Result<strata::ops::window::WindowReport, CollectionError>;
    /// Checks a rollback of the collection's deploy window.
    fn rollback_window(&self) -> Result<strata::ops::window::RollbackReport, CollectionError>;
    /// The checks of a revert, on reads only.
    fn check_revert(&self, to: i32) -> Result<(), CollectionError>;
    /// Reverts the collection to an older payload version through its downcasts.
    fn revert(
        &self,
        to: i32,
        options: strata::ops::revert::RevertOptions,
    ) -> Result<strata::ops::revert::RevertReport, CollectionError>;
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

    fn complete_window(
        &self,
        options: strata::ops::window::WindowOptions<'_>,
    ) -> Result<strata::ops::window::WindowReport, CollectionError> {
        Collection::complete_window(self, options)
    }

    fn rollback_window(&self) -> Result<strata::ops::window::RollbackReport, CollectionError> {
        Collection::rollback_window(self)
    }

    fn check_revert(&self, to: i32) -> Result<(), CollectionError> {
        Collection::check_revert(self, to)
    }

    fn revert(
        &self,
        to: i32,
        options: strata::ops::revert::RevertOptions,
    ) -> Result<strata::ops::revert::RevertReport, CollectionError> {
        Collection::revert(self, to, options)
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
    /// The payload version the collection's chain reaches (its start + its steps, plus
    /// a coordinated cutover's step).
    fn current_version(&self) -> i32 {
        self.options.current_version()
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
/// * `window <collection> complete|rollback [--timeout-secs N] [--json]` — the deploy
///   window of a collection (two builds live at once, see [`strata::ops::window`]):
///   `complete` waits until no older build is live, then moves every row to this build's
///   version; `rollback` checks, read-only, that the older build reads every row (exit 1
///   when some rows are above the window's version).
/// * `revert <collection> --to N [--dry-run] [--drop-newer-fields] [--json]` — after a
///   window completed, takes the collection back to payload version N through its
///   downcasts (see [`strata::ops::revert`]): back into a deploy window at N, build N's
///   schema baseline restored, every newer row downcast (resumable: run it again after an
///   interruption). `--dry-run` writes nothing and lists the rows whose newer-only
///   content the downcast cannot express (kept with the row unless
///   `--drop-newer-fields`). Exit 0 done, 1 rows that failed (named) or unfinished.
/// * `schema check [<collection>…] [--json]` — compares each collection's current JSON
///   Schema (from its [`SchemaOptions`](strata::policy::SchemaOptions)) with the stored baseline under its strategies,
///   writing nothing: exit 0 compatible (or a cutover the strategies plan), 6 rejected —
///   the CI gate to run before deploying.
///
/// ```no_run
/// use strata::policy::SchemaOptions;
/// use strata::CollectionOptions;
/// use strata::Mode;
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

/// Opens the application's database over `store`, with the key the flags name (the first
/// credential that opens the keyring) so sealed collections open too; without key flags,
/// without a key.
fn open_database(store: &Store, key: &crate::cmd::keys::KeyArgs) -> Result<Database, Failure> {
    if key.is_empty() {
        return Database::builder(store.clone())
            .open()
            .map_err(Failure::error);
    }
    let mut last = None;
    for credential in key.credentials()? {
        match Database::builder(store.clone()).key(credential).open() {
            Ok(db) => return Ok(db),
            Err(e @ CollectionError::Seal { .. }) if wrong_key(&e) => last = Some(e),
            Err(e) => return Err(Failure::error(e)),
        }
    }
    match last {
        Some(e) => Err(Failure::error(e)),
        None => Err(Failure::error("no credential was given")),
    }
}

/// Before the writable open of `sweep`, `schema plan` and `cutover`: on a read-only open,
/// resolves the key flags and checks that one of them opens the keyring, or, without
/// them, that none of collections `names` is sealed in the store (marked, or its first
/// document sealed), and that the store is not an unfinished copy (exit 7). A refusal
/// leaves the datastore's files as they were (opening a redb file for writing rewrites
/// its header).
fn check_key(
    db_path: &Path,
    key: &crate::cmd::keys::KeyArgs,
    names: &[&str],
) -> Result<(), Failure> {
    let reading = crate::db::open_for_reading(db_path)?;
    // The sweep and the cutover certify what they leave: never part of a copy.
    crate::cmd::unfinished::refuse_partial_copy(
        &reading,
        &crate::db::describe(db_path),
        "the bulk operation",
    )?;
    if !key.is_empty() {
        key.unlock(&reading)?;
        return Ok(());
    }
    for name in names {
        if strata::seal::mark::is_sealed_collection(&reading, name)? {
            return Err(Failure::error(format!(
                "collection `{name}` is sealed (its documents are encrypted) and no key was given; nothing was written; pass the key: `--passphrase-env VAR` or `--key-file PATH`"
            )));
        }
    }
    Ok(())
}

/// True for a wrong key at open.
fn wrong_key(e: &CollectionError) -> bool {
    matches!(e, CollectionError::Seal { source, .. } if source.is_wrong_key())
}

/// What [`Admin`] adds to the generic command line.
pub(crate) struct Extension {
    admin: Admin,
}

impl cli::AppCommands for Extension {
    fn augment(&self, command: clap::Command) -> clap::Command {
        Extension::augment(self, command)
    }

    fn dispatch(&self, matches: &ArgMatches, db: &Path) -> Option<CmdResult> {
        Extension::dispatch(self, matches, db)
    }
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
    /// The key of the database's sealed collections.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
}

/// Arguments of `window`.
#[derive(Debug, clap::Args)]
struct WindowArgs {
    /// The collection (one the application registered).
    collection: String,
    /// `complete`: wait until no older build is live, then move every row to this
    /// build's version; `rollback`: check (read-only) that the older build reads every row.
    #[arg(value_enum)]
    action: window::WindowAction,
    /// How long `complete` waits for older builds to stop.
    #[arg(long, value_name = "SECS", default_value = "30")]
    timeout_secs: u64,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// The key of the database's sealed collections.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
}

/// Arguments of `revert`.
#[derive(Debug, clap::Args)]
struct RevertArgs {
    /// The collection (one the application registered).
    collection: String,
    /// The payload version to go back to.
    #[arg(long, value_name = "N")]
    to: i32,
    /// Read only: count the rows a revert would move and list those whose newer-only
    /// content the downcast cannot express.
    #[arg(long)]
    dry_run: bool,
    /// Drop what the downcast cannot express instead of keeping it with the row.
    #[arg(long)]
    drop_newer_fields: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// The key of the database's sealed collections.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
}

/// Arguments of `cutover`.
#[derive(Debug, clap::Args)]
struct CutoverArgs {
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// The key of the database's sealed collections.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
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
    /// The key of the database's sealed collections.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
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
            .subcommand(WindowArgs::augment_args(clap::Command::new("window")).about(
                "Complete a collection's deploy window from the newest build, or check a rollback (two builds live at once)",
            ))
            .subcommand(RevertArgs::augment_args(clap::Command::new("revert")).about(
                "Take a collection back to an older payload version through its downcasts after its window completed (resumable; --dry-run writes nothing)",
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
            Some(("window", m)) => Some(
                WindowArgs::from_arg_matches(m)
                    .map_err(usage)
                    .and_then(|a| self.window(db, a)),
            ),
            Some(("revert", m)) => Some(
                RevertArgs::from_arg_matches(m)
                    .map_err(usage)
                    .and_then(|a| self.revert(db, a)),
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
}
