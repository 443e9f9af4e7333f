//! The crate's one error type.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which of the two schemas handed to [`crate::diff()`] an error or a finding refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The previously persisted (baseline) schema.
    Old,
    /// The freshly derived schema.
    New,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Old => "old",
            Side::New => "new",
        })
    }
}

/// Errors raised while diffing or decoding schemas.
///
/// Every message names the collection and, where it applies, the JSON pointer inside the
/// schema document, and ends with what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema is not an object schema at its root (after following a root `$ref`).
    #[error(
        "the {side} schema of collection `{collection}` is not an object schema at `{path}`; \
         derive it from a struct (the root needs `\"type\": \"object\"` or `properties`)"
    )]
    NotObjectSchema {
        /// Collection the schema belongs to.
        collection: String,
        /// Which schema is at fault.
        side: Side,
        /// JSON pointer of the offending node (`/` is the root).
        path: String,
    },
    /// A local `$ref` points at nothing.
    #[error(
        "dangling $ref `{reference}` at `{path}` in the {side} schema of collection \
         `{collection}`; add the definition under `$defs` or fix the reference"
    )]
    DanglingRef {
        /// Collection the schema belongs to.
        collection: String,
        /// Which schema is at fault.
        side: Side,
        /// JSON pointer of the object holding the `$ref`.
        path: String,
        /// The reference text.
        reference: String,
    },
    /// A `$ref` that is not a local JSON pointer (`#` or `#/...`).
    #[error(
        "unsupported $ref `{reference}` at `{path}` in the {side} schema of collection \
         `{collection}`; only local references (`#/$defs/...`) are supported, inline the \
         referenced schema"
    )]
    UnsupportedRef {
        /// Collection the schema belongs to.
        collection: String,
        /// Which schema is at fault.
        side: Side,
        /// JSON pointer of the object holding the `$ref`.
        path: String,
        /// The reference text.
        reference: String,
    },
    /// Comparing the two schemas would take more work than [`crate::MAX_DIFF_WORK`]
    /// allows (definitions that fan out exponentially, or a change reached by an
    /// exponential number of paths).
    #[error(
        "schema of collection `{collection}` is too complex to compare: the diff needs more \
         than {limit} steps; flatten definitions that refer to the next level several times, \
         or replace the persisted schema with the new one deliberately"
    )]
    TooComplex {
        /// Collection the schemas belong to.
        collection: String,
        /// The work budget that was exceeded.
        limit: u64,
    },
    /// A persisted schema record could not be parsed as JSON.
    #[error(
        "persisted schema record of collection `{collection}` is not valid JSON; \
         re-persist the schema derived from the current type"
    )]
    Json {
        /// Collection the record belongs to.
        collection: String,
        /// The parser error.
        #[source]
        source: serde_json::Error,
    },
    /// A persisted schema record parsed but is inconsistent (wrong format, hash mismatch).
    #[error(
        "persisted schema record of collection `{collection}` is corrupt: {detail}; \
         re-persist the schema derived from the current type"
    )]
    Corrupted {
        /// Collection the record belongs to.
        collection: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// Makes a collection name safe to print inside backticks (control characters escaped).
pub(crate) fn printable(name: &str) -> String {
    name.escape_debug().to_string()
}
