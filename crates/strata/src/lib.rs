//! strata: safe, resumable evolution of data kept in an ordered key-value store.
//!
//! Start with a typed collection. Every row carries the payload version it was written
//! at; when the record type changes, declare an upcast step and old rows are read in the
//! new shape (lazily, or rewritten by a leased, resumable sweep):
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//! use strata::{CollectionOptions, Database, Mode, StepError};
//!
//! #[derive(Debug, Serialize, Deserialize, PartialEq)]
//! struct Account { id: String, balance_cents: i64 }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! // A backend converts into a `Store` (`SledStore`, `RedbStore`; any other with `Store::new`).
//! let store = strata::Store::from(strata_sled::SledStore::open(dir.path())?);
//!
//! // An old build wrote `balance` in dollars (payload v1).
//! let old = Database::builder(store.clone()).open()?;
//! old.collection::<serde_json::Value>("accounts", CollectionOptions::new())?
//!     .put("alice", &json!({"id": "alice", "balance": 12}))?;
//!
//! // The new build declares the step v1 -> v2 and reads the old row in the new shape.
//! let db = Database::builder(store).open()?;
//! let accounts = db.collection::<Account>(
//!     "accounts",
//!     CollectionOptions::new().identity_fields(["id"]).upcast(1, Mode::Lazy, |obj| {
//!         let dollars = obj
//!             .remove("balance")
//!             .and_then(|v| v.as_i64())
//!             .ok_or_else(|| StepError::new("v1 account without a numeric `balance`"))?;
//!         obj.insert("balance_cents".into(), json!(dollars * 100));
//!         Ok(())
//!     }),
//! )?;
//! assert_eq!(
//!     accounts.get("alice")?,
//!     Some(Account { id: "alice".into(), balance_cents: 1200 })
//! );
//! # Ok(()) }
//! ```
//!
//! `strata collections` shows each collection's stored payload versions, and an
//! application's own admin binary (`strata_cli::Admin`) runs its sweep, cutover and schema
//! check. Beneath the collections, this crate is the engine above the store trait
//! ([`strata_store`]):
//!
//! * [`collection`], [`payload`], [`policy`] — typed collections, payload evolution
//!   (envelope, upcast chains, sweep), shape policy (persisted JSON Schema, strategies,
//!   fence, cutover);
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
