//! `strata collections` and `strata inspect <collection>`: the payload-version histogram,
//! stale and ahead rows, sweep and fence state, decoded documents; `status` reports stale
//! rows as "sweep pending" without failing.

use crate::support::{json_of, strata, with_store};
use serde_json::{json, Value};
use std::path::Path;
use strata::layout::envelope::{encode, Envelope};
use strata::layout::keys::{doc_key, sweep_key};
use strata::ops::sweep::SweepMarker;
use strata::policy::Baseline;
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, Store};

fn put_doc(store: &Store, collection: &str, id: &str, version: i32, lock: u64, doc: &Value) {
    let bytes = encode(
        Envelope::new(version, lock),
        &serde_json::to_vec(doc).unwrap(),
    );
    store
        .apply(Batch::new().set(doc_key(collection, id), bytes))
        .unwrap();
}

/// `users`: 3 rows at v1, 2 at v2, 1 at v3, one ahead row at v4; the sweep marker says a
/// sweep to v3 completed. `empty`: a recorded collection with no rows.
fn mixed_store(db: &Path) {
    with_store(db, |s| {
        let database = Database::builder(s.clone()).open().unwrap();
        database
            .collection::<Value>("users", CollectionOptions::new())
            .unwrap();
        database
            .collection::<Value>("empty", CollectionOptions::new())
            .unwrap();
        for (id, v) in [
            ("a", 1),
            ("b", 1),
            ("c", 1),
            ("d", 2),
            ("e", 2),
            ("f", 3),
            ("g", 4),
        ] {
            put_doc(s, "users", id, v, 1, &json!({"id": id, "v": v}));
        }
        let marker = SweepMarker {
            format: 1,
            completed: 3,
            ..SweepMarker::default()
        };
        s.apply(Batch::new().set(sweep_key("users"), marker.encode()))
            .unwrap();
    });
}

#[test]
fn collections_json_gives_the_exact_histogram_and_stale_and_ahead_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["db"], db.to_str().unwrap());
    let colls = doc["collections"].as_array().unwrap();
    assert_eq!(colls.len(), 2);
    assert_eq!(colls[0]["collection"], "empty");
    assert_eq!(colls[0]["rows"], 0);
    assert_eq!(colls[0]["versions"], json!({}));
    assert_eq!(colls[0]["newest_version_source"], "none");
    let users = &colls[1];
    assert_eq!(users["collection"], "users");
    assert_eq!(users["rows"], 7);
    assert_eq!(users["versions"], json!({"1": 3, "2": 2, "3": 1, "4": 1}));
    assert_eq!(users["unreadable"], 0);
    assert_eq!(users["newest_version"], 3);
    assert_eq!(users["newest_version_source"], "sweep_marker");
    assert_eq!(users["rows_behind"], 5);
    assert_eq!(users["rows_ahead"], 1);
    assert_eq!(
        users["sweep"],
        json!({"state": "completed", "completed": 3})
    );
    assert_eq!(users["fence"]["state"], "normal");
    assert_eq!(users["fence"]["cutover_pending"], false);

    // The human table says the same.
    let out = strata(&["--db", db.to_str().unwrap(), "collections"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("v1:3 v2:2 v3:1 v4:1"), "{text}");
    assert!(text.contains("sweep pending for users"), "{text}");
}

/// Issue 13: a document larger than the survey's 16 MiB page (an older build or another
/// tool wrote it) is read on its own and counted; the histogram stays exact.
#[test]
fn the_histogram_counts_a_document_larger_than_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    let big = json!({"id": "d2", "blob": "x".repeat(17 << 20)});
    with_store(&db, |s| put_doc(s, "users", "d2", 2, 1, &big));
    let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let users = json_of(&out)["collections"][1].clone();
    assert_eq!(users["rows"], 8);
    assert_eq!(users["versions"], json!({"1": 3, "2": 3, "3": 1, "4": 1}));
    assert_eq!(users["unreadable"], 0);
}

#[test]
fn a_baseline_version_is_the_reference_and_without_one_the_highest_stored_version_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        let database = Database::builder(s.clone()).open().unwrap();
        database
            .collection::<Value>("items", CollectionOptions::new())
            .unwrap();
        put_doc(s, "items", "a", 1, 1, &json!({"id": "a"}));
        put_doc(s, "items", "b", 2, 1, &json!({"id": "b"}));
    });
    let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
    let items = json_of(&out)["collections"][0].clone();
    assert_eq!(items["newest_version"], 2);
    assert_eq!(items["newest_version_source"], "stored");
    assert_eq!(items["rows_behind"], 1);
    assert_eq!(items["rows_ahead"], 0);
    assert_eq!(items["sweep"]["state"], "none");

    with_store(&db, |s| {
        let baseline = Baseline::new(&json!({"type": "object"}), Some(1));
        assert!(baseline.compare_and_swap(s, "items", None).unwrap());
    });
    let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
    let items = json_of(&out)["collections"][0].clone();
    assert_eq!(items["newest_version"], 1);
    assert_eq!(items["newest_version_source"], "baseline");
    assert_eq!(items["rows_behind"], 0);
    assert_eq!(items["rows_ahead"], 1);
}

#[test]
fn an_unreadable_envelope_is_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        let database = Database::builder(s.clone()).open().unwrap();
        database
            .collection::<Value>("items", CollectionOptions::new())
            .unwrap();
        put_doc(s, "items", "a", 1, 1, &json!({"id": "a"}));
        s.apply(Batch::new().set(doc_key("items", "bad"), b"{}".to_vec()))
            .unwrap();
    });
    let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let items = json_of(&out)["collections"][0].clone();
    assert_eq!(items["rows"], 2);
    assert_eq!(items["unreadable"], 1);
    assert_eq!(items["versions"], json!({"1": 1}));
}

#[test]
fn inspect_decodes_envelopes_and_raw_keeps_hex() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    let dbs = db.to_str().unwrap();
    let out = strata(&["--db", dbs, "inspect", "users", "--limit", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["table"], "users");
    let lines = doc["records"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["key"], "__nx/doc/users/a");
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[0]["payload_version"], 1);
    assert_eq!(lines[0]["lock_version"], 1);
    assert_eq!(lines[0]["document"], json!({"id": "a", "v": 1}));

    let out = strata(&["--db", dbs, "inspect", "users", "--limit", "1"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("a  payload v1  lock 1\n{\n  \"id\": \"a\""),
        "{text}"
    );
    assert!(!text.contains("NXDV"), "{text}");

    let out = strata(&[
        "--db", dbs, "inspect", "users", "--limit", "1", "--raw", "--json",
    ]);
    let line = json_of(&out)["records"][0].clone();
    assert!(
        line["value_hex"]
            .as_str()
            .unwrap()
            .starts_with("4e58445601"),
        "{line}"
    );

    // A cut value ends with `…`.
    let out = strata(&[
        "--db",
        dbs,
        "inspect",
        "users",
        "--limit",
        "1",
        "--raw",
        "--max-chars",
        "10",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, "__nx/doc/users/a\t0x4e584456…\n");
}

#[test]
fn status_reports_stale_rows_as_sweep_pending_and_still_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    let dbs = db.to_str().unwrap();
    let out = strata(&["--db", dbs, "status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    assert_eq!(doc["verdict"], "ok");
    assert_eq!(
        doc["sweep_pending"],
        json!([{"collection": "users", "rows": 7, "rows_behind": 5, "newest_version": 3}])
    );
    let out = strata(&["--db", dbs, "status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("sweep pending: 5 of 7 rows below payload v3"),
        "{text}"
    );
    // Read-only: nothing was written.
    with_store(&db, |s| {
        assert!(s.get(&doc_key("users", "a")).unwrap().is_some());
        assert_eq!(
            s.get(&sweep_key("users")).unwrap(),
            Some(
                SweepMarker {
                    format: 1,
                    completed: 3,
                    ..SweepMarker::default()
                }
                .encode()
            )
        );
    });
}

#[test]
fn a_collections_only_store_gets_no_crdt_headers_from_any_command() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    let dbs = db.to_str().unwrap();
    let snapshot = |db: &Path| {
        let mut keys = Vec::new();
        with_store(db, |s| {
            let limits = strata_store::ScanLimits::new(10_000, 64 << 20).unwrap();
            keys = s
                .scan(b"", None, limits)
                .unwrap()
                .records
                .into_iter()
                .map(|r| (r.key, r.value))
                .collect::<Vec<_>>();
        });
        keys
    };
    let before = snapshot(&db);
    for args in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["collections"],
        vec!["verify"],
        vec!["verify", "--json"],
        vec!["migrate"],
        vec!["migrate", "--dry-run"],
        vec!["inspect", "users"],
        vec!["fence"],
    ] {
        let mut full = vec!["--db", dbs];
        full.extend(args.iter().copied());
        let out = strata(&full);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("op-log"),
            "{args:?} lists sync tables: {text}"
        );
    }
    let after = snapshot(&db);
    assert!(
        !after
            .iter()
            .any(|(k, _)| k.starts_with(b"__nx/schema/op-log") || k.starts_with(b"__nx/crdt/")),
        "sync keys appeared"
    );
    assert_eq!(before, after, "a command changed the store");
}

#[test]
fn a_backend_store_opens_a_database_directly_and_the_root_reexports_suffice() {
    // The getting-started path: `Database::builder(SledStore::open(path)?)`, with
    // `Mode`, `StepError` and `Store` at the crate root.
    let dir = tempfile::tempdir().unwrap();
    let sled = strata_sled::SledStore::open(dir.path().join("db")).unwrap();
    let db = strata::Database::builder(sled).open().unwrap();
    let options = strata::CollectionOptions::new().upcast(1, strata::Mode::Lazy, |obj| {
        obj.get("id")
            .ok_or_else(|| strata::StepError::new("no id"))?;
        Ok(())
    });
    let c = db.collection::<Value>("things", options).unwrap();
    assert_eq!(c.current_version(), 2);
    let store: &strata::Store = db.store();
    assert!(store.get(&doc_key("things", "x")).unwrap().is_none());
}

#[test]
fn inspect_refuses_a_value_over_its_byte_budget_and_max_bytes_raises_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    mixed_store(&db);
    // A 300 KiB document: over a 64 KiB budget, under a 1 MiB one.
    let big = json!({"id": "big", "blob": "x".repeat(300 << 10)});
    with_store(&db, |s| put_doc(s, "users", "big", 3, 1, &big));
    let dbs = db.to_str().unwrap();

    let out = strata(&["--db", dbs, "inspect", "users", "--max-bytes", "64KiB"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("__nx/doc/users/big"), "{err}");
    assert!(err.contains("--max-bytes"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let out = strata(&[
        "--db",
        dbs,
        "inspect",
        "users",
        "--max-bytes",
        "1MiB",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    let big_row = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "big")
        .cloned()
        .unwrap();
    assert_eq!(big_row["document"], big);
}

/// `collections` gives the store's verdict as `status` does: its collections list well,
/// but a store whose Numax tables need `strata migrate` exits 3 and one with a table this
/// build cannot open exits 4, each with `status`'s summary (before, both exited 0).
#[test]
fn collections_exits_with_the_stores_verdict_as_status_does() {
    use strata::layout::header::{header_key, SchemaHeader};
    // (case, Numax table header: none / absent (legacy) / stored, exit, verdict, says)
    type Case = (
        &'static str,
        Option<Vec<u8>>,
        i32,
        &'static str,
        &'static str,
    );
    let cases: [Case; 3] = [
        ("current", None, 0, "ok", "users"),
        (
            "legacy",
            Some(Vec::new()),
            3,
            "migration_required",
            "a migration is required: run `strata migrate`",
        ),
        (
            "future",
            Some(SchemaHeader::new(2, 14).encode().to_vec()),
            4,
            "unsupported",
            "this build cannot open the store",
        ),
    ];
    for (what, header, code, word, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        mixed_store(&db);
        if let Some(header) = &header {
            with_store(&db, |s| {
                // Numax's register table with a record and (unless legacy) a header.
                let mut b = Batch::new().set(
                    b"__nx/crdt/gcounter/visits".to_vec(),
                    1u64.to_le_bytes().to_vec(),
                );
                if !header.is_empty() {
                    b = b.set(header_key("op-log"), header.clone());
                }
                s.apply(b).unwrap();
            });
        }
        let out = strata(&["--db", db.to_str().unwrap(), "collections"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(code), "{what}: {text}");
        assert!(text.contains("users"), "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
        let out = strata(&["--db", db.to_str().unwrap(), "collections", "--json"]);
        assert_eq!(out.status.code(), Some(code), "{what} --json");
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], word, "{what}: {doc}");
        assert_eq!(
            doc["collections"].as_array().unwrap().len(),
            2,
            "{what}: {doc}"
        );
        let status = strata(&["--db", db.to_str().unwrap(), "status"]);
        assert_eq!(status.status.code(), Some(code), "{what}: status agrees");
    }
}
