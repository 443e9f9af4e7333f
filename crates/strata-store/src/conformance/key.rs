//! Single-key writes ([`KvWrite::compare_and_swap`]): the same rules as the batch they
//! stand for ([`KeyWrite::into_batch`]), whether the backend overrides the method or not.

use super::{dump, each_write_path, expect_conflict, fixture, k, put};
use crate::{
    Batch, ConflictReason, KeyWrite, KvRead, KvWrite, Precondition, Result, Store, StoreError,
};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

fn set(key: &[u8], expected: Option<&[u8]>, new: &[u8]) -> KeyWrite {
    KeyWrite::set(key.to_vec(), expected.map(<[u8]>::to_vec), new.to_vec())
}

/// A single-key write is a compare-and-swap: over an absent key, over exact bytes, and a
/// delete; each stale one fails with the reason a batch gives (`Present`, `Changed`,
/// `Missing`) and writes nothing.
pub fn key_write_compares_and_swaps<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let key = k(ns, b"doc");
        w.compare_and_swap(set(&key, None, b"v1")).unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"v1".to_vec()));
        expect_conflict(
            w.compare_and_swap(set(&key, None, b"x")),
            &key,
            ConflictReason::Present,
        );
        w.compare_and_swap(set(&key, Some(b"v1"), b"v2")).unwrap();
        expect_conflict(
            w.compare_and_swap(set(&key, Some(b"v1"), b"x")),
            &key,
            ConflictReason::Changed,
        );
        // A prefix of the stored bytes is not equal to them.
        expect_conflict(
            w.compare_and_swap(set(&key, Some(b"v"), b"x")),
            &key,
            ConflictReason::Changed,
        );
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
        // A delete over the bytes it must find; then they are missing.
        expect_conflict(
            w.compare_and_swap(KeyWrite::delete(key.clone(), b"v1".to_vec())),
            &key,
            ConflictReason::Changed,
        );
        w.compare_and_swap(KeyWrite::delete(key.clone(), b"v2".to_vec()))
            .unwrap();
        assert_eq!(r.get(&key).unwrap(), None);
        expect_conflict(
            w.compare_and_swap(KeyWrite::delete(key.clone(), b"v2".to_vec())),
            &key,
            ConflictReason::Missing,
        );
        expect_conflict(
            w.compare_and_swap(set(&key, Some(b"v2"), b"x")),
            &key,
            ConflictReason::Missing,
        );
        assert_eq!(r.get(&key).unwrap(), None);
        // An empty value is a value: it is not absent and equals empty bytes.
        w.compare_and_swap(set(&key, None, b"")).unwrap();
        expect_conflict(
            w.compare_and_swap(set(&key, None, b"x")),
            &key,
            ConflictReason::Present,
        );
        w.compare_and_swap(set(&key, Some(b""), b"v3")).unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"v3".to_vec()));
        // It also writes over a value that a plain batch wrote.
        put(w, &key, b"plain");
        w.compare_and_swap(set(&key, Some(b"plain"), b"v4"))
            .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"v4".to_vec()));
    });
}

/// A single-key write's guards are preconditions on other keys: a failed one fails the
/// write (a conflict naming the guard key) and writes nothing; a guard is always checked
/// against the guard key's current value, however that value was last written (a plain
/// batch, a single-key write of the guard key itself, a batch deleting it). A guard on
/// the written key itself is checked too.
pub fn key_write_guards_are_checked<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let (doc, fence) = (k(ns, b"doc"), k(ns, b"fence"));
        let absent = || Precondition::Absent { key: fence.clone() };
        let equals = |v: &[u8]| Precondition::Equals {
            key: fence.clone(),
            value: v.to_vec(),
        };
        w.compare_and_swap(set(&doc, None, b"1").guard(absent()))
            .unwrap();
        // The guard key written by a plain batch: the old guard fails.
        put(w, &fence, b"A");
        expect_conflict(
            w.compare_and_swap(set(&doc, Some(b"1"), b"2").guard(absent())),
            &fence,
            ConflictReason::Present,
        );
        expect_conflict(
            w.compare_and_swap(set(&doc, Some(b"1"), b"2").guard(equals(b"B"))),
            &fence,
            ConflictReason::Changed,
        );
        assert_eq!(r.get(&doc).unwrap(), Some(b"1".to_vec()));
        w.compare_and_swap(set(&doc, Some(b"1"), b"2").guard(equals(b"A")))
            .unwrap();
        // The guard key written by a single-key write of its own.
        w.compare_and_swap(set(&fence, Some(b"A"), b"B")).unwrap();
        expect_conflict(
            w.compare_and_swap(set(&doc, Some(b"2"), b"3").guard(equals(b"A"))),
            &fence,
            ConflictReason::Changed,
        );
        w.compare_and_swap(set(&doc, Some(b"2"), b"3").guard(equals(b"B")))
            .unwrap();
        // The guard key deleted by a conditional batch of several keys.
        w.apply(
            Batch::new()
                .require_eq(doc.clone(), b"3".to_vec())
                .delete(fence.clone())
                .set(k(ns, b"other"), b"x".to_vec()),
        )
        .unwrap();
        expect_conflict(
            w.compare_and_swap(KeyWrite::delete(doc.clone(), b"3".to_vec()).guard(equals(b"B"))),
            &fence,
            ConflictReason::Missing,
        );
        assert_eq!(r.get(&doc).unwrap(), Some(b"3".to_vec()));
        // Several guards: every one must hold.
        let other = Precondition::Equals {
            key: k(ns, b"other"),
            value: b"x".to_vec(),
        };
        let stale_other = Precondition::Equals {
            key: k(ns, b"other"),
            value: b"y".to_vec(),
        };
        expect_conflict(
            w.compare_and_swap(
                set(&doc, Some(b"3"), b"4")
                    .guard(absent())
                    .guard(stale_other),
            ),
            &k(ns, b"other"),
            ConflictReason::Changed,
        );
        w.compare_and_swap(set(&doc, Some(b"3"), b"4").guard(absent()).guard(other))
            .unwrap();
        // A guard on the written key itself must hold as well.
        let on_doc = |v: &[u8]| Precondition::Equals {
            key: doc.clone(),
            value: v.to_vec(),
        };
        let refused = w.compare_and_swap(set(&doc, Some(b"4"), b"5").guard(on_doc(b"3")));
        assert!(
            matches!(refused, Err(StoreError::Conflict { ref key, .. }) if key == &doc),
            "{refused:?}"
        );
        w.compare_and_swap(set(&doc, Some(b"4"), b"5").guard(on_doc(b"4")))
            .unwrap();
        assert_eq!(r.get(&doc).unwrap(), Some(b"5".to_vec()));
    });
    // Nothing was written by a refused write: only the keys written above exist.
    let left: Vec<Vec<u8>> = dump(&fx.store).into_iter().map(|r| r.key).collect();
    for ns in [&b"store/"[..], b"lease/"] {
        assert!(left.contains(&k(ns, b"doc")));
        assert!(left.contains(&k(ns, b"other")));
        assert!(!left.contains(&k(ns, b"fence")));
    }
    assert_eq!(left.len(), 4);
}

/// Single-key compare-and-swap increments from several threads lose no update.
pub fn key_write_increments_are_not_lost<F: Fn(&Path) -> Store>(factory: F) {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 25;
    let fx = fixture(&factory);
    put(&fx.store, b"counter", &0u64.to_be_bytes());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = fx.store.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || -> Result<u64> {
                barrier.wait();
                let mut conflicts = 0u64;
                for _ in 0..PER_THREAD {
                    loop {
                        let current = store.get(b"counter")?.unwrap();
                        let n = u64::from_be_bytes(current.as_slice().try_into().unwrap());
                        let next = (n + 1).to_be_bytes().to_vec();
                        match store.compare_and_swap(KeyWrite::set(
                            b"counter".to_vec(),
                            Some(current),
                            next,
                        )) {
                            Ok(()) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(other) => return Err(other),
                        }
                    }
                }
                Ok(conflicts)
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let total = fx.store.get(b"counter").unwrap().unwrap();
    assert_eq!(
        u64::from_be_bytes(total.as_slice().try_into().unwrap()),
        THREADS as u64 * PER_THREAD,
        "lost updates"
    );
}
