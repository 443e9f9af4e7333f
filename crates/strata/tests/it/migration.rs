//! Migrations: the migration boundary, per-table registries, legacy v0→v1 certification,
//! checkpoints, interruption and resume, the write lease, and the legacy fixture.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata::migrate::{
    verify, MigrateError, MigrationCheckpoint, MigrationEvent, Migrator, RecordStep, Registry,
    TableMigrations, TableOutcome,
};
use strata::numax::{self, wire};
use strata::pass::testing::FaultyStore;
use strata::pass::{MutationRule, PassError, PassLimits, RecordRef};
use strata::validate::validate_and_init;
use strata::validate::ValidationError;
use strata::{Catalog, TableDef};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Mutation, Store};

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

pub(crate) fn mem() -> (Store, MemoryStore) {
    let m = MemoryStore::new();
    (Store::new(m.clone()), m)
}

pub(crate) fn put(store: &impl KvWrite, key: &[u8], value: &[u8]) {
    store
        .apply(Batch::new().set(key.to_vec(), value.to_vec()))
        .unwrap();
}

fn limits(records: usize, bytes: usize) -> PassLimits {
    PassLimits::new(records, bytes).unwrap()
}

fn accept_all() -> strata::RecordDecoder {
    Arc::new(|_, _| Ok(()))
}

/// A custom table `name` at `__nx/<name>/` with an accept-all decoder.
fn table(name: &str, id: u16, current: u16) -> TableDef {
    TableDef::new(name, id, format!("__nx/{name}/").into_bytes(), current)
        .with_decoder(accept_all())
}

fn key(t: &str, suffix: &str) -> Vec<u8> {
    format!("__nx/{t}/{suffix}").into_bytes()
}

fn header(store: &impl KvRead, t: &str) -> Option<SchemaHeader> {
    store
        .get(&header_key(t))
        .unwrap()
        .map(|b| SchemaHeader::decode(&b).unwrap())
}

fn checkpoint(store: &impl KvRead, t: &str) -> Option<MigrationCheckpoint> {
    store
        .get(&checkpoint_key(t))
        .unwrap()
        .map(|b| MigrationCheckpoint::decode(&b).unwrap())
}

fn gkey(suffix: &str) -> Vec<u8> {
    wire::key(wire::GCOUNTER_PREFIX, suffix)
}

fn numax_migrator<'a>() -> Migrator<'a> {
    Migrator::new(Registry::numax()).unwrap()
}

/// Every record outside the engine's `__nx/schema/` and `__nx/migration/` spaces.
fn payload(m: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter(|(k, _)| {
            !k.starts_with(b"__nx/schema/")
                && !k.starts_with(b"__nx/migration/")
                && !k.starts_with(strata_store::manifest::MANIFEST_PREFIX)
        })
        .collect()
}

/// Records in `m` outside the bulk-operation manifests (`__nx/manifest/`).
fn len_without_manifests(m: &MemoryStore) -> usize {
    m.snapshot()
        .keys()
        .filter(|k| !k.starts_with(strata_store::manifest::MANIFEST_PREFIX))
        .count()
}

// ---------------------------------------------------------------------------------------
// checkpoints
// ---------------------------------------------------------------------------------------

#[test]
fn checkpoint_round_trips_a_binary_cursor() {
    let c = MigrationCheckpoint {
        table_id: 101,
        from: 0,
        to: 1,
        cursor: vec![0, 1, 2, 255],
    };
    assert_eq!(MigrationCheckpoint::decode(&c.encode()).unwrap(), c);

    // Through the store: the first batch ends at a binary key; resume continues after it.
    let (store, m) = mem();
    let prefix = b"__nx/bin/".to_vec();
    let binary_key = [prefix.clone(), vec![0, 1, 2, 255]].concat();
    put(&store, &binary_key, b"a");
    put(&store, &[prefix.clone(), vec![0, 1, 3]].concat(), b"b");
    put(&store, &[prefix.clone(), vec![255]].concat(), b"c");
    let t = TableDef::new("bin", 101, prefix, 1).with_decoder(accept_all());
    let registry =
        || Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::certify(0, 1)));
    let faulty = FaultyStore::crash_at_write(store.unguarded_backend(), 2);
    let err = Migrator::new(registry())
        .unwrap()
        .limits(limits(1, 1024))
        .run(&Store::new(faulty))
        .unwrap_err();
    assert_eq!(err.checkpoint(), Some(binary_key.as_slice()));
    let stored = checkpoint(&store, "bin").unwrap();
    assert_eq!(
        stored,
        MigrationCheckpoint {
            table_id: 101,
            from: 0,
            to: 1,
            cursor: binary_key.clone()
        }
    );
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(1, 1024))
        .run(&store)
        .unwrap();
    assert_eq!(
        report.tables[0].records, 2,
        "resumed after the binary cursor"
    );
    assert_eq!(header(&store, "bin"), Some(SchemaHeader::new(1, 101)));
    assert!(checkpoint(&store, "bin").is_none());
    assert_eq!(len_without_manifests(&m), 4);
}

fn one_table_registry(t: &TableDef) -> Registry {
    Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::certify(0, 1)))
}

#[test]
fn corrupted_checkpoint_is_rejected_and_changes_nothing() {
    let (store, m) = mem();
    let t = table("cc", 102, 1);
    put(&store, &key("cc", "a"), b"1");
    put(&store, &checkpoint_key("cc"), b"NXMG\x00\x01garbage");
    let before = m.snapshot();
    let err = Migrator::new(one_table_registry(&t))
        .unwrap()
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::CorruptCheckpoint { ref table, .. } if table == "cc"),
        "{err}"
    );
    assert!(err.to_string().contains("__nx/migration/cc"), "{err}");
    assert_eq!(m.snapshot(), before);

    // A well-formed checkpoint of another table id is corrupt too.
    let other = MigrationCheckpoint {
        table_id: 9,
        from: 0,
        to: 1,
        cursor: vec![],
    };
    put(&store, &checkpoint_key("cc"), &other.encode());
    let before = m.snapshot();
    let err = Migrator::new(one_table_registry(&t))
        .unwrap()
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::CorruptCheckpoint { .. }),
        "{err}"
    );
    assert_eq!(m.snapshot(), before);
}

#[test]
fn out_of_prefix_checkpoint_is_rejected_and_changes_nothing() {
    let (store, m) = mem();
    let t = table("op", 103, 1);
    put(&store, &key("op", "a"), b"1");
    let c = MigrationCheckpoint {
        table_id: 103,
        from: 0,
        to: 1,
        cursor: b"__nx/elsewhere/z".to_vec(),
    };
    put(&store, &checkpoint_key("op"), &c.encode());
    let before = m.snapshot();
    let err = Migrator::new(one_table_registry(&t))
        .unwrap()
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::CheckpointOutOfPrefix { ref cursor, .. } if cursor == b"__nx/elsewhere/z"),
        "{err}"
    );
    assert_eq!(m.snapshot(), before);
}

#[test]
fn stale_checkpoint_on_a_current_table_is_rejected() {
    let (store, m) = mem();
    let t = table("st", 104, 1);
    put(&store, &key("st", "a"), b"1");
    put(
        &store,
        &header_key("st"),
        &SchemaHeader::new(1, 104).encode(),
    );
    let c = MigrationCheckpoint {
        table_id: 104,
        from: 0,
        to: 1,
        cursor: key("st", "a"),
    };
    put(&store, &checkpoint_key("st"), &c.encode());
    let before = m.snapshot();
    let err = Migrator::new(one_table_registry(&t))
        .unwrap()
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::StaleCheckpoint { ref table, version: 1, step: Some((0, 1)) } if table == "st"),
        "{err}"
    );
    assert!(err.to_string().contains("stale"), "{err}");
    assert_eq!(m.snapshot(), before);
}

#[test]
fn checkpoint_of_another_step_is_rejected() {
    let (store, m) = mem();
    let t = table("mm", 105, 2);
    let registry = Registry::new().table(
        TableMigrations::new(t)
            .step(RecordStep::certify(0, 1))
            .step(RecordStep::certify(1, 2)),
    );
    put(&store, &key("mm", "a"), b"1");
    // Header says v0 (none), the checkpoint claims step 1 -> 2.
    let c = MigrationCheckpoint {
        table_id: 105,
        from: 1,
        to: 2,
        cursor: vec![],
    };
    put(&store, &checkpoint_key("mm"), &c.encode());
    let before = m.snapshot();
    let err = Migrator::new(registry).unwrap().run(&store).unwrap_err();
    assert!(
        matches!(
            err,
            MigrateError::CheckpointMismatch {
                found_from: 1,
                found_to: 2,
                expected_from: 0,
                expected_to: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(m.snapshot(), before);
}

// ---------------------------------------------------------------------------------------
// registries
// ---------------------------------------------------------------------------------------

#[test]
fn registry_rejects_gaps_non_sequential_steps_and_bad_ends() {
    let t = table("r", 106, 3);
    let reg = |steps: Vec<RecordStep>| {
        let mut tm = TableMigrations::new(t.clone());
        for s in steps {
            tm = tm.step(s);
        }
        Migrator::new(Registry::new().table(tm)).map(drop)
    };
    let c = RecordStep::certify;
    assert!(matches!(
        reg(vec![c(0, 1), c(2, 3)]),
        Err(MigrateError::RegistryGap { missing: 1, .. })
    ));
    assert!(matches!(
        reg(vec![c(0, 2), c(2, 3)]),
        Err(MigrateError::RegistryNotSequential { from: 0, to: 2, .. })
    ));
    assert!(matches!(
        reg(vec![c(0, 1), c(1, 1), c(1, 2), c(2, 3)]),
        Err(MigrateError::RegistryDuplicate { from: 1, .. })
            | Err(MigrateError::RegistryNotSequential { .. })
    ));
    assert!(matches!(
        reg(vec![c(0, 1), c(0, 1), c(1, 2), c(2, 3)]),
        Err(MigrateError::RegistryDuplicate { from: 0, .. })
    ));
    assert!(matches!(
        reg(vec![c(1, 2), c(2, 3)]),
        Err(MigrateError::RegistryStart {
            first: 1,
            oldest: 0,
            ..
        })
    ));
    assert!(matches!(
        reg(vec![c(0, 1), c(1, 2)]),
        Err(MigrateError::RegistryEnd {
            last: 2,
            current: 3,
            ..
        })
    ));
    assert!(matches!(
        reg(vec![]),
        Err(MigrateError::RegistryEnd {
            last: 0,
            current: 3,
            ..
        })
    ));
    // Registration order does not matter.
    assert!(reg(vec![c(2, 3), c(0, 1), c(1, 2)]).is_ok());
    // The oldest supported version can be raised.
    let tm = TableMigrations::new(t.clone())
        .oldest_supported(2)
        .step(c(2, 3));
    assert!(Migrator::new(Registry::new().table(tm)).is_ok());
    // A table registered twice.
    let one = TableMigrations::new(table("d", 107, 1)).step(c(0, 1));
    assert!(matches!(
        Migrator::new(Registry::new().table(one.clone()).table(one)),
        Err(MigrateError::RegistryDuplicateTable { .. })
    ));
}

#[test]
fn an_invalid_registry_runs_nothing() {
    let (store, m) = mem();
    put(&store, &key("ok", "a"), b"1");
    let good = TableMigrations::new(table("ok", 108, 1)).step(RecordStep::certify(0, 1));
    let bad = TableMigrations::new(table("bad", 109, 2)).step(RecordStep::certify(0, 1));
    let before = m.snapshot();
    let err = Migrator::new(Registry::new().table(good).table(bad)).unwrap_err();
    assert!(err.is_registry());
    assert_eq!(m.snapshot(), before);
}

#[test]
fn tables_advance_independently() {
    let (store, _m) = mem();
    // `a` is at v2 of 3, `b` is legacy v0 of 1, `c` is current.
    let a = table("a", 110, 3);
    let b = table("b", 111, 1);
    let c = table("c", 112, 1);
    put(&store, &key("a", "x"), b"a");
    put(
        &store,
        &header_key("a"),
        &SchemaHeader::new(2, 110).encode(),
    );
    put(&store, &key("b", "x"), b"b");
    put(&store, &key("b", "y"), b"b");
    put(&store, &key("c", "x"), b"c");
    put(
        &store,
        &header_key("c"),
        &SchemaHeader::new(1, 112).encode(),
    );
    let calls = Arc::new(Mutex::new(Vec::<(String, u16)>::new()));
    let step = |to: u16| {
        let calls = calls.clone();
        RecordStep::records(to - 1, to, move |r: &RecordRef<'_>| {
            calls.lock().unwrap().push((r.table.to_string(), to));
            Ok(vec![])
        })
    };
    let registry = Registry::new()
        .table(
            TableMigrations::new(a)
                .step(step(1))
                .step(step(2))
                .step(step(3)),
        )
        .table(TableMigrations::new(b).step(step(1)))
        .table(TableMigrations::new(c).step(step(1)));
    let report = Migrator::new(registry).unwrap().run(&store).unwrap();
    let rows: Vec<_> = report
        .tables
        .iter()
        .map(|t| (t.table.as_str(), t.from, t.to, t.records, t.outcome))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("a", 2, 3, 1, TableOutcome::Migrated),
            ("b", 0, 1, 2, TableOutcome::Migrated),
            ("c", 1, 1, 0, TableOutcome::Current),
        ]
    );
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            ("a".to_string(), 3),
            ("b".to_string(), 1),
            ("b".to_string(), 1)
        ]
    );
    assert_eq!(header(&store, "a"), Some(SchemaHeader::new(3, 110)));
    assert_eq!(header(&store, "b"), Some(SchemaHeader::new(1, 111)));
}

// ---------------------------------------------------------------------------------------
// sequential steps
// ---------------------------------------------------------------------------------------

fn bang_step() -> RecordStep {
    RecordStep::records(1, 2, |r: &RecordRef<'_>| {
        let mut v = r.value.to_vec();
        v.push(b'!');
        Ok(vec![r.replace(v)])
    })
}

#[test]
fn sequential_steps_write_intermediate_headers_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let store = strata_sled::SledStore::open_store(&path).unwrap();
        for s in ["a", "b", "c"] {
            put(&store, &key("seq", s), s.as_bytes());
        }
        store.flush().unwrap();
    }
    // Release 1 knows v1 only: certifies 0 -> 1.
    {
        let store = strata_sled::SledStore::open_existing(&path)
            .unwrap()
            .into_store();
        let r1 = Registry::new()
            .table(TableMigrations::new(table("seq", 120, 1)).step(RecordStep::certify(0, 1)));
        let report = Migrator::new(r1).unwrap().run(&store).unwrap();
        assert_eq!((report.tables[0].from, report.tables[0].to), (0, 1));
    }
    // Reopen: the intermediate header is durable, no checkpoint remains.
    {
        let store = strata_sled::SledStore::open_existing(&path)
            .unwrap()
            .into_store();
        assert_eq!(header(&store, "seq"), Some(SchemaHeader::new(1, 120)));
        assert!(checkpoint(&store, "seq").is_none());
        // Release 2 registers 0 -> 1 -> 2; only 1 -> 2 runs.
        let r2 = Registry::new().table(
            TableMigrations::new(table("seq", 120, 2))
                .step(RecordStep::certify(0, 1))
                .step(bang_step()),
        );
        let report = Migrator::new(r2).unwrap().run(&store).unwrap();
        assert_eq!(
            (
                report.tables[0].from,
                report.tables[0].to,
                report.tables[0].records
            ),
            (1, 2, 3)
        );
    }
    let store = strata_sled::SledStore::open_existing(&path)
        .unwrap()
        .into_store();
    assert_eq!(header(&store, "seq"), Some(SchemaHeader::new(2, 120)));
    assert_eq!(store.get(&key("seq", "b")).unwrap(), Some(b"b!".to_vec()));
}

#[test]
fn a_chain_commits_the_intermediate_header_before_the_next_step_starts() {
    let (store, m) = mem();
    for s in ["a", "b", "c"] {
        put(&store, &key("ch", s), s.as_bytes());
    }
    let registry = || {
        Registry::new().table(
            TableMigrations::new(table("ch", 121, 2))
                .step(RecordStep::certify(0, 1))
                .step(bang_step()),
        )
    };
    // Stop at the first batch boundary of step 1 -> 2.
    let second_step_started = Cell::new(false);
    let err = Migrator::new(registry())
        .unwrap()
        .on_event(|e| {
            if let MigrationEvent::StepStarted {
                from: 1,
                resumed_after,
                ..
            } = e
            {
                assert!(
                    resumed_after.is_none(),
                    "the next step starts from a fresh checkpoint"
                );
                second_step_started.set(true);
            }
        })
        .abort_when(|| second_step_started.get())
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(
            err,
            MigrateError::Pass(PassError::Aborted {
                checkpoint: None,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(header(&store, "ch"), Some(SchemaHeader::new(1, 121)));
    assert!(checkpoint(&store, "ch").is_none());
    assert_eq!(store.get(&key("ch", "a")).unwrap(), Some(b"a".to_vec()));
    // "Reopen" and finish.
    let reopened = Store::new(m.clone());
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 1024))
        .run(&reopened)
        .unwrap();
    assert_eq!(
        (
            report.tables[0].from,
            report.tables[0].to,
            report.tables[0].batches
        ),
        (1, 2, 2)
    );
    assert_eq!(header(&reopened, "ch"), Some(SchemaHeader::new(2, 121)));
    assert_eq!(reopened.get(&key("ch", "c")).unwrap(), Some(b"c!".to_vec()));
}

// ---------------------------------------------------------------------------------------
// legacy certification
// ---------------------------------------------------------------------------------------

#[test]
fn empty_store_migrates_to_v1() {
    let (store, m) = mem();
    let report = numax_migrator().run(&store).unwrap();
    assert_eq!(report.tables.len(), 14);
    assert!(report
        .tables
        .iter()
        .all(|t| t.outcome == TableOutcome::Initialized && t.to == 1));
    for (id, name, _) in numax::NUMAX_TABLES {
        assert_eq!(
            header(&store, name),
            Some(SchemaHeader::new(1, id)),
            "{name}"
        );
    }
    assert_eq!(m.len(), 14);
    // Open now passes and a second migration is a no-op.
    assert!(validate_and_init(&store, &numax::catalog())
        .unwrap()
        .initialized
        .is_empty());
    let again = numax_migrator().run(&store).unwrap();
    assert!(again
        .tables
        .iter()
        .all(|t| t.outcome == TableOutcome::Current));
}

#[test]
fn opening_never_migrates() {
    let (store, m) = mem();
    put(&store, &gkey("visits"), &12u64.to_le_bytes());
    let before = m.snapshot();
    let err = validate_and_init(&store, &numax::catalog()).unwrap_err();
    assert!(
        matches!(err, ValidationError::Legacy { ref table } if table == "gcounter-materialized")
    );
    assert_eq!(m.snapshot(), before);
}

#[test]
fn explicit_v0_header_migrates_to_v1() {
    let (store, m) = mem();
    put(&store, &gkey("visits"), &12u64.to_le_bytes());
    put(
        &store,
        &header_key("gcounter-materialized"),
        &SchemaHeader::new(0, 1).encode(),
    );
    let before = payload(&m);
    let report = numax_migrator().run(&store).unwrap();
    let g = &report.tables[0];
    assert_eq!(
        (g.table.as_str(), g.from, g.to, g.records, g.outcome),
        ("gcounter-materialized", 0, 1, 1, TableOutcome::Migrated)
    );
    assert_eq!(
        header(&store, "gcounter-materialized"),
        Some(SchemaHeader::new(1, 1))
    );
    assert_eq!(payload(&m), before);
}

#[test]
fn invalid_record_advances_nothing() {
    let (store, m) = mem();
    put(&store, &gkey("a"), &1u64.to_le_bytes());
    put(&store, &gkey("b"), &[1, 2, 3, 4, 5]);
    put(&store, &gkey("c"), &3u64.to_le_bytes());
    let before = m.snapshot();
    let err = numax_migrator().run(&store).unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::InvalidRecord { ref table, ref key, checkpoint: None, .. })
            if table == "gcounter-materialized" && key == &gkey("b")),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("gcounter-materialized")
            && msg.contains("__nx/crdt/gcounter/b")
            && msg.contains("8 bytes"),
        "{msg}"
    );
    assert_eq!(m.snapshot(), before, "neither checkpoint nor header moved");

    // With one record per batch the first batch is durable; the failing one moves nothing.
    let err = numax_migrator()
        .limits(limits(1, 4096))
        .run(&store)
        .unwrap_err();
    assert_eq!(err.checkpoint(), Some(gkey("a").as_slice()));
    assert_eq!(
        checkpoint(&store, "gcounter-materialized").unwrap().cursor,
        gkey("a")
    );
    assert!(header(&store, "gcounter-materialized").is_none());
    let again = numax_migrator()
        .limits(limits(1, 4096))
        .run(&store)
        .unwrap_err();
    assert_eq!(again.checkpoint(), Some(gkey("a").as_slice()));
    assert_eq!(
        checkpoint(&store, "gcounter-materialized").unwrap().cursor,
        gkey("a")
    );
}

#[test]
fn oversize_record_is_rejected_and_changes_nothing() {
    let (store, m) = mem();
    put(
        &store,
        &wire::key(wire::LWW_REGISTER_PREFIX, "big"),
        &[7u8; 200],
    );
    let before = m.snapshot();
    let err = numax_migrator()
        .limits(limits(10, 128))
        .run(&store)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::RecordTooLarge { ref table, limit: 128, .. }) if table == "lww-register-materialized"),
        "{err}"
    );
    assert!(err.to_string().contains("raise the byte budget"), "{err}");
    assert_unchanged(&m, &before, "lww-register-materialized");
}

#[test]
fn op_log_key_and_value_id_mismatch_is_rejected() {
    let (store, m) = mem();
    let op = wire::Op::new(
        "op-2",
        "node",
        wire::OpKind::GCounterIncrement {
            key: "v".into(),
            increment: 1,
        },
    );
    let k = wire::key(wire::OP_LOG_PREFIX, "op-1");
    put(&store, &k, &wire::encode_op_log(1, &op).unwrap());
    let before = m.snapshot();
    let err = numax_migrator().run(&store).unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::InvalidRecord { ref table, ref key, .. }) if table == "op-log" && key == &k),
        "{err}"
    );
    assert_unchanged(&m, &before, "op-log");
}

#[test]
fn certification_never_rewrites_a_payload_and_dry_run_writes_nothing() {
    let (store, m) = mem();
    for i in 0..50u64 {
        put(&store, &gkey(&format!("k{i:03}")), &i.to_le_bytes());
        put(
            &store,
            &wire::key(wire::SEEN_OP_PREFIX, &format!("op-{i:03}")),
            &i.to_be_bytes(),
        );
    }
    let before = m.snapshot();
    let dry = numax_migrator()
        .dry_run(true)
        .limits(limits(7, 4096))
        .run(&store)
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(m.snapshot(), before, "a dry run writes nothing");
    let g = &dry.tables[0];
    assert_eq!(
        (g.records, g.batches, g.outcome),
        (50, 8, TableOutcome::Validated)
    );

    // A dry run finds invalid records too.
    put(&store, &gkey("zz-bad"), b"x");
    assert!(numax_migrator().dry_run(true).run(&store).is_err());
    store.apply(Batch::new().delete(gkey("zz-bad"))).unwrap();

    let report = numax_migrator()
        .limits(limits(7, 4096))
        .run(&store)
        .unwrap();
    assert_eq!(report.tables[0].batches, 8);
    assert_eq!(payload(&m), payload_of(&before));
    assert!(!m
        .snapshot()
        .keys()
        .any(|k| k.starts_with(b"__nx/migration/")));
}

/// The payload is unchanged and the failing table has neither header nor checkpoint (other,
/// independent tables may have advanced).
fn assert_unchanged(m: &MemoryStore, before: &BTreeMap<Vec<u8>, Vec<u8>>, failing: &str) {
    assert_eq!(payload(m), payload_of(before));
    let snap = m.snapshot();
    assert!(
        !snap.contains_key(&header_key(failing)),
        "{failing} header moved"
    );
    assert!(
        !snap.contains_key(&checkpoint_key(failing)),
        "{failing} checkpoint moved"
    );
}

fn payload_of(snapshot: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    snapshot
        .iter()
        .filter(|(k, _)| {
            !k.starts_with(b"__nx/schema/")
                && !k.starts_with(b"__nx/migration/")
                && !k.starts_with(strata_store::manifest::MANIFEST_PREFIX)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn future_and_corrupt_headers_are_refused() {
    let (store, m) = mem();
    put(&store, &gkey("visits"), &12u64.to_le_bytes());
    put(
        &store,
        &header_key("op-log"),
        &SchemaHeader::new(2, 14).encode(),
    );
    let before = m.snapshot();
    let err = numax_migrator().run(&store).unwrap_err();
    assert!(
        matches!(
            err,
            MigrateError::FutureVersion {
                found: 2,
                current: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_unsupported_or_corrupt());
    assert_eq!(
        m.snapshot(),
        before,
        "metadata is checked for every table before any write"
    );
    put(
        &store,
        &header_key("op-log"),
        &SchemaHeader::new(0, 13).encode(),
    );
    let err = numax_migrator().run(&store).unwrap_err();
    assert!(matches!(err, MigrateError::CorruptHeader { .. }), "{err}");
    assert_eq!(payload(&m), payload_of(&before));
}

// ---------------------------------------------------------------------------------------
// by path, interruption, lease
// ---------------------------------------------------------------------------------------

#[test]
fn migrate_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let records: Vec<(Vec<u8>, Vec<u8>)> = fixture_records()
        .into_iter()
        .map(|(_, k, v)| (k, v))
        .collect();
    {
        let store = strata_sled::SledStore::open_store(&path).unwrap();
        for (k, v) in &records {
            put(&store, k, v);
        }
        store.flush().unwrap();
    }
    {
        let store = strata_sled::SledStore::open_existing(&path)
            .unwrap()
            .into_store();
        assert!(validate_and_init(&store, &numax::catalog())
            .unwrap_err()
            .is_migration_required());
        let report = numax_migrator()
            .limits(limits(2, 4096))
            .run(&store)
            .unwrap();
        assert!(report.tables.iter().all(|t| t.to == 1));
    }
    let store = strata_sled::SledStore::open_existing(&path)
        .unwrap()
        .into_store();
    assert!(validate_and_init(&store, &numax::catalog())
        .unwrap()
        .initialized
        .is_empty());
    for (k, v) in &records {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
    }
}

#[test]
fn missing_path_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing");
    let err = strata_sled::SledStore::open_existing(&path).unwrap_err();
    assert!(
        matches!(err, strata_store::StoreError::NotFound { .. }),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn interrupted_migration_resumes_without_double_processing() {
    let (store, m) = mem();
    let t = table("int", 130, 1);
    for i in 1..=5 {
        put(
            &store,
            &key("int", &format!("r{i}")),
            format!("v{i}").as_bytes(),
        );
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let registry = || {
        let calls = calls.clone();
        Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::records(
            0,
            1,
            move |r: &RecordRef<'_>| {
                calls.fetch_add(1, Ordering::SeqCst);
                let mut idx = b"__nx/int-index/".to_vec();
                idx.extend_from_slice(r.value);
                Ok(vec![RecordRef::create(idx, r.key.to_vec())])
            },
        )))
    };
    // The second write (batch r3, r4) fails: the process "dies" there.
    let faulty = FaultyStore::crash_at_write(store.unguarded_backend(), 2);
    let err = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&Store::new(faulty.clone()))
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::Store { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("rerun to resume"), "{err}");
    assert_eq!(err.checkpoint(), Some(key("int", "r2").as_slice()));
    assert_eq!(faulty.writes(), 2);
    let snap = m.snapshot();
    assert!(snap.contains_key(b"__nx/int-index/v2".as_slice()));
    assert!(
        !snap.contains_key(b"__nx/int-index/v3".as_slice()),
        "the failed batch applied nothing"
    );
    assert_eq!(checkpoint(&store, "int").unwrap().cursor, key("int", "r2"));
    assert!(header(&store, "int").is_none());
    drop(store);

    // Reopen and finish.
    let reopened = Store::new(m.clone());
    calls.store(0, Ordering::SeqCst);
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&reopened)
        .unwrap();
    assert_eq!(report.tables[0].records, 3);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "r1 and r2 are not processed twice"
    );
    assert_eq!(header(&reopened, "int"), Some(SchemaHeader::new(1, 130)));
    assert!(checkpoint(&reopened, "int").is_none());
    for i in 1..=5 {
        assert_eq!(
            reopened.get(&key("int", &format!("r{i}"))).unwrap(),
            Some(format!("v{i}").into_bytes())
        );
        assert_eq!(
            reopened
                .get(format!("__nx/int-index/v{i}").as_bytes())
                .unwrap(),
            Some(key("int", &format!("r{i}")))
        );
    }
    assert_eq!(len_without_manifests(&m), 11);
}

/// A backend wrapper that logs every `apply` (`"apply"`, or `"apply failed"`) and every
/// `flush`, in order.
#[derive(Debug)]
struct FlushLog {
    inner: Arc<dyn strata_store::Backend>,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl KvRead for FlushLog {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for FlushLog {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let r = self.inner.read_modify_write(reads, decide);
        self.log
            .lock()
            .unwrap()
            .push(if r.is_ok() { "apply" } else { "apply failed" });
        r
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.log.lock().unwrap().push("flush");
        self.inner.flush()
    }
}

impl strata_store::Backend for FlushLog {
    fn name(&self) -> &'static str {
        "flush-log"
    }
}

#[test]
fn migrate_flushes_before_returning_on_success_and_on_failure() {
    let t = table("fl", 131, 1);
    let registry = || {
        Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::records(
            0,
            1,
            |_: &RecordRef<'_>| Ok(vec![]),
        )))
    };
    let seeded = || {
        let (store, m) = mem();
        for i in 1..=5 {
            put(&store, &key("fl", &format!("r{i}")), b"v");
        }
        (store, m)
    };

    // Success: the last thing done to the backend is a flush, after every write.
    let (store, _m) = seeded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let logged = Store::new(FlushLog {
        inner: store.unguarded_backend(),
        log: log.clone(),
    });
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&logged)
        .unwrap();
    assert_eq!(report.tables[0].records, 5);
    assert_eq!(header(&store, "fl"), Some(SchemaHeader::new(1, 131)));
    let ops = log.lock().unwrap().clone();
    assert!(ops.contains(&"apply"), "{ops:?}");
    assert_eq!(ops.last(), Some(&"flush"), "{ops:?}");

    // A batch fails: the batches committed before it are flushed before the error returns.
    let (store, _m) = seeded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let logged = Store::new(FlushLog {
        inner: Arc::new(FaultyStore::fail_nth_write(store.unguarded_backend(), 2)),
        log: log.clone(),
    });
    let err = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&logged)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::Store { .. })),
        "{err}"
    );
    assert_eq!(err.checkpoint(), Some(key("fl", "r2").as_slice()));
    let ops = log.lock().unwrap().clone();
    assert_eq!(ops.first(), Some(&"apply"), "{ops:?}");
    let failed = ops.iter().position(|op| *op == "apply failed").unwrap();
    assert_eq!(&ops[failed..], ["apply failed", "flush"], "{ops:?}");
}

#[test]
fn writers_wait_for_the_migration_session_while_readers_continue() {
    let (store, _m) = mem();
    for i in 0..4u64 {
        put(&store, &gkey(&format!("k{i}")), &i.to_le_bytes());
    }
    let (in_session_tx, in_session_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let migrating = {
        let store = store.clone();
        std::thread::spawn(move || {
            let mut first = true;
            numax_migrator()
                .limits(limits(1, 4096))
                .on_event(move |e| {
                    if first && matches!(e, MigrationEvent::Progress { .. }) {
                        first = false;
                        in_session_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                })
                .run(&store)
        })
    };
    in_session_rx.recv().unwrap();
    assert!(store.is_leased());
    let (written_tx, written_rx) = mpsc::channel::<()>();
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            put(&store, b"app/key", b"v");
            written_tx.send(()).unwrap();
        })
    };
    while store.waiting_writers() == 0 {
        std::thread::yield_now();
    }
    // Readers are not blocked; the writer is.
    assert_eq!(
        store.get(&gkey("k1")).unwrap(),
        Some(1u64.to_le_bytes().to_vec())
    );
    assert!(store
        .scan(
            b"__nx/crdt/",
            None,
            strata_store::ScanLimits::new(10, 4096).unwrap()
        )
        .is_ok());
    assert_eq!(written_rx.try_recv(), Err(mpsc::TryRecvError::Empty));
    assert_eq!(store.get(b"app/key").unwrap(), None);
    go_tx.send(()).unwrap();
    let report = migrating.join().unwrap().unwrap();
    assert_eq!(report.tables[0].records, 4);
    written_rx.recv().unwrap();
    writer.join().unwrap();
    assert!(!store.is_leased());
    assert_eq!(store.get(b"app/key").unwrap(), Some(b"v".to_vec()));
}

// ---------------------------------------------------------------------------------------
// verify
// ---------------------------------------------------------------------------------------

#[test]
fn verify_scans_every_table_read_only() {
    let (store, m) = mem();
    for (_, k, v) in fixture_records() {
        put(&store, &k, &v);
    }
    numax_migrator().run(&store).unwrap();
    let before = m.snapshot();
    let report = verify(&store, &numax::catalog(), limits(1, 4096), |_| {}).unwrap();
    assert_eq!(report.tables.len(), 14);
    assert!(report.tables.iter().all(|t| t.records == 1));
    // A record larger than the page budget is still verified.
    let report = verify(&store, &numax::catalog(), limits(1, 16), |_| {}).unwrap();
    assert!(report.tables.iter().all(|t| t.records == 1));
    put(
        &store,
        &wire::key(wire::ORSET_PREFIX, "broken"),
        b"{not json",
    );
    let err = verify(&store, &numax::catalog(), limits(1, 4096), |_| {}).unwrap_err();
    assert_eq!(err.table(), Some("orset-materialized"));
    assert_eq!(
        err.key(),
        Some(wire::key(wire::ORSET_PREFIX, "broken").as_slice())
    );
    let mut after = before.clone();
    after.insert(
        wire::key(wire::ORSET_PREFIX, "broken"),
        b"{not json".to_vec(),
    );
    assert_eq!(m.snapshot(), after, "verify wrote nothing");
}

#[test]
fn catalog_without_decoders_verifies_everything() {
    let (store, _) = mem();
    put(&store, &key("free", "a"), b"anything");
    let catalog = Catalog::new()
        .with(TableDef::new("free", 140, b"__nx/free/".to_vec(), 1))
        .unwrap();
    let r = verify(&store, &catalog, PassLimits::default(), |_| {}).unwrap();
    assert_eq!(r.tables[0].records, 1);
}

// ---------------------------------------------------------------------------------------
// the legacy fixture
// ---------------------------------------------------------------------------------------

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy-v0/records.tsv")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The generator of the committed fixture: one legacy (v0) record per Numax table, as a
/// Numax release without schema headers wrote them.
fn fixture_records() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    use std::collections::{BTreeMap as M, BTreeSet as S};
    use wire::*;
    let s = |v: &str| v.to_string();
    let op = Op::new(
        "fixture-op-1",
        "node-a",
        OpKind::GCounterIncrement {
            key: s("visits"),
            increment: 12,
        },
    );
    let mut map_entries = M::new();
    map_entries.insert(
        s("region"),
        LwwMapEntry {
            value: Some(b"eu".to_vec()),
            timestamp_ms: 20,
            writer: s("node-a"),
        },
    );
    map_entries.insert(
        s("theme"),
        LwwMapEntry {
            value: None,
            timestamp_ms: 21,
            writer: s("node-b"),
        },
    );
    let mut rga = RgaState::default();
    rga.elements.insert(
        s("e1"),
        RgaElement {
            id: s("e1"),
            parent: None,
            value: b"hello".to_vec(),
        },
    );
    rga.elements.insert(
        s("e2"),
        RgaElement {
            id: s("e2"),
            parent: Some(s("e1")),
            value: b"world".to_vec(),
        },
    );
    rga.tombstones.insert(s("e2"));
    vec![
        (
            s("gcounter visits = 12"),
            key(GCOUNTER_PREFIX, "visits"),
            encode_gcounter_materialized(12),
        ),
        (
            s("gcounter visits state"),
            key(GCOUNTER_STATE_PREFIX, "visits"),
            encode_gcounter_state(&GCounterState {
                counts: M::from([(s("node-a"), 5), (s("node-b"), 7)]),
            })
            .unwrap(),
        ),
        (
            s("pncounter stock = 6"),
            key(PNCOUNTER_PREFIX, "stock"),
            encode_pncounter_materialized(6),
        ),
        (
            s("pncounter stock state: +10 -4"),
            key(PNCOUNTER_STATE_PREFIX, "stock"),
            encode_pncounter_state(&PNCounterState {
                positive: GCounterState {
                    counts: M::from([(s("node-a"), 10)]),
                },
                negative: GCounterState {
                    counts: M::from([(s("node-a"), 4)]),
                },
            })
            .unwrap(),
        ),
        (
            s("register status = online"),
            key(LWW_REGISTER_PREFIX, "status"),
            encode_lww_register_materialized(b"online"),
        ),
        (
            s("register status state"),
            key(LWW_REGISTER_STATE_PREFIX, "status"),
            encode_lww_register_state(&LwwRegisterState {
                value: b"online".to_vec(),
                timestamp_ms: 2,
                writer: s("node-a"),
            })
            .unwrap(),
        ),
        (
            s("map settings = {region: eu}"),
            key(LWW_MAP_PREFIX, "settings"),
            encode_lww_map_materialized(&[(s("region"), b"eu".to_vec())]).unwrap(),
        ),
        (
            s("map settings state, field theme tombstoned"),
            key(LWW_MAP_STATE_PREFIX, "settings"),
            encode_lww_map_state(&LwwMapState {
                entries: map_entries,
            })
            .unwrap(),
        ),
        (
            s("set tags = [blue]"),
            key(ORSET_PREFIX, "tags"),
            encode_orset_materialized(&[s("blue")]).unwrap(),
        ),
        (
            s("set tags state: red added then removed"),
            key(ORSET_STATE_PREFIX, "tags"),
            encode_orset_state(&ORSetState {
                adds: M::from([
                    (s("blue"), S::from([s("t1")])),
                    (s("red"), S::from([s("t2")])),
                ]),
                removes: M::from([(s("red"), S::from([s("t2")]))]),
            })
            .unwrap(),
        ),
        (
            s("sequence doc = [hello]"),
            key(RGA_PREFIX, "doc"),
            encode_rga_materialized(&[b"hello".to_vec()]).unwrap(),
        ),
        (
            s("sequence doc state, e2 tombstoned"),
            key(RGA_STATE_PREFIX, "doc"),
            encode_rga_state(&rga).unwrap(),
        ),
        (
            s("seen op fixture-op-1 at sequence 7"),
            key(SEEN_OP_PREFIX, "fixture-op-1"),
            encode_seen_op(7),
        ),
        (
            s("op-log sequence 9: fixture-op-1"),
            key(OP_LOG_PREFIX, "fixture-op-1"),
            encode_op_log(9, &op).unwrap(),
        ),
    ]
}

fn render_fixture() -> String {
    let mut out = String::from(
        "# strata legacy (v0) logical-store fixture: one record per Numax table, no schema keys.\n\
         # Format: hex(key)<TAB>hex(value) per line; lines starting with `#` are comments.\n\
         # Generated by `cargo test -p strata --test it -- --ignored generate_legacy_fixture`\n\
         # (crates/strata/tests/it/migration.rs); see README.md next to this file.\n",
    );
    for (comment, k, v) in fixture_records() {
        out.push_str(&format!("# {comment}\n{}\t{}\n", hex(&k), hex(&v)));
    }
    out
}

fn load_fixture() -> Vec<(Vec<u8>, Vec<u8>)> {
    let text = std::fs::read_to_string(fixture_path()).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (unhex(k.trim()), unhex(v.trim()))
        })
        .collect()
}

/// Regenerates the committed fixture. Run on purpose only.
#[test]
#[ignore = "writes crates/strata/fixtures/legacy-v0/records.tsv"]
fn generate_legacy_fixture() {
    std::fs::write(fixture_path(), render_fixture()).unwrap();
}

#[test]
fn committed_fixture_matches_its_generator() {
    assert_eq!(
        std::fs::read_to_string(fixture_path()).unwrap(),
        render_fixture()
    );
}

#[test]
fn legacy_fixture_migrates_byte_for_byte() {
    let records = load_fixture();
    assert_eq!(records.len(), 14);
    assert!(records
        .iter()
        .all(|(k, _)| !k.starts_with(b"__nx/schema/") && !k.starts_with(b"__nx/migration/")));
    let (store, m) = mem();
    for (k, v) in &records {
        put(&store, k, v);
    }
    let report = numax_migrator()
        .limits(limits(2, 4 << 20))
        .run(&store)
        .unwrap();
    assert!(report.tables.iter().all(|t| t.from == 0
        && t.to == 1
        && t.records == 1
        && t.outcome == TableOutcome::Migrated));

    // Every payload byte unchanged, every header current, no checkpoint left.
    let expected: BTreeMap<_, _> = records.iter().cloned().collect();
    assert_eq!(payload(&m), expected);
    for (id, name, _) in numax::NUMAX_TABLES {
        assert_eq!(
            header(&store, name),
            Some(SchemaHeader::new(1, id)),
            "{name}"
        );
        assert!(checkpoint(&store, name).is_none());
    }
    assert!(validate_and_init(&store, &numax::catalog()).is_ok());

    // The resulting CRDT state and op log decode to the fixture's values.
    use wire::*;
    let get = |prefix: &str, k: &str| store.get(&key(prefix, k)).unwrap().unwrap();
    assert_eq!(
        decode_gcounter_materialized(&get(GCOUNTER_PREFIX, "visits")).unwrap(),
        12
    );
    assert_eq!(
        decode_gcounter_state(&get(GCOUNTER_STATE_PREFIX, "visits"))
            .unwrap()
            .counts
            .values()
            .sum::<u64>(),
        12
    );
    assert_eq!(
        decode_pncounter_materialized(&get(PNCOUNTER_PREFIX, "stock")).unwrap(),
        6
    );
    let pn = decode_pncounter_state(&get(PNCOUNTER_STATE_PREFIX, "stock")).unwrap();
    assert_eq!(
        pn.positive.counts.values().sum::<u64>() - pn.negative.counts.values().sum::<u64>(),
        6
    );
    assert_eq!(get(LWW_REGISTER_PREFIX, "status"), b"online");
    assert_eq!(
        decode_lww_register_state(&get(LWW_REGISTER_STATE_PREFIX, "status"))
            .unwrap()
            .value,
        b"online"
    );
    assert_eq!(
        decode_lww_map_materialized(&get(LWW_MAP_PREFIX, "settings")).unwrap(),
        vec![("region".to_string(), b"eu".to_vec())]
    );
    let map = decode_lww_map_state(&get(LWW_MAP_STATE_PREFIX, "settings")).unwrap();
    let visible: Vec<_> = map
        .entries
        .iter()
        .filter_map(|(f, e)| e.value.as_ref().map(|v| (f.as_str(), v.as_slice())))
        .collect();
    assert_eq!(
        visible,
        vec![("region", b"eu".as_slice())],
        "tombstoned field absent"
    );
    assert_eq!(
        decode_orset_materialized(&get(ORSET_PREFIX, "tags")).unwrap(),
        vec!["blue".to_string()]
    );
    let set = decode_orset_state(&get(ORSET_STATE_PREFIX, "tags")).unwrap();
    let live: Vec<_> = set
        .adds
        .iter()
        .filter(|(e, tags)| {
            tags.iter()
                .any(|t| !set.removes.get(*e).is_some_and(|r| r.contains(t)))
        })
        .map(|(e, _)| e.as_str())
        .collect();
    assert_eq!(live, vec!["blue"]);
    assert_eq!(
        decode_rga_materialized(&get(RGA_PREFIX, "doc")).unwrap(),
        vec![b"hello".to_vec()]
    );
    let rga = decode_rga_state(&get(RGA_STATE_PREFIX, "doc")).unwrap();
    let seq: Vec<_> = rga
        .elements
        .values()
        .filter(|e| !rga.tombstones.contains(&e.id))
        .map(|e| e.value.clone())
        .collect();
    assert_eq!(seq, vec![b"hello".to_vec()]);
    assert_eq!(
        decode_seen_op(&get(SEEN_OP_PREFIX, "fixture-op-1")).unwrap(),
        7
    );
    let entry = decode_op_log_record("fixture-op-1", &get(OP_LOG_PREFIX, "fixture-op-1")).unwrap();
    assert_eq!(entry.sequence, 9);
    assert_eq!(entry.op.id, "fixture-op-1");
}

#[test]
fn forbidden_step_mutations_in_a_migration_apply_nothing() {
    let (store, m) = mem();
    put(&store, &key("fb", "a"), b"1");
    put(&store, &key("fb", "b"), b"2");
    let t = table("fb", 150, 1);
    let cases: Vec<(Mutation, MutationRule)> = vec![
        (
            Mutation::Set {
                key: header_key("fb"),
                value: SchemaHeader::new(1, 150).encode().to_vec(),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Delete {
                key: checkpoint_key("other"),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Set {
                key: key("fb", "zz-new"),
                value: b"x".to_vec(),
            },
            MutationRule::SiblingKey,
        ),
        (
            Mutation::Delete {
                key: key("fb", "b"),
            },
            MutationRule::SiblingKey,
        ),
    ];
    for (mutation, rule) in cases {
        let before = m.snapshot();
        let mm = mutation.clone();
        let registry = Registry::new().table(TableMigrations::new(t.clone()).step(
            RecordStep::records(0, 1, move |r: &RecordRef<'_>| {
                Ok(if r.key.ends_with(b"/a") {
                    vec![mm.clone()]
                } else {
                    vec![]
                })
            }),
        ));
        let err = Migrator::new(registry).unwrap().run(&store).unwrap_err();
        assert!(
            matches!(err, MigrateError::Pass(PassError::ForbiddenMutation { rule: r, ref target, .. }) if r == rule && target == mutation.key()),
            "{err}"
        );
        assert_eq!(m.snapshot(), before, "{rule:?}");
    }
}
