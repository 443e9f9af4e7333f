//! Opening safely: what is handed to sled, and what is refused before sled can destroy it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use strata_sled::{is_sled_dir, SledOptions, SledStore};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, StoreError};

fn options() -> SledOptions {
    SledOptions::new().cache_capacity(4 << 20)
}

/// A sealed (cleanly closed) datastore of `n` records of 100 bytes.
fn seeded(dir: &Path, n: u32) {
    let store = options().open(dir).unwrap();
    let mut batch = Batch::new();
    for i in 0..n {
        batch = batch.set(format!("t/{i:08}").into_bytes(), vec![(i % 251) as u8; 100]);
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

fn count(store: &SledStore) -> usize {
    store
        .scan(b"t/", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .len()
}

fn foreign_contents() -> Vec<(&'static str, Vec<u8>)> {
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.extend(std::iter::repeat_n(0x5a, 4080));
    vec![
        ("sqlite", sqlite),
        (
            "random",
            (0..5000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
        ),
        ("text", b"just some notes\nnot a database\n".to_vec()),
    ]
}

#[test]
fn a_directory_with_a_foreign_db_file_is_refused_and_left_byte_identical() {
    for (what, bytes) in foreign_contents() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("db"), &bytes).unwrap();
        for existing in [true, false] {
            let result = if existing {
                options().open_existing(dir.path())
            } else {
                options().open(dir.path())
            };
            let err = result.unwrap_err();
            assert!(matches!(err, StoreError::Damaged { .. }), "{what}: {err:?}");
            assert!(err.to_string().contains("conf"), "{what}: {err}");
        }
        assert_eq!(
            std::fs::read(dir.path().join("db")).unwrap(),
            bytes,
            "{what}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{what}");
        assert!(!is_sled_dir(dir.path()));
    }
}

#[test]
fn a_foreign_conf_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("conf"), b"[core]\nbare = false\n").unwrap();
    std::fs::write(dir.path().join("db"), b"data").unwrap();
    let err = SledStore::open_existing(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    assert_eq!(std::fs::read(dir.path().join("db")).unwrap(), b"data");
}

#[test]
fn a_symlinked_db_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    seeded(&store_dir, 10);
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, b"precious").unwrap();
    std::fs::remove_file(store_dir.join("db")).unwrap();
    std::os::unix::fs::symlink(&target, store_dir.join("db")).unwrap();
    let err = SledStore::open_existing(&store_dir).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    // A lone symlink named `db` in an otherwise empty directory, too.
    let lone = dir.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::os::unix::fs::symlink(&target, lone.join("db")).unwrap();
    assert!(options().open(&lone).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
}

#[test]
fn a_file_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        options().open(&file).unwrap_err(),
        StoreError::Damaged { .. }
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn a_truncated_db_is_a_typed_error_and_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    seeded(&original, 20_000);
    {
        let store = SledStore::open_existing(&original).unwrap();
        assert_eq!(count(&store), 20_000);
    }
    // Reopened and closed again: the seal is rewritten.
    let full = std::fs::read(original.join("db")).unwrap();
    for pct in [1u64, 50, 90, 99] {
        let copy = dir.path().join(format!("cut-{pct}"));
        std::fs::create_dir(&copy).unwrap();
        for name in ["conf", "strata.seal"] {
            std::fs::copy(original.join(name), copy.join(name)).unwrap();
        }
        let cut = (full.len() as u64 * pct / 100) as usize;
        std::fs::write(copy.join("db"), &full[..cut]).unwrap();
        let err = SledStore::open_existing(&copy).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{pct}%: {err:?}");
        assert!(err.to_string().contains("truncated"), "{pct}%: {err}");
        assert_eq!(
            std::fs::read(copy.join("db")).unwrap(),
            &full[..cut],
            "{pct}%: the log was changed"
        );
    }
    // The original still opens with every record.
    let store = SledStore::open_existing(&original).unwrap();
    assert_eq!(count(&store), 20_000);
}

#[test]
fn an_empty_generating_snapshot_is_removed_and_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 100);
    let leftover = dir.path().join("snap.0000000000001234.generating");
    std::fs::write(&leftover, b"").unwrap();
    let store = SledStore::open_existing(dir.path()).unwrap();
    assert_eq!(count(&store), 100);
    assert!(!leftover.exists());
}

#[test]
fn a_nonempty_generating_snapshot_is_reported_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 100);
    let leftover = dir.path().join("snap.0000000000001234.generating");
    std::fs::write(&leftover, vec![9u8; 100]).unwrap();
    let err = SledStore::open_existing(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("generating") && text.contains("move it out"),
        "{text}"
    );
    assert_eq!(std::fs::read(&leftover).unwrap(), vec![9u8; 100]);
    std::fs::remove_file(&leftover).unwrap();
    assert_eq!(count(&SledStore::open_existing(dir.path()).unwrap()), 100);
}
