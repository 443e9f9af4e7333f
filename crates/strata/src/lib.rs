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
//! // A backend converts into a `Store`: redb, the default for new stores (or `SledStore`
//! // for an existing Numax store, any other backend with `Store::new`).
//! let store = strata::Store::from(strata_redb::RedbStore::create(dir.path().join("app.redb"))?);
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
//!   (envelope, upcast chains), shape policy (persisted JSON Schema, strategies, fence);
//! * [`ops`] — the operations on top: the eager sweep, the coordinated cutover, deploy
//!   windows (two builds live at once), data-key rotation, sealed-record verification
//!   (and [`migrate`], the table migrator);
//! * [`catalog`] — managed tables (name, fixed id, prefix, current version, decoder);
//! * [`header`] — the 8-byte `NXDB` schema header at `__nx/schema/<table>`;
//! * [`validate`] — startup validation (the six states of the Numax seed);
//! * [`numax`] — the 14 Numax-compatible sync tables, their wire types and decoders.
//!
//! ## Layers
//!
//! The modules form layers, bottom first; a module uses only modules of lower layers
//! (never one of its own layer or above), so no two modules import each other.
//! `tests/it/layers.rs` reads this table and every `crate::`/`super::` reference of the
//! sources (a `pub use` included), and fails on a reference that goes up. The only
//! exceptions are the facades it lists (`KNOWN_FACADES`) that keep older public paths
//! (`strata::policy::CutoverOptions`, `strata::payload::sweep`,
//! `strata::seal::rotate_data_key`); nothing uses an item through them. The same test
//! checks every crate of the workspace for import cycles.
//!
//! | layer | modules | holds |
//! |---|---|---|
//! | 1 | `clock`, `keys` | the clock; every reserved key prefix and the key-layout functions |
//! | 2 | `header` | the 8-byte schema header |
//! | 3 | `catalog` | managed-table definitions |
//! | 4 | `numax`, `validate` | the Numax tables; startup validation |
//! | 5 | `pass` | the bulk pass (batches, checkpoints, per-row conditions) over any store |
//! | 6 | `payload` | the document envelope and upcast chains |
//! | 7 | `seal` | cipher, keyrings, credentials, sealed documents |
//! | 8 | `policy` | fence, write gate, baselines, presence, strategies, history |
//! | 9 | `collection` | typed collections: read, write, the one row rewrite |
//! | 10 | `database` | opening a database: catalog, policy link, keyring |
//! | 11 | `ops`, `migrate` | sweep, cutover, rotation, seal verification; the migrator |
//!
//! `pass` sits below `payload` and `seal` (not above them) because it needs nothing but
//! the store and the reserved prefixes, and a seal error carries the pass error of a
//! rotation.
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
pub mod ops;
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
