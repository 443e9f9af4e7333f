//! The seed's delta cases: none / additive / non-additive, added, removed, changed.

use serde_json::{json, Value};
use strata_schema::{diff, ChangeKind, DeltaKind, FieldChange};

fn base() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "amount": { "type": "number" }
        },
        "required": ["id"]
    })
}

#[test]
fn identical_schemas_are_none() {
    let d = diff("invoices", &base(), &base()).unwrap();
    assert_eq!(d.kind, DeltaKind::None);
    assert!(d.added.is_empty() && d.removed.is_empty() && d.changed.is_empty());
    assert!(d.paths.is_empty());
    assert!(d.compatibility.backward && d.compatibility.forward);
    assert_eq!(d.old_hash, d.new_hash);
}

#[test]
fn annotation_only_edit_is_none_but_changes_hash() {
    let mut new = base();
    new["properties"]["id"]["description"] = json!("invoice id");
    new["title"] = json!("Invoice");
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::None);
    assert_ne!(d.old_hash, d.new_hash);
}

#[test]
fn new_optional_field_is_additive() {
    let mut new = base();
    new["properties"]["note"] = json!({ "type": "string" });
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::Additive);
    assert_eq!(d.added, vec!["note"]);
    assert!(d.removed.is_empty() && d.changed.is_empty());
    assert_eq!(d.paths.len(), 1);
    assert_eq!(d.paths[0].path, "/note");
    assert_eq!(d.paths[0].field.as_deref(), Some("note"));
    assert_eq!(
        d.paths[0].change,
        ChangeKind::PropertyAdded { required: false }
    );
    assert!(d.compatibility.backward && d.compatibility.forward);
}

#[test]
fn new_required_field_is_non_additive() {
    let mut new = base();
    new["properties"]["currency"] = json!({ "type": "string" });
    new["required"] = json!(["id", "currency"]);
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.added, vec!["currency"]);
    assert!(d.changed.is_empty());
    assert!(!d.compatibility.backward);
    assert!(d.compatibility.forward);
}

#[test]
fn removed_field_is_non_additive() {
    let mut new = base();
    new["properties"].as_object_mut().unwrap().remove("amount");
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.removed, vec!["amount"]);
    assert!(d.added.is_empty() && d.changed.is_empty());
    assert_eq!(
        d.paths[0].change,
        ChangeKind::PropertyRemoved {
            was_required: false
        }
    );
    assert!(d.renames.is_empty() && d.ambiguous_renames.is_empty());
}

#[test]
fn type_change_is_a_shape_change() {
    let mut new = base();
    new["properties"]["amount"] = json!({ "type": "string" });
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(
        d.changed,
        vec![FieldChange {
            field: "amount".into(),
            required_changed: false,
            shape_changed: true
        }]
    );
    assert!(!d.compatibility.backward && !d.compatibility.forward);
}

#[test]
fn made_required_flips_required_only() {
    let mut new = base();
    new["required"] = json!(["id", "amount"]);
    let d = diff("invoices", &base(), &new).unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(
        d.changed,
        vec![FieldChange {
            field: "amount".into(),
            required_changed: true,
            shape_changed: false
        }]
    );
    assert_eq!(d.paths.len(), 1);
    assert_eq!(d.paths[0].change, ChangeKind::RequiredAdded);
    assert!(!d.compatibility.backward && d.compatibility.forward);
}

#[test]
fn nested_required_flip_is_a_shape_change_of_the_outer_field() {
    let old = json!({"type": "object", "properties": {
        "addr": {"type": "object", "properties": {"zip": {"type": "string"}}}}});
    let new = json!({"type": "object", "properties": {
        "addr": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}}});
    let d = diff("c", &old, &new).unwrap();
    assert_eq!(
        d.changed,
        vec![FieldChange {
            field: "addr".into(),
            required_changed: false,
            shape_changed: true
        }]
    );
    assert_eq!(d.paths[0].path, "/addr/zip");
    assert_eq!(d.paths[0].field.as_deref(), Some("addr"));
}

#[test]
fn removed_and_added_with_identical_shape_is_a_rename_candidate() {
    let old = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "total": {"type": "number", "description": "gross"}}});
    let new = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "amount": {"type": "number"}}});
    let d = diff("invoices", &old, &new).unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.added, vec!["amount"]);
    assert_eq!(d.removed, vec!["total"]);
    assert_eq!(d.renames.len(), 1);
    assert_eq!(d.renames[0].path, "/");
    assert_eq!(d.renames[0].from, "total");
    assert_eq!(d.renames[0].to, "amount");
    assert!(d.ambiguous_renames.is_empty());
    // Each path change alone is harmless under an open model, but a rename is never safe.
    assert!(d.paths.iter().all(|p| p.backward && p.forward));
    assert!(!d.compatibility.backward && !d.compatibility.forward);
    assert!(d
        .compatibility
        .reasons
        .iter()
        .any(|r| r.contains("possible rename")));
}

#[test]
fn different_shapes_are_not_rename_candidates() {
    let old = json!({"type": "object", "properties": {"total": {"type": "number"}}});
    let new = json!({"type": "object", "properties": {"label": {"type": "string"}}});
    let d = diff("invoices", &old, &new).unwrap();
    assert!(d.renames.is_empty() && d.ambiguous_renames.is_empty());
    assert!(d.compatibility.backward && d.compatibility.forward);
}

#[test]
fn two_removed_two_added_of_same_shape_is_ambiguous() {
    let old = json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string"}, "keep": {"type": "integer"}}});
    let new = json!({"type": "object", "properties": {
        "c": {"type": "string"}, "d": {"type": "string"}, "keep": {"type": "integer"}}});
    let d = diff("c", &old, &new).unwrap();
    assert!(d.renames.is_empty(), "must not guess: {:?}", d.renames);
    assert_eq!(d.ambiguous_renames.len(), 1);
    let a = &d.ambiguous_renames[0];
    assert_eq!(a.path, "/");
    assert_eq!(a.removed, vec!["a", "b"]);
    assert_eq!(a.added, vec!["c", "d"]);
    assert!(!d.compatibility.backward && !d.compatibility.forward);
}

#[test]
fn renames_are_found_below_the_top_level_too() {
    let old = json!({"type": "object", "properties": {"addr": {"type": "object",
        "properties": {"zip": {"type": "string", "maxLength": 10}}}}});
    let new = json!({"type": "object", "properties": {"addr": {"type": "object",
        "properties": {"postcode": {"type": "string", "maxLength": 10}}}}});
    let d = diff("c", &old, &new).unwrap();
    assert_eq!(d.renames.len(), 1);
    assert_eq!(d.renames[0].path, "/addr");
    assert_eq!(
        (d.renames[0].from.as_str(), d.renames[0].to.as_str()),
        ("zip", "postcode")
    );
}

#[test]
fn touches_any_reports_fields_for_a_scoped_lock() {
    let mut new = base();
    new["properties"]["note"] = json!({ "type": "string" });
    let d = diff("invoices", &base(), &new).unwrap();
    assert!(d.touches_any(&["note"]));
    assert!(!d.touches_any(&["id", "amount"]));
}
