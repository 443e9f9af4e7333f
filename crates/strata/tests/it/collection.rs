//! Collections: typed CRUD, optimistic locking, ordered iteration, the managed-table
//! contract (catalog record, stable id, header, startup validation) and the byte layout.

use crate::collection_util::*;
use std::ops::Bound;
use std::sync::Arc;
use strata::layout;
use strata::layout::header::SchemaHeader;
use strata::Database;
use strata::{CollectionError, CollectionOptions, Expect, GuardError, WriteGuard};
use strata_store::{Batch, KvRead, KvWrite};

fn accounts(db: &Database) -> strata::Collection<Account> {
    db.collection("accounts", CollectionOptions::new().identity_fields(["id"]))
        .unwrap()
}

#[test]
fn put_get_delete_round_trip() {
    let (_, db) = mem_db();
    let c = accounts(&db);
    assert_eq!(c.get("a").unwrap(), None);
    assert_eq!(c.put("a", &account("a", 5)).unwrap(), 1);
    assert_eq!(c.put("a", &account("a", 6)).unwrap(), 2);
    assert_eq!(c.get("a").unwrap(), Some(account("a", 6)));
    let doc = c.get_document("a").unwrap().unwrap();
    assert_eq!(
        (doc.lock_version, doc.stored_version, doc.upcast),
        (2, 1, false)
    );
    assert!(c.delete("a").unwrap());
    assert!(!c.delete("a").unwrap());
    assert_eq!(c.get("a").unwrap(), None);
}

#[test]
fn optimistic_lock_conflicts_are_typed_and_write_nothing() {
    let (store, db) = mem_db();
    let c = accounts(&db);
    assert_eq!(c.insert("a", &account("a", 1)).unwrap(), 1);
    let err = c.insert("a", &account("a", 2)).unwrap_err();
    assert!(matches!(
        err,
        CollectionError::Conflict {
            expected: Expect::Absent,
            found: Some(1),
            ..
        }
    ));
    // A reader holding lock 1 updates; a second writer still holding lock 1 loses.
    assert_eq!(c.update("a", &account("a", 10), 1).unwrap(), 2);
    let before = raw_get(&store, "accounts", "a");
    let err = c.update("a", &account("a", 99), 1).unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(
        err.to_string()
            .contains("expected lock version 1, found lock version 2"),
        "{err}"
    );
    assert_eq!(raw_get(&store, "accounts", "a"), before);
    assert!(c
        .update("missing", &account("missing", 1), 1)
        .unwrap_err()
        .is_conflict());
    assert!(c.delete_if("a", 1).unwrap_err().is_conflict());
    c.delete_if("a", 2).unwrap();
    assert_eq!(c.get("a").unwrap(), None);
}

#[test]
fn iteration_and_range_scans_are_ordered() {
    let (_, db) = mem_db();
    let c = accounts(&db);
    for id in ["b", "a", "d", "c", "ab", "e"] {
        c.put(id, &account(id, 0)).unwrap();
    }
    let keys =
        |it: strata::Iter<'_, Account>| -> Vec<String> { it.map(|d| d.unwrap().key).collect() };
    assert_eq!(keys(c.iter()), ["a", "ab", "b", "c", "d", "e"]);
    assert_eq!(
        keys(c.range(Bound::Included("b"), Bound::Excluded("e"))),
        ["b", "c", "d"]
    );
    assert_eq!(
        keys(c.range(Bound::Excluded("b"), Bound::Included("e"))),
        ["c", "d", "e"]
    );
    assert_eq!(
        keys(c.range(Bound::Included("bb"), Bound::Unbounded)),
        ["c", "d", "e"]
    );
    assert_eq!(keys(c.scan_prefix("a")), ["a", "ab"]);
    let many = c.get_many(["c", "zz"]);
    assert_eq!(
        many[0].as_ref().unwrap().as_ref().unwrap().value,
        account("c", 0)
    );
    assert!(many[1].as_ref().unwrap().is_none());
}

#[test]
fn iteration_pages_through_many_documents() {
    let (_, db) = mem_db();
    let c = accounts(&db);
    for i in 0..600 {
        c.put(&format!("k{i:04}"), &account(&format!("k{i:04}"), i))
            .unwrap();
    }
    let all: Vec<_> = c.iter().map(|d| d.unwrap().value.balance_cents).collect();
    assert_eq!(all, (0..600).collect::<Vec<_>>());
}

#[test]
fn a_collection_is_a_managed_table_with_a_stable_id() {
    let (store, db) = mem_db();
    let a = accounts(&db);
    let b = db
        .collection::<Account>("books", CollectionOptions::new())
        .unwrap();
    assert_eq!((a.table_id(), b.table_id()), (1024, 1025));
    assert_eq!(
        store.get(b"__nx/schema/accounts").unwrap(),
        Some(SchemaHeader::new(1, 1024).encode().to_vec())
    );
    assert_eq!(
        store.get(b"__nx/catalog/books").unwrap(),
        Some(b"NXCL\x01\x04\x01".to_vec())
    );
    assert_eq!(
        store.get(b"__nx/catalog-seq").unwrap(),
        Some(vec![0x04, 0x01])
    );
    a.put("x", &account("x", 1)).unwrap();
    // Reopen: same ids, catalog read back, every header validated.
    let db2 = Database::builder(store.clone()).open().unwrap();
    let names: Vec<_> = db2
        .collections()
        .unwrap()
        .into_iter()
        .map(|i| (i.name, i.table_id))
        .collect();
    assert_eq!(
        names,
        [("accounts".to_string(), 1024), ("books".to_string(), 1025)]
    );
    assert_eq!(accounts(&db2).table_id(), 1024);
    assert_eq!(db2.catalog().tables().len(), 2);
    assert_eq!(accounts(&db2).get("x").unwrap(), Some(account("x", 1)));
    // Records live under __nx/.
    let page = store
        .scan(
            b"",
            None,
            strata_store::ScanLimits::new(100, 1 << 20).unwrap(),
        )
        .unwrap();
    assert!(page.records.iter().all(|r| r.key.starts_with(b"__nx/")));
}

#[test]
fn startup_validation_refuses_a_future_or_corrupt_collection_header() {
    let (store, db) = mem_db();
    accounts(&db).put("x", &account("x", 1)).unwrap();
    store
        .apply(Batch::new().set(
            b"__nx/schema/accounts".to_vec(),
            SchemaHeader::new(2, 1024).encode().to_vec(),
        ))
        .unwrap();
    let err = Database::builder(store.clone()).open().unwrap_err();
    assert!(
        matches!(&err, CollectionError::Validation { collection, .. } if collection == "accounts"),
        "{err}"
    );
    store
        .apply(Batch::new().set(
            b"__nx/schema/accounts".to_vec(),
            SchemaHeader::new(1, 7).encode().to_vec(),
        ))
        .unwrap();
    assert!(matches!(
        Database::builder(store.clone()).open(),
        Err(CollectionError::Validation { .. })
    ));
    store
        .apply(Batch::new().set(b"__nx/catalog/accounts".to_vec(), b"junk".to_vec()))
        .unwrap();
    assert!(matches!(
        Database::builder(store).open(),
        Err(CollectionError::CorruptCatalog { .. })
    ));
}

#[test]
fn legacy_documents_without_a_header_are_refused() {
    let store = mem_store();
    raw_put(&store, "accounts", "a", 1, 1, r#"{"id":"a"}"#);
    let db = Database::builder(store.clone()).open().unwrap();
    let err = db
        .collection::<Account>("accounts", CollectionOptions::new())
        .unwrap_err();
    assert!(matches!(err, CollectionError::Validation { .. }), "{err}");
}

#[test]
fn bad_names_keys_and_values_are_refused_and_write_nothing() {
    let (store, db) = mem_db();
    for bad in ["", "a/b", "op-log", "sp ace"] {
        assert!(matches!(
            db.collection::<Account>(bad, CollectionOptions::new()),
            Err(CollectionError::InvalidName { .. })
        ));
    }
    let c = accounts(&db);
    assert!(matches!(
        c.put("", &account("", 1)),
        Err(CollectionError::InvalidKey { .. })
    ));
    let nums = db
        .collection::<Vec<i32>>("nums", CollectionOptions::new())
        .unwrap();
    assert!(matches!(
        nums.put("a", &vec![1]),
        Err(CollectionError::Encode { .. })
    ));
    assert_eq!(raw_get(&store, "nums", "a"), None);
    assert_eq!(raw_get(&store, "accounts", ""), None);
}

#[derive(Debug)]
struct Fence;
impl WriteGuard for Fence {
    fn check_write(&self, collection: &str) -> Result<(), GuardError> {
        Err(format!("collection `{collection}` is fenced").into())
    }
}

#[test]
fn write_guards_refuse_every_write_path() {
    let (store, db) = mem_db();
    accounts(&db).put("a", &account("a", 1)).unwrap();
    let fenced = db
        .collection::<Account>(
            "accounts",
            CollectionOptions::new().write_guard(Arc::new(Fence)),
        )
        .unwrap();
    let before = raw_get(&store, "accounts", "a");
    assert!(matches!(
        fenced.put("a", &account("a", 2)),
        Err(CollectionError::Guard { .. })
    ));
    assert!(matches!(
        fenced.insert("b", &account("b", 2)),
        Err(CollectionError::Guard { .. })
    ));
    assert!(matches!(
        fenced.update("a", &account("a", 2), 1),
        Err(CollectionError::Guard { .. })
    ));
    assert!(matches!(
        fenced.delete("a"),
        Err(CollectionError::Guard { .. })
    ));
    assert_eq!(raw_get(&store, "accounts", "a"), before);
    assert_eq!(fenced.get("a").unwrap(), Some(account("a", 1)));
    let guarded_db = Database::builder(store)
        .write_guard(Arc::new(Fence))
        .open()
        .unwrap();
    assert!(matches!(
        accounts(&guarded_db).put("a", &account("a", 3)),
        Err(CollectionError::Guard { .. })
    ));
}

/// The byte layout documented in docs/format.md ("Collections and payload").
#[test]
fn byte_layout_of_keys_and_values() {
    let (store, db) = mem_db();
    let c = accounts(&db);
    c.put("a1", &account("a1", 500)).unwrap();
    c.put("a1", &account("a1", 501)).unwrap();
    assert_eq!(
        layout::keys::doc_key("accounts", "a1"),
        b"__nx/doc/accounts/a1"
    );
    let value = store.get(b"__nx/doc/accounts/a1").unwrap().unwrap();
    let mut expected = b"NXDV\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02".to_vec();
    expected.extend_from_slice(br#"{"id":"a1","balance_cents":501}"#);
    assert_eq!(value, expected);
    assert_eq!(
        store.get(b"__nx/catalog/accounts").unwrap().unwrap(),
        b"NXCL\x01\x04\x00"
    );
    assert_eq!(
        store.get(b"__nx/catalog-seq").unwrap().unwrap(),
        b"\x04\x00"
    );
    assert_eq!(
        store.get(b"__nx/schema/accounts").unwrap().unwrap(),
        b"NXDB\x00\x01\x04\x00"
    );
    // Both versions are readable without parsing the JSON.
    let env = c.envelope("a1").unwrap().unwrap();
    assert_eq!((env.payload_version, env.lock_version), (1, 2));
}

/// The memory backend decides once, so a put's decision checks its guards (the fence
/// record, read with the document) itself instead of copying them into its batch. A
/// wrapper that validates optimistically (the spy: the document changes between the
/// decision and the commit) decides again: the put then decides on the document as it is
/// now, with its guards checked again — it neither refuses nor writes unguarded.
#[test]
fn a_second_decision_writes_on_the_current_document_with_its_guards_checked_again() {
    let (spy, store) = Spy::new();
    assert!(store.capabilities().decides_once);
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<serde_json::Value>("notes", CollectionOptions::new())
        .unwrap();
    assert_eq!(c.put("a", &serde_json::json!({"n": 1})).unwrap(), 1);
    // Once, between the put's decision and its commit: another writer's put (lock 5).
    let key = strata::layout::keys::doc_key("notes", "a");
    let other = strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(1, 5),
        br#"{"n":"other"}"#,
    );
    let once = std::sync::Mutex::new(Some(other));
    spy.before_apply(move |_, inner| {
        if let Some(v) = once.lock().unwrap().take() {
            inner
                .apply(strata_store::Batch::new().set(key.clone(), v))
                .unwrap();
        }
    });
    assert_eq!(
        c.put("a", &serde_json::json!({"n": 2})).unwrap(),
        6,
        "decided on lock 5"
    );
    spy.clear_hook();
    assert_eq!(c.get("a").unwrap(), Some(serde_json::json!({"n": 2})));
    // The retry carried the fence's guard: a fence raised now is obeyed by the next put.
    strata::policy::Fence::add_pending(&store, "notes", "target-hash").unwrap();
    let fenced = c.put("a", &serde_json::json!({"n": 3})).unwrap_err();
    assert!(fenced.to_string().contains("notes"), "{fenced}");
    assert_eq!(c.get("a").unwrap(), Some(serde_json::json!({"n": 2})));
}

/// A write on a backend that decides once reads its document through a copy of the key on
/// the stack and moves the key itself into its mutation; a key too long for that copy is
/// read and copied as before. Both are written, updated and deleted under the very key
/// given, on memory and redb (and on sled, which copies the key each decision).
#[test]
fn short_and_long_keys_are_written_updated_and_deleted_under_their_own_key() {
    let dir = tempfile::tempdir().unwrap();
    let stores = [
        ("memory", mem_store()),
        (
            "redb",
            strata_redb::RedbStore::create_store(dir.path().join("s.redb")).unwrap(),
        ),
        (
            "sled",
            strata_store::Store::new(
                strata_sled::SledStore::open(dir.path().join("sled")).unwrap(),
            ),
        ),
    ];
    for (name, store) in stores {
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db
            .collection::<Account>("accounts", CollectionOptions::new())
            .unwrap();
        for key in ["a".to_string(), "k".repeat(120), "long-".repeat(200)] {
            assert_eq!(c.put(&key, &account(&key, 1)).unwrap(), 1, "{name}");
            assert_eq!(c.update(&key, &account(&key, 2), 1).unwrap(), 2, "{name}");
            let full = layout::keys::doc_key("accounts", &key);
            assert!(
                store.get(&full).unwrap().is_some(),
                "{name}: stored under its key"
            );
            assert_eq!(c.get(&key).unwrap(), Some(account(&key, 2)), "{name}");
            assert!(c.delete(&key).unwrap(), "{name}");
            assert_eq!(
                store.get(&full).unwrap(),
                None,
                "{name}: deleted under its key"
            );
        }
        // Nothing under any other key.
        assert!(
            !store.prefix_exists(b"__nx/doc/accounts/").unwrap(),
            "{name}"
        );
    }
}
