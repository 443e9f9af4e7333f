//! Hostile input stays bounded and every message stays one honest line:
//!
//! * a key file that is `/dev/zero` or a FIFO nobody writes to is refused at once (the
//!   test has a deadline: a command that blocks fails it instead of hanging);
//! * escape sequences and newlines in every echoed argument (`--db`, a `keys add` label,
//!   collection and table names, file paths) come out escaped, on one line;
//! * a 3 MiB key copies and verifies inside a 4 MiB budget, `verify` takes `--max-bytes`,
//!   and a record over the budget is named by its shortened key, not 5 MB of stderr;
//! * a 3 KB document key gets the same refusal on memory, redb, sled and PostgreSQL.

use crate::support::stderr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use strata::{CollectionOptions, Database};
use strata_store::{Batch, KvWrite, Store};

/// Runs `strata args`, killing it (and failing) when it has not finished within `limit`.
fn run_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env("OLDPASS", "old passphrase")
        .env("NEWPASS", "new passphrase")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "`strata {}` did not finish within {limit:?}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A redb store with one collection `accounts` holding one document.
fn redb_store(dir: &Path) -> String {
    let path = dir.join("s.redb");
    let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
    let db = Database::builder(store.clone()).open().unwrap();
    db.collection::<serde_json::Value>("accounts", CollectionOptions::new())
        .unwrap()
        .put("a1", &serde_json::json!({"id": "a1"}))
        .unwrap();
    store.flush().unwrap();
    path.display().to_string()
}

#[cfg(unix)]
#[test]
fn key_files_that_are_devices_or_fifos_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = redb_store(dir.path());
    let fifo = dir.path().join("key.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = dir.path().join("big.key");
    std::fs::write(&big, vec![b'0'; 1 << 20]).unwrap();
    let fifo = fifo.display().to_string();
    let big = big.display().to_string();
    for key in ["/dev/zero", fifo.as_str(), big.as_str()] {
        for args in [
            vec!["--db", &db, "verify", "--key-file", key],
            vec!["--db", &db, "inspect", "accounts", "--key-file", key],
            vec![
                "--db",
                &db,
                "keys",
                "add",
                "x",
                "--new-key-file",
                key,
                "--passphrase-env",
                "OLDPASS",
            ],
            vec!["--db", &db, "keys", "rotate", "--key-file", key],
        ] {
            let out = run_within(&args, Duration::from_secs(20));
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
            let err = stderr(&out);
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            let expect = if key == big {
                "larger than 4096 bytes"
            } else {
                "is not a regular file"
            };
            assert!(err.contains(expect), "{args:?}: {err}");
            assert!(err.contains("--key-file"), "{args:?}: {err}");
        }
    }
}

/// Every stderr line is one `strata: ` line with no control character, and what was
/// echoed shows its escapes.
fn assert_one_escaped_line(args: &[&str], out: &Output) {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err:?}");
    assert!(lines[0].starts_with("strata: "), "{args:?}: {err:?}");
    assert!(
        !lines[0].chars().any(|c| c.is_control()),
        "{args:?}: a control character reached stderr: {err:?}"
    );
    assert!(
        lines[0].contains("\\x1b") || lines[0].contains("\\n"),
        "{args:?}: the argument is not shown escaped: {err:?}"
    );
    // Under --json the error document carries the same escaped line.
    if args.contains(&"--json") {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(!message.chars().any(|c| c.is_control()), "{doc}");
    }
}

#[test]
fn escape_sequences_and_newlines_in_echoed_arguments_stay_escaped_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = redb_store(dir.path());
    let evil = "x\u{1b}[2J\u{1b}]0;pwned\u{7}\nstrata: forged line\r";
    let evil_path = dir.path().join(evil).display().to_string();
    let schema = dir.path().join("new.json");
    std::fs::write(&schema, r#"{"type":"object"}"#).unwrap();
    let schema = schema.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--db", &evil_path, "status"],
        vec!["--db", &evil_path, "status", "--json"],
        vec!["--db", evil, "verify"],
        vec![
            "--db",
            &db,
            "keys",
            "add",
            evil,
            "--new-passphrase-env",
            "NEWPASS",
            "--passphrase-env",
            "OLDPASS",
        ],
        vec!["--db", &db, "inspect", evil],
        vec!["--db", &db, "schema", "show", evil],
        vec!["--db", &db, "schema", "log", evil, "--json"],
        vec!["--db", &db, "verify", "--key-file", &evil_path],
        vec!["schema", "diff", &evil_path, &schema],
        vec![
            "schema",
            "diff",
            &schema,
            "--against",
            &evil_path,
            "accounts",
        ],
        vec!["copy", "--from", &evil_path, "--to", &evil_path],
        vec!["copy", "--from", &db, "--to", &db],
        vec!["--db", &evil_path, "collections", "--json"],
        vec!["--db", &evil_path, "migrate"],
        vec!["--db", &evil_path, "repair", "--apply"],
        vec!["--db", &evil_path, "fence"],
        vec!["--db", &db, "retire", evil, "--below", "2"],
        vec!["--db", &db, "fixture", "capture", "--collection", evil],
        vec!["--db", &db, "inspect", evil, "--json"],
    ];
    for args in &cases {
        let out = run_within(args, Duration::from_secs(60));
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        if args.last() == Some(&db.as_str()) {
            // The same store twice: refused, one line (nothing hostile to echo).
            assert_eq!(stderr(&out).trim_end().lines().count(), 1, "{args:?}");
            continue;
        }
        assert_one_escaped_line(args, &out);
    }
    // A long argument is shortened to its start and its length.
    let long = dir.path().join("y".repeat(200)).display().to_string();
    let out = run_within(&["--db", &long, "status"], Duration::from_secs(60));
    let err = stderr(&out);
    assert!(err.len() < 400, "{err}");
    assert!(err.contains(&format!("({} bytes)", long.len())), "{err}");
}

/// A 3 MiB key (written by an older build or another tool through the raw store) copies
/// inside a 4 MiB budget and the copy verifies; `verify --max-bytes` reads a store copied
/// with a larger budget; a record over the budget is named by its shortened key.
#[test]
fn a_3_mib_key_copies_and_verifies_and_an_oversize_record_is_named_briefly() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.redb");
    let big_key = vec![b'k'; 3 << 20];
    {
        // Through redb's own API: strata's store layer refuses to create such keys.
        let store = strata_redb::RedbStore::create(&src).unwrap();
        store
            .apply(
                Batch::new()
                    .set(b"a".to_vec(), b"1".to_vec())
                    .set(big_key.clone(), b"v".to_vec())
                    .set(vec![b'q'; 5 << 20], b"v".to_vec()),
            )
            .unwrap();
        store.flush().unwrap();
    }
    let src = src.display().to_string();
    let dst = dir.path().join("dst.redb").display().to_string();
    let limit = Duration::from_secs(120);
    // A 5 MiB key over a 4 MiB budget: one short line, the key shortened, the budget flag.
    let out = run_within(
        &["copy", "--from", &src, "--to", &dst, "--max-bytes", "4MiB"],
        limit,
    );
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.len() < 2000, "{} bytes of stderr", err.len());
    assert!(err.contains("--max-bytes"), "{err}");
    assert!(err.contains("… (5242880 bytes)"), "{err}");
    // With 6 MiB: copied (progress records inside the budget), verified.
    let dst = dir.path().join("dst2.redb").display().to_string();
    let out = run_within(
        &["copy", "--from", &src, "--to", &dst, "--max-bytes", "6MiB"],
        limit,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // verify at the default 4 MiB: the 5 MiB record is over it, named briefly.
    let out = run_within(&["--db", &dst, "verify"], limit);
    let err = stderr(&out);
    assert!(
        err.len() < 2000,
        "{} bytes of stderr: {}",
        err.len(),
        &err[..200.min(err.len())]
    );
    let out = run_within(&["--db", &dst, "verify", "--max-bytes", "16MiB"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Only the 3 MiB key, inside a 4 MiB budget: copies and verifies.
    let src2 = dir.path().join("src2.redb");
    {
        let store = strata_redb::RedbStore::create(&src2).unwrap();
        store
            .apply(
                Batch::new()
                    .set(b"a".to_vec(), b"1".to_vec())
                    .set(big_key, b"v".to_vec())
                    .set(b"z".to_vec(), b"2".to_vec()),
            )
            .unwrap();
        store.flush().unwrap();
    }
    let src2 = src2.display().to_string();
    let dst3 = dir.path().join("dst3.redb").display().to_string();
    let out = run_within(
        &[
            "copy",
            "--from",
            &src2,
            "--to",
            &dst3,
            "--max-records",
            "2",
            "--max-bytes",
            "4MiB",
        ],
        limit,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run_within(&["--db", &dst3, "verify", "--max-bytes", "4MiB"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A 3 KB document key: the same refusal, with the same message, on every backend.
#[test]
fn a_3_kb_key_gets_the_same_refusal_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<(&str, Store)> = vec![
        ("memory", Store::new(strata_store::MemoryStore::new())),
        (
            "redb",
            Store::new(strata_redb::RedbStore::create(dir.path().join("k.redb")).unwrap()),
        ),
        (
            "sled",
            strata_sled::SledStore::open_store(dir.path().join("k.sled")).unwrap(),
        ),
    ];
    #[cfg(all(feature = "postgres", strata_pg))]
    stores.push(("postgres", {
        let table = crate::support::pg::scratch_table("strata_keylen");
        crate::support::pg::owner(&table)
    }));
    let key = "k".repeat(3000);
    let mut messages = Vec::new();
    for (name, store) in stores.iter_mut() {
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db
            .collection::<serde_json::Value>("accounts", CollectionOptions::new())
            .unwrap();
        let err = c.put(&key, &serde_json::json!({"id": 1})).unwrap_err();
        let text = {
            let mut t = err.to_string();
            let mut s = std::error::Error::source(&err);
            while let Some(e) = s {
                t.push_str(": ");
                t.push_str(&e.to_string());
                s = e.source();
            }
            t
        };
        assert!(text.contains("maximum key length"), "{name}: {text}");
        assert!(!text.contains("retry"), "{name}: {text}");
        assert!(
            text.len() < 1000,
            "{name}: the key is not shortened: {text}"
        );
        assert_eq!(c.get(&key).unwrap(), None, "{name}");
        // The longest allowed key is taken everywhere.
        let room = strata_store::MAX_KEY_BYTES - c.key_of("").len();
        c.put(&"k".repeat(room), &serde_json::json!({"id": 2}))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        messages.push(text);
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "{messages:#?}");
    // The raw PostgreSQL store refuses the same way, not with a server error.
    #[cfg(all(feature = "postgres", strata_pg))]
    {
        let (_, pg) = stores.last().unwrap();
        let err = pg
            .apply(Batch::new().set(vec![b'k'; 3000], b"v".to_vec()))
            .unwrap_err();
        assert!(
            matches!(err, strata_store::StoreError::KeyTooLong { len: 3000, .. }),
            "{err}"
        );
    }
}
