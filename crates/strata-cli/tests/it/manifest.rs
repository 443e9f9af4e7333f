//! `strata verify` against the bulk-operation manifests (#23 "certify only what strata
//! owns"):
//!
//! * `strata migrate` certifies only what strata owns — a collection — never the 14
//!   Numax sync tables, which Numax keeps writing: a migrated Numax store is byte for byte
//!   what Numax's own migration leaves (the records plus the 14 v1 headers), and Numax
//!   writing afterwards (op-log eviction included) raises no alarm.
//! * On a certified collection, records lost behind strata's back fail verification
//!   naming the collection (exit 4, "restore"); records added or changed since are
//!   reported as such, exit 0, and never advise a restore.
//!
//! (Before #23 these tests certified `gcounter-materialized` and asserted a changed value
//! there failed with exit 4 and "restore it from a backup"; that was the false alarm.)

use crate::support::{snapshot, strata_db};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use strata::layout::envelope::{encode, Envelope};
use strata::layout::keys::doc_key;
use strata::numax::wire;
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn open(path: &Path) -> Store {
    strata_redb::RedbStore::open_existing(path)
        .unwrap()
        .into_store()
}

fn with_store(path: &Path, f: impl FnOnce(&Store)) {
    let store = open(path);
    f(&store);
    store.flush().unwrap();
}

fn doc(i: u32) -> Vec<u8> {
    encode(
        Envelope::new(1, 1),
        &serde_json::to_vec(&json!({"id": format!("a{i:03}"), "n": i})).unwrap(),
    )
}

/// A redb store with the collection `acc` of 40 documents whose header is missing (as a
/// partial restore leaves one), certified by `strata migrate`.
fn migrated_collection(path: &Path) {
    {
        let store = strata_redb::RedbStore::create_store(path).unwrap();
        Database::builder(store.clone())
            .open()
            .unwrap()
            .collection::<Value>("acc", CollectionOptions::new())
            .unwrap();
        let mut b = Batch::new().delete(b"__nx/schema/acc".to_vec());
        for i in 0..40u32 {
            b = b.set(doc_key("acc", &format!("a{i:03}")), doc(i));
        }
        store.unguarded_backend().apply(b).unwrap();
        store.flush().unwrap();
    }
    let out = strata_db(path, &["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let out = strata_db(path, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_certified_collection_verifies_and_says_what_was_compared() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated_collection(&db);
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("`acc` holds exactly the 40 records `migrate` certified")
            && stdout.contains("compared the record count and the digest of every key and value under `__nx/doc/acc/`"),
        "{stdout}"
    );
    let out = strata_db(&db, &["verify", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let scopes = doc["scopes"].as_array().unwrap();
    assert_eq!(scopes.len(), 1, "{doc}");
    let acc = &scopes[0];
    assert_eq!(
        (
            acc["scope"].as_str(),
            acc["verdict"].as_str(),
            acc["records"].as_u64(),
            acc["prefix"].as_str()
        ),
        (Some("acc"), Some("intact"), Some(40), Some("__nx/doc/acc/"))
    );
    assert!(acc["compared"].as_str().unwrap().contains("record count"));
}

#[test]
fn records_lost_behind_stratas_back_fail_verify_naming_the_collection() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated_collection(&db);
    // Straight to the backend: no manifest bookkeeping, as a lost write or another tool.
    with_store(&db, |s| {
        s.unguarded_backend()
            .apply(
                Batch::new()
                    .delete(doc_key("acc", "a007"))
                    .delete(doc_key("acc", "a008")),
            )
            .unwrap()
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("2 records certified by `migrate` at ")
            && err.contains("are missing from `acc` (40 certified, 38 now")
            && err.contains("restore"),
        "{err}"
    );
    // One document under --json, carrying the error (#23 item 7).
    let out = strata_db(&db, &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", text(&out.stdout)));
    assert_eq!(doc["error"]["exit_code"], 4, "{doc}");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("are missing from `acc`"));
    assert_eq!(doc["scopes"][0]["verdict"], "missing");
}

#[test]
fn records_added_or_changed_since_are_reported_never_an_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated_collection(&db);
    // Another build of the application (without this build's bookkeeping) changed one
    // record and added one: nothing is missing.
    with_store(&db, |s| {
        s.unguarded_backend()
            .apply(
                Batch::new()
                    .set(doc_key("acc", "a007"), doc(700))
                    .set(doc_key("acc", "new"), doc(999)),
            )
            .unwrap()
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("`acc` was written since `migrate` certified it")
            && stdout.contains("40 records then, 41 now")
            && stdout.contains("added or changed since")
            && stdout.contains("nothing needs restoring"),
        "{stdout}"
    );
    let all = format!("{stdout}{}", text(&out.stderr));
    assert!(
        !all.contains("restore it") && !all.contains("from a backup"),
        "{all}"
    );
    let out = strata_db(&db, &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "ok");
    assert_eq!(doc["scopes"][0]["verdict"], "changed");
}

#[test]
fn writes_through_strata_after_migrate_raise_no_false_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated_collection(&db);
    with_store(&db, |s| {
        s.apply(
            Batch::new()
                .delete(doc_key("acc", "a003"))
                .delete(doc_key("acc", "a004")),
        )
        .unwrap();
        assert_eq!(
            s.get(&strata_store::manifest::manifest_key("migrate", "acc"))
                .unwrap(),
            None
        );
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("`acc` holds exactly"));
}

/// Legacy (header-less) Numax records: every family of op, from two nodes, as a Numax
/// release wrote them (the sync runtime writing into a store, headers dropped).
fn legacy_numax(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let store = strata_redb::RedbStore::create_store(path).unwrap();
    crate::support::legacy_records(&store, 600);
    store.flush().unwrap();
    snapshot(&store)
}

/// What Numax's own migration leaves (nx-core's `schema.rs`): the records untouched plus
/// the 14 headers `NXDB | version 1 | table id`.
fn numax_migrated(records: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = records.clone();
    for (id, name, _) in strata::numax::NUMAX_TABLES {
        let mut header = b"NXDB".to_vec();
        header.extend(1u16.to_be_bytes());
        header.extend(id.to_be_bytes());
        out.insert(format!("__nx/schema/{name}").into_bytes(), header);
    }
    out
}

/// Numax writing a store after strata migrated it: its sync manager (strata-sync is the
/// Numax-compatible runtime) applies `n` ops through Numax's remote-apply path with a
/// small op-log limit, so old op-log and seen-op entries are evicted as Numax evicts
/// them. Numax knows nothing of strata's manifests: its writes go straight to the store
/// (computed on a copy, then applied to the backend, bypassing strata's bookkeeping).
fn numax_writes(path: &Path, n: usize) -> usize {
    let store = open(path);
    let before = snapshot(&store);
    let scratch = Store::new(MemoryStore::new());
    let mut b = Batch::new();
    for (k, v) in &before {
        b = b.set(k.clone(), v.clone());
    }
    scratch.apply(b).unwrap();
    let sync = strata_sync::SyncManager::open_with(
        scratch.clone(),
        strata_sync::SyncOptions::default()
            .node_id("numax-local")
            .op_log_limit(200)
            .seen_ops_limit(200),
    )
    .unwrap();
    let ops: Vec<wire::Op> = (0..n)
        .map(|i| {
            let kind = match i % 3 {
                0 => wire::OpKind::GCounterIncrement {
                    key: format!("counter-{:08}", i % 50),
                    increment: 1,
                },
                1 => wire::OpKind::PNCounterDecrement {
                    key: format!("stock-{}", i % 7),
                    decrement: 2,
                },
                _ => wire::OpKind::LwwRegisterSet {
                    key: format!("reg-{}", i % 11),
                    value: vec![i as u8; 3],
                    timestamp_ms: i as u64,
                },
            };
            wire::Op::new(format!("remote-{i:06}"), "node-b", kind)
        })
        .collect();
    for chunk in ops.chunks(100) {
        sync.apply_batch(chunk).unwrap();
    }
    let after = snapshot(&scratch);
    let mut diff = Batch::new();
    let mut evicted = 0;
    for k in before.keys() {
        if !after.contains_key(k) {
            evicted += 1;
            diff = diff.delete(k.clone());
        }
    }
    for (k, v) in &after {
        if before.get(k) != Some(v) {
            diff = diff.set(k.clone(), v.clone());
        }
    }
    store.unguarded_backend().apply(diff).unwrap();
    store.flush().unwrap();
    evicted
}

#[test]
fn a_migrated_numax_store_is_byte_for_byte_numaxs_and_numax_writing_it_is_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax.redb");
    let legacy = legacy_numax(&db);
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Byte for byte what Numax's own migration produces: no manifest, nothing else.
    let migrated = snapshot(&open(&db));
    assert_eq!(migrated, numax_migrated(&legacy));
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Numax keeps writing its tables, evicting old op-log entries.
    let evicted = numax_writes(&db, 3_000);
    assert!(evicted > 100, "only {evicted} records evicted");
    for args in [&["verify"][..], &["verify", "--json"], &["status"]] {
        let out = strata_db(&db, args);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {all}");
        assert!(
            !all.contains("restore") && !all.contains("differs"),
            "{args:?}: {all}"
        );
    }
}
