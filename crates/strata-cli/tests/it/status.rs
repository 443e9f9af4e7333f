//! `strata status`: exit codes, JSON shape, read-only behaviour.

use crate::support::{json_of, strata, with_store};
use std::path::Path;
use std::process::{Command, Output};
use strata::layout::header::header_key;
use strata::layout::header::SchemaHeader;
use strata_store::{Batch, KvRead, KvWrite, Store};

fn status(db: &Path, json: bool) -> Output {
    let db = db.to_str().unwrap();
    if json {
        strata(&["--db", db, "status", "--json"])
    } else {
        strata(&["--db", db, "status"])
    }
}

fn put(store: &Store, key: &[u8], value: &[u8]) {
    store
        .apply(Batch::new().set(key.to_vec(), value.to_vec()))
        .unwrap();
}

#[test]
fn missing_path_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nope");
    let out = status(&db, false);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("strata: "), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!db.exists());
}

#[test]
fn empty_store_is_ok_and_status_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |_| {});
    let out = status(&db, true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["verdict"], "ok");
    // A store without sync data or headers does not list the sync tables.
    assert_eq!(doc["tables"], serde_json::json!([]));
    // Once it holds one sync header, all 14 are managed (the other 13 empty).
    with_store(&db, |s| {
        put(s, &header_key("op-log"), &SchemaHeader::new(1, 14).encode())
    });
    let doc = json_of(&status(&db, true));
    let tables = doc["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 14);
    for t in tables.iter().filter(|t| t["table"] != "op-log") {
        assert_eq!(t["state"], "empty");
        assert!(t["found_version"].is_null());
        assert_eq!(t["current_version"], 1);
        assert!(t["table_id"].as_u64().unwrap() >= 1);
        assert_eq!(t["has_data"], false);
    }
    // read-only: no header was initialized
    with_store(&db, |s| {
        assert_eq!(
            s.get(&header_key("op-log")).unwrap().map(|v| v.len()),
            Some(8)
        );
        assert_eq!(s.get(&header_key("rga-state")).unwrap(), None);
    });
}

#[test]
fn current_store_exits_zero_with_a_readable_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        strata::validate::validate_and_init(s, &strata::numax::catalog()).unwrap();
    });
    let out = status(&db, false);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("TABLE"), "{text}");
    assert!(text.contains("op-log"));
    assert_eq!(
        text.lines().filter(|l| l.ends_with("  current")).count(),
        14,
        "{text}"
    );
}

#[test]
fn numax_store_without_headers_reports_legacy_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        put(s, b"__nx/crdt/gcounter/visits", &12u64.to_le_bytes());
        put(
            s,
            b"__nx/crdt/state/gcounter/visits",
            br#"{"counts":{"a":12}}"#,
        );
        put(s, b"__nx/crdt/seen-op/op-1", &7u64.to_be_bytes());
        put(s, b"app/user/1", b"app data is not ours");
    });
    let out = status(&db, true);
    assert_eq!(out.status.code(), Some(3));
    let doc = json_of(&out);
    assert_eq!(doc["verdict"], "migration_required");
    let state = |name: &str| {
        doc["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["table"] == name)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("gcounter-materialized"), "legacy");
    assert_eq!(state("gcounter-state"), "legacy");
    assert_eq!(state("seen-ops"), "legacy");
    assert_eq!(state("op-log"), "empty");
    // the human form says what to do
    let text = String::from_utf8(status(&db, false).stdout).unwrap();
    assert!(text.contains("strata migrate"), "{text}");
}

#[test]
fn explicit_v0_header_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        put(s, &header_key("op-log"), &SchemaHeader::new(0, 14).encode())
    });
    let out = status(&db, true);
    assert_eq!(out.status.code(), Some(3));
    let doc = json_of(&out);
    let op_log = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "op-log")
        .unwrap()
        .clone();
    assert_eq!(op_log["state"], "older");
    assert_eq!(op_log["found_version"], 0);
}

#[test]
fn future_and_corrupt_exit_4() {
    for (value, state) in [
        (SchemaHeader::new(2, 14).encode().to_vec(), "future"),
        (b"BAD!\0\x01\0\x0e".to_vec(), "corrupt"),
        (SchemaHeader::new(1, 13).encode().to_vec(), "corrupt"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        with_store(&db, |s| {
            put(s, &header_key("op-log"), &value);
            // a legacy table too: 4 beats 3
            put(s, b"__nx/crdt/gcounter/visits", &1u64.to_le_bytes());
        });
        let out = status(&db, true);
        assert_eq!(out.status.code(), Some(4), "{state}");
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], "unsupported");
        let row = doc["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["table"] == "op-log")
            .unwrap()
            .clone();
        assert_eq!(row["state"], state);
        if state == "corrupt" {
            assert!(row["reason"].as_str().unwrap().len() > 5);
        }
    }
}

#[test]
fn store_in_use_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let _held = strata_sled::SledStore::open_store(&db).unwrap();
    let out = status(&db, false);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let out = strata(&["status", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn inspect_prints_records_of_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        put(s, b"__nx/crdt/gcounter/a", &1u64.to_le_bytes());
        put(s, b"__nx/crdt/gcounter/b", &2u64.to_le_bytes());
        put(s, b"__nx/crdt/gcounter/c", &3u64.to_le_bytes());
    });
    let dbs = db.to_str().unwrap();
    let out = strata(&[
        "--db",
        dbs,
        "inspect",
        "gcounter-materialized",
        "--limit",
        "2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["db"], dbs);
    assert_eq!(doc["table"], "gcounter-materialized");
    let lines = doc["records"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["key"], "__nx/crdt/gcounter/a");
    // Decoded (the counter's value), not the stored bytes.
    assert_eq!(lines[1]["value"], 2);
    let out = strata(&["--db", dbs, "inspect", "no-such-table"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("op-log"));
    let out = strata(&["--db", dbs, "inspect", "op-log", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        let mut batch = Batch::new();
        for i in 0..3000u32 {
            batch = batch.set(
                format!("__nx/crdt/lww-register/key-{i:05}").into_bytes(),
                vec![b'x'; 100],
            );
        }
        s.apply(batch).unwrap();
    });
    // More than a pipe buffer of output, and the reader is gone before it is written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--db",
            db.to_str().unwrap(),
            "inspect",
            "lww-register-materialized",
            "--limit",
            "3000",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn verify(db: &Path, json: bool) -> Output {
    let db = db.to_str().unwrap();
    if json {
        strata(&["--db", db, "verify", "--json"])
    } else {
        strata(&["--db", db, "verify"])
    }
}

#[test]
fn verify_fails_like_status_on_a_corrupt_or_future_header() {
    for (value, code) in [
        (b"BAD!\0\x01\0\x0e".to_vec(), 4),
        (SchemaHeader::new(2, 14).encode().to_vec(), 4),
        (SchemaHeader::new(0, 14).encode().to_vec(), 3),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        with_store(&db, |s| put(s, &header_key("op-log"), &value));
        assert_eq!(status(&db, false).status.code(), Some(code));
        let out = verify(&db, false);
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("op-log"), "{text}");
        let out = verify(&db, true);
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        let doc = json_of(&out);
        assert_eq!(doc["format"], 1);
        assert_eq!(
            doc["verdict"],
            if code == 4 {
                "unsupported"
            } else {
                "migration_required"
            }
        );
        assert!(
            doc["problems"][0].as_str().unwrap().contains("op-log"),
            "{doc}"
        );
    }
}

#[test]
fn verify_and_status_fail_with_4_on_a_corrupt_collection_header_or_catalog_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_store(&db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        database
            .collection::<serde_json::Value>("users", strata::CollectionOptions::new())
            .unwrap();
        put(s, &header_key("users"), b"garbage!");
    });
    assert_eq!(status(&db, false).status.code(), Some(4));
    let out = verify(&db, false);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("users"));

    with_store(&db, |s| put(s, b"__nx/catalog/users", b"NXCL\x09\x04\x00"));
    for out in [status(&db, true), verify(&db, true)] {
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("users"), "{err}");
    }
}

/// A store at `db` with one empty collection, `users`.
fn with_users(db: &std::path::Path) {
    with_store(db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        database
            .collection::<serde_json::Value>("users", strata::CollectionOptions::new())
            .unwrap();
    });
}

#[test]
fn verify_fails_with_4_on_an_unreadable_fence_or_sweep_marker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_users(&db);
    assert_eq!(verify(&db, false).status.code(), Some(0));
    with_store(&db, |s| put(s, b"__nx/sweep/users", b"{not json"));
    let out = verify(&db, true);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(json_of(&out)["problems"][0]
        .as_str()
        .unwrap()
        .contains("users"));
    with_store(&db, |s| {
        s.apply(Batch::new().delete(b"__nx/sweep/users".to_vec()))
            .unwrap();
        put(s, b"__nx/fence", b"{}");
    });
    assert_eq!(verify(&db, false).status.code(), Some(4));
}

/// `status` agrees with `verify` on unreadable policy metadata (the fence, a sweep
/// marker): exit 4 naming the record, not "every table is current or empty".
#[test]
fn status_fails_with_4_on_an_unreadable_fence_or_sweep_marker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    with_users(&db);
    assert_eq!(status(&db, false).status.code(), Some(0));
    for (key, named) in [
        (&b"__nx/fence"[..], "__nx/fence"),
        (&b"__nx/sweep/users"[..], "__nx/sweep/users"),
    ] {
        with_store(&db, |s| put(s, key, b"{not json"));
        let out = status(&db, false);
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(named) && !text.contains("every table is current"),
            "{text}"
        );
        let out = status(&db, true);
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], "unsupported", "{doc}");
        let problem = doc["problems"][0].as_str().unwrap();
        assert!(problem.contains(named), "{doc}");
        // The remedy of an unreadable fence is the command, not the library call.
        if named == "__nx/fence" {
            assert!(
                problem.contains("`strata fence abort --reset-corrupt N`")
                    && !problem.contains("Fence::dangerous_reset"),
                "{problem}"
            );
            for args in [&["fence"][..], &["verify"], &["repair"]] {
                let out = crate::support::strata_db(&db, args);
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    text.contains("--reset-corrupt") && !text.contains("Fence::dangerous_reset"),
                    "{args:?}: {text}"
                );
            }
        }
        with_store(&db, |s| s.apply(Batch::new().delete(key.to_vec())).unwrap());
    }
}
