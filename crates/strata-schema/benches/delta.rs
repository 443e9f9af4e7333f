//! Delta computation for two 200-property schemas (criterion).
//!
//! `cargo bench -p strata-schema --bench delta` (add `-- --quick` for a short run).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Map, Value};
use strata_schema::{diff, schema_hash};

/// A schemars-like schema with `n` properties of mixed shapes. `v2` widens, tightens,
/// adds and removes a few percent of them, including inside `$defs`.
fn schema(n: usize, v2: bool) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("field_{i:03}");
        let s = match i % 8 {
            0 => json!({"type": "string", "maxLength": if v2 && i % 40 == 0 { 32 } else { 64 }}),
            1 => {
                json!({"type": "integer", "format": if v2 && i % 41 == 1 { "int64" } else { "int32" }})
            }
            2 => json!({"type": ["number", "null"], "format": "double"}),
            3 => json!({"$ref": "#/$defs/Address"}),
            4 => json!({"anyOf": [{"$ref": "#/$defs/Line"}, {"type": "null"}]}),
            5 => json!({"type": "array", "items": {"$ref": "#/$defs/Line"}}),
            6 => json!({"type": "string", "enum": if v2 && i % 30 == 6 {
                json!(["a", "b", "c", "d"]) } else { json!(["a", "b", "c"]) }}),
            _ => {
                json!({"type": "object", "additionalProperties": {"type": "integer", "format": "int32"}})
            }
        };
        if v2 && i % 50 == 49 {
            continue; // removed
        }
        if i % 3 == 0 {
            required.push(Value::String(name.clone()));
        }
        props.insert(name, s);
    }
    if v2 {
        for i in 0..4 {
            props.insert(format!("added_{i}"), json!({"type": ["string", "null"]}));
        }
    }
    let zip = if v2 {
        json!({"type": "string"})
    } else {
        json!({"type": ["string", "integer"]})
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Wide",
        "type": "object",
        "properties": props,
        "required": required,
        "$defs": {
            "Address": {"type": "object", "properties": {
                "street": {"type": "string"}, "zip": zip, "city": {"type": ["string", "null"]}},
                "required": ["street"]},
            "Line": {"type": "object", "properties": {
                "sku": {"type": "string"},
                "qty": {"type": "integer", "format": "uint16", "minimum": 0, "maximum": 65535}},
                "required": ["sku", "qty"], "additionalProperties": false}
        }
    })
}

fn bench_delta(c: &mut Criterion) {
    let old = schema(200, false);
    let new = schema(200, true);
    let d = diff("wide", &old, &new).unwrap();
    println!(
        "200-property delta: kind {}, {} added, {} removed, {} changed, {} path changes, \
         compatibility {}",
        d.kind,
        d.added.len(),
        d.removed.len(),
        d.changed.len(),
        d.paths.len(),
        d.compatibility.level
    );
    // A direct figure, independent of criterion's statistics: best-of-5 mean over 200 runs.
    for (label, a, b) in [("changed", &old, &new), ("identical", &old, &old)] {
        let best = (0..5)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..200 {
                    black_box(diff("wide", black_box(a), black_box(b)).unwrap());
                }
                start.elapsed() / 200
            })
            .min()
            .unwrap_or_default();
        println!(
            "200-property diff ({label}): {:.1} µs per diff",
            best.as_secs_f64() * 1e6
        );
    }
    let mut group = c.benchmark_group("delta_200_properties");
    group.bench_function("diff_changed", |b| {
        b.iter(|| diff("wide", black_box(&old), black_box(&new)).unwrap())
    });
    group.bench_function("diff_identical", |b| {
        b.iter(|| diff("wide", black_box(&old), black_box(&old)).unwrap())
    });
    group.bench_function("schema_hash", |b| b.iter(|| schema_hash(black_box(&old))));
    group.finish();
}

criterion_group!(
    name = benches;
    config = Criterion::default();
    targets = bench_delta
);
criterion_main!(benches);
