//! `strata schema diff|show` (and `status` on a store with a recorded collection): exit
//! codes, the `--json` shape, error messages.

use crate::support::{json_of, stderr, stdout, strata};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;
use strata::policy::{additive_only, PolicyConfig, SchemaDeclaration, Verdict};
use strata::CollectionOptions;
use strata::Database;
use strata_store::KvWrite;

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `{id: string, amount: number}`, both required.
pub(crate) fn base() -> Value {
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
    // The title names the new file (or `--collection`, or the `--against` collection).
    assert_eq!(v["collection"], "new.json");
    assert_eq!(v["mode"], "additive");
    assert_eq!(v["compatible"], true);
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
        text.starts_with("schema delta for `new.json`: additive\n"),
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
    // The file at fault is named as a file, not as a collection.
    assert!(
        err.contains(&format!(
            "the new schema `{}` is not an object schema",
            s(&arr)
        )) && !err.contains("collection"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // The old side at fault is named too (not the new file, the title of the diff).
    let out = strata(&["schema", "diff", s(&arr), s(&old)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the old schema `{}` is not an object schema",
            s(&arr)
        )) && !err.contains("collection"),
        "{err}"
    );
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
pub(crate) fn store_with_invoices(db: &Path) -> Value {
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

/// `schema show`, `schema log` and `schema diff --against` on a name without a persisted
/// schema say which case it is: an unknown name (listing the known collections), or a
/// collection opened without a schema (with the Rust call that persists one; no option of
/// another language's API). The store is left as it was.
#[test]
fn a_missing_baseline_says_whether_the_collection_exists_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    store_with_invoices(&db);
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        let plain = Database::builder(store.clone()).open().unwrap();
        plain
            .collection::<Invoice>("notes", CollectionOptions::new())
            .unwrap();
        store.flush().unwrap();
    }
    let new = write(tmp.path(), "new.json", &base());
    let runs: [Vec<&str>; 3] = [
        vec!["--db", s(&db), "schema", "show"],
        vec!["--db", s(&db), "schema", "log"],
        vec!["schema", "diff", s(&new), "--against", s(&db)],
    ];
    for run in runs {
        let unknown = [run.clone(), vec!["payments"]].concat();
        let out = strata(&unknown);
        assert_eq!(out.status.code(), Some(1), "{unknown:?}");
        let err = stderr(&out);
        assert!(
            err.contains("no persisted schema for collection `payments`"),
            "{err}"
        );
        assert!(
            err.contains("no collection of that name is recorded (known: invoices, notes)"),
            "{err}"
        );

        let plain = [run, vec!["notes"]].concat();
        let out = strata(&plain);
        assert_eq!(out.status.code(), Some(1), "{plain:?}");
        let err = stderr(&out);
        assert!(
            err.contains("no persisted schema for collection `notes`"),
            "{err}"
        );
        assert!(err.contains("never opened with a schema"), "{err}");
        assert!(err.contains("CollectionOptions::schema("), "{err}");
        assert!(!err.contains("persist_json_schema"), "{err}");
    }
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

/// The schema-change case table: (old, new, additive, backward, forward, full).
fn case_table() -> Vec<(&'static str, Value, Value, [bool; 4])> {
    let obj = |props: Value, required: Value| json!({"type": "object", "properties": props, "required": required});
    vec![
        (
            "optional property added",
            obj(json!({"id": {"type": "string"}}), json!(["id"])),
            obj(
                json!({"id": {"type": "string"}, "note": {"type": "string"}}),
                json!(["id"]),
            ),
            [true, true, true, true],
        ),
        (
            "null allowed",
            obj(
                json!({"id": {"type": "string"}, "n": {"type": "integer"}}),
                json!(["id"]),
            ),
            obj(
                json!({"id": {"type": "string"}, "n": {"type": ["integer", "null"]}}),
                json!(["id"]),
            ),
            [false, true, false, false],
        ),
        (
            "required property removed",
            obj(
                json!({"id": {"type": "string"}, "t": {"type": "number"}}),
                json!(["id", "t"]),
            ),
            obj(json!({"id": {"type": "string"}}), json!(["id"])),
            [false, true, false, false],
        ),
        (
            "required property added",
            obj(json!({"id": {"type": "string"}}), json!(["id"])),
            obj(
                json!({"id": {"type": "string"}, "t": {"type": "number"}}),
                json!(["id", "t"]),
            ),
            [false, false, true, false],
        ),
        (
            "type changed",
            obj(json!({"id": {"type": "string"}}), json!(["id"])),
            obj(json!({"id": {"type": "integer"}}), json!(["id"])),
            [false, false, false, false],
        ),
    ]
}

#[test]
fn every_mode_on_the_schema_change_case_table() {
    let tmp = tempfile::tempdir().unwrap();
    let modes = ["additive", "backward", "forward", "full"];
    for (name, old, new, expected) in case_table() {
        for (mode, want) in modes.iter().zip(expected) {
            let (out, v) = diff_json(tmp.path(), &old, &new, &["--mode", mode]);
            let code = if want { 0 } else { 6 };
            assert_eq!(out.status.code(), Some(code), "{name} under {mode}: {v}");
            assert_eq!(v["compatible"], want, "{name} under {mode}");
            assert_eq!(v["mode"], *mode);
        }
    }
}

#[test]
fn transitive_modes_check_every_earlier_version() {
    let tmp = tempfile::tempdir().unwrap();
    // v1 requires `n`, v2 makes it optional, v3 requires it again: v3 is forward
    // compatible with v2 but not backward (v2 rows may lack `n`).
    let v1 = json!({"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id", "n"]});
    let v2 = json!({"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id"]});
    let v3 = json!({"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id", "n"]});
    let f1 = write(tmp.path(), "v1.json", &v1);
    let f2 = write(tmp.path(), "v2.json", &v2);
    let f3 = write(tmp.path(), "v3.json", &v3);
    let out = strata(&[
        "schema",
        "diff",
        s(&f1),
        s(&f2),
        s(&f3),
        "--mode",
        "forward",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(json_of(&out)["checked"].as_array().unwrap().len(), 1);
    let out = strata(&[
        "schema",
        "diff",
        s(&f1),
        s(&f2),
        s(&f3),
        "--mode",
        "backward",
    ]);
    assert_eq!(out.status.code(), Some(6));
    // Closed models: a {id}, b {id, x?}, c {id, x?, y?}. New `b` after [a, b]: forward
    // holds against b (identical) but not against a (a closed model rejects `x`), so
    // only the transitive form fails.
    let a = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
    let b = json!({"type": "object", "properties": {"id": {"type": "string"}, "x": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
    let c = json!({"type": "object", "properties": {"id": {"type": "string"}, "x": {"type": "string"}, "y": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
    let fa = write(tmp.path(), "a.json", &a);
    let fb = write(tmp.path(), "b.json", &b);
    let fc = write(tmp.path(), "c.json", &c);
    let out = strata(&[
        "schema",
        "diff",
        s(&fa),
        s(&fb),
        s(&fc),
        "--mode",
        "backward-transitive",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v = json_of(&out);
    assert_eq!(v["checked"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["mode"], "backward-transitive");
    let out = strata(&[
        "schema",
        "diff",
        s(&fa),
        s(&fb),
        s(&fc),
        "--mode",
        "full-transitive",
    ]);
    assert_eq!(out.status.code(), Some(6));
    let out = strata(&[
        "schema",
        "diff",
        s(&fa),
        s(&fb),
        s(&fb),
        "--mode",
        "forward",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = strata(&[
        "schema",
        "diff",
        s(&fa),
        s(&fb),
        s(&fb),
        "--mode",
        "forward-transitive",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
    let v = json_of(&out);
    assert_eq!(v["compatible"], false);
    let checked = v["checked"].as_array().unwrap();
    assert_eq!(checked[0]["compatible"], false, "{v}");
    assert_eq!(checked[1]["compatible"], true, "{v}");
    let out = strata(&[
        "schema",
        "diff",
        s(&fa),
        s(&fb),
        s(&fb),
        "--mode",
        "additive-transitive",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "adding optional `x` is additive: {}",
        stdout(&out)
    );
}

#[test]
fn schema_log_numbers_every_baseline_change_and_diff_against_compares_with_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let store = strata_sled::SledStore::open_store(&db).unwrap();
    let v1 =
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
    let v2 = json!({"type": "object", "properties": {"id": {"type": "string"}, "a": {"type": "string"}}, "required": ["id"]});
    let v3 = json!({"type": "object", "properties": {"id": {"type": "string"}, "a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["id"]});
    let mut prev: Option<Vec<u8>> = None;
    for (i, schema) in [&v1, &v2, &v3].iter().enumerate() {
        let b = strata::policy::Baseline::new(schema, Some(i as i32 + 1));
        assert!(b.compare_and_swap(&store, "items", prev.clone()).unwrap());
        prev = Some(b.encode());
    }
    store.flush().unwrap();
    drop(store);
    let out = strata(&["--db", s(&db), "schema", "log", "items", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["format"], 1);
    let versions = v["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 3, "{v}");
    for (i, row) in versions.iter().enumerate() {
        assert_eq!(row["version"], i + 1);
        assert_eq!(row["payload_version"], i + 1);
    }
    assert_eq!(versions[0]["change"]["kind"], "initial");
    assert_eq!(versions[1]["change"]["added"], json!(["a"]));
    assert_eq!(versions[2]["change"]["added"], json!(["b"]));
    assert_eq!(versions[2]["hash"], strata_schema::schema_hash(&v3));
    let out = strata(&["--db", s(&db), "schema", "log", "items"]);
    let text = stdout(&out);
    assert!(
        text.contains("v1 ") && text.contains("v3 ") && text.contains("added: b"),
        "{text}"
    );

    // --against: a new file compared with the stored versions.
    let v4 = json!({"type": "object", "properties": {"id": {"type": "string"}, "a": {"type": "string"}}, "required": ["id"]});
    let f4 = write(tmp.path(), "v4.json", &v4);
    let out = strata(&[
        "schema",
        "diff",
        s(&f4),
        "--against",
        s(&db),
        "items",
        "--mode",
        "backward",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["collection"], "items");
    assert_eq!(v["removed"], json!(["b"]));
    // Removing `b` is not forward against v3; transitively it is checked against all 3.
    let out = strata(&[
        "schema",
        "diff",
        s(&f4),
        "--against",
        s(&db),
        "items",
        "--mode",
        "forward-transitive",
        "--json",
    ]);
    let v = json_of(&out);
    assert_eq!(v["checked"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(
        out.status.code(),
        Some(if v["compatible"] == true { 0 } else { 6 })
    );
    // The human title names the collection.
    let out = strata(&["schema", "diff", s(&f4), "--against", s(&db), "items"]);
    assert!(
        stdout(&out).starts_with("schema delta for `items`"),
        "{}",
        stdout(&out)
    );
    // --against with two files is a usage error.
    let out = strata(&[
        "schema",
        "diff",
        s(&f4),
        s(&f4),
        "--against",
        s(&db),
        "items",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
