//! `strata inspect` of the Numax sync tables shows their records decoded (ops, counters,
//! CRDT states), as text and as structured `--json`; the stored bytes are shown (hex)
//! only for a record that does not decode, with the reason, or with `--raw`.

use crate::support::{json_of, legacy_records, stdout, strata_db};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use strata::numax::wire;
use strata_store::{Batch, KvWrite};

fn store(dir: &Path) -> PathBuf {
    let db = dir.join("store.redb");
    let store = strata_redb::RedbStore::create_store(&db).unwrap();
    legacy_records(&store, 30);
    let ops = [
        wire::Op::new(
            "op-reg",
            "node-b",
            wire::OpKind::LwwRegisterSet {
                key: "status".into(),
                value: b"hello".to_vec(),
                timestamp_ms: 1_700_000_000_000,
            },
        ),
        wire::Op::new(
            "op-rga",
            "node-b",
            wire::OpKind::RgaInsert {
                key: "doc".into(),
                id: "e1".into(),
                parent: None,
                value: vec![0xff, 0x00],
            },
        ),
    ];
    let mut batch = Batch::new();
    for (i, op) in ops.iter().enumerate() {
        batch = batch.set(
            wire::key(wire::OP_LOG_PREFIX, &op.id),
            wire::encode_op_log(1000 + i as u64, op).unwrap(),
        );
    }
    // An op-log record that does not decode (the JSON is cut).
    let mut bad = 5u64.to_be_bytes().to_vec();
    bad.extend_from_slice(b"{\"id\":\"op-zzz\",\"ori");
    batch = batch.set(wire::key(wire::OP_LOG_PREFIX, "op-zzz"), bad);
    batch = batch.set(
        wire::key(wire::LWW_REGISTER_PREFIX, "status"),
        wire::encode_lww_register_materialized(b"hello"),
    );
    store.apply(batch).unwrap();
    db
}

fn record<'a>(doc: &'a Value, key: &str) -> &'a Value {
    doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no record {key} in {doc}"))
}

#[test]
fn op_log_records_are_shown_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let out = strata_db(&db, &["inspect", "op-log", "--json", "--limit", "100"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = json_of(&out);
    let r = record(&doc, "__nx/crdt/op-log/op-00000007");
    assert_eq!(
        r["value"],
        json!({
            "sequence": 7,
            "op": {
                "id": "op-00000007",
                "origin": "node-a",
                "kind": {"GCounterIncrement": {"key": "counter-00000007", "increment": 7}},
            },
        }),
        "{r}"
    );
    assert!(r.get("value_hex").is_none(), "{r}");
    // Byte payloads are text when they are UTF-8, else hex.
    let r = record(&doc, "__nx/crdt/op-log/op-reg");
    assert_eq!(r["value"]["op"]["kind"]["LwwRegisterSet"]["value"], "hello");
    let r = record(&doc, "__nx/crdt/op-log/op-rga");
    assert_eq!(
        r["value"]["op"]["kind"]["RgaInsert"]["value"],
        json!({"hex": "ff00"})
    );
    // A record that does not decode: why, and its bytes.
    let r = record(&doc, "__nx/crdt/op-log/op-zzz");
    assert!(r.get("value").is_none(), "{r}");
    assert!(r["error"].as_str().unwrap().contains("invalid JSON"), "{r}");
    assert_eq!(r["value_hex"].as_str().unwrap()[..16], *"0000000000000005");

    let out = strata_db(&db, &["inspect", "op-log", "--limit", "100"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("__nx/crdt/op-log/op-00000007"))
        .unwrap();
    assert!(!line.contains("0x"), "{line}");
    assert!(line.contains("GCounterIncrement"), "{line}");
    assert!(line.contains("\"increment\":7"), "{line}");
    let line = text
        .lines()
        .find(|l| l.starts_with("__nx/crdt/op-log/op-zzz"))
        .unwrap();
    assert!(
        line.contains("unreadable") && line.contains("0x0000000000000005"),
        "{line}"
    );
    assert!(!text.contains("\\u0000"), "{text}");
}

#[test]
fn fixed_width_and_materialized_records_are_shown_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let doc = json_of(&strata_db(
        &db,
        &["inspect", "gcounter-materialized", "--json"],
    ));
    let r = record(&doc, "__nx/crdt/gcounter/counter-00000010");
    assert_eq!(r["value"], 10, "{r}");
    let doc = json_of(&strata_db(&db, &["inspect", "seen-ops", "--json"]));
    let r = record(&doc, "__nx/crdt/seen-op/op-00000004");
    assert_eq!(r["value"], json!({"sequence": 4}), "{r}");
    let doc = json_of(&strata_db(
        &db,
        &["inspect", "lww-register-materialized", "--json"],
    ));
    assert_eq!(
        record(&doc, "__nx/crdt/lww-register/status")["value"],
        "hello"
    );
    let text = stdout(&strata_db(&db, &["inspect", "gcounter-materialized"]));
    assert!(
        text.lines()
            .any(|l| l == "__nx/crdt/gcounter/counter-00000010\t10"),
        "{text}"
    );
}

#[test]
fn raw_keeps_the_stored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let doc = json_of(&strata_db(&db, &["inspect", "op-log", "--raw", "--json"]));
    let r = record(&doc, "__nx/crdt/op-log/op-00000007");
    assert!(
        r["value_hex"]
            .as_str()
            .unwrap()
            .starts_with("0000000000000007"),
        "{r}"
    );
    let text = stdout(&strata_db(
        &db,
        &["inspect", "gcounter-materialized", "--raw"],
    ));
    assert!(text.contains("0x0a00000000000000"), "{text}");
}
