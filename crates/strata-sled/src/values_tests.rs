//! The write cache is exact: after every kind of write, and while writers and readers race
//! on the same keys, every cached entry equals sled's value and every read equals sled's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::{SledOptions, SledStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use strata_store::{Batch, KeyWrite, KvRead, KvWrite, Precondition, StoreError};

fn open(dir: &std::path::Path) -> SledStore {
    SledOptions::new()
        .cache_capacity(4 << 20)
        .open(dir.join("db"))
        .unwrap()
}

/// Every cached entry is sled's value; every key in `keys` reads as sled holds it.
fn assert_exact(store: &SledStore, keys: &[&[u8]]) {
    for (k, v) in store.values.entries() {
        let sled = store.db.get(&k).unwrap().map(|v| v.to_vec());
        assert_eq!(
            sled,
            Some(v),
            "cached `{}` differs from sled",
            k.escape_ascii()
        );
    }
    for k in keys {
        let sled = store.db.get(k).unwrap().map(|v| v.to_vec());
        assert_eq!(store.get(k).unwrap(), sled, "`{}`", k.escape_ascii());
    }
}

fn cached(store: &SledStore, key: &[u8]) -> Option<Vec<u8>> {
    store.values.get(key).map(|v| v.to_vec())
}

fn set(key: &[u8], value: &[u8]) -> Batch {
    Batch::new().set(key.to_vec(), value.to_vec())
}

#[test]
fn every_write_kind_keeps_the_cache_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e"];
    // A plain set is cached; a plain delete drops the entry.
    store.apply(set(b"a", b"1")).unwrap();
    assert_eq!(cached(&store, b"a").as_deref(), Some(&b"1"[..]));
    store.apply(Batch::new().delete(b"a".to_vec())).unwrap();
    assert_eq!(cached(&store, b"a"), None);
    assert_exact(&store, keys);
    // A multi-key plain batch (sled `apply_batch`): sets cached, deletes dropped.
    store
        .apply(set(b"a", b"2").set(b"b".to_vec(), b"3".to_vec()))
        .unwrap();
    store
        .apply(
            set(b"c", b"4")
                .delete(b"a".to_vec())
                .set(b"b".to_vec(), b"5".to_vec()),
        )
        .unwrap();
    assert_eq!(cached(&store, b"a"), None);
    assert_eq!(cached(&store, b"b").as_deref(), Some(&b"5"[..]));
    assert_exact(&store, keys);
    // Single-key compare-and-swap: set, then delete.
    store
        .apply(
            Batch::new()
                .require_eq(b"b".to_vec(), b"5".to_vec())
                .set(b"b".to_vec(), b"6".to_vec()),
        )
        .unwrap();
    assert_eq!(cached(&store, b"b").as_deref(), Some(&b"6"[..]));
    store
        .apply(
            Batch::new()
                .require_absent(b"d".to_vec())
                .set(b"d".to_vec(), b"7".to_vec()),
        )
        .unwrap();
    store
        .apply(
            Batch::new()
                .require_eq(b"d".to_vec(), b"7".to_vec())
                .delete(b"d".to_vec()),
        )
        .unwrap();
    assert_eq!(cached(&store, b"d"), None);
    assert_exact(&store, keys);
    // A failed compare-and-swap and a failed conditional batch change no entry.
    let before = {
        let mut e = store.values.entries();
        e.sort();
        e
    };
    let err = store
        .apply(
            Batch::new()
                .require_eq(b"b".to_vec(), b"0".to_vec())
                .set(b"b".to_vec(), b"x".to_vec()),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let err = store
        .apply(
            Batch::new()
                .require_eq(b"c".to_vec(), b"4".to_vec())
                .require_absent(b"b".to_vec())
                .set(b"b".to_vec(), b"y".to_vec())
                .set(b"c".to_vec(), b"y".to_vec())
                .delete(b"e".to_vec()),
        )
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { ref key, .. } if key == b"b"),
        "{err}"
    );
    let after = {
        let mut e = store.values.entries();
        e.sort();
        e
    };
    assert_eq!(before, after);
    assert_exact(&store, keys);
    // A conditional multi-key batch (checked through the cache, then `apply_batch`).
    store
        .apply(
            Batch::new()
                .require_eq(b"b".to_vec(), b"6".to_vec())
                .require_eq(b"c".to_vec(), b"4".to_vec())
                .set(b"b".to_vec(), b"8".to_vec())
                .delete(b"c".to_vec())
                .set(b"e".to_vec(), b"9".to_vec()),
        )
        .unwrap();
    assert_eq!(cached(&store, b"b").as_deref(), Some(&b"8"[..]));
    assert_eq!(cached(&store, b"c"), None);
    assert_eq!(cached(&store, b"e").as_deref(), Some(&b"9"[..]));
    assert_exact(&store, keys);
    // A value too large for the cache replaces the key's entry by nothing.
    let big = vec![b'x'; 64 << 10];
    store.apply(set(b"e", &big)).unwrap();
    assert_eq!(cached(&store, b"e"), None);
    assert_eq!(store.get(b"e").unwrap(), Some(big));
    // A guard key read by a conditional batch and then written plainly.
    store
        .apply(
            Batch::new()
                .require_absent(b"f".to_vec())
                .set(b"a".to_vec(), b"g".to_vec()),
        )
        .unwrap();
    store.apply(set(b"f", b"h")).unwrap();
    assert!(store
        .apply(
            Batch::new()
                .require_absent(b"f".to_vec())
                .set(b"a".to_vec(), b"i".to_vec())
        )
        .is_err());
    assert_exact(&store, &[b"a", b"b", b"c", b"d", b"e", b"f"]);
}

#[test]
fn reopening_starts_empty_and_reads_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .apply(set(b"k", b"1").set(b"l".to_vec(), b"2".to_vec()))
        .unwrap();
    store.apply(set(b"k", b"3")).unwrap();
    assert_eq!(store.values.usage().0, 2);
    store.flush().unwrap();
    drop(store);
    let store = SledStore::open_existing(dir.path().join("db")).unwrap();
    assert_eq!(store.values.usage(), (0, 0));
    assert_eq!(store.get(b"k").unwrap(), Some(b"3".to_vec()));
    assert_eq!(store.get(b"l").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_disabled_cache_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledOptions::new()
        .cache_capacity(4 << 20)
        .write_cache(0, 0)
        .open(dir.path().join("db"))
        .unwrap();
    store.apply(set(b"k", b"1")).unwrap();
    store
        .apply(
            Batch::new()
                .require_eq(b"k".to_vec(), b"1".to_vec())
                .set(b"k".to_vec(), b"2".to_vec()),
        )
        .unwrap();
    assert_eq!(store.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(store.values.usage(), (0, 0));
    assert_eq!(SledOptions::new().write_cache_bounds(), (8192, 8 << 20));
}

#[test]
fn a_small_cache_stays_within_its_bounds_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledOptions::new()
        .cache_capacity(4 << 20)
        .write_cache(8, 4096)
        .open(dir.path().join("db"))
        .unwrap();
    let keys: Vec<Vec<u8>> = (0..50u32).map(|i| format!("k{i}").into_bytes()).collect();
    for round in 0..4u32 {
        for (i, k) in keys.iter().enumerate() {
            let value = vec![b'v'; (i * 37 + round as usize * 11) % 700];
            store.apply(Batch::new().set(k.clone(), value)).unwrap();
            let (n, bytes) = store.values.usage();
            assert!(n <= 8 && bytes <= 4096, "{n} entries, {bytes} bytes");
        }
    }
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    assert_exact(&store, &refs);
}

fn counter(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()))
}

/// Writers of every kind and readers race on the same keys: no read goes backwards, no
/// increment is lost, and the cache ends equal to sled.
#[test]
fn racing_writers_and_readers_keep_the_cache_exact() {
    const ROUNDS: u64 = 400;
    let dir = tempfile::tempdir().unwrap();
    // Small bounds, so entries are also dropped for room while the race runs.
    let store = SledOptions::new()
        .cache_capacity(4 << 20)
        .write_cache(64, 64 << 10)
        .open(dir.path().join("db"))
        .unwrap();
    let shared: Vec<Vec<u8>> = (0..6u8).map(|i| vec![b's', i]).collect();
    let deleted: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'd', i]).collect();
    let writers = 5;
    let readers = 2;
    let start = Barrier::new(writers + readers);
    let increments = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        // Two compare-and-swap incrementers of `n` (single key: a batch, and a
        // `KeyWrite` with a guard) and one that also claims its number (a conditional
        // multi-key batch).
        for t in 0..3u64 {
            let (store, start, increments, done) = (store.clone(), &start, &increments, &done);
            s.spawn(move || {
                start.wait();
                for _ in 0..ROUNDS {
                    let seen = store.get(b"n").unwrap();
                    let next = counter(seen.clone()) + 1;
                    let value = next.to_be_bytes().to_vec();
                    let result = if t == 1 {
                        let write =
                            KeyWrite::set(b"n".to_vec(), seen, value).guard(Precondition::Absent {
                                key: b"guard".to_vec(),
                            });
                        store.compare_and_swap(write)
                    } else {
                        let mut batch = Batch::new()
                            .require(b"n".to_vec(), seen)
                            .set(b"n".to_vec(), value);
                        if t == 2 {
                            batch = batch.set(format!("claim/{next}").into_bytes(), b"2".to_vec());
                        }
                        store.apply(batch)
                    };
                    match result {
                        Ok(()) => {
                            increments.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        // Two plain writers of the same keys: single sets and multi-key batches, every
        // value unique (writer, sequence); deletes (alone and beside sets) on other keys.
        for t in 0..2u8 {
            let (store, start, shared, deleted, done) =
                (store.clone(), &start, &shared, &deleted, &done);
            s.spawn(move || {
                start.wait();
                for i in 0..ROUNDS * 4 {
                    let at = (i as usize * 7 + usize::from(t)) % shared.len();
                    let k = &shared[at];
                    let mut value = vec![t];
                    value.extend_from_slice(&(i as u32).to_be_bytes());
                    let d = &deleted[at % deleted.len()];
                    let batch = match i % 5 {
                        0 | 1 => Batch::new().set(k.clone(), value),
                        2 => Batch::new().delete(d.clone()),
                        3 => Batch::new()
                            .set(d.clone(), value.clone())
                            .set(k.clone(), value),
                        _ => {
                            let other = &shared[(at + 1) % shared.len()];
                            Batch::new()
                                .set(k.clone(), value.clone())
                                .set(other.clone(), value)
                                .delete(d.clone())
                        }
                    };
                    store.apply(batch).unwrap();
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        // Readers: the counter never goes backwards; a read of a shared key between two
        // equal reads of sled itself (values are unique, so nothing was written between
        // them) returns that value.
        for _ in 0..readers {
            let (store, start, shared, done) = (store.clone(), &start, &shared, &done);
            s.spawn(move || {
                start.wait();
                let mut last = 0;
                let mut checked = 0u64;
                while done.load(Ordering::SeqCst) < 5 {
                    let n = counter(store.get(b"n").unwrap());
                    assert!(n >= last, "the counter went back from {last} to {n}");
                    last = n;
                    for k in shared {
                        let before = store.db.get(k).unwrap();
                        let read = store.get(k).unwrap();
                        let after = store.db.get(k).unwrap();
                        if before == after {
                            assert_eq!(read.as_deref(), before.as_deref(), "stale read");
                            checked += 1;
                        }
                    }
                }
                assert!(checked > 0);
            });
        }
    });
    assert_eq!(
        counter(store.get(b"n").unwrap()),
        increments.load(Ordering::SeqCst)
    );
    let mut keys: Vec<&[u8]> = shared.iter().map(Vec::as_slice).collect();
    keys.extend(deleted.iter().map(Vec::as_slice));
    keys.push(b"n");
    assert_exact(&store, &keys);
}

/// A compare-and-swap that fails on a key the cache does not hold leaves sled's current
/// value in the cache, and an absent key's failure caches nothing.
#[test]
fn a_failed_compare_and_swap_caches_the_value_sled_reported() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        store
            .apply(set(b"k", b"stored").set(b"k2".to_vec(), b"stored 2".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    let store = SledOptions::new()
        .cache_capacity(4 << 20)
        .open_existing(dir.path().join("db"))
        .unwrap();
    assert_eq!(cached(&store, b"k"), None);
    // The guess "absent" fails on the key itself.
    let guess = Batch::new()
        .require(b"k".to_vec(), None)
        .set(b"k".to_vec(), b"new".to_vec());
    assert!(matches!(
        store.apply(guess).unwrap_err(),
        StoreError::Conflict { ref key, .. } if key == b"k"
    ));
    assert_eq!(cached(&store, b"k").as_deref(), Some(&b"stored"[..]));
    // The same through a single-key write.
    assert_eq!(cached(&store, b"k2"), None);
    let guess = KeyWrite::set(b"k2".to_vec(), None, b"new".to_vec());
    assert!(matches!(
        store.compare_and_swap(guess).unwrap_err(),
        StoreError::Conflict { ref key, .. } if key == b"k2"
    ));
    assert_eq!(cached(&store, b"k2").as_deref(), Some(&b"stored 2"[..]));
    // A wrong expected value on an absent key: sled reports it absent, nothing cached.
    let wrong = Batch::new()
        .require_eq(b"absent".to_vec(), b"x".to_vec())
        .set(b"absent".to_vec(), b"y".to_vec());
    assert!(store.apply(wrong).is_err());
    assert_eq!(cached(&store, b"absent"), None);
    assert_exact(&store, &[b"k", b"k2", b"absent"]);
}

/// The write primitive on keys the write cache does not hold (a reopened store): the
/// decision is made once, on sled's value read under the writer lock (absent when absent);
/// its outcome is exactly sled's and cached as such; a refusal writes nothing.
#[test]
fn a_decided_write_decides_once_on_what_sled_holds() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        store
            .apply(set(b"k", b"stored").set(b"k2".to_vec(), b"v".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    let store = open(dir.path());
    assert_eq!(cached(&store, b"k"), None);
    let mut calls: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
    let mut record = |values: &[Option<&[u8]>]| {
        calls.push(values.iter().map(|v| v.map(<[u8]>::to_vec)).collect());
    };
    store
        .read_modify_write(&[b"k"], &mut |values| {
            record(values);
            let mut next = values[0].unwrap_or_default().to_vec();
            next.push(b'!');
            Some(set(b"k", &next))
        })
        .unwrap();
    assert_eq!(store.get(b"k").unwrap(), Some(b"stored!".to_vec()));
    assert_eq!(cached(&store, b"k").as_deref(), Some(&b"stored!"[..]));
    // A refusal: nothing written.
    assert!(!store
        .read_modify_write(&[b"k2", b"absent"], &mut |values| {
            record(values);
            None
        })
        .unwrap());
    assert_eq!(store.get(b"k2").unwrap(), Some(b"v".to_vec()));
    // A cached key is decided on its cached value; a delete drops the entry.
    store
        .read_modify_write(&[b"k"], &mut |values| {
            record(values);
            Some(Batch::new().delete(b"k".to_vec()))
        })
        .unwrap();
    assert_eq!(
        calls,
        vec![
            vec![Some(b"stored".to_vec())],
            vec![Some(b"v".to_vec()), None],
            vec![Some(b"stored!".to_vec())],
        ]
    );
    assert_eq!(store.get(b"k").unwrap(), None);
    assert_eq!(cached(&store, b"k"), None);
    assert_exact(&store, &[b"k", b"k2", b"absent"]);
}
