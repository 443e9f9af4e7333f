//! `strata verify` against the bulk-operation manifests: a record lost behind strata's
//! back after `strata migrate` fails verification naming the table (exit 4); a healthy
//! store and one written through strata since pass.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::strata_db;
use std::path::Path;
use strata_store::{Batch, KvRead, KvWrite, Store};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn key(i: u32) -> Vec<u8> {
    format!("__nx/crdt/gcounter/c{i:03}").into_bytes()
}

/// A redb store of 40 legacy (header-less) gcounter values, migrated by `strata migrate`.
fn migrated(path: &Path) {
    {
        let store = strata_redb::RedbStore::create_store(path).unwrap();
        let mut b = Batch::new();
        for i in 0..40u32 {
            b = b.set(key(i), u64::from(i).to_le_bytes().to_vec());
        }
        store.apply(b).unwrap();
        store.flush().unwrap();
    }
    let out = strata_db(path, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

fn with_store(path: &Path, f: impl FnOnce(&Store)) {
    let store = strata_redb::RedbStore::open_existing(path)
        .unwrap()
        .into_store();
    f(&store);
    store.flush().unwrap();
}

#[test]
fn a_healthy_migrated_store_verifies_and_reports_its_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated(&db);
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("`gcounter-materialized` holds exactly the 40 records `migrate` certified"),
        "{stdout}"
    );
    let out = strata_db(&db, &["verify", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scopes = doc["scopes"].as_array().unwrap();
    let g = scopes
        .iter()
        .find(|s| s["scope"] == "gcounter-materialized")
        .unwrap();
    assert_eq!(
        (g["verdict"].as_str(), g["records"].as_u64()),
        (Some("intact"), Some(40))
    );
}

#[test]
fn a_record_lost_behind_stratas_back_fails_verify_naming_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated(&db);
    // Straight to the backend: no manifest bookkeeping, as a lost write or another tool.
    with_store(&db, |s| {
        s.unguarded_backend()
            .apply(Batch::new().delete(key(7)).delete(key(8)))
            .unwrap()
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("2 records certified by `migrate` at ")
            && err.contains("are missing from `gcounter-materialized` (40 certified, 38 now"),
        "{err}"
    );
    // A value changed in place (same count) is caught too.
    with_store(&db, |s| {
        s.unguarded_backend()
            .apply(
                Batch::new()
                    .set(key(7), 7u64.to_le_bytes().to_vec())
                    .set(key(8), 8u64.to_le_bytes().to_vec())
                    .set(key(9), 1u64.to_le_bytes().to_vec()),
            )
            .unwrap()
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(text(&out.stderr).contains("differs from what `migrate` certified"));
}

#[test]
fn writes_through_strata_after_migrate_raise_no_false_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    migrated(&db);
    with_store(&db, |s| {
        s.apply(Batch::new().delete(key(3)).delete(key(4))).unwrap();
        assert_eq!(
            s.get(&strata_store::manifest::manifest_key(
                "migrate",
                "gcounter-materialized"
            ))
            .unwrap(),
            None
        );
    });
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("gcounter-materialized` holds exactly"));
}
