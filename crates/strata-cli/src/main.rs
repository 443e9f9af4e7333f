//! The `strata` command: inspect, migrate and verify strata datastores.
//!
//! Thin by design: each subcommand parses its arguments, calls the library and renders the
//! result. Results go to stdout, errors to stderr prefixed `strata: `, progress to stderr
//! (a bar with rate and ETA on a terminal, plain lines otherwise). Exit codes: 0 success, 1 error, 2 usage, 3 migration
//! required, 4 future or corrupt metadata, 6 non-additive schema change.

mod cmd;
mod db;
mod exit;

mod size;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// strata — safe, resumable evolution of data in a key-value store.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, long_about = None)]
pub struct Cli {
    /// The datastore: a path (auto-detected: a redb file or a sled directory), or
    /// `redb:PATH`, `sled:PATH`, `postgres://user@host/db[?strata_table=NAME]`.
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
    /// A guided tour: legacy store, refusal, migration, serving, restart, payload evolution, shape policy.
    Demo(cmd::demo::Args),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Status(args) => cmd::status::run(&cli.db, args),
        Command::Migrate(args) => cmd::migrate::run(&cli.db, args),
        Command::Verify(args) => cmd::verify::run(&cli.db, args),
        Command::Collections(args) => cmd::collections::run(&cli.db, args),
        Command::Inspect(args) => cmd::inspect::run(&cli.db, args),
        Command::Schema(args) => cmd::schema::run(&cli.db, args),
        Command::Fence(args) => cmd::fence::run(&cli.db, args),
        Command::Copy(args) => cmd::copy::run(args),
        Command::Demo(args) => cmd::demo::run(args),
    };
    exit::finish(result)
}
