//! strata is not the only writer of a sled datastore: Numax (or any program linking sled)
//! keeps writing a store strata closed cleanly. Its writes are legitimate, so the next
//! open must not call the datastore damaged because the seal strata left at its clean
//! close no longer describes it — while a `db` damaged in place is still refused.

use std::collections::BTreeMap;
use std::path::Path;
use strata_sled::{SledOptions, SledStore};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, StoreError};

fn options() -> SledOptions {
    SledOptions::new().cache_capacity(4 << 20)
}

fn everything(store: &SledStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    store
        .scan(b"", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

/// A datastore strata closed cleanly (sealed), holding `m/0000`..`m/0099`.
fn sealed(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let store = options().open(dir).unwrap();
    let mut batch = Batch::new();
    for i in 0..100u32 {
        batch = batch.set(format!("m/{i:04}").into_bytes(), vec![i as u8; 64]);
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
    let all = everything(&store);
    drop(store);
    assert!(dir.join("strata.seal").exists(), "a clean close seals");
    all
}

/// What a plain sled program (no strata) does to the datastore: opens it, applies
/// `edit`, flushes and closes it cleanly.
fn plain_sled(dir: &Path, edit: impl FnOnce(&sled::Db)) {
    // sled releases its file lock when the last background thread of an earlier handle
    // in this process ends, not when the handle is dropped: wait for it, as strata does.
    let mut tries = 0;
    let db = loop {
        match sled::open(dir) {
            Ok(db) => break db,
            Err(e) if tries < 400 => {
                tries += 1;
                if tries == 1 {
                    println!("waiting for sled's lock: {e}");
                }
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            Err(e) => panic!("sled::open: {e}"),
        }
    };
    edit(&db);
    db.flush().unwrap();
}

fn reopened(dir: &Path, what: &str) -> SledStore {
    options()
        .open_existing(dir)
        .unwrap_or_else(|e| panic!("{what}: another program's writes refused: {e}"))
}

#[test]
fn another_sled_program_writing_past_both_ends_is_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = sealed(dir.path());
    plain_sled(dir.path(), |db| {
        // A key below the smallest and one above the largest strata saw at its close.
        db.insert(b"A-runtime-id", b"node-1".to_vec()).unwrap();
        db.insert(b"zz/app-key", b"app".to_vec()).unwrap();
        db.remove(b"m/0000").unwrap();
    });
    expected.insert(b"A-runtime-id".to_vec(), b"node-1".to_vec());
    expected.insert(b"zz/app-key".to_vec(), b"app".to_vec());
    expected.remove(b"m/0000".as_slice());
    for what in ["first open", "second open"] {
        let store = reopened(dir.path(), what);
        assert_eq!(everything(&store), expected, "{what}");
    }
    // The read-only open (a private copy) agrees.
    let store = options().open_read_only(dir.path()).unwrap();
    assert_eq!(everything(&store), expected);
}

#[test]
fn another_sled_program_after_a_session_that_wrote_nothing_is_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = sealed(dir.path());
    // A strata session that only reads, closed cleanly: sealed again.
    drop(reopened(dir.path(), "reading session"));
    assert!(dir.path().join("strata.seal").exists());
    plain_sled(dir.path(), |db| {
        db.remove(b"m/0099").unwrap();
    });
    expected.remove(b"m/0099".as_slice());
    let store = reopened(dir.path(), "after the removal");
    assert_eq!(everything(&store), expected);
}

#[test]
fn a_sealed_log_overwritten_in_place_is_still_damaged() {
    let dir = tempfile::tempdir().unwrap();
    sealed(dir.path());
    let db = dir.path().join("db");
    let mut bytes = std::fs::read(&db).unwrap();
    let len = bytes.len();
    for b in &mut bytes[len / 4..] {
        *b = 0;
    }
    std::fs::write(&db, &bytes).unwrap();
    let err = options().open_existing(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
}
