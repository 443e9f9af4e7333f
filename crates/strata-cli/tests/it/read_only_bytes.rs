//! Read-only means not one byte (#23 item 6): commands documented as read-only, and
//! refusals, open the store read-only whatever the keys, collections and flags — a redb
//! file keeps its bytes and its mtime. Before #23, an application's embedded `schema
//! check` without the key on a store holding a sealed collection, and a refused `copy`
//! onto a non-empty redb target, rewrote the file's header (and mtime).

use crate::support::{stderr, strata};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;
use strata::policy::SchemaOptions;
use strata::seal::Credential;
use strata::CollectionOptions;
use strata::Database;
use strata_cli::Admin;
use strata_store::{Batch, KvWrite, Store};

fn bytes_and_mtime(p: &Path) -> (Vec<u8>, SystemTime) {
    (
        std::fs::read(p).unwrap(),
        std::fs::metadata(p).unwrap().modified().unwrap(),
    )
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Account {
    id: String,
    note: String,
}

#[test]
fn embedded_schema_check_without_the_key_on_a_sealed_store_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    {
        let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
        let db = Database::builder(store)
            .key(Credential::raw_key(&[7u8; 32]).unwrap())
            .open()
            .unwrap();
        let c = db
            .collection::<Account>(
                "accounts",
                CollectionOptions::new()
                    .sealed()
                    .schema(SchemaOptions::of::<Account>()),
            )
            .unwrap();
        c.put(
            "a1",
            &Account {
                id: "a1".into(),
                note: "secret".into(),
            },
        )
        .unwrap();
    }
    let before = bytes_and_mtime(&path);
    let admin = || {
        Admin::new()
            .name("bank-admin")
            .database(&path)
            .collection::<Account>(
                "accounts",
                CollectionOptions::new()
                    .sealed()
                    .schema(SchemaOptions::of::<Account>()),
            )
    };
    for args in [
        &["bank-admin", "schema", "check"][..],
        &["bank-admin", "schema", "check", "accounts"],
        &["bank-admin", "schema", "check", "--json"],
        &["bank-admin", "status"],
        &["bank-admin", "verify"],
        &["bank-admin", "keys", "status"],
        &["bank-admin", "collections"],
    ] {
        let code = admin().run_from(args.iter().copied());
        assert_eq!(code, ExitCode::SUCCESS, "{args:?}");
        assert_eq!(
            bytes_and_mtime(&path),
            before,
            "{args:?} wrote to the store"
        );
    }
}

#[test]
fn a_refused_copy_leaves_a_non_empty_redb_target_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("source.redb");
    let to = dir.path().join("target.redb");
    for (path, key) in [(&from, "s/1"), (&to, "t/1")] {
        let store = strata_redb::RedbStore::create_store(path).unwrap();
        store
            .apply(Batch::new().set(key.as_bytes().to_vec(), b"v".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    let before = bytes_and_mtime(&to);
    let out = strata(&[
        "copy",
        "--from",
        from.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not empty"), "{}", stderr(&out));
    assert_eq!(
        bytes_and_mtime(&to),
        before,
        "the refused copy wrote the target"
    );

    // A target holding another source's unfinished copy: refused the same way.
    {
        let store = strata_redb::RedbStore::open_existing(&to)
            .unwrap()
            .into_store();
        store
            .apply(Batch::new().set(
                b"__nx/copy/progress".to_vec(),
                br#"{"format":1,"from":"elsewhere","cursor":"","copied":0}"#.to_vec(),
            ))
            .unwrap();
        store.flush().unwrap();
    }
    let before = bytes_and_mtime(&to);
    let out = strata(&[
        "copy",
        "--from",
        from.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unfinished copy from `elsewhere`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        bytes_and_mtime(&to),
        before,
        "the refused copy wrote the target"
    );
}
