//! Invariants over deterministic pseudo-random schemas and mutations of them:
//! a schema diffed with itself is `none`; a reversed diff swaps the verdicts; `kind` is
//! `none` exactly when there are no path changes; every changed field has path changes.

use serde_json::{json, Map, Value};
use strata_schema::{diff, DeltaKind};

/// Small deterministic generator (64-bit LCG), so failures reproduce from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const NAMES: &[&str] = &["a", "b", "c", "d", "e"];

fn gen(rng: &mut Rng, depth: u32) -> Value {
    let leaf = depth >= 3;
    match rng.below(if leaf { 6 } else { 10 }) {
        0 => {
            let mut s = json!({"type": "string"});
            if rng.chance(40) {
                s["maxLength"] = json!(rng.below(3) * 10 + 5);
            }
            if rng.chance(20) {
                let p = ["^a", "^b"][rng.below(2) as usize];
                s["pattern"] = json!(p);
            }
            s
        }
        1 => {
            let mut s = json!({"type": "integer"});
            if rng.chance(50) {
                let f = ["int32", "int64", "uint8", "uint32"][rng.below(4) as usize];
                s["format"] = json!(f);
            }
            if rng.chance(40) {
                s["minimum"] = json!(rng.below(3));
            }
            s
        }
        2 => {
            let t = ["number", "integer", "boolean"][rng.below(3) as usize];
            json!({ "type": t })
        }
        3 => {
            let n = 1 + rng.below(3) as usize;
            let values = &["x", "y", "z", "w"][..n];
            json!({"type": "string", "enum": values})
        }
        4 => {
            let t = [["string", "null"], ["integer", "null"]][rng.below(2) as usize];
            json!({ "type": t })
        }
        5 => {
            let r = ["#/$defs/A", "#/$defs/B"][rng.below(2) as usize];
            json!({ "$ref": r })
        }
        6 => json!({"type": "array", "items": gen(rng, depth + 1)}),
        7 => json!({"anyOf": [gen(rng, depth + 1), {"type": "null"}]}),
        8 => json!({"anyOf": [gen(rng, depth + 1), gen(rng, depth + 1)]}),
        _ => object(rng, depth + 1),
    }
}

fn object(rng: &mut Rng, depth: u32) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for name in NAMES {
        if rng.chance(60) {
            props.insert((*name).into(), gen(rng, depth));
            if rng.chance(30) {
                required.push(json!(name));
            }
        }
    }
    let mut o = json!({"type": "object", "properties": props, "required": required});
    if rng.chance(25) {
        o["additionalProperties"] = json!(false);
    }
    o
}

fn document(rng: &mut Rng) -> Value {
    let mut root = object(rng, 1);
    root["$defs"] = json!({
        "A": {"type": "object", "properties": {"n": {"type": "integer"}, "next": {"$ref": "#/$defs/A"}}},
        "B": {"type": "string", "enum": ["p", "q"]}
    });
    root
}

/// Applies a few random edits at random depths.
fn mutate(rng: &mut Rng, v: &mut Value, depth: u32) {
    let Value::Object(map) = v else { return };
    if depth > 0 && rng.chance(15) {
        *v = gen(rng, depth);
        return;
    }
    if rng.chance(10) {
        if let Some(Value::Number(_)) = map.get("maxLength") {
            map.insert("maxLength".into(), json!(rng.below(40)));
        }
    }
    if rng.chance(8) {
        if let Some(Value::Array(req)) = map.get_mut("required") {
            let name = NAMES[rng.below(NAMES.len() as u64) as usize];
            if let Some(pos) = req.iter().position(|r| r == name) {
                req.remove(pos);
            } else if map.get("properties").is_some_and(|p| p.get(name).is_some()) {
                if let Some(Value::Array(req)) = map.get_mut("required") {
                    req.push(json!(name));
                }
            }
        }
    }
    if rng.chance(8) {
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            let name = NAMES[rng.below(NAMES.len() as u64) as usize];
            if props.remove(name).is_none() {
                props.insert(name.into(), gen(rng, depth + 1));
            }
        }
    }
    if rng.chance(5) {
        match map.get("additionalProperties") {
            Some(_) => {
                map.remove("additionalProperties");
            }
            None if map.contains_key("properties") => {
                map.insert("additionalProperties".into(), json!(false));
            }
            None => {}
        }
    }
    for (k, child) in map.iter_mut() {
        match (k.as_str(), child) {
            ("properties", Value::Object(props)) => {
                for p in props.values_mut() {
                    mutate(rng, p, depth + 1);
                }
            }
            ("items", c) => mutate(rng, c, depth + 1),
            ("anyOf", Value::Array(bs)) => {
                for b in bs {
                    mutate(rng, b, depth + 1);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn generated_schemas_keep_the_invariants() {
    let mut failures = Vec::new();
    let mut changed_seeds = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for seed in 0..400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let old = document(&mut rng);
        let mut new = old.clone();
        mutate(&mut rng, &mut new, 0);
        let same = diff("gen", &old, &old).unwrap();
        if same.kind != DeltaKind::None || !same.paths.is_empty() {
            failures.push(format!("seed {seed}: self-diff not none: {:?}", same.paths));
        }
        let fwd = diff("gen", &old, &new).unwrap();
        let rev = diff("gen", &new, &old).unwrap();
        if !fwd.paths.is_empty() {
            changed_seeds += 1;
        }
        for p in &fwd.paths {
            kinds.insert(
                crate::summary_of(p)
                    .rsplit(' ')
                    .next()
                    .unwrap_or("")
                    .to_string(),
            );
        }
        if (fwd.kind == DeltaKind::None) != fwd.paths.is_empty() {
            failures.push(format!(
                "seed {seed}: kind {} with {} paths",
                fwd.kind,
                fwd.paths.len()
            ));
        }
        if fwd.compatibility.backward != rev.compatibility.forward
            || fwd.compatibility.forward != rev.compatibility.backward
        {
            failures.push(format!(
                "seed {seed}: verdict ({}, {}) reversed ({}, {})\n  old {old}\n  new {new}\n  fwd {:?}\n  rev {:?}",
                fwd.compatibility.backward,
                fwd.compatibility.forward,
                rev.compatibility.backward,
                rev.compatibility.forward,
                crate::change_summary(&fwd),
                crate::change_summary(&rev)
            ));
        }
        if fwd.added != rev.removed || fwd.removed != rev.added {
            failures.push(format!("seed {seed}: added/removed not mirrored"));
        }
        for c in &fwd.changed {
            if !fwd
                .paths
                .iter()
                .any(|p| p.field.as_deref() == Some(c.field.as_str()))
            {
                failures.push(format!(
                    "seed {seed}: changed field {} has no path",
                    c.field
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The mutations really exercise the engine.
    assert!(
        changed_seeds > 200,
        "only {changed_seeds} of 400 seeds changed anything"
    );
    for k in [
        "property_added",
        "property_removed",
        "required_added",
        "type_changed",
        "union_branch_added",
        "null_allowed",
    ] {
        assert!(kinds.contains(k), "no {k} among {kinds:?}");
    }
}
