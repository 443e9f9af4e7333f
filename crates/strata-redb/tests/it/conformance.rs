//! The shared conformance suite against a tempdir-backed [`RedbStore`], plus
//! redb-specific behaviour: durability across reopen, the cross-process lock, read-only
//! opens.

use std::path::Path;
use strata_redb::{RedbOptions, RedbStore};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store, StoreError};

fn open_in(dir: &Path) -> Store {
    // A small cache: many of these stores are open at once while tests run in parallel.
    RedbOptions::new()
        .cache_capacity(4 << 20)
        .create(dir.join("store.redb"))
        .expect("open a scratch redb store")
        .into_store()
}

strata_store::conformance_tests!(open_in);

#[test]
fn backend_name_is_redb() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(open_in(dir.path()).backend_name(), "redb");
}

#[test]
fn data_survives_close_and_reopen_without_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    {
        let store = RedbStore::create_store(&path).unwrap();
        store
            .apply(
                Batch::new()
                    .set(b"t/a".to_vec(), b"1".to_vec())
                    .set(b"t/b\xff".to_vec(), vec![0u8; 10_000])
                    .set(b"u/x".to_vec(), b"gone".to_vec()),
            )
            .unwrap();
        store
            .apply(
                Batch::new()
                    .require_eq(b"u/x".to_vec(), b"gone".to_vec())
                    .delete(b"u/x".to_vec()),
            )
            .unwrap();
        // No flush: with the default durability every returned apply is on disk.
    }
    let reopened = RedbStore::open_existing(&path).unwrap();
    assert!(reopened.size_on_disk().unwrap() > 0);
    assert_eq!(reopened.path(), path);
    let store = reopened.into_store();
    assert_eq!(store.get(b"t/a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get(b"t/b\xff").unwrap(), Some(vec![0u8; 10_000]));
    assert_eq!(store.get(b"u/x").unwrap(), None);
    let page = store
        .scan(b"t/", None, ScanLimits::new(10, 1 << 20).unwrap())
        .unwrap();
    assert_eq!(page.records.len(), 2);
    assert!(!store.prefix_exists(b"u/").unwrap());
}

#[test]
fn a_second_open_in_this_process_says_it_is_open_in_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let store = RedbStore::create(&path).unwrap();
    let err = RedbStore::open_existing(&path).unwrap_err();
    assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("already open in this process"), "{text}");
    assert!(!text.contains("another process"), "{text}");
    let err = RedbStore::open_read_only(&path).unwrap_err();
    assert!(
        err.to_string().contains("already open in this process"),
        "{err}"
    );
    // Once closed, it opens again.
    drop(store);
    RedbStore::open_existing(&path).unwrap();
}

#[test]
fn a_truncated_file_is_damaged_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    {
        let store = RedbStore::create(&path).unwrap();
        for i in 0..200u32 {
            store
                .apply(Batch::new().set(format!("t/{i:05}").into_bytes(), vec![7u8; 500]))
                .unwrap();
        }
    }
    let full = std::fs::read(&path).unwrap();
    for cut in [full.len() / 2, full.len() * 9 / 10, full.len() - 1, 600, 10] {
        let copy = dir.path().join(format!("cut-{cut}.redb"));
        std::fs::write(&copy, &full[..cut]).unwrap();
        // A file shorter than redb's header records was cut: damaged, never recovered
        // to what is left (which would rewrite its header), and left as it is.
        let e = RedbStore::open_existing(&copy).unwrap_err();
        assert!(
            matches!(e, StoreError::Damaged { .. }),
            "cut at {cut}: {e:?}"
        );
        assert!(e.to_string().contains("cut short"), "cut at {cut}: {e}");
        assert!(std::fs::read(&copy).unwrap() == full[..cut], "cut at {cut}");
    }
}

/// A copy taken while the writer had the file open asks for redb's crash recovery, which
/// trusts the file's length: cut at a page boundary, redb's own open rewrote its header
/// for the shorter length before failing. Refused before redb opens it, byte for byte
/// unchanged, by the writable and the read-only open alike.
#[test]
fn a_cut_copy_of_an_open_file_is_damaged_before_any_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let store = RedbStore::create(&path).unwrap();
    for i in 0..200u32 {
        store
            .apply(Batch::new().set(format!("t/{i:05}").into_bytes(), vec![7u8; 500]))
            .unwrap();
    }
    let full = std::fs::read(&path).unwrap();
    drop(store);
    for cut in [full.len() / 2 / 4096 * 4096, full.len() - 4096] {
        let copy = dir.path().join(format!("hot-{cut}.redb"));
        std::fs::write(&copy, &full[..cut]).unwrap();
        for e in [
            RedbStore::open_existing(&copy).unwrap_err(),
            RedbStore::open_read_only(&copy).unwrap_err(),
        ] {
            assert!(
                matches!(e, StoreError::Damaged { .. }),
                "cut at {cut}: {e:?}"
            );
        }
        assert!(std::fs::read(&copy).unwrap() == full[..cut], "cut at {cut}");
    }
    // The whole copy is what a crash leaves: redb's recovery opens it.
    let whole = dir.path().join("hot-whole.redb");
    std::fs::write(&whole, &full).unwrap();
    let page = RedbStore::open_existing(&whole)
        .unwrap()
        .scan(b"t/", None, ScanLimits::new(1000, 1 << 20).unwrap())
        .unwrap();
    assert_eq!(page.records.len(), 200);
}

#[test]
fn read_only_file_opens_read_only_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    {
        let store = RedbStore::create(&path).unwrap();
        store
            .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).unwrap();
    // Root ignores file permission bits, so only an explicit read-only open is certain.
    let store = RedbStore::open_read_only(&path).unwrap();
    assert!(store.is_read_only());
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
    let err = store
        .apply(Batch::new().set(b"k".to_vec(), b"w".to_vec()))
        .unwrap_err();
    assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
    drop(store);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
