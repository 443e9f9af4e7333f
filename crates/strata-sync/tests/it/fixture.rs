//! The committed legacy (v0) fixture, migrated by the engine and then served by the sync
//! manager: the values a Numax release wrote are read back exactly.

use std::path::PathBuf;
use strata::migrate::{Migrator, Registry};
use strata::pass::PassLimits;
use strata_store::{Batch, KvRead, KvWrite};
use strata_sync::SyncManager;

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length in fixture");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fixture() -> Vec<(Vec<u8>, Vec<u8>)> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../strata/fixtures/legacy-v0/records.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (unhex(k), unhex(v))
        })
        .collect()
}

#[test]
fn migrated_legacy_fixture_is_served_with_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let records = fixture();
    assert_eq!(records.len(), 14, "one record per Numax table");
    let store = strata_sled::SledStore::open_store(dir.path().join("db")).unwrap();
    let mut batch = Batch::new();
    for (k, v) in &records {
        batch = batch.set(k.clone(), v.clone());
    }
    store.apply(batch).unwrap();

    // The sync manager refuses the legacy store and writes nothing.
    let err = SyncManager::open(store.clone()).unwrap_err();
    assert!(err.is_migration_required(), "{err}");

    let report = Migrator::new(Registry::numax())
        .unwrap()
        .limits(PassLimits::new(2, 4 << 20).unwrap())
        .run(&store)
        .unwrap();
    assert_eq!(report.tables.len(), 14);
    for (k, v) in &records {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "payload changed");
    }

    let sync = SyncManager::open(store).unwrap();
    assert_eq!(sync.gcounter("visits").unwrap(), Some(12));
    assert_eq!(sync.pncounter("stock").unwrap(), Some(6));
    assert_eq!(sync.register("status").unwrap(), Some(b"online".to_vec()));
    let map = sync.map("settings").unwrap().unwrap();
    assert_eq!(map.get("region"), Some(&b"eu".to_vec()));
    assert!(
        !map.contains_key("theme"),
        "tombstoned field must be absent"
    );
    assert_eq!(map.len(), 1);
    assert_eq!(sync.set("tags").unwrap(), Some(vec!["blue".to_string()]));
    assert_eq!(sync.sequence("doc").unwrap(), Some(vec![b"hello".to_vec()]));
    assert_eq!(sync.seen_op_sequence("fixture-op-1").unwrap(), Some(7));
    let entry = sync.op_log_entry("fixture-op-1").unwrap().unwrap();
    assert_eq!(entry.sequence, 9);
    assert_eq!(entry.op.id, "fixture-op-1");
    // the hydrated durable state agrees with the materialized views
    assert!(sync.verify().unwrap().is_consistent());
}
