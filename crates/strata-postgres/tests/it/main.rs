//! Integration tests of the PostgreSQL backend: the shared conformance suite
//! ([`conformance`]), several
//! independent handles (as several processes would hold) on one table, and connection
//! options. The strata engine on top is tested in strata's own test binary
//! (`crates/strata/tests/it/postgres/`): no backend crate depends on the engine. Tests that need a server use `STRATA_PG_URL`; built
//! without it (see `build.rs`) they are `#[ignore]`d with the reason "needs STRATA_PG_URL",
//! so `cargo test` lists them as ignored, never as passed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod claims;
mod cluster;
mod conformance;
mod connect;
mod failover;
mod faults;
mod lease;
mod locked;
mod manifest;
mod model;
mod pooler;
mod protocol;
mod replica;
mod tls;
mod write_paths;

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
        crate::pg_url()
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
