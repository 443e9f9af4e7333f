//! `strata schema diff|show` (and `status` on a store with a recorded collection): exit
//! codes, the `--json` shape, error messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use strata::collection::CollectionOptions;
use strata::policy::{additive_only, PolicyConfig, SchemaDeclaration, Verdict};
use strata::Database;
use strata_store::KvWrite;

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(out)))
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `{id: string, amount: number}`, both required.
fn base() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["id", "amount"]
    })
}

fn diff_json(dir: &Path, old: &Value, new: &Value, extra: &[&str]) -> (Output, Value) {
    let o = write(dir, "old.json", old);
    let n = write(dir, "new.json", new);
    let mut args = vec!["schema", "diff", s(&o), s(&n), "--json"];
    args.extend_from_slice(extra);
    let out = strata(&args);
    let v = json_of(&out);
    (out, v)
}

#[test]
fn identical_schemas_are_none_and_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, v) = diff_json(tmp.path(), &base(), &base(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["kind"], "none");
    assert_eq!(v["collection"], "schema");
    for k in ["added", "removed", "changed", "paths", "renames"] {
        assert_eq!(v[k], json!([]), "{k} in {v}");
    }
    assert_eq!(v["compatibility"]["level"], "full");
    assert_eq!(v["old_hash"], v["new_hash"]);
    assert_eq!(
        v["old_hash"],
        Value::String(strata_schema::schema_hash(&base()))
    );
    // Key order and whitespace do not matter.
    let reordered: Value = serde_json::from_str(
        r#"{"required":["id","amount"],"properties":{"amount":{"type":"number"},"id":{"type":"string"}},"type":"object"}"#,
    )
    .unwrap();
    let (out, v) = diff_json(tmp.path(), &base(), &reordered, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(v["kind"], "none");
}

#[test]
fn a_new_optional_property_is_additive_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let mut new = base();
    new["properties"]["note"] = json!({"type": "string"});
    let (out, v) = diff_json(tmp.path(), &base(), &new, &["--collection", "invoices"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["collection"], "invoices");
    assert_eq!(v["kind"], "additive");
    assert_eq!(v["added"], json!(["note"]));
    assert_eq!(v["removed"], json!([]));
    assert_eq!(v["changed"], json!([]));
    let paths = v["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 1, "{v}");
    assert_eq!(paths[0]["path"], "/note");
    assert_eq!(paths[0]["field"], "note");
    assert_eq!(paths[0]["backward"], true);
    assert_eq!(paths[0]["forward"], true);
    assert_eq!(
        v["compatibility"],
        json!({"backward": true, "forward": true, "level": "full", "reasons": []})
    );
    assert_ne!(v["old_hash"], v["new_hash"]);

    // The human rendering says the same thing.
    let out = strata(&[
        "schema",
        "diff",
        s(&tmp.path().join("old.json")),
        s(&tmp.path().join("new.json")),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.starts_with("schema delta for `schema`: additive\n"),
        "{text}"
    );
    assert!(text.contains("  added:   note\n"), "{text}");
}

#[test]
fn a_new_required_property_is_non_additive() {
    let tmp = tempfile::tempdir().unwrap();
    let mut new = base();
    new["properties"]["note"] = json!({"type": "string"});
    new["required"] = json!(["id", "amount", "note"]);
    let (out, v) = diff_json(tmp.path(), &base(), &new, &[]);
    assert_eq!(out.status.code(), Some(6), "{v}");
    assert_eq!(v["kind"], "non-additive");
    assert_eq!(v["added"], json!(["note"]));
    assert_eq!(v["compatibility"]["backward"], false, "{v}");
}

#[test]
fn a_removed_property_is_non_additive_and_exits_6() {
    let tmp = tempfile::tempdir().unwrap();
    let new = json!({
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"]
    });
    let (out, v) = diff_json(tmp.path(), &base(), &new, &["--collection", "invoices"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    assert_eq!(v["collection"], "invoices");
    assert_eq!(v["kind"], "non-additive");
    assert_eq!(v["added"], json!([]));
    assert_eq!(v["removed"], json!(["amount"]));
    assert_eq!(v["changed"], json!([]));
    assert_eq!(
        v["paths"],
        json!([{
            "path": "/amount",
            "field": "amount",
            "change": {"kind": "property_removed", "was_required": true},
            "backward": true,
            "forward": false
        }])
    );
    let c = &v["compatibility"];
    assert_eq!(c["backward"], true);
    assert_eq!(c["forward"], false);
    assert_eq!(c["level"], "backward");
    let reasons = c["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{c}");
    assert!(
        reasons[0].as_str().unwrap().contains("/amount"),
        "{reasons:?}"
    );
    assert_eq!(
        v["new_hash"],
        Value::String(strata_schema::schema_hash(&new))
    );

    // Human form: exit 6 too, with the breaking path marked.
    let out = strata(&[
        "schema",
        "diff",
        s(&tmp.path().join("old.json")),
        s(&tmp.path().join("new.json")),
    ]);
    assert_eq!(out.status.code(), Some(6));
    let text = stdout(&out);
    assert!(text.contains(": non-additive\n"), "{text}");
    assert!(text.contains("  removed: amount\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("BREAKS") && l.contains("/amount")),
        "{text}"
    );
}

#[test]
fn a_changed_property_type_is_reported_as_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut new = base();
    new["properties"]["amount"] = json!({"type": "string"});
    let (out, v) = diff_json(tmp.path(), &base(), &new, &[]);
    assert_eq!(out.status.code(), Some(6), "{v}");
    assert_eq!(v["kind"], "non-additive");
    assert_eq!(
        v["changed"],
        json!([{"field": "amount", "required_changed": false, "shape_changed": true}])
    );
    assert_eq!(v["compatibility"]["level"], "none", "{v}");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let old = write(tmp.path(), "old.json", &base());
    let missing = tmp.path().join("no-such-schema.json");
    for args in [
        ["schema", "diff", s(&old), s(&missing)],
        ["schema", "diff", s(&missing), s(&old)],
    ] {
        let out = strata(&args);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(err.starts_with("strata: "), "{err}");
        assert!(err.contains("no-such-schema.json"), "{err}");
        assert!(err.contains("check the path"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn invalid_json_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let old = write(tmp.path(), "old.json", &base());
    let bad = tmp.path().join("broken.json");
    std::fs::write(&bad, b"{\"type\": \"object\",").unwrap();
    let out = strata(&["schema", "diff", s(&old), s(&bad), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("broken.json"), "{err}");
    assert!(err.contains("not valid JSON"), "{err}");
    // Under --json, stdout holds the error document only.
    let doc = json_of(&out);
    assert_eq!(doc["error"]["exit_code"], 1);
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("broken.json"));
}

#[test]
fn json_that_is_not_an_object_schema_is_an_error_naming_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    let old = write(tmp.path(), "old.json", &base());
    let arr = write(tmp.path(), "array.json", &json!([1, 2]));
    let out = strata(&["schema", "diff", s(&old), s(&arr)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("old.json") && err.contains("array.json"),
        "{err}"
    );
    assert!(err.contains("not an object schema"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    let out = strata(&["schema", "diff", "only-one.json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = strata(&["schema"]);
    assert_eq!(out.status.code(), Some(2));
}

#[derive(Debug, Serialize, Deserialize)]
struct Invoice {
    id: String,
    amount: f64,
}

/// Declares `invoices` with a persisted schema on a sled store at `db` (the way
/// `Database::collection` does for a schemars type), writes one record, closes.
fn store_with_invoices(db: &Path) -> Value {
    let store = strata_sled::SledStore::open_store(db).unwrap();
    {
        let pdb = Database::builder(store.clone())
            .policy(PolicyConfig::new().heartbeat(None))
            .open()
            .unwrap();
        let invoices = pdb
            .collection::<Invoice>("invoices", CollectionOptions::new())
            .unwrap();
        let outcome = pdb
            .declare(
                SchemaDeclaration::new("invoices", base())
                    .payload(invoices.current_version(), [])
                    .strategy(additive_only()),
            )
            .unwrap();
        assert!(
            matches!(outcome.verdict, Verdict::Registered),
            "{outcome:?}"
        );
        invoices
            .put(
                "i1",
                &Invoice {
                    id: "i1".into(),
                    amount: 10.0,
                },
            )
            .unwrap();
    }
    store.flush().unwrap();
    base()
}

#[test]
fn show_prints_the_persisted_schema_and_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let schema = store_with_invoices(&db);
    let hash = strata_schema::schema_hash(&schema);

    let out = strata(&["--db", s(&db), "schema", "show", "invoices", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["collection"], "invoices");
    assert_eq!(v["hash"], Value::String(hash.clone()));
    assert_eq!(v["payload_version"], 1);
    assert_eq!(v["schema"], strata_schema::canonicalize(&schema));

    let out = strata(&["--db", s(&db), "schema", "show", "invoices"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("collection       invoices\n"), "{text}");
    assert!(
        text.contains(&format!("hash             {hash}\n")),
        "{text}"
    );
    assert!(text.contains("payload version  1\n"), "{text}");
    // The schema itself follows as JSON.
    let start = text.find('{').unwrap();
    let shown: Value = serde_json::from_str(&text[start..]).unwrap();
    assert_eq!(shown, strata_schema::canonicalize(&schema));
}

#[test]
fn show_of_an_unknown_collection_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    store_with_invoices(&db);
    let out = strata(&["--db", s(&db), "schema", "show", "payments", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with("strata: "), "{err}");
    assert!(err.contains("`payments`"), "{err}");
    assert!(err.contains("no persisted schema"), "{err}");
    // Under `--json` the error is also a JSON document on stdout.
    let doc = json_of(&out);
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["error"]["exit_code"], 1);
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("`payments`"), "{message}");
    assert_eq!(format!("strata: {message}\n"), err);
}

#[test]
fn show_on_a_missing_store_is_an_error_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("nope");
    let out = strata(&["--db", s(&db), "schema", "show", "invoices"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    assert!(!db.exists());
}

#[test]
fn status_lists_a_recorded_collection_as_a_current_managed_table() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    store_with_invoices(&db);
    let out = strata(&["--db", s(&db), "status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["verdict"], "ok");
    let tables = v["tables"].as_array().unwrap();
    let inv: Vec<&Value> = tables.iter().filter(|t| t["table"] == "invoices").collect();
    assert_eq!(inv.len(), 1, "{v}");
    assert_eq!(inv[0]["state"], "current");
    assert_eq!(inv[0]["has_data"], true);
    assert!(inv[0]["table_id"].as_u64().unwrap() >= 1024, "{v}");
    // A collections-only store: the 14 sync tables are not listed.
    assert_eq!(tables.len(), 1, "{v}");

    let out = strata(&["--db", s(&db), "status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("invoices ") && l.contains(" current")),
        "{text}"
    );
}
