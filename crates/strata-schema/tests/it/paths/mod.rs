//! Table-driven path-level cases: each row gives old and new schemas, the expected seed
//! kind, the expected backward/forward verdict and the exact set of `<path> <change>`s.
//!
//! The rows are split by concept into [`types`], [`nesting`] and [`models`]; the
//! case builders and [`path_level_table`] stay here.

mod models;
mod nesting;
mod types;

use serde_json::{json, Value};
use strata_schema::{diff_with, DeltaKind, DiffOptions, OpenContentPolicy};

use crate::change_summary;

use DeltaKind::{Additive as ADD, NonAdditive as NON, None as NONE};

struct Case {
    name: &'static str,
    old: Value,
    new: Value,
    kind: DeltaKind,
    backward: bool,
    forward: bool,
    changes: &'static [&'static str],
    strict: bool,
}

fn case(
    name: &'static str,
    old: Value,
    new: Value,
    kind: DeltaKind,
    backward: bool,
    forward: bool,
    changes: &'static [&'static str],
) -> Case {
    Case {
        name,
        old,
        new,
        kind,
        backward,
        forward,
        changes,
        strict: false,
    }
}

/// A root object with a single optional property `x`.
fn x(schema: Value) -> Value {
    json!({"type": "object", "properties": {"x": schema}})
}

/// A root object with a single optional property `x` and `$defs`.
fn xd(schema: Value, defs: Value) -> Value {
    json!({"type": "object", "properties": {"x": schema}, "$defs": defs})
}

fn obj(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn closed(props: Value) -> Value {
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

/// The `Address` definition (`zip` an integer) under `$defs`.
fn addr_v1() -> Value {
    json!({"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "integer"}}, "required": ["street"]}})
}

/// The `Address` definition with `zip` a string.
fn addr_v2() -> Value {
    json!({"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "string"}}, "required": ["street"]}})
}

/// A recursive tree: `root` is a `Node` with a `label` of schema `label` and `children`
/// that are `Node`s again.
fn tree(label: Value) -> Value {
    json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {
            "label": label,
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}})
}

fn cases() -> Vec<Case> {
    [types::cases(), nesting::cases(), models::cases()]
        .into_iter()
        .flatten()
        .collect()
}

#[test]
fn path_level_table() {
    let cases = cases();
    assert!(cases.len() >= 40, "table has {} rows", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let opts = DiffOptions {
            open_content: if c.strict {
                OpenContentPolicy::Strict
            } else {
                OpenContentPolicy::TypedWriters
            },
        };
        let d = match diff_with("table", &c.old, &c.new, &opts) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{}: error {e}", c.name));
                continue;
            }
        };
        let got = change_summary(&d);
        let mut want: Vec<String> = c.changes.iter().map(|s| s.to_string()).collect();
        want.sort();
        if d.kind != c.kind
            || d.compatibility.backward != c.backward
            || d.compatibility.forward != c.forward
            || got != want
        {
            failures.push(format!(
                "{}: got kind {} backward {} forward {} changes {:?}; want kind {} backward {} forward {} changes {:?}",
                c.name, d.kind, d.compatibility.backward, d.compatibility.forward, got,
                c.kind, c.backward, c.forward, want
            ));
        }
        // Forward is the backward verdict of the reversed diff (no renames in this table).
        let rev = diff_with("table", &c.new, &c.old, &opts).unwrap();
        if rev.compatibility.backward != d.compatibility.forward
            || rev.compatibility.forward != d.compatibility.backward
        {
            failures.push(format!(
                "{}: reversed diff verdict backward {} forward {} is not the mirror image",
                c.name, rev.compatibility.backward, rev.compatibility.forward
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
