//! Canonical JSON: one byte sequence per JSON value, whatever the key order it arrived in.
//!
//! The canonical form is UTF-8 with no insignificant whitespace; object keys are sorted by
//! their UTF-8 bytes at every depth; array order is preserved; numbers are printed the way
//! `serde_json` prints them (`1` and `1.0` stay distinct); strings escape only `"`, `\` and
//! control characters (`\b \f \n \r \t`, others as `\u00XX`). The bytes are written
//! explicitly, so the result does not depend on `serde_json`'s `preserve_order` feature.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{printable, SchemaError};

/// Returns a copy of `value` whose objects have their keys inserted in sorted order at
/// every depth (arrays keep their order).
///
/// With `serde_json`'s default `BTreeMap` maps this only copies; with `preserve_order` it
/// also reorders. Hashing and persistence go through [`canonical_bytes`], which sorts
/// explicitly either way.
pub fn canonicalize(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.clone(), canonicalize(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonicalize).collect()),
        other => other.clone(),
    }
}

/// The canonical bytes of `value` (see the module docs for the exact form).
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// Lowercase hex SHA-256 of [`canonical_bytes`]`(schema)`: equal for schemas that differ
/// only in key order, different when anything else differs (annotations included).
pub fn schema_hash(schema: &Value) -> String {
    hex::encode(Sha256::digest(canonical_bytes(schema)))
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, k);
                out.push(b':');
                write_value(out, v);
            }
            out.push(b'}');
        }
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                let b = c as u32 as usize;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) & 0xf]);
                out.push(HEX[b & 0xf]);
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Version of the [`PersistedSchema`] record layout written by [`PersistedSchema::to_bytes`].
pub const PERSISTED_SCHEMA_FORMAT: u64 = 1;

/// A schema as persisted as a collection's baseline: the canonicalized schema and its
/// [`schema_hash`].
///
/// Its record bytes ([`PersistedSchema::to_bytes`]) are the canonical JSON of
/// `{"format":1,"hash":"<sha256 hex>","schema":<schema>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedSchema {
    /// The schema, keys sorted at every depth.
    pub schema: Value,
    /// Lowercase hex SHA-256 of the schema's canonical bytes.
    pub hash: String,
}

impl PersistedSchema {
    /// Canonicalizes `schema` and computes its hash.
    pub fn new(schema: &Value) -> Self {
        PersistedSchema {
            schema: canonicalize(schema),
            hash: schema_hash(schema),
        }
    }

    /// True when `hash` is the hash of `schema`.
    pub fn verify(&self) -> bool {
        schema_hash(&self.schema) == self.hash
    }

    /// The record bytes: canonical JSON of `{"format":1,"hash":…,"schema":…}`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut record = Map::new();
        record.insert("format".into(), Value::from(PERSISTED_SCHEMA_FORMAT));
        record.insert("hash".into(), Value::String(self.hash.clone()));
        record.insert("schema".into(), self.schema.clone());
        canonical_bytes(&Value::Object(record))
    }

    /// Decodes record bytes written by [`PersistedSchema::to_bytes`], checking the format
    /// number and that the stored hash matches the stored schema. `collection` only names
    /// the record in errors.
    pub fn from_bytes(collection: &str, bytes: &[u8]) -> Result<Self, SchemaError> {
        let collection_name = printable(collection);
        let corrupted = |detail: String| SchemaError::Corrupted {
            collection: collection_name.clone(),
            detail,
        };
        let value: Value = serde_json::from_slice(bytes).map_err(|source| SchemaError::Json {
            collection: collection_name.clone(),
            source,
        })?;
        let Value::Object(mut record) = value else {
            return Err(corrupted("the record is not a JSON object".into()));
        };
        match record.get("format").and_then(Value::as_u64) {
            Some(PERSISTED_SCHEMA_FORMAT) => {}
            Some(other) => {
                return Err(corrupted(format!(
                "unknown record format {other} (this build reads format {PERSISTED_SCHEMA_FORMAT})"
            )))
            }
            None => return Err(corrupted("the `format` field is missing".into())),
        }
        let hash = match record.remove("hash") {
            Some(Value::String(h)) => h,
            _ => return Err(corrupted("the `hash` field is missing".into())),
        };
        let Some(schema) = record.remove("schema") else {
            return Err(corrupted("the `schema` field is missing".into()));
        };
        let persisted = PersistedSchema {
            schema: canonicalize(&schema),
            hash,
        };
        if !persisted.verify() {
            return Err(corrupted(format!(
                "the stored hash {} does not match the stored schema (hash {})",
                persisted.hash,
                schema_hash(&persisted.schema)
            )));
        }
        Ok(persisted)
    }
}
