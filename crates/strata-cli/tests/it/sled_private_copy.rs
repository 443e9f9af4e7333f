//! Private copies of sled stores (#29 item 2): a read-only command on a sled datastore
//! reads a copy of it in `TMPDIR`; the copy is owner-only (directory 0700, files 0600),
//! removed when the command ends, and a copy left by a SIGKILLed command is removed by
//! the next command that makes one.
#![cfg(unix)]

use crate::support::{legacy_records, stderr, with_store};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn copies(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("strata-sled-read-")
        })
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every directory under `dir` is 0700 and every file 0600.
fn assert_owner_only(dir: &Path) {
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            assert_owner_only(&p);
        } else {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }
}

#[test]
fn a_killed_read_leaves_an_owner_only_copy_that_the_next_run_removes() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let db = dir.path().join("numax");
    with_store(&db, |s| {
        legacy_records(s, 150_000);
    });
    // The datastore is world-readable, as sled creates it: the copy must not be.
    for e in std::fs::read_dir(&db).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    // A clean run leaves nothing behind.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .env("TMPDIR", &tmp)
        .arg("--db")
        .arg(&db)
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(copies(&tmp).is_empty(), "{:?}", copies(&tmp));

    // SIGKILL a `verify` once its private copy exists (polled: the copy's owner lock).
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .env("TMPDIR", &tmp)
        .arg("--db")
        .arg(&db)
        .arg("verify")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if copies(&tmp).iter().any(|c| c.join("owner.lock").exists()) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "verify ended before its copy was seen"
        );
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = copies(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_owner_only(&left[0]);

    // The next run removes the killed run's copy, and its own.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .env("TMPDIR", &tmp)
        .arg("--db")
        .arg(&db)
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(copies(&tmp).is_empty(), "{:?}", copies(&tmp));
}
