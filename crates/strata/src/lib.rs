//! strata: safe, resumable evolution of data kept in an ordered key-value store.
//!
//! ## What strata is
//!
//! A library (an embedded engine, with a blocking API) that keeps typed JSON documents
//! and tables in a key-value store — [redb](https://docs.rs/redb) for new stores
//! (`strata-redb`), sled 0.34 for existing Numax stores (`strata-sled`), PostgreSQL when
//! several processes or machines share one store (`strata-postgres`) — and changes the
//! shape of that data safely over many releases:
//!
//! * every document carries the **payload version** it was written at; a newer build reads
//!   older rows through declared upcast steps (lazily, or rewritten by a leased, resumable
//!   sweep), and an older build never overwrites a newer row (the ahead guard);
//! * every collection can keep a **persisted JSON Schema**: a new build's schema is
//!   classified against it (additive, narrowing, breaking) and accepted, refused or
//!   carried out by a coordinated, fenced **cutover** across every client;
//! * every managed table has a **schema header**, checked at startup, and **migrations**
//!   that resume after a crash in bounded memory;
//! * two builds can run at once (a **deploy window**), and a completed version can be taken
//!   back down (**revert**) through declared downcasts.
//!
//! ## Main types
//!
//! * [`Database`] — opened over a [`Store`] with [`Database::builder`]; hands out
//!   collections, runs multi-document write sets ([`Database::write`], [`WriteSet`]);
//! * [`Collection<T>`] — the documents of one serde type under a name: `get`, `put`,
//!   `insert`, `update` (optimistic lock), `delete`, `iter`, `put_many`, `sweep`;
//! * [`CollectionOptions`] — how a collection evolves: upcast and downcast steps
//!   ([`Mode`], [`StepError`]), identity fields, the schema it declares, sealing;
//! * [`policy`] — shape policy: the persisted schema, strategies, the fence, clients;
//! * [`ops`] — operations on a whole collection or store: [`ops::sweep`],
//!   [`ops::cutover`], [`ops::window`], [`ops::revert`], [`ops::rotate`], [`ops::verify`],
//!   [`ops::retire`], [`ops::fixture`];
//! * [`seal`] — sealed (encrypted) collections, keyrings and credentials;
//! * [`migrate`], [`validate`], [`numax`] — the table migrator, startup validation and the
//!   14 Numax-compatible sync tables;
//! * [`pass`] — the bulk pass every bulk operation runs on (batches, checkpoints);
//! * [`layout`] — the on-disk format for tools (keys, record codecs); [`clock`] — the
//!   injectable clock.
//!
//! Every type has one import path: the main types at the crate root, the rest in the
//! module named for their concept (`strata::ops::sweep::SweepOptions`).
//!
//! ## Getting started
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
//!
//! ## Things to know
//!
//! * **The API is blocking.** Every call reads or writes the store before it returns; from
//!   async code run it on a blocking thread (`tokio::task::spawn_blocking`).
//! * **[`Database`] and [`Collection`] are `Send + Sync + Clone`.** Open the database once
//!   and clone the handles into each thread or task; an embedded store (redb, sled) is
//!   opened by one process at a time.
//! * **Documents are JSON objects.** `T` must serialize to a JSON object (a struct with
//!   named fields, a map, a `serde_json::Value` holding an object); a `collection::<String>`
//!   opens, but every write fails with "documents must serialize to a JSON object".
//! * **A [`Mode::Lazy`] step makes the sweep do nothing**: lazy steps upcast a row when it
//!   is read; the sweep rewrites rows only for a [`Mode::Eager`] step (and otherwise
//!   returns [`ops::sweep::SweepNote::NoEagerStep`]).
//! * **[`policy::covered_by_upcasts`] replaces a cutover** when every build that reads the
//!   collection carries the upcast steps (rows are upcast on read, no fence). Use a
//!   [`policy::coordinated_cutover`] when every row must be rewritten before any build
//!   writes the new shape.
//! * **[`Database::store`] is the raw store**: writes through it bypass every check
//!   (schema gate, fence, sealing, lock version, ahead guard); write documents through
//!   collections and write sets.
//!
//! `docs/getting-started.md` walks through a first application; `strata collections`
//! shows each collection's stored payload versions, and an application's own admin binary
//! (`strata_cli::Admin`) runs its sweep, cutover and schema check.
//!
//! ## What strata is not
//!
//! * not asynchronous (see above), and not a query engine: documents are read by key, by
//!   key order (`iter`) and by the bulk pass — no secondary indexes, no query language;
//! * not a multi-process embedded store: redb and sled are opened by one process at a
//!   time; several processes or machines share a PostgreSQL store;
//! * not a backup: `strata copy` and `strata verify` move and check a store, they do not
//!   keep history;
//! * not a schema-on-write database for arbitrary JSON: documents are JSON objects, and
//!   schemas are the JSON Schema of the Rust type (`schemars`), not a DDL.
//!
//! ## Limits
//!
//! | what | limit |
//! |---|---|
//! | store key (collection prefix + document key) | [`strata_store::MAX_KEY_BYTES`] (2,048 bytes), every backend |
//! | one document record (key + envelope + JSON, sealed or clear) | [`MAX_DOCUMENT_BYTES`] (2 MiB) |
//! | JSON nesting depth | [`layout::envelope::MAX_JSON_DEPTH`] (128) |
//! | collection name | [`layout::catalog::MAX_NAME_LEN`] (200 bytes) |
//! | collections per store | 64,512 (table ids 1,024–65,535) |
//! | payload versions | 1 to `i32::MAX` |
//! | `put_many` atomic sets | [`PUT_MANY_DOCUMENTS`] documents / [`PUT_MANY_BYTES`] bytes each |
//! | a write set | one backend transaction (see [`WriteSet`] for each backend's bounds) |
//!
//! ## Layers
//!
//! The modules form layers, bottom first; a module uses only modules of lower layers
//! (never one of its own layer or above), so no two modules import each other.
//! `tests/it/layers/` reads this table and every `crate::`/`super::` reference of the
//! sources (a `pub use` included), and fails on a reference that goes up (there are no
//! exceptions: no facade keeps an older path). `tests/it/public_paths.rs` fails on a type
//! public under two paths. The same test
//! checks every crate of the workspace for import cycles.
//!
//! | layer | modules | holds |
//! |---|---|---|
//! | 1 | `clock`, `alive`, `keys`, `format`, `record_error` | the clock; the lease holders alive in this process; every reserved key prefix and the key-layout functions; the one error of fixed-layout records; why one record is bad (`pass::RecordError`) |
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
//! | 12 | `layout` | the on-disk layout for tools: keys, record codecs (re-exported from below) |
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

mod alive;
mod catalog;
pub mod clock;
mod collection;
mod database;
mod format;
mod header;
mod keys;
pub mod layout;
pub mod migrate;
pub mod numax;
pub mod ops;
pub mod pass;
mod payload;
pub mod policy;
mod record_error;
pub mod seal;
pub mod validate;

pub use catalog::{Catalog, CatalogError, RecordDecoder, TableDef};
pub use collection::{
    Collection, CollectionError, CollectionOptions, Document, Expect, GuardError, Iter, WriteGuard,
    WriteSet, WriteSetError, Written, ITER_PAGE_BYTES, MAX_DOCUMENT_BYTES, PUT_MANY_BYTES,
    PUT_MANY_DOCUMENTS,
};
pub use database::{Database, DatabaseBuilder};
pub use payload::{
    ChainError, DowncastStep, JsonObject, Mode, StepError, StepFn, UpcastChain, UpcastFailure,
    UpcastStep, Upcaster, INITIAL_PAYLOAD_VERSION, KEPT_FIELD,
};
pub use strata_store::Store;
