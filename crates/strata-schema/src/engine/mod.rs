//! The recursive comparison that produces path-level changes and verdicts.

mod container;
mod keywords;
mod union;

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::budget;
use crate::delta::{
    AmbiguousRename, ChangeKind, ContentModel, DiffOptions, PathChange, RenameCandidate,
};
use crate::view::{
    build_view, deref, escape_segment, is_annotation, Fingerprints, Resolved, View, MAX_DEPTH,
};

/// `base` + `/segment` (with `/` as the root).
pub(crate) fn child_path(base: &str, name: &str) -> String {
    let seg = escape_segment(name);
    if base == "/" {
        format!("/{seg}")
    } else {
        format!("{base}/{seg}")
    }
}

fn suffix_path(base: &str, suffix: &str) -> String {
    if base == "/" {
        format!("/{suffix}")
    } else {
        format!("{base}{suffix}")
    }
}

enum Additional<'a> {
    Open,
    Closed,
    Schema(&'a Value),
}

impl Additional<'_> {
    fn model(&self) -> ContentModel {
        match self {
            Additional::Open => ContentModel::Open,
            Additional::Closed => ContentModel::Closed,
            Additional::Schema(_) => ContentModel::Constrained,
        }
    }
}

/// What comparing one pair of pure references produced, with paths relative to where it
/// was compared, so it can be replayed at another path.
#[derive(Default)]
struct Memo {
    changes: Vec<(String, ChangeKind, bool, bool)>,
    renames: Vec<RenameCandidate>,
    ambiguous: Vec<AmbiguousRename>,
}

pub(crate) struct Engine<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    opts: DiffOptions,
    /// Pairs of schema nodes being compared on the current recursion path, by address.
    stack: Vec<(usize, usize)>,
    depth: usize,
    /// Results of comparing pairs of pure `$ref`s whose comparison met no cut, by the two
    /// reference strings: a shared definition is compared once, however often it is used.
    memo: HashMap<(String, String), Rc<Memo>>,
    /// Recursion cuts met so far (stack repeats and the depth limit).
    cuts: u64,
    /// Depth-limit cuts met so far (the only cuts that depend on the caller's context).
    depth_cuts: u64,
    old_prints: Fingerprints,
    new_prints: Fingerprints,
    top_field: Option<String>,
    pub(crate) changes: Vec<PathChange>,
    pub(crate) renames: Vec<RenameCandidate>,
    pub(crate) ambiguous: Vec<AmbiguousRename>,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(old_root: &'a Value, new_root: &'a Value, opts: DiffOptions) -> Self {
        Engine {
            old_root,
            new_root,
            opts,
            stack: Vec::new(),
            depth: 0,
            memo: HashMap::new(),
            cuts: 0,
            depth_cuts: 0,
            old_prints: Fingerprints::default(),
            new_prints: Fingerprints::default(),
            top_field: None,
            changes: Vec::new(),
            renames: Vec::new(),
            ambiguous: Vec::new(),
        }
    }

    fn emit(&mut self, path: &str, change: ChangeKind, backward: bool, forward: bool) {
        self.changes.push(PathChange {
            path: path.to_string(),
            field: self.top_field.clone(),
            change,
            backward,
            forward,
        });
    }

    /// Whether every value valid under `a` (in `a_root`) is valid under `b` (in `b_root`),
    /// as far as this comparison can tell.
    fn accepts_all(&mut self, a_root: &Value, a: &Value, b_root: &Value, b: &Value) -> bool {
        let mut sub = Engine::new(a_root, b_root, self.opts);
        sub.depth = self.depth;
        sub.compare("/", a, b);
        // The sub-comparison has its own stack; only the depth limit ties it to this path.
        self.cuts += sub.depth_cuts;
        self.depth_cuts += sub.depth_cuts;
        sub.changes.iter().all(|c| c.backward)
    }

    /// Compares `old` (in the old document) with `new` (in the new document) at `path`.
    ///
    /// Recursion is cut when the same pair of schema nodes is already being compared
    /// further up: descending again would only repeat the same changes at a longer path.
    ///
    /// A pair of pure `$ref`s is compared once: its changes are remembered relative to
    /// `path` and replayed when the same pair is met again at another path, which keeps
    /// the work polynomial when definitions are shared. Results that met a recursion cut
    /// depend on the path that led to them and are not remembered.
    pub(crate) fn compare(&mut self, path: &str, old: &Value, new: &Value) {
        if !budget::tick(1) {
            return;
        }
        if self.depth >= MAX_DEPTH {
            self.cuts += 1;
            self.depth_cuts += 1;
            return;
        }
        let key = (node_id(self.old_root, old), node_id(self.new_root, new));
        if self.stack.contains(&key) {
            self.cuts += 1;
            return;
        }
        // The root is compared once per engine, and its paths cannot be rebased.
        let memo_key = if path == "/" {
            None
        } else {
            pure_ref(old).zip(pure_ref(new))
        };
        if let Some(k) = &memo_key {
            if let Some(memo) = self.memo.get(k).cloned() {
                self.replay(path, &memo);
                return;
            }
        }
        let marks = (
            self.changes.len(),
            self.renames.len(),
            self.ambiguous.len(),
            self.cuts,
        );
        let vo = build_view(self.old_root, old);
        let vn = build_view(self.new_root, new);
        self.stack.push(key);
        self.depth += 1;
        self.compare_views(path, &vo, &vn);
        self.depth -= 1;
        self.stack.pop();
        if let Some(k) = memo_key {
            if self.cuts == marks.3 && !budget::exhausted() {
                if let Some(memo) = self.record(path, marks) {
                    self.memo.insert(k, Rc::new(memo));
                }
            }
        }
    }

    /// The changes emitted since `marks`, with paths relative to `path`.
    fn record(&self, path: &str, marks: (usize, usize, usize, u64)) -> Option<Memo> {
        let rel = |p: &str| p.strip_prefix(path).map(str::to_string);
        let mut memo = Memo::default();
        for c in self.changes.get(marks.0..)? {
            memo.changes
                .push((rel(&c.path)?, c.change.clone(), c.backward, c.forward));
        }
        for r in self.renames.get(marks.1..)? {
            memo.renames.push(RenameCandidate {
                path: rel(&r.path)?,
                ..r.clone()
            });
        }
        for a in self.ambiguous.get(marks.2..)? {
            memo.ambiguous.push(AmbiguousRename {
                path: rel(&a.path)?,
                ..a.clone()
            });
        }
        Some(memo)
    }

    /// Emits a remembered comparison at `path`.
    fn replay(&mut self, path: &str, memo: &Memo) {
        let n = memo.changes.len() + memo.renames.len() + memo.ambiguous.len();
        let units = u64::try_from(n)
            .unwrap_or(u64::MAX)
            .saturating_mul(budget::REPLAY_COST);
        if !budget::tick(units) {
            return;
        }
        for (rel, change, backward, forward) in &memo.changes {
            self.emit(&format!("{path}{rel}"), change.clone(), *backward, *forward);
        }
        for r in &memo.renames {
            self.renames.push(RenameCandidate {
                path: format!("{path}{}", r.path),
                ..r.clone()
            });
        }
        for a in &memo.ambiguous {
            self.ambiguous.push(AmbiguousRename {
                path: format!("{path}{}", a.path),
                ..a.clone()
            });
        }
    }

    fn compare_views(&mut self, path: &str, vo: &View, vn: &View) {
        match (vo.nothing, vn.nothing) {
            (true, true) => return,
            (true, false) => {
                self.emit(path, ChangeKind::BecameSatisfiable, true, false);
                return;
            }
            (false, true) => {
                self.emit(path, ChangeKind::BecameUnsatisfiable, false, true);
                return;
            }
            (false, false) => {}
        }
        let either_union = vo.union.is_some() || vn.union.is_some();
        self.compare_types(path, vo, vn, either_union);
        if either_union {
            self.compare_union(path, vo, vn);
            if vo.union.is_none() || vn.union.is_none() {
                return;
            }
        } else {
            self.compare_enum(path, vo, vn);
        }
        self.compare_all_of(path, vo, vn);

        let shared = |cat: &str| allows(&vo.types, cat) && allows(&vn.types, cat);
        if shared("object") {
            self.compare_object(path, vo, vn);
        }
        if shared("array") {
            self.compare_array(path, vo, vn);
        }
        if shared("string") {
            self.bound(path, "minLength", vo, vn, Dir::Lower);
            self.bound(path, "maxLength", vo, vn, Dir::Upper);
            self.pattern(path, vo, vn);
        }
        if shared("number") {
            self.bound(path, "minimum", vo, vn, Dir::Lower);
            self.bound(path, "exclusiveMinimum", vo, vn, Dir::Lower);
            self.bound(path, "maximum", vo, vn, Dir::Upper);
            self.bound(path, "exclusiveMaximum", vo, vn, Dir::Upper);
            self.multiple_of(path, vo, vn);
        }
        if types_intersect(&vo.types, &vn.types) {
            self.format(path, vo, vn);
        }
        self.opaque_keywords(path, vo, vn);
    }
}

#[derive(Clone, Copy)]
enum Dir {
    Upper,
    Lower,
}

enum Verdict {
    Same,
    Tightened,
    Loosened,
    Changed,
}

/// The reference of a node that is only a `$ref` (annotations aside).
fn pure_ref(value: &Value) -> Option<String> {
    let map = value.as_object()?;
    let reference = map.get("$ref")?.as_str()?;
    map.keys()
        .all(|k| k == "$ref" || is_annotation(k))
        .then(|| reference.to_string())
}

/// Identity of a schema node: the address of the node a pure `$ref` (annotations aside)
/// leads to, or of the node itself. Only used while both are alive on the stack.
fn node_id(root: &Value, value: &Value) -> usize {
    let mut current = value;
    for _ in 0..MAX_DEPTH {
        let Value::Object(map) = current else { break };
        let Some(Value::String(reference)) = map.get("$ref") else {
            break;
        };
        if !map.keys().all(|k| k == "$ref" || is_annotation(k)) {
            break;
        }
        match crate::view::resolve(root, reference) {
            Some(target) => current = target,
            None => break,
        }
    }
    std::ptr::from_ref(current) as usize
}

fn is_integral(x: f64) -> bool {
    x.is_finite() && (x - x.round()).abs() < 1e-9
}

/// Value ranges of the integer `format`s schemars emits.
fn format_range(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "int128" => (i128::MIN, i128::MAX),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        "uint128" => (0, i128::MAX),
        _ => return None,
    })
}

fn type_accepts(set: &BTreeSet<String>, t: &str) -> bool {
    set.contains(t) || (t == "integer" && set.contains("number"))
}

fn allows(types: &Option<BTreeSet<String>>, category: &str) -> bool {
    match types {
        None => true,
        Some(set) if category == "number" => set.contains("number") || set.contains("integer"),
        Some(set) => set.contains(category),
    }
}

fn types_intersect(a: &Option<BTreeSet<String>>, b: &Option<BTreeSet<String>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a.iter().any(|t| type_accepts(b, t)) || b.iter().any(|t| type_accepts(a, t))
        }
        _ => true,
    }
}

fn union_branches<'x>(v: &'x View<'_>, wrapped: &'x Option<Value>) -> Vec<(usize, &'x Value)> {
    match (&v.union, wrapped) {
        (Some((_, b)), _) => b.iter().map(|(i, b)| (*i, b.as_ref())).collect(),
        (None, Some(w)) => vec![(0, w)],
        (None, None) => Vec::new(),
    }
}

fn similarity(a: &View<'_>, b: &View<'_>) -> u32 {
    let mut score = 0;
    let name = |v: &View<'_>| {
        v.refs
            .first()
            .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
    };
    if name(a).is_some() && name(a) == name(b) {
        score += 8;
    }
    if a.types.is_some() && a.types == b.types {
        score += 4;
    }
    if let (Some(Value::Object(pa)), Some(Value::Object(pb))) =
        (a.map.get("properties"), b.map.get("properties"))
    {
        let common = pa.keys().filter(|k| pb.contains_key(*k)).count();
        score += u32::try_from(common.min(16)).unwrap_or(16);
    }
    score
}

fn required_set(map: &Map<String, Value>) -> BTreeSet<&str> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn additional<'m>(root: &Value, map: &'m Map<String, Value>) -> Additional<'m> {
    match map.get("additionalProperties") {
        None | Some(Value::Bool(true)) => Additional::Open,
        Some(Value::Bool(false)) => Additional::Closed,
        Some(schema) if is_empty_schema(root, schema) => Additional::Open,
        Some(schema) => Additional::Schema(schema),
    }
}

/// `true`, `{}` or a schema with annotations only.
fn is_empty_schema(root: &Value, schema: &Value) -> bool {
    let mut refs = Vec::new();
    match deref(root, schema, &mut refs) {
        Resolved::Bool(b) => b,
        Resolved::Map(m) => m.keys().all(|k| is_annotation(k)),
    }
}

/// `(tuple positions, schema for the remaining items)` in 2020-12 or draft-07 spelling.
fn tuple_parts(map: &Map<String, Value>) -> (&[Value], Option<&Value>) {
    match (map.get("prefixItems"), map.get("items")) {
        (Some(Value::Array(prefix)), rest) => (prefix.as_slice(), rest),
        (None, Some(Value::Array(prefix))) => (prefix.as_slice(), map.get("additionalItems")),
        (_, rest) => (&[], rest),
    }
}
