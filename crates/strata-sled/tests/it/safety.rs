//! Opening safely: what is handed to sled, and what is refused before sled can destroy it.

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

/// A `snap.*.generating` left by a killed open (sled renames a snapshot only when it is
/// complete, and removes older ones only after that) is never the last good snapshot: it
/// is handled as sled's next snapshot would, removed, and the store opens with every
/// record — not reported as damage. (This test asserted the old refusal before #23.)
#[test]
fn a_nonempty_generating_snapshot_is_removed_as_sled_would_and_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path(), 100);
    // As a kill in the middle of sled's snapshot write leaves it: bytes without the
    // trailer sled checks, at an LSN past any real snapshot (so sled would read it first).
    let leftover = dir.path().join("snap.7FFFFFFFFFFF1234.generating");
    std::fs::write(&leftover, vec![9u8; 100]).unwrap();
    // A read-only open reads it from its private copy and leaves the directory alone.
    let store = SledStore::open_read_only(dir.path()).unwrap();
    assert_eq!(count(&store), 100);
    drop(store);
    assert!(leftover.exists());
    let store = SledStore::open_existing(dir.path()).unwrap();
    assert_eq!(count(&store), 100);
    assert!(!leftover.exists());
}

/// A long-lived datastore as Numax leaves one: written over several sessions, values
/// overwritten so sled reuses freed segments (its log is then ordered by LSN, not by
/// file offset), and never sealed (Numax does not write strata's seal).
fn churned_unsealed(dir: &Path) {
    for session in 0..1u32 {
        let store = options().open(dir).unwrap();
        for round in 0..24u32 {
            let mut batch = Batch::new();
            for i in 0..4000u32 {
                let v = ((session * 4 + round + i) % 251) as u8;
                batch = batch.set(format!("t/{i:08}").into_bytes(), vec![v; 200]);
                if i % 500 == 499 {
                    store.apply(std::mem::take(&mut batch)).unwrap();
                }
            }
            store.apply(batch).unwrap();
            // A durable point per round: sled frees a segment only once the pages that
            // replaced its contents are on disk, so the log reuses segments whatever the
            // timing of sled's background flusher (a CI run where it never ran left a log
            // written front to back, 42 MB, where no cut leaves proof).
            store.flush().unwrap();
        }
    }
    std::fs::remove_file(dir.join("strata.seal")).unwrap();
}

/// One way of opening a datastore.
type Opener = fn(&Path) -> strata_store::Result<SledStore>;

/// True when the store holds every record of [`churned_unsealed`] at its last value.
fn is_latest(store: &SledStore) -> bool {
    let page = store
        .scan(b"t/", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap();
    page.records.len() == 4000
        && page
            .records
            .iter()
            .enumerate()
            .all(|(i, r)| r.value == vec![((23 + i) % 251) as u8; 200])
}

/// A never-sealed datastore whose `db` was cut short (an interrupted copy or restore)
/// at several points: where the file holds log past what sled recovers (a segment header
/// written when the log was complete beyond the recovered point), or sled fails on it,
/// every open (read-only, existing, create-or-open) reports it damaged with its bytes as
/// they were (sled never sees the file writable). Before #23, sled recovered nothing at
/// most of these cuts and strata opened the store as empty. A cut that took only the
/// newest end of the log leaves no such proof (a crash tears a log the same way): that
/// limit is counted, not hidden.
#[test]
fn a_cut_never_sealed_log_is_damaged_for_every_open_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    churned_unsealed(&original);
    let full = std::fs::read(original.join("db")).unwrap();
    eprintln!("db {} bytes", full.len());
    // The premise: sled reused segments (19 MB of values went through a log this size),
    // so segments written later sit before older ones and a cut leaves proof.
    assert!(
        full.len() < 12 << 20,
        "sled wrote the log front to back ({} bytes): no segment was reused",
        full.len()
    );
    // Which cuts leave proof depends on where sled put each segment (it reuses freed
    // ones, in an order its flusher's timing decides): every twentieth of the file is
    // tried until three cut points were found damaged by every open.
    let (mut damaged, mut undetectable) = (0, 0);
    let mut tried = Vec::new();
    for pct in (5u64..=95).step_by(5) {
        if damaged >= 9 {
            break;
        }
        tried.push(pct);
        let copy = dir.path().join(format!("cut-{pct}"));
        std::fs::create_dir(&copy).unwrap();
        for e in std::fs::read_dir(&original).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() && e.file_name() != "db" {
                std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
            }
        }
        let cut = (full.len() as u64 * pct / 100) as usize;
        std::fs::write(copy.join("db"), &full[..cut]).unwrap();
        let opens: [(&str, Opener); 3] = [
            ("read-only", |p| SledStore::open_read_only(p)),
            ("existing", |p| SledStore::open_existing(p)),
            ("open", |p| SledStore::open(p)),
        ];
        for (how, open) in opens {
            let err = match open(&copy) {
                Ok(store) => {
                    // Without a seal, a cut that took only the newest end of the log
                    // leaves no proof in the file (a crash tears a log the same way):
                    // counted, and the cut points with proof must be reported.
                    if !is_latest(&store) {
                        undetectable += 1;
                    }
                    continue;
                }
                Err(e) => e,
            };
            damaged += 1;
            match &err {
                // Either the log check names `db`, or sled itself failed on the log
                // (a panic while opening is damage naming the datastore).
                StoreError::Damaged { path, reason } => {
                    eprintln!("{pct}% {how}: {err}");
                    assert!(
                        (path == &copy.join("db")
                            && reason.contains("holds more than sled recovers"))
                            || path == &copy,
                        "{pct}% {how}: {err}"
                    );
                }
                other => panic!("{pct}% {how}: expected Damaged, got {other:?}"),
            }
            assert_eq!(
                std::fs::read(copy.join("db")).unwrap(),
                &full[..cut],
                "{pct}% {how}: the log was changed"
            );
        }
    }
    eprintln!("{damaged} opens damaged, {undetectable} opens of a cut log without proof");
    assert!(
        damaged >= 9,
        "only {damaged} opens of the cuts at {tried:?}% were found damaged"
    );
    // The whole log opens with every record, unsealed as it is.
    let store = SledStore::open_existing(&original).unwrap();
    assert!(is_latest(&store));
}

/// A clean close is complete when the last handle is dropped: sled has released the
/// datastore (another open needs no wait) and the seal records `db` as sled left it, so a
/// copy cut by even one byte is damaged. (sled alone releases its lock from a background
/// thread after the drop and may still write its log then, which left a seal shorter than
/// the file and a cut of the last percent healthy.)
#[test]
fn a_close_returns_after_sled_released_the_datastore_and_the_seal_is_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    for round in 0..10u32 {
        let store = SledStore::open_store(&path).unwrap();
        let mut batch = Batch::new();
        for i in 0..2000u32 {
            batch = batch.set(format!("t/{i:05}").into_bytes(), vec![round as u8; 100]);
        }
        store.apply(batch).unwrap();
        drop(store);
        let file = std::fs::File::open(path.join("db")).unwrap();
        assert!(
            file.try_lock().is_ok(),
            "round {round}: the datastore is still locked after the close returned"
        );
        drop(file);
        let seal = std::fs::read_to_string(path.join("strata.seal")).unwrap();
        let len = std::fs::metadata(path.join("db")).unwrap().len();
        assert!(
            seal.contains(&format!("db_len: {len}\n")),
            "round {round}: db is {len} bytes, the seal says {seal}"
        );
        // Reopened at once, without waiting for the lock.
        let again = SledOptions::new()
            .lock_wait(std::time::Duration::ZERO)
            .open_existing(&path)
            .unwrap();
        assert_eq!(again.get(b"t/00000").unwrap(), Some(vec![round as u8; 100]));
    }
}
