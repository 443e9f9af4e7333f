//! Stuck and corrupt metadata: `status`, `verify` and `migrate` report it (exit 4, JSON
//! under `--json`), and `strata repair` lists it and, with `--apply`, fixes it in one
//! atomic batch without touching a data record.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use strata::header::{checkpoint_key, header_key};
use strata::migrate::MigrationCheckpoint;
use strata::SchemaHeader;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

fn strata(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", stdout(o), stderr(o)))
}

fn with_store<T>(db: &Path, f: impl FnOnce(&Store) -> T) -> T {
    let store = strata_sled::SledStore::open_store(db).unwrap();
    let out = f(&store);
    store.flush().unwrap();
    out
}

fn put(db: &Path, key: &[u8], value: &[u8]) {
    with_store(db, |s| {
        s.apply(Batch::new().set(key.to_vec(), value.to_vec()))
            .unwrap()
    });
}

fn delete(db: &Path, key: &[u8]) {
    with_store(db, |s| s.apply(Batch::new().delete(key.to_vec())).unwrap());
}

fn all(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    with_store(db, |s| {
        let mut out = BTreeMap::new();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let page = s
                .scan(
                    b"",
                    cursor.as_deref(),
                    ScanLimits::new(1000, 1 << 24).unwrap(),
                )
                .unwrap();
            for r in &page.records {
                out.insert(r.key.clone(), r.value.clone());
            }
            match page.cursor() {
                Some(c) if page.more => cursor = Some(c.to_vec()),
                _ => break,
            }
        }
        out
    })
}

/// The data records: documents and the sync tables.
#[allow(dead_code)]
fn data(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    all(db)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/") || k.starts_with(b"__nx/crdt/"))
        .collect()
}

/// A store with collection `users` (two documents).
fn collection_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        let users = database
            .collection::<serde_json::Value>("users", strata::CollectionOptions::new())
            .unwrap();
        users
            .put("a", &serde_json::json!({"id": "a", "n": 1}))
            .unwrap();
        users
            .put("b", &serde_json::json!({"id": "b", "n": 2}))
            .unwrap();
    });
    db
}

/// A legacy (header-less) Numax store: three op-log records and a counter.
fn legacy_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        for i in 1..=3u64 {
            let id = format!("op-{i}");
            let op = serde_json::json!({
                "id": id,
                "origin": "n1",
                "kind": {"GCounterIncrement": {"key": "visits", "increment": 1}}
            });
            let mut v = i.to_be_bytes().to_vec();
            v.extend_from_slice(&serde_json::to_vec(&op).unwrap());
            s.apply(Batch::new().set(format!("__nx/crdt/op-log/{id}").into_bytes(), v))
                .unwrap();
        }
        s.apply(Batch::new().set(
            b"__nx/crdt/gcounter/visits".to_vec(),
            3u64.to_le_bytes().to_vec(),
        ))
        .unwrap();
    });
    db
}

/// Runs `status`, `verify` and `migrate` (and `migrate --dry-run`) with and without
/// `--json` and checks each exits `code` with `needle` in its message (JSON too).
fn all_report(db: &Path, code: i32, needle: &str) {
    for cmd in [
        &["status"][..],
        &["verify"],
        &["migrate"],
        &["migrate", "--dry-run"],
    ] {
        let out = strata(db, cmd);
        assert_eq!(out.status.code(), Some(code), "{cmd:?}: {out:?}");
        let text = stdout(&out) + &stderr(&out);
        assert!(text.contains(needle), "{cmd:?}: {text}");
        let mut with_json = cmd.to_vec();
        with_json.push("--json");
        let out = strata(db, &with_json);
        assert_eq!(out.status.code(), Some(code), "{with_json:?}: {out:?}");
        let doc = json(&out);
        assert!(doc.to_string().contains(needle), "{with_json:?}: {doc}");
    }
}

#[test]
fn a_malformed_or_lagging_catalog_counter_exits_4_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    assert_eq!(strata(&db, &["verify"]).status.code(), Some(0));
    let before = all(&db);
    // The 3-byte counter of issue 13, a counter behind the recorded id, a missing one.
    for seq in [Some(&b"\x04\x00\x00"[..]), Some(b"\x03\xff"), None] {
        match seq {
            Some(v) => put(&db, b"__nx/catalog-seq", v),
            None => delete(&db, b"__nx/catalog-seq"),
        }
        all_report(&db, 4, "__nx/catalog-seq");
        let mut expected = before.clone();
        match seq {
            Some(v) => expected.insert(b"__nx/catalog-seq".to_vec(), v.to_vec()),
            None => expected.remove(&b"__nx/catalog-seq"[..]),
        };
        assert_eq!(all(&db), expected, "nothing written");
    }
}

#[test]
fn every_kind_of_corrupt_catalog_record_exits_4_with_json() {
    let cases: [(&[u8], &[u8]); 6] = [
        (b"__nx/catalog/users", b"NXCL\x01\x04"),       // length
        (b"__nx/catalog/users", b"NXCX\x01\x04\x00"),   // magic
        (b"__nx/catalog/users", b"NXCL\x01\x00\x05"),   // id below 1024
        (b"__nx/catalog/other", b"NXCL\x01\x04\x00"),   // duplicate id
        (b"__nx/catalog/op-log", b"NXCL\x01\x04\x01"),  // built-in name
        (b"__nx/catalog/bad\xff", b"NXCL\x01\x04\x01"), // non-UTF-8 name
    ];
    for (key, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        let db = collection_db(dir.path());
        put(&db, key, value);
        let before = all(&db);
        all_report(&db, 4, "__nx/catalog/");
        assert_eq!(all(&db), before, "nothing written");
    }
}

fn op_log_checkpoint(cursor: &[u8]) -> Vec<u8> {
    MigrationCheckpoint {
        table_id: 14,
        from: 0,
        to: 1,
        cursor: cursor.to_vec(),
    }
    .encode()
}

#[test]
fn a_checkpoint_cursor_past_the_last_record_is_a_corrupt_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    // Inside the prefix, after the last key: resuming would validate nothing.
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/zzz"),
    );
    let before = all(&db);
    all_report(&db, 4, "past the last record");
    assert_eq!(all(&db), before, "no header written, nothing changed");
    assert!(!all(&db).contains_key(&header_key("op-log")));

    // At the last key itself (a crash right before the final batch), it resumes.
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/op-3"),
    );
    let out = strata(&db, &["migrate", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = strata(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        all(&db).get(&header_key("op-log")),
        Some(&SchemaHeader::new(1, 14).encode().to_vec())
    );
}

#[test]
fn a_checkpoint_with_a_cursor_on_an_empty_table_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    // seen-ops holds no record: any cursor lies past its end.
    let ck = MigrationCheckpoint {
        table_id: 13,
        from: 0,
        to: 1,
        cursor: b"__nx/crdt/seen-op/x".to_vec(),
    }
    .encode();
    put(&db, &checkpoint_key("seen-ops"), &ck);
    let before = all(&db);
    all_report(&db, 4, "seen-ops");
    assert_eq!(all(&db), before);
}
