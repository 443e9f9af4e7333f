//! The command line shared by the `strata` binary and an application's embedded
//! [`Admin`](crate::Admin).
//!
//! Thin by design: each subcommand parses its arguments, calls the library and renders the
//! result. Results go to stdout, errors to stderr prefixed `strata: `, progress to stderr
//! (a bar with rate and ETA on a terminal, plain lines otherwise). Exit codes: 0 success, 1 error, 2 usage, 3 migration
//! required, 4 future or corrupt metadata, 5 a record over the format's limit (a bulk pass
//! checkpoint: the table's keys are too long), 6 incompatible schema change, 7 an unfinished
//! copy (resume it or delete the store), 8 an interrupted migration, 9 a pending or
//! interrupted cutover, 10 an interrupted key rotation, 11 a sweep running or interrupted
//! (`status`, `verify`, `collections`; see [`crate::exit`]). Under `--json` an
//! error is also printed on stdout as `{"format":1,"error":{"message":"…","exit_code":N}}`.

use crate::exit::CmdResult;
use crate::{cmd, exit};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

/// strata — safe, resumable evolution of data in a key-value store.
#[derive(Debug, Parser)]
#[command(
    name = "strata",
    version,
    about = "strata — inspect, migrate, verify, copy and repair a strata datastore (redb, sled or PostgreSQL)",
    long_about = None,
    after_help = "Exit codes: 0 success (current or empty), 1 error, 2 usage, 3 migration required, \
4 future or corrupt metadata, 5 a record over the format's limit, 6 incompatible schema change, \
7 an unfinished copy, 8 an interrupted migration, 9 a pending or interrupted cutover, \
10 an interrupted key rotation, 11 a sweep running or interrupted.\n\
Under --json every result is one JSON document on stdout, errors too."
)]
pub struct Cli {
    /// The datastore: a path (auto-detected: a redb file or a sled directory), or
    /// `redb:PATH`, `sled:PATH`, `postgres://user@host/db[?strata_table=NAME]` (not read by
    /// `demo`, `copy` and `schema diff`, which refuse it).
    #[arg(
        long,
        global = true,
        default_value = "./strata-data",
        value_name = "PATH"
    )]
    db: std::path::PathBuf,

    #[command(subcommand)]
    command: Command,
}

/// The generic subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Show the schema state of every managed table (read-only).
    Status(cmd::status::Args),
    /// Run the explicit, resumable migration of every table that needs one.
    Migrate(cmd::migrate::Args),
    /// Certify every record of every managed table (read-only).
    Verify(cmd::verify::Args),
    /// Per collection: rows, payload-version histogram, stale and ahead rows, sweep and
    /// fence state (read-only).
    Collections(cmd::collections::Args),
    /// Print the first records of one managed table or collection (read-only).
    Inspect(cmd::inspect::Args),
    /// Diff JSON Schemas (a CI gate) or show a collection's persisted schema.
    Schema(cmd::schema::Args),
    /// Show the cutover fence, its clients, or abort a stuck cutover.
    Fence(cmd::fence::Args),
    /// Copy a whole store to another (any two backends), resumable and verified.
    Copy(cmd::copy::Args),
    /// The database keyring of sealed collections: status, wrapping entries (add, rewrap,
    /// remove), data-key rotation.
    Keys(cmd::keys::Args),
    /// List stuck or corrupt metadata (checkpoints, markers, fence, catalog, leases) and,
    /// with `--apply`, fix it in one atomic batch (never touches data records).
    Repair(cmd::repair::Args),
    /// Prove that no row of a collection is stored below a payload version and record
    /// it, so the application may drop its upcast steps below it.
    Retire(cmd::retire::Args),
    /// Capture a collection into a portable fixture (read-only) for `strata-testkit`.
    Fixture(cmd::fixture::Args),
    /// A guided tour: legacy store, refusal, migration, serving, restart, payload evolution, shape policy.
    Demo(cmd::demo::Args),
}

/// True when the command line asks for `--json` (errors are then JSON documents too).
fn wants_json(args: &[OsString]) -> bool {
    args.iter().skip(1).any(|a| a == "--json")
}

/// Logs go to stderr, with colour only on a terminal and when `NO_COLOR` is unset.
fn init_logging() {
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init()
        // An application embedding the admin may have installed its own subscriber.
        .ok();
}

/// What an application adds to the generic command line: its own subcommands (sweep,
/// cutover, schema check), its name and its default `--db`. [`Admin`](crate::Admin)
/// implements it; this module knows only the trait, so the command line does not depend
/// on the admin that embeds it.
pub(crate) trait AppCommands {
    /// `command` with the application's name, subcommands and default `--db`.
    fn augment(&self, command: clap::Command) -> clap::Command;
    /// Runs the application's subcommand that `matches` names (`None`: a generic one).
    fn dispatch(&self, matches: &clap::ArgMatches, db: &std::path::Path) -> Option<CmdResult>;
}

/// Parses `args` (the program name first) and runs the command; `ext` adds an
/// application's own subcommands (sweep, cutover, schema check) and its default `--db`.
pub(crate) fn run(args: Vec<OsString>, ext: Option<&dyn AppCommands>) -> ExitCode {
    init_logging();
    let json = wants_json(&args);
    let mut command = Cli::command();
    if let Some(ext) = ext {
        command = ext.augment(command);
    }
    let matches = match command.try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => usage_error(e, json),
    };
    if let Some(ext) = ext {
        let db = matches
            .get_one::<std::path::PathBuf>("db")
            .cloned()
            .unwrap_or_default();
        if let Some(result) = ext.dispatch(&matches, &db) {
            return exit::finish(result, json);
        }
    }
    let parsed = Cli::from_arg_matches(&matches);
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => usage_error(e, json),
    };
    // `--db` is global for convenience; a command that does not read it refuses it rather
    // than silently ignoring it.
    let db_given = matches.value_source("db") == Some(clap::parser::ValueSource::CommandLine);
    if db_given {
        if let Some(what) = cli.command.ignores_db() {
            return exit::finish(
                Err(exit::Failure::with_code(
                    exit::USAGE,
                    format!("`{what}` does not read `--db`; {}", cli.command.db_hint()),
                )),
                json,
            );
        }
    }
    let result = match cli.command {
        Command::Status(args) => cmd::status::run(&cli.db, args),
        Command::Migrate(args) => cmd::migrate::run(&cli.db, args),
        Command::Verify(args) => cmd::verify::run(&cli.db, args),
        Command::Collections(args) => cmd::collections::run(&cli.db, args),
        Command::Inspect(args) => cmd::inspect::run(&cli.db, args),
        Command::Schema(args) => cmd::schema::run(&cli.db, args),
        Command::Fence(args) => cmd::fence::run(&cli.db, args),
        Command::Copy(args) => cmd::copy::run(args),
        Command::Keys(args) => cmd::keys::run(&cli.db, args),
        Command::Repair(args) => cmd::repair::run(&cli.db, args),
        Command::Retire(args) => cmd::retire::run(&cli.db, args),
        Command::Fixture(args) => cmd::fixture::run(&cli.db, args),
        Command::Demo(args) => cmd::demo::run(args),
    };
    exit::finish(result, json)
}

/// Reports a usage error (also as a JSON document under `--json`) and exits with 2 (help
/// and version requests exit 0).
fn usage_error(e: clap::Error, json: bool) -> ! {
    if json && e.use_stderr() {
        let rendered = e.render().to_string();
        println!(
            "{}",
            exit::error_document(&usage_message(&rendered), exit::USAGE)
        );
    }
    e.exit()
}

/// clap's rendered error as one line: its first paragraph (the error, and the arguments
/// it names on the lines below it, as "required arguments were not provided: `<TABLE>`"),
/// without the `error: ` prefix, the usage line and the help hint.
fn usage_message(rendered: &str) -> String {
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = paragraph.join(" ");
    line.strip_prefix("error: ").unwrap_or(&line).to_string()
}

impl Command {
    /// The name of the command when it does not read `--db`.
    fn ignores_db(&self) -> Option<&'static str> {
        match self {
            Command::Demo(_) => Some("strata demo"),
            Command::Copy(_) => Some("strata copy"),
            Command::Schema(args) if args.ignores_db() => Some("strata schema diff"),
            _ => None,
        }
    }

    /// What to pass instead of `--db`.
    fn db_hint(&self) -> &'static str {
        match self {
            Command::Demo(_) => "pass the demo directory as `strata demo DIR`",
            Command::Copy(_) => "pass the stores as `--from A --to B`",
            _ => {
                "compare two files, or a file with a stored baseline with `--against DB COLLECTION`"
            }
        }
    }
}
