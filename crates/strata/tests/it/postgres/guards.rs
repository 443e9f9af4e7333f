//! Guards on both ordinary write paths (the session function, one message): a guard
//! another handle changed refuses a write and writes nothing; two processes incrementing
//! the same keys lose no update. (Until session 25 these ran on the opt-in one-statement
//! path, removed then; the scenarios stay, on the paths every writer takes. A writer that
//! waited for the lease holder: strata-postgres `write_paths`.)

use super::{child_stdout, owner, require_pg, scratch_table, spawn_child};
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, ConflictReason, KvRead, KvWrite, StoreError};

/// The ordinary write paths: with the session functions (the default) and without them
/// (one message of three statements).
const PATHS: [bool; 2] = [true, false];

fn handle(url: &str, table: &str, functions: bool) -> PgStore {
    PgStore::connect_with(
        url,
        PgOptions::new().table(table).session_functions(functions),
    )
    .unwrap()
}

fn conflict(r: strata_store::Result<()>) -> (Vec<u8>, ConflictReason) {
    match r {
        Err(StoreError::Conflict { key, reason }) => (key, reason),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// A guard (a key the batch requires but does not write — as every collection write
/// requires the fence record) raised by another handle between two writes refuses the
/// second write and writes nothing, present or absent, on both paths.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_guard_changed_by_another_handle_refuses_and_writes_nothing() {
    let url = require_pg!();
    for functions in PATHS {
        a_guard_changed_on(&url, functions);
    }
}

fn a_guard_changed_on(url: &str, functions: bool) {
    let table = scratch_table();
    let _owner = owner(url, &table);
    let (ours, theirs) = (
        handle(url, &table, functions),
        handle(url, &table, functions),
    );
    theirs
        .apply(Batch::new().set(b"fence".to_vec(), b"v1".to_vec()))
        .unwrap();
    let write = |n: u8| {
        Batch::new()
            .require_eq(b"fence".to_vec(), b"v1".to_vec())
            .require_absent(b"window".to_vec())
            .set(b"doc".to_vec(), vec![n])
    };
    ours.apply(write(1)).unwrap();
    // Through the primitive (as a collection writes).
    assert!(ours
        .read_modify_write(&[b"doc"], &mut |_| Some(write(2)))
        .unwrap());
    assert_eq!(ours.get(b"doc").unwrap(), Some(vec![2]));

    // The fence is raised by the other handle: the next write is refused.
    theirs
        .apply(
            Batch::new()
                .require_eq(b"fence".to_vec(), b"v1".to_vec())
                .set(b"fence".to_vec(), b"v2".to_vec()),
        )
        .unwrap();
    let r = ours.read_modify_write(&[b"doc"], &mut |_| Some(write(3)));
    assert_eq!(
        conflict(r.map(|_| ())),
        (b"fence".to_vec(), ConflictReason::Changed)
    );
    assert_eq!(ours.get(b"doc").unwrap(), Some(vec![2]), "nothing written");

    // A key required absent is created by the other handle: refused too.
    theirs
        .apply(Batch::new().set(b"fence".to_vec(), b"v1".to_vec()))
        .unwrap();
    theirs
        .apply(Batch::new().set(b"window".to_vec(), b"open".to_vec()))
        .unwrap();
    let r = ours.read_modify_write(&[b"doc"], &mut |_| Some(write(4)));
    assert_eq!(
        conflict(r.map(|_| ())),
        (b"window".to_vec(), ConflictReason::Present)
    );
    assert_eq!(ours.get(b"doc").unwrap(), Some(vec![2]), "nothing written");
}

const CHILD: &str = "STRATA_PG_GUARDS_CHILD";
const TEST: &str = "postgres::guards::two_processes_incrementing_the_same_keys_lose_no_update";
const INCREMENTS: u64 = 200;
const COUNTERS: [&[u8]; 3] = [b"c0", b"c1", b"c2"];

/// One child: `INCREMENTS` read-modify-write increments of each shared counter (the
/// session functions on or off: `f:` or `m:` before the table's name), then prints "done".
fn child(role: &str) {
    let (path, table) = role.split_once(':').expect("f:TABLE or m:TABLE");
    let pg = handle(&super::pg_url(), table, path == "f");
    for _ in 0..INCREMENTS {
        for key in COUNTERS {
            let ok = pg
                .read_modify_write(&[key], &mut |values| {
                    let n = match values[0] {
                        Some(v) => u64::from_be_bytes(v.try_into().unwrap()),
                        None => 0,
                    };
                    Some(Batch::new().set(key.to_vec(), (n + 1).to_be_bytes().to_vec()))
                })
                .unwrap();
            assert!(ok);
        }
    }
    println!("done {}", INCREMENTS * COUNTERS.len() as u64);
}

/// Two processes increment the same three counters 200 times each at once, every
/// increment decided on the value the handle expects and checked by the server in the
/// statement that writes — one process on the session function, the other on one
/// message: each counter ends at exactly 400 — no lost update.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn two_processes_incrementing_the_same_keys_lose_no_update() {
    if let Ok(role) = std::env::var(CHILD) {
        child(&role);
        return;
    }
    let url = require_pg!();
    let table = scratch_table();
    let owner = owner(&url, &table);
    let children = [
        spawn_child(TEST, CHILD, format!("f:{table}"), &url),
        spawn_child(TEST, CHILD, format!("m:{table}"), &url),
    ];
    for (i, c) in children.into_iter().enumerate() {
        let stdout = child_stdout(c, &format!("incrementer {i}"));
        let done = format!("done {}", INCREMENTS * COUNTERS.len() as u64);
        assert!(
            stdout.lines().any(|l| l == done),
            "incrementer {i} did not finish:\n{stdout}"
        );
    }
    for key in COUNTERS {
        let v = owner.get(key).unwrap().unwrap();
        assert_eq!(
            u64::from_be_bytes(v.try_into().unwrap()),
            2 * INCREMENTS,
            "{}: an increment was lost",
            String::from_utf8_lossy(key)
        );
    }
}
