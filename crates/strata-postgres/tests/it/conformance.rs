//! The shared conformance suite, run against [`PgStore`](strata_postgres::PgStore) on the
//! server named by `STRATA_PG_URL` (each test on its own scratch table, dropped
//! afterwards). Built without `STRATA_PG_URL` (see `build.rs`), the suite is one ignored
//! test that says so: `cargo test` reports it as ignored, never as passed.

#[cfg(strata_pg)]
mod suite {
    use std::path::Path;
    use strata_postgres::{PgOptions, PgStore};
    use strata_store::Store;

    /// A table name no other test (in this or a concurrent process) uses.
    fn scratch_table() -> String {
        strata_postgres::testing::scratch_table("strata_conf")
    }

    fn fresh(url: &str) -> Store {
        let options = PgOptions::new()
            .table(scratch_table())
            .dangerous_drop_table_on_drop();
        Store::new(PgStore::connect_with(url, options).expect("connect to STRATA_PG_URL"))
    }

    /// `STRATA_PG_URL` at run time, else the value the suite was built with.
    fn url() -> String {
        std::env::var("STRATA_PG_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
            .expect("STRATA_PG_URL is set")
    }

    strata_store::conformance_tests!({
        let url = url();
        move |_dir: &Path| fresh(&url)
    });
}

/// The same suite through a real PgBouncer in session mode (started once for this test
/// process, on loopback, in front of the `STRATA_PG_URL` server): every session strata
/// keeps — its prepared statements, session functions and lease locks — is pinned to one
/// server connection for the client connection's life. Without a `pgbouncer` binary the
/// stores are opened directly and the skip is printed (under `CI=true` it fails instead).
#[cfg(strata_pg)]
mod through_pgbouncer {
    use std::path::Path;
    use std::sync::OnceLock;
    use strata_postgres::testing::{loopback_port, Pgbouncer};
    use strata_postgres::{PgOptions, PgStore};
    use strata_store::Store;

    fn url() -> String {
        std::env::var("STRATA_PG_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
            .expect("STRATA_PG_URL is set")
    }

    /// The pooler's URL, started on first use.
    fn pooled_url() -> String {
        static POOL: OnceLock<Option<Pgbouncer>> = OnceLock::new();
        let pool = POOL.get_or_init(|| {
            let port = loopback_port(&url())?;
            Pgbouncer::start_for_test("conformance through pgbouncer", port, "session")
                .expect("start pgbouncer")
        });
        match pool {
            Some(p) => p.url(),
            None => {
                assert!(
                    std::env::var("CI").map_or(true, |v| v != "true"),
                    "CI needs a loopback STRATA_PG_URL and pgbouncer for this suite"
                );
                url()
            }
        }
    }

    fn fresh(url: &str) -> Store {
        let options = PgOptions::new()
            .table(strata_postgres::testing::scratch_table("strata_confb"))
            .dangerous_drop_table_on_drop();
        Store::new(PgStore::connect_with(url, options).expect("connect through pgbouncer"))
    }

    strata_store::conformance_tests!({
        let url = pooled_url();
        move |_dir: &Path| fresh(&url)
    });
}

/// The same suite through a real PgBouncer in transaction mode, declared in the URL
/// (`strata_pooler=transaction`, leases on `strata_direct`): unnamed statements only,
/// nothing left in a session the pooler lends to the next transaction.
#[cfg(strata_pg)]
mod through_pgbouncer_transaction_mode {
    use std::path::Path;
    use std::sync::OnceLock;
    use strata_postgres::testing::{loopback_port, Pgbouncer};
    use strata_postgres::{PgOptions, PgStore};
    use strata_store::Store;

    fn url() -> String {
        std::env::var("STRATA_PG_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
            .expect("STRATA_PG_URL is set")
    }

    fn pooled_url() -> String {
        static POOL: OnceLock<Option<(Pgbouncer, u16)>> = OnceLock::new();
        let pool = POOL.get_or_init(|| {
            let port = loopback_port(&url())?;
            Pgbouncer::start_for_test("conformance through pgbouncer", port, "transaction")
                .expect("start pgbouncer")
                .map(|p| (p, port))
        });
        match pool {
            Some((p, port)) => format!(
                "{}?strata_pooler=transaction&strata_direct=127.0.0.1:{port}",
                p.url()
            ),
            None => {
                assert!(
                    std::env::var("CI").map_or(true, |v| v != "true"),
                    "CI needs a loopback STRATA_PG_URL and pgbouncer for this suite"
                );
                url()
            }
        }
    }

    fn fresh(url: &str) -> Store {
        let options = PgOptions::new()
            .table(strata_postgres::testing::scratch_table("strata_conft"))
            .dangerous_drop_table_on_drop();
        Store::new(PgStore::connect_with(url, options).expect("connect through pgbouncer"))
    }

    strata_store::conformance_tests!({
        let url = pooled_url();
        move |_dir: &Path| fresh(&url)
    });
}

/// Stands for the whole suite when no server was configured at build time.
#[cfg(not(strata_pg))]
#[test]
#[ignore = "needs STRATA_PG_URL (the shared conformance suite against PostgreSQL)"]
fn conformance_suite() {
    panic!("the PostgreSQL conformance suite needs STRATA_PG_URL when it is built");
}
