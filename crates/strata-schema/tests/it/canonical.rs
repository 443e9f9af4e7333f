//! Canonical bytes, hashes and the persisted record.

use serde_json::{json, Value};
use strata_schema::{canonical_bytes, canonicalize, schema_hash, PersistedSchema, SchemaError};

#[test]
fn key_order_does_not_change_bytes_or_hash() {
    let a: Value = serde_json::from_str(r#"{"b":{"y":1,"x":[3,1]},"a":"s"}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a":"s","b":{"x":[3,1],"y":1}}"#).unwrap();
    assert_eq!(
        canonical_bytes(&a),
        br#"{"a":"s","b":{"x":[3,1],"y":1}}"#.to_vec()
    );
    assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
    assert_eq!(schema_hash(&a), schema_hash(&b));
    assert_eq!(schema_hash(&a).len(), 64);
    assert!(schema_hash(&a)
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
}

#[test]
fn array_order_is_preserved_and_matters() {
    let a = json!({"required": ["a", "b"]});
    let b = json!({"required": ["b", "a"]});
    assert_eq!(canonical_bytes(&a), br#"{"required":["a","b"]}"#.to_vec());
    assert_ne!(schema_hash(&a), schema_hash(&b));
    assert_eq!(canonicalize(&b)["required"], json!(["b", "a"]));
}

#[test]
fn strings_and_numbers_are_written_deterministically() {
    let v = json!({"s": "q\"\\\n\u{1}é", "n": [1, -2, 1.5, 1.0], "t": true, "z": null});
    assert_eq!(
        String::from_utf8(canonical_bytes(&v)).unwrap(),
        "{\"n\":[1,-2,1.5,1.0],\"s\":\"q\\\"\\\\\\n\\u0001é\",\"t\":true,\"z\":null}"
    );
    // The canonical bytes parse back to the same value.
    let back: Value = serde_json::from_slice(&canonical_bytes(&v)).unwrap();
    assert_eq!(back, v);
}

#[test]
fn known_hash_is_stable() {
    // sha256 of the 2 bytes `{}`.
    assert_eq!(
        schema_hash(&json!({})),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn persisted_schema_round_trips_and_verifies() {
    let schema = json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {}}});
    let p = PersistedSchema::new(&schema);
    assert!(p.verify());
    assert_eq!(p.hash, schema_hash(&schema));
    let bytes = p.to_bytes();
    assert!(bytes.starts_with(br#"{"format":1,"hash":""#));
    let back = PersistedSchema::from_bytes("invoices", &bytes).unwrap();
    assert_eq!(back, p);
    // serde round trip too.
    let via_serde: PersistedSchema =
        serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(via_serde, p);
}

#[test]
fn tampered_persisted_schema_is_corrupted() {
    let p = PersistedSchema::new(&json!({"type": "object"}));
    let mut record: Value = serde_json::from_slice(&p.to_bytes()).unwrap();
    record["schema"]["type"] = json!("string");
    let err = PersistedSchema::from_bytes("invoices", &canonical_bytes(&record)).unwrap_err();
    assert!(matches!(&err, SchemaError::Corrupted { collection, .. } if collection == "invoices"));
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[test]
fn unknown_format_and_garbage_are_rejected() {
    let p = PersistedSchema::new(&json!({"type": "object"}));
    let mut record: Value = serde_json::from_slice(&p.to_bytes()).unwrap();
    record["format"] = json!(2);
    let err = PersistedSchema::from_bytes("c", &canonical_bytes(&record)).unwrap_err();
    assert!(err.to_string().contains("unknown record format 2"), "{err}");

    let err = PersistedSchema::from_bytes("c", b"{not json").unwrap_err();
    assert!(matches!(err, SchemaError::Json { .. }));
    assert!(std::error::Error::source(&err).is_some());

    let err = PersistedSchema::from_bytes("c", b"[1]").unwrap_err();
    assert!(matches!(err, SchemaError::Corrupted { .. }));
}
