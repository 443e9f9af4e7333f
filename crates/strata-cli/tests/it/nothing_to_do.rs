//! `strata fence abort` and `strata repair --apply` with nothing to do change nothing: the
//! store is inspected through a read-only open and opened for writing only when there is
//! work (a redb file opened for writing rewrites its header; sled writes on every open).

use crate::support::{legacy_records, strata_db, with_store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const NOTHING_TO_DO: &[&[&str]] = &[
    &["fence", "abort"],
    &["fence", "abort", "--json"],
    &["repair", "--apply"],
    &["repair", "--apply", "--json"],
];

/// Per file below `path` (or `path` itself): size, mtime and bytes.
fn state(path: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, Option<Vec<u8>>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::metadata(&p).unwrap();
        let bytes = meta.is_file().then(|| std::fs::read(&p).unwrap());
        out.insert(p.clone(), (meta.len(), meta.modified().unwrap(), bytes));
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

fn assert_nothing_changes(db: &Path) {
    // A first writable open (as the application would) settles the store.
    let out = strata_db(db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let before = state(db);
    for args in NOTHING_TO_DO {
        let out = strata_db(db, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        let after = state(db);
        for (path, was) in &before {
            let now = after
                .get(path)
                .unwrap_or_else(|| panic!("{args:?} removed {path:?}"));
            assert_eq!((was.0, was.1), (now.0, now.1), "{args:?} touched {path:?}");
            assert!(was.2 == now.2, "{args:?} changed the bytes of {path:?}");
        }
        assert_eq!(after.len(), before.len(), "{args:?} created files");
    }
    let text = String::from_utf8_lossy(&strata_db(db, &["fence", "abort"]).stdout).into_owned();
    assert!(text.contains("nothing to reset"), "{text}");
    let text = String::from_utf8_lossy(&strata_db(db, &["repair", "--apply"]).stdout).into_owned();
    assert!(text.contains("no stuck or corrupt metadata"), "{text}");
}

#[test]
fn nothing_to_do_leaves_a_redb_file_byte_and_mtime_identical() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.redb");
    {
        let store = strata_redb::RedbStore::create_store(&db).unwrap();
        legacy_records(&store, 50);
    }
    assert_nothing_changes(&db);
}

#[test]
fn nothing_to_do_leaves_a_sled_datastore_byte_and_listing_identical() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    with_store(&db, |s| {
        legacy_records(s, 50);
    });
    assert_nothing_changes(&db);
}
