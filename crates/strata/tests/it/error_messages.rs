//! Error texts a user reads, checked from the outside: one line that names the table and
//! says what to do, and no advice that does not fit the operation (a read-only scan has
//! nothing to resume).

use strata::migrate::{verify, MigrateError};
use strata::pass::PassLimits;
use strata_store::faults::{FaultKind, FaultyStore};
use strata_store::{Batch, KvWrite, MemoryStore, Store};

/// A store read failing in the middle of `verify` is reported as a verification error
/// naming the table, not as a migration to resume.
#[test]
fn a_read_failure_during_verify_is_not_called_a_migration() {
    let mem = MemoryStore::new();
    let mut batch = Batch::new();
    for i in 0..5u64 {
        batch = batch.set(
            format!("__nx/crdt/gcounter/c{i}").into_bytes(),
            i.to_le_bytes().to_vec(),
        );
    }
    mem.apply(batch).unwrap();
    let catalog = strata::numax::catalog();
    // Count the reads of a clean run, then fail the last one (a page of the scan).
    let probe = FaultyStore::new(mem.clone(), FaultKind::Read, 0);
    verify(
        &Store::new(probe.clone()),
        &catalog,
        PassLimits::default(),
        |_| {},
    )
    .unwrap();
    let reads = probe.calls();
    assert!(reads > 0);
    let mut seen_table_error = false;
    for fail_at in 1..=reads {
        let faulty = Store::new(FaultyStore::new(mem.clone(), FaultKind::Read, fail_at));
        let err = verify(&faulty, &catalog, PassLimits::default(), |_| {}).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(
            !text.contains("migrat") && !text.contains("resume"),
            "read {fail_at}: {text}"
        );
        if let MigrateError::VerifyStore { table, .. } = &err {
            assert!(text.contains(&format!("`{table}`")), "{text}");
            seen_table_error = true;
        }
    }
    assert!(seen_table_error, "no read failure surfaced as VerifyStore");
}

/// The error behind a corrupted record is kept, not flattened into the message: a
/// document whose envelope does not decode keeps the format error (reachable by
/// downcast), with the message a user reads unchanged.
#[test]
fn a_corrupted_document_keeps_its_decode_error_as_the_cause() {
    use strata::layout::{keys::doc_key, FormatError};
    use strata::{CollectionError, CollectionOptions, Database};
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).open().unwrap();
    let notes = db
        .collection::<serde_json::Value>("notes", CollectionOptions::new())
        .unwrap();
    notes.put("a", &serde_json::json!({"n": 1})).unwrap();
    store
        .apply(Batch::new().set(doc_key("notes", "a"), b"NXD".to_vec()))
        .unwrap();
    let err = notes.get("a").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("corrupted document `a` in collection `notes`: "),
        "{text}"
    );
    assert!(text.contains("restore it from a backup"), "{text}");
    let CollectionError::Corrupted { ref reason, .. } = err else {
        panic!("{err:?}")
    };
    let cause = reason.cause().expect("the decode error is kept");
    let format = cause
        .downcast_ref::<FormatError>()
        .expect("the cause is the envelope's format error");
    assert!(text.contains(&format.to_string()), "{text}");
}

/// A damaged JSON record (the fence) keeps serde_json's error as a source, and the
/// write it stopped changes nothing.
#[test]
fn a_damaged_json_record_keeps_the_parse_error_as_a_source() {
    use strata::layout::keys::FENCE_KEY;
    use strata::{CollectionOptions, Database};
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).open().unwrap();
    let notes = db
        .collection::<serde_json::Value>("notes", CollectionOptions::new())
        .unwrap();
    notes.put("a", &serde_json::json!({"n": 1})).unwrap();
    store
        .apply(Batch::new().set(FENCE_KEY.to_vec(), b"{not json".to_vec()))
        .unwrap();
    let err = notes.put("a", &serde_json::json!({"n": 2})).unwrap_err();
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(Some(&err as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
        .collect();
    assert!(
        chain
            .iter()
            .any(|e| e.downcast_ref::<serde_json::Error>().is_some()),
        "serde_json's error is not in the chain of: {err}"
    );
    assert!(
        chain.iter().any(|e| e.to_string().contains("__nx/fence")),
        "no error of the chain names the record: {err}"
    );
    assert_eq!(notes.get("a").unwrap(), Some(serde_json::json!({"n": 1})));
}
