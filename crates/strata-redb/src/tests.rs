//! Unit tests of the redb store (its write transaction, opening, errors).

use super::*;
use strata_store::Batch;

/// A one-document write reads its document for writing and replaces it in place when
/// its batch only sets it to a value no longer than the stored one; every other
/// outcome goes through the ordinary apply — and every one writes exactly what the
/// decision said, or nothing, as the file shows after a reopen.
#[test]
fn a_document_set_in_place_or_not_stores_what_was_decided() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let doc: &[u8] = b"__nx/doc/acc/a1";
    let other: &[u8] = b"__nx/doc/acc/a2";
    let meta: &[u8] = b"__nx/fence/acc";
    let store = RedbStore::create(&path).unwrap();
    // Enough documents for a tree of more than one level.
    let mut b = Batch::new();
    for i in 0..2_000 {
        b = b.set(
            format!("__nx/doc/acc/b{i:05}").into_bytes(),
            vec![b'x'; 200],
        );
    }
    store
        .apply(b.set(doc.to_vec(), b"0123456789".to_vec()))
        .unwrap();
    let in_place = || store.inner.in_place.load(Relaxed);
    let write = |reads: &[&[u8]], f: &dyn Fn(Option<&[u8]>) -> Option<Batch>| {
        store.read_modify_write(reads, &mut |values| f(values[0]))
    };
    let current = |key: &[u8]| store.get(key).unwrap();

    // Shorter, then as long: in place.
    assert!(write(&[doc], &|v| {
        assert_eq!(v, Some(&b"0123456789"[..]));
        Some(Batch::new().set(doc.to_vec(), b"short".to_vec()))
    })
    .unwrap());
    assert_eq!(in_place(), 1);
    assert_eq!(current(doc).as_deref(), Some(&b"short"[..]));
    assert!(write(&[doc], &|_| Some(
        Batch::new().set(doc.to_vec(), b"SHORT".to_vec())
    ))
    .unwrap());
    assert_eq!(in_place(), 2);
    assert_eq!(current(doc).as_deref(), Some(&b"SHORT"[..]));

    // Longer: an ordinary insert.
    let long = vec![b'L'; 3_000];
    assert!(write(&[doc], &|_| Some(
        Batch::new().set(doc.to_vec(), long.clone())
    ))
    .unwrap());
    assert_eq!(in_place(), 2);
    assert_eq!(current(doc), Some(long.clone()));

    // A refusal, and a batch that writes nothing: nothing written.
    assert!(!write(&[doc], &|_| None).unwrap());
    assert!(!write(&[doc], &|_| Some(Batch::new())).unwrap());
    assert_eq!(current(doc), Some(long.clone()));

    // A failed precondition (not served by the cache): nothing written.
    let err = write(&[doc], &|_| {
        Some(
            Batch::new()
                .require_absent(b"__nx/doc/acc/b00007".to_vec())
                .set(doc.to_vec(), b"no".to_vec()),
        )
    })
    .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(current(doc), Some(long.clone()));
    assert_eq!(in_place(), 2);

    // Two mutations, a delete, an absent document, a guard read beside it: ordinary.
    assert!(write(&[doc, meta], &|_| {
        Some(
            Batch::new()
                .set(doc.to_vec(), b"d".to_vec())
                .set(other.to_vec(), b"o".to_vec()),
        )
    })
    .unwrap());
    assert_eq!(
        (current(doc), current(other)),
        (Some(b"d".to_vec()), Some(b"o".to_vec()))
    );
    assert!(write(&[other], &|_| Some(Batch::new().delete(other.to_vec()))).unwrap());
    assert_eq!(current(other), None);
    assert!(write(&[other], &|v| {
        assert_eq!(v, None);
        Some(Batch::new().set(other.to_vec(), b"new".to_vec()))
    })
    .unwrap());
    assert_eq!(current(other), Some(b"new".to_vec()));
    assert_eq!(in_place(), 2);
    // The document beside a guard read (the fence record, absent): in place.
    assert!(write(&[doc, meta], &|_| Some(
        Batch::new().set(doc.to_vec(), b"e".to_vec())
    ))
    .unwrap());
    assert_eq!(in_place(), 3);

    // Every document as decided, after a reopen (checksums and all).
    drop(store);
    let store = RedbStore::open_existing(&path).unwrap();
    assert_eq!(store.get(doc).unwrap(), Some(b"e".to_vec()));
    assert_eq!(store.get(other).unwrap(), Some(b"new".to_vec()));
    assert_eq!(
        store.get(b"__nx/doc/acc/b01999").unwrap(),
        Some(vec![b'x'; 200])
    );
    assert_eq!(store.get(meta).unwrap(), None);
}

#[test]
fn create_refuses_a_foreign_file_and_leaves_it_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, b"hello, not a database\n").unwrap();
    let err = RedbStore::create(&path).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"hello, not a database\n");
    // An empty file is not silently turned into a store either.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        RedbStore::create(&empty).unwrap_err(),
        StoreError::Damaged { .. }
    ));
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
}

#[test]
fn create_refuses_a_dangling_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link");
    let target = dir.path().join("target.redb");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = RedbStore::create(&link).unwrap_err();
    assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
    assert!(!target.exists());
}

#[test]
fn open_existing_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.redb");
    assert!(matches!(
        RedbStore::open_existing(&path).unwrap_err(),
        StoreError::NotFound { .. }
    ));
    assert!(!path.exists());
}

#[test]
fn magic_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let store = RedbStore::create(&path).unwrap();
    drop(store);
    assert!(is_redb_file(&path));
    assert!(!is_redb_file(dir.path()));
    assert!(!is_redb_file(&dir.path().join("nope")));
}

#[test]
fn deferred_durability_flushes_with_an_empty_durable_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let store = RedbOptions::new()
        .durability(RedbDurability::Deferred)
        .create(&path)
        .unwrap();
    store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    store.flush().unwrap();
    drop(store);
    let store = RedbStore::open_read_only(&path).unwrap();
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
    let err = store
        .apply(Batch::new().set(b"k".to_vec(), b"w".to_vec()))
        .unwrap_err();
    assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
    assert!(store.is_read_only());
}

/// The message of a redb failure says "retry" only for a transient I/O failure; a
/// full disk, missing permissions and redb's own errors name the fix instead.
#[test]
fn a_failure_says_retry_only_when_a_retry_can_help() {
    use std::error::Error as _;
    use std::io::{Error, ErrorKind};
    let shown = |e: redb::Error| {
        let err = map_error(Path::new("/srv/s.redb"), e);
        assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
        err.source().map(ToString::to_string).unwrap_or_default()
    };
    let full = shown(redb::Error::Io(Error::new(
        ErrorKind::StorageFull,
        "no space",
    )));
    assert!(
        full.contains("`/srv/s.redb`") && full.contains("free space"),
        "{full}"
    );
    let denied = shown(redb::Error::Io(Error::new(
        ErrorKind::PermissionDenied,
        "no",
    )));
    assert!(denied.contains("permissions"), "{denied}");
    let other = shown(redb::Error::TransactionInProgress);
    for msg in [&full, &denied, &other] {
        assert!(!msg.contains("retry"), "{msg}");
    }
    let transient = shown(redb::Error::Io(Error::new(ErrorKind::Interrupted, "eintr")));
    assert!(transient.contains("retry"), "{transient}");
}
