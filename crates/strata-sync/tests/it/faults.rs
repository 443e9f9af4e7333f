//! Fault injection at every store call of sync apply (issue 13): the N-th read (or write
//! batch) of opening a manager and applying a run of ops fails, for every N until the run
//! completes without reaching N. After each failure: a clear typed error, the store opens
//! and verifies, nothing is half-applied (the store is exactly a fault-free store after
//! a prefix of the ops: every op's state, materialized view, seen-op, op-log record,
//! evictions and sequence record together or not at all), and a rerun of the same ops
//! reaches exactly the state of a run without faults.

use strata_store::faults::{FaultKind, FaultyStore};
use strata_store::{MemoryStore, Record, Store};
use strata_sync::{Op, OpKind, SyncManager, SyncOptions};

/// Ops already applied before the faulty run.
const SEEDED: u64 = 12;
/// Ops of the faulty run.
const RUN: u64 = 12;

/// A deterministic op for index `i`, cycling through every CRDT family over a few keys.
fn op(i: u64) -> Op {
    let key = format!("k{}", i % 3);
    let kind = match i % 8 {
        0 => OpKind::GCounterIncrement {
            key,
            increment: i % 7 + 1,
        },
        1 => OpKind::PNCounterDecrement {
            key,
            decrement: i % 3 + 1,
        },
        2 => OpKind::LwwRegisterSet {
            key,
            value: i.to_le_bytes().to_vec(),
            timestamp_ms: i,
        },
        3 => OpKind::LwwMapSet {
            key,
            field: format!("f{}", i % 5),
            value: vec![(i % 251) as u8],
            timestamp_ms: i,
        },
        4 => OpKind::ORSetAdd {
            key,
            element: format!("e{}", i % 6),
            tag: format!("t{i}"),
        },
        5 => OpKind::ORSetRemove {
            key,
            element: format!("e{}", (i + 2) % 6),
            observed_tags: vec![format!("t{}", i.saturating_sub(1))],
        },
        6 => OpKind::RgaInsert {
            key,
            id: format!("el-{i:04}"),
            parent: i.checked_sub(8).map(|p| format!("el-{p:04}")),
            value: vec![(i % 256) as u8],
        },
        _ => OpKind::LwwMapRemove {
            key,
            field: format!("f{}", (i + 1) % 5),
            timestamp_ms: i,
        },
    };
    Op::new(format!("op-{i:04}"), format!("node-{}", i % 4), kind)
}

fn ops(range: std::ops::Range<u64>) -> Vec<Op> {
    range.map(op).collect()
}

/// Small limits, so the run evicts op-log and seen-op records and spans several batches.
fn options() -> SyncOptions {
    SyncOptions::default()
        .max_ops_per_batch(3)
        .op_log_limit(10)
        .seen_ops_limit(16)
        .scan_limits(4, 1 << 20)
}

/// Every record of the store.
fn dump(m: &MemoryStore) -> Vec<Record> {
    m.snapshot()
        .into_iter()
        .map(|(key, value)| Record { key, value })
        .collect()
}

/// A fault-free store after ops `0..upto`.
fn reference(upto: u64) -> Vec<Record> {
    let m = MemoryStore::new();
    let sync = SyncManager::open_with(Store::new(m.clone()), options()).unwrap();
    sync.apply_batch(&ops(0..SEEDED.min(upto))).unwrap();
    if upto > SEEDED {
        sync.apply_batch(&ops(SEEDED..upto)).unwrap();
    }
    dump(&m)
}

fn seeded() -> MemoryStore {
    let m = MemoryStore::new();
    let sync = SyncManager::open_with(Store::new(m.clone()), options()).unwrap();
    sync.apply_batch(&ops(0..SEEDED)).unwrap();
    m
}

/// Opens a manager and applies the run.
fn run(store: Store) -> Result<(), String> {
    let sync = SyncManager::open_with(store, options()).map_err(|e| e.to_string())?;
    sync.apply_batch(&ops(SEEDED..SEEDED + RUN))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn sync_apply_survives_a_failure_at_every_store_call() {
    let prefixes: Vec<Vec<Record>> = (SEEDED..=SEEDED + RUN).map(reference).collect();
    let expected = prefixes.last().unwrap().clone();
    // The fault-free run from the seeded store reaches the reference.
    let m = seeded();
    run(Store::new(m.clone())).unwrap();
    assert_eq!(dump(&m), expected);

    for kind in [FaultKind::Write, FaultKind::Read] {
        let mut sites = 0;
        for n in 1.. {
            assert!(
                n < 2000,
                "{kind:?}: the run never stopped reaching new sites"
            );
            let m = seeded();
            let faulty = FaultyStore::new(m.clone(), kind, n);
            let result = run(Store::new(faulty.clone()));
            if faulty.calls() < n {
                assert_eq!(result, Ok(()), "{kind:?}: no fault");
                assert_eq!(dump(&m), expected);
                break;
            }
            sites += 1;
            let site = format!("{kind:?} call {n}");
            let msg = result.expect_err(&site);
            assert!(
                msg.contains("injected fault") || msg.contains("faults"),
                "{site}: {msg}"
            );
            // Nothing half-applied: exactly the store after some prefix of the ops.
            let now = dump(&m);
            let applied = prefixes.iter().position(|p| *p == now).unwrap_or_else(|| {
                panic!("{site}: the store is not the state after any prefix of the ops")
            });
            // The store opens, verifies, and a rerun completes to the fault-free state.
            let sync = SyncManager::open_with(Store::new(m.clone()), options())
                .unwrap_or_else(|e| panic!("{site}: reopen: {e}"));
            let report = sync.verify().unwrap();
            assert!(report.is_consistent(), "{site}: {:?}", report.problems);
            assert_eq!(
                sync.stored_sequences().unwrap().1,
                SEEDED + applied as u64,
                "{site}: op-log sequence"
            );
            drop(sync);
            run(Store::new(m.clone())).unwrap_or_else(|e| panic!("{site}: rerun: {e}"));
            assert_eq!(dump(&m), expected, "{site}: final state differs");
        }
        println!("sync apply: {sites} {kind:?} sites failed, each recovered");
        assert!(sites >= 4, "{kind:?}: only {sites} sites were exercised");
    }
}
