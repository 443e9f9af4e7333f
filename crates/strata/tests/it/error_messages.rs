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
