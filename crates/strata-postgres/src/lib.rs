//! The PostgreSQL backend of strata's store trait, for stores that several processes or
//! machines share.
//!
//! [`PgStore`] implements [`strata_store::Backend`] (name `postgres`) over one table
//! `(k BYTEA PRIMARY KEY, v BYTEA NOT NULL)` with the `tokio-postgres` driver (driven by a
//! one-worker runtime per store, so every call has a deadline: connect, handshake and
//! statement timeouts, see [`DEFAULT_STATEMENT_TIMEOUT`]) and a small connection pool. It passes the same conformance suite as the memory and sled
//! backends: byte-ordered bounded scans whose byte budget is enforced before a value is
//! fetched, atomic batches whose preconditions hold across every connection (a key claimed
//! from two machines has exactly one winner), and durable commits.
//!
//! TLS follows the URL's `sslmode` with libpq's meanings (default `prefer`); `require`,
//! `verify-ca` and `verify-full` (with `sslrootcert=PATH`) need the cargo feature `tls`
//! (rustls), and are refused with a message without it.
//!
//! What it is not: a schema for relational queries (values are opaque bytes), or a
//! replacement for strata's in-process write lease (the lease still guards one process;
//! across processes, use strata's stored leases).
//!
//! ```no_run
//! use strata_store::{Batch, KvRead, KvWrite, ScanLimits};
//!
//! # fn main() -> Result<(), strata_store::StoreError> {
//! // `strata_table` picks the table (default `strata_kv`); it is created when missing.
//! let store = strata_postgres::connect_store(
//!     "postgres://app@db.internal:5432/app?strata_table=orders_store",
//! )?;
//! store.apply(Batch::new().require_absent(b"t/a".to_vec()).set(b"t/a".to_vec(), b"1".to_vec()))?;
//! let page = store.scan(b"t/", None, ScanLimits::new(100, 1 << 20)?)?;
//! assert_eq!(page.records.len(), 1);
//! # Ok(()) }
//! ```
//!
//! Errors reach callers as [`strata_store::StoreError::Backend`] with backend `postgres`,
//! whose source is a [`PgError`]; the driver's own error types stay private.
#![deny(missing_docs)]

mod conninfo;
mod error;
mod keys;
mod lease;
mod libpq;
mod pool;
mod sql;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

pub use conninfo::{is_connection_string, redact as redact_url};
pub use error::PgError;
pub use store::receipt::{Receipt, ReceiptCheck};
pub use store::replica::{ReplicaStore, StaleReads};
pub use store::{
    connect_store, is_postgres_url, PgOptions, PgStore, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_LOCK_WAIT, DEFAULT_STATEMENT_TIMEOUT, DEFAULT_TABLE,
    DIRECT_PARAM, POOLER_PARAM, REPLICA_PARAM, TABLE_PARAM,
};

/// The backend name reported by [`strata_store::Backend::name`] and in errors.
pub const BACKEND: &str = "postgres";
