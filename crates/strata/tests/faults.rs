#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Fault injection at every write site of `strata migrate`: the N-th batch fails, for
//! every N until the migration completes without reaching N. After each failure: a clear
//! error, the store still opens and reads, nothing is half-applied (data records are
//! untouched, the header is either the old or the new one), and a rerun completes.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata::catalog::TableDef;
use strata::header::{header_key, SchemaHeader};
use strata::migrate::{Migrator, RecordStep, Registry, TableMigrations};
use strata::pass::PassLimits;
use strata_store::faults::{FaultKind, FaultyStore};
use strata_store::{Batch, KvWrite, MemoryStore, Store};

fn table() -> TableDef {
    TableDef::new("t", 900, b"__nx/t/".to_vec(), 1).with_decoder(Arc::new(|_, _| Ok(())))
}

fn migrator<'a>() -> Migrator<'a> {
    let registry =
        Registry::new().table(TableMigrations::new(table()).step(RecordStep::certify(0, 1)));
    Migrator::new(registry)
        .unwrap()
        .limits(PassLimits::new(2, 1 << 20).unwrap())
}

fn data(m: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/t/"))
        .collect()
}

#[test]
fn migrate_survives_a_failure_at_every_write_site() {
    let mut sites = 0;
    for n in 1.. {
        assert!(
            n < 200,
            "the migration never stopped reaching new write sites"
        );
        let m = MemoryStore::new();
        let mut batch = Batch::new();
        for i in 0..7 {
            batch = batch.set(
                format!("__nx/t/k{i}").into_bytes(),
                format!("v{i}").into_bytes(),
            );
        }
        m.apply(batch).unwrap();
        let before = data(&m);

        let faulty = Store::new(FaultyStore::new(m.clone(), FaultKind::Write, n));
        match migrator().run(&faulty) {
            Ok(_) => break,
            Err(e) => {
                sites += 1;
                let msg = e.to_string();
                assert!(!msg.is_empty(), "write site {n}: empty error");
                // Nothing half-applied: data untouched, header old (absent) or new.
                assert_eq!(data(&m), before, "write site {n} changed data records");
                let header = m
                    .snapshot()
                    .get(&header_key("t"))
                    .map(|b| SchemaHeader::decode(b).unwrap());
                assert!(
                    header.is_none() || header.map(|h| h.version) == Some(1),
                    "write site {n}: header {header:?}"
                );
                // The store opens again and a rerun completes.
                let again = Store::new(m.clone());
                migrator()
                    .run(&again)
                    .unwrap_or_else(|e| panic!("rerun after site {n}: {e}"));
                let h = SchemaHeader::decode(&m.snapshot()[&header_key("t")]).unwrap();
                assert_eq!(h.version, 1);
                assert_eq!(data(&m), before);
            }
        }
    }
    assert!(sites >= 2, "only {sites} write sites were exercised");
}

/// Issue bullet: a dry run after a killed migrate reports the resume point instead of a
/// false "stale checkpoint"; the real migrate then completes.
#[test]
fn dry_run_after_an_interrupted_migrate_is_resumable() {
    let m = MemoryStore::new();
    let mut batch = Batch::new();
    for i in 0..7 {
        batch = batch.set(
            format!("__nx/t/k{i}").into_bytes(),
            format!("v{i}").into_bytes(),
        );
    }
    m.apply(batch).unwrap();
    // The second batch fails: the first one's checkpoint stays, the header is not written.
    let faulty = Store::new(FaultyStore::new(m.clone(), FaultKind::Write, 2));
    assert!(migrator().run(&faulty).is_err());
    assert!(m
        .snapshot()
        .contains_key(&strata::header::checkpoint_key("t")));
    assert!(!m.snapshot().contains_key(&header_key("t")));

    let mut resumed = None;
    migrator()
        .dry_run(true)
        .on_event(|e| {
            if let strata::migrate::MigrationEvent::StepStarted { resumed_after, .. } = e {
                resumed = resumed_after.map(<[u8]>::to_vec);
            }
        })
        .run(&Store::new(m.clone()))
        .unwrap_or_else(|e| panic!("dry run after an interrupted migrate: {e}"));
    assert_eq!(resumed.as_deref(), Some(&b"__nx/t/k1"[..]));
    // The dry run wrote nothing; the real run completes.
    assert!(!m.snapshot().contains_key(&header_key("t")));
    migrator().run(&Store::new(m.clone())).unwrap();
    let h = SchemaHeader::decode(&m.snapshot()[&header_key("t")]).unwrap();
    assert_eq!(h.version, 1);
}
