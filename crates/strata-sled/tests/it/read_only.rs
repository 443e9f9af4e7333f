//! `open_read_only`: reads a private copy, so nothing in the datastore's directory is
//! written; writes are refused; errors name the datastore's own files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use strata_sled::{SledOptions, SledStore};
use strata_store::{Batch, KeyWrite, KvRead, KvWrite, ScanLimits, StoreError};

fn seeded(dir: &Path, n: u32) {
    let store = SledStore::open(dir).unwrap();
    let mut batch = Batch::new();
    for i in 0..n {
        batch = batch.set(format!("t/{i:08}").into_bytes(), vec![(i % 251) as u8; 100]);
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

fn listing(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::metadata(&p).unwrap();
        let bytes = if m.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            Vec::new()
        };
        out.insert(p, (m.len(), m.modified().unwrap(), bytes));
    }
    out
}

#[test]
fn a_read_only_open_reads_everything_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 500);
    let before = listing(dir.path());
    let dir_mtime = std::fs::metadata(dir.path()).unwrap().modified().unwrap();
    for _ in 0..2 {
        let store = SledStore::open_read_only(dir.path()).unwrap();
        assert!(store.is_read_only());
        assert_eq!(store.path(), dir.path());
        let page = store
            .scan(b"t/", None, ScanLimits::new(10_000, 1 << 24).unwrap())
            .unwrap();
        assert_eq!(page.records.len(), 500);
        assert_eq!(store.get(b"t/00000007").unwrap(), Some(vec![7u8; 100]));
        // Every way of writing is refused, naming the datastore.
        let refused = [
            store.apply(Batch::new().set(b"t/x".to_vec(), b"1".to_vec())),
            store.compare_and_swap(KeyWrite::set(b"t/x".to_vec(), None, b"1".to_vec())),
            store
                .read_modify_write(&[b"t/00000001"], &mut |_| {
                    Some(Batch::new().delete(b"t/00000001".to_vec()))
                })
                .map(drop),
        ];
        for result in refused {
            let err = result.unwrap_err();
            assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
            let text = err.to_string();
            assert!(text.contains("read-only"), "{text}");
            assert!(text.contains(&dir.path().display().to_string()), "{text}");
        }
        assert_eq!(store.get(b"t/x").unwrap(), None);
    }
    assert_eq!(listing(dir.path()), before);
    assert_eq!(
        std::fs::metadata(dir.path()).unwrap().modified().unwrap(),
        dir_mtime
    );
    // And the datastore still opens for writing, with every record.
    let store = SledStore::open_existing(dir.path()).unwrap();
    assert!(!store.is_read_only());
    store
        .apply(Batch::new().set(b"t/x".to_vec(), b"1".to_vec()))
        .unwrap();
}

#[test]
fn a_missing_or_empty_path_is_not_found_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = SledStore::open_read_only(&missing).unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert!(!missing.exists());
    let err = SledStore::open_read_only(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The checks of an existing datastore are made on the copy; what they report names the
/// datastore's own files, and the datastore is left as it was.
#[test]
fn damage_found_in_the_copy_names_the_datastore() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 2000);
    let db = dir.path().join("db");
    let full = std::fs::read(&db).unwrap();
    std::fs::write(&db, &full[..full.len() / 2]).unwrap();
    let before = listing(dir.path());
    let err = SledStore::open_read_only(dir.path()).unwrap_err();
    match &err {
        StoreError::Damaged { path, reason } => {
            assert_eq!(path, &db, "{err}");
            assert!(reason.contains("truncated"), "{reason}");
        }
        other => panic!("expected Damaged, got {other:?}"),
    }
    assert_eq!(listing(dir.path()), before);

    // A snapshot sled did not finish (a killed open) is never the last good one: the
    // copy opens without it, and the datastore keeps its files as they were. (This
    // asserted a damage report before #23.)
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 100);
    let leftover = dir.path().join("snap.0000000000001234.generating");
    std::fs::write(&leftover, vec![9u8; 100]).unwrap();
    let before = listing(dir.path());
    let store = SledStore::open_read_only(dir.path()).unwrap();
    let page = store
        .scan(b"t/", None, ScanLimits::new(10_000, 1 << 24).unwrap())
        .unwrap();
    assert_eq!(page.records.len(), 100);
    drop(store);
    assert_eq!(listing(dir.path()), before);
}

/// Held by another handle (sled's lock): in use after the lock wait; nothing copied.
#[test]
fn a_datastore_in_use_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 10);
    let held = SledStore::open_existing(dir.path()).unwrap();
    let err = SledOptions::new()
        .lock_wait(std::time::Duration::ZERO)
        .open_read_only(dir.path())
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InUse { path } if path == dir.path()),
        "{err:?}"
    );
    drop(held);
}
