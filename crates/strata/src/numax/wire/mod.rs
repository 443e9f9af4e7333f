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
mod codec;
mod op;
mod state;
#[cfg(test)]
mod tests;

pub use codec::*;
pub use op::{Op, OpKind, OpLogEntry};
pub use state::{
    GCounterState, LwwMapEntry, LwwMapState, LwwRegisterState, ORSetState, PNCounterState,
    RgaElement, RgaState,
};

use crate::numax::NUMAX_TABLES;

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
/// ([`NUMAX_TABLES`]).
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
