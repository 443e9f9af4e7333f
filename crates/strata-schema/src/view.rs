//! Normalized views of subschemas: `$ref` followed (siblings merged), nullability pulled
//! out of `type` arrays and `anyOf`/`oneOf` null branches, `const` folded into `enum`,
//! unions of constants collapsed into one enum, and implicit types inferred.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::budget;
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

/// A subschema after `$ref` resolution: a boolean schema or a keyword map (borrowed
/// unless `$ref` siblings had to be merged in).
pub(crate) enum Resolved<'v> {
    /// `true`, `false` (non-object, non-boolean values count as `true`).
    Bool(bool),
    /// Keywords, with every `$ref` on the way merged in.
    Map(Cow<'v, Map<String, Value>>),
}

/// Follows `$ref` chains. Sibling keywords that constrain are merged over the target
/// (siblings win; the target keeps its annotations); annotation-only siblings are dropped
/// so the target can be borrowed. Refs followed are appended to `refs`.
pub(crate) fn deref<'v>(root: &'v Value, value: &'v Value, refs: &mut Vec<String>) -> Resolved<'v> {
    let mut current: Cow<'v, Map<String, Value>> = match value {
        Value::Object(map) => Cow::Borrowed(map),
        Value::Bool(b) => return Resolved::Bool(*b),
        _ => return Resolved::Bool(true),
    };
    for _ in 0..MAX_DEPTH {
        let reference = match current.get("$ref") {
            Some(Value::String(r)) => r.clone(),
            // A non-string `$ref` is not a reference; it stays as an opaque keyword.
            _ => break,
        };
        let target = resolve(root, &reference);
        refs.push(reference);
        let constraining_siblings = current.keys().any(|k| k != "$ref" && !is_annotation(k));
        match target {
            Some(Value::Object(target)) if !constraining_siblings => {
                current = Cow::Borrowed(target);
            }
            Some(Value::Object(target)) => {
                let mut merged = target.clone();
                for (k, v) in current.iter() {
                    if k != "$ref" && (!is_annotation(k) || !merged.contains_key(k)) {
                        merged.insert(k.clone(), v.clone());
                    }
                }
                current = Cow::Owned(merged);
            }
            Some(Value::Bool(false)) => return Resolved::Bool(false),
            // `true`, a dangling reference (validated earlier) or garbage: siblings only.
            _ => {
                current.to_mut().remove("$ref");
            }
        }
    }
    Resolved::Map(current)
}

/// [`deref()`] for a value that may be owned by the caller.
fn deref_cow<'v>(root: &'v Value, value: Cow<'v, Value>, refs: &mut Vec<String>) -> Resolved<'v> {
    match value {
        Cow::Borrowed(v) => deref(root, v, refs),
        Cow::Owned(v) => match deref(root, &v, refs) {
            Resolved::Bool(b) => Resolved::Bool(b),
            Resolved::Map(m) => Resolved::Map(Cow::Owned(m.into_owned())),
        },
    }
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

/// Union branches: `(index in the original keyword array, branch)`.
pub(crate) type Branches<'v> = Vec<(usize, Cow<'v, Value>)>;

/// A normalized subschema, borrowing from the schema document where it can.
pub(crate) struct View<'v> {
    /// The schema is `false`.
    pub(crate) nothing: bool,
    /// Keywords (refs merged). A union keyword may still be present; `union` is what counts.
    pub(crate) map: Cow<'v, Map<String, Value>>,
    /// Refs followed to reach this node (for branch matching).
    pub(crate) refs: Vec<String>,
    /// Accepted non-null types; `None` = unconstrained.
    pub(crate) types: Option<BTreeSet<String>>,
    /// `null` is accepted.
    pub(crate) null: bool,
    /// Accepted non-null values, sorted by canonical bytes and deduplicated.
    pub(crate) enum_values: Option<Vec<Value>>,
    /// Non-null union branches `(index in the original keyword array, branch)`, ≥ 2.
    pub(crate) union: Option<(UnionKind, Branches<'v>)>,
}

impl View<'_> {
    fn boolean(accept: bool, refs: Vec<String>) -> Self {
        View {
            nothing: !accept,
            map: Cow::Owned(Map::new()),
            refs,
            types: None,
            null: accept,
            enum_values: None,
            union: None,
        }
    }

    /// The view as a schema value, used to wrap a non-union as a single union branch.
    pub(crate) fn as_schema(&self) -> Value {
        if self.nothing {
            return Value::Bool(false);
        }
        Value::Object(self.map.clone().into_owned())
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
    if values.len() < 2 {
        return;
    }
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
    for (k, v) in map.iter() {
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
pub(crate) fn build_view<'v>(root: &'v Value, value: &'v Value) -> View<'v> {
    build_view_at(root, value, 0, &mut Vec::new())
}

/// [`build_view`] for a node met `depth` levels into building another view, below the
/// references in `seen`. A reference met again (a union that contains itself) gives an
/// unconstrained view, which only makes type inference for the outer union give up.
fn build_view_at<'v>(
    root: &'v Value,
    value: &'v Value,
    depth: usize,
    seen: &mut Vec<String>,
) -> View<'v> {
    budget::tick(1);
    let mut refs = Vec::new();
    match deref(root, value, &mut refs) {
        Resolved::Bool(b) => View::boolean(b, refs),
        Resolved::Map(_) if refs.iter().any(|r| seen.contains(r)) => View::boolean(true, refs),
        Resolved::Map(map) => {
            let pushed = refs.len();
            seen.extend(refs.iter().cloned());
            let v = view_of_map(root, map, refs, depth, seen);
            seen.truncate(seen.len().saturating_sub(pushed));
            v
        }
    }
}

fn view_of_map<'v>(
    root: &'v Value,
    map: Cow<'v, Map<String, Value>>,
    mut refs: Vec<String>,
    depth: usize,
    seen: &mut Vec<String>,
) -> View<'v> {
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
        let kw = kind.keyword();
        let branches: Branches<'v> = match &map {
            Cow::Borrowed(m) => {
                let m: &'v Map<String, Value> = m;
                m.get(kw)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(Cow::Borrowed).enumerate().collect())
                    .unwrap_or_default()
            }
            Cow::Owned(m) => m
                .get(kw)
                .and_then(Value::as_array)
                .map(|a| a.iter().cloned().map(Cow::Owned).enumerate().collect())
                .unwrap_or_default(),
        };
        let mut rest = Vec::new();
        for (i, b) in branches {
            if is_null_branch(root, &b) {
                union_null = true;
            } else {
                rest.push((i, b));
            }
        }
        if rest.len() < 2 && depth < MAX_DEPTH {
            // Everything but `kw` from this node, merged under the remaining branch.
            let mut outer = map.into_owned();
            outer.remove(kw);
            let Some((_, only)) = rest.pop() else {
                let mut v = view_of_map(root, Cow::Owned(outer), refs, depth + 1, seen);
                v.types = Some(BTreeSet::new());
                v.null = union_null;
                return v;
            };
            let inner = match deref_cow(root, only, &mut refs) {
                Resolved::Bool(accept) => {
                    let mut v = View::boolean(accept, refs);
                    if !accept && union_null {
                        v.nothing = false;
                        v.types = Some(BTreeSet::new());
                        v.null = true;
                    }
                    return v;
                }
                Resolved::Map(inner) => inner,
            };
            let merged = if outer
                .keys()
                .all(|k| is_annotation(k) || inner.contains_key(k))
            {
                inner
            } else {
                let mut merged = inner.into_owned();
                for (k, v) in outer {
                    merged.entry(k).or_insert(v);
                }
                Cow::Owned(merged)
            };
            let mut v = view_of_map(root, merged, refs, depth + 1, seen);
            v.null |= union_null;
            return v;
        }
        if rest.len() >= 2 {
            union = Some((kind, rest));
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
        // Branch views nest (a branch may be a union of references to unions): the depth
        // bound stops reference cycles and the budget stops exponential fan-out.
        if depth < MAX_DEPTH && !budget::exhausted() {
            let views: Vec<View<'_>> = branches
                .iter()
                .map(|(_, b)| build_view_at(root, b, depth + 1, seen))
                .collect();
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
            } else if types.is_none() {
                types = union_types(&views);
            }
            if collapsed_union_null.is_some() {
                union = None;
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
    let union_says = union_kind.map(|_| union_null || collapsed_union_null.unwrap_or(false));
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

fn union_types(views: &[View<'_>]) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for v in views {
        all.extend(v.types.clone()?);
    }
    Some(all)
}

/// Digests of pure `$ref` nodes whose expansion met no recursion cut, by (root address,
/// reference). Such a digest does not depend on where the reference is met, so it is
/// computed once per document: this keeps fingerprints linear in the schema size even
/// when definitions are shared many times over.
#[derive(Default)]
pub(crate) struct Fingerprints {
    refs: HashMap<(usize, String), Vec<u8>>,
}

/// A digest of the canonical, annotation-free, ref-inlined form of a subschema: equal
/// fingerprints mean identical shapes. Recursive references are kept as `{"$ref": …}` on
/// their second visit.
pub(crate) fn fingerprint(root: &Value, value: &Value, cache: &mut Fingerprints) -> Vec<u8> {
    let mut walk = Walk {
        root,
        root_id: std::ptr::from_ref(root) as usize,
        cache,
        stack: Vec::new(),
        cuts: 0,
    };
    walk.digest(value, 0)
}

struct Walk<'r, 'c> {
    root: &'r Value,
    root_id: usize,
    cache: &'c mut Fingerprints,
    /// References being expanded on the current path.
    stack: Vec<String>,
    /// Recursion cuts met so far (a cut makes a digest depend on the path).
    cuts: u64,
}

fn sha(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes).to_vec()
}

impl Walk<'_, '_> {
    fn digest(&mut self, value: &Value, depth: usize) -> Vec<u8> {
        let Value::Object(map) = value else {
            return sha(&canonical_bytes(value));
        };
        if !budget::tick(1) {
            return Vec::new();
        }
        if depth > MAX_DEPTH {
            self.cuts += 1;
            return sha(&canonical_bytes(value));
        }
        let Some(Value::String(reference)) = map.get("$ref") else {
            return self.digest_map(map, depth);
        };
        if self.stack.contains(reference) {
            self.cuts += 1;
            let mut cut = Map::new();
            cut.insert("$ref".into(), Value::String(reference.clone()));
            return sha(&canonical_bytes(&Value::Object(cut)));
        }
        let pure = map.keys().all(|k| k == "$ref" || is_annotation(k));
        let key = (self.root_id, reference.clone());
        if pure {
            if let Some(d) = self.cache.refs.get(&key) {
                return d.clone();
            }
        }
        let mut refs = Vec::new();
        let root = self.root;
        let cuts_before = self.cuts;
        let pushed;
        let out = match deref(root, value, &mut refs) {
            Resolved::Bool(b) => return sha(&canonical_bytes(&Value::Bool(b))),
            Resolved::Map(m) => {
                pushed = refs.len();
                self.stack.extend(refs);
                self.digest_map(&m, depth + 1)
            }
        };
        self.stack.truncate(self.stack.len().saturating_sub(pushed));
        if pure && self.cuts == cuts_before && !budget::exhausted() {
            self.cache.refs.insert(key, out.clone());
        }
        out
    }

    fn digest_map(&mut self, map: &Map<String, Value>, depth: usize) -> Vec<u8> {
        let mut out = Map::new();
        let child = |w: &mut Self, v: &Value| Value::String(hex::encode(w.digest(v, depth + 1)));
        for (k, v) in map {
            if is_annotation(k) {
                continue;
            }
            let nv = match (k.as_str(), v) {
                ("properties" | "patternProperties" | "dependentSchemas", Value::Object(m)) => {
                    Value::Object(
                        m.iter()
                            .map(|(pk, pv)| (pk.clone(), child(self, pv)))
                            .collect(),
                    )
                }
                ("prefixItems" | "anyOf" | "oneOf" | "allOf" | "items", Value::Array(list)) => {
                    Value::Array(list.iter().map(|b| child(self, b)).collect())
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
                ) => child(self, v),
                ("required" | "enum" | "type", Value::Array(list)) => {
                    let mut list = list.clone();
                    sort_values(&mut list);
                    Value::Array(list)
                }
                _ => v.clone(),
            };
            out.insert(k.clone(), nv);
        }
        sha(&canonical_bytes(&Value::Object(out)))
    }
}

/// Walks a whole schema document and reports the first `$ref` that is not local or does
/// not resolve: `(path of the holding object, reference, is_local)`.
pub(crate) fn first_bad_ref(root: &Value) -> Option<(String, String, bool)> {
    enum Seg<'s> {
        Key(&'s str),
        Index(usize),
    }
    fn render(segs: &[Seg<'_>]) -> String {
        let mut p = String::new();
        for s in segs {
            p.push('/');
            match s {
                Seg::Key(k) => p.push_str(&escape_segment(k)),
                Seg::Index(i) => p.push_str(&i.to_string()),
            }
        }
        display_path(&p)
    }
    fn walk<'s>(
        root: &Value,
        v: &'s Value,
        segs: &mut Vec<Seg<'s>>,
    ) -> Option<(String, String, bool)> {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    if !r.starts_with('#') || (r.len() > 1 && !r.starts_with("#/")) {
                        return Some((render(segs), r.clone(), false));
                    }
                    if resolve(root, r).is_none() {
                        return Some((render(segs), r.clone(), true));
                    }
                }
                for (k, child) in map {
                    // Data, not schemas.
                    if !matches!(child, Value::Object(_) | Value::Array(_))
                        || matches!(
                            k.as_str(),
                            "enum" | "const" | "default" | "examples" | "example"
                        )
                    {
                        continue;
                    }
                    segs.push(Seg::Key(k));
                    let found = walk(root, child, segs);
                    segs.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    if !matches!(child, Value::Object(_) | Value::Array(_)) {
                        continue;
                    }
                    segs.push(Seg::Index(i));
                    let found = walk(root, child, segs);
                    segs.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            _ => None,
        }
    }
    walk(root, root, &mut Vec::new())
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
