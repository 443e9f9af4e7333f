//! Migration checkpoints: a binary cursor round-trips, and a corrupted, out-of-prefix,
//! stale or foreign checkpoint is rejected without changing anything.

use super::*;

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
