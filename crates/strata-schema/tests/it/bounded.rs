//! Bounded work: schemas whose definitions fan out must diff in polynomial time, and the
//! hard work budget turns anything worse into a typed error instead of a hang.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use strata_schema::{diff, DeltaKind, SchemaError};

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
                "properties": { "a": { "$ref": next }, "b": { "$ref": next } },
                "required": ["a", "b"]
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

/// Like [`doubled`], but each level is a union of the next level (both branches) and
/// every level also holds an array and a map of the next level.
fn fanning(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = json!({ "$ref": format!("#/$defs/L{}", i + 1) });
        defs.insert(
            format!("L{i}"),
            json!({
                "type": "object",
                "properties": {
                    "a": next, "b": next,
                    "list": { "type": "array", "items": next },
                    "map": { "type": "object", "additionalProperties": next },
                    "either": { "anyOf": [next, { "type": "null" }] }
                }
            }),
        );
    }
    defs.insert(format!("L{levels}"), json!({ "type": "string" }));
    json!({
        "type": "object",
        "properties": { "root": { "$ref": "#/$defs/L0" } },
        "$defs": defs
    })
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

const FAST: Duration = Duration::from_secs(10);

#[test]
fn doubled_definitions_24_levels_diff_fast() {
    let schema = doubled(24, "string");
    assert!(serde_json::to_vec(&schema).unwrap().len() < 4096);
    let (d, took) = timed(|| diff("deep", &schema, &schema).unwrap());
    assert_eq!(d.kind, DeltaKind::None);
    assert!(d.paths.is_empty());
    assert!(took < FAST, "identical doubled schemas took {took:?}");

    // A change at the top: reported once, fast.
    let mut changed = schema.clone();
    changed["$defs"]["L0"]["properties"]["c"] = json!({ "type": "integer" });
    let (d, took) = timed(|| diff("deep", &schema, &changed).unwrap());
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    let paths: Vec<&str> = d.paths.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["/root/c"]);
    assert!(took < FAST, "a top-level change took {took:?}");
}

#[test]
fn two_identical_30_level_files_diff_fast() {
    let a = doubled(30, "string");
    // Parsed separately, as two files would be: no shared addresses.
    let b: Value = serde_json::from_slice(&serde_json::to_vec(&a).unwrap()).unwrap();
    let (d, took) = timed(|| diff("deep", &a, &b).unwrap());
    assert_eq!(d.kind, DeltaKind::None);
    assert!(d.compatibility.backward && d.compatibility.forward);
    assert!(took < FAST, "identical 30-level files took {took:?}");

    let f = fanning(30);
    let (d, took) = timed(|| diff("fan", &f, &f.clone()).unwrap());
    assert_eq!(d.kind, DeltaKind::None);
    assert!(took < FAST, "identical fanning files took {took:?}");
}

#[test]
fn shared_definition_changes_are_reported_at_every_path() {
    // Few enough paths to list: every path to the changed leaf is reported.
    let old = doubled(3, "string");
    let new = doubled(3, "integer");
    let d = diff("shared", &old, &new).unwrap();
    assert_eq!(d.paths.len(), 8, "{:?}", d.paths);
    assert!(d.paths.iter().any(|p| p.path == "/root/a/b/a/x"));
    assert!(d.paths.iter().any(|p| p.path == "/root/b/b/b/x"));
    assert!(d.paths.iter().all(|p| p.field.as_deref() == Some("root")));
    assert!(!d.compatibility.backward && !d.compatibility.forward);
}

#[test]
fn exponentially_many_changed_paths_hit_the_budget() {
    // 2^24 paths reach the changed leaf: listing them would take gigabytes.
    let old = doubled(24, "string");
    let new = doubled(24, "integer");
    let (r, took) = timed(|| diff("deep", &old, &new));
    match r {
        Err(SchemaError::TooComplex { collection, limit }) => {
            assert_eq!(collection, "deep");
            assert_eq!(limit, strata_schema::MAX_DIFF_WORK);
        }
        other => panic!("expected TooComplex, got {other:?}"),
    }
    assert!(took < FAST, "budget exhaustion took {took:?}");
    let msg = diff("deep", &old, &new).unwrap_err().to_string();
    assert!(
        msg.contains("`deep`") && msg.contains("too complex"),
        "{msg}"
    );
}

#[test]
fn recursive_unions_of_unions_terminate() {
    // A union whose branches refer back to the union itself, twice.
    let s = json!({
        "type": "object",
        "properties": { "u": { "$ref": "#/$defs/U" } },
        "$defs": {
            "U": { "anyOf": [ { "$ref": "#/$defs/U" }, { "$ref": "#/$defs/V" } ] },
            "V": { "anyOf": [ { "$ref": "#/$defs/U" }, { "$ref": "#/$defs/V" }, { "type": "string" } ] }
        }
    });
    let mut t = s.clone();
    t["$defs"]["V"]["anyOf"][2] = json!({ "type": "integer" });
    let (r, took) = timed(|| diff("rec", &s, &t));
    assert!(took < FAST, "recursive unions took {took:?}");
    match r {
        Ok(d) => assert_ne!(d.kind, DeltaKind::None),
        Err(e) => assert!(matches!(e, SchemaError::TooComplex { .. }), "{e}"),
    }
    let (r, took) = timed(|| diff("rec", &s, &s));
    assert!(took < FAST, "identical recursive unions took {took:?}");
    if let Ok(d) = r {
        assert_eq!(d.kind, DeltaKind::None);
    }
}

/// An object schema with `n` top-level properties `p<i>`, each of type `ty(i)`.
fn wide(n: usize, name: impl Fn(usize) -> String, ty: impl Fn(usize) -> &'static str) -> Value {
    let props: Map<String, Value> = (0..n)
        .map(|i| (name(i), json!({ "type": ty(i) })))
        .collect();
    json!({ "type": "object", "properties": props })
}

/// 100,000 top-level properties: every per-field pass is linear (or n·log n), so each of
/// these diffs finishes or refuses `TooComplex` within the bound (the quadratic pass took
/// minutes at this size).
#[test]
fn a_hundred_thousand_top_level_properties_diff_or_refuse_fast() {
    const N: usize = 100_000;
    let p = |i: usize| format!("p{i}");
    let q = |i: usize| format!("q{i}");
    let base = wide(N, p, |_| "string");
    let cases = [
        // every field changes its type
        ("changed", wide(N, p, |_| "integer")),
        // every field added
        ("added", {
            let mut both = wide(N, p, |_| "string");
            let extra = wide(N, q, |_| "string");
            for (k, v) in extra["properties"].as_object().unwrap() {
                both["properties"][k] = v.clone();
            }
            both
        }),
        // every field removed and another of the same shape added (rename candidates)
        ("renamed", wide(N, q, |_| "string")),
        // half of them changed, alternating
        (
            "alternating",
            wide(N, p, |i| if i % 2 == 0 { "string" } else { "number" }),
        ),
    ];
    for (what, new) in &cases {
        let (r, took) = timed(|| diff("wide", &base, new));
        assert!(took < FAST, "{what}: a 100k-property diff took {took:?}");
        match r {
            Ok(d) => assert_ne!(d.kind, DeltaKind::None, "{what}"),
            Err(e) => assert!(matches!(e, SchemaError::TooComplex { .. }), "{what}: {e}"),
        }
    }
    let (r, took) = timed(|| diff("wide", &base, &base));
    assert!(took < FAST, "identical: {took:?}");
    if let Ok(d) = r {
        assert_eq!(d.kind, DeltaKind::None);
    }
}
