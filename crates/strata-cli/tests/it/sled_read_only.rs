//! Read-only commands on a sled datastore create and change nothing (DESIGN.md §5): the
//! directory's listing, every file's bytes, sizes and mtimes, and the directory's own
//! mtime are as they were after each command — also when sled's snapshot file is missing
//! (sled writes one on every open) and on read-only media.

use crate::support::{legacy_records, with_store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

/// What a directory holds: per entry (relative path) its kind, size, mtime and bytes.
type Listing = BTreeMap<PathBuf, (bool, u64, SystemTime, Option<Vec<u8>>)>;

fn listing(dir: &Path) -> Listing {
    let mut out = Listing::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(dir).unwrap().to_path_buf();
        let bytes = meta.is_file().then(|| std::fs::read(&p).unwrap());
        out.insert(
            rel,
            (meta.is_dir(), meta.len(), meta.modified().unwrap(), bytes),
        );
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

/// Runs `strata --db <db> <args>` with `TMPDIR=tmp`.
fn run(db: &str, args: &[&str], tmp: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .env("TMPDIR", tmp)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

const READ_ONLY: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["verify"],
    &["verify", "--json"],
    &["collections"],
    &["collections", "--json"],
    &["inspect", "op-log"],
    &["inspect", "gcounter-materialized"],
    &["fence"],
    &["migrate", "--dry-run"],
    &["repair"],
    &["keys", "status"],
];

/// A migrated sled datastore with some Numax records.
fn datastore(dir: &Path) -> PathBuf {
    let db = dir.join("numax");
    with_store(&db, |s| {
        legacy_records(s, 300);
    });
    let out = crate::support::strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    db
}

fn assert_read_only_commands_change_nothing(db: &Path, tmp: &Path) {
    let before = listing(db);
    for scheme in ["", "sled:"] {
        let arg = format!("{scheme}{}", db.display());
        for args in READ_ONLY {
            let out = run(&arg, args, tmp);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
            let after = listing(db);
            for (path, was) in &before {
                let now = after.get(path);
                assert!(now.is_some(), "{args:?} removed {}", path.display());
                let now = now.unwrap();
                assert_eq!(
                    (was.0, was.1, was.2),
                    (now.0, now.1, now.2),
                    "{args:?} changed {} (kind, size, mtime)",
                    path.display()
                );
                assert!(
                    was.3 == now.3,
                    "{args:?} changed the bytes of {}",
                    path.display()
                );
            }
            let created: Vec<_> = after.keys().filter(|p| !before.contains_key(*p)).collect();
            assert!(created.is_empty(), "{args:?} created {created:?}");
            // The private copy it read is gone.
            let left: Vec<_> = std::fs::read_dir(tmp).unwrap().collect();
            assert!(left.is_empty(), "{args:?} left {left:?} in TMPDIR");
        }
    }
}

#[test]
fn read_only_commands_leave_a_sled_datastore_byte_and_listing_identical() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let db = datastore(dir.path());
    assert_read_only_commands_change_nothing(&db, &tmp);
}

#[test]
fn a_missing_sled_snapshot_is_not_recreated_by_a_read_only_command() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let db = datastore(dir.path());
    let mut removed = 0;
    for e in std::fs::read_dir(&db).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("snap.")
        {
            std::fs::remove_file(p).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "a closed sled datastore has one snapshot");
    assert_read_only_commands_change_nothing(&db, &tmp);
    // The data is all there (read through the copy, which sled recovered from the log).
    let out = run(db.to_str().unwrap(), &["verify", "--json"], &tmp);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "ok", "{doc}");
}

/// A read-only command on a datastore another process holds waits, then says it is in
/// use (exit 1), and changes nothing.
#[test]
fn a_read_only_command_on_a_datastore_in_use_says_so_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let db = datastore(dir.path());
    // The lock sled takes on `db` (as another process's sled holds it).
    let held = std::fs::File::open(db.join("db")).unwrap();
    held.lock().unwrap();
    let before = listing(&db);
    let out = run(db.to_str().unwrap(), &["status"], &tmp);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
    assert_eq!(listing(&db), before);
    drop(held);
}
