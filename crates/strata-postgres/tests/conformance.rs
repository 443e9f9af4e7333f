//! The shared conformance suite, run against [`PgStore`] on the server named by
//! `STRATA_PG_URL` (each test on its own scratch table, dropped afterwards). Without
//! `STRATA_PG_URL` every test prints `skipped: STRATA_PG_URL is not set` and passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use strata_postgres::{PgOptions, PgStore};
use strata_store::Store;

/// A table name no other test (in this or a concurrent process) uses.
fn scratch_table() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "strata_conf_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn fresh(url: &str) -> Store {
    let options = PgOptions::new()
        .table(scratch_table())
        .dangerous_drop_table_on_drop();
    Store::new(PgStore::connect_with(url, options).expect("connect to STRATA_PG_URL"))
}

// The factory expression is evaluated inside each generated test: without a server, the
// `return` ends the test before the check runs.
strata_store::conformance_tests!({
    let Some(url) = std::env::var("STRATA_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        println!("skipped: STRATA_PG_URL is not set");
        return;
    };
    move |_dir: &Path| fresh(&url)
});
