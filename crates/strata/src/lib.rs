//! strata: safe, resumable evolution of data kept in an ordered key-value store.
//!
//! This crate is the engine above the store trait ([`strata_store`]):
//!
//! * [`catalog`] — managed tables (name, fixed id, prefix, current version, decoder);
//! * [`header`] — the 8-byte `NXDB` schema header at `__nx/schema/<table>`;
//! * [`validate`] — startup validation (the six states of the Numax seed);
//! * [`numax`] — the 14 Numax-compatible sync tables, their wire types and decoders.
//!
//! ```
//! use strata_store::{MemoryStore, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::new(MemoryStore::new());
//! let report = strata::validate::validate_and_init(&store, &strata::numax::catalog())?;
//! assert_eq!(report.initialized.len(), 14); // an empty store gets every header
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod catalog;
pub mod clock;
pub mod collection;
pub mod database;
pub mod header;
pub mod keys;
pub mod migrate;
pub mod numax;
pub mod pass;
pub mod payload;
pub mod policy;
pub mod seal;
pub mod validate;

pub use catalog::{Catalog, CatalogError, TableDef};
pub use collection::{Collection, CollectionError, CollectionOptions, Document, WriteGuard};
pub use database::{Database, DatabaseBuilder};
pub use header::{SchemaHeader, HEADER_LEN};
pub use migrate::{MigrateError, MigrationReport, Migrator, RecordStep, Registry, TableMigrations};
pub use pass::{Pass, PassError, PassLimits, PassReport};
pub use payload::{JsonObject, Mode, StepError, SweepOptions, SweepReport};
pub use policy::{Policy, PolicyConfig, PolicyError, Refusal, SchemaOptions};
pub use strata_store::Store;
pub use validate::{TableState, TableStatus, ValidationError, ValidationReport};
