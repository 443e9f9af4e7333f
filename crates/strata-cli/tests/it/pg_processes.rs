//! Many processes, one PostgreSQL store: real `strata` child processes against the server
//! in `STRATA_PG_URL` (each test on its own scratch table, dropped afterwards).
//!
//! * three `strata migrate` racing: one does the work, the others wait for its store
//!   lease and then find nothing to do; the store is clean and a rerun is a no-op;
//! * a `strata migrate` holding the lease is SIGKILLed mid-run while another waits: the
//!   waiter takes the lease over, resumes from the checkpoint and finishes;
//! * `status`, `migrate`, `verify` and `fence` on PostgreSQL, with the password never
//!   shown.
//!
//! Built without `STRATA_PG_URL` the tests are ignored ("needs STRATA_PG_URL").
#![cfg(feature = "postgres")]

use crate::support::pg::{db_url, owner, scratch_table, with_params};
use crate::support::{legacy_records, payload, snapshot, stderr, strata_db};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata_store::{KvRead, Store};

/// Every populated sync table has a current (v1) header and no checkpoint is left.
fn assert_clean(store: &Store) {
    for &(id, name, _) in strata::numax::NUMAX_TABLES.iter() {
        assert_eq!(
            store.get(&checkpoint_key(name)).unwrap(),
            None,
            "{name}: a checkpoint is left"
        );
        if let Some(h) = store.get(&header_key(name)).unwrap() {
            let h = SchemaHeader::decode(&h).unwrap();
            assert_eq!((h.table_id, h.version), (id, 1), "{name}");
        }
    }
}

/// A `strata migrate` child whose stderr carries one line per committed batch.
fn spawn_migrate(db: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(["migrate", "--max-records", "256"])
        .env("STRATA_LOG", "strata::pass=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Counts a child's committed batches (and keeps its stderr) on a thread.
fn count_batches(child: &mut Child) -> JoinHandle<(usize, String)> {
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut batches = 0;
        let mut text = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("pass batch committed") {
                batches += 1;
            } else {
                text.push_str(&line);
                text.push('\n');
            }
        }
        (batches, text)
    })
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn three_racing_migrates_have_one_winner_and_leave_a_clean_store() {
    let table = scratch_table("strata_cli");
    let store = owner(&table);
    let expected = legacy_records(&store, 20_000);
    let db = db_url(&table);

    let mut children: Vec<Child> = (0..3).map(|_| spawn_migrate(&db)).collect();
    let counters: Vec<_> = children.iter_mut().map(count_batches).collect();
    let mut workers = 0;
    for (mut child, counter) in children.into_iter().zip(counters) {
        let status = child.wait().unwrap();
        let (batches, text) = counter.join().unwrap();
        assert!(status.success(), "{status:?}\n{text}");
        if batches > 0 {
            workers += 1;
        }
    }
    // One process migrated; the others waited for its lease and found the work done.
    assert_eq!(workers, 1, "exactly one migrate does the work");
    let all = snapshot(&store);
    assert!(payload(&all) == expected, "a payload byte changed");
    assert_clean(&store);

    // A rerun is a no-op, and the read-only commands agree.
    let mut rerun = spawn_migrate(&db);
    let counter = count_batches(&mut rerun);
    assert!(rerun.wait().unwrap().success());
    assert_eq!(counter.join().unwrap().0, 0, "the rerun rewrote nothing");
    assert!(snapshot(&store) == all, "the rerun changed the store");
    let out = strata_db(&db, &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_sigkilled_migrate_is_taken_over_and_finished_by_another_process() {
    use std::os::unix::process::ExitStatusExt;
    let table = scratch_table("strata_cli");
    let store = owner(&table);
    let expected = legacy_records(&store, 40_000);
    let db = db_url(&table);

    let mut holder = spawn_migrate(&db);
    let lines = BufReader::new(holder.stderr.take().unwrap()).lines();
    let mut seen = 0;
    let mut successor = None;
    for line in lines {
        let Ok(line) = line else { break };
        if line.contains("pass batch committed") {
            seen += 1;
            if seen == 1 {
                // It holds the lease now: a second process starts and waits for it.
                successor = Some(spawn_migrate(&db));
            }
            if seen == 3 {
                holder.kill().unwrap(); // SIGKILL
                break;
            }
        }
    }
    let status = holder.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "the holder was killed mid-run");
    // The kill left a checkpoint behind (the run was not finished).
    let left = strata::numax::NUMAX_TABLES
        .iter()
        .filter(|&&(_, name, _)| store.get(&checkpoint_key(name)).unwrap().is_some())
        .count();
    assert!(left >= 1, "no checkpoint after the kill");

    let mut successor = successor.unwrap();
    let counter = count_batches(&mut successor);
    let status = successor.wait().unwrap();
    let (batches, text) = counter.join().unwrap();
    assert!(status.success(), "{status:?}\n{text}");
    assert!(batches > 0, "the successor resumed the work");
    assert!(
        payload(&snapshot(&store)) == expected,
        "a payload byte changed"
    );
    assert_clean(&store);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn status_migrate_verify_and_fence_work_on_postgres_without_showing_the_password() {
    let table = scratch_table("strata_cli");
    let store = owner(&table);
    legacy_records(&store, 500);
    let db = db_url(&table);
    // Passwords in every URL form (the test server trusts local connections, so they are
    // accepted and ignored): none may appear in any output.
    let mut dbs = vec![with_params(&db, "password=s3cr@t")];
    if let Some(rest) = db.strip_prefix("postgresql://postgres@") {
        dbs.push(format!("postgresql://postgres:s3cr@t@{rest}"));
    }
    for db in &dbs {
        let out = strata_db(db, &["status", "--json"]);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!text.contains("s3cr"), "{text}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(doc["db"].as_str().unwrap().contains("***"), "{doc}");
        // Legacy tables: status says a migration is needed (not 0, not a crash).
        assert_ne!(out.status.code(), Some(0), "{text}");
    }

    let out = strata_db(&dbs[0], &["migrate", "--json"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("s3cr"), "{text}");
    assert_clean(&store);

    for args in [
        &["status"][..],
        &["verify"],
        &["fence"],
        &["fence", "--json"],
    ] {
        let out = strata_db(&db, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }

    // A missing table is reported like a missing directory, in one line, and not created.
    let missing = db_url(&scratch_table("strata_cli"));
    let out = strata_db(&missing, &["status"]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A wrong password form still never shows, even in a failure.
    let out = strata_db(
        "postgres://alice:s3cr@t@127.0.0.1:1/db?connect_timeout=2",
        &["status"],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(!stderr(&out).contains("s3cr"), "{}", stderr(&out));
    assert_eq!(stderr(&out).trim_end().lines().count(), 1);
}
