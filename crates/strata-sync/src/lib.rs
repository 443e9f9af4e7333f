//! A Numax-compatible CRDT sync store on strata.
//!
//! Six CRDT families — grow-only counter, PN counter, LWW register, LWW map, OR-set, RGA
//! sequence — each kept as a durable state record (the Numax state JSON) and a
//! materialized view (what an application reads), plus the seen-ops table and the durable
//! op log, all in the 14 tables of DESIGN.md §2.
//!
//! * [`SyncManager::open`] validates every managed table first (initializing the headers
//!   of an empty store atomically) and refuses a legacy, older, future or corrupt store
//!   with [`SyncError::Schema`]; it never migrates. Then it hydrates with bounded scans.
//! * [`SyncManager::apply`] writes state + materialized view + seen-op + op-log record of
//!   an op (and the evictions beyond `op_log_limit` / `seen_ops_limit`) in ONE atomic
//!   batch, read-modify-write against the stored records under preconditions, so many
//!   handles or processes sharing a store converge; an op whose id was seen is a no-op.
//! * Hydration takes the state records as the truth (rewriting missing or stale
//!   materialized records); counters in Numax's early layout are the local node's.
//! * Differences from Numax v0.1.3 on the edges are listed in docs/format.md.
//! * [`Runtime::new`] opens a sled datastore by path and builds the manager.
//! * [`legacy::write_legacy_fixture`] writes v0 (header-less) data for fixtures and demos.
//!
//! This crate is not a network layer: ops come from the caller (local or remote alike).
//!
//! ```
//! use strata_store::{MemoryStore, Store};
//! use strata_sync::SyncManager;
//! use strata::numax::wire::{Op, OpKind};
//!
//! # fn main() -> Result<(), strata_sync::SyncError> {
//! let sync = SyncManager::open(Store::new(MemoryStore::new()))?;
//! let op = Op::new("op-1", "node-a", OpKind::PNCounterDecrement { key: "stock".into(), decrement: 3 });
//! sync.apply(&op)?;
//! sync.apply(&op)?; // seen: no-op
//! assert_eq!(sync.pncounter("stock")?, Some(-3));
//! assert_eq!(sync.seen_op_sequence("op-1")?, Some(0));
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod crdt;
mod error;
pub mod legacy;
mod manager;
mod runtime;

pub use crdt::{rga_order, Crdt, CrdtState, Family};
pub use error::SyncError;
pub use manager::{
    Applied, ConsistencyReport, OpLogReader, SyncManager, SyncOptions, DEFAULT_NODE_ID,
    DEFAULT_OP_LOG_LIMIT, DEFAULT_SEEN_OPS_LIMIT, MAX_RECORD_BYTES, SEQUENCES_KEY,
};
pub use runtime::Runtime;
pub use strata::numax::wire::{
    GCounterState, LwwMapEntry, LwwMapState, LwwRegisterState, ORSetState, Op, OpKind, OpLogEntry,
    PNCounterState, RgaElement, RgaState,
};
