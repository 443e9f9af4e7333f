//! Whole-CLI conventions: `--json` errors, `--db` refused where it is not read, logs
//! without colour codes off a terminal, `format` and `db` in every store document.

use crate::support::json_of;
use std::process::{Command, Output};
use strata_store::KvWrite;

/// Runs the `strata` binary with `args`, `NO_COLOR` unset (the colour checks need it so).
fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn assert_error_shape(out: &Output, code: i32) -> String {
    assert_eq!(out.status.code(), Some(code), "{out:?}");
    let doc = json_of(out);
    let obj = doc.as_object().unwrap();
    assert_eq!(obj.len(), 2, "{doc}");
    assert_eq!(doc["format"], 1);
    let err = doc["error"].as_object().unwrap();
    assert_eq!(err.len(), 2, "{doc}");
    assert_eq!(doc["error"]["exit_code"], code);
    let message = doc["error"]["message"].as_str().unwrap().to_string();
    assert!(!message.is_empty());
    message
}

#[test]
fn errors_are_json_documents_under_json() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    for cmd in ["status", "verify", "collections", "migrate", "fence"] {
        let out = strata(&["--db", missing, cmd, "--json"]);
        let message = assert_error_shape(&out, 1);
        assert!(message.contains("does not exist"), "{cmd}: {message}");
        // Not "when opening for reading": `migrate` is not a read.
        assert!(
            message.contains("never created by opening it to read or migrate"),
            "{cmd}: {message}"
        );
        // stderr keeps the one-line human form.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err, format!("strata: {message}\n"), "{cmd}");
    }
    // A usage error under --json is a JSON document with exit code 2.
    let out = strata(&["status", "--json", "--bogus"]);
    let message = assert_error_shape(&out, 2);
    assert!(message.contains("--bogus"), "{message}");
    // A usage error over several lines keeps what it is about (the missing argument).
    let out = strata(&["inspect", "--json"]);
    let message = assert_error_shape(&out, 2);
    assert!(
        message.contains("required arguments were not provided") && message.contains("<TABLE>"),
        "{message}"
    );
    assert!(
        !message.contains('\n') && !message.contains("Usage:"),
        "{message}"
    );
    // Without --json, stdout stays empty on error.
    let out = strata(&["--db", missing, "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_corrupt_header_under_json_keeps_the_status_document_and_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = strata_sled::SledStore::open_store(&db).unwrap();
    store
        .apply(strata_store::Batch::new().set(b"__nx/schema/op-log".to_vec(), b"garbage!".to_vec()))
        .unwrap();
    store.flush().unwrap();
    drop(store);
    let out = strata(&["--db", db.to_str().unwrap(), "status", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let doc = json_of(&out);
    assert_eq!(doc["verdict"], "unsupported");
    assert_eq!(doc["db"], db.to_str().unwrap());
}

#[test]
fn commands_that_do_not_read_db_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = strata(&[
        "--db",
        "./somewhere",
        "demo",
        dir.path().join("d").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`strata demo` does not read `--db`"), "{err}");
    assert!(!dir.path().join("d").exists(), "the demo ran anyway");

    let a = dir.path().join("a.json");
    std::fs::write(
        &a,
        r#"{"type":"object","properties":{"id":{"type":"string"}}}"#,
    )
    .unwrap();
    let a = a.to_str().unwrap();
    let out = strata(&["schema", "diff", a, a, "--db", "x", "--json"]);
    let message = assert_error_shape(&out, 2);
    assert!(
        message.contains("`strata schema diff` does not read `--db`"),
        "{message}"
    );
    let out = strata(&["--db", "x", "copy", "--from", a, "--to", a]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("`strata copy` does not read `--db`"));
    // Without --db it runs.
    let out = strata(&["schema", "diff", a, a]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = strata(&[
        "demo",
        demo.to_str().unwrap(),
        "--ops",
        "5",
        "--legacy-ops",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WARN"),
        "the demo logs its expected warnings: {err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "colour codes in captured stderr: {err:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the WARN line on stderr"), "{text}");
}

#[test]
fn store_documents_carry_format_and_db() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = strata_sled::SledStore::open_store(&db).unwrap();
    store.flush().unwrap();
    drop(store);
    let dbs = db.to_str().unwrap();
    for args in [
        vec!["status", "--json"],
        vec!["verify", "--json"],
        vec!["migrate", "--json"],
        vec!["collections", "--json"],
        vec!["fence", "--json"],
        vec!["fence", "abort", "--json"],
    ] {
        let mut full = vec!["--db", dbs];
        full.extend(args.iter().copied());
        let out = strata(&full);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        let doc = json_of(&out);
        assert_eq!(doc["format"], 1, "{args:?}: {doc}");
        assert_eq!(doc["db"], dbs, "{args:?}: {doc}");
    }
}
