//! Through a real PgBouncer on loopback in front of the `STRATA_PG_URL` server: a
//! transaction-mode pool (which would hand strata's session state to other clients) is
//! refused when the store is opened, in one line saying what to do, unless the URL says so
//! (`strata_pooler=transaction`); then nothing is kept in a pooled session and the leases
//! connect to `strata_direct` (a lease without it is refused in one line). Through either
//! mode the store lease and the named leases exclude each other exactly as direct.

use crate::{owner, require_pg, scratch_table};
use std::error::Error as _;
use std::time::Duration;
use strata_postgres::testing::{loopback_port, Pgbouncer};
use strata_postgres::{PgError, PgOptions, PgStore};
use strata_store::{Batch, ExclusiveSession, KvRead, KvWrite, NamedLease, Store, StoreError};

fn pg_error(err: &StoreError) -> &PgError {
    err.source()
        .and_then(|s| s.downcast_ref::<PgError>())
        .unwrap_or_else(|| panic!("not a postgres backend error: {err:?}"))
}

/// A PgBouncer in `mode` in front of the test server, or `None` (skipped, said so).
fn bouncer(test: &str, mode: &str) -> Option<Pgbouncer> {
    Some(bouncer_and_upstream(test, mode)?.0)
}

/// [`bouncer`] and the port of the server behind it.
fn bouncer_and_upstream(test: &str, mode: &str) -> Option<(Pgbouncer, u16)> {
    let url = require_pg!();
    let Some(port) = loopback_port(&url) else {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI's STRATA_PG_URL is a loopback URL"
        );
        eprintln!("skipped: {test}: STRATA_PG_URL is not postgresql://USER@127.0.0.1:PORT/…");
        return None;
    };
    Some((Pgbouncer::start_for_test(test, port, mode).unwrap()?, port))
}

/// The store URL through `pool` in `mode`: a transaction-mode pool is declared, with the
/// server behind it for the leases.
fn url_through(pool: &Pgbouncer, mode: &str, upstream: u16) -> String {
    match mode {
        "transaction" => format!(
            "{}?strata_pooler=transaction&strata_direct=127.0.0.1:{upstream}",
            pool.url()
        ),
        _ => format!("{}?strata_pooler=none", pool.url()),
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_transaction_mode_pooler_is_refused_at_open_in_one_line() {
    let Some(pool) = bouncer(
        "a_transaction_mode_pooler_is_refused_at_open",
        "transaction",
    ) else {
        return;
    };
    let table = scratch_table();
    let err = PgStore::connect_with(&pool.url(), PgOptions::new().table(&table)).unwrap_err();
    let pg = pg_error(&err);
    assert!(matches!(pg, PgError::TransactionPooler { .. }), "{err:?}");
    let line = pg.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.contains(&format!("127.0.0.1:{}", pool.port()))
            && line.contains("transaction-mode connection pooler")
            && line.contains("strata_pooler=transaction&strata_direct=HOST:PORT")
            && line.contains("pool_mode = session"),
        "{line}"
    );
    // Statement mode lends sessions even more often: refused the same way.
    drop(pool);
    let Some(pool) = bouncer("a_statement_mode_pooler_is_refused_at_open", "statement") else {
        return;
    };
    let err = PgStore::connect_with(&pool.url(), PgOptions::new().table(&table)).unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::TransactionPooler { .. }),
        "{err:?}"
    );
    // Nothing was created by the refused opens.
    let direct = owner(&require_pg!(), &table);
    assert_eq!(direct.get(b"k").unwrap(), None);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_session_pool_the_store_lease_excludes_a_second_migrator() {
    store_lease_excludes_a_second_migrator("session");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_transaction_pool_the_store_lease_excludes_a_second_migrator() {
    store_lease_excludes_a_second_migrator("transaction");
}

fn store_lease_excludes_a_second_migrator(mode: &str) {
    let Some((pool, upstream)) = bouncer_and_upstream("the_store_lease_excludes", mode) else {
        return;
    };
    let table = scratch_table();
    let _owner = owner(&require_pg!(), &table);
    let url = format!(
        "{}&strata_lock_wait=0.3",
        url_through(&pool, mode, upstream)
    );
    let open = || Store::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
    let (a, b) = (open(), open());
    let first = ExclusiveSession::acquire(&a, "migrate (first)", None).unwrap();
    let token = first.fencing_token().unwrap();
    first
        .apply(Batch::new().set(b"m".to_vec(), b"1".to_vec()))
        .unwrap();
    // The second migrator waits for the lease and is refused, naming the first.
    let err = ExclusiveSession::acquire(&b, "migrate (second)", Some(Duration::from_millis(300)))
        .unwrap_err();
    let pg = pg_error(&err);
    assert!(matches!(pg, PgError::LeaseHeld { .. }), "{err:?}");
    assert!(pg.to_string().contains("migrate (first)"), "{pg}");
    // Ordinary writers wait for it too.
    let err = b
        .apply(Batch::new().set(b"w".to_vec(), b"1".to_vec()))
        .unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::LeaseHeld { .. }),
        "{err:?}"
    );
    first.flush().unwrap();
    drop(first);
    // Released through the pool (the session's lock with it): the second one takes over.
    let second = ExclusiveSession::acquire(&b, "migrate (second)", None).unwrap();
    assert!(second.fencing_token().unwrap() > token);
    assert_eq!(second.get(b"m").unwrap(), Some(b"1".to_vec()));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_session_pool_a_second_sweeper_is_contended_and_takes_over_after_release() {
    second_sweeper_is_contended("session");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_transaction_pool_a_second_sweeper_is_contended_and_takes_over_after_release() {
    second_sweeper_is_contended("transaction");
}

fn second_sweeper_is_contended(mode: &str) {
    let Some((pool, upstream)) = bouncer_and_upstream("a_second_sweeper", mode) else {
        return;
    };
    let table = scratch_table();
    let _owner = owner(&require_pg!(), &table);
    let url = url_through(&pool, mode, upstream);
    let open = || Store::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
    let (a, b) = (open(), open());
    let held = NamedLease::acquire(&a, "sweep/orders", "sweep (a)", Duration::ZERO).unwrap();
    let token = held.fencing_token().unwrap();
    match NamedLease::acquire(&b, "sweep/orders", "sweep (b)", Duration::from_millis(200)).unwrap()
    {
        NamedLease::Busy { holder } => assert_eq!(holder, "sweep (a)"),
        other => panic!("a second sweeper got {other:?}"),
    }
    // Writers are not held up by a named lease.
    b.apply(Batch::new().set(b"w".to_vec(), b"1".to_vec()))
        .unwrap();
    // The holder's store goes away (its pooled session is reset by the pooler, which
    // releases the lock): the next sweeper takes over at once with a larger token.
    drop(held);
    drop(a);
    let next =
        NamedLease::acquire(&b, "sweep/orders", "sweep (b)", Duration::from_secs(5)).unwrap();
    assert!(next.fencing_token().unwrap() > token, "{next:?}");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_transaction_pool_without_a_direct_server_a_lease_is_refused_in_one_line() {
    let Some(pool) = bouncer("without_a_direct_server_a_lease_is_refused", "transaction") else {
        return;
    };
    let table = scratch_table();
    let _owner = owner(&require_pg!(), &table);
    let url = format!("{}?strata_pooler=transaction", pool.url());
    let store = Store::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
    // Ordinary reads and writes work through it.
    store
        .apply(
            Batch::new()
                .require_absent(b"k".to_vec())
                .set(b"k".to_vec(), b"1".to_vec()),
        )
        .unwrap();
    assert_eq!(store.get(b"k").unwrap(), Some(b"1".to_vec()));
    let err = ExclusiveSession::acquire(&store, "migrate", None).unwrap_err();
    let pg = pg_error(&err);
    assert!(matches!(pg, PgError::SessionNeedsDirect { .. }), "{err:?}");
    let line = pg.to_string();
    assert!(
        !line.contains('\n')
            && line.contains("store lease")
            && line.contains("strata_direct=HOST:PORT"),
        "{line}"
    );
    let err = NamedLease::acquire(&store, "cutover", "cutover", Duration::ZERO).unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::SessionNeedsDirect { .. }),
        "{err:?}"
    );
}

/// Many handles writing one counter through a transaction pool that lends few server
/// sessions: nothing of one handle's session leaks into another's batch, no increment is
/// lost.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_transaction_pool_concurrent_increments_are_exact() {
    let url = require_pg!();
    let Some(upstream) = loopback_port(&url) else {
        eprintln!("skipped: concurrent_increments_are_exact: STRATA_PG_URL is not loopback");
        return;
    };
    // Two server sessions for four handles (and their pools): sessions change hands
    // between transactions all the time.
    let Some(pool) = Pgbouncer::start_sized_for_test(
        "concurrent_increments_are_exact",
        upstream,
        "transaction",
        2,
    )
    .unwrap() else {
        return;
    };
    let table = scratch_table();
    let _owner = owner(&require_pg!(), &table);
    let url = url_through(&pool, "transaction", upstream);
    const THREADS: usize = 4;
    const EACH: usize = 100;
    let barrier = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let store = PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap();
                barrier.wait();
                for _ in 0..EACH {
                    loop {
                        let cur = store.get(b"n").unwrap();
                        let n: usize = cur
                            .as_deref()
                            .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap());
                        let batch = Batch::new()
                            .require(b"n".to_vec(), cur)
                            .set(b"n".to_vec(), (n + 1).to_string().into_bytes());
                        match store.apply(batch) {
                            Ok(()) => break,
                            Err(e) if e.is_conflict() => continue,
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                }
            });
        }
    });
    let store = PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap();
    assert_eq!(
        store.get(b"n").unwrap(),
        Some((THREADS * EACH).to_string().into_bytes())
    );
}
