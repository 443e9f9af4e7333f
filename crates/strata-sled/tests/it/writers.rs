//! The writer lock that makes preconditions atomic without a sled transaction: a second
//! open of a datastore in the same process is refused (so every writer is a clone of one
//! `SledStore`), and compare-and-set through clones loses no update while plain batches
//! run alongside.

use std::sync::Barrier;
use std::time::Duration;
use strata_sled::{SledOptions, SledStore};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, StoreError};

#[test]
fn second_open_in_the_same_process_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let first = SledStore::open(&path).unwrap();
    first
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    let options = SledOptions::new().lock_wait(Duration::ZERO);
    // Another spelling of the same directory is the same file, so the same lock.
    let respelled = dir.path().join(".").join("db");
    for p in [path.clone(), respelled.clone()] {
        match options.open(&p) {
            Err(StoreError::InUse { path: reported }) => assert_eq!(reported, p),
            other => panic!("expected InUse for {}, got {other:?}", p.display()),
        }
        assert!(matches!(
            options.open_existing(&p),
            Err(StoreError::InUse { .. })
        ));
    }
    // A clone shares the datastore; once every clone is gone it opens again.
    let clone = first.clone();
    drop(first);
    assert!(matches!(options.open(&path), Err(StoreError::InUse { .. })));
    assert_eq!(clone.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(clone);
    let reopened = SledStore::open(&path).unwrap();
    assert_eq!(reopened.get(b"k").unwrap(), Some(b"v".to_vec()));
}

fn decode(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()))
}

#[test]
fn compare_and_set_through_clones_loses_no_update_beside_plain_batches() {
    const CAS_THREADS: usize = 4;
    const PLAIN_THREADS: usize = 2;
    const ATTEMPTS: usize = 300;
    const PLAIN_BATCHES: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let store = SledOptions::new()
        .cache_capacity(4 << 20)
        .open(dir.path().join("db"))
        .unwrap();
    let counter = b"c/counter".to_vec();
    let start = Barrier::new(CAS_THREADS + PLAIN_THREADS);

    let results: Vec<(u64, u64)> = std::thread::scope(|s| {
        let mut cas = Vec::new();
        for t in 0..CAS_THREADS {
            let (store, start, counter) = (store.clone(), &start, counter.clone());
            cas.push(s.spawn(move || {
                start.wait();
                let (mut won, mut lost) = (0u64, 0u64);
                for _ in 0..ATTEMPTS {
                    let seen = store.get(&counter).unwrap();
                    let next = decode(seen.clone()) + 1;
                    let mut batch = match seen {
                        Some(v) => Batch::new().require_eq(counter.clone(), v),
                        None => Batch::new().require_absent(counter.clone()),
                    }
                    .set(counter.clone(), next.to_be_bytes().to_vec());
                    // Odd threads also claim the value they count to (a multi-key write,
                    // through `apply_batch`); even threads write the counter alone.
                    if t % 2 == 1 {
                        let claim = format!("c/claim/{next:08}").into_bytes();
                        batch = batch
                            .require_absent(claim.clone())
                            .set(claim, t.to_string().into_bytes());
                    }
                    match store.apply(batch) {
                        Ok(()) => won += 1,
                        Err(StoreError::Conflict { key, .. }) => {
                            assert_eq!(key, counter, "only the counter can have moved");
                            lost += 1;
                        }
                        Err(e) => panic!("unexpected error: {e}"),
                    }
                }
                (won, lost)
            }));
        }
        for t in 0..PLAIN_THREADS {
            let (store, start) = (store.clone(), &start);
            s.spawn(move || {
                start.wait();
                for i in 0..PLAIN_BATCHES {
                    let key = |n: usize| format!("p/{t}/{i:05}/{n}").into_bytes();
                    let batch = if i % 3 == 0 {
                        Batch::new().set(key(0), b"x".to_vec())
                    } else {
                        Batch::new()
                            .set(key(0), b"x".to_vec())
                            .set(key(1), b"y".to_vec())
                            .set(key(2), b"z".to_vec())
                    };
                    store.apply(batch).unwrap();
                }
            });
        }
        cas.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let successes: u64 = results.iter().map(|r| r.0).sum();
    let conflicts: u64 = results.iter().map(|r| r.1).sum();
    let claimed: u64 = results.iter().skip(1).step_by(2).map(|r| r.0).sum();

    assert_eq!(successes + conflicts, (CAS_THREADS * ATTEMPTS) as u64);
    assert!(successes > 0);
    assert_eq!(decode(store.get(&counter).unwrap()), successes);
    // One claim per successful multi-key increment, each for a value the counter passed.
    let limits = ScanLimits::new(1_000_000, 1 << 30).unwrap();
    let claims = store.scan(b"c/claim/", None, limits).unwrap().records;
    assert_eq!(claims.len() as u64, claimed);
    for r in &claims {
        let n: u64 = std::str::from_utf8(&r.key[b"c/claim/".len()..])
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=successes).contains(&n), "claim {n} beyond {successes}");
        let thread: usize = std::str::from_utf8(&r.value).unwrap().parse().unwrap();
        assert_eq!(thread % 2, 1, "claim {n} by a thread that makes none");
    }
    // Every plain batch landed whole.
    let plain = store.scan(b"p/", None, limits).unwrap().records;
    let per_thread = PLAIN_BATCHES.div_ceil(3) + (PLAIN_BATCHES - PLAIN_BATCHES.div_ceil(3)) * 3;
    assert_eq!(plain.len(), PLAIN_THREADS * per_thread);
}
/// Decided writes of single documents guarded by a cached guard key (the collection's
/// write: shared side of the writer lock, one compare-and-swap), from several clones on
/// overlapping keys, lose no update; a guard changed under them refuses them all.
#[test]
fn decided_document_writes_from_clones_lose_no_update() {
    const THREADS: u64 = 4;
    const EACH: u64 = 200;
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path().join("db")).unwrap();
    store
        .apply(Batch::new().set(b"fence".to_vec(), b"F".to_vec()))
        .unwrap();
    let guard = || strata_store::Precondition::Equals {
        key: b"fence".to_vec(),
        value: b"F".to_vec(),
    };
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, barrier) = (store.clone(), &barrier);
            s.spawn(move || {
                barrier.wait();
                for i in 0..EACH {
                    // Two shared keys everybody increments, and one of this thread's own.
                    let key = match i % 3 {
                        0 => b"n/shared-a".to_vec(),
                        1 => b"n/shared-b".to_vec(),
                        _ => format!("n/own-{t}").into_bytes(),
                    };
                    let written = store
                        .read_modify_write(&[&key], &mut |values| {
                            let next = decode(values[0].map(<[u8]>::to_vec)) + 1;
                            let mut b = Batch::new().set(key.clone(), next.to_be_bytes().to_vec());
                            b.push_precondition(guard());
                            Some(b)
                        })
                        .unwrap();
                    assert!(written);
                }
            });
        }
    });
    let total: u64 = ["n/shared-a", "n/shared-b"]
        .iter()
        .map(|k| decode(store.get(k.as_bytes()).unwrap()))
        .chain((0..THREADS).map(|t| decode(store.get(format!("n/own-{t}").as_bytes()).unwrap())))
        .sum();
    assert_eq!(total, THREADS * EACH, "lost updates");
    // The guard changes: every such write is refused with the guard's conflict.
    store
        .apply(Batch::new().set(b"fence".to_vec(), b"G".to_vec()))
        .unwrap();
    let err = store
        .read_modify_write(&[b"n/own-0"], &mut |_| {
            let mut b = Batch::new().set(b"n/own-0".to_vec(), vec![0; 8]);
            b.push_precondition(guard());
            Some(b)
        })
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { ref key, .. } if key == b"fence"),
        "{err}"
    );
}

/// A decided write that also reads a key it does not write (a collection's deploy-window
/// record) takes the shared path once that key is cached, and a change of that key is
/// still seen by the next write: writing it forgets the cached value (under the exclusive
/// side), so no write decides on a stale copy.
#[test]
fn a_second_key_read_is_never_decided_on_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path().join("db")).unwrap();
    let write = |doc: &[u8]| {
        let mut seen = None;
        store
            .read_modify_write(&[doc, b"window"], &mut |values| {
                seen = Some(values[1].map(<[u8]>::to_vec));
                Some(Batch::new().set(doc.to_vec(), values[1].unwrap_or(b"-").to_vec()))
            })
            .unwrap();
        seen.unwrap()
    };
    // Absent, then cached as absent: both writes see it absent.
    assert_eq!(write(b"d/1"), None);
    assert_eq!(write(b"d/2"), None);
    // A plain write of the window key, then a conditional one: each is seen at once.
    store
        .apply(Batch::new().set(b"window".to_vec(), b"W1".to_vec()))
        .unwrap();
    assert_eq!(write(b"d/1"), Some(b"W1".to_vec()));
    assert_eq!(write(b"d/3"), Some(b"W1".to_vec()));
    store
        .apply(
            Batch::new()
                .require_eq(b"window".to_vec(), b"W1".to_vec())
                .set(b"window".to_vec(), b"W2".to_vec()),
        )
        .unwrap();
    assert_eq!(write(b"d/2"), Some(b"W2".to_vec()));
    // A decided write of the window key itself (it reads it first).
    store
        .read_modify_write(&[b"window"], &mut |_| {
            Some(Batch::new().delete(b"window".to_vec()))
        })
        .unwrap();
    assert_eq!(write(b"d/4"), None);
    for (doc, want) in [
        (&b"d/1"[..], &b"W1"[..]),
        (b"d/2", b"W2"),
        (b"d/3", b"W1"),
        (b"d/4", b"-"),
    ] {
        assert_eq!(store.get(doc).unwrap().as_deref(), Some(want));
    }
}
