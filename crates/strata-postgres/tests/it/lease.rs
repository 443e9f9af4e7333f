//! The store lease across handles (each with its own connections, as separate processes
//! have): exclusion with a bounded wait and a message naming the holder, growing fencing
//! tokens, a holder whose session died fenced off, a waiting writer let through.

use crate::{owner, require_pg, scratch_table};
use std::error::Error as _;
use std::time::{Duration, Instant};
use strata_postgres::{PgError, PgOptions, PgStore};
use strata_store::{Batch, ExclusiveSession, KvRead, KvWrite, Store, StoreError};

fn pg_error(err: &StoreError) -> &PgError {
    err.source()
        .and_then(|s| s.downcast_ref::<PgError>())
        .unwrap_or_else(|| panic!("not a postgres backend error: {err:?}"))
}

fn handle(url: &str, table: &str, lock_wait: &str) -> Store {
    let sep = if url.contains('?') { '&' } else { '?' };
    Store::new(
        PgStore::connect_with(
            &format!("{url}{sep}strata_lock_wait={lock_wait}"),
            PgOptions::new().table(table),
        )
        .unwrap(),
    )
}

fn set(k: &str, v: &str) -> Batch {
    Batch::new().set(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn other_writers_wait_then_fail_naming_the_holder_and_pass_after_release() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a = handle(&url, &table, "0.3");
    let b = handle(&url, &table, "0.3");
    b.apply(set("before", "1")).unwrap();

    let session = ExclusiveSession::acquire(&a, "migrate (test holder)", None).unwrap();
    let token = session.fencing_token().unwrap();
    assert!(token >= 1);
    // The holder writes; the other handle reads but cannot write.
    session.apply(set("mine", "1")).unwrap();
    assert_eq!(b.get(b"mine").unwrap(), Some(b"1".to_vec()));
    let started = Instant::now();
    let err = b.apply(set("theirs", "1")).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(250));
    let pg = pg_error(&err);
    assert!(matches!(pg, PgError::LeaseHeld { .. }), "{err:?}");
    let message = pg.to_string();
    assert!(
        message.starts_with(&format!(
            "migration in progress on `{table}` by migrate (test holder)"
        )),
        "{message}"
    );
    assert_eq!(b.get(b"theirs").unwrap(), None);
    // A second acquirer waits and fails the same way.
    let err =
        ExclusiveSession::acquire(&b, "second", Some(Duration::from_millis(200))).unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::LeaseHeld { .. }),
        "{err:?}"
    );
    assert!(!b.is_leased(), "a refused acquisition holds nothing");

    drop(session);
    b.apply(set("theirs", "1")).unwrap();
    let again = ExclusiveSession::acquire(&b, "second", None).unwrap();
    assert!(again.fencing_token().unwrap() > token);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_waiting_writer_goes_through_once_the_lease_is_released() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a = handle(&url, &table, "30");
    let b = handle(&url, &table, "30");
    let session = ExclusiveSession::acquire(&a, "holder", None).unwrap();
    let writer = std::thread::spawn(move || b.apply(set("w", "1")));
    // Wait (deterministically) until the writer is blocked on the lease lock.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the writer never waited");
        std::thread::yield_now();
    }
    assert_eq!(a.get(b"w").unwrap(), None);
    drop(session);
    writer.join().unwrap().unwrap();
    assert_eq!(a.get(b"w").unwrap(), Some(b"1".to_vec()));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_holder_whose_session_died_is_fenced_off_and_another_takes_over() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a = handle(&url, &table, "5");
    let b = handle(&url, &table, "5");
    let session = ExclusiveSession::acquire(&a, "doomed", None).unwrap();
    let token = session.fencing_token().unwrap();
    session.apply(set("k", "a1")).unwrap();

    // The holder's lease session ends (as when its connection breaks).
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM strata_leases WHERE store_table = $1",
            &[&table],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    // Its next batch is refused even before anyone else takes over (the lock is gone)...
    let deadline = Instant::now() + Duration::from_secs(20);
    let err = loop {
        match session.apply(set("k", "a2")) {
            Err(e) => break e,
            // The server may take a moment to end the session.
            Ok(()) => {
                assert!(
                    Instant::now() < deadline,
                    "the dead lease still fenced writes in"
                );
                std::thread::yield_now();
            }
        }
    };
    assert!(
        matches!(pg_error(&err), PgError::LeaseLost { .. }),
        "{err:?}"
    );
    // ...another handle takes the lease over with a larger token...
    let taken = ExclusiveSession::acquire(&b, "successor", None).unwrap();
    assert!(taken.fencing_token().unwrap() > token);
    taken.apply(set("k", "b1")).unwrap();
    // ...and the old holder still cannot write.
    let err = session.apply(set("k", "a3")).unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::LeaseLost { .. }),
        "{err:?}"
    );
    assert_eq!(b.get(b"k").unwrap(), Some(b"b1".to_vec()));
    drop(session);
    drop(taken);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn named_leases_exclude_their_holders_only_and_pass_on_when_released() {
    use strata_store::NamedLease;
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a = handle(&url, &table, "0.3");
    let b = handle(&url, &table, "0.3");
    let held = NamedLease::acquire(&a, "sweep/docs", "sweeper a", Duration::ZERO).unwrap();
    let first = held.fencing_token().unwrap();
    // Another holder of the name is refused, naming the holder…
    match NamedLease::acquire(&b, "sweep/docs", "sweeper b", Duration::from_millis(200)).unwrap() {
        NamedLease::Busy { holder } => assert_eq!(holder, "sweeper a"),
        other => panic!("{other:?}"),
    }
    // …another name is not, and neither the store lease nor ordinary writers wait.
    let other = NamedLease::acquire(&b, "cutover", "coordinator b", Duration::ZERO).unwrap();
    assert!(matches!(other, NamedLease::Held(_)));
    b.apply(set("k", "v")).unwrap();
    let session = ExclusiveSession::acquire(&b, "migrate b", Some(Duration::ZERO)).unwrap();
    drop(session);
    // Released: the next holder gets a larger token.
    drop(held);
    let next = NamedLease::acquire(&b, "sweep/docs", "sweeper b", Duration::ZERO).unwrap();
    assert!(next.fencing_token().unwrap() > first, "{next:?}");
}

/// The holder's batches commit without waiting for the WAL flush; `flush` waits for it:
/// afterwards the server's flushed WAL reaches past the holder's last batch. Without the
/// lease, `flush` has nothing to do and the batches are durable at commit.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn flush_makes_the_holders_batches_durable() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a = handle(&url, &table, "5");
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let lsn = |sql: &mut postgres::Client, f: &str| -> i64 {
        sql.query_one(&format!("SELECT ({f}() - '0/0'::pg_lsn)::int8"), &[])
            .unwrap()
            .get(0)
    };
    let session = ExclusiveSession::acquire(&a, "flush test", None).unwrap();
    for i in 0..20 {
        session
            .apply(set(&format!("k{i:02}"), &"x".repeat(2000)))
            .unwrap();
    }
    let written = lsn(&mut sql, "pg_current_wal_insert_lsn");
    session.flush().unwrap();
    let flushed = lsn(&mut sql, "pg_current_wal_flush_lsn");
    assert!(flushed >= written, "flushed {flushed} < written {written}");
    // A second flush has nothing left to do; the records are all there.
    session.flush().unwrap();
    drop(session);
    assert_eq!(a.get(b"k19").unwrap(), Some("x".repeat(2000).into_bytes()));
}
