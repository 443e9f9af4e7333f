//! The strata engine on a PostgreSQL store: startup validation and a legacy migration.

use super::{owner, peer, require_pg, scratch_table};
use strata::layout::header::header_key;
use strata::layout::header::SchemaHeader;
use strata::migrate::TableOutcome;
use strata::migrate::{Migrator, Registry};
use strata::numax::{self, wire};
use strata::pass::PassLimits;
use strata::validate::validate_and_init;
use strata::validate::ValidationError;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const LEGACY_RECORDS: u64 = 250;

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn legacy_records_migrate_to_v1_and_another_handle_then_opens() {
    let url = require_pg!();
    let table = scratch_table();
    let store = Store::new(owner(&url, &table));
    let mut batch = Batch::new();
    for i in 0..LEGACY_RECORDS {
        batch = batch.set(
            wire::key(wire::GCOUNTER_PREFIX, &format!("counter-{i:04}")),
            i.to_le_bytes().to_vec(),
        );
    }
    store.apply(batch).unwrap();
    let payload_before = store
        .scan(
            wire::GCOUNTER_PREFIX.as_bytes(),
            None,
            ScanLimits::new(1000, 1 << 20).unwrap(),
        )
        .unwrap();

    // Opening refuses legacy data and writes nothing.
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(
        matches!(err, ValidationError::Legacy { ref table } if table == "gcounter-materialized"),
        "{err:?}"
    );
    assert_eq!(
        store.get(&header_key("gcounter-materialized")).unwrap(),
        None
    );

    // The migration runs in small batches (many pages, many checkpoints).
    let report = Migrator::new(Registry::numax())
        .unwrap()
        .limits(PassLimits::new(16, 4096).unwrap())
        .run(&store)
        .unwrap();
    let g = report
        .tables
        .iter()
        .find(|t| t.table == "gcounter-materialized")
        .unwrap();
    assert_eq!(
        (g.from, g.to, g.records, g.outcome),
        (0, 1, LEGACY_RECORDS, TableOutcome::Migrated)
    );
    assert!(g.batches >= LEGACY_RECORDS / 16, "{g:?}");
    assert!(report.tables.iter().all(|t| t.to == 1));

    // Another handle (as another process would) validates without migrating.
    let other = Store::new(peer(&url, &table));
    let validated = validate_and_init(&other, &numax::catalog()).unwrap();
    assert!(validated.initialized.is_empty());
    for (id, name, _) in numax::NUMAX_TABLES {
        let header = other.get(&header_key(name)).unwrap().unwrap();
        assert_eq!(
            SchemaHeader::decode(&header).unwrap(),
            SchemaHeader::new(1, id),
            "{name}"
        );
    }
    let payload_after = other
        .scan(
            wire::GCOUNTER_PREFIX.as_bytes(),
            None,
            ScanLimits::new(1000, 1 << 20).unwrap(),
        )
        .unwrap();
    assert_eq!(
        payload_after, payload_before,
        "certification changed payload bytes"
    );
    assert!(
        !other.prefix_exists(b"__nx/migration/").unwrap(),
        "a checkpoint was left behind"
    );
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn an_empty_store_is_initialized_once_across_handles() {
    let url = require_pg!();
    let table = scratch_table();
    let a = Store::new(owner(&url, &table));
    let b = Store::new(peer(&url, &table));
    let first = validate_and_init(&a, &numax::catalog()).unwrap();
    assert_eq!(first.initialized.len(), 14);
    let second = validate_and_init(&b, &numax::catalog()).unwrap();
    assert!(second.initialized.is_empty());
}
