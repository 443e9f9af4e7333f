//! The lock protocol every writer of a table shares (`store/write.rs`, "The lock
//! protocol"), pinned from outside: a raw connection plays another writer — another
//! process, or another strata build — holding exactly the locks that writer takes, with
//! its write still uncommitted, and an ordinary put (on each of its paths: the session
//! function, one message) must wait for it and then decide on
//! its commit. A protocol with fewer locks per put (the lease and table locks folded into
//! one, or no key lock on a key the put only requires) lets the put through: it writes
//! past the fence, or over the other writer's document, and these tests fail.

use crate::{owner, require_pg, scratch_table};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
use strata_postgres::testing::{key_lock, protocol_locks};
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, ConflictReason, KvRead, KvWrite, StoreError};

/// The key every put of these tests requires absent (a fence record, as a collection's
/// put requires the store's fence) and the document it writes.
const GUARD: &[u8] = b"__nx/fence";
const DOC: &[u8] = b"__nx/doc/acc/a";

/// The other writer: the locks it holds (`$1` lease id, `$2` table id, `$3` class, `$4`
/// the key lock of the key it writes) and the key it writes.
struct Other {
    what: &'static str,
    locks: &'static str,
    writes: &'static [u8],
}

const OTHERS: [Other; 4] = [
    // An ordinary writer of the guard (the gate recording a pending cutover, the cutover
    // coordinator under its named lease, an abort): lease and table shared, the guard's
    // key lock exclusive.
    Other {
        what: "an ordinary writer of the key the put requires",
        locks: "SELECT pg_advisory_xact_lock_shared($1::int8), pg_advisory_xact_lock_shared($2::int8), \
                pg_advisory_xact_lock($3::int4, $4::int4)",
        writes: GUARD,
    },
    // An ordinary writer's batch of many keys: the table lock exclusive, no key locks.
    Other {
        what: "a table-wide batch writing the put's document",
        locks: "SELECT pg_advisory_xact_lock_shared($1::int8), pg_advisory_xact_lock($2::int8), \
                $3::int4, $4::int4",
        writes: DOC,
    },
    // The lease holder (its lock session holds the lease exclusively) writing the guard
    // with its key lock.
    Other {
        what: "the lease holder writing the key the put requires",
        locks: "SELECT pg_advisory_xact_lock($1::int8), pg_advisory_xact_lock_shared($2::int8), \
                pg_advisory_xact_lock($3::int4, $4::int4)",
        writes: GUARD,
    },
    // The lease holder's table-wide batch.
    Other {
        what: "the lease holder's table-wide batch writing the put's document",
        locks: "SELECT pg_advisory_xact_lock($1::int8), pg_advisory_xact_lock($2::int8), \
                $3::int4, $4::int4",
        writes: DOC,
    },
];

/// The paths of an ordinary writer's put: with the session functions, without them.
const PATHS: [bool; 2] = [true, false];

fn put_waits_then_decides_on_the_others_commit(url: &str, other: &Other, functions: bool) {
    let table = scratch_table();
    let _owner = owner(url, &table);
    let store = PgStore::connect_with(
        url,
        PgOptions::new().table(&table).session_functions(functions),
    )
    .unwrap();
    // Every connection of the handle set up (functions created, statements prepared).
    assert_eq!(store.get(DOC).unwrap(), None);
    let (lease, table_lock, class) = protocol_locks(&table);
    let mut raw = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let mut tx = raw.transaction().unwrap();
    tx.execute(
        other.locks,
        &[&lease, &table_lock, &class, &key_lock(other.writes)],
    )
    .unwrap();
    tx.execute(
        &format!(r#"INSERT INTO "{table}" (k, v) VALUES ($1, $2)"#),
        &[&other.writes, &b"other".as_slice()],
    )
    .unwrap();
    let other_pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    // The put, on its own thread: it requires the guard and the document absent.
    let (done_tx, done) = mpsc::channel();
    let putter = thread::spawn(move || {
        let r = store.apply(
            Batch::new()
                .require_absent(GUARD.to_vec())
                .require_absent(DOC.to_vec())
                .set(DOC.to_vec(), b"put".to_vec()),
        );
        let _ = done_tx.send(());
        (store, r)
    });
    // Until the put waits for a lock (any: an advisory one, or a row's), or finishes.
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE pid <> $1 AND wait_event_type = 'Lock' AND strpos(query, $2) > 0",
                &[&other_pid, &table],
            )
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        if done.try_recv().is_ok() {
            let (_, r) = putter.join().unwrap();
            panic!(
                "{} (session functions {functions}): the put did not wait for the other writer's locks and finished before its commit: {r:?}",
                other.what
            );
        }
        assert!(
            Instant::now() < deadline,
            "{}: the put never waited",
            other.what
        );
        thread::yield_now();
    }
    tx.commit().unwrap();
    let (store, r) = putter.join().unwrap();
    match r {
        Err(StoreError::Conflict { key, reason }) => {
            assert_eq!(
                (key.as_slice(), reason),
                (other.writes, ConflictReason::Present),
                "{} (session functions {functions})",
                other.what
            );
        }
        r => panic!(
            "{} (session functions {functions}): the put must fail on the other writer's commit, got {r:?}",
            other.what
        ),
    }
    // Nothing written past the other writer's commit.
    let doc = store.get(DOC).unwrap();
    let expected: Option<&[u8]> = (other.writes == DOC).then_some(b"other");
    assert_eq!(
        doc.as_deref(),
        expected,
        "{} (session functions {functions})",
        other.what
    );
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_put_waits_for_every_writer_the_protocol_excludes_and_decides_on_its_commit() {
    let url = require_pg!();
    for other in &OTHERS {
        for path in PATHS {
            put_waits_then_decides_on_the_others_commit(&url, other, path);
        }
    }
}
