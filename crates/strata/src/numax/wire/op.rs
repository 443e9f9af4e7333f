//! Ops as the `op-log` table and the sync API carry them.

use serde::{Deserialize, Serialize};

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
