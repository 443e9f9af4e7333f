//! Concurrent compare-and-swap from several threads.

use super::{expect_conflict, fixture, k, keys, put, scan, unbounded};
use crate::{Batch, ConflictReason, KvRead, KvWrite, Result, Store, StoreError};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

const THREADS: usize = 4;

/// Threads racing to claim one key with `require_absent`: exactly one wins, every other
/// gets a `Present` conflict.
pub fn concurrent_claim_has_one_winner<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let store = fx.store.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                store.apply(
                    Batch::new()
                        .require_absent(b"claim".to_vec())
                        .set(b"claim".to_vec(), vec![i as u8])
                        .set(k(b"claimed-by/", &[i as u8]), b"1".to_vec()),
                )
            })
        })
        .collect();
    let results: Vec<Result<()>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<usize> = (0..THREADS).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one claim must win: {results:?}");
    for (i, result) in results.into_iter().enumerate() {
        if i != winners[0] {
            expect_conflict(result, b"claim", ConflictReason::Present);
        }
    }
    assert_eq!(
        fx.store.get(b"claim").unwrap(),
        Some(vec![winners[0] as u8])
    );
    let page = scan(&fx.store, b"claimed-by/", None, unbounded());
    assert_eq!(keys(&page), vec![k(b"claimed-by/", &[winners[0] as u8])]);
}

/// Compare-and-swap increments from several threads lose no update.
pub fn cas_increments_are_not_lost<F: Fn(&Path) -> Store>(factory: F) {
    const PER_THREAD: u64 = 25;
    let fx = fixture(&factory);
    put(&fx.store, b"counter", &0u64.to_be_bytes());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = fx.store.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let mut conflicts = 0u64;
                for _ in 0..PER_THREAD {
                    loop {
                        let current = store.get(b"counter").unwrap().unwrap();
                        let n = u64::from_be_bytes(current.as_slice().try_into().unwrap());
                        let result = store.apply(
                            Batch::new()
                                .require_eq(b"counter".to_vec(), current)
                                .set(b"counter".to_vec(), (n + 1).to_be_bytes().to_vec()),
                        );
                        match result {
                            Ok(()) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(other) => panic!("unexpected error: {other}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = fx.store.get(b"counter").unwrap().unwrap();
    assert_eq!(
        u64::from_be_bytes(total.as_slice().try_into().unwrap()),
        THREADS as u64 * PER_THREAD,
        "lost updates"
    );
}
