//! The two ways an ordinary writer's batch reaches the server — one call of the session's
//! PL/pgSQL function (the default) and one message of three statements (the fallback when
//! the session cannot create temporary functions) — give the same answers and the same
//! exclusion: failed preconditions by key and reason, one winner among racing claims
//! across paths, a writer that waited for the lease holder seeing the holder's commit.

use crate::{owner, require_pg, scratch_table};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, ConflictReason, ExclusiveSession, KvRead, KvWrite, Store, StoreError};

/// A handle on `table` at `url` with the session functions on or off.
fn handle(url: &str, table: &str, functions: bool) -> PgStore {
    PgStore::connect_with(
        url,
        PgOptions::new().table(table).session_functions(functions),
    )
    .unwrap()
}

fn conflict(r: Result<(), StoreError>) -> (Vec<u8>, ConflictReason) {
    match r {
        Err(StoreError::Conflict { key, reason }) => (key, reason),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// Failed preconditions of a put and of a general batch are reported by the key at the
/// failing position and the reason its current value gives; nothing is written.
fn reports_failed_preconditions(store: &PgStore) {
    store
        .apply(
            Batch::new()
                .set(b"a".to_vec(), b"1".to_vec())
                .set(b"b".to_vec(), b"2".to_vec()),
        )
        .unwrap();
    // A put (one set): the second of three preconditions fails.
    let put = |p: Batch| p.set(b"c".to_vec(), b"x".to_vec());
    let r = store.apply(put(Batch::new()
        .require_eq(b"a".to_vec(), b"1".to_vec())
        .require_eq(b"b".to_vec(), b"9".to_vec())
        .require_absent(b"c".to_vec())));
    assert_eq!(conflict(r), (b"b".to_vec(), ConflictReason::Changed));
    let r = store.apply(put(Batch::new()
        .require_absent(b"c".to_vec())
        .require_absent(b"a".to_vec())));
    assert_eq!(conflict(r), (b"a".to_vec(), ConflictReason::Present));
    let r = store.apply(put(Batch::new()
        .require_eq(b"a".to_vec(), b"1".to_vec())
        .require_eq(b"zz".to_vec(), b"1".to_vec())));
    assert_eq!(conflict(r), (b"zz".to_vec(), ConflictReason::Missing));
    assert_eq!(store.get(b"c").unwrap(), None);
    // A general batch (sets and a delete): the third precondition fails.
    let general = || {
        Batch::new()
            .set(b"d".to_vec(), b"4".to_vec())
            .set(b"e".to_vec(), b"5".to_vec())
            .delete(b"a".to_vec())
            .require_eq(b"a".to_vec(), b"1".to_vec())
            .require_absent(b"d".to_vec())
    };
    let r = store.apply(general().require_eq(b"b".to_vec(), b"3".to_vec()));
    assert_eq!(conflict(r), (b"b".to_vec(), ConflictReason::Changed));
    assert_eq!(store.get(b"d").unwrap(), None);
    assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
    // Then they hold, and everything is written.
    store
        .apply(general().require_eq(b"b".to_vec(), b"2".to_vec()))
        .unwrap();
    store
        .apply(put(Batch::new().require_absent(b"c".to_vec())))
        .unwrap();
    assert_eq!(store.get(b"a").unwrap(), None);
    assert_eq!(store.get(b"d").unwrap(), Some(b"4".to_vec()));
    assert_eq!(store.get(b"e").unwrap(), Some(b"5".to_vec()));
    assert_eq!(store.get(b"c").unwrap(), Some(b"x".to_vec()));
    // Empty values and values with every byte pass unchanged.
    let all: Vec<u8> = (0..=255).collect();
    store
        .apply(Batch::new().set(b"bin".to_vec(), all.clone()))
        .unwrap();
    store
        .apply(
            Batch::new()
                .require_eq(b"bin".to_vec(), all.clone())
                .set(b"bin".to_vec(), Vec::new()),
        )
        .unwrap();
    assert_eq!(store.get(b"bin").unwrap(), Some(Vec::new()));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn both_paths_report_the_failed_precondition_by_key_and_reason() {
    let url = require_pg!();
    for functions in [true, false] {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let store = handle(&url, &table, functions);
        assert_eq!(store.session_functions_in_use().unwrap(), functions);
        reports_failed_preconditions(&store);
    }
}

/// A put with 0 to 6 preconditions (a collection's put has three or four), on both
/// paths: each precondition failing in turn (a changed value, a key present that must be absent, a key missing
/// that must hold a value) is reported by its key and reason and writes nothing; all
/// holding, the put is written.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn puts_with_any_number_of_preconditions_are_checked_and_reported() {
    let url = require_pg!();
    for functions in [true, false] {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let store = handle(&url, &table, functions);
        for n in 0..=6usize {
            let key = |i: usize| format!("g{n}-{i}").into_bytes();
            // Even positions are present with a value, odd ones absent.
            for i in (0..n).step_by(2) {
                store
                    .apply(Batch::new().set(key(i), vec![i as u8]))
                    .unwrap();
            }
            let doc = format!("doc{n}").into_bytes();
            let holding = |failing: Option<usize>| {
                let mut b = Batch::new();
                for i in 0..n {
                    b = match (i % 2 == 0, failing == Some(i)) {
                        (true, false) => b.require_eq(key(i), vec![i as u8]),
                        (true, true) => b.require_eq(key(i), vec![99]),
                        (false, false) => b.require_absent(key(i)),
                        // A missing key required to hold a value.
                        (false, true) => b.require_eq(key(i), vec![1]),
                    };
                }
                b.set(doc.clone(), b"x".to_vec())
            };
            for failing in 0..n {
                let expected = match failing % 2 {
                    0 => ConflictReason::Changed,
                    _ => ConflictReason::Missing,
                };
                assert_eq!(
                    conflict(store.apply(holding(Some(failing)))),
                    (key(failing), expected),
                    "functions {functions}, {n} preconditions, #{failing} failing"
                );
                assert_eq!(store.get(&doc).unwrap(), None, "nothing written");
            }
            if n > 0 {
                // A key present that must be absent.
                let b = holding(None).require_absent(key(0));
                assert_eq!(
                    conflict(store.apply(b)),
                    (key(0), ConflictReason::Present),
                    "functions {functions}, {n} preconditions"
                );
                assert_eq!(store.get(&doc).unwrap(), None, "nothing written");
            }
            store.apply(holding(None)).unwrap();
            assert_eq!(store.get(&doc).unwrap(), Some(b"x".to_vec()), "{n}");
        }
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn claims_racing_across_the_two_paths_have_exactly_one_winner() {
    const CLAIMANTS: usize = 8;
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    // Two handles, one per path: their batches exclude each other by the same locks.
    let a = Store::new(handle(&url, &table, true));
    let b = Store::new(handle(&url, &table, false));
    for round in 0..10u8 {
        let claim = format!("claims/{round}").into_bytes();
        let barrier = Arc::new(Barrier::new(CLAIMANTS));
        let threads: Vec<_> = (0..CLAIMANTS)
            .map(|i| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                let (barrier, claim) = (Arc::clone(&barrier), claim.clone());
                thread::spawn(move || {
                    barrier.wait();
                    // A put-shaped batch on even rounds, a general one on odd rounds.
                    let mut batch = Batch::new().require_absent(claim.clone());
                    batch = batch.set(claim, vec![i as u8]);
                    if round % 2 == 1 {
                        batch = batch.set(format!("won/{round}/{i}").into_bytes(), vec![1]);
                    }
                    store.apply(batch)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let winners: Vec<usize> = (0..CLAIMANTS).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (i, r) in results.into_iter().enumerate() {
            if i != winners[0] {
                assert_eq!(conflict(r), (claim.clone(), ConflictReason::Present), "{i}");
            }
        }
        assert_eq!(a.get(&claim).unwrap(), Some(vec![winners[0] as u8]));
    }
}

/// A writer whose batch waits for the store lease, while the holder then changes the key
/// the batch requires, sees the holder's commit once it gets the lease: its conditional
/// write takes its snapshot after the locks (a statement whose snapshot predated the wait
/// would see the old value). Requiring the holder's value, it writes; requiring the value
/// from before, it is refused and writes nothing.
fn a_waiting_writer_sees_the_holders_commit(url: &str, functions: bool, requires_new: bool) {
    let table = scratch_table();
    let _owner = owner(url, &table);
    let holder = Store::new(handle(url, &table, functions));
    let writer = Store::new(handle(url, &table, functions));
    writer
        .apply(Batch::new().set(b"k".to_vec(), b"old".to_vec()))
        .unwrap();
    let session = ExclusiveSession::acquire(&holder, "holder", None).unwrap();
    let waiting = thread::spawn(move || {
        let required: &[u8] = if requires_new { b"holders" } else { b"old" };
        writer.apply(
            Batch::new()
                .require_eq(b"k".to_vec(), required.to_vec())
                .set(b"k".to_vec(), b"writers".to_vec()),
        )
    });
    // Wait (deterministically) until the writer is blocked on the lease lock.
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The writer's statement names the table (the function's name, or the comment
        // that opens the one-message string).
        let blocked: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND NOT l.granted \
                 AND strpos(a.query, $1) > 0",
                &[&table],
            )
            .unwrap()
            .get(0);
        if blocked > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the writer never waited");
        thread::yield_now();
    }
    session
        .apply(
            Batch::new()
                .require_eq(b"k".to_vec(), b"old".to_vec())
                .set(b"k".to_vec(), b"holders".to_vec()),
        )
        .unwrap();
    drop(session);
    let r = waiting.join().unwrap();
    if requires_new {
        r.unwrap();
        assert_eq!(holder.get(b"k").unwrap(), Some(b"writers".to_vec()));
    } else {
        assert_eq!(conflict(r), (b"k".to_vec(), ConflictReason::Changed));
        assert_eq!(holder.get(b"k").unwrap(), Some(b"holders".to_vec()));
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_writer_waiting_for_the_lease_sees_the_holders_commit_on_both_paths() {
    let url = require_pg!();
    for functions in [true, false] {
        for requires_new in [true, false] {
            a_waiting_writer_sees_the_holders_commit(&url, functions, requires_new);
        }
    }
}

/// A scratch database whose `PUBLIC` has no `TEMPORARY` privilege and a role (not a
/// superuser: superusers bypass privileges) that may create tables in it; both dropped
/// at the end.
struct NoTempDatabase {
    admin: postgres::Client,
    name: String,
    url: String,
}

impl NoTempDatabase {
    /// `None` (the test says it is skipped) when the server's user may not create roles
    /// and databases.
    fn create(url: &str) -> Option<Self> {
        let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
        let name = strata_postgres::testing::scratch_table("strata_notemp");
        if let Err(e) = admin.batch_execute(&format!("CREATE ROLE {name} LOGIN")) {
            println!("skipped: no_temp_privilege: cannot create a role ({e})");
            return None;
        }
        let config: postgres::Config = url.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            postgres::config::Host::Tcp(h) => h.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        // From here on, dropping the guard removes what was made.
        let mut db = NoTempDatabase {
            admin,
            url: format!("postgresql://{name}@{host}:{port}/{name}"),
            name: name.clone(),
        };
        // (`CREATE DATABASE` cannot share a query string: it refuses a transaction.)
        db.admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        db.admin
            .batch_execute(&format!("REVOKE TEMPORARY ON DATABASE {name} FROM PUBLIC"))
            .unwrap();
        let mut owner = config
            .clone()
            .dbname(&name)
            .connect(postgres::NoTls)
            .unwrap();
        owner
            .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {name}"))
            .unwrap();
        Some(db)
    }
}

impl Drop for NoTempDatabase {
    fn drop(&mut self) {
        let name = &self.name;
        // One statement each (`DROP DATABASE` refuses a transaction).
        let _ = self
            .admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        let _ = self
            .admin
            .batch_execute(&format!("DROP ROLE IF EXISTS {name}"));
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn without_the_temporary_privilege_connections_fall_back_to_one_message() {
    let url = require_pg!();
    let Some(db) = NoTempDatabase::create(&url) else {
        return;
    };
    let table = scratch_table();
    {
        let _owner = owner(&db.url, &table);
        // Asked for the functions, the connection could not create them: a working
        // connection on the one-message path, not a failed one.
        let store = handle(&db.url, &table, true);
        assert!(!store.session_functions_in_use().unwrap());
        reports_failed_preconditions(&store);
        // What is missing is the privilege: the role cannot create any temporary object.
        let mut check = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        let err = check
            .batch_execute("CREATE TEMPORARY TABLE strata_probe (x int)")
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{err:?}"
        );
        a_waiting_writer_sees_the_holders_commit(&db.url, true, true);
    }
    drop(db);
}
