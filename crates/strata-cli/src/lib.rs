//! The `strata` command line, as a binary and as a library an application embeds.
//!
//! The `strata` binary inspects, migrates and verifies strata datastores: `status`,
//! `collections`, `inspect`, `migrate`, `verify`, `schema`, `fence`, `copy`, `repair`, `demo`.
//! Results go to stdout, errors to stderr prefixed `strata: `, progress to stderr. Exit
//! codes: 0 success, 1 error, 2 usage, 3 migration required, 4 future or corrupt metadata,
//! 5 a record over the format's limit, 6 incompatible schema change, 7 an unfinished copy,
//! 8 an interrupted migration, 9 a pending or interrupted cutover, 10 an interrupted key
//! rotation, 11 a sweep running or interrupted. Under `--json` every result is one document with
//! `"format": 1` (and `"db"` where a store is involved), and an error is also printed on
//! stdout as `{"format":1,"error":{"message":"…","exit_code":N}}`.
//!
//! An application gets the same command line in its own binary, plus the subcommands that
//! need its types (`sweep`, `cutover`, `schema check`), with [`Admin`]:
//!
//! ```no_run
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Account { id: String, balance_cents: i64 }
//!
//! fn main() -> std::process::ExitCode {
//!     strata_cli::Admin::new()
//!         .name("bank-admin")
//!         .database("./bank-data")
//!         .collection::<Account>("accounts", strata::CollectionOptions::new().identity_fields(["id"]))
//!         .run()
//! }
//! ```

mod admin;
mod cli;
mod cmd;
mod db;
mod exit;
mod json;
mod scan;
mod size;

pub use admin::Admin;
