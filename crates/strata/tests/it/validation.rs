//! Startup validation: every row of the seed's state table.

use strata::layout::header::header_key;
use strata::layout::header::SchemaHeader;
use strata::numax;
use strata::validate::{inspect, validate_and_init};
use strata::validate::{TableState, ValidationError};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};

fn store() -> (Store, MemoryStore) {
    let mem = MemoryStore::new();
    (Store::new(mem.clone()), mem)
}

fn put(store: &Store, key: &[u8], value: &[u8]) {
    store
        .apply(Batch::new().set(key.to_vec(), value.to_vec()))
        .unwrap();
}

#[test]
fn initializes_all_empty_tables() {
    let (store, mem) = store();
    let report = validate_and_init(&store, &numax::catalog()).unwrap();
    assert_eq!(report.initialized.len(), 14);
    for (id, name, _) in numax::NUMAX_TABLES {
        let h = SchemaHeader::decode(&store.get(&header_key(name)).unwrap().unwrap()).unwrap();
        assert_eq!(h, SchemaHeader::new(1, id), "{name}");
    }
    assert_eq!(mem.len(), 14);
}

#[test]
fn initialization_is_idempotent() {
    let (store, mem) = store();
    validate_and_init(&store, &numax::catalog()).unwrap();
    let before = mem.snapshot();
    let again = validate_and_init(&store, &numax::catalog()).unwrap();
    assert!(again.initialized.is_empty());
    assert!(again.tables.iter().all(|t| t.state == TableState::Current));
    assert_eq!(mem.snapshot(), before);
}

#[test]
fn current_table_with_data_continues() {
    let (store, _) = store();
    validate_and_init(&store, &numax::catalog()).unwrap();
    put(&store, b"__nx/crdt/gcounter/visits", &3u64.to_le_bytes());
    assert!(validate_and_init(&store, &numax::catalog()).is_ok());
}

fn assert_nothing_written(mem: &MemoryStore, before: usize) {
    assert_eq!(mem.len(), before, "validation must not write on failure");
}

#[test]
fn rejects_invalid_magic() {
    let (store, mem) = store();
    put(&store, &header_key("op-log"), b"BAD!\0\x01\0\r");
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(
        matches!(&err, ValidationError::Corrupted { table, .. } if table == "op-log"),
        "{err}"
    );
    assert!(err.to_string().contains("magic"), "{err}");
    assert_nothing_written(&mem, 1);
}

#[test]
fn rejects_truncated_header() {
    let (store, mem) = store();
    put(&store, &header_key("op-log"), b"NXDB");
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(matches!(&err, ValidationError::Corrupted { .. }));
    assert!(err.to_string().contains("length 4"), "{err}");
    assert_nothing_written(&mem, 1);
}

#[test]
fn rejects_table_id_mismatch() {
    let (store, mem) = store();
    // the seen-ops header (id 13) stored under op-log (id 14)
    put(
        &store,
        &header_key("op-log"),
        &SchemaHeader::new(1, 13).encode(),
    );
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(
        matches!(&err, ValidationError::Corrupted { table, reason } if table == "op-log" && reason.contains("13")),
        "{err}"
    );
    assert_nothing_written(&mem, 1);
}

#[test]
fn rejects_legacy_table_and_writes_no_header_at_all() {
    let (store, mem) = store();
    put(&store, b"__nx/crdt/op-log/legacy-op", b"whatever");
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(matches!(&err, ValidationError::Legacy { table } if table == "op-log"));
    assert_eq!(
        err.to_string(),
        "legacy unversioned data found in op-log; an explicit migration is required (run the migrator)"
    );
    for (_, name, _) in numax::NUMAX_TABLES {
        assert_eq!(store.get(&header_key(name)).unwrap(), None, "{name}");
    }
    assert_nothing_written(&mem, 1);
}

#[test]
fn rejects_explicit_v0_header_as_older() {
    let (store, mem) = store();
    put(
        &store,
        &header_key("op-log"),
        &SchemaHeader::new(0, 14).encode(),
    );
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(matches!(
        &err,
        ValidationError::MigrationRequired { table, found: 0, current: 1 } if table == "op-log"
    ));
    assert!(err.is_migration_required());
    assert_nothing_written(&mem, 1);
}

#[test]
fn rejects_future_version() {
    let (store, mem) = store();
    put(
        &store,
        &header_key("op-log"),
        &SchemaHeader::new(2, 14).encode(),
    );
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(err.is_unsupported_or_corrupt());
    assert!(err.to_string().starts_with(
        "unsupported future schema for op-log: found version 2, current version is 1"
    ));
    assert_nothing_written(&mem, 1);
}

#[test]
fn inspect_reports_every_state_read_only() {
    let (store, mem) = store();
    put(
        &store,
        &header_key("gcounter-materialized"),
        &SchemaHeader::new(1, 1).encode(),
    );
    put(&store, b"__nx/crdt/state/gcounter/x", b"{}");
    put(
        &store,
        &header_key("pncounter-materialized"),
        &SchemaHeader::new(0, 3).encode(),
    );
    put(
        &store,
        &header_key("pncounter-state"),
        &SchemaHeader::new(9, 4).encode(),
    );
    put(&store, &header_key("lww-register-state"), b"NXDB\0");
    let before = mem.snapshot();
    let tables = inspect(&store, &numax::catalog()).unwrap();
    let state = |name: &str| {
        tables
            .iter()
            .find(|t| t.table == name)
            .unwrap()
            .state
            .label()
    };
    assert_eq!(state("gcounter-materialized"), "current");
    assert_eq!(state("gcounter-state"), "legacy");
    assert_eq!(state("pncounter-materialized"), "older");
    assert_eq!(state("pncounter-state"), "future");
    assert_eq!(state("lww-register-state"), "corrupt");
    assert_eq!(state("op-log"), "empty");
    assert_eq!(mem.snapshot(), before);
}

#[test]
fn application_keys_outside_nx_are_ignored() {
    let (store, _) = store();
    put(&store, b"app/user/1", b"x");
    let report = validate_and_init(&store, &numax::catalog()).unwrap();
    assert_eq!(report.initialized.len(), 14);
    assert_eq!(
        store.get(b"app/user/1").unwrap().as_deref(),
        Some(&b"x"[..])
    );
}
