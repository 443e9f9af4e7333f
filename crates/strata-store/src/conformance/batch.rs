//! Batches: atomicity, preconditions, duplicate keys, deletes of absent keys, `flush`.

use super::{
    dump, each_write_path, expect_conflict, fixture, k, keys, put, put_all, scan, unbounded,
};
use crate::{Batch, ConflictReason, KvRead, KvWrite, Store, StoreError};
use std::path::Path;

/// A batch of sets and deletes is applied as a whole (plain and with preconditions).
pub fn atomic_batch<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put_all(
            w,
            &[(k(ns, b"a"), b"1".to_vec()), (k(ns, b"b"), b"2".to_vec())],
        );
        w.apply(
            Batch::new()
                .set(k(ns, b"a"), b"10".to_vec())
                .delete(k(ns, b"b"))
                .set(k(ns, b"c"), b"3".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&k(ns, b"a")).unwrap(), Some(b"10".to_vec()));
        assert_eq!(r.get(&k(ns, b"b")).unwrap(), None);
        assert_eq!(r.get(&k(ns, b"c")).unwrap(), Some(b"3".to_vec()));
        // The same through the conditional path.
        w.apply(
            Batch::new()
                .require_eq(k(ns, b"a"), b"10".to_vec())
                .delete(k(ns, b"a"))
                .set(k(ns, b"d"), b"4".to_vec())
                .set(k(ns, b"c"), b"30".to_vec()),
        )
        .unwrap();
        let page = scan(r, ns, None, unbounded());
        assert_eq!(keys(&page), vec![k(ns, b"c"), k(ns, b"d")]);
        assert_eq!(page.records[0].value, b"30");
        assert_eq!(page.records[1].value, b"4");
        // An empty batch is a no-op.
        w.apply(Batch::new()).unwrap();
        assert_eq!(scan(r, ns, None, unbounded()), page);
    });
}

/// `require_eq` passes when the key holds exactly the value; fails with `Changed` when it
/// holds another and `Missing` when it is absent.
pub fn precondition_equals<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let key = k(ns, b"cas");
        put(w, &key, b"v1");
        // Compare-and-swap succeeds.
        w.apply(
            Batch::new()
                .require_eq(key.clone(), b"v1".to_vec())
                .set(key.clone(), b"v2".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
        // A stale compare-and-swap fails and writes nothing.
        expect_conflict(
            w.apply(
                Batch::new()
                    .require_eq(key.clone(), b"v1".to_vec())
                    .set(key.clone(), b"v3".to_vec()),
            ),
            &key,
            ConflictReason::Changed,
        );
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
        // A value that is a prefix of the current one is not equal.
        expect_conflict(
            w.apply(Batch::new().require_eq(key.clone(), b"v".to_vec())),
            &key,
            ConflictReason::Changed,
        );
        // An empty expected value does not match an absent key.
        let missing = k(ns, b"missing");
        expect_conflict(
            w.apply(
                Batch::new()
                    .require_eq(missing.clone(), Vec::new())
                    .set(missing.clone(), b"x".to_vec()),
            ),
            &missing,
            ConflictReason::Missing,
        );
        assert_eq!(r.get(&missing).unwrap(), None);
        // ... but does match a present empty value.
        put(w, &missing, b"");
        w.apply(
            Batch::new()
                .require(missing.clone(), Some(Vec::new()))
                .set(missing.clone(), b"x".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&missing).unwrap(), Some(b"x".to_vec()));
        // A precondition on one key guarding writes to others (optimistic locking).
        let other = k(ns, b"other");
        w.apply(
            Batch::new()
                .require_eq(key.clone(), b"v2".to_vec())
                .set(other.clone(), b"guarded".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&other).unwrap(), Some(b"guarded".to_vec()));
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
    });
}

/// `require_absent` passes when the key is absent and fails with `Present` otherwise
/// (also when it holds an empty value).
pub fn precondition_absent<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let key = k(ns, b"claim");
        w.apply(
            Batch::new()
                .require_absent(key.clone())
                .set(key.clone(), b"first".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"first".to_vec()));
        expect_conflict(
            w.apply(
                Batch::new()
                    .require(key.clone(), None)
                    .set(key.clone(), b"second".to_vec()),
            ),
            &key,
            ConflictReason::Present,
        );
        assert_eq!(r.get(&key).unwrap(), Some(b"first".to_vec()));
        let empty = k(ns, b"empty");
        put(w, &empty, b"");
        expect_conflict(
            w.apply(Batch::new().require_absent(empty.clone())),
            &empty,
            ConflictReason::Present,
        );
        // After a delete the key is absent again.
        w.apply(Batch::new().delete(key.clone())).unwrap();
        w.apply(
            Batch::new()
                .require_absent(key.clone())
                .set(key.clone(), b"again".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"again".to_vec()));
        // A precondition-only batch that holds writes nothing and succeeds.
        w.apply(Batch::new().require_absent(k(ns, b"nobody")))
            .unwrap();
        assert_eq!(r.get(&k(ns, b"nobody")).unwrap(), None);
    });
}

/// Loads `a = 1`, `b = 2` and `guard = g1` under `ns`.
fn put_a_b_guard(w: &dyn KvWrite, ns: &[u8]) {
    put_all(
        w,
        &[
            (k(ns, b"a"), b"1".to_vec()),
            (k(ns, b"b"), b"2".to_vec()),
            (k(ns, b"guard"), b"g1".to_vec()),
        ],
    );
}

/// A batch whose precondition fails writes nothing at all — not the mutations added
/// before the precondition, not those after — and names the failing key and reason.
pub fn failed_precondition_writes_nothing<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put_a_b_guard(w, ns);
        let before = dump(r);
        let mut batch = Batch::new()
            .set(k(ns, b"a"), b"changed".to_vec())
            .delete(k(ns, b"b"))
            .set(k(ns, b"new"), b"n".to_vec());
        // The first precondition holds, the second does not.
        batch.push_precondition(crate::Precondition::Absent {
            key: k(ns, b"free"),
        });
        batch.push_precondition(crate::Precondition::Equals {
            key: k(ns, b"guard"),
            value: b"g0".to_vec(),
        });
        let batch = batch.set(k(ns, b"later"), b"l".to_vec());
        expect_conflict(w.apply(batch), &k(ns, b"guard"), ConflictReason::Changed);
        assert_eq!(dump(r), before, "a failed batch changed the store");

        // The first failing precondition (in order) is the one reported.
        let result = w.apply(
            Batch::new()
                .require_absent(k(ns, b"a"))
                .require_absent(k(ns, b"b"))
                .set(k(ns, b"x"), b"x".to_vec()),
        );
        expect_conflict(result, &k(ns, b"a"), ConflictReason::Present);
        assert_eq!(dump(r), before);
    });
}

/// A batch that writes one key twice is refused with `DuplicateKey` and writes nothing.
pub fn duplicate_key_rejected<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put(w, &k(ns, b"d"), b"0");
        let before = dump(r);
        let dup = k(ns, b"d");
        let batches = [
            Batch::new()
                .set(k(ns, b"first"), b"1".to_vec())
                .set(dup.clone(), b"1".to_vec())
                .set(dup.clone(), b"2".to_vec()),
            Batch::new()
                .set(dup.clone(), b"1".to_vec())
                .delete(dup.clone())
                .set(k(ns, b"last"), b"1".to_vec()),
            Batch::new().delete(dup.clone()).delete(dup.clone()),
            // Keys in increasing order up to the repeat (a bulk load's order).
            Batch::new()
                .set(k(ns, b"a"), b"1".to_vec())
                .set(k(ns, b"b"), b"1".to_vec())
                .set(dup.clone(), b"1".to_vec())
                .set(dup.clone(), b"2".to_vec()),
            // Through the conditional path too (with a precondition that holds).
            Batch::new()
                .require_eq(dup.clone(), b"0".to_vec())
                .set(k(ns, b"first"), b"1".to_vec())
                .set(dup.clone(), b"1".to_vec())
                .delete(dup.clone()),
        ];
        for batch in batches {
            match w.apply(batch) {
                Err(StoreError::DuplicateKey { key }) => assert_eq!(key, dup),
                other => panic!("expected DuplicateKey, got {other:?}"),
            }
            assert_eq!(dump(r), before, "a refused batch changed the store");
        }
        // A precondition and a mutation on the same key are not duplicates.
        w.apply(
            Batch::new()
                .require_eq(dup.clone(), b"0".to_vec())
                .set(dup.clone(), b"1".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&dup).unwrap(), Some(b"1".to_vec()));
    });
}

/// Deleting an absent key is not an error (plain and conditional batches).
pub fn delete_absent_ok<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        w.apply(Batch::new().delete(k(ns, b"never"))).unwrap();
        w.apply(
            Batch::new()
                .require_absent(k(ns, b"never"))
                .delete(k(ns, b"never"))
                .set(k(ns, b"x"), b"1".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&k(ns, b"never")).unwrap(), None);
        assert_eq!(r.get(&k(ns, b"x")).unwrap(), Some(b"1".to_vec()));
        assert!(!r.prefix_exists(&k(ns, b"never")).unwrap());
    });
}

/// `flush` succeeds on an empty store, after writes, and through a lease; data stays.
pub fn flush<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    fx.store.flush().unwrap();
    each_write_path(&fx.store, |w, r, ns| {
        put(w, &k(ns, b"f"), b"durable");
        w.flush().unwrap();
        w.flush().unwrap();
        assert_eq!(r.get(&k(ns, b"f")).unwrap(), Some(b"durable".to_vec()));
    });
}

/// One maximum key length on every backend: a batch setting a key of 3,000 bytes (over
/// [`crate::MAX_KEY_BYTES`]) is refused whole with [`StoreError::KeyTooLong`] — the same
/// typed error and the same message (key shortened, its length and the limit, no "retry")
/// on every backend, never the backend's own error — through a batch, a single-key write
/// and the write primitive; a key of exactly the limit is stored and read back. A copy's
/// records ([`Batch::copying_records`]) may keep a longer key only where the backend can
/// hold it; otherwise they get the same typed error. A longer key stored through the
/// backend's own API (where it can hold one) still reads, and deletes, through the handle.
pub fn key_length_limit<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let mut long = k(ns, b"long/");
        long.resize(3000, b'k');
        let beside = k(ns, b"beside");
        let err = w
            .apply(
                Batch::new()
                    .set(beside.clone(), b"v".to_vec())
                    .set(long.clone(), b"v".to_vec()),
            )
            .unwrap_err();
        match &err {
            StoreError::KeyTooLong { key, len, limit } => {
                assert_eq!((key, *len, *limit), (&long, 3000, crate::MAX_KEY_BYTES));
            }
            other => panic!("a 3,000-byte key: expected KeyTooLong, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("3000 bytes"), "{msg}");
        assert!(msg.contains("2048-byte maximum key length"), "{msg}");
        assert!(
            msg.contains("(3000 bytes)"),
            "the key is not shortened: {msg}"
        );
        assert!(msg.len() < 600, "the key is not shortened: {msg}");
        assert!(!msg.contains("retry"), "{msg}");
        assert_eq!(r.get(&long).unwrap(), None);
        assert_eq!(
            r.get(&beside).unwrap(),
            None,
            "nothing of the batch written"
        );
        let err = w
            .compare_and_swap(crate::KeyWrite::set(long.clone(), None, b"v".to_vec()))
            .unwrap_err();
        assert!(
            matches!(err, StoreError::KeyTooLong { len: 3000, .. }),
            "{err:?}"
        );
        let mut decided = 0;
        let err = w
            .read_modify_write(&[beside.as_slice()], &mut |_| {
                decided += 1;
                Some(Batch::new().set(long.clone(), b"v".to_vec()))
            })
            .unwrap_err();
        assert!(
            matches!(err, StoreError::KeyTooLong { len: 3000, .. }),
            "{err:?}"
        );
        assert!(decided >= 1);
        assert_eq!(r.get(&long).unwrap(), None);
        // Exactly the limit: stored everywhere.
        let mut longest = k(ns, b"longest/");
        longest.resize(crate::MAX_KEY_BYTES, b'k');
        put(w, &longest, b"v");
        assert_eq!(r.get(&longest).unwrap(), Some(b"v".to_vec()));
        // A copy's record with a long key: kept where the backend holds it, else the
        // same typed error (never a raw backend error).
        match w.apply(
            Batch::new()
                .set(long.clone(), b"copied".to_vec())
                .copying_records(),
        ) {
            Ok(()) => assert_eq!(r.get(&long).unwrap(), Some(b"copied".to_vec())),
            Err(StoreError::KeyTooLong { len: 3000, .. }) => {
                assert_eq!(r.get(&long).unwrap(), None);
            }
            Err(other) => panic!("a copied 3,000-byte key: {other:?}"),
        }
    });
    // A longer key an older build or another tool stored through the backend's own API
    // (where the backend can hold one) still reads, and deletes, through the handle.
    let legacy = vec![b'L'; 3000];
    let raw = fx.store.unguarded_backend();
    match raw.apply(Batch::new().set(legacy.clone(), b"old".to_vec())) {
        Ok(()) => {
            assert_eq!(fx.store.get(&legacy).unwrap(), Some(b"old".to_vec()));
            fx.store.apply(Batch::new().delete(legacy.clone())).unwrap();
            assert_eq!(fx.store.get(&legacy).unwrap(), None);
        }
        Err(StoreError::KeyTooLong { len: 3000, .. }) => {}
        Err(other) => panic!("a 3,000-byte key through the backend: {other:?}"),
    }
}
