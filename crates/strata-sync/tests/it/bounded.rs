//! Bounded op log and seen-ops (Numax's `op_log_limit` / `seen_ops_limit`): the newest
//! records by sequence are kept, evicted in the batch that inserts; hydration reads only
//! what is retained; stores written with other limits open correctly.

use crate::common::{dump, memory, op_log_by_seq, plus_one, recording, seen_by_seq};
use strata_sync::{
    Applied, SyncManager, SyncOptions, DEFAULT_OP_LOG_LIMIT, DEFAULT_SEEN_OPS_LIMIT,
};

fn ops(range: std::ops::Range<u32>) -> Vec<strata_sync::Op> {
    range
        .map(|i| plus_one(&format!("op-{i:05}"), "node-a", "visits"))
        .collect()
}

fn limits(log: usize, seen: usize) -> SyncOptions {
    SyncOptions::default()
        .op_log_limit(log)
        .seen_ops_limit(seen)
}

#[test]
fn defaults_and_minimum_are_numax_s() {
    let o = SyncOptions::default();
    assert_eq!(o.op_log_limit_value(), DEFAULT_OP_LOG_LIMIT);
    assert_eq!(o.seen_ops_limit_value(), DEFAULT_SEEN_OPS_LIMIT);
    assert_eq!(
        (DEFAULT_OP_LOG_LIMIT, DEFAULT_SEEN_OPS_LIMIT),
        (10_000, 100_000)
    );
    let o = limits(0, 0);
    assert_eq!((o.op_log_limit_value(), o.seen_ops_limit_value()), (1, 1));
}

#[test]
fn the_newest_records_by_sequence_are_kept() {
    let sync = SyncManager::open_with(memory(), limits(5, 8).max_ops_per_batch(4)).unwrap();
    for chunk in ops(0..30).chunks(7) {
        sync.apply_batch(chunk).unwrap();
    }
    assert_eq!(
        op_log_by_seq(&sync),
        (25..30)
            .map(|i| (i as u64, format!("op-{i:05}")))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        seen_by_seq(&sync),
        (22..30)
            .map(|i| (i as u64, format!("op-{i:05}")))
            .collect::<Vec<_>>()
    );
    assert_eq!(sync.gcounter("visits").unwrap(), Some(30));
    assert_eq!(sync.stored_sequences().unwrap(), (30, 30));
    assert!(sync.verify().unwrap().is_consistent());
}

#[test]
fn eviction_is_in_the_same_batch_as_the_insert() {
    let (store, seen) = recording();
    let sync = SyncManager::open_with(store, limits(3, 4)).unwrap();
    seen.lock().unwrap().batches.clear();
    for op in ops(0..10) {
        sync.apply(&op).unwrap();
    }
    let batches = seen.lock().unwrap().batches.clone();
    assert_eq!(batches.len(), 10, "one batch per op");
    for (i, b) in batches.iter().enumerate() {
        let log_del = usize::from(i >= 3);
        let seen_del = usize::from(i >= 4);
        assert_eq!(*b, (1, log_del, 1, seen_del), "batch {i}");
    }
    assert_eq!(op_log_by_seq(&sync).len(), 3);
}

#[test]
fn a_chunk_larger_than_the_limit_keeps_only_its_newest_ops() {
    let sync = SyncManager::open_with(memory(), limits(3, 4)).unwrap();
    let res = sync.apply_batch(&ops(0..10)).unwrap();
    assert!(res.iter().all(|a| matches!(a, Applied::Applied { .. })));
    assert_eq!(
        op_log_by_seq(&sync).iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert_eq!(
        seen_by_seq(&sync).iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![6, 7, 8, 9]
    );
    assert_eq!(sync.gcounter("visits").unwrap(), Some(10));
}

#[test]
fn an_evicted_seen_op_is_applied_again_when_redelivered_as_in_numax() {
    let sync = SyncManager::open_with(memory(), limits(10, 2)).unwrap();
    let all = ops(0..3);
    sync.apply_batch(&all).unwrap();
    // op-00000 fell out of the seen window: Numax (and strata) apply it again.
    assert!(matches!(
        sync.apply(&all[0]).unwrap(),
        Applied::Applied { .. }
    ));
    assert_eq!(sync.gcounter("visits").unwrap(), Some(4));
    // op-00002 is still remembered.
    assert_eq!(sync.apply(&all[2]).unwrap(), Applied::Duplicate);
}

#[test]
fn a_store_written_with_larger_limits_opens_and_is_pruned_to_the_newest() {
    let store = memory();
    {
        let sync = SyncManager::open_with(store.clone(), limits(100, 100)).unwrap();
        sync.apply_batch(&ops(0..50)).unwrap();
    }
    let sync = SyncManager::open_with(store.clone(), limits(10, 20)).unwrap();
    assert_eq!(
        op_log_by_seq(&sync).iter().map(|e| e.0).collect::<Vec<_>>(),
        (40..50).collect::<Vec<u64>>()
    );
    assert_eq!(
        seen_by_seq(&sync).iter().map(|e| e.0).collect::<Vec<_>>(),
        (30..50).collect::<Vec<u64>>()
    );
    assert_eq!(
        sync.gcounter("visits").unwrap(),
        Some(50),
        "values are untouched"
    );
    assert_eq!(sync.next_sequences(), (50, 50));
    assert_eq!(
        sync.apply(&plus_one("late", "node-b", "visits")).unwrap(),
        Applied::Applied {
            seen_sequence: 50,
            log_sequence: 50
        }
    );
    assert_eq!(op_log_by_seq(&sync).len(), 10);
    assert!(sync.verify().unwrap().is_consistent());
    // Reopened with larger limits again: nothing is invented, the sequence continues.
    drop(sync);
    let sync = SyncManager::open_with(store, limits(1000, 1000)).unwrap();
    assert_eq!(op_log_by_seq(&sync).len(), 10);
    sync.apply_batch(&ops(50..60)).unwrap();
    assert_eq!(op_log_by_seq(&sync).len(), 20);
    assert_eq!(sync.stored_sequences().unwrap(), (61, 61));
}

#[test]
fn a_store_written_with_smaller_limits_opens_and_grows() {
    let store = memory();
    SyncManager::open_with(store.clone(), limits(5, 5))
        .unwrap()
        .apply_batch(&ops(0..20))
        .unwrap();
    let sync = SyncManager::open(store).unwrap();
    assert_eq!(op_log_by_seq(&sync).len(), 5);
    sync.apply_batch(&ops(20..30)).unwrap();
    assert_eq!(op_log_by_seq(&sync).len(), 15);
    assert_eq!(seen_by_seq(&sync).len(), 15);
    assert_eq!(sync.gcounter("visits").unwrap(), Some(30));
}

#[test]
fn hydration_reads_only_what_is_retained() {
    let (store, seen) = recording();
    let sync = SyncManager::open_with(store.clone(), limits(10, 10).max_ops_per_batch(64)).unwrap();
    sync.apply_batch(&ops(0..3000)).unwrap();
    drop(sync);
    let op_log_records = dump(&store)
        .iter()
        .filter(|r| r.key.starts_with(b"__nx/crdt/op-log/"))
        .count();
    assert_eq!(op_log_records, 10);
    seen.lock().unwrap().op_log_scanned = 0;
    let sync = SyncManager::open_with(store, limits(10, 10)).unwrap();
    assert_eq!(seen.lock().unwrap().op_log_scanned, 10);
    assert_eq!(sync.gcounter("visits").unwrap(), Some(3000));
}
