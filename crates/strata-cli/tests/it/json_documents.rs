//! Every `--json` document the README documents carries `"format": 1`, written by the one
//! emitter of the command line (`json::emit`), which puts it first: the first key of each
//! printed document is `format`. The error document too.

use crate::schema::{base, store_with_invoices};
use crate::support::{json_of, stdout, strata};
use std::process::Output;

/// The first key of the JSON object printed on stdout.
fn first_key(out: &Output) -> String {
    let text = stdout(out);
    let at = text.find('"').unwrap_or_else(|| panic!("no key in {text}"));
    let rest = &text[at + 1..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// `out` printed one JSON document whose first key is `format`, equal to 1.
fn assert_document(what: &str, out: &Output) {
    let doc = json_of(out);
    assert_eq!(doc["format"], 1, "{what}: {doc}");
    assert_eq!(first_key(out), "format", "{what}: {}", stdout(out));
}

#[test]
fn every_documented_json_document_carries_format_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    store_with_invoices(&db);
    let db = db.to_str().unwrap();
    let old = dir.path().join("old.json");
    let new = dir.path().join("new.json");
    std::fs::write(&old, serde_json::to_vec(&base()).unwrap()).unwrap();
    std::fs::write(&new, serde_json::to_vec(&base()).unwrap()).unwrap();
    let copy = dir.path().join("copy.redb");
    let fixture = dir.path().join("fixture.json");
    let runs: Vec<Vec<&str>> = vec![
        vec!["--db", db, "status", "--json"],
        vec!["--db", db, "collections", "--json"],
        vec!["--db", db, "inspect", "invoices", "--json"],
        vec!["--db", db, "migrate", "--dry-run", "--json"],
        vec!["--db", db, "verify", "--json"],
        vec![
            "schema",
            "diff",
            old.to_str().unwrap(),
            new.to_str().unwrap(),
            "--json",
        ],
        vec!["--db", db, "schema", "show", "invoices", "--json"],
        vec!["--db", db, "schema", "log", "invoices", "--json"],
        vec!["--db", db, "fence", "--json"],
        vec!["--db", db, "repair", "--json"],
        vec!["--db", db, "keys", "status", "--json"],
        vec![
            "--db",
            db,
            "retire",
            "invoices",
            "--below",
            "2",
            "--dry-run",
            "--json",
        ],
        vec![
            "--db",
            db,
            "fixture",
            "capture",
            "--collection",
            "invoices",
            "--out",
            fixture.to_str().unwrap(),
            "--json",
        ],
        vec![
            "copy",
            "--from",
            db,
            "--to",
            copy.to_str().unwrap(),
            "--json",
        ],
        vec!["--db", db, "fence", "abort", "--json"],
    ];
    for args in runs {
        let out = strata(&args);
        // `retire` refuses here (the rows are at v1, below v2): its document is then the
        // error document, which carries the format the same way.
        let expected = if args.contains(&"retire") { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_document(&format!("{args:?}"), &out);
    }
    // The error document of a failed command and of a usage error.
    let missing = dir.path().join("missing");
    let out = strata(&["--db", missing.to_str().unwrap(), "status", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_document("error document", &out);
    let out = strata(&["status", "--json", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert_document("usage error document", &out);
}
