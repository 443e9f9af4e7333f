//! Timeouts and faults: a server that never answers, a lock held too long, a connection
//! killed in the middle of an operation. Each gives one clear line, and the store works
//! again once the cause is gone.

use crate::{owner, require_pg, scratch_table};
use std::error::Error as _;
use std::net::TcpListener;
use std::time::{Duration, Instant};
use strata_postgres::{PgError, PgOptions, PgStore};
use strata_store::{Batch, KvRead, KvWrite, StoreError};

fn pg_error(err: &StoreError) -> &PgError {
    err.source()
        .and_then(|s| s.downcast_ref::<PgError>())
        .unwrap_or_else(|| panic!("not a postgres backend error: {err:?}"))
}

/// The whole error chain as the CLI prints it: one line.
fn one_line(err: &StoreError) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    line
}

#[test]
fn a_server_that_accepts_and_never_answers_is_a_handshake_timeout() {
    // A listener that accepts connections (the kernel completes the TCP handshake) and
    // never sends a byte: the PostgreSQL startup exchange stalls.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = Instant::now();
    let err = PgStore::connect(&format!(
        "postgres://alice:s3cret@127.0.0.1:{port}/appdb?connect_timeout=1&strata_handshake_timeout=1"
    ))
    .unwrap_err();
    let elapsed = started.elapsed();
    let pg = pg_error(&err);
    assert!(
        matches!(
            pg,
            PgError::Timeout {
                phase: "handshake",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let line = one_line(&err);
    assert!(line.contains("did not answer the handshake"), "{line}");
    assert!(line.contains("strata_handshake_timeout"), "{line}");
    assert!(
        line.contains(&format!("127.0.0.1:{port}/appdb as alice")),
        "{line}"
    );
    assert!(!line.contains("s3cret") && !line.contains('\n'), "{line}");
    drop(listener);
}

#[test]
fn timeout_parameters_are_checked() {
    for bad in [
        "strata_statement_timeout=0",
        "strata_statement_timeout=-1",
        "strata_lock_wait=soon",
        "strata_handshake_timeout=",
        "connect_timeout=x",
    ] {
        let err = PgStore::connect(&format!("postgres://u@127.0.0.1:1/db?{bad}")).unwrap_err();
        assert!(
            matches!(pg_error(&err), PgError::InvalidUrl { .. }),
            "{bad}: {err:?}"
        );
        assert!(
            one_line(&err).contains("positive number of seconds"),
            "{bad}"
        );
    }
    let err = PgStore::connect("postgres://u@127.0.0.1:1/db?strata_nonsense=1").unwrap_err();
    assert!(one_line(&err).contains("unknown strata parameter `strata_nonsense`"));
    // TLS parameters are checked before connecting too (tests build with feature `tls`).
    let err = PgStore::connect("postgres://u@127.0.0.1:1/db?sslmode=verify-full").unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::InvalidUrl { .. }),
        "{err:?}"
    );
    assert!(one_line(&err).contains("sslrootcert=PATH"), "{err}");
}

fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_lock_held_too_long_is_a_lock_timeout_and_the_store_then_works() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let store = PgStore::connect_with(
        &with_params(&url, "strata_lock_wait=0.3"),
        PgOptions::new().table(&table),
    )
    .unwrap();
    store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();

    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let holder: i32 = other
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let mut tx = other.transaction().unwrap();
    tx.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        .unwrap();
    let err = store.get(b"k").unwrap_err();
    let pg = pg_error(&err);
    assert!(
        matches!(pg, PgError::LockTimeout { op: "get", .. }),
        "{err:?}"
    );
    // The line names the wait, the table and the holder's pid; no "check the server log".
    let line = one_line(&err);
    assert!(line.contains(&format!("table `{table}`")), "{line}");
    assert!(line.contains("strata_lock_wait"), "{line}");
    assert!(line.contains(&format!("pid {holder}")), "{line}");
    assert!(!line.contains("server log"), "{line}");
    // A new process's first connection waits in its setup: the same message.
    let err = PgStore::connect_with(
        &with_params(&url, "strata_lock_wait=0.3"),
        PgOptions::new().table(&table),
    )
    .unwrap_err();
    let line = one_line(&err);
    assert!(
        matches!(pg_error(&err), PgError::LockTimeout { .. }),
        "{line}"
    );
    assert!(line.contains(&format!("pid {holder}")), "{line}");
    assert!(!line.contains("server log"), "{line}");
    tx.rollback().unwrap();
    // The same store, the same connections: working again.
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_statement_past_the_statement_timeout_is_a_timeout() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    // A lock wait longer than the statement timeout: the server cancels the statement.
    let store = PgStore::connect_with(
        &with_params(&url, "strata_statement_timeout=0.3&strata_lock_wait=30"),
        PgOptions::new().table(&table),
    )
    .unwrap();
    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        .unwrap();
    let started = Instant::now();
    let err = store.prefix_exists(b"").unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(
            pg_error(&err),
            PgError::Timeout {
                phase: "statement",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(one_line(&err).contains("strata_statement_timeout"));
    tx.rollback().unwrap();
    assert!(!store.prefix_exists(b"").unwrap());
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_connection_killed_mid_operation_is_one_line_and_the_next_call_reconnects() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let store = std::sync::Arc::new(
        PgStore::connect_with(&url, PgOptions::new().table(&table).max_connections(1)).unwrap(),
    );
    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        .unwrap();
    let writer = {
        let store = std::sync::Arc::clone(&store);
        std::thread::spawn(move || store.apply(Batch::new().set(b"a".to_vec(), b"1".to_vec())))
    };
    // Wait until the batch is blocked on the lock, then kill its server process.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let killed: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() \
                 AND query LIKE '%' || $1 || '%' AND query NOT LIKE 'LOCK TABLE%'",
                &[&table],
            )
            .unwrap()
            .get(0);
        if killed > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the batch never blocked");
        std::thread::yield_now();
    }
    let err = writer.join().unwrap().unwrap_err();
    let line = one_line(&err);
    assert!(
        matches!(pg_error(&err), PgError::ConnectionLost { op: "apply", .. }),
        "{err:?}"
    );
    assert!(line.contains("lost the connection"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    tx.rollback().unwrap();
    // Nothing of the batch was written; the rerun opens a new connection and succeeds.
    assert_eq!(store.get(b"a").unwrap(), None);
    store
        .apply(Batch::new().set(b"a".to_vec(), b"1".to_vec()))
        .unwrap();
    assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
}
