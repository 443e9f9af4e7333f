//! `--db`: auto-detection of every kind of path (a non-store file is left byte for byte
//! unchanged), explicit schemes, damaged sled datastores, read-only media.

use crate::support::strata;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use strata_store::{Batch, KvWrite};

/// The read-only commands (and a migration dry run) with `--db db`.
fn read_commands(db: &str) -> Vec<Vec<String>> {
    [
        vec!["status"],
        vec!["verify"],
        vec!["inspect", "op-log"],
        vec!["fence"],
        vec!["migrate", "--dry-run"],
    ]
    .into_iter()
    .map(|c| {
        let mut args = vec!["--db".to_string(), db.to_string()];
        args.extend(c.into_iter().map(String::from));
        args
    })
    .collect()
}

fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    strata(&args)
}

/// Asserts a refusal: exit 1, exactly one line on stderr, no panic.
fn assert_refused(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
    assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
    assert!(err.starts_with("strata: "), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    err
}

/// Asserts a damaged store: exit 4 (as corrupt metadata), exactly one line on stderr
/// that says "damaged", no panic.
fn assert_damaged(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(4), "{what}: {out:?}");
    assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
    assert!(err.starts_with("strata: "), "{what}: {err}");
    assert!(err.contains("damaged"), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    err
}

/// Every file below `dir` (following no symlinks) with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
                out.push((p, None));
            } else if meta.file_type().is_symlink() {
                out.push((
                    p.clone(),
                    Some(
                        std::fs::read_link(&p)
                            .unwrap()
                            .into_os_string()
                            .into_encoded_bytes(),
                    ),
                ));
            } else {
                out.push((p.clone(), Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

fn foreign_files() -> Vec<(&'static str, Vec<u8>)> {
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.extend(std::iter::repeat_n(7u8, 8192));
    vec![
        ("sqlite", sqlite),
        (
            "random",
            (0..10_000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
                .collect(),
        ),
        ("text", b"a note, not a datastore\n".to_vec()),
        ("empty", Vec::new()),
    ]
}

#[test]
fn a_redb_file_and_a_sled_directory_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let redb = dir.path().join("store.redb");
    drop(strata_redb::RedbStore::create(&redb).unwrap());
    let sled = dir.path().join("numax");
    drop(strata_sled::SledStore::open(&sled).unwrap());
    for db in [&redb, &sled] {
        let out = strata(&["--db", db.to_str().unwrap(), "status", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}: {out:?}", db.display());
    }
    // Explicit schemes work too, and a wrong one is refused without writing.
    let out = strata(&["--db", &format!("redb:{}", redb.display()), "status"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = strata(&["--db", &format!("sled:{}", sled.display()), "status"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let before = snapshot(dir.path());
    // A store of the other backend is named as what it is, with the way to open it
    // (never called "not a strata store").
    let err = assert_refused(
        &strata(&["--db", &format!("redb:{}", sled.display()), "status"]),
        "redb: on sled",
    );
    assert!(
        err.contains("it is a sled datastore directory, not a redb file"),
        "{err}"
    );
    assert!(err.contains("name it sled:PATH"), "{err}");
    assert!(!err.contains("not a strata store"), "{err}");
    let err = assert_refused(
        &strata(&["--db", &format!("sled:{}", redb.display()), "status"]),
        "sled: on redb",
    );
    assert!(
        err.contains("it is a redb file, not a sled datastore directory"),
        "{err}"
    );
    assert!(err.contains("name it redb:PATH"), "{err}");
    assert!(!err.contains("not a strata store"), "{err}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn an_empty_directory_and_a_missing_path_are_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = dir.path().join("missing");
    for db in [&empty, &missing] {
        for args in read_commands(db.to_str().unwrap()) {
            assert_refused(&run(&args), &format!("{args:?}"));
        }
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    assert!(!missing.exists());
}

#[test]
fn a_non_store_file_is_refused_and_left_byte_identical() {
    for (what, bytes) in foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        // As the path itself, as a `db` inside a directory, and behind symlinks to it.
        let file = dir.path().join("data.bin");
        std::fs::write(&file, &bytes).unwrap();
        let inside = dir.path().join("dir");
        std::fs::create_dir(&inside).unwrap();
        std::fs::write(inside.join("db"), &bytes).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let linked_db = dir.path().join("linked");
        std::fs::create_dir(&linked_db).unwrap();
        std::os::unix::fs::symlink(&file, linked_db.join("db")).unwrap();
        let before = snapshot(dir.path());
        for db in [&file, &inside, &link, &linked_db] {
            for args in read_commands(db.to_str().unwrap()) {
                assert_refused(&run(&args), &format!("{what} {args:?}"));
            }
        }
        assert_eq!(snapshot(dir.path()), before, "{what}: something changed");
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
    }
}

#[test]
fn a_truncated_sled_db_is_a_typed_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("numax");
    {
        let store = strata_sled::SledStore::open_store(&original).unwrap();
        for chunk in 0..20u32 {
            let mut batch = Batch::new();
            for i in 0..1000u32 {
                batch = batch.set(format!("t/{chunk:03}/{i:05}").into_bytes(), vec![3u8; 100]);
            }
            store.apply(batch).unwrap();
        }
        store.flush().unwrap();
    }
    let full = std::fs::read(original.join("db")).unwrap();
    for pct in [10u64, 50, 90, 99] {
        let copy = dir.path().join(format!("cut-{pct}"));
        std::fs::create_dir(&copy).unwrap();
        for entry in std::fs::read_dir(&original).unwrap() {
            let p = entry.unwrap().path();
            if p.is_file() && p.file_name().unwrap() != "db" {
                std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
            }
        }
        let cut = &full[..(full.len() as u64 * pct / 100) as usize];
        std::fs::write(copy.join("db"), cut).unwrap();
        for args in [vec!["status"], vec!["verify"]] {
            let mut a = vec!["--db", copy.to_str().unwrap()];
            a.extend(args);
            let err = assert_damaged(&strata(&a), &format!("{pct}%"));
            assert!(
                err.contains("damaged") && err.contains("truncated"),
                "{pct}%: {err}"
            );
        }
        assert_eq!(
            std::fs::read(copy.join("db")).unwrap(),
            cut,
            "{pct}%: db changed"
        );
    }
}

/// A tmpfs mounted for one test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if out.status.success() {
            Ok(Tmpfs(at.to_path_buf()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    fn remount_read_only(&self) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .output()
            .map_err(|e| e.to_string())?;
        out.status
            .success()
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Read-only commands work on read-only media for both embedded backends (sled reads a
/// private copy: it cannot open a datastore without writing to it); a writing command on
/// the sled datastore says why it cannot.
#[test]
fn read_only_commands_work_on_read_only_media() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("ro");
    let fs = match Tmpfs::mount(&mnt) {
        Ok(fs) => fs,
        Err(why) => {
            println!("skipped: cannot mount a tmpfs here ({why})");
            return;
        }
    };
    let redb = mnt.join("store.redb");
    {
        let store = strata_redb::RedbStore::create(&redb).unwrap();
        store
            .apply(Batch::new().set(b"unmanaged/k".to_vec(), b"v".to_vec()))
            .unwrap();
    }
    let sled = mnt.join("numax");
    {
        let store = strata_sled::SledStore::open(&sled).unwrap();
        store
            .apply(Batch::new().set(b"unmanaged/k".to_vec(), b"v".to_vec()))
            .unwrap();
    }
    if let Err(why) = fs.remount_read_only() {
        println!("skipped: cannot remount the tmpfs read-only ({why})");
        return;
    }
    let before = snapshot(&mnt);
    for db in [&redb, &sled] {
        for args in [vec!["status"], vec!["verify"], vec!["status", "--json"]] {
            let mut a = vec!["--db", db.to_str().unwrap()];
            a.extend(args.iter().copied());
            let out = strata(&a);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        }
    }
    let err = assert_refused(
        &strata(&["--db", sled.to_str().unwrap(), "migrate"]),
        "sled ro",
    );
    assert!(err.contains("write access"), "{err}");
    assert_eq!(snapshot(&mnt), before);
    drop(fs);
}

/// A redb file cut short or overwritten in the middle is reported as damaged by every
/// command that reads it, with exit 4 (never "healthy and empty"), as a JSON error under
/// `--json`, and is left byte for byte as it was.
#[test]
fn a_damaged_redb_file_exits_4_and_is_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("store.redb");
    {
        let store = strata_redb::RedbStore::create(&original).unwrap();
        for chunk in 0..10u32 {
            let mut batch = Batch::new();
            for i in 0..500u32 {
                batch = batch.set(
                    format!("__nx/crdt/gcounter/c{chunk:03}{i:05}").into_bytes(),
                    u64::from(i).to_le_bytes().to_vec(),
                );
            }
            store.apply(batch).unwrap();
        }
    }
    let full = std::fs::read(&original).unwrap();
    let truncated = dir.path().join("truncated.redb");
    std::fs::write(&truncated, &full[..full.len() / 3]).unwrap();
    let overwritten = dir.path().join("overwritten.redb");
    let mut bytes = full.clone();
    // From the third page to the middle of the file: a single page there may be a free
    // one (no record harmed; which pages are free is redb's page placement, and it moved
    // when documents got their own redb table), so the damage spans live pages too.
    for b in &mut bytes[8192..full.len() / 2] {
        *b = 0xff;
    }
    std::fs::write(&overwritten, &bytes).unwrap();
    for db in [&truncated, &overwritten] {
        let before = std::fs::read(db).unwrap();
        let db_s = db.to_str().unwrap();
        let mut commands = read_commands(db_s);
        commands.push(vec!["--db".into(), db_s.into(), "collections".into()]);
        for args in &commands {
            assert_damaged(&run(args), &format!("{args:?}"));
        }
        let out = strata(&["--db", db_s, "status", "--json"]);
        assert_damaged(&out, "status --json");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["error"]["exit_code"], 4, "{doc}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("damaged"),
            "{doc}"
        );
        assert_eq!(std::fs::read(db).unwrap(), before, "{}", db.display());
    }
}

/// `redb:PATH` / `sled:PATH` on a path of the other kind, or on a directory that holds
/// no datastore, says what the path is (not "damaged", not "does not exist"), exits 1
/// and changes nothing.
#[test]
fn an_explicit_scheme_on_the_wrong_kind_of_path_says_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let redb = dir.path().join("store.redb");
    drop(strata_redb::RedbStore::create(&redb).unwrap());
    let sled = dir.path().join("numax");
    drop(strata_sled::SledStore::open(&sled).unwrap());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"mine").unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"a note, not a datastore\n").unwrap();
    let before = snapshot(dir.path());
    let cases = [
        ("redb", &sled),
        ("redb", &empty),
        ("redb", &other),
        ("redb", &text),
        ("sled", &redb),
        ("sled", &text),
        ("sled", &empty),
        ("sled", &other),
    ];
    for (scheme, path) in cases {
        let db = format!("{scheme}:{}", path.display());
        for args in read_commands(&db) {
            let err = assert_refused(&run(&args), &format!("{args:?}"));
            assert!(
                !err.contains("damaged") && !err.contains("does not exist"),
                "{args:?}: {err}"
            );
            assert!(err.contains("not a"), "{args:?}: {err}");
        }
    }
    assert_eq!(snapshot(dir.path()), before, "something changed");
}

/// Every read-only command leaves a redb store's file byte for byte and its mtime as
/// they were (redb opened for writing rewrites its header on every open).
#[test]
fn read_only_commands_leave_a_redb_file_and_its_mtime_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let redb = dir.path().join("store.redb");
    {
        let store = strata_redb::RedbStore::create(&redb).unwrap();
        let mut batch = Batch::new();
        for i in 0..50u64 {
            batch = batch.set(
                format!("__nx/crdt/gcounter/c{i:03}").into_bytes(),
                i.to_le_bytes().to_vec(),
            );
        }
        store.apply(batch).unwrap();
    }
    let db = redb.to_str().unwrap().to_string();
    // A first writable open (as the application would) settles the header.
    let out = strata(&["--db", &db, "migrate"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let bytes = std::fs::read(&redb).unwrap();
    let mtime = std::fs::metadata(&redb).unwrap().modified().unwrap();
    let listing = snapshot(dir.path());
    let mut commands = read_commands(&db);
    for extra in [
        vec!["collections"],
        vec!["repair"],
        vec!["keys", "status"],
        vec!["status", "--json"],
        vec!["verify", "--json"],
    ] {
        let mut args = vec!["--db".to_string(), db.clone()];
        args.extend(extra.into_iter().map(String::from));
        commands.push(args);
    }
    for args in &commands {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert_eq!(
            std::fs::read(&redb).unwrap(),
            bytes,
            "{args:?} changed the file"
        );
        assert_eq!(
            std::fs::metadata(&redb).unwrap().modified().unwrap(),
            mtime,
            "{args:?} touched the file"
        );
    }
    assert_eq!(snapshot(dir.path()), listing);
}

/// A sled datastore whose `db` was overwritten in place (not truncated) is damaged:
/// exit 4 and "damaged" on every command, every time — never "healthy and empty".
///
/// The read-only commands read a private copy, so `db` stays byte-identical. A writing
/// command (`migrate`) opens the datastore itself, and sled cuts a damaged log down to
/// what it can read while it opens; strata detects the loss right after (the recovered
/// keys against those the last clean close recorded in the seal) and keeps the seal, so
/// the store stays reported as damaged (not asserted: that `db` is unchanged then).
#[test]
fn an_overwritten_sled_db_is_damaged_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        for chunk in 0..20u32 {
            let mut batch = Batch::new();
            for i in 0..1000u32 {
                batch = batch.set(
                    format!("__nx/crdt/seen-op/{chunk:03}{i:05}").into_bytes(),
                    u64::from(i).to_be_bytes().to_vec(),
                );
            }
            store.apply(batch).unwrap();
        }
        store.flush().unwrap();
    }
    let file = db.join("db");
    let mut bytes = std::fs::read(&file).unwrap();
    for block in (0..bytes.len().saturating_sub(200)).step_by(4096) {
        bytes[block + 100..block + 124].copy_from_slice(&[0x13; 24]);
    }
    std::fs::write(&file, &bytes).unwrap();
    for args in [
        vec!["status"],
        vec!["verify"],
        vec!["status"],
        vec!["migrate", "--dry-run"],
    ] {
        let mut a = vec!["--db", db.to_str().unwrap()];
        a.extend(args);
        assert_damaged(&strata(&a), &format!("{a:?}"));
        assert!(std::fs::read(&file).unwrap() == bytes, "{a:?} changed db");
    }
    for args in [vec!["migrate"], vec!["status"]] {
        let mut a = vec!["--db", db.to_str().unwrap()];
        a.extend(args);
        assert_damaged(&strata(&a), &format!("{a:?}"));
    }
    assert!(db.join("strata.seal").exists(), "the seal was not kept");
}
