//! Independent handles on one table race: preconditions hold across connections.

use crate::{owner, peer, require_pg, scratch_table};
use std::sync::{Arc, Barrier};
use std::thread;
use strata_store::{Batch, ConflictReason, KvRead, KvWrite, Store, StoreError};

const PER_HANDLE: usize = 4;

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn absent_claims_from_two_handles_have_exactly_one_winner() {
    let url = require_pg!();
    let table = scratch_table();
    // Two handles = two pools and two write gates: nothing in-process serializes them.
    let a = Store::new(owner(&url, &table));
    let b = Store::new(peer(&url, &table));
    for round in 0..10u8 {
        let claim = format!("claims/{round}").into_bytes();
        let barrier = Arc::new(Barrier::new(2 * PER_HANDLE));
        let handles: Vec<_> = (0..2 * PER_HANDLE)
            .map(|i| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                let barrier = Arc::clone(&barrier);
                let claim = claim.clone();
                thread::spawn(move || {
                    barrier.wait();
                    store.apply(
                        Batch::new()
                            .require_absent(claim.clone())
                            .set(claim, vec![i as u8])
                            .set(format!("won/{round}/{i}").into_bytes(), b"1".to_vec()),
                    )
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<usize> = (0..results.len()).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != winner) {
            assert!(
                matches!(r, Err(StoreError::Conflict { key, reason: ConflictReason::Present }) if *key == claim),
                "round {round}, claimant {i}: {r:?}"
            );
        }
        // Both handles see the one winner and only its side write.
        for store in [&a, &b] {
            assert_eq!(store.get(&claim).unwrap(), Some(vec![winner as u8]));
            let page = store
                .scan(
                    format!("won/{round}/").as_bytes(),
                    None,
                    strata_store::ScanLimits::new(100, 1 << 20).unwrap(),
                )
                .unwrap();
            assert_eq!(page.records.len(), 1);
            assert_eq!(
                page.records[0].key,
                format!("won/{round}/{winner}").into_bytes()
            );
        }
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn compare_and_swap_from_two_handles_loses_no_update() {
    const PER_THREAD: u64 = 20;
    let url = require_pg!();
    let table = scratch_table();
    let a = Store::new(owner(&url, &table));
    let b = Store::new(peer(&url, &table));
    a.apply(Batch::new().set(b"counter".to_vec(), 0u64.to_be_bytes().to_vec()))
        .unwrap();
    let barrier = Arc::new(Barrier::new(2 * PER_HANDLE));
    let handles: Vec<_> = (0..2 * PER_HANDLE)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                for _ in 0..PER_THREAD {
                    loop {
                        let current = store.get(b"counter").unwrap().unwrap();
                        let n = u64::from_be_bytes(current.as_slice().try_into().unwrap());
                        match store.apply(
                            Batch::new()
                                .require_eq(b"counter".to_vec(), current)
                                .set(b"counter".to_vec(), (n + 1).to_be_bytes().to_vec()),
                        ) {
                            Ok(()) => break,
                            Err(e) if e.is_conflict() => continue,
                            Err(e) => panic!("unexpected error: {e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = b.get(b"counter").unwrap().unwrap();
    assert_eq!(
        u64::from_be_bytes(total.as_slice().try_into().unwrap()),
        2 * PER_HANDLE as u64 * PER_THREAD
    );
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_large_batch_is_atomic_against_a_concurrent_claim() {
    // A batch over more keys than the per-key lock limit takes the table-wide lock; a claim
    // on one of its keys from another handle still sees all of it or none of it.
    let url = require_pg!();
    let table = scratch_table();
    let a = Store::new(owner(&url, &table));
    let b = Store::new(peer(&url, &table));
    let keys: Vec<Vec<u8>> = (0..500u32)
        .map(|i| format!("big/{i:04}").into_bytes())
        .collect();
    let mut big = Batch::new();
    for key in &keys {
        big = big
            .require_absent(key.clone())
            .set(key.clone(), b"big".to_vec());
    }
    let barrier = Arc::new(Barrier::new(2));
    let claim_key = keys[250].clone();
    let (barrier_a, barrier_b) = (Arc::clone(&barrier), barrier);
    let (writer, claimant) = (a.clone(), b.clone());
    let big_writer = thread::spawn(move || {
        barrier_a.wait();
        writer.apply(big)
    });
    let claimer = thread::spawn(move || {
        barrier_b.wait();
        claimant.apply(
            Batch::new()
                .require_absent(claim_key.clone())
                .set(claim_key, b"small".to_vec()),
        )
    });
    let big_result = big_writer.join().unwrap();
    let small_result = claimer.join().unwrap();
    assert_ne!(
        big_result.is_ok(),
        small_result.is_ok(),
        "exactly one must win: big {big_result:?}, small {small_result:?}"
    );
    let page = b
        .scan(
            b"big/",
            None,
            strata_store::ScanLimits::new(1000, 1 << 20).unwrap(),
        )
        .unwrap();
    let present = |r: Result<(), StoreError>| {
        matches!(
            r,
            Err(StoreError::Conflict {
                reason: ConflictReason::Present,
                ..
            })
        )
    };
    if big_result.is_ok() {
        assert_eq!(page.records.len(), 500);
        assert!(page.records.iter().all(|r| r.value == b"big"));
        assert!(present(small_result));
    } else {
        assert_eq!(
            page.records.len(),
            1,
            "the refused big batch wrote something"
        );
        assert_eq!(page.records[0].value, b"small");
        assert!(present(big_result));
    }
}
