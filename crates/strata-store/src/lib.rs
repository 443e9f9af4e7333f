//! The ordered key-value store at the bottom of strata.
//!
//! Everything strata does — schema headers, resumable migrations, typed collections,
//! sweeps and cutovers — is built on four primitives that every backend provides:
//!
//! * [`KvRead::get`] — one key;
//! * [`KvRead::scan_visit`] — a bounded prefix scan that resumes after a key cursor and
//!   stops at a record limit **and** a byte budget (a single record larger than the budget
//!   is an error raised before its value is copied), visiting borrowed records;
//! * [`KvWrite::read_modify_write`] — THE write primitive: the keys a write decides on are
//!   read inside the backend's own write transaction or lock, handed to the caller's
//!   decision (which may refuse: nothing is written), and the [`Batch`] it decides — sets,
//!   deletes and [`Precondition`]s on other keys ("key K holds exactly V" / "key K is
//!   absent") — commits atomically with the read. A failed precondition fails the whole
//!   write with [`StoreError::Conflict`] and writes nothing. Compare-and-swap, optimistic
//!   locking, update-only writes, lease claims, checkpoints and multi-document write sets
//!   are all uses of it;
//! * [`KvWrite::flush`] and [`KvRead::capabilities`].
//!
//! [`KvRead::scan`], [`KvRead::prefix_exists`], [`KvWrite::apply`] (a batch: the primitive
//! reading nothing) and [`KvWrite::compare_and_swap`] are provided conveniences built on
//! them. There are no optional write hooks: every backend and every wrapper has one write
//! path.
//!
//! Backends implement [`KvRead`] + [`KvWrite`] (together: [`Backend`]); applications and
//! the engine use the cloneable [`Store`] handle, which adds the **in-process write lease**:
//! ordinary writes share a gate and run concurrently, while [`Store::lease`] takes the gate
//! exclusively for a whole session (a migration). Reads never block; the holder writes
//! through its [`WriteLease`].
//!
//! This crate holds no backend with external dependencies: the sled backend lives in
//! `strata-sled`. It does hold [`MemoryStore`], and (feature `conformance`) the one test
//! suite every backend must pass.
//!
//! ```
//! use strata_store::{Batch, KvRead, KvWrite, MemoryStore, ScanLimits, Store};
//!
//! # fn main() -> Result<(), strata_store::StoreError> {
//! let store = Store::new(MemoryStore::new());
//! store.apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()).set(b"t/b".to_vec(), b"2".to_vec()))?;
//! let page = store.scan(b"t/", None, ScanLimits::new(1, 1024)?)?;
//! assert_eq!(page.records.len(), 1);
//! let rest = store.scan(b"t/", page.cursor(), ScanLimits::new(10, 1024)?)?;
//! assert_eq!(rest.records[0].key, b"t/b");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod backend;
mod batch;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod epoch;
mod error;
mod escape;
mod exclusive;
#[cfg(feature = "testing")]
pub mod faults;
mod guard;
mod lease;
pub mod manifest;
mod memory;
mod pages;
pub(crate) mod scan;

pub use backend::{
    borrowed, Backend, Capabilities, CrossProcessLease, Decide, HeldLease, KvRead, KvWrite,
    NamedLease,
};
pub use batch::{check_key_length, Batch, KeyWrite, Mutation, Precondition, MAX_KEY_BYTES};
pub(crate) use epoch::{EpochClock, WriteEpoch};
pub use error::{io_remedy, ConflictReason, StoreError};
pub use escape::{escape_key, from_hex, one_line, shown_key, shown_text, to_hex, SHOWN_MAX};
pub use exclusive::{lease_holder, ExclusiveSession};
pub use guard::guarded_open;
pub use lease::{Store, WriteLease};

pub use memory::MemoryStore;
pub use pages::{Oversize, Pages, Records};
pub use scan::{Offer, PageBuilder, Record, ScanLimits, ScanPage, Visit, VisitBudget, VisitEnd};

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
