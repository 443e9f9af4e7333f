//! Bad input gets a clear error naming the collection and location.

use serde_json::json;
use strata_schema::{diff, SchemaError, Side};

#[test]
fn non_object_root_is_rejected_naming_collection_and_side() {
    let old = json!({"type": "object", "properties": {}});
    let new = json!({"type": "string"});
    let err = diff("invoices", &old, &new).unwrap_err();
    assert!(matches!(
        &err,
        SchemaError::NotObjectSchema { collection, side: Side::New, path }
            if collection == "invoices" && path == "/"
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("`invoices`") && msg.contains("new schema"),
        "{msg}"
    );
    assert!(msg.contains("derive it from a struct"), "{msg}");
}

#[test]
fn boolean_root_is_rejected() {
    let err = diff("c", &json!(true), &json!({"type": "object"})).unwrap_err();
    assert!(matches!(
        err,
        SchemaError::NotObjectSchema {
            side: Side::Old,
            ..
        }
    ));
}

#[test]
fn root_ref_to_an_object_is_accepted() {
    let s = json!({"$ref": "#/$defs/Inv", "$defs": {"Inv": {"type": "object",
        "properties": {"id": {"type": "string"}}}}});
    let d = diff("c", &s, &s).unwrap();
    assert!(d.is_none());
}

#[test]
fn dangling_ref_is_rejected_with_its_location() {
    let old = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let new = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}},
        "$defs": {}});
    let err = diff("orders", &old, &new).unwrap_err();
    assert!(matches!(
        &err,
        SchemaError::DanglingRef { collection, side: Side::New, path, reference }
            if collection == "orders" && path == "/properties/a" && reference == "#/$defs/Missing"
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("`#/$defs/Missing`") && msg.contains("`orders`"),
        "{msg}"
    );
    assert!(msg.ends_with("fix the reference"), "{msg}");
}

#[test]
fn dangling_ref_in_an_unused_definition_is_still_rejected() {
    let s = json!({"type": "object", "properties": {},
        "$defs": {"Unused": {"$ref": "#/$defs/Nope"}}});
    let err = diff("c", &s, &s).unwrap_err();
    assert!(matches!(
        err,
        SchemaError::DanglingRef {
            side: Side::Old,
            ..
        }
    ));
}

#[test]
fn remote_ref_is_unsupported() {
    let s = json!({"type": "object", "properties": {"a": {"$ref": "https://x/y.json"}}});
    let err = diff("c", &s, &s).unwrap_err();
    assert!(matches!(err, SchemaError::UnsupportedRef { .. }));
    assert!(err.to_string().contains("only local references"));
}

#[test]
fn collection_names_with_control_characters_are_escaped() {
    let err = diff("a\nb", &json!(1), &json!(1)).unwrap_err();
    assert!(err.to_string().contains("`a\\nb`"));
}
