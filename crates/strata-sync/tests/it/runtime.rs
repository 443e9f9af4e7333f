//! Runtime: refusal of legacy and future stores, restart round trip, the backend a path
//! opens with (redb for new stores, sled for existing sled directories).

use crate::common::{dump, op_for};
use strata::validate::ValidationError;
use strata_sled::SledStore;
use strata_store::{Batch, KvWrite};
use strata_sync::{legacy, Runtime, SyncError, SyncOptions};

#[test]
fn runtime_over_a_legacy_store_returns_the_legacy_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = SledStore::open_store(&path).unwrap();
        legacy::write_legacy_fixture(&store, &legacy::fixture_ops()).unwrap();
    }
    let before = dump(&SledStore::open_store(&path).unwrap());
    assert!(!before.is_empty());
    let err = Runtime::new(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            SyncError::Schema {
                source: ValidationError::Legacy { .. }
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("an explicit migration is required"),
        "{err}"
    );
    let after = dump(&SledStore::open_store(&path).unwrap());
    assert_eq!(after, before);
}

#[test]
fn runtime_over_a_future_version_store_returns_the_unsupported_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut header = b"NXDB".to_vec();
    header.extend_from_slice(&2u16.to_be_bytes());
    header.extend_from_slice(&14u16.to_be_bytes());
    {
        let store = SledStore::open_store(&path).unwrap();
        store
            .apply(Batch::new().set(b"__nx/schema/op-log".to_vec(), header))
            .unwrap();
        store.flush().unwrap();
    }
    let before = dump(&SledStore::open_store(&path).unwrap());
    let err = Runtime::new(&path).unwrap_err();
    match &err {
        SyncError::Schema {
            source:
                ValidationError::Unsupported {
                    table,
                    found,
                    current,
                },
        } => {
            assert_eq!((table.as_str(), *found, *current), ("op-log", 2, 1));
        }
        other => panic!("expected the unsupported error, got {other:?}"),
    }
    assert!(err.is_unsupported_or_corrupt());
    assert_eq!(
        err.to_string(),
        "unsupported future schema for op-log: found version 2, current version is 1; upgrade strata to open this store"
    );
    // Nothing was initialized for the other (empty) tables.
    assert_eq!(dump(&SledStore::open_store(&path).unwrap()), before);
}

#[test]
fn restart_hydrates_the_exact_state_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let ops: Vec<_> = (0..500).map(op_for).collect();
    let (states, seen, next, log) = {
        let rt =
            Runtime::with_options(&path, SyncOptions::default().max_ops_per_batch(64)).unwrap();
        rt.sync().apply_batch(&ops[..250]).unwrap();
        for op in &ops[250..] {
            rt.sync().apply(op).unwrap();
        }
        rt.sync().flush().unwrap();
        let log: Vec<_> = rt.sync().op_log().map(Result::unwrap).collect();
        (
            rt.sync().states().unwrap(),
            rt.sync().seen_ops().unwrap(),
            rt.sync().next_sequences(),
            log,
        )
    };
    let rt = Runtime::new(&path).unwrap();
    assert_eq!(rt.path(), Some(path.as_path()));
    assert_eq!(rt.sync().states().unwrap(), states);
    assert_eq!(rt.sync().seen_ops().unwrap(), seen);
    assert_eq!(rt.sync().next_sequences(), next);
    assert_eq!(
        rt.sync().op_log().map(Result::unwrap).collect::<Vec<_>>(),
        log
    );
    assert_eq!(log.len(), 500);
    assert!(rt.sync().verify().unwrap().is_consistent());
}

#[test]
fn a_migrated_legacy_fixture_reads_back_once_headers_are_current() {
    // Stand-in for the migration engine: certify by writing current headers (the data
    // bytes are unchanged), then open and read every family.
    let store = crate::common::memory();
    legacy::write_legacy_fixture(&store, &legacy::fixture_ops()).unwrap();
    let mut batch = Batch::new();
    for (id, name, _) in strata::numax::NUMAX_TABLES {
        batch = batch.set(
            strata::layout::header::header_key(name),
            strata::layout::header::SchemaHeader::new(1, id)
                .encode()
                .to_vec(),
        );
    }
    store.apply(batch).unwrap();
    let rt = Runtime::with_store(store, SyncOptions::default()).unwrap();
    let s = rt.sync();
    assert_eq!(s.gcounter("visits").unwrap(), Some(12));
    assert_eq!(s.pncounter("stock").unwrap(), Some(6));
    assert_eq!(s.register("status").unwrap(), Some(b"online".to_vec()));
    assert_eq!(s.set("tags").unwrap(), Some(vec!["blue".to_string()]));
    assert_eq!(s.sequence("doc").unwrap(), Some(vec![b"hello".to_vec()]));
    assert_eq!(s.next_sequences(), (16, 16));
    assert!(s.verify().unwrap().is_consistent());
}

#[test]
fn a_new_store_is_redb_and_an_existing_sled_directory_stays_sled() {
    let dir = tempfile::tempdir().unwrap();
    // A missing path: a new redb file.
    let path = dir.path().join("new.redb");
    {
        let rt = Runtime::new(&path).unwrap();
        assert_eq!(rt.backend(), "redb");
        rt.sync().apply(&op_for(1)).unwrap();
        rt.sync().flush().unwrap();
    }
    assert!(strata_redb::is_redb_file(&path));
    let rt = Runtime::new(&path).unwrap();
    assert_eq!(rt.backend(), "redb");
    assert_eq!(rt.sync().seen_ops().unwrap().len(), 1);
    drop(rt);

    // An existing sled directory (a Numax datastore): opened with sled, still sled.
    let sled_path = dir.path().join("numax");
    {
        let rt = Runtime::with_store(
            SledStore::open_store(&sled_path).unwrap(),
            SyncOptions::default(),
        )
        .unwrap();
        rt.sync().apply(&op_for(2)).unwrap();
        rt.sync().flush().unwrap();
    }
    let rt = Runtime::new(&sled_path).unwrap();
    assert_eq!(rt.backend(), "sled");
    assert_eq!(rt.sync().seen_ops().unwrap().len(), 1);
    drop(rt);
    assert!(strata_sled::is_sled_dir(&sled_path));
    assert!(!strata_redb::is_redb_file(&sled_path));
}

#[test]
fn a_path_that_is_not_a_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"not a store").unwrap();
    let err = Runtime::new(&file).unwrap_err();
    assert!(
        err.to_string()
            .contains("neither a redb file nor a sled directory"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a store");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = Runtime::new(&empty).unwrap_err();
    assert!(err.to_string().contains("holds no sled datastore"), "{err}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}
