//! strata is not the only writer: a Numax datastore strata migrated (sled, closed cleanly
//! by strata) is then written by a plain sled program, as Numax keeps doing; a redb file
//! is held open by another process. Every command gives an accurate verdict: the other
//! program's writes are not damage, and a file in use is "in use", not corrupt.

use crate::support::{json_of, legacy_records, stderr, stdout, strata_db};
use std::path::Path;
use strata::numax::wire;
use strata_store::{KvRead, KvWrite};

/// What Numax (a plain sled program, no strata) does to the datastore between strata's
/// runs: opens it, writes records of its own tables and an application key, closes it.
fn numax_writes(db: &Path, run: u32) {
    // sled releases its file lock when its last background thread of an earlier handle
    // in this process ends, not when the handle is dropped: wait for it, as strata does.
    let mut tries = 0;
    let sled = loop {
        match sled::open(db) {
            Ok(sled) => break sled,
            Err(e) if tries < 400 => {
                tries += 1;
                if tries == 1 {
                    println!("waiting for sled's lock: {e}");
                }
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            Err(e) => panic!("sled::open: {e}"),
        }
    };
    let id = format!("op-zz-{run:04}");
    let op = wire::Op::new(
        id.clone(),
        "node-b",
        wire::OpKind::GCounterIncrement {
            key: "visits".into(),
            increment: 1,
        },
    );
    sled.insert(
        wire::key(wire::OP_LOG_PREFIX, &id),
        wire::encode_op_log(1_000_000 + u64::from(run), &op).unwrap(),
    )
    .unwrap();
    sled.insert(
        wire::key(wire::GCOUNTER_PREFIX, "visits"),
        wire::encode_gcounter_materialized(u64::from(run)),
    )
    .unwrap();
    // Runtime metadata outside `__nx/`, below and above every strata key.
    sled.insert(format!("A/runtime/{run}"), b"node-b".to_vec())
        .unwrap();
    sled.insert(format!("zz/app/{run}"), b"kept".to_vec())
        .unwrap();
    sled.flush().unwrap();
}

fn assert_healthy(db: &Path, what: &str) {
    for cmd in ["status", "verify", "collections"] {
        let out = strata_db(db, &[cmd, "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: {cmd}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_eq!(json_of(&out)["verdict"], "ok", "{what}: {cmd}");
    }
    let out = strata_db(db, &["inspect", "op-log", "--limit", "2"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: inspect: {}",
        stderr(&out)
    );
}

#[test]
fn a_numax_sled_store_written_by_plain_sled_after_strata_migrated_it_is_not_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        legacy_records(&store, 2_000);
        store.flush().unwrap();
    }
    // A sled program that is not strata wrote it last (no seal).
    numax_writes(&db, 0);
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(db.join("strata.seal").exists(), "migrate closed it cleanly");
    numax_writes(&db, 1);
    assert_healthy(&db, "after a write following migrate");
    // A writable strata session that writes nothing (`migrate` of a current store), then
    // Numax again.
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    numax_writes(&db, 2);
    assert_healthy(&db, "after a write following an idle session");
    let store = strata_sled::SledStore::open_read_only(&db)
        .unwrap()
        .into_store();
    for run in 0..3u32 {
        let key = wire::key(wire::OP_LOG_PREFIX, &format!("op-zz-{run:04}"));
        assert!(store.get(&key).unwrap().is_some(), "run {run}");
    }
}

#[test]
fn a_redb_file_another_process_holds_open_is_in_use_not_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.redb");
    {
        let store = strata_redb::RedbStore::create_store(&db).unwrap();
        legacy_records(&store, 100);
        store.flush().unwrap();
    }
    // Another process holds the file open for writing: this test process (the strata
    // commands are child processes).
    let holder = strata_redb::RedbStore::open_existing(&db).unwrap();
    for args in [
        &["status"][..],
        &["verify"],
        &["collections"],
        &["inspect", "op-log"],
        &["migrate"],
    ] {
        let out = strata_db(&db, args);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", stdout(&out));
        assert_ne!(out.status.code(), Some(4), "{args:?}: {err}");
        assert!(
            err.contains("in use") || err.contains("another process"),
            "{args:?}: {err}"
        );
        for wrong in ["damaged", "corrupt", "restore", "empty"] {
            assert!(!err.contains(wrong), "{args:?}: {err}");
        }
    }
    drop(holder);
    let out = strata_db(&db, &["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}
