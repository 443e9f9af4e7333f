//! The strata engine on a PostgreSQL store (`strata_postgres`): validation and a legacy
//! migration ([`engine`]), many writers of one document ([`contention`]), sealed collections ([`sealed`]), write hints ([`hints`]),
//! guards and waits on both write paths ([`guards`]), one statement per get ([`get_wire`]), one round trip per write ([`one_trip`]), write sets ([`write_set`], across processes in
//! [`write_set_processes`]) and a deploy window across processes ([`window`]).
//!
//! Tests that need a server use `STRATA_PG_URL`; built without it (see strata's
//! `build.rs`) they are `#[ignore]`d with the reason "needs STRATA_PG_URL", so
//! `cargo test` lists them as ignored, never as passed. `cargo test -p strata --test it --
//! postgres::` runs them all.
//!
//! The tests with child processes re-run this test binary as the children ([`spawn_child`]):
//! the test itself, run with `--exact` and its role in an environment variable.

mod contention;
mod engine;
mod get_wire;
mod guards;
mod hints;
mod one_trip;
mod sealed;
mod window;
mod write_set;
mod write_set_processes;

use std::process::{Child, Command, Stdio};
use strata_postgres::{PgOptions, PgStore};

/// The server URL: `STRATA_PG_URL` at run time, else the value the tests were built with
/// (a test that needs a server is only compiled un-ignored when it was set).
pub(crate) fn pg_url() -> String {
    std::env::var("STRATA_PG_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
        .expect("STRATA_PG_URL is set (tests needing it are ignored otherwise)")
}

/// The server URL of a test that needs one (see [`pg_url`]).
macro_rules! require_pg {
    () => {
        crate::postgres::pg_url()
    };
}
pub(crate) use require_pg;

/// A table name no other test (in this or a concurrent process) uses.
pub(crate) fn scratch_table() -> String {
    strata_postgres::testing::scratch_table("strata_it")
}

/// The handle that owns a scratch table (drops it when dropped).
pub(crate) fn owner(url: &str, table: &str) -> PgStore {
    PgStore::connect_with(
        url,
        PgOptions::new().table(table).dangerous_drop_table_on_drop(),
    )
    .unwrap()
}

/// Another independent handle on the same table: its own connections and its own
/// in-process write gate, as another process would have.
pub(crate) fn peer(url: &str, table: &str) -> PgStore {
    PgStore::connect_with(url, PgOptions::new().table(table)).unwrap()
}

/// This test binary again, as a child process running only the test `test` (its full
/// path, `postgres::…`) with `role` in the environment variable `var` and the server at
/// `url`; stdout and stderr piped.
pub(crate) fn spawn_child(test: &str, var: &str, role: String, url: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--include-ignored"])
        .env(var, role)
        .env("STRATA_PG_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child of [`spawn_child`] and returns its stdout; fails (with its output)
/// unless it exited successfully.
pub(crate) fn child_stdout(child: Child, who: &str) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child {who} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
