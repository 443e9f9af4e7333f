//! The redb backend keeps the documents of strata's key space in their own redb table
//! (`strata_doc`) by the very prefix strata writes them under, and a collection written
//! through strata reads back the same through the merged scans (the whole store under
//! `__nx/`, as `strata copy` and `repair` read it).

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::{json, Value};
use strata::layout::keys::{DOC_PREFIX, RESERVED_PREFIX};
use strata::{CollectionOptions, Database};
use strata_store::{KvRead, ScanLimits};

#[test]
fn redb_routes_documents_by_strata_s_document_prefix() {
    assert_eq!(strata_redb::DOCUMENT_PREFIX, DOC_PREFIX);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let keys: Vec<Vec<u8>> = {
        let store = strata_redb::RedbStore::create_store(&path).unwrap();
        let db = Database::builder(store.clone()).open().unwrap();
        for name in ["notes", "accounts"] {
            let c = db
                .collection::<Value>(name, CollectionOptions::new())
                .unwrap();
            for i in 0..30 {
                c.put(&format!("k{i:02}"), &json!({ "i": i })).unwrap();
            }
        }
        let all = store
            .scan(
                RESERVED_PREFIX,
                None,
                ScanLimits::new(10_000, 1 << 24).unwrap(),
            )
            .unwrap();
        assert!(!all.more);
        all.records.into_iter().map(|r| r.key).collect()
    };
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "the merged scan is in key order");
    let docs = keys.iter().filter(|k| k.starts_with(DOC_PREFIX)).count();
    assert_eq!(docs, 60);
    assert!(keys.len() > docs, "metadata keys are in the scan too");
    let db = redb::Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let doc_table = txn
        .open_table(TableDefinition::<&[u8], &[u8]>::new("strata_doc"))
        .unwrap();
    let in_doc_table = doc_table.iter().unwrap().count();
    assert_eq!(in_doc_table, docs);
}
