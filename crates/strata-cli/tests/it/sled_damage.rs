//! Damaged is damaged, healthy is healthy (#23 item 2), for every command on a sled
//! datastore:
//!
//! * a never-sealed datastore (written by Numax, or killed while open) whose `db` was cut
//!   short holds log past what sled recovers: every command exits 4 naming `db`, and no
//!   command changes its bytes (before #23, `status`/`verify` said it was fine and
//!   `migrate` let sled cut the file down to what it recovered);
//! * a `snap.*.generating` left by a run killed while sled wrote its snapshot is never
//!   the last good snapshot: every command works (read-only ones leave it where it is),
//!   also after a real SIGKILL of a child while sled wrote it.

use crate::support::{names_in, stderr, stdout, store_commands, strata_db};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata_store::{Batch, KvWrite, ScanLimits};

const PREFIX: &str = "__nx/crdt/lww-register/";
const KEYS: u32 = 4000;
const ROUNDS: u32 = 24;

fn value(i: u32) -> Vec<u8> {
    vec![((ROUNDS - 1 + i) % 251) as u8; 200]
}

/// A legacy Numax datastore as a long-lived Numax process leaves it: registers
/// overwritten round after round (sled reuses freed segments, so its log is ordered by
/// LSN, not by offset), and no strata seal. Flushed after every batch, as Numax's flusher
/// does over a long life: each segment header then records log that was complete when it
/// was written, which is what a cut leaves as proof (without, how much is recorded
/// depends on when sled's own flusher got the CPU).
fn churned_unsealed(dir: &Path) {
    {
        let store = strata_sled::SledStore::open_store(dir).unwrap();
        for round in 0..ROUNDS {
            let mut batch = Batch::new();
            for i in 0..KEYS {
                let v = ((round + i) % 251) as u8;
                batch = batch.set(format!("{PREFIX}r{i:06}").into_bytes(), vec![v; 200]);
                if i % 500 == 499 {
                    store.apply(std::mem::take(&mut batch)).unwrap();
                    store.flush().unwrap();
                }
            }
            store.apply(batch).unwrap();
        }
        store.flush().unwrap();
    }
    std::fs::remove_file(dir.join("strata.seal")).unwrap();
}

/// A copy of `original` with its `db` cut to `pct` percent.
fn cut_copy(original: &Path, to: &Path, pct: u64) -> Vec<u8> {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(original).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != "db" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let full = std::fs::read(original.join("db")).unwrap();
    let cut = full[..(full.len() as u64 * pct / 100) as usize].to_vec();
    std::fs::write(to.join("db"), &cut).unwrap();
    cut
}

/// The library's verdict on a cut datastore: damaged (`true`), or it opens (`false`;
/// printed when it then lacks records or holds older values: a cut that took only the
/// newest end of a log without a seal leaves no proof in the file, as a crash tears a log
/// the same way — docs/format.md, "sled length seal").
fn damaged(dir: &Path, what: &str) -> bool {
    match strata_sled::SledStore::open_read_only(dir) {
        Err(strata_store::StoreError::Damaged { .. }) => true,
        Err(e) => panic!("{what}: {e}"),
        Ok(store) => {
            use strata_store::KvRead;
            let page = store
                .scan(
                    PREFIX.as_bytes(),
                    None,
                    ScanLimits::new(usize::MAX, 1 << 30).unwrap(),
                )
                .unwrap();
            let latest = page.records.len() == KEYS as usize
                && page
                    .records
                    .iter()
                    .enumerate()
                    .all(|(i, r)| r.value == value(i as u32));
            if !latest {
                println!("{what}: opens without its newest log and no proof of the cut");
            }
            false
        }
    }
}

#[test]
fn a_cut_never_sealed_datastore_is_damaged_for_every_command_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("numax");
    churned_unsealed(&original);
    // Which cuts leave proof depends on where sled put each segment (it reuses freed
    // ones, in an order its flusher's timing decides): every twentieth of the file is
    // tried, and the commands are run on the first three cuts the library calls damaged.
    let mut checked = 0;
    let mut tried = Vec::new();
    for pct in (5u64..=95).step_by(5) {
        if checked == 3 {
            break;
        }
        tried.push(pct);
        let cut_dir = dir.path().join(format!("cut-{pct}"));
        let cut = cut_copy(&original, &cut_dir, pct);
        if !damaged(&cut_dir, &format!("{pct}%")) {
            continue;
        }
        checked += 1;
        let before = names_in(&cut_dir);
        for args in &store_commands("lww-register-materialized", "accounts") {
            let out = strata_db(&cut_dir, args);
            let what = format!("{pct}% {args:?}");
            assert_eq!(
                out.status.code(),
                Some(4),
                "{what}: {}{}",
                stdout(&out),
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(
                err.contains("is damaged") && err.contains("cut-"),
                "{what}: {err}"
            );
            if args.contains(&"--json") {
                let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(doc["error"]["exit_code"], 4, "{what}");
            }
            assert!(
                std::fs::read(cut_dir.join("db")).unwrap() == cut,
                "{what}: the db file was changed"
            );
            assert_eq!(names_in(&cut_dir), before, "{what}: files changed");
        }
        // copy reads its source read-only: refused too, nothing created.
        let target = dir.path().join(format!("copy-{pct}.redb"));
        let out = crate::support::strata(&[
            "copy",
            "--from",
            cut_dir.to_str().unwrap(),
            "--to",
            target.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(4), "{pct}% copy: {}", stderr(&out));
        assert!(std::fs::read(cut_dir.join("db")).unwrap() == cut);
    }
    assert_eq!(
        checked, 3,
        "only {checked} of the cuts at {tried:?}% were found damaged"
    );
}

#[test]
fn a_snapshot_left_generating_by_a_killed_open_is_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        crate::support::legacy_records(&store, 500);
        store.flush().unwrap();
    }
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // As a kill during sled's snapshot write at open leaves it (a prefix of a snapshot,
    // at a log position past the good one), with no seal (the run never closed).
    let leftover = db.join("snap.7FFFFFFFFFFF0000.generating");
    std::fs::write(&leftover, vec![7u8; 300]).unwrap();
    let _ = std::fs::remove_file(db.join("strata.seal"));
    for args in [
        &["status"][..],
        &["verify"],
        &["collections"],
        &["inspect", "op-log"],
        &["repair"],
        &["migrate", "--dry-run"],
        &["keys", "status"],
        &["fence"],
    ] {
        let out = strata_db(&db, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(
            leftover.exists(),
            "{args:?}: a read-only command removed a file"
        );
    }
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!leftover.exists());
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Whether `dir` holds a `snap.*.generating` file (sled writing a snapshot).
fn generating(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("snap.") && name.ends_with(".generating")
        })
    })
}

/// Writes 500 records (as Numax does between runs) to the sled store at `db`, adding them
/// to `expected`: sled writes a snapshot at open only when its log moved past the last one.
fn numax_writes(db: &Path, run: usize, expected: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let store = strata_sled::SledStore::open_store(db).unwrap();
    let mut batch = Batch::new();
    for i in 0..500u32 {
        let (k, v) = (format!("{PREFIX}run{run:03}-{i:04}").into_bytes(), value(i));
        expected.insert(k.clone(), v.clone());
        batch = batch.set(k, v);
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

/// Runs `strata migrate` (a writable open) on `db` and SIGKILLs it the moment a
/// `snap.*.generating` appears in the directory (polled, no sleep); true when the kill left
/// the file behind (sled was still writing the snapshot).
fn kill_at_snapshot_write(db: &Path, what: &str) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(format!("sled:{}", db.display()))
        .arg("migrate")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut killed = false;
    loop {
        if generating(db) {
            child.kill().unwrap();
            killed = true;
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{what}: `strata migrate` did not end"
        );
        std::thread::yield_now();
    }
    let status = child.wait().unwrap();
    assert!(
        killed || status.success(),
        "{what}: `strata migrate` failed: {status}"
    );
    killed && generating(db)
}

/// A real SIGKILL while sled writes its snapshot at open (#23 item 2): a child `strata
/// migrate` opens a large sled store writable and is killed the moment a
/// `snap.*.generating` file appears in the store's directory (the parent polls the
/// directory; no sleep), attempt after attempt (Numax writing a little before each, so
/// that sled has a snapshot to write) until a kill leaves the file behind; then every
/// command works, the leftover is handled as sled would (read-only commands leave it, the
/// first writable open removes it) and every record is intact. Repeated for
/// `STRATA_SNAPSHOT_KILLS` (default 3) such kills, each within `STRATA_SNAPSHOT_ATTEMPTS`
/// (default 60) attempts.
#[test]
fn a_real_sigkill_during_sleds_snapshot_write_at_open_is_not_damage() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        crate::support::legacy_records(&store, 150_000);
        store.flush().unwrap();
    }
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut expected = {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        crate::support::snapshot(&store)
    };
    let attempts = env("STRATA_SNAPSHOT_ATTEMPTS", 60);
    let mut run = 0;
    for kill in 0..env("STRATA_SNAPSHOT_KILLS", 3) {
        let mut caught = false;
        for attempt in 0..attempts {
            assert!(
                !generating(&db),
                "kill {kill}: a leftover before attempt {attempt}"
            );
            numax_writes(&db, run, &mut expected);
            run += 1;
            if kill_at_snapshot_write(&db, &format!("kill {kill} attempt {attempt}")) {
                println!("kill {kill}: landed while sled wrote its snapshot (attempt {attempt})");
                caught = true;
                break;
            }
        }
        assert!(
            caught,
            "kill {kill}: no kill of {attempts} landed while sled wrote its snapshot"
        );
        for args in [
            &["status"][..],
            &["verify"],
            &["collections"],
            &["inspect", "op-log"],
            &["repair"],
            &["migrate", "--dry-run"],
            &["keys", "status"],
            &["fence"],
        ] {
            let out = strata_db(&db, args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "kill {kill} {args:?}: {}",
                stderr(&out)
            );
            assert!(
                generating(&db),
                "kill {kill} {args:?}: a read-only command removed a file"
            );
        }
        for args in [&["migrate"][..], &["verify"]] {
            let out = strata_db(&db, args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "kill {kill} {args:?}: {}",
                stderr(&out)
            );
        }
        assert!(
            !generating(&db),
            "kill {kill}: the writable open left the leftover"
        );
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        let now = crate::support::snapshot(&store);
        assert_eq!(
            now.len(),
            expected.len(),
            "kill {kill}: records lost or added"
        );
        assert!(now == expected, "kill {kill}: a record changed");
    }
}
