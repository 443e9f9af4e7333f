//! `strata demo`: the README's main job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn demo(dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["demo", dir.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
fn demo_runs_every_chapter_and_can_be_rerun() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "== 1.",
        "(`strata status` exits 3)",
        "SyncManager::open refuses it: legacy unversioned data",
        "now says: ok (exit 0)",
        "re-delivered 10 of them: 0 applied again",
        "hydrated state identical to before the restart: true",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("gcounter visits ") && l.ends_with("= Some(12)")),
        "{text}"
    );
    // The datastore it leaves behind is current.
    let status = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", dir.join("sync").to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0));
    // A previous demo directory may be reused.
    assert_eq!(demo(&dir).status.code(), Some(0));
}

#[test]
fn demo_refuses_a_non_empty_foreign_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("precious.txt"), b"do not delete").unwrap();
    let out = demo(tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a previous strata demo"));
    assert!(tmp.path().join("precious.txt").exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}
