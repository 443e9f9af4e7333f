//! Issue 13, "`schema diff` is exponential": the same comparison runs when a collection
//! opens with a changed schema hash, so opening must stay bounded by the schema work
//! budget, and a comparison that exceeds it never blocks writes.

use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};
use strata::policy::SchemaOptions;
use strata::{CollectionOptions, Database};
use strata_store::{MemoryStore, Store};

/// `levels` definitions, each an object whose two properties both refer to the next
/// level (`2^levels` paths to the last one), whose leaf property has type `leaf`.
fn doubled(levels: usize, leaf: &str) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/L{}", i + 1);
        defs.insert(
            format!("L{i}"),
            json!({
                "type": "object",
                "properties": { "a": { "$ref": next }, "b": { "$ref": next } }
            }),
        );
    }
    defs.insert(
        format!("L{levels}"),
        json!({ "type": "object", "properties": { "x": { "type": leaf } } }),
    );
    json!({
        "type": "object",
        "properties": { "root": { "$ref": "#/$defs/L0" } },
        "$defs": defs
    })
}

fn open_with(store: &Store, schema: Value) -> (Duration, strata::Collection<Value>) {
    let started = Instant::now();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Value>(
            "deep",
            CollectionOptions::new().schema(SchemaOptions::json(schema)),
        )
        .unwrap();
    (started.elapsed(), c)
}

#[test]
fn opening_with_an_exponential_schema_change_is_bounded_and_never_blocks_writes() {
    let store = Store::new(MemoryStore::new());
    let (took, c) = open_with(&store, doubled(24, "string"));
    assert!(took < Duration::from_secs(20), "first open took {took:?}");
    c.put("a", &json!({"root": {}})).unwrap();
    drop(c);
    // 24 levels, the leaf type changed: 2^24 paths reach the change.
    let (took, c) = open_with(&store, doubled(24, "integer"));
    assert!(took < Duration::from_secs(20), "reopen took {took:?}");
    // The comparison failing (too complex) never blocks writes.
    c.put("b", &json!({"root": {}})).unwrap();
    assert_eq!(c.get("b").unwrap(), Some(json!({"root": {}})));
    drop(c);
    // Identical 30-level schemas (another hash: a title changed) compare quickly too.
    let mut a = doubled(30, "string");
    let (took, c) = open_with(&store, a.clone());
    assert!(took < Duration::from_secs(20), "took {took:?}");
    drop(c);
    a["title"] = json!("renamed");
    let (took, c) = open_with(&store, a);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    c.put("c", &json!({"root": {}})).unwrap();
}
