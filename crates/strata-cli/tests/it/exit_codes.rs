//! DESIGN.md §5 exit codes of every store-reading command for a missing path (1), a path
//! that is not a store (1, left byte-identical) and a damaged store (4): one line on
//! stderr, and under `--json` the error document on stdout with the same code.

use crate::support::{legacy_records, strata_db, with_store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["verify"],
    &["verify", "--json"],
    &["collections", "--json"],
    &["inspect", "op-log", "--json"],
    &["migrate"],
    &["migrate", "--dry-run", "--json"],
    &["fence", "--json"],
    &["fence", "abort"],
    &["repair", "--json"],
    &["repair", "--apply"],
    &["keys", "status", "--json"],
    &["schema", "show", "users", "--json"],
    &["schema", "log", "users"],
];

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

/// Runs every command on `db`: each exits `code` with one line on stderr containing
/// `says`, and a JSON error document with that code under `--json`.
fn assert_every_command(db: &str, code: i32, says: &str) {
    for args in COMMANDS {
        let out = strata_db(db, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{db} {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{db} {args:?}: {err}");
        assert!(err.contains(says), "{db} {args:?}: {err}");
        if args.contains(&"--json") {
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{db} {args:?}: stdout is not JSON ({e})"));
            assert_eq!(doc["error"]["exit_code"], code, "{db} {args:?}: {doc}");
        }
    }
}

#[test]
fn missing_paths_exit_1_and_are_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    for db in [
        missing.display().to_string(),
        format!("redb:{}", missing.display()),
        format!("sled:{}", missing.display()),
    ] {
        assert_every_command(&db, 1, "does not exist");
        assert!(!missing.exists(), "{db}");
    }
}

#[test]
fn paths_that_are_not_stores_exit_1_and_are_left_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"not a store\n").unwrap();
    // Directories with a `conf` that is not sled's (a git-like config), with and without
    // a `db` beside it: not a sled datastore at all, so not "damaged".
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("conf"), b"[core]\nbare = false\n").unwrap();
    std::fs::write(foreign.join("db"), b"data").unwrap();
    let conf_only = dir.path().join("conf-only");
    std::fs::create_dir(&conf_only).unwrap();
    std::fs::write(conf_only.join("conf"), b"[core]\nbare = false\n").unwrap();
    let before = files(dir.path());
    for path in [&foreign, &conf_only] {
        for db in [
            path.display().to_string(),
            format!("sled:{}", path.display()),
        ] {
            assert_every_command(&db, 1, "not a strata store");
        }
    }
    assert_every_command(text.to_str().unwrap(), 1, "not a strata store");
    assert_eq!(
        files(dir.path()),
        before,
        "something was changed or created"
    );
}

#[test]
fn damaged_stores_exit_4_and_say_damaged() {
    let dir = tempfile::tempdir().unwrap();
    // A sled datastore cut short (its seal says how long it was).
    let sled = dir.path().join("numax");
    with_store(&sled, |s| {
        legacy_records(s, 3000);
    });
    let log = sled.join("db");
    let full = std::fs::read(&log).unwrap();
    std::fs::write(&log, &full[..full.len() / 2]).unwrap();
    // A real sled datastore that lost its `db` (copied in part).
    let partial = dir.path().join("partial");
    with_store(&partial, |s| {
        legacy_records(s, 10);
    });
    std::fs::remove_file(partial.join("db")).unwrap();
    // A redb file cut short.
    let redb = dir.path().join("store.redb");
    {
        let store = strata_redb::RedbStore::create_store(&redb).unwrap();
        legacy_records(&store, 3000);
    }
    let bytes = std::fs::read(&redb).unwrap();
    std::fs::write(&redb, &bytes[..bytes.len() / 3]).unwrap();
    let before = files(dir.path());
    for db in [&sled, &partial, &redb] {
        assert_every_command(db.to_str().unwrap(), 4, "damaged");
    }
    assert_eq!(
        files(dir.path()),
        before,
        "something was changed or created"
    );
}

/// A path given to `copy --from/--to` or `schema diff --against` that is not a store is
/// refused naming that option (not `--db`, which the command does not read).
#[test]
fn a_refusal_names_the_option_that_named_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"not a store\n").unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("mine"), b"x").unwrap();
    let schema = dir.path().join("s.json");
    std::fs::write(&schema, br#"{"type":"object"}"#).unwrap();
    let new = dir.path().join("new.redb");
    let source = dir.path().join("source.redb");
    drop(strata_redb::RedbStore::create(&source).unwrap());
    let before = files(dir.path());
    let t = text.to_str().unwrap();
    let o = other.to_str().unwrap();
    let n = new.to_str().unwrap();
    let src = source.to_str().unwrap();
    let s = schema.to_str().unwrap();
    for (args, flag) in [
        (vec!["copy", "--from", t, "--to", n], "--from"),
        (vec!["copy", "--from", o, "--to", n], "--from"),
        (vec!["copy", "--from", src, "--to", t], "--to"),
        (vec!["copy", "--from", src, "--to", o], "--to"),
        (
            vec!["schema", "diff", s, "--against", t, "users"],
            "--against",
        ),
        (
            vec!["schema", "diff", s, "--against", o, "users"],
            "--against",
        ),
    ] {
        let out = crate::support::strata(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("not a strata store"), "{args:?}: {err}");
        assert!(err.contains(&format!("point {flag} at")), "{args:?}: {err}");
        assert!(!err.contains("--db"), "{args:?}: {err}");
    }
    assert_eq!(
        files(dir.path()),
        before,
        "something was changed or created"
    );
}

/// `strata --help` lists every exit code the command can end with, each once, so a user
/// scripting it does not have to find the README.
#[test]
fn help_lists_every_exit_code() {
    let out = crate::support::strata(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let codes = help
        .split_once("Exit codes: ")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_else(|| panic!("no exit codes in the help:\n{help}"));
    // 0 to 11: the codes of DESIGN.md §5 and `strata_cli::exit`.
    for code in 0u8..=11 {
        let listed = codes
            .split([',', ':'])
            .filter(|part| part.trim().split(' ').next() == Some(&code.to_string()))
            .count();
        assert_eq!(listed, 1, "exit code {code} in: {codes}");
    }
    assert!(
        help.starts_with("strata — inspect, migrate, verify"),
        "{help}"
    );
}
