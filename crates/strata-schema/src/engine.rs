//! The recursive comparison that produces path-level changes and verdicts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::budget;
use crate::canonical::canonical_bytes;
use crate::delta::{
    AmbiguousRename, ChangeKind, ContentModel, DiffOptions, OpenContentPolicy, PathChange,
    RenameCandidate,
};
use crate::view::{
    build_view, deref, escape_segment, fingerprint, is_annotation, is_interpreted, Fingerprints,
    Resolved, View, MAX_DEPTH,
};

static TRUE_SCHEMA: Value = Value::Bool(true);

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

    fn compare_types(&mut self, path: &str, vo: &View, vn: &View, union_level: bool) {
        let mut covered_null = false;
        if !union_level {
            let list = |s: &BTreeSet<String>| Some(s.iter().cloned().collect::<Vec<_>>());
            match (&vo.types, &vn.types) {
                (None, None) => {}
                (None, Some(n)) => {
                    covered_null = true;
                    self.emit(
                        path,
                        ChangeKind::TypeNarrowed {
                            from: None,
                            to: list(n),
                        },
                        false,
                        true,
                    );
                }
                (Some(o), None) => {
                    covered_null = true;
                    self.emit(
                        path,
                        ChangeKind::TypeWidened {
                            from: list(o),
                            to: None,
                        },
                        true,
                        false,
                    );
                }
                (Some(o), Some(n)) => {
                    let new_reads_old = o.iter().all(|t| type_accepts(n, t));
                    let old_reads_new = n.iter().all(|t| type_accepts(o, t));
                    let (from, to) = (list(o), list(n));
                    match (new_reads_old, old_reads_new) {
                        (true, true) => {}
                        (true, false) => {
                            self.emit(path, ChangeKind::TypeWidened { from, to }, true, false)
                        }
                        (false, true) => {
                            self.emit(path, ChangeKind::TypeNarrowed { from, to }, false, true)
                        }
                        (false, false) => {
                            self.emit(path, ChangeKind::TypeChanged { from, to }, false, false)
                        }
                    }
                }
            }
        }
        if vo.null != vn.null && !covered_null {
            if vn.null {
                self.emit(path, ChangeKind::NullAllowed, true, false);
            } else {
                self.emit(path, ChangeKind::NullDisallowed, false, true);
            }
        }
    }

    fn compare_enum(&mut self, path: &str, vo: &View, vn: &View) {
        match (&vo.enum_values, &vn.enum_values) {
            (None, None) => {}
            (None, Some(n)) => self.emit(
                path,
                ChangeKind::EnumConstraintAdded { values: n.clone() },
                false,
                true,
            ),
            (Some(o), None) => self.emit(
                path,
                ChangeKind::EnumConstraintRemoved { values: o.clone() },
                true,
                false,
            ),
            (Some(o), Some(n)) => {
                let ok: BTreeSet<Vec<u8>> = o.iter().map(canonical_bytes).collect();
                let nk: BTreeSet<Vec<u8>> = n.iter().map(canonical_bytes).collect();
                let added: Vec<Value> = n
                    .iter()
                    .filter(|v| !ok.contains(&canonical_bytes(v)))
                    .cloned()
                    .collect();
                let removed: Vec<Value> = o
                    .iter()
                    .filter(|v| !nk.contains(&canonical_bytes(v)))
                    .cloned()
                    .collect();
                if !added.is_empty() {
                    self.emit(
                        path,
                        ChangeKind::EnumValuesAdded { values: added },
                        true,
                        false,
                    );
                }
                if !removed.is_empty() {
                    self.emit(
                        path,
                        ChangeKind::EnumValuesRemoved { values: removed },
                        false,
                        true,
                    );
                }
            }
        }
    }

    fn compare_union(&mut self, path: &str, vo: &View<'_>, vn: &View<'_>) {
        let kind_o = vo.union.as_ref().map(|(k, _)| *k);
        let kind_n = vn.union.as_ref().map(|(k, _)| *k);
        let Some(kind_any) = kind_n.or(kind_o) else {
            return;
        };
        let kw_o = kind_o.unwrap_or(kind_any).keyword();
        let kw_n = kind_n.unwrap_or(kind_any).keyword();
        // A non-union side takes part as a single branch.
        let wrapped_o = vo.union.is_none().then(|| vo.as_schema());
        let wrapped_n = vn.union.is_none().then(|| vn.as_schema());
        let bo = union_branches(vo, &wrapped_o);
        let bn = union_branches(vn, &wrapped_n);
        self.compare_branch_lists(
            path,
            (&bo, kw_o),
            (&bn, kw_n),
            |index| (ChangeKind::UnionBranchRemoved { index }, false, true),
            |index| (ChangeKind::UnionBranchAdded { index }, true, false),
        );
        if let (Some(o), Some(n)) = (kind_o, kind_n) {
            if o != n {
                // oneOf → anyOf accepts more (exclusivity dropped); anyOf → oneOf fewer.
                let widening = n.keyword() == "anyOf";
                self.emit(
                    path,
                    ChangeKind::UnionKindChanged {
                        from: o.keyword().into(),
                        to: n.keyword().into(),
                    },
                    widening,
                    !widening,
                );
            }
        }
    }

    fn compare_all_of<'b>(&mut self, path: &str, vo: &'b View<'_>, vn: &'b View<'_>) {
        let list = |v: &'b View<'_>| -> Vec<(usize, &'b Value)> {
            match v.map.get("allOf") {
                Some(Value::Array(items)) => items.iter().enumerate().collect(),
                _ => Vec::new(),
            }
        };
        let bo = list(vo);
        let bn = list(vn);
        if bo.is_empty() && bn.is_empty() {
            return;
        }
        self.compare_branch_lists(
            path,
            (&bo, "allOf"),
            (&bn, "allOf"),
            |index| (ChangeKind::AllOfBranchRemoved { index }, true, false),
            |index| (ChangeKind::AllOfBranchAdded { index }, false, true),
        );
    }

    /// Pairs the old branches of a union or `allOf` with the new ones, recurses into
    /// paired branches that are not identical, and reports the unpaired ones with the
    /// change kinds (and backward/forward verdicts) `removed` and `added` give.
    fn compare_branch_lists(
        &mut self,
        path: &str,
        (bo, kw_o): (&[(usize, &Value)], &str),
        (bn, kw_n): (&[(usize, &Value)], &str),
        removed: impl Fn(usize) -> (ChangeKind, bool, bool),
        added: impl Fn(usize) -> (ChangeKind, bool, bool),
    ) {
        let pairs = self.match_branches(bo, bn);
        let mut used_new = vec![false; bn.len()];
        for (i, (oi, ob)) in bo.iter().enumerate() {
            match pairs.get(i).copied().flatten() {
                Some((j, exact)) => {
                    if let Some(flag) = used_new.get_mut(j) {
                        *flag = true;
                    }
                    if !exact {
                        if let Some((nj, nb)) = bn.get(j) {
                            let p = suffix_path(path, &format!("|{kw_n}[{nj}]"));
                            self.compare(&p, ob, nb);
                        }
                    }
                }
                None => {
                    let p = suffix_path(path, &format!("|{kw_o}[{oi}]"));
                    let (change, backward, forward) = removed(*oi);
                    self.emit(&p, change, backward, forward);
                }
            }
        }
        for (j, (nj, _)) in bn.iter().enumerate() {
            if !used_new.get(j).copied().unwrap_or(true) {
                let p = suffix_path(path, &format!("|{kw_n}[{nj}]"));
                let (change, backward, forward) = added(*nj);
                self.emit(&p, change, backward, forward);
            }
        }
    }

    /// Pairs old branches with new ones: identical shapes first, then the most similar
    /// (same `$ref` name, same types, shared property names). `(new position, exact)`.
    fn match_branches(
        &mut self,
        old: &[(usize, &Value)],
        new: &[(usize, &Value)],
    ) -> Vec<Option<(usize, bool)>> {
        let fo: Vec<Vec<u8>> = old
            .iter()
            .map(|(_, b)| fingerprint(self.old_root, b, &mut self.old_prints))
            .collect();
        let fnew: Vec<Vec<u8>> = new
            .iter()
            .map(|(_, b)| fingerprint(self.new_root, b, &mut self.new_prints))
            .collect();
        let mut pairs: Vec<Option<(usize, bool)>> = vec![None; old.len()];
        let mut used = vec![false; new.len()];
        for (i, f) in fo.iter().enumerate() {
            if let Some(j) = (0..new.len()).find(|&j| !used[j] && fnew.get(j) == Some(f)) {
                used[j] = true;
                pairs[i] = Some((j, true));
            }
        }
        let vo: Vec<View> = old
            .iter()
            .map(|(_, b)| build_view(self.old_root, b))
            .collect();
        let vn: Vec<View> = new
            .iter()
            .map(|(_, b)| build_view(self.new_root, b))
            .collect();
        for i in 0..old.len() {
            if pairs[i].is_some() {
                continue;
            }
            let mut best: Option<(usize, u32)> = None;
            for j in 0..new.len() {
                if used[j] {
                    continue;
                }
                let s = similarity(&vo[i], &vn[j]);
                if s >= 4 && best.is_none_or(|(_, bs)| s > bs) {
                    best = Some((j, s));
                }
            }
            if let Some((j, _)) = best {
                used[j] = true;
                pairs[i] = Some((j, false));
            }
        }
        pairs
    }

    fn compare_object(&mut self, path: &str, vo: &View, vn: &View) {
        let empty = Map::new();
        let props_o = vo
            .map
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let props_n = vn
            .map
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let req_o = required_set(&vo.map);
        let req_n = required_set(&vn.map);
        let add_o = additional(self.old_root, &vo.map);
        let add_n = additional(self.new_root, &vn.map);
        let is_root = path == "/" && self.depth == 1;
        let strict = self.opts.open_content == OpenContentPolicy::Strict;

        let added: Vec<&String> = props_n
            .keys()
            .filter(|k| !props_o.contains_key(*k))
            .collect();
        let removed: Vec<&String> = props_o
            .keys()
            .filter(|k| !props_n.contains_key(*k))
            .collect();

        // Rename candidates: removed and added properties of identical shape.
        if !added.is_empty() && !removed.is_empty() {
            let mut groups: BTreeMap<Vec<u8>, (Vec<String>, Vec<String>)> = BTreeMap::new();
            for r in &removed {
                if let Some(s) = props_o.get(*r) {
                    groups
                        .entry(fingerprint(self.old_root, s, &mut self.old_prints))
                        .or_default()
                        .0
                        .push((*r).clone());
                }
            }
            for a in &added {
                if let Some(s) = props_n.get(*a) {
                    let print = fingerprint(self.new_root, s, &mut self.new_prints);
                    if let Some(g) = groups.get_mut(&print) {
                        g.1.push((*a).clone());
                    }
                }
            }
            for (_, (from, to)) in groups {
                match (from.as_slice(), to.as_slice()) {
                    (_, []) => {}
                    ([f], [t]) => self.renames.push(RenameCandidate {
                        path: path.to_string(),
                        from: f.clone(),
                        to: t.clone(),
                    }),
                    _ => self.ambiguous.push(AmbiguousRename {
                        path: path.to_string(),
                        removed: from,
                        added: to,
                    }),
                }
            }
        }

        let saved_field = self.top_field.clone();
        for name in &added {
            let Some(schema) = props_n.get(*name) else {
                continue;
            };
            let required = req_n.contains(name.as_str());
            let backward = !required
                && match &add_o {
                    Additional::Closed => true,
                    Additional::Open => !strict || is_empty_schema(self.new_root, schema),
                    Additional::Schema(s) => {
                        self.accepts_all(self.old_root, s, self.new_root, schema)
                    }
                };
            let forward = match &add_o {
                Additional::Closed => false,
                Additional::Open => true,
                Additional::Schema(s) => self.accepts_all(self.new_root, schema, self.old_root, s),
            };
            if is_root {
                self.top_field = Some((*name).clone());
            }
            self.emit(
                &child_path(path, name),
                ChangeKind::PropertyAdded { required },
                backward,
                forward,
            );
        }
        for name in &removed {
            let Some(schema) = props_o.get(*name) else {
                continue;
            };
            let was_required = req_o.contains(name.as_str());
            let backward = match &add_n {
                Additional::Closed => false,
                Additional::Open => true,
                Additional::Schema(s) => self.accepts_all(self.old_root, schema, self.new_root, s),
            };
            let forward = !was_required
                && match &add_n {
                    Additional::Closed => true,
                    Additional::Open => !strict || is_empty_schema(self.old_root, schema),
                    Additional::Schema(s) => {
                        self.accepts_all(self.new_root, s, self.old_root, schema)
                    }
                };
            if is_root {
                self.top_field = Some((*name).clone());
            }
            self.emit(
                &child_path(path, name),
                ChangeKind::PropertyRemoved { was_required },
                backward,
                forward,
            );
        }
        // Required-ness of properties that exist on both sides (or are only listed).
        let mut names: BTreeSet<&str> = req_o.symmetric_difference(&req_n).copied().collect();
        names.retain(|n| !props_n.contains_key(*n) || props_o.contains_key(*n));
        names.retain(|n| !props_o.contains_key(*n) || props_n.contains_key(*n));
        for name in names {
            if is_root {
                self.top_field = Some(name.to_string());
            }
            if req_n.contains(name) {
                self.emit(
                    &child_path(path, name),
                    ChangeKind::RequiredAdded,
                    false,
                    true,
                );
            } else {
                self.emit(
                    &child_path(path, name),
                    ChangeKind::RequiredRemoved,
                    true,
                    false,
                );
            }
        }
        self.top_field = saved_field.clone();

        for (name, old_schema) in props_o {
            if let Some(new_schema) = props_n.get(name) {
                if is_root {
                    self.top_field = Some(name.clone());
                }
                self.compare(&child_path(path, name), old_schema, new_schema);
            }
        }
        self.top_field = saved_field;

        // The content model itself.
        match (&add_o, &add_n) {
            (Additional::Open, Additional::Open) | (Additional::Closed, Additional::Closed) => {}
            (from, Additional::Closed) => self.emit(
                path,
                ChangeKind::AdditionalPropertiesClosed { from: from.model() },
                false,
                true,
            ),
            (Additional::Closed, to) => self.emit(
                path,
                ChangeKind::AdditionalPropertiesOpened { to: to.model() },
                true,
                false,
            ),
            (Additional::Open, Additional::Schema(_)) => self.emit(
                path,
                ChangeKind::AdditionalPropertiesRestricted,
                false,
                true,
            ),
            (Additional::Schema(_), Additional::Open) => {
                self.emit(path, ChangeKind::AdditionalPropertiesRelaxed, true, false)
            }
            (Additional::Schema(a), Additional::Schema(b)) => {
                self.compare(&suffix_path(path, "{}"), a, b)
            }
        }
        self.bound(path, "minProperties", vo, vn, Dir::Lower);
        self.bound(path, "maxProperties", vo, vn, Dir::Upper);
    }

    fn compare_array(&mut self, path: &str, vo: &View, vn: &View) {
        let (prefix_o, rest_o) = tuple_parts(&vo.map);
        let (prefix_n, rest_n) = tuple_parts(&vn.map);
        let len = prefix_o.len().max(prefix_n.len());
        for i in 0..len {
            let o = prefix_o.get(i).or(rest_o).unwrap_or(&TRUE_SCHEMA);
            let n = prefix_n.get(i).or(rest_n).unwrap_or(&TRUE_SCHEMA);
            self.compare(&suffix_path(path, &format!("[{i}]")), o, n);
        }
        if rest_o.is_some() || rest_n.is_some() {
            self.compare(
                &suffix_path(path, "[]"),
                rest_o.unwrap_or(&TRUE_SCHEMA),
                rest_n.unwrap_or(&TRUE_SCHEMA),
            );
        }
        self.bound(path, "minItems", vo, vn, Dir::Lower);
        self.bound(path, "maxItems", vo, vn, Dir::Upper);
        self.bound(path, "minContains", vo, vn, Dir::Lower);
        self.bound(path, "maxContains", vo, vn, Dir::Upper);
        let unique = |v: &View| v.map.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(vo), unique(vn)) {
            (false, true) => self.emit(
                path,
                ChangeKind::ConstraintTightened {
                    keyword: "uniqueItems".into(),
                    old: vo.map.get("uniqueItems").cloned(),
                    new: Some(Value::Bool(true)),
                },
                false,
                true,
            ),
            (true, false) => self.emit(
                path,
                ChangeKind::ConstraintLoosened {
                    keyword: "uniqueItems".into(),
                    old: Some(Value::Bool(true)),
                    new: vn.map.get("uniqueItems").cloned(),
                },
                true,
                false,
            ),
            _ => {}
        }
    }

    fn constraint(&mut self, path: &str, keyword: &str, vo: &View, vn: &View, verdict: Verdict) {
        if matches!(verdict, Verdict::Same) {
            return;
        }
        let old = vo.map.get(keyword).cloned();
        let new = vn.map.get(keyword).cloned();
        let keyword = keyword.to_string();
        match verdict {
            Verdict::Same => {}
            Verdict::Tightened => self.emit(
                path,
                ChangeKind::ConstraintTightened { keyword, old, new },
                false,
                true,
            ),
            Verdict::Loosened => self.emit(
                path,
                ChangeKind::ConstraintLoosened { keyword, old, new },
                true,
                false,
            ),
            Verdict::Changed => self.emit(
                path,
                ChangeKind::ConstraintChanged { keyword, old, new },
                false,
                false,
            ),
        }
    }

    fn bound(&mut self, path: &str, keyword: &str, vo: &View, vn: &View, dir: Dir) {
        let verdict = match (vo.map.get(keyword), vn.map.get(keyword)) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if x == y => Verdict::Same,
                (Some(x), Some(y)) => {
                    let tighter = match dir {
                        Dir::Upper => y < x,
                        Dir::Lower => y > x,
                    };
                    if tighter {
                        Verdict::Tightened
                    } else {
                        Verdict::Loosened
                    }
                }
                // Draft-04 boolean exclusive bounds and other oddities.
                _ if a == b => Verdict::Same,
                _ => Verdict::Changed,
            },
        };
        self.constraint(path, keyword, vo, vn, verdict);
    }

    fn multiple_of(&mut self, path: &str, vo: &View, vn: &View) {
        let verdict = match (vo.map.get("multipleOf"), vn.map.get("multipleOf")) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if x == y => Verdict::Same,
                // Every multiple of x is a multiple of y when y divides x.
                (Some(x), Some(y)) if y != 0.0 && is_integral(x / y) => Verdict::Loosened,
                (Some(x), Some(y)) if x != 0.0 && is_integral(y / x) => Verdict::Tightened,
                _ => Verdict::Changed,
            },
        };
        self.constraint(path, "multipleOf", vo, vn, verdict);
    }

    fn pattern(&mut self, path: &str, vo: &View, vn: &View) {
        let verdict = match (vo.map.get("pattern"), vn.map.get("pattern")) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) if a == b => Verdict::Same,
            _ => Verdict::Changed,
        };
        self.constraint(path, "pattern", vo, vn, verdict);
    }

    fn format(&mut self, path: &str, vo: &View, vn: &View) {
        let fo = vo.map.get("format");
        let fnew = vn.map.get("format");
        let verdict = match (fo, fnew) {
            (None, None) => Verdict::Same,
            (Some(a), Some(b)) if a == b => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => {
                match (
                    a.as_str().and_then(format_range),
                    b.as_str().and_then(format_range),
                ) {
                    (Some((lo_a, hi_a)), Some((lo_b, hi_b))) => {
                        if lo_b <= lo_a && hi_b >= hi_a {
                            Verdict::Loosened
                        } else if lo_b >= lo_a && hi_b <= hi_a {
                            Verdict::Tightened
                        } else {
                            Verdict::Changed
                        }
                    }
                    _ => match (a.as_str(), b.as_str()) {
                        (Some("float"), Some("double")) => Verdict::Loosened,
                        (Some("double"), Some("float")) => Verdict::Tightened,
                        _ => Verdict::Changed,
                    },
                }
            }
        };
        self.constraint(path, "format", vo, vn, verdict);
    }

    fn opaque_keywords(&mut self, path: &str, vo: &View, vn: &View) {
        let only_new = vn.map.keys().filter(|k| !vo.map.contains_key(k.as_str()));
        for k in vo.map.keys().chain(only_new) {
            if is_annotation(k) || is_interpreted(k) {
                continue;
            }
            let a = vo.map.get(k.as_str()).map(canonical_bytes);
            let b = vn.map.get(k.as_str()).map(canonical_bytes);
            if a != b {
                self.emit(
                    path,
                    ChangeKind::KeywordChanged { keyword: k.clone() },
                    false,
                    false,
                );
            }
        }
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
