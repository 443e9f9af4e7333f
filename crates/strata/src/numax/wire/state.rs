//! The `*-state` tables' JSON: one serde type per CRDT family.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
