//! Serde types and value codecs of the Numax sync tables (DESIGN.md §2).
//!
//! Every type here serializes to exactly the JSON a Numax release writes: plain serde
//! derives (no renames, no `deny_unknown_fields`, `Option` as `null`), byte values as JSON
//! arrays of numbers, maps as JSON objects with sorted keys.
//!
//! | table | value |
//! |---|---|
//! | `gcounter-materialized` | `u64` little-endian, exactly 8 bytes |
//! | `gcounter-state` | [`GCounterState`] JSON |
//! | `pncounter-materialized` | `i64` little-endian, exactly 8 bytes |
//! | `pncounter-state` | [`PNCounterState`] JSON |
//! | `lww-register-materialized` | raw bytes |
//! | `lww-register-state` | [`LwwRegisterState`] JSON |
//! | `lww-map-materialized` | JSON `[[field,[u8..]],..]` |
//! | `lww-map-state` | [`LwwMapState`] JSON |
//! | `orset-materialized` | JSON `[element,..]` |
//! | `orset-state` | [`ORSetState`] JSON |
//! | `rga-materialized` | JSON `[[u8..],..]` |
//! | `rga-state` | [`RgaState`] JSON |
//! | `seen-ops` | `u64` big-endian sequence, exactly 8 bytes |
//! | `op-log` | `u64` big-endian sequence, then [`Op`] JSON whose `id` is the key suffix |
//!
//! ```
//! use strata::numax::wire::{Op, OpKind};
//! let op = Op::new("op-1", "node-a", OpKind::GCounterIncrement { key: "visits".into(), increment: 3 });
//! let json = String::from_utf8(strata::numax::wire::encode_op(&op)?).unwrap_or_default();
//! assert_eq!(json, r#"{"id":"op-1","origin":"node-a","kind":{"GCounterIncrement":{"key":"visits","increment":3}}}"#);
//! # Ok::<(), strata::numax::decode::DecodeError>(())
//! ```

use crate::numax::error::DecodeError;
use crate::numax::NUMAX_TABLES;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Data prefix of `gcounter-materialized` (id 1).
pub const GCOUNTER_PREFIX: &str = "__nx/crdt/gcounter/";
/// Data prefix of `gcounter-state` (id 2).
pub const GCOUNTER_STATE_PREFIX: &str = "__nx/crdt/state/gcounter/";
/// Data prefix of `pncounter-materialized` (id 3).
pub const PNCOUNTER_PREFIX: &str = "__nx/crdt/pncounter/";
/// Data prefix of `pncounter-state` (id 4).
pub const PNCOUNTER_STATE_PREFIX: &str = "__nx/crdt/state/pncounter/";
/// Data prefix of `lww-register-materialized` (id 5).
pub const LWW_REGISTER_PREFIX: &str = "__nx/crdt/lww-register/";
/// Data prefix of `lww-register-state` (id 6).
pub const LWW_REGISTER_STATE_PREFIX: &str = "__nx/crdt/state/lww-register/";
/// Data prefix of `lww-map-materialized` (id 7).
pub const LWW_MAP_PREFIX: &str = "__nx/crdt/lww-map/";
/// Data prefix of `lww-map-state` (id 8).
pub const LWW_MAP_STATE_PREFIX: &str = "__nx/crdt/state/lww-map/";
/// Data prefix of `orset-materialized` (id 9).
pub const ORSET_PREFIX: &str = "__nx/crdt/orset/";
/// Data prefix of `orset-state` (id 10).
pub const ORSET_STATE_PREFIX: &str = "__nx/crdt/state/orset/";
/// Data prefix of `rga-materialized` (id 11).
pub const RGA_PREFIX: &str = "__nx/crdt/rga/";
/// Data prefix of `rga-state` (id 12).
pub const RGA_STATE_PREFIX: &str = "__nx/crdt/state/rga/";
/// Data prefix of `seen-ops` (id 13).
pub const SEEN_OP_PREFIX: &str = "__nx/crdt/seen-op/";
/// Data prefix of `op-log` (id 14).
pub const OP_LOG_PREFIX: &str = "__nx/crdt/op-log/";

/// `(id, name, prefix)` of the table with id `id`, if it is one of the 14
/// ([`NUMAX_TABLES`](crate::numax::NUMAX_TABLES)).
pub fn table_by_id(id: u16) -> Option<(u16, &'static str, &'static str)> {
    NUMAX_TABLES.iter().copied().find(|t| t.0 == id)
}

/// `(id, name, prefix)` of the table named `name`, if it is one of the 14.
pub fn table_by_name(name: &str) -> Option<(u16, &'static str, &'static str)> {
    NUMAX_TABLES.iter().copied().find(|t| t.1 == name)
}

/// Full store key: `prefix` followed by the UTF-8 `suffix` (CRDT key or op id).
pub fn key(prefix: &str, suffix: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + suffix.len());
    k.extend_from_slice(prefix.as_bytes());
    k.extend_from_slice(suffix.as_bytes());
    k
}

// ---------------------------------------------------------------------------------------
// State JSON
// ---------------------------------------------------------------------------------------

/// `gcounter-state` JSON: `{"counts":{node:u64}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GCounterState {
    /// Per-node contribution.
    pub counts: BTreeMap<String, u64>,
}

/// `pncounter-state` JSON: `{"positive":{"counts":{..}},"negative":{"counts":{..}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PNCounterState {
    /// Increments per node.
    pub positive: GCounterState,
    /// Decrements per node.
    pub negative: GCounterState,
}

/// `lww-register-state` JSON: `{"value":[u8..],"timestamp_ms":u64,"writer":node}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwRegisterState {
    /// The current value.
    pub value: Vec<u8>,
    /// Timestamp of the winning write (Unix epoch milliseconds).
    pub timestamp_ms: u64,
    /// Node that wrote the winning value.
    pub writer: String,
}

/// One field of an LWW map: a value or a tombstone (`null`), with its write stamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwMapEntry {
    /// The value; `None` (`null`) is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Timestamp of the winning write (Unix epoch milliseconds).
    pub timestamp_ms: u64,
    /// Node that wrote it.
    pub writer: String,
}

/// `lww-map-state` JSON: `{"entries":{field:{"value":[u8..]|null,"timestamp_ms":u64,"writer":node}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwMapState {
    /// Fields, including tombstones.
    pub entries: BTreeMap<String, LwwMapEntry>,
}

/// `orset-state` JSON: `{"adds":{element:[tag..]},"removes":{element:[tag..]}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ORSetState {
    /// Add tags per element.
    pub adds: BTreeMap<String, BTreeSet<String>>,
    /// Removed (observed) tags per element.
    pub removes: BTreeMap<String, BTreeSet<String>>,
}

/// One element of an RGA sequence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RgaElement {
    /// Globally unique element id (the inserting op's id by convention).
    pub id: String,
    /// The element it was inserted after; `None` (`null`) inserts at the head.
    pub parent: Option<String>,
    /// The payload.
    pub value: Vec<u8>,
}

/// `rga-state` JSON: `{"elements":{id:{"id":id,"parent":id|null,"value":[u8..]}},"tombstones":[id..]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RgaState {
    /// Every element ever inserted, by id.
    pub elements: BTreeMap<String, RgaElement>,
    /// Ids of deleted elements (a JSON array, sorted).
    pub tombstones: BTreeSet<String>,
}

// ---------------------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------------------

/// A replicated operation: `{"id":"…","origin":"node","kind":{"<Variant>":{..}}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Unique op id (also the key suffix of its op-log and seen-ops records).
    pub id: String,
    /// Node that originated the op.
    pub origin: String,
    /// What the op does.
    pub kind: OpKind,
}

impl Op {
    /// An op from its parts.
    pub fn new(id: impl Into<String>, origin: impl Into<String>, kind: OpKind) -> Self {
        Op {
            id: id.into(),
            origin: origin.into(),
            kind,
        }
    }
}

/// The kinds of [`Op`], externally tagged exactly as Numax writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// Adds `increment` to the origin's count of grow-only counter `key`.
    GCounterIncrement {
        /// CRDT key.
        key: String,
        /// Amount.
        increment: u64,
    },
    /// Adds `increment` to the positive side of PN counter `key`.
    PNCounterIncrement {
        /// CRDT key.
        key: String,
        /// Amount.
        increment: u64,
    },
    /// Adds `decrement` to the negative side of PN counter `key`.
    PNCounterDecrement {
        /// CRDT key.
        key: String,
        /// Amount.
        decrement: u64,
    },
    /// Sets LWW register `key`.
    LwwRegisterSet {
        /// CRDT key.
        key: String,
        /// New value.
        value: Vec<u8>,
        /// Write timestamp (Unix epoch milliseconds).
        timestamp_ms: u64,
    },
    /// Sets `field` of LWW map `key`.
    LwwMapSet {
        /// CRDT key.
        key: String,
        /// Field.
        field: String,
        /// New value.
        value: Vec<u8>,
        /// Write timestamp (Unix epoch milliseconds).
        timestamp_ms: u64,
    },
    /// Removes `field` of LWW map `key` (writes a tombstone).
    LwwMapRemove {
        /// CRDT key.
        key: String,
        /// Field.
        field: String,
        /// Write timestamp (Unix epoch milliseconds).
        timestamp_ms: u64,
    },
    /// Adds `element` to OR-set `key` under unique `tag`.
    ORSetAdd {
        /// CRDT key.
        key: String,
        /// Element.
        element: String,
        /// Unique add tag.
        tag: String,
    },
    /// Removes the observed add tags of `element` from OR-set `key`.
    ORSetRemove {
        /// CRDT key.
        key: String,
        /// Element.
        element: String,
        /// The add tags the remover had observed.
        observed_tags: Vec<String>,
    },
    /// Inserts element `id` after `parent` (head when `None`) into RGA `key`.
    RgaInsert {
        /// CRDT key.
        key: String,
        /// New element id.
        id: String,
        /// Element it follows.
        parent: Option<String>,
        /// Payload.
        value: Vec<u8>,
    },
    /// Tombstones element `id` of RGA `key`.
    RgaDelete {
        /// CRDT key.
        key: String,
        /// Element id.
        id: String,
    },
}

impl OpKind {
    /// The CRDT key the op targets.
    pub fn key(&self) -> &str {
        match self {
            OpKind::GCounterIncrement { key, .. }
            | OpKind::PNCounterIncrement { key, .. }
            | OpKind::PNCounterDecrement { key, .. }
            | OpKind::LwwRegisterSet { key, .. }
            | OpKind::LwwMapSet { key, .. }
            | OpKind::LwwMapRemove { key, .. }
            | OpKind::ORSetAdd { key, .. }
            | OpKind::ORSetRemove { key, .. }
            | OpKind::RgaInsert { key, .. }
            | OpKind::RgaDelete { key, .. } => key,
        }
    }

    /// The variant name as it appears in the JSON tag.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::GCounterIncrement { .. } => "GCounterIncrement",
            OpKind::PNCounterIncrement { .. } => "PNCounterIncrement",
            OpKind::PNCounterDecrement { .. } => "PNCounterDecrement",
            OpKind::LwwRegisterSet { .. } => "LwwRegisterSet",
            OpKind::LwwMapSet { .. } => "LwwMapSet",
            OpKind::LwwMapRemove { .. } => "LwwMapRemove",
            OpKind::ORSetAdd { .. } => "ORSetAdd",
            OpKind::ORSetRemove { .. } => "ORSetRemove",
            OpKind::RgaInsert { .. } => "RgaInsert",
            OpKind::RgaDelete { .. } => "RgaDelete",
        }
    }
}

/// One decoded op-log record value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpLogEntry {
    /// Position in the log (u64 big-endian prefix of the value).
    pub sequence: u64,
    /// The op.
    pub op: Op,
}

// ---------------------------------------------------------------------------------------
// Codecs
// ---------------------------------------------------------------------------------------

fn to_json<T: Serialize>(table: &'static str, value: &T) -> Result<Vec<u8>, DecodeError> {
    serde_json::to_vec(value).map_err(|e| DecodeError::Encode {
        table,
        reason: e.to_string(),
    })
}

fn from_json<T: DeserializeOwned>(table: &'static str, bytes: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(bytes)
        .map_err(|e| DecodeError::invalid(table, format!("invalid JSON: {e}")))
}

fn fixed8(table: &'static str, bytes: &[u8]) -> Result<[u8; 8], DecodeError> {
    <[u8; 8]>::try_from(bytes).map_err(|_| {
        DecodeError::invalid(
            table,
            format!("expected exactly 8 bytes, found {}", bytes.len()),
        )
    })
}

/// Encodes a `gcounter-materialized` value: u64 little-endian.
pub fn encode_gcounter_materialized(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// Decodes a `gcounter-materialized` value (exactly 8 bytes).
pub fn decode_gcounter_materialized(bytes: &[u8]) -> Result<u64, DecodeError> {
    fixed8("gcounter-materialized", bytes).map(u64::from_le_bytes)
}

/// Encodes a `pncounter-materialized` value: i64 little-endian.
pub fn encode_pncounter_materialized(value: i64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// Decodes a `pncounter-materialized` value (exactly 8 bytes).
pub fn decode_pncounter_materialized(bytes: &[u8]) -> Result<i64, DecodeError> {
    fixed8("pncounter-materialized", bytes).map(i64::from_le_bytes)
}

/// Encodes a `seen-ops` value: the sequence as u64 big-endian.
pub fn encode_seen_op(sequence: u64) -> Vec<u8> {
    sequence.to_be_bytes().to_vec()
}

/// Decodes a `seen-ops` value (exactly 8 bytes).
pub fn decode_seen_op(bytes: &[u8]) -> Result<u64, DecodeError> {
    fixed8("seen-ops", bytes).map(u64::from_be_bytes)
}

/// Encodes `lww-register-materialized`: the raw value bytes.
pub fn encode_lww_register_materialized(value: &[u8]) -> Vec<u8> {
    value.to_vec()
}

/// Encodes `lww-map-materialized`: `[[field,[u8..]],..]` in the given order.
pub fn encode_lww_map_materialized(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>, DecodeError> {
    to_json("lww-map-materialized", &entries)
}

/// Decodes `lww-map-materialized`.
pub fn decode_lww_map_materialized(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    from_json("lww-map-materialized", bytes)
}

/// Encodes `orset-materialized`: `[element,..]`.
pub fn encode_orset_materialized(elements: &[String]) -> Result<Vec<u8>, DecodeError> {
    to_json("orset-materialized", &elements)
}

/// Decodes `orset-materialized`.
pub fn decode_orset_materialized(bytes: &[u8]) -> Result<Vec<String>, DecodeError> {
    from_json("orset-materialized", bytes)
}

/// Encodes `rga-materialized`: `[[u8..],..]` (visible values in order).
pub fn encode_rga_materialized(values: &[Vec<u8>]) -> Result<Vec<u8>, DecodeError> {
    to_json("rga-materialized", &values)
}

/// Decodes `rga-materialized`.
pub fn decode_rga_materialized(bytes: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    from_json("rga-materialized", bytes)
}

macro_rules! state_codec {
    ($ty:ty, $table:literal, $enc:ident, $dec:ident) => {
        impl $ty {
            /// Encodes the state as its table's JSON.
            pub fn to_json(&self) -> Result<Vec<u8>, DecodeError> {
                to_json($table, self)
            }
            /// Decodes the state from its table's JSON.
            pub fn from_json(bytes: &[u8]) -> Result<Self, DecodeError> {
                from_json($table, bytes)
            }
        }
        #[doc = concat!("Encodes a `", $table, "` value.")]
        pub fn $enc(state: &$ty) -> Result<Vec<u8>, DecodeError> {
            state.to_json()
        }
        #[doc = concat!("Decodes a `", $table, "` value.")]
        pub fn $dec(bytes: &[u8]) -> Result<$ty, DecodeError> {
            <$ty>::from_json(bytes)
        }
    };
}

state_codec!(
    GCounterState,
    "gcounter-state",
    encode_gcounter_state,
    decode_gcounter_state
);
state_codec!(
    PNCounterState,
    "pncounter-state",
    encode_pncounter_state,
    decode_pncounter_state
);
state_codec!(
    LwwRegisterState,
    "lww-register-state",
    encode_lww_register_state,
    decode_lww_register_state
);
state_codec!(
    LwwMapState,
    "lww-map-state",
    encode_lww_map_state,
    decode_lww_map_state
);
state_codec!(
    ORSetState,
    "orset-state",
    encode_orset_state,
    decode_orset_state
);

/// Encodes an `rga-state` value.
pub fn encode_rga_state(state: &RgaState) -> Result<Vec<u8>, DecodeError> {
    to_json("rga-state", state)
}

/// Decodes an `rga-state` value, also checking that every element is stored under its own
/// id (an invariant every Numax release keeps).
pub fn decode_rga_state(bytes: &[u8]) -> Result<RgaState, DecodeError> {
    let state: RgaState = from_json("rga-state", bytes)?;
    if let Some((k, e)) = state.elements.iter().find(|(k, e)| **k != e.id) {
        return Err(DecodeError::invalid(
            "rga-state",
            format!("element stored under `{k}` has id `{}`", e.id),
        ));
    }
    Ok(state)
}

/// Encodes an op as its JSON.
pub fn encode_op(op: &Op) -> Result<Vec<u8>, DecodeError> {
    to_json("op-log", op)
}

/// Decodes an op from its JSON.
pub fn decode_op(bytes: &[u8]) -> Result<Op, DecodeError> {
    from_json("op-log", bytes)
}

/// Encodes an `op-log` value: u64 big-endian `sequence`, then the op JSON.
pub fn encode_op_log(sequence: u64, op: &Op) -> Result<Vec<u8>, DecodeError> {
    let json = encode_op(op)?;
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

/// Decodes an `op-log` value (sequence + op JSON). Does not check the op id against the
/// key; [`decode_op_log_record`] does.
pub fn decode_op_log(bytes: &[u8]) -> Result<OpLogEntry, DecodeError> {
    let (seq, json) = match bytes.split_first_chunk::<8>() {
        Some(parts) => parts,
        None => {
            return Err(DecodeError::invalid(
                "op-log",
                format!(
                    "expected at least 8 bytes (sequence) before the op JSON, found {}",
                    bytes.len()
                ),
            ))
        }
    };
    Ok(OpLogEntry {
        sequence: u64::from_be_bytes(*seq),
        op: decode_op(json)?,
    })
}

/// Decodes an `op-log` record and checks that the op's id equals the key suffix.
pub fn decode_op_log_record(key_suffix: &str, bytes: &[u8]) -> Result<OpLogEntry, DecodeError> {
    let entry = decode_op_log(bytes)?;
    if entry.op.id != key_suffix {
        return Err(DecodeError::invalid(
            "op-log",
            format!(
                "op id `{}` does not match key suffix `{key_suffix}`",
                entry.op.id
            ),
        ));
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn op_json_matches_design_example() {
        let op = Op::new(
            "op-1",
            "node",
            OpKind::GCounterIncrement {
                key: "visits".into(),
                increment: 3,
            },
        );
        let json = String::from_utf8(encode_op(&op).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"id":"op-1","origin":"node","kind":{"GCounterIncrement":{"key":"visits","increment":3}}}"#
        );
        assert_eq!(decode_op(json.as_bytes()).unwrap(), op);
    }

    #[test]
    fn every_op_kind_has_numax_json() {
        let cases: Vec<(OpKind, &str)> = vec![
            (
                OpKind::PNCounterIncrement {
                    key: "k".into(),
                    increment: 1,
                },
                r#"{"PNCounterIncrement":{"key":"k","increment":1}}"#,
            ),
            (
                OpKind::PNCounterDecrement {
                    key: "k".into(),
                    decrement: 2,
                },
                r#"{"PNCounterDecrement":{"key":"k","decrement":2}}"#,
            ),
            (
                OpKind::LwwRegisterSet {
                    key: "k".into(),
                    value: vec![1, 2],
                    timestamp_ms: 5,
                },
                r#"{"LwwRegisterSet":{"key":"k","value":[1,2],"timestamp_ms":5}}"#,
            ),
            (
                OpKind::LwwMapSet {
                    key: "k".into(),
                    field: "f".into(),
                    value: vec![9],
                    timestamp_ms: 5,
                },
                r#"{"LwwMapSet":{"key":"k","field":"f","value":[9],"timestamp_ms":5}}"#,
            ),
            (
                OpKind::LwwMapRemove {
                    key: "k".into(),
                    field: "f".into(),
                    timestamp_ms: 6,
                },
                r#"{"LwwMapRemove":{"key":"k","field":"f","timestamp_ms":6}}"#,
            ),
            (
                OpKind::ORSetAdd {
                    key: "k".into(),
                    element: "e".into(),
                    tag: "t".into(),
                },
                r#"{"ORSetAdd":{"key":"k","element":"e","tag":"t"}}"#,
            ),
            (
                OpKind::ORSetRemove {
                    key: "k".into(),
                    element: "e".into(),
                    observed_tags: vec!["t".into()],
                },
                r#"{"ORSetRemove":{"key":"k","element":"e","observed_tags":["t"]}}"#,
            ),
            (
                OpKind::RgaInsert {
                    key: "k".into(),
                    id: "a".into(),
                    parent: None,
                    value: vec![104],
                },
                r#"{"RgaInsert":{"key":"k","id":"a","parent":null,"value":[104]}}"#,
            ),
            (
                OpKind::RgaDelete {
                    key: "k".into(),
                    id: "a".into(),
                },
                r#"{"RgaDelete":{"key":"k","id":"a"}}"#,
            ),
        ];
        for (kind, json) in cases {
            assert_eq!(serde_json::to_string(&kind).unwrap(), json);
            assert_eq!(serde_json::from_str::<OpKind>(json).unwrap(), kind);
        }
    }

    #[test]
    fn state_json_matches_design() {
        let mut g = GCounterState::default();
        g.counts.insert("n1".into(), 4);
        assert_eq!(g.to_json().unwrap(), br#"{"counts":{"n1":4}}"#);

        let pn = PNCounterState {
            positive: g.clone(),
            negative: GCounterState::default(),
        };
        assert_eq!(
            pn.to_json().unwrap(),
            br#"{"positive":{"counts":{"n1":4}},"negative":{"counts":{}}}"#
        );

        let r = LwwRegisterState {
            value: vec![111],
            timestamp_ms: 7,
            writer: "n".into(),
        };
        assert_eq!(
            r.to_json().unwrap(),
            br#"{"value":[111],"timestamp_ms":7,"writer":"n"}"#
        );

        let mut m = LwwMapState::default();
        m.entries.insert(
            "gone".into(),
            LwwMapEntry {
                value: None,
                timestamp_ms: 2,
                writer: "n".into(),
            },
        );
        assert_eq!(
            m.to_json().unwrap(),
            br#"{"entries":{"gone":{"value":null,"timestamp_ms":2,"writer":"n"}}}"#
        );

        let mut s = ORSetState::default();
        s.adds.insert("blue".into(), ["t1".to_string()].into());
        assert_eq!(
            s.to_json().unwrap(),
            br#"{"adds":{"blue":["t1"]},"removes":{}}"#
        );

        let mut rga = RgaState::default();
        rga.elements.insert(
            "a".into(),
            RgaElement {
                id: "a".into(),
                parent: None,
                value: vec![104],
            },
        );
        rga.tombstones.insert("z".into());
        assert_eq!(
            encode_rga_state(&rga).unwrap(),
            br#"{"elements":{"a":{"id":"a","parent":null,"value":[104]}},"tombstones":["z"]}"#
        );
    }

    #[test]
    fn materialized_encodings() {
        assert_eq!(encode_gcounter_materialized(12), 12u64.to_le_bytes());
        assert_eq!(encode_pncounter_materialized(-6), (-6i64).to_le_bytes());
        assert_eq!(encode_seen_op(7), 7u64.to_be_bytes());
        assert_eq!(
            encode_lww_map_materialized(&[("region".into(), b"eu".to_vec())]).unwrap(),
            br#"[["region",[101,117]]]"#
        );
        assert_eq!(
            encode_orset_materialized(&["blue".into()]).unwrap(),
            br#"["blue"]"#
        );
        assert_eq!(
            encode_rga_materialized(&[b"hi".to_vec()]).unwrap(),
            br#"[[104,105]]"#
        );
    }

    #[test]
    fn op_log_layout_and_id_check() {
        let op = Op::new(
            "fixture-op-1",
            "n",
            OpKind::RgaDelete {
                key: "k".into(),
                id: "a".into(),
            },
        );
        let bytes = encode_op_log(9, &op).unwrap();
        assert_eq!(&bytes[..8], &9u64.to_be_bytes());
        let entry = decode_op_log_record("fixture-op-1", &bytes).unwrap();
        assert_eq!(entry, OpLogEntry { sequence: 9, op });
        let err = decode_op_log_record("other", &bytes).unwrap_err();
        assert!(err
            .reason()
            .contains("op id `fixture-op-1` does not match key suffix `other`"));
    }

    #[test]
    fn short_values_are_rejected_with_length() {
        let err = decode_gcounter_materialized(&[1, 2, 3, 4, 5]).unwrap_err();
        assert_eq!(err.reason(), "expected exactly 8 bytes, found 5");
        assert!(decode_op_log(&[0; 7]).is_err());
    }

    #[test]
    fn rga_element_must_sit_under_its_id() {
        let json = br#"{"elements":{"a":{"id":"b","parent":null,"value":[]}},"tombstones":[]}"#;
        assert!(decode_rga_state(json).is_err());
    }

    #[test]
    fn table_lookup() {
        assert_eq!(table_by_id(14).unwrap().1, "op-log");
        assert_eq!(table_by_name("rga-state").unwrap().2, RGA_STATE_PREFIX);
        assert!(table_by_id(15).is_none());
        let prefixes = [
            GCOUNTER_PREFIX,
            GCOUNTER_STATE_PREFIX,
            PNCOUNTER_PREFIX,
            PNCOUNTER_STATE_PREFIX,
            LWW_REGISTER_PREFIX,
            LWW_REGISTER_STATE_PREFIX,
            LWW_MAP_PREFIX,
            LWW_MAP_STATE_PREFIX,
            ORSET_PREFIX,
            ORSET_STATE_PREFIX,
            RGA_PREFIX,
            RGA_STATE_PREFIX,
            SEEN_OP_PREFIX,
            OP_LOG_PREFIX,
        ];
        for (i, t) in NUMAX_TABLES.iter().enumerate() {
            assert_eq!(usize::from(t.0), i + 1);
            assert_eq!(t.2, prefixes[i]);
        }
    }
}
