//! Structured fuzzing of `diff` and of the persisted-schema decoder with proptest:
//! random schema documents with shared and cyclic `$defs`, junk keyword values, and
//! mutations of them. Properties: no panic, a typed result in bounded time, and the
//! invariants that must hold for any input (a schema diffed with itself is `none`).
//!
//! Small case counts by default; `STRATA_FUZZ_CASES=100000` for a long run.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use strata_schema::{diff, DeltaKind, PersistedSchema, SchemaError};

const DEFAULT_CASES: u32 = 64;

/// A whole diff, budget exhaustion included, stays well below this.
const MAX_DIFF: Duration = Duration::from_secs(20);

fn config() -> ProptestConfig {
    let cases = std::env::var("STRATA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const DEFS: usize = 5;

fn def_ref() -> impl Strategy<Value = Value> {
    (0..DEFS).prop_map(|i| json!({ "$ref": format!("#/$defs/D{i}") }))
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop_oneof![
            Just("string"), Just("integer"), Just("number"), Just("boolean"), Just("null"),
            Just("object"), Just("array")
        ]
        .prop_map(|t| json!({ "type": t })),
        2 => def_ref(),
        1 => Just(json!({ "type": ["string", "null"] })),
        1 => Just(json!({ "enum": ["a", "b", null] })),
        1 => Just(json!({ "const": 1 })),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(json!({ "type": "integer", "format": "uint8", "maximum": 9 })),
        1 => Just(json!({ "type": "string", "maxLength": 3, "pattern": "^a" })),
        // Junk the comparison must survive.
        1 => prop_oneof![
            Just(json!({ "type": 5 })),
            Just(json!({ "properties": [1] })),
            Just(json!({ "required": "x", "type": "object" })),
            Just(json!({ "$ref": 3 })),
            Just(json!({ "anyOf": {} })),
            Just(json!({ "items": [true, false], "additionalItems": 1 })),
            Just(json!({ "minimum": "x", "multipleOf": 0 })),
            Just(json!(17)),
        ],
    ]
}

fn node() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map("[a-d]", inner.clone(), 0..4),
                prop::collection::vec("[a-d]", 0..3),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    inner.clone().prop_map(Some)
                ],
            )
                .prop_map(|(props, required, additional)| {
                    let mut m = Map::new();
                    m.insert("type".into(), json!("object"));
                    m.insert(
                        "properties".into(),
                        Value::Object(props.into_iter().collect()),
                    );
                    m.insert("required".into(), json!(required));
                    if let Some(a) = additional {
                        m.insert("additionalProperties".into(), a);
                    }
                    Value::Object(m)
                }),
            inner
                .clone()
                .prop_map(|i| json!({ "type": "array", "items": i })),
            (
                prop_oneof![Just("anyOf"), Just("oneOf"), Just("allOf")],
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(kw, branches)| json!({ kw: branches })),
            (def_ref(), inner.clone()).prop_map(|(mut r, sibling)| {
                r["properties"] = json!({ "s": sibling });
                r
            }),
            prop::collection::vec(inner, 2..3).prop_map(|p| json!({ "prefixItems": p })),
        ]
    })
}

/// A root object schema with `DEFS` definitions that may refer to each other (and to
/// themselves) in any pattern.
fn document() -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map("[a-e]", node(), 1..5),
        prop::collection::vec(node(), DEFS),
    )
        .prop_map(|(props, defs)| {
            let defs: Map<String, Value> = defs
                .into_iter()
                .enumerate()
                .map(|(i, d)| (format!("D{i}"), d))
                .collect();
            json!({
                "type": "object",
                "properties": Value::Object(props.into_iter().collect()),
                "$defs": defs
            })
        })
}

/// Replaces the `n`-th schema-ish node (pre-order) with `with`.
fn replace_nth(v: &mut Value, n: &mut usize, with: &Value) -> bool {
    if *n == 0 {
        *v = with.clone();
        return true;
    }
    *n -= 1;
    match v {
        Value::Object(m) => m.values_mut().any(|c| replace_nth(c, n, with)),
        Value::Array(a) => a.iter_mut().any(|c| replace_nth(c, n, with)),
        _ => false,
    }
}

fn timed_diff(old: &Value, new: &Value) -> Result<strata_schema::SchemaDelta, SchemaError> {
    let start = Instant::now();
    let out = diff("fuzz", old, new);
    let took = start.elapsed();
    assert!(took < MAX_DIFF, "diff took {took:?}");
    if let Err(e) = &out {
        assert!(!e.to_string().is_empty());
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_documents_diff_with_themselves_as_none(doc in document()) {
        // Parsed again from text, as two files would be: nothing shared by address.
        let copy: Value = serde_json::from_slice(&serde_json::to_vec(&doc).unwrap()).unwrap();
        match timed_diff(&doc, &copy) {
            Ok(d) => {
                prop_assert_eq!(d.kind, DeltaKind::None, "{:?}", d.paths);
                prop_assert!(d.compatibility.backward && d.compatibility.forward);
            }
            // Junk references are typed errors. Cycles through references with sibling
            // keywords are not memoized, so a rare cyclic document can still spend the
            // budget (see `corpus_of_past_failures`): a typed error, in bounded time.
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn mutated_documents_diff_in_bounded_time(
        doc in document(),
        at in any::<usize>(),
        with in node(),
    ) {
        let mut new = doc.clone();
        let mut n = at % 64;
        replace_nth(&mut new, &mut n, &with);
        let forward = timed_diff(&doc, &new);
        let backward = timed_diff(&new, &doc);
        // (The mirror-image rule for reversed verdicts does not hold for every junk
        // document the generator builds, e.g. junk union branches; the curated tables in
        // `paths.rs` check it.)
        for d in [&forward, &backward].into_iter().flatten() {
            prop_assert_eq!(d.kind == DeltaKind::None, d.paths.is_empty());
            prop_assert_eq!(
                d.compatibility.backward && d.compatibility.forward,
                d.paths.iter().all(|p| p.backward && p.forward)
                    && d.renames.is_empty()
                    && d.ambiguous_renames.is_empty()
            );
        }
    }

    #[test]
    fn persisted_schema_decoder_never_panics(
        doc in document(),
        cut in any::<usize>(),
        flip in any::<usize>(),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let bytes = PersistedSchema::new(&doc).to_bytes();
        let back = PersistedSchema::from_bytes("fuzz", &bytes).unwrap();
        prop_assert!(back.verify());
        let mut damaged = bytes.clone();
        let i = flip % damaged.len();
        damaged[i] ^= 0x20;
        let _ = PersistedSchema::from_bytes("fuzz", &damaged);
        let _ = PersistedSchema::from_bytes("fuzz", &bytes[..cut % bytes.len()]);
        let _ = PersistedSchema::from_bytes("fuzz", &junk);
    }
}

/// Past troublemakers: exponential fan-out, self-referencing unions, deep nesting.
#[test]
fn corpus_of_past_failures() {
    let cases = [
        // A union that is its own branch (infinite view recursion before).
        json!({"type":"object","properties":{"u":{"$ref":"#/$defs/U"}},
               "$defs":{"U":{"anyOf":[{"$ref":"#/$defs/U"},{"$ref":"#/$defs/U"}]}}}),
        // A definition that is only a reference to itself.
        json!({"type":"object","properties":{"u":{"$ref":"#/$defs/U"}},
               "$defs":{"U":{"$ref":"#/$defs/U"}}}),
        // The root referring to itself through a property and an item.
        json!({"type":"object","properties":{"me":{"$ref":"#"},"all":{"type":"array","items":{"$ref":"#"}}}}),
        // Single-branch unions nested through references.
        json!({"type":"object","properties":{"u":{"$ref":"#/$defs/A"}},
               "$defs":{"A":{"anyOf":[{"$ref":"#/$defs/B"},{"type":"null"}]},
                        "B":{"oneOf":[{"$ref":"#/$defs/A"},{"type":"null"}]}}}),
    ];
    for c in &cases {
        let mut other = c.clone();
        other["properties"]["extra"] = json!({"type": "string"});
        for (a, b) in [(c, c), (c, &other), (&other, c)] {
            match timed_diff(a, b) {
                Ok(d) if a == b => assert_eq!(d.kind, DeltaKind::None),
                Ok(d) => assert_ne!(d.kind, DeltaKind::None),
                Err(e) => panic!("{c}: {e}"),
            }
        }
    }
    // Found by `random_documents_diff_with_themselves_as_none`: a cycle through
    // references with sibling keywords (not memoized) fans out until the budget stops it.
    let cyclic = json!({"type":"object",
        "properties":{"a":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/D0"}}]}},
        "$defs":{"D0":{"$ref":"#/$defs/D1"},
                 "D1":{"$ref":"#/$defs/D2","properties":{"s":{"type":"string"}}},
                 "D2":{"prefixItems":[
                     {"$ref":"#/$defs/D0","properties":{"s":{"type":"string"}}},
                     {"$ref":"#/$defs/D0","properties":{"s":{"type":"string"}}}]}}});
    match timed_diff(&cyclic, &cyclic.clone()) {
        Ok(d) => assert_eq!(d.kind, DeltaKind::None),
        Err(e) => assert!(matches!(e, SchemaError::TooComplex { .. }), "{e}"),
    }
    // Too deep to parse: the JSON parser's recursion limit (128) refuses it first.
    let deep = "[".repeat(100_000);
    assert!(serde_json::from_str::<Value>(&deep).is_err());
}
