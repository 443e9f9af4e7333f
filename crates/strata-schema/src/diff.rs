//! `diff`: validation of the two documents, the engine run, and the seed summary.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

use crate::budget::{Scope, MAX_DIFF_WORK};
use crate::canonical::schema_hash;
use crate::delta::{ChangeKind, Compatibility, DeltaKind, DiffOptions, FieldChange, SchemaDelta};
use crate::engine::{child_path, Engine};
use crate::error::{printable, SchemaError, Side};
use crate::view::{deref, first_bad_ref, Resolved};

/// Diffs two schemas of `collection` with the default [`DiffOptions`].
///
/// `old` is the persisted baseline, `new` the freshly derived schema. Both must be object
/// schemas at the root (a root `$ref` is followed) and every `$ref` must be a local
/// reference that resolves (`#/$defs/…`, `#/definitions/…`, `#`).
pub fn diff(collection: &str, old: &Value, new: &Value) -> Result<SchemaDelta, SchemaError> {
    diff_with(collection, old, new, &DiffOptions::default())
}

/// [`diff`] with explicit options.
pub fn diff_with(
    collection: &str,
    old: &Value,
    new: &Value,
    options: &DiffOptions,
) -> Result<SchemaDelta, SchemaError> {
    let old_props = check_document(collection, Side::Old, old)?;
    let new_props = check_document(collection, Side::New, new)?;

    let budget = Scope::enter(MAX_DIFF_WORK);
    let mut engine = Engine::new(old, new, *options);
    engine.compare("/", old, new);
    if budget.spent() {
        return Err(SchemaError::TooComplex {
            collection: printable(collection),
            limit: MAX_DIFF_WORK,
        });
    }
    drop(budget);

    let added: Vec<String> = new_props.difference(&old_props).cloned().collect();
    let removed: Vec<String> = old_props.difference(&new_props).cloned().collect();
    // Per top-level field: (its required-ness flipped, its shape changed). One pass over
    // the changes (linear), not one per field.
    let mut per_field: HashMap<&str, (bool, bool)> = HashMap::new();
    for c in &engine.changes {
        let Some(field) = c.field.as_deref() else {
            continue;
        };
        let flip = matches!(
            c.change,
            ChangeKind::RequiredAdded | ChangeKind::RequiredRemoved
        );
        let own = flip && is_child_of_root(&c.path, field);
        let entry = per_field.entry(field).or_default();
        if own {
            entry.0 = true;
        } else {
            entry.1 = true;
        }
    }
    let changed: Vec<FieldChange> = old_props
        .intersection(&new_props)
        .filter_map(|field| {
            let &(required_changed, shape_changed) = per_field.get(field.as_str())?;
            (required_changed || shape_changed).then(|| FieldChange {
                field: field.clone(),
                required_changed,
                shape_changed,
            })
        })
        .collect();

    let paths = engine.changes;
    let added_set: HashSet<&str> = added.iter().map(String::as_str).collect();
    let kind = if paths.is_empty() {
        DeltaKind::None
    } else if paths.iter().all(|c| {
        matches!(c.change, ChangeKind::PropertyAdded { required: false })
            && c.field
                .as_deref()
                .is_some_and(|f| is_child_of_root(&c.path, f) && added_set.contains(f))
    }) {
        DeltaKind::Additive
    } else {
        DeltaKind::NonAdditive
    };

    let mut reasons = Vec::new();
    for c in &paths {
        if !c.backward {
            reasons.push(format!("not backward compatible: {}: {}", c.path, c.change));
        }
        if !c.forward {
            reasons.push(format!("not forward compatible: {}: {}", c.path, c.change));
        }
    }
    for r in &engine.renames {
        reasons.push(format!(
            "possible rename at {}: `{}` -> `{}` (identical shape); records keep their data \
             under `{}`: add an upcast step that moves it, or confirm the removal",
            r.path, r.from, r.to, r.from
        ));
    }
    for a in &engine.ambiguous {
        reasons.push(format!(
            "ambiguous rename at {}: removed [{}] and added [{}] share one shape; \
             add upcast steps that move the data explicitly",
            a.path,
            a.removed.join(", "),
            a.added.join(", ")
        ));
    }
    let no_renames = engine.renames.is_empty() && engine.ambiguous.is_empty();
    let backward = no_renames && paths.iter().all(|c| c.backward);
    let forward = no_renames && paths.iter().all(|c| c.forward);

    Ok(SchemaDelta {
        collection: collection.to_string(),
        kind,
        added,
        removed,
        changed,
        paths,
        renames: engine.renames,
        ambiguous_renames: engine.ambiguous,
        compatibility: Compatibility {
            backward,
            forward,
            level: Compatibility::level_of(backward, forward),
            reasons,
        },
        old_hash: schema_hash(old),
        new_hash: schema_hash(new),
    })
}

/// True when `path` is the path of top-level property `field` (`child_path("/", field)`).
fn is_child_of_root(path: &str, field: &str) -> bool {
    path == child_path("/", field)
}

/// Checks references and the root shape; returns the root's property names.
fn check_document(
    collection: &str,
    side: Side,
    doc: &Value,
) -> Result<BTreeSet<String>, SchemaError> {
    if let Some((path, reference, local)) = first_bad_ref(doc) {
        let collection = printable(collection);
        return Err(if local {
            SchemaError::DanglingRef {
                collection,
                side,
                path,
                reference,
            }
        } else {
            SchemaError::UnsupportedRef {
                collection,
                side,
                path,
                reference,
            }
        });
    }
    let not_object = || SchemaError::NotObjectSchema {
        collection: printable(collection),
        side,
        path: "/".into(),
    };
    let mut refs = Vec::new();
    let Resolved::Map(map) = deref(doc, doc, &mut refs) else {
        return Err(not_object());
    };
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(list)) => list.iter().any(|t| t == "object"),
        _ => false,
    };
    let properties = map.get("properties");
    if !(typed_object || properties.is_some_and(Value::is_object)) {
        return Err(not_object());
    }
    Ok(properties
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default())
}
