//! [`PgOptions`], the URL parameters strata reads, and their defaults.

use crate::error::PgError;
use std::time::Duration;
use strata_store::Result;

/// The default table name.
pub const DEFAULT_TABLE: &str = "strata_kv";

/// The URL query parameter that names the table (`postgres://…/db?strata_table=NAME`).
pub const TABLE_PARAM: &str = "strata_table";

/// The URL parameter that says the host is a transaction-mode pooler
/// (`strata_pooler=transaction`, e.g. PgBouncer's `pool_mode = transaction`): nothing is
/// prepared or set per session, every statement is sent whole with its parameters.
pub const POOLER_PARAM: &str = "strata_pooler";

/// The URL parameter that names the server behind a pooler (`strata_direct=HOST:PORT`,
/// several comma-separated for failover): the store lease and named leases, which hold
/// a session advisory lock for their whole life, connect there.
pub const DIRECT_PARAM: &str = "strata_direct";

/// The URL parameter that names a read replica (`strata_replica=HOST:PORT[,…]`, a hot
/// standby, the other parameters as for the store): reads that tolerate staleness, through
/// [`PgStore::stale_reads`](crate::PgStore::stale_reads) only.
pub const REPLICA_PARAM: &str = "strata_replica";

/// Default of the URL's `connect_timeout` (seconds): opening the TCP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `strata_handshake_timeout` (seconds): the startup and authentication
/// exchange once the TCP connection is open.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `strata_statement_timeout` (seconds): one operation (a read, a page, a
/// batch), on the client and as the sessions' server-side `statement_timeout`.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of `strata_lock_wait` (seconds): how long a batch waits for a lock — in
/// particular for another process's exclusive store lease — before failing.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(30);

/// How [`PgStore::connect_with`](crate::PgStore::connect_with) opens a store.
#[derive(Debug, Clone)]
pub struct PgOptions {
    pub(super) table: String,
    pub(super) max_connections: usize,
    pub(super) create_table: bool,
    pub(super) drop_table_on_drop: bool,
    pub(super) session_functions: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            table: DEFAULT_TABLE.to_string(),
            max_connections: 8,
            create_table: true,
            drop_table_on_drop: false,
            session_functions: true,
        }
    }
}

impl PgOptions {
    /// The defaults: table [`DEFAULT_TABLE`], at most 8 connections, the table created
    /// when missing, kept on drop.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table holding the store (a lowercase SQL identifier, checked on connect). Each
    /// table is an independent store; several stores may share one database.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.table = name.into();
        self
    }

    /// The most connections the store opens at once (at least 1). Operations beyond it
    /// wait for a free connection.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Whether connecting creates the table when it is missing (default `true`). When
    /// `false`, a missing table is [`StoreError::NotFound`](strata_store::StoreError::NotFound) — for tools that must not
    /// create a store by looking at it.
    pub fn create_table(mut self, create: bool) -> Self {
        self.create_table = create;
        self
    }

    /// Drops the table — every record of the store — when the [`PgStore`](crate::PgStore) is dropped.
    /// For tests that need a scratch store; never for real data.
    pub fn dangerous_drop_table_on_drop(mut self) -> Self {
        self.drop_table_on_drop = true;
        self
    }

    /// Whether each connection creates two session-local PL/pgSQL functions (in its own
    /// `pg_temp` schema) through which an ordinary writer's batch is one call of one
    /// prepared statement (default `true`). Without them — or when the server refuses to
    /// create them: no `TEMPORARY` privilege on the database, no `plpgsql` — a batch is
    /// one message of three statements. The guarantees are the same either way; the
    /// function is cheaper for the server and the client.
    pub fn session_functions(mut self, on: bool) -> Self {
        self.session_functions = on;
        self
    }

    /// No effect (kept so that code setting it still builds). It turned on a path that
    /// sent an ordinary writer's one-document batch as one plain SQL statement carrying
    /// its locks and checks before the session function; issue 24 measured it (session 20:
    /// more server instructions per put than the session function, no faster for one
    /// writer, slower with four writers in 9 of 12 runs; BENCHMARKS.md) and it was off by
    /// default, so session 25 removed it: every ordinary writer's batch is one call of the
    /// session function (or one message without them), one round trip either way.
    #[deprecated(
        since = "0.1.0",
        note = "no effect: the session function is the one-round-trip write path"
    )]
    pub fn one_statement(self, on: bool) -> Self {
        let _ = on;
        self
    }

    /// The configured table name.
    pub fn table_name(&self) -> &str {
        &self.table
    }
}

/// A timeout parameter: seconds, a positive decimal number.
pub(super) fn parse_secs(name: &str, value: &str) -> Result<Duration> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            PgError::InvalidUrl {
                reason: format!("`{name}` must be a positive number of seconds"),
            }
            .into()
        })
}
