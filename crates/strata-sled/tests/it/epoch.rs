//! The write epoch of the sled backend: a batch whose preconditions were read after the
//! epoch it carries commits without reading them again while nothing else wrote, and is
//! checked in full (so still conflicts) when a write landed between its read and its
//! commit.

use std::sync::Barrier;
use strata_sled::SledStore;
use strata_store::{Batch, KvRead, KvWrite, StoreError};

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn open() -> (tempfile::TempDir, SledStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path().join("db")).unwrap();
    (dir, store)
}

/// Observes the epoch, reads the rows, and builds their rewrite conditioned on the bytes
/// read (what the bulk pass does with a page).
fn observed_rewrite(store: &SledStore, keys: &[&str], suffix: &[u8]) -> Batch {
    let epoch = store
        .capabilities()
        .write_epoch()
        .expect("sled keeps a write epoch");
    let mut b = Batch::new();
    let mut sets = Vec::new();
    for key in keys {
        let old = store.get(&k(key)).unwrap().unwrap();
        sets.push((k(key), [old.as_slice(), suffix].concat()));
        b.push_precondition(strata_store::Precondition::Equals {
            key: k(key),
            value: old,
        });
    }
    b.observed_at(epoch);
    for (key, value) in sets {
        b = b.set(key, value);
    }
    b
}

fn seed(store: &SledStore, keys: &[&str]) {
    let mut b = Batch::new();
    for key in keys {
        b = b.set(k(key), b"v".to_vec());
    }
    store.apply(b).unwrap();
}

#[test]
fn rows_read_after_the_current_epoch_are_not_read_again() {
    let (_dir, store) = open();
    let rows = ["t/a", "t/b", "t/c"];
    seed(&store, &rows);
    store.apply(Batch::new().set(k("cursor"), k("0"))).unwrap();
    let before = store.precondition_checks();
    // Three observed row preconditions plus a cursor compare-and-swap pushed after the
    // observation: only the cursor is checked.
    let b = observed_rewrite(&store, &rows, b"!")
        .require_eq(k("cursor"), k("0"))
        .set(k("cursor"), k("1"));
    store.apply(b).unwrap();
    assert_eq!(store.precondition_checks() - before, 1);
    for key in rows {
        assert_eq!(store.get(key.as_bytes()).unwrap(), Some(k("v!")));
    }
    // A single-row rewrite takes the same path.
    let before = store.precondition_checks();
    store
        .apply(observed_rewrite(&store, &["t/a"], b"?"))
        .unwrap();
    assert_eq!(store.precondition_checks(), before);
    assert_eq!(store.get(b"t/a").unwrap(), Some(k("v!?")));
}

#[test]
fn a_write_between_the_read_and_the_commit_still_conflicts() {
    let (_dir, store) = open();
    let rows = ["t/a", "t/b"];
    seed(&store, &rows);
    for write in [
        Batch::new().set(k("t/b"), k("theirs")),
        Batch::new().delete(k("t/b")),
        // A conditional write of the row moves the epoch too.
        Batch::new()
            .require_eq(k("t/b"), k("v"))
            .set(k("t/b"), k("theirs")),
    ] {
        seed(&store, &rows);
        let ours = observed_rewrite(&store, &rows, b"!");
        let theirs = write.clone();
        // Another clone writes between our read and our commit.
        store.clone().apply(theirs).unwrap();
        let before = store.precondition_checks();
        let err = store.apply(ours).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { ref key, .. } if key == b"t/b"),
            "{err}"
        );
        assert!(store.precondition_checks() > before, "checked in full");
        // Nothing of the batch was written.
        assert_eq!(store.get(b"t/a").unwrap(), Some(k("v")));
        assert_ne!(store.get(b"t/b").unwrap(), Some(k("v!")));
    }
    // A write elsewhere only costs the checks: the rows still hold what was read.
    seed(&store, &rows);
    let ours = observed_rewrite(&store, &rows, b"!");
    store
        .apply(Batch::new().set(k("elsewhere"), k("x")))
        .unwrap();
    let before = store.precondition_checks();
    store.apply(ours).unwrap();
    assert_eq!(store.precondition_checks() - before, 2);
    assert_eq!(store.get(b"t/b").unwrap(), Some(k("v!")));
}

#[test]
fn an_epoch_of_another_datastore_vouches_for_nothing() {
    let (_d1, one) = open();
    let (_d2, two) = open();
    seed(&one, &["t/a"]);
    two.apply(Batch::new().set(k("t/a"), k("other"))).unwrap();
    let b = observed_rewrite(&one, &["t/a"], b"!");
    assert!(two.apply(b).unwrap_err().is_conflict());
    assert_eq!(two.get(b"t/a").unwrap(), Some(k("other")));
}

/// Threads rewrite one counter row with observed compare-and-swaps while other threads
/// write other keys (plain batches, on the shared side of the writer lock) to keep the
/// epoch moving: no increment is lost, so no stale precondition ever passed.
#[test]
fn concurrent_observed_rewrites_lose_no_update() {
    const RMW: usize = 3;
    const NOISE: usize = 2;
    const EACH: u64 = 200;
    let (_dir, store) = open();
    store.apply(Batch::new().set(k("n"), k("0"))).unwrap();
    let start = Barrier::new(RMW + NOISE);
    std::thread::scope(|s| {
        for _ in 0..RMW {
            s.spawn(|| {
                start.wait();
                let mut done = 0;
                while done < EACH {
                    let epoch = store.capabilities().write_epoch().unwrap();
                    let old = store.get(b"n").unwrap().unwrap();
                    let n: u64 = std::str::from_utf8(&old).unwrap().parse().unwrap();
                    // Let the others run between the read and the commit (what makes a
                    // stale precondition likely if it could ever pass).
                    std::thread::yield_now();
                    let mut b = Batch::new().require_eq(k("n"), old);
                    b.observed_at(epoch);
                    let b = b
                        .set(k("n"), (n + 1).to_string().into_bytes())
                        .set(k("last"), k("x"));
                    match store.apply(b) {
                        Ok(()) => done += 1,
                        Err(e) if e.is_conflict() => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        for t in 0..NOISE {
            let store = &store;
            let start = &start;
            s.spawn(move || {
                start.wait();
                for i in 0..EACH {
                    store
                        .apply(
                            Batch::new()
                                .set(format!("noise/{t}/{i}").into_bytes(), k("x"))
                                .set(format!("noise/{t}").into_bytes(), k("y")),
                        )
                        .unwrap();
                }
            });
        }
    });
    let total = RMW as u64 * EACH;
    assert_eq!(
        store.get(b"n").unwrap(),
        Some(total.to_string().into_bytes())
    );
}
