//! Per-table registries and their steps: registry validation, tables advancing
//! independently, sequential steps committing intermediate headers, and the step mutations a
//! migration forbids.

use super::*;

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
