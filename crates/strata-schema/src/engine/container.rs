//! Objects (properties, required, additional properties) and arrays (items, tuples).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::delta::{AmbiguousRename, ChangeKind, OpenContentPolicy, RenameCandidate};
use crate::view::{fingerprint, View};

use super::{
    additional, child_path, is_empty_schema, required_set, suffix_path, tuple_parts, Additional,
    Dir, Engine,
};

static TRUE_SCHEMA: Value = Value::Bool(true);

impl Engine<'_> {
    pub(super) fn compare_object(&mut self, path: &str, vo: &View, vn: &View) {
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
                if !crate::budget::tick(1) {
                    return;
                }
                if let Some(s) = props_o.get(*r) {
                    groups
                        .entry(fingerprint(self.old_root, s, &mut self.old_prints))
                        .or_default()
                        .0
                        .push((*r).clone());
                }
            }
            for a in &added {
                if !crate::budget::tick(1) {
                    return;
                }
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
            if !crate::budget::tick(1) {
                return;
            }
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
            if !crate::budget::tick(1) {
                return;
            }
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
            if !crate::budget::tick(1) {
                return;
            }
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

    pub(super) fn compare_array(&mut self, path: &str, vo: &View, vn: &View) {
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
}
