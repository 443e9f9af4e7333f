//! The persisted JSON Schema baseline of a collection, at `__nx/jsonschema/<collection>`.
//!
//! ```text
//! key:   __nx/jsonschema/<collection>
//! value: canonical JSON (keys sorted at every depth, no whitespace):
//!        {"format":1,"hash":"<sha256 hex of the canonical schema>",
//!         "payload_version":<i32 or null>,"schema":<the canonical schema>}
//! ```
//!
//! The hash is [`strata_schema::schema_hash`] of the schema; a record whose hash does not
//! match its schema is corrupted. Replacing a baseline is a compare-and-swap on the exact
//! bytes read, so a concurrent writer of the same record is never rolled back.

use super::PolicyError;
use serde_json::{Map, Value};
use strata_store::KvRead;

/// Prefix of persisted schema records.
pub const JSONSCHEMA_PREFIX: &[u8] = crate::keys::JSONSCHEMA_PREFIX;
/// Format version of a persisted schema record.
pub const BASELINE_FORMAT: u64 = 1;

/// The key of `collection`'s persisted schema.
pub fn baseline_key(collection: &str) -> Vec<u8> {
    let mut k = JSONSCHEMA_PREFIX.to_vec();
    k.extend_from_slice(collection.as_bytes());
    k
}

/// A collection's persisted schema baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The schema, keys sorted at every depth.
    pub schema: Value,
    /// Lowercase hex SHA-256 of the schema's canonical bytes.
    pub hash: String,
    /// The collection's payload version when the baseline was recorded.
    pub payload_version: Option<i32>,
}

impl Baseline {
    /// Canonicalizes `schema` and computes its hash.
    pub fn new(schema: &Value, payload_version: Option<i32>) -> Self {
        Baseline {
            schema: strata_schema::canonicalize(schema),
            hash: strata_schema::schema_hash(schema),
            payload_version,
        }
    }

    /// The record bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut m = Map::new();
        m.insert("format".into(), Value::from(BASELINE_FORMAT));
        m.insert("hash".into(), Value::String(self.hash.clone()));
        m.insert(
            "payload_version".into(),
            self.payload_version.map_or(Value::Null, Value::from),
        );
        m.insert("schema".into(), self.schema.clone());
        strata_schema::canonical_bytes(&Value::Object(m))
    }

    /// Decodes the record of `collection`, verifying its format and hash.
    pub fn decode(collection: &str, bytes: &[u8]) -> Result<Self, PolicyError> {
        let key = baseline_key(collection);
        let bad = |reason: String| PolicyError::corrupted(&key, reason);
        let v: Value = serde_json::from_slice(bytes).map_err(|e| {
            PolicyError::corrupted(
                &key,
                crate::pass::RecordError::with_cause(format!("invalid JSON: {e}"), e),
            )
        })?;
        let Value::Object(m) = v else {
            return Err(bad("not a JSON object".into()));
        };
        match m.get("format").and_then(Value::as_u64) {
            Some(BASELINE_FORMAT) => {}
            other => return Err(bad(format!("unsupported format {other:?}"))),
        }
        let hash = m
            .get("hash")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing hash".into()))?
            .to_string();
        let schema = m
            .get("schema")
            .cloned()
            .ok_or_else(|| bad("missing schema".into()))?;
        let payload_version = match m.get("payload_version") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| bad("payload_version is not an i32".into()))?,
            ),
        };
        if strata_schema::schema_hash(&schema) != hash {
            return Err(bad("hash does not match the schema".into()));
        }
        Ok(Baseline {
            schema,
            hash,
            payload_version,
        })
    }

    /// Reads `collection`'s baseline: the decoded record (or the error decoding it) and
    /// the raw bytes for a later compare-and-swap. `Ok(None)`: no baseline yet.
    #[allow(clippy::type_complexity)]
    pub fn read<S: KvRead + ?Sized>(
        store: &S,
        collection: &str,
    ) -> Result<Option<(Result<Baseline, PolicyError>, Vec<u8>)>, PolicyError> {
        let key = baseline_key(collection);
        let raw = store.get(&key).map_err(|e| PolicyError::store(&key, e))?;
        Ok(raw.map(|bytes| (Baseline::decode(collection, &bytes), bytes)))
    }

    /// Reads and decodes `collection`'s baseline.
    pub fn load<S: KvRead + ?Sized>(
        store: &S,
        collection: &str,
    ) -> Result<Option<Baseline>, PolicyError> {
        match Self::read(store, collection)? {
            None => Ok(None),
            Some((decoded, _)) => decoded.map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strata_store::{MemoryStore, Store};

    #[test]
    fn record_bytes_are_canonical_and_roundtrip() {
        let b = Baseline::new(
            &json!({"type":"object","properties":{"b":{},"a":{}}}),
            Some(2),
        );
        let bytes = b.encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with(r#"{"format":1,"hash":""#), "{text}");
        assert!(
            text.ends_with(
                r#","payload_version":2,"schema":{"properties":{"a":{},"b":{}},"type":"object"}}"#
            ),
            "{text}"
        );
        assert_eq!(Baseline::decode("c", &bytes).unwrap(), b);
    }

    #[test]
    fn tampered_records_are_corrupted() {
        let b = Baseline::new(&json!({"type":"object"}), None);
        let text = String::from_utf8(b.encode())
            .unwrap()
            .replace("object", "string");
        let err = Baseline::decode("c", text.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("hash does not match"), "{err}");
        assert!(err.to_string().contains("__nx/jsonschema/c"), "{err}");
        assert!(Baseline::decode("c", b"{}").is_err());
    }

    #[test]
    fn compare_and_swap_never_rolls_back_a_concurrent_writer() {
        let store = Store::new(MemoryStore::new());
        let a = Baseline::new(&json!({"a":1}), None);
        let b = Baseline::new(&json!({"b":1}), None);
        assert!(a.compare_and_swap(&store, "c", None).unwrap());
        assert!(!b.compare_and_swap(&store, "c", None).unwrap());
        assert_eq!(Baseline::load(&store, "c").unwrap(), Some(a.clone()));
        assert!(b.compare_and_swap(&store, "c", Some(a.encode())).unwrap());
        assert_eq!(Baseline::load(&store, "c").unwrap(), Some(b));
    }
}
