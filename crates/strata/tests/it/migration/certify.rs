//! Legacy v0→v1 certification and the migration boundary: opening never migrates; invalid,
//! oversize and mismatched records change nothing; payloads are never rewritten; future and
//! corrupt headers are refused.

use super::*;

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
