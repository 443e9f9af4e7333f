//! Several handles over one store (here: one memory store in one process; the PostgreSQL
//! variant with real processes is in `pg_processes`): every apply is a read-modify-write
//! of the stored records under preconditions, so handles racing on the same keys converge
//! exactly to applying every op once — no op lost, none applied twice, no sequence reused.

use crate::common::{dump, memory, op_for, op_log_by_seq, plus_one, seen_by_seq};
use std::sync::{Arc, Barrier};
use strata_store::Store;
use strata_sync::{SyncManager, SyncOptions};

fn crdt_tables(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    dump(store)
        .into_iter()
        .filter(|r| {
            r.key.starts_with(b"__nx/crdt/")
                && !r.key.starts_with(b"__nx/crdt/seen-op/")
                && !r.key.starts_with(b"__nx/crdt/op-log/")
        })
        .map(|r| (r.key, r.value))
        .collect()
}

/// `handles` threads, each with its own manager, apply their share of `all` (and
/// re-deliver some of the others' ops) in chunks of varying size, all starting together.
fn race(store: &Store, handles: usize, options: SyncOptions, all: &[strata_sync::Op]) {
    let barrier = Arc::new(Barrier::new(handles));
    let managers: Vec<SyncManager> = (0..handles)
        .map(|_| SyncManager::open_with(store.clone(), options.clone()).unwrap())
        .collect();
    std::thread::scope(|s| {
        for (h, m) in managers.iter().enumerate() {
            let barrier = barrier.clone();
            s.spawn(move || {
                let mine: Vec<_> = all
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % handles == h)
                    .map(|(_, op)| op.clone())
                    .collect();
                barrier.wait();
                let mut at = 0;
                let mut size = h + 1;
                while at < mine.len() {
                    let end = (at + size).min(mine.len());
                    let mut chunk = mine[at..end].to_vec();
                    // Re-deliver an op of the next handle: applied once in total.
                    if let Some(other) = all.get((at * handles + (h + 1) % handles) % all.len()) {
                        chunk.push(other.clone());
                    }
                    m.apply_batch(&chunk).unwrap();
                    at = end;
                    size = size % 7 + 1;
                }
            });
        }
    });
}

#[test]
fn handles_racing_on_one_counter_lose_no_op() {
    let store = memory();
    let all: Vec<_> = (0..1000)
        .map(|i| plus_one(&format!("op-{i:05}"), &format!("node-{}", i % 3), "visits"))
        .collect();
    race(&store, 4, SyncOptions::default(), &all);
    let sync = SyncManager::open(store).unwrap();
    assert_eq!(sync.gcounter("visits").unwrap(), Some(1000));
    assert_eq!(sync.stored_sequences().unwrap(), (1000, 1000));
    let seqs: Vec<u64> = seen_by_seq(&sync).iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (0..1000).collect::<Vec<_>>(),
        "each sequence used once"
    );
    let logged: Vec<u64> = op_log_by_seq(&sync).iter().map(|e| e.0).collect();
    assert_eq!(logged, (0..1000).collect::<Vec<_>>());
    assert!(sync.verify().unwrap().is_consistent());
}

#[test]
fn handles_converge_to_applying_every_op_once() {
    let all: Vec<_> = (0..600).map(op_for).collect();
    let raced = memory();
    race(&raced, 3, SyncOptions::default().max_ops_per_batch(5), &all);
    let once = memory();
    SyncManager::open(once.clone())
        .unwrap()
        .apply_batch(&all)
        .unwrap();
    assert_eq!(crdt_tables(&raced), crdt_tables(&once));
    assert!(SyncManager::open(raced)
        .unwrap()
        .verify()
        .unwrap()
        .is_consistent());
}

#[test]
fn handles_with_small_limits_evict_exactly_the_oldest() {
    let store = memory();
    let options = SyncOptions::default().op_log_limit(20).seen_ops_limit(40);
    let all: Vec<_> = (0..300)
        .map(|i| plus_one(&format!("op-{i:05}"), "node-a", "visits"))
        .collect();
    race(&store, 3, options.clone(), &all);
    let sync = SyncManager::open_with(store, options).unwrap();
    let (next_seen, next_log) = sync.stored_sequences().unwrap();
    assert_eq!(next_seen, next_log);
    assert!(next_log >= 300);
    let logged: Vec<u64> = op_log_by_seq(&sync).iter().map(|e| e.0).collect();
    assert_eq!(logged, (next_log - 20..next_log).collect::<Vec<_>>());
    let seen: Vec<u64> = seen_by_seq(&sync).iter().map(|e| e.0).collect();
    assert_eq!(seen, (next_seen - 40..next_seen).collect::<Vec<_>>());
    // Re-delivered ops that had left the seen window were applied again (Numax's rule):
    // every application took exactly one sequence and added exactly 1.
    assert_eq!(sync.gcounter("visits").unwrap(), Some(next_log));
    assert!(sync.verify().unwrap().is_consistent());
}
