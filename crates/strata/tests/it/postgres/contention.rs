//! Many writers of ONE document on PostgreSQL (threads of one handle, and a second handle
//! as another process would hold): a `put` is last-writer-wins, so none of them may fail
//! because the others keep winning, and each put's lock version is handed out once (no
//! two puts decided on the same stored version).

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Barrier};
use strata::{CollectionOptions, Database};
use strata_store::Store;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Counter {
    by: usize,
    n: usize,
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn puts_racing_on_one_document_all_succeed_with_distinct_lock_versions() {
    const THREADS: usize = 8;
    const PUTS: usize = 30;
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    // Two handles (as two processes), four threads each.
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let db = Database::builder(Store::new(peer(&url, &table)))
                .open()
                .unwrap();
            let c = db
                .collection::<Counter>("counters", CollectionOptions::new())
                .unwrap();
            (db, c)
        })
        .collect();
    let barrier = Arc::new(Barrier::new(THREADS));
    let versions: Vec<Vec<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (_, c) = &handles[t % 2];
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..PUTS)
                        .map(|n| {
                            c.put("hot", &Counter { by: t, n })
                                .unwrap_or_else(|e| panic!("thread {t}, put {n}: {e}"))
                        })
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = versions.iter().flatten().copied().collect();
    all.sort_unstable();
    // Every put wrote once: versions 1..=THREADS*PUTS, each handed out exactly once.
    let expected: Vec<u64> = (1..=(THREADS * PUTS) as u64).collect();
    assert_eq!(all, expected);
    // Each thread's own versions grew; the document holds the last put's value.
    for v in &versions {
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
    }
    let (_, c) = &handles[0];
    let last = c.get_document("hot").unwrap().unwrap();
    assert_eq!(last.lock_version, (THREADS * PUTS) as u64);
    let winner = versions
        .iter()
        .position(|v| v.contains(&last.lock_version))
        .unwrap();
    assert_eq!(
        last.value,
        Counter {
            by: winner,
            n: PUTS - 1
        }
    );
}
