//! Stuck and corrupt metadata: `status`, `verify` and `migrate` report it (exit 4, JSON
//! under `--json`), and `strata repair` lists it and, with `--apply`, fixes it in one
//! atomic batch without touching a data record.

use crate::support::{json_of, snapshot, stderr, stdout, strata_db, with_store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata::migrate::MigrationCheckpoint;
use strata_store::{Batch, KvRead, KvWrite};

/// Every record of the sled store at `db`.
fn all(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    with_store(db, snapshot)
}

fn put(db: &Path, key: &[u8], value: &[u8]) {
    with_store(db, |s| {
        s.apply(Batch::new().set(key.to_vec(), value.to_vec()))
            .unwrap()
    });
}

fn delete(db: &Path, key: &[u8]) {
    with_store(db, |s| s.apply(Batch::new().delete(key.to_vec())).unwrap());
}

/// The data records: documents and the sync tables.
fn data(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    all(db)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/") || k.starts_with(b"__nx/crdt/"))
        .collect()
}

/// A store with collection `users` (two documents).
fn collection_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        let users = database
            .collection::<serde_json::Value>("users", strata::CollectionOptions::new())
            .unwrap();
        users
            .put("a", &serde_json::json!({"id": "a", "n": 1}))
            .unwrap();
        users
            .put("b", &serde_json::json!({"id": "b", "n": 2}))
            .unwrap();
    });
    db
}

/// A legacy (header-less) Numax store: three op-log records and a counter.
fn legacy_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        for i in 1..=3u64 {
            let id = format!("op-{i}");
            let op = serde_json::json!({
                "id": id,
                "origin": "n1",
                "kind": {"GCounterIncrement": {"key": "visits", "increment": 1}}
            });
            let mut v = i.to_be_bytes().to_vec();
            v.extend_from_slice(&serde_json::to_vec(&op).unwrap());
            s.apply(Batch::new().set(format!("__nx/crdt/op-log/{id}").into_bytes(), v))
                .unwrap();
        }
        s.apply(Batch::new().set(
            b"__nx/crdt/gcounter/visits".to_vec(),
            3u64.to_le_bytes().to_vec(),
        ))
        .unwrap();
    });
    db
}

/// Runs `status`, `verify` and `migrate` (and `migrate --dry-run`) with and without
/// `--json` and checks each exits `code` with `needle` in its message (JSON too).
fn all_report(db: &Path, code: i32, needle: &str) {
    for cmd in [
        &["status"][..],
        &["verify"],
        &["migrate"],
        &["migrate", "--dry-run"],
    ] {
        let out = strata_db(db, cmd);
        assert_eq!(out.status.code(), Some(code), "{cmd:?}: {out:?}");
        let text = stdout(&out) + &stderr(&out);
        assert!(text.contains(needle), "{cmd:?}: {text}");
        let mut with_json = cmd.to_vec();
        with_json.push("--json");
        let out = strata_db(db, &with_json);
        assert_eq!(out.status.code(), Some(code), "{with_json:?}: {out:?}");
        let doc = json_of(&out);
        assert!(doc.to_string().contains(needle), "{with_json:?}: {doc}");
    }
}

#[test]
fn a_malformed_or_lagging_catalog_counter_exits_4_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    assert_eq!(strata_db(&db, &["verify"]).status.code(), Some(0));
    let before = all(&db);
    // The 3-byte counter of issue 13, a counter behind the recorded id, a missing one.
    for seq in [Some(&b"\x04\x00\x00"[..]), Some(b"\x03\xff"), None] {
        match seq {
            Some(v) => put(&db, b"__nx/catalog-seq", v),
            None => delete(&db, b"__nx/catalog-seq"),
        }
        all_report(&db, 4, "__nx/catalog-seq");
        let mut expected = before.clone();
        match seq {
            Some(v) => expected.insert(b"__nx/catalog-seq".to_vec(), v.to_vec()),
            None => expected.remove(&b"__nx/catalog-seq"[..]),
        };
        assert_eq!(all(&db), expected, "nothing written");
    }
}

#[test]
fn every_kind_of_corrupt_catalog_record_exits_4_with_json() {
    let cases: [(&[u8], &[u8]); 6] = [
        (b"__nx/catalog/users", b"NXCL\x01\x04"),       // length
        (b"__nx/catalog/users", b"NXCX\x01\x04\x00"),   // magic
        (b"__nx/catalog/users", b"NXCL\x01\x00\x05"),   // id below 1024
        (b"__nx/catalog/other", b"NXCL\x01\x04\x00"),   // duplicate id
        (b"__nx/catalog/op-log", b"NXCL\x01\x04\x01"),  // built-in name
        (b"__nx/catalog/bad\xff", b"NXCL\x01\x04\x01"), // non-UTF-8 name
    ];
    for (key, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        let db = collection_db(dir.path());
        put(&db, key, value);
        let before = all(&db);
        all_report(&db, 4, "__nx/catalog/");
        assert_eq!(all(&db), before, "nothing written");
    }
}

fn op_log_checkpoint(cursor: &[u8]) -> Vec<u8> {
    MigrationCheckpoint {
        table_id: 14,
        from: 0,
        to: 1,
        cursor: cursor.to_vec(),
    }
    .encode()
}

#[test]
fn a_checkpoint_cursor_past_the_last_record_is_a_corrupt_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    // Inside the prefix, after the last key: resuming would validate nothing.
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/zzz"),
    );
    let before = all(&db);
    all_report(&db, 4, "past the last record");
    assert_eq!(all(&db), before, "no header written, nothing changed");
    assert!(!all(&db).contains_key(&header_key("op-log")));

    // At the last key itself (a crash right before the final batch), it resumes.
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/op-3"),
    );
    let out = strata_db(&db, &["migrate", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        all(&db).get(&header_key("op-log")),
        Some(&SchemaHeader::new(1, 14).encode().to_vec())
    );
}

#[test]
fn a_checkpoint_with_a_cursor_on_an_empty_table_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    // seen-ops holds no record: any cursor lies past its end.
    let ck = MigrationCheckpoint {
        table_id: 13,
        from: 0,
        to: 1,
        cursor: b"__nx/crdt/seen-op/x".to_vec(),
    }
    .encode();
    put(&db, &checkpoint_key("seen-ops"), &ck);
    let before = all(&db);
    all_report(&db, 4, "seen-ops");
    assert_eq!(all(&db), before);
}

// ---- strata repair ----

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct User {
    id: String,
    n: i64,
}

/// `users` with a persisted schema baseline (and its history).
fn schema_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        let users = database
            .collection::<User>(
                "users",
                strata::CollectionOptions::new()
                    .schema(strata::policy::SchemaOptions::of::<User>()),
            )
            .unwrap();
        users
            .put(
                "a",
                &User {
                    id: "a".into(),
                    n: 1,
                },
            )
            .unwrap();
    });
    db
}

fn finding<'a>(doc: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no finding for {key}: {doc:#}"))
}

/// `repair` lists `key` (kind, action) and changes nothing; `repair --apply` fixes it in
/// one run; then `status` exits `status_after`, `verify` agrees, a second `repair` finds
/// nothing, and no data record changed. Returns the store after the repair.
fn repaired(
    db: &Path,
    key: &str,
    kind: &str,
    action: &str,
    status_after: i32,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let before = all(db);
    let data_before = data(db);
    let out = strata_db(db, &["repair", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["applied"], false);
    let f = finding(&doc, key);
    assert_eq!(f["kind"], kind, "{f}");
    assert_eq!(f["action"], action, "{f}");
    assert!(!f["problem"].as_str().unwrap().is_empty(), "{f}");
    assert!(!f["why"].as_str().unwrap().is_empty(), "{f}");
    let text = strata_db(db, &["repair"]);
    assert_eq!(
        text.status.code(),
        Some(4),
        "{}{}",
        stdout(&text),
        stderr(&text)
    );
    assert!(stdout(&text).contains(key), "{}", stdout(&text));
    assert!(stdout(&text).contains("strata repair --apply"));
    assert_eq!(all(db), before, "a listing writes nothing");

    let out = strata_db(db, &["repair", "--apply"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("repaired"), "{}", stdout(&out));
    assert_eq!(data(db), data_before, "data records untouched");
    let st = strata_db(db, &["status"]);
    assert_eq!(st.status.code(), Some(status_after), "{}", stdout(&st));
    let v = strata_db(db, &["verify"]);
    assert_eq!(
        v.status.code(),
        Some(status_after),
        "{}{}",
        stdout(&v),
        stderr(&v)
    );
    let again = strata_db(db, &["repair", "--json"]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert!(
        json_of(&again)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["action"] == "none"),
        "{}",
        stdout(&again)
    );
    all(db)
}

#[test]
fn a_clean_store_has_nothing_to_repair() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let before = all(&db);
    let out = strata_db(&db, &["repair", "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no stuck or corrupt metadata found"));
    assert_eq!(all(&db), before);
}

#[test]
fn an_interrupted_migration_is_resumable_not_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/op-1"),
    );
    let before = all(&db);
    for args in [&["repair"][..], &["repair", "--apply"]] {
        let out = strata_db(&db, args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("resumable from `__nx/crdt/op-log/op-1`"),
            "{}",
            stdout(&out)
        );
    }
    let doc = json_of(&strata_db(&db, &["repair", "--json"]));
    assert_eq!(finding(&doc, "__nx/migration/op-log")["action"], "none");
    assert_eq!(all(&db), before);
    // An interrupted migration is its own verdict (`unfinished_migration`, exit 8).
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(8));
    let out = strata_db(&db, &["migrate", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(strata_db(&db, &["migrate"]).status.code(), Some(0));
}

#[test]
fn stale_orphan_and_corrupt_migration_checkpoints_are_deleted() {
    // Stale: the table is already current.
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let stale = MigrationCheckpoint {
        table_id: 1024,
        from: 0,
        to: 1,
        cursor: Vec::new(),
    };
    put(&db, &checkpoint_key("users"), &stale.encode());
    // The library names the record; the CLI adds the command that removes it.
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr(&out).contains("__nx/migration/users"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("strata repair --apply"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&strata_db(&db, &["status"])).contains("strata repair"));
    let after = repaired(
        &db,
        "__nx/migration/users",
        "migration_checkpoint",
        "delete",
        0,
    );
    assert!(!after.contains_key(&checkpoint_key("users")));
    assert_eq!(strata_db(&db, &["migrate"]).status.code(), Some(0));

    // Orphan: no such table.
    put(&db, &checkpoint_key("gone"), &stale.encode());
    repaired(
        &db,
        "__nx/migration/gone",
        "migration_checkpoint",
        "delete",
        0,
    );

    // Corrupt, on a legacy table: after the repair the migration starts over.
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    put(&db, &checkpoint_key("op-log"), b"junk");
    repaired(
        &db,
        "__nx/migration/op-log",
        "migration_checkpoint",
        "delete",
        3,
    );
    assert_eq!(strata_db(&db, &["migrate"]).status.code(), Some(0));
    assert_eq!(strata_db(&db, &["verify"]).status.code(), Some(0));
}

#[test]
fn a_checkpoint_past_the_table_end_is_cleared_by_repair() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    put(
        &db,
        &checkpoint_key("op-log"),
        &op_log_checkpoint(b"__nx/crdt/op-log/zzz"),
    );
    repaired(
        &db,
        "__nx/migration/op-log",
        "migration_checkpoint",
        "delete",
        3,
    );
    let out = strata_db(&db, &["migrate", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    let op_log = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "op-log")
        .unwrap();
    assert_eq!(op_log["records"], 3, "every record validated: {op_log}");
}

#[test]
fn corrupt_and_orphan_sweep_markers_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/sweep/users", b"{not json");
    repaired(&db, "__nx/sweep/users", "sweep_marker", "delete", 0);
    let marker = strata::ops::sweep::SweepMarker {
        format: 1,
        ..Default::default()
    };
    put(&db, b"__nx/sweep/ghost", &marker.encode());
    repaired(&db, "__nx/sweep/ghost", "sweep_marker", "delete", 0);
}

#[test]
fn a_corrupt_fence_is_rewritten_as_a_normal_fence() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/fence", b"{}");
    assert_eq!(strata_db(&db, &["verify"]).status.code(), Some(4));
    let after = repaired(&db, "__nx/fence", "fence", "rewrite", 0);
    let fence = strata::policy::FenceDoc::decode(&after[&b"__nx/fence"[..]]).unwrap();
    assert_eq!(fence.state, strata::policy::FenceState::Normal);
    assert_eq!(fence.generation, 0);
}

#[test]
fn corrupt_and_dead_client_records_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let dead = strata::policy::ClientRecord {
        acked_generation: None,
        client: "00000000deadbeef".into(),
        format: 1,
        heartbeat_ms: 1,
        opened_generation: 0,
        pid: 1,
        started_ms: 1,
    };
    put(&db, b"__nx/clients/00000000deadbeef", &dead.encode());
    repaired(
        &db,
        "__nx/clients/00000000deadbeef",
        "client_presence",
        "delete",
        0,
    );
    // A record whose id does not match its key (issue 13's `../../etc`).
    let forged = strata::policy::ClientRecord {
        client: "../../etc".into(),
        heartbeat_ms: u64::MAX / 2,
        ..dead
    };
    put(&db, b"__nx/clients/../../etc", &forged.encode());
    repaired(
        &db,
        "__nx/clients/../../etc",
        "client_presence",
        "delete",
        0,
    );
}

#[test]
fn a_catalog_record_is_rebuilt_from_its_header_or_deleted_when_nothing_is_under_it() {
    // Wrong magic: the header still says id 1024.
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/catalog/users", b"NXCX\x01\x04\x00");
    let after = repaired(&db, "__nx/catalog/users", "catalog_record", "rewrite", 0);
    assert_eq!(after[&b"__nx/catalog/users"[..]], b"NXCL\x01\x04\x00");

    // A built-in table's name, with no document under it.
    put(&db, b"__nx/catalog/op-log", b"NXCL\x01\x04\x01");
    let after = repaired(&db, "__nx/catalog/op-log", "catalog_record", "delete", 0);
    assert!(!after.contains_key(&b"__nx/catalog/op-log"[..]));

    // A second collection claiming id 1024, with no document.
    put(&db, b"__nx/catalog/other", b"NXCL\x01\x04\x00");
    repaired(&db, "__nx/catalog/other", "catalog_record", "delete", 0);

    // A non-UTF-8 name.
    put(&db, b"__nx/catalog/bad\xff", b"NXCL\x01\x04\x01");
    repaired(&db, "__nx/catalog/bad\\xff", "catalog_record", "delete", 0);
}

#[test]
fn a_catalog_record_over_documents_without_a_header_is_left_for_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/catalog/users", b"junk");
    delete(&db, &header_key("users"));
    let before = all(&db);
    let out = strata_db(&db, &["repair", "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(finding(&doc, "__nx/catalog/users")["action"], "manual");
    assert_eq!(doc["manual"], 1);
    assert_eq!(all(&db), before, "nothing changed");
}

#[test]
fn a_malformed_catalog_counter_is_rewritten_to_the_highest_id() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/catalog-seq", b"\x04\x00\x00");
    let out = strata_db(&db, &["status", "--json"]);
    assert!(stderr(&out).contains("strata repair"), "{}", stderr(&out));
    let after = repaired(&db, "__nx/catalog-seq", "catalog_counter", "rewrite", 0);
    assert_eq!(after[&b"__nx/catalog-seq"[..]], b"\x04\x00");
    // The next collection gets a fresh id.
    with_store(&db, |s| {
        let database = strata::Database::builder(s.clone()).open().unwrap();
        database
            .collection::<serde_json::Value>("more", strata::CollectionOptions::new())
            .unwrap();
        assert_eq!(
            s.get(b"__nx/catalog/more").unwrap().unwrap(),
            b"NXCL\x01\x04\x01"
        );
    });
}

#[test]
fn a_leftover_cutover_checkpoint_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let ck = strata::ops::cutover::CutoverCheckpoint::new("users", "ab");
    use strata::pass::CheckpointCodec;
    put(&db, b"__nx/cutover/users", &ck.encode(b"__nx/doc/users/a"));
    repaired(&db, "__nx/cutover/users", "cutover_checkpoint", "delete", 0);
}

#[test]
fn a_corrupt_schema_baseline_is_restored_from_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = schema_db(dir.path());
    let good = all(&db)[&b"__nx/jsonschema/users"[..]].clone();
    put(&db, b"__nx/jsonschema/users", b"{\"format\":1}");
    assert_eq!(strata_db(&db, &["verify"]).status.code(), Some(4));
    let after = repaired(
        &db,
        "__nx/jsonschema/users",
        "schema_baseline",
        "rewrite",
        0,
    );
    assert_eq!(after[&b"__nx/jsonschema/users"[..]], good);
}

#[test]
fn a_corrupt_sync_sequence_record_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    assert_eq!(strata_db(&db, &["migrate"]).status.code(), Some(0));
    put(&db, b"__nx/sync/sequences", b"bad");
    repaired(&db, "__nx/sync/sequences", "sync_sequences", "delete", 0);
    let store = strata_sled::SledStore::open_store(&db).unwrap();
    strata_sync::SyncManager::open(store).unwrap();
}

#[test]
fn an_unfinished_copy_is_reported_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(
        &db,
        b"__nx/copy/progress",
        br#"{"format":1,"from":"src","cursor":"","copied":0}"#,
    );
    let before = all(&db);
    let out = strata_db(&db, &["repair", "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let doc = json_of(&out);
    let f = finding(&doc, "__nx/copy/progress");
    assert_eq!(f["action"], "manual");
    assert!(f["problem"].as_str().unwrap().contains("src"), "{f}");
    assert_eq!(all(&db), before);
}

// ---- issue 13, "bad input accepted silently", end to end ----

#[test]
fn verify_refuses_a_document_that_is_not_an_object_or_nested_too_deep() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let env = |json: &[u8]| {
        strata::layout::envelope::encode(strata::layout::envelope::Envelope::new(1, 1), json)
    };
    let mut deep = b"{\"a\":".to_vec();
    deep.extend("[".repeat(100_000).into_bytes());
    for bad in [env(b"[1,2]"), env(&deep)] {
        put(&db, b"__nx/doc/users/x", &bad);
        let before = all(&db);
        let out = strata_db(&db, &["verify", "--json"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let msg = json_of(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(msg.contains("__nx/doc/users/x"), "{msg}");
        assert_eq!(all(&db), before);
    }
}

#[test]
fn a_forged_client_record_is_not_listed_as_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    let forged = strata::policy::ClientRecord {
        acked_generation: None,
        client: "../../etc".into(),
        format: 1,
        heartbeat_ms: u64::MAX / 2,
        opened_generation: 0,
        pid: 1,
        started_ms: 1,
    };
    put(&db, b"__nx/clients/../../etc", &forged.encode());
    let out = strata_db(&db, &["fence", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["clients"], serde_json::json!([]));
}

#[test]
fn a_size_option_beyond_4_gib_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    let before = all(&db);
    for args in [
        &["migrate", "--max-bytes", "18446744073709551615"][..],
        &["inspect", "op-log", "--max-bytes", "18446744073709551615"],
        &["migrate", "--max-bytes", "5GiB"],
    ] {
        let out = strata_db(&db, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("4GiB") || stderr(&out).contains("4 GiB"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(all(&db), before);
}

#[test]
fn an_unfinished_key_rotation_is_listed_as_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let db = collection_db(dir.path());
    put(&db, b"__nx/rotate/users", b"NXRT\x01\x00");
    let before = all(&db);
    let out = strata_db(&db, &["repair", "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(finding(&doc, "__nx/rotate/users")["action"], "none");
    put(&db, b"__nx/rotate/users", b"junk");
    let out = strata_db(&db, &["repair", "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(
        finding(&json_of(&out), "__nx/rotate/users")["action"],
        "manual"
    );
    let mut expected = before;
    expected.insert(b"__nx/rotate/users".to_vec(), b"junk".to_vec());
    assert_eq!(all(&db), expected);
}
