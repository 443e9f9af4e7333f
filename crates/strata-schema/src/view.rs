//! Normalized views of subschemas: `$ref` followed (siblings merged), nullability pulled
//! out of `type` arrays and `anyOf`/`oneOf` null branches, `const` folded into `enum`,
//! unions of constants collapsed into one enum, and implicit types inferred.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::canonical::canonical_bytes;

/// Hard limit on `$ref` hops and on recursion depth; real schemas are far shallower.
pub(crate) const MAX_DEPTH: usize = 128;

/// Keywords that never change which instances validate.
pub(crate) fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "title"
            | "description"
            | "$comment"
            | "examples"
            | "example"
            | "default"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$schema"
            | "$id"
            | "$anchor"
            | "$dynamicAnchor"
            | "$vocabulary"
            | "contentMediaType"
            | "contentEncoding"
            | "contentSchema"
            | "$defs"
            | "definitions"
    ) || keyword.starts_with("x-")
}

/// Keywords the comparison interprets; anything else that is not an annotation is
/// compared verbatim.
pub(crate) fn is_interpreted(keyword: &str) -> bool {
    matches!(
        keyword,
        "$ref"
            | "type"
            | "nullable"
            | "enum"
            | "const"
            | "anyOf"
            | "oneOf"
            | "allOf"
            | "properties"
            | "required"
            | "additionalProperties"
            | "items"
            | "prefixItems"
            | "additionalItems"
            | "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "minLength"
            | "maxLength"
            | "pattern"
            | "format"
            | "minItems"
            | "maxItems"
            | "uniqueItems"
            | "minContains"
            | "maxContains"
            | "minProperties"
            | "maxProperties"
    )
}

/// Resolves a local reference (`#`, `#/$defs/Name`, any `#/json/pointer`).
pub(crate) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    if !fragment.starts_with('/') {
        return None;
    }
    root.pointer(&percent_decode(fragment))
}

fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A subschema after `$ref` resolution: a boolean schema or a keyword map.
pub(crate) enum Resolved {
    /// `true`, `false` (non-object, non-boolean values count as `true`).
    Bool(bool),
    /// Keywords, with every `$ref` on the way merged in.
    Map(Map<String, Value>),
}

/// Follows `$ref` chains, merging sibling keywords over the target (siblings win for
/// constraints, the target keeps its annotations). Refs followed are appended to `refs`.
pub(crate) fn deref(root: &Value, value: &Value, refs: &mut Vec<String>) -> Resolved {
    let mut current = match value {
        Value::Object(map) => map.clone(),
        Value::Bool(b) => return Resolved::Bool(*b),
        _ => return Resolved::Bool(true),
    };
    for _ in 0..MAX_DEPTH {
        let reference = match current.remove("$ref") {
            Some(Value::String(r)) => r,
            Some(other) => {
                // A non-string `$ref` is not a reference; keep it as an opaque keyword.
                current.insert("$ref".into(), other);
                break;
            }
            None => break,
        };
        let target = resolve(root, &reference);
        refs.push(reference);
        match target {
            Some(Value::Object(target)) => {
                let mut merged = target.clone();
                for (k, v) in current {
                    if !is_annotation(&k) || !merged.contains_key(&k) {
                        merged.insert(k, v);
                    }
                }
                current = merged;
            }
            Some(Value::Bool(false)) => return Resolved::Bool(false),
            // `true`, a dangling reference (validated earlier) or garbage: siblings only.
            _ => {}
        }
    }
    Resolved::Map(current)
}

/// Which union keyword a view's branches came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnionKind {
    AnyOf,
    OneOf,
}

impl UnionKind {
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            UnionKind::AnyOf => "anyOf",
            UnionKind::OneOf => "oneOf",
        }
    }
}

/// A normalized subschema.
pub(crate) struct View {
    /// The schema is `false`.
    pub(crate) nothing: bool,
    /// Keywords (refs merged, union keyword removed when it was turned into `union`).
    pub(crate) map: Map<String, Value>,
    /// Refs followed to reach this node (for cycle detection and branch matching).
    pub(crate) refs: Vec<String>,
    /// Accepted non-null types; `None` = unconstrained.
    pub(crate) types: Option<BTreeSet<String>>,
    /// `null` is accepted.
    pub(crate) null: bool,
    /// Accepted non-null values, sorted by canonical bytes and deduplicated.
    pub(crate) enum_values: Option<Vec<Value>>,
    /// Non-null union branches `(index in the original keyword array, branch)`, ≥ 2.
    pub(crate) union: Option<(UnionKind, Vec<(usize, Value)>)>,
}

impl View {
    fn boolean(accept: bool, refs: Vec<String>) -> View {
        View {
            nothing: !accept,
            map: Map::new(),
            refs,
            types: None,
            null: accept,
            enum_values: None,
            union: None,
        }
    }

    /// The view's keyword map as a schema value (used to wrap a non-union as a branch).
    pub(crate) fn as_schema(&self) -> Value {
        if self.nothing {
            return Value::Bool(false);
        }
        let mut map = self.map.clone();
        if let Some((kind, branches)) = &self.union {
            let list = branches.iter().map(|(_, b)| b.clone()).collect();
            map.insert(kind.keyword().into(), Value::Array(list));
        }
        Value::Object(map)
    }
}

fn json_type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Sorts by canonical bytes and removes duplicates.
pub(crate) fn sort_values(values: &mut Vec<Value>) {
    values.sort_by_cached_key(canonical_bytes);
    values.dedup_by(|a, b| canonical_bytes(a) == canonical_bytes(b));
}

/// A branch that accepts exactly `null`.
fn is_null_branch(root: &Value, branch: &Value) -> bool {
    let mut refs = Vec::new();
    let Resolved::Map(map) = deref(root, branch, &mut refs) else {
        return false;
    };
    let mut constraint = false;
    for (k, v) in &map {
        if is_annotation(k) {
            continue;
        }
        constraint = true;
        let only_null = match k.as_str() {
            "type" => v == "null" || v.as_array().is_some_and(|a| a.len() == 1 && a[0] == "null"),
            "const" => v.is_null(),
            "enum" => v.as_array().is_some_and(|a| a.len() == 1 && a[0].is_null()),
            _ => false,
        };
        if !only_null {
            return false;
        }
    }
    constraint
}

/// Builds the normalized view of `value`, resolving references against `root`.
pub(crate) fn build_view(root: &Value, value: &Value) -> View {
    let mut refs = Vec::new();
    match deref(root, value, &mut refs) {
        Resolved::Bool(b) => View::boolean(b, refs),
        Resolved::Map(map) => view_of_map(root, map, refs, 0),
    }
}

fn view_of_map(
    root: &Value,
    mut map: Map<String, Value>,
    mut refs: Vec<String>,
    depth: usize,
) -> View {
    // Unions: pull out null branches; a single remaining branch is flattened into this node.
    let union_kind = if map.get("anyOf").is_some_and(Value::is_array) {
        Some(UnionKind::AnyOf)
    } else if map.get("oneOf").is_some_and(Value::is_array) {
        Some(UnionKind::OneOf)
    } else {
        None
    };
    let mut union_null = false;
    let mut union = None;
    if let Some(kind) = union_kind {
        let branches = match map.remove(kind.keyword()) {
            Some(Value::Array(b)) => b,
            _ => Vec::new(),
        };
        let mut rest = Vec::new();
        for (i, b) in branches.into_iter().enumerate() {
            if is_null_branch(root, &b) {
                union_null = true;
            } else {
                rest.push((i, b));
            }
        }
        match rest.len() {
            0 => {
                let mut v = view_of_map(root, map, refs, depth + 1);
                v.types = Some(BTreeSet::new());
                v.null = union_null;
                return v;
            }
            1 if depth < MAX_DEPTH => {
                let Some((_, only)) = rest.pop() else {
                    return View::boolean(true, refs);
                };
                match deref(root, &only, &mut refs) {
                    Resolved::Bool(false) => {
                        let mut v = View::boolean(false, refs);
                        if union_null {
                            v.nothing = false;
                            v.types = Some(BTreeSet::new());
                            v.null = true;
                        }
                        return v;
                    }
                    Resolved::Bool(true) => return View::boolean(true, refs),
                    Resolved::Map(inner) => {
                        let mut merged = inner;
                        for (k, v) in map {
                            if !merged.contains_key(&k) {
                                merged.insert(k, v);
                            }
                        }
                        let mut v = view_of_map(root, merged, refs, depth + 1);
                        v.null |= union_null;
                        return v;
                    }
                }
            }
            _ => union = Some((kind, rest)),
        }
    }

    // Types.
    let mut type_null = None;
    let mut types: Option<BTreeSet<String>> = match map.get("type") {
        Some(Value::String(t)) => Some(std::iter::once(t.clone()).collect()),
        Some(Value::Array(list)) => Some(
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    };
    if let Some(set) = types.as_mut() {
        type_null = Some(set.remove("null"));
    }
    if map.get("nullable") == Some(&Value::Bool(true)) {
        type_null = Some(true);
    }

    // Enum / const.
    let mut enum_null = None;
    let mut enum_values = match (map.get("enum"), map.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (_, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    if let Some(values) = enum_values.as_mut() {
        let before = values.len();
        values.retain(|v| !v.is_null());
        enum_null = Some(values.len() != before);
        sort_values(values);
    }

    // Unions whose branches are all plain constants collapse into one enum.
    let mut collapsed_union_null = None;
    if let Some((_, branches)) = &union {
        if depth < MAX_DEPTH {
            let views: Vec<View> = branches.iter().map(|(_, b)| build_view(root, b)).collect();
            let all_consts = views.iter().all(|v| {
                v.enum_values.is_some()
                    && v.union.is_none()
                    && v.map.keys().all(|k| {
                        is_annotation(k) || matches!(k.as_str(), "type" | "enum" | "const")
                    })
            });
            if all_consts && enum_values.is_none() {
                let mut values: Vec<Value> = views
                    .iter()
                    .flat_map(|v| v.enum_values.clone().unwrap_or_default())
                    .collect();
                sort_values(&mut values);
                enum_values = Some(values);
                collapsed_union_null = Some(views.iter().any(|v| v.null));
                if types.is_none() {
                    types = union_types(&views);
                }
                union = None;
            } else if types.is_none() {
                types = union_types(&views);
            }
        }
    }

    // Infer types from enum values.
    if types.is_none() {
        if let Some(values) = &enum_values {
            types = Some(values.iter().map(|v| json_type_of(v).to_string()).collect());
        }
    }

    // null is accepted when every constraint that speaks about it accepts it.
    let union_says = if union.is_some() || union_kind.is_some() {
        Some(union_null || collapsed_union_null.unwrap_or(false))
    } else {
        None
    };
    let null = [type_null, enum_null, union_says]
        .into_iter()
        .all(|x| x.unwrap_or(true));

    View {
        nothing: false,
        map,
        refs,
        types,
        null,
        enum_values,
        union,
    }
}

fn union_types(views: &[View]) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for v in views {
        all.extend(v.types.clone()?);
    }
    Some(all)
}

/// A canonical, annotation-free, ref-inlined form of a subschema: equal fingerprints mean
/// identical shapes. Recursive references are kept as `{"$ref": …}` on their second visit.
pub(crate) fn fingerprint(root: &Value, value: &Value) -> Vec<u8> {
    let mut stack = Vec::new();
    canonical_bytes(&normalize(root, value, &mut stack, 0))
}

fn normalize(root: &Value, value: &Value, stack: &mut Vec<String>, depth: usize) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    if depth > MAX_DEPTH {
        return value.clone();
    }
    if let Some(Value::String(reference)) = map.get("$ref") {
        if stack.contains(reference) {
            let mut cut = Map::new();
            cut.insert("$ref".into(), Value::String(reference.clone()));
            return Value::Object(cut);
        }
        let mut refs = Vec::new();
        let resolved = match deref(root, value, &mut refs) {
            Resolved::Bool(b) => return Value::Bool(b),
            Resolved::Map(m) => Value::Object(m),
        };
        let pushed = refs.len();
        stack.extend(refs);
        let out = normalize(root, &resolved, stack, depth + 1);
        stack.truncate(stack.len().saturating_sub(pushed));
        return out;
    }
    let mut out = Map::new();
    for (k, v) in map {
        if is_annotation(k) {
            continue;
        }
        let nv = match (k.as_str(), v) {
            ("properties" | "patternProperties" | "dependentSchemas", Value::Object(m)) => {
                Value::Object(
                    m.iter()
                        .map(|(pk, pv)| (pk.clone(), normalize(root, pv, stack, depth + 1)))
                        .collect(),
                )
            }
            ("prefixItems" | "anyOf" | "oneOf" | "allOf" | "items", Value::Array(list)) => {
                Value::Array(
                    list.iter()
                        .map(|b| normalize(root, b, stack, depth + 1))
                        .collect(),
                )
            }
            (
                "items"
                | "additionalProperties"
                | "additionalItems"
                | "not"
                | "contains"
                | "propertyNames"
                | "if"
                | "then"
                | "else"
                | "unevaluatedProperties"
                | "unevaluatedItems",
                _,
            ) => normalize(root, v, stack, depth + 1),
            ("required" | "enum" | "type", Value::Array(list)) => {
                let mut list = list.clone();
                sort_values(&mut list);
                Value::Array(list)
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), nv);
    }
    Value::Object(out)
}

/// Walks a whole schema document and reports the first `$ref` that is not local or does
/// not resolve: `(path of the holding object, reference, is_local)`.
pub(crate) fn first_bad_ref(root: &Value) -> Option<(String, String, bool)> {
    fn walk(root: &Value, v: &Value, path: &mut String) -> Option<(String, String, bool)> {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    if !r.starts_with('#') || (r.len() > 1 && !r.starts_with("#/")) {
                        return Some((display_path(path), r.clone(), false));
                    }
                    if resolve(root, r).is_none() {
                        return Some((display_path(path), r.clone(), true));
                    }
                }
                for (k, child) in map {
                    // Data, not schemas.
                    if matches!(
                        k.as_str(),
                        "enum" | "const" | "default" | "examples" | "example"
                    ) {
                        continue;
                    }
                    let len = path.len();
                    path.push('/');
                    path.push_str(&escape_segment(k));
                    let found = walk(root, child, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    let found = walk(root, child, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            _ => None,
        }
    }
    let mut path = String::new();
    walk(root, root, &mut path)
}

fn display_path(p: &str) -> String {
    if p.is_empty() {
        "/".to_string()
    } else {
        p.to_string()
    }
}

/// JSON-pointer escaping of one segment (`~` → `~0`, `/` → `~1`).
pub(crate) fn escape_segment(s: &str) -> String {
    if s.contains(['~', '/']) {
        s.replace('~', "~0").replace('/', "~1")
    } else {
        s.to_string()
    }
}
