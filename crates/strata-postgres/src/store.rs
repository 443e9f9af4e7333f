//! [`PgStore`]: the store trait over one PostgreSQL table.

pub(crate) mod function;
mod hints;
pub(crate) mod one_message;
pub(crate) mod receipt;
pub(crate) mod replica;
mod write;

use crate::conninfo;
use crate::error::PgError;
use crate::keys::{successor, LockIds};
use crate::lease::{self, LeaseState};
use crate::pool::{Conn, Failure, Pool, Timeouts};
use crate::sql;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use strata_store::{
    escape_key, Backend, Capabilities, CrossProcessLease, HeldLease, KvRead, NamedLease, Offer,
    PageBuilder, Result, ScanLimits, ScanPage, Store, StoreError, Visit, VisitEnd,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Config;

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
/// [`PgStore::stale_reads`] only.
pub const REPLICA_PARAM: &str = "strata_replica";

/// Pages asking for at most this many rows are fetched with one plain query; larger ones
/// through a cursor (portal) in chunks of this many rows, so a page with a huge record
/// limit and a small byte budget does not make the server list the whole prefix. (The
/// server sends no value beyond the byte budget, so a large chunk costs only keys and
/// lengths; 8,192 covers a certification's 4,096-record batches in one query.)
const FETCH_ROWS: usize = 8192;

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

/// How [`PgStore::connect_with`] opens a store.
#[derive(Debug, Clone)]
pub struct PgOptions {
    table: String,
    max_connections: usize,
    create_table: bool,
    drop_table_on_drop: bool,
    session_functions: bool,
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
    /// `false`, a missing table is [`StoreError::NotFound`] — for tools that must not
    /// create a store by looking at it.
    pub fn create_table(mut self, create: bool) -> Self {
        self.create_table = create;
        self
    }

    /// Drops the table — every record of the store — when the [`PgStore`] is dropped.
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

    /// The configured table name.
    pub fn table_name(&self) -> &str {
        &self.table
    }
}

/// The PostgreSQL backend: one table `(k BYTEA PRIMARY KEY, v BYTEA NOT NULL)` holds the
/// whole key space of a store, shared by every process and machine connected to it.
///
/// * Reads are single statements (one consistent snapshot each).
/// * A scan sends values only for the records the page takes: the server
///   computes the running byte total and the client's [`PageBuilder`] decides with key and
///   value *length* before any value is copied, so an oversized record is reported without
///   its value ever crossing the wire.
/// * [`KvWrite::apply`](strata_store::KvWrite::apply) runs one transaction that first takes a transaction-scoped
///   advisory lock on every key the batch reads or writes (in one global order, so
///   transactions cannot deadlock each other), then checks the preconditions and writes.
///   Two processes racing to claim an absent key therefore produce exactly one winner, and
///   the order of commits is the order of the batches. Batches touching many keys take one
///   table-wide lock instead. Deadlocks and serialization failures caused by other clients
///   of the table are retried a bounded number of times.
/// * Batches of the store lease's holder commit with `synchronous_commit = off`;
///   [`KvWrite::flush`](strata_store::KvWrite::flush) makes them durable (see there). Every other committed batch is
///   durable at once, so `flush` does nothing for them.
/// * Its connections turn off sequential scans, bitmap scans and sorts for their own
///   session, so every page is an in-order walk of the primary-key index (a generic plan
///   would otherwise sort the whole rest of the range for each page).
///
/// Connections use TLS as the URL's `sslmode` says (default `prefer`; `require`,
/// `verify-ca` and `verify-full` need the cargo feature `tls`, see the README).
pub struct PgStore {
    pool: Pool,
    lease: Arc<LeaseState>,
    table: String,
    locks: LockIds,
    drop_table_on_drop: bool,
    /// The lease holder committed batches without waiting for the WAL flush since the
    /// last [`KvWrite::flush`](strata_store::KvWrite::flush).
    unflushed: AtomicBool,
    /// The bytes of keys this handle wrote last (module `hints`): a read-modify-write of
    /// one of them decides without reading it.
    hints: hints::Hints,
    /// The statements' text, for connections through a transaction-mode pooler.
    texts: sql::Texts,
    /// The read replica (`strata_replica`), read only through [`PgStore::stale_reads`].
    replica: Option<Arc<replica::ReplicaSlot>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.pool.target())
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// True when `s` looks like a PostgreSQL connection URL (`postgres://` or
/// `postgresql://`), as opposed to a filesystem path.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// Connects to the store at `url` (table [`DEFAULT_TABLE`] unless the URL has a
/// `strata_table=NAME` parameter), creating the table when missing, and wraps it in a
/// [`Store`] handle.
pub fn connect_store(url: &str) -> Result<Store> {
    PgStore::connect(url).map(Store::new)
}

impl PgStore {
    /// Connects with the default [`PgOptions`] (the URL's `strata_table` parameter, when
    /// present, names the table).
    pub fn connect(url: &str) -> Result<PgStore> {
        Self::connect_with(url, PgOptions::new())
    }

    /// Connects with `options`. A `strata_table=NAME` parameter in the URL overrides
    /// [`PgOptions::table`].
    ///
    /// Errors: [`StoreError::Backend`] (backend `postgres`) wrapping a [`PgError`] for a
    /// bad URL, table name or option, an unreachable server or a failed statement;
    /// [`StoreError::NotFound`] for a missing table when table creation is off.
    pub fn connect_with(url: &str, options: PgOptions) -> Result<PgStore> {
        let mut parsed = conninfo::parse(url)?;
        // The service file, `PGPASSWORD` and the password file, as libpq reads them.
        crate::libpq::complete(&mut parsed, &crate::libpq::ProcessEnv)?;
        let table = parsed
            .take_strata(TABLE_PARAM)?
            .unwrap_or_else(|| options.table.clone());
        check_table_name(&table)?;
        let secs = |name: &str, value: Option<String>, default: Duration| match value {
            None => Ok(default),
            Some(v) => parse_secs(name, &v),
        };
        let handshake = parsed.take_strata("strata_handshake_timeout")?;
        let statement = parsed.take_strata("strata_statement_timeout")?;
        let lock_wait = parsed.take_strata("strata_lock_wait")?;
        let pooled = match parsed.take_strata(POOLER_PARAM)?.as_deref() {
            None | Some("none") | Some("session") => false,
            Some("transaction") => true,
            Some(other) => {
                return Err(PgError::InvalidUrl {
                    reason: format!(
                        "`{POOLER_PARAM}` is `{}`; use `transaction` (a transaction-mode pooler such as PgBouncer's `pool_mode = transaction`) or `none`",
                        conninfo::shown_value(other)
                    ),
                }
                .into())
            }
        };
        let direct = parsed.take_strata(DIRECT_PARAM)?;
        let replica = parsed.take_strata(REPLICA_PARAM)?;
        let timeouts = Timeouts {
            connect: secs(
                "connect_timeout",
                parsed.take_param("connect_timeout"),
                DEFAULT_CONNECT_TIMEOUT,
            )?,
            handshake: secs(
                "strata_handshake_timeout",
                handshake,
                DEFAULT_HANDSHAKE_TIMEOUT,
            )?,
            statement: secs(
                "strata_statement_timeout",
                statement,
                DEFAULT_STATEMENT_TIMEOUT,
            )?,
            lock_wait: secs("strata_lock_wait", lock_wait, DEFAULT_LOCK_WAIT)?,
        };
        if let Some((key, _)) = parsed.strata.first() {
            return Err(PgError::InvalidUrl {
                reason: format!("unknown strata parameter `{key}`; the known ones are `{TABLE_PARAM}`, `strata_handshake_timeout`, `strata_statement_timeout`, `strata_lock_wait`, `{POOLER_PARAM}`, `{DIRECT_PARAM}` and `{REPLICA_PARAM}`"),
            }
            .into());
        }
        let (ssl_mode, connector) = parsed.take_tls()?.connector()?;
        if options.max_connections == 0 {
            return Err(PgError::InvalidOption {
                reason: "max_connections must be at least 1".into(),
            }
            .into());
        }
        // The driver sees the parameters without the password (so none of its messages can
        // show it); the password is set on the parsed configuration.
        let build = |parsed: &conninfo::Parsed| -> Result<Config> {
            let mut config: Config =
                parsed
                    .conninfo()
                    .parse()
                    .map_err(|e: tokio_postgres::Error| PgError::InvalidUrl {
                        reason: e.to_string(),
                    })?;
            if let Some(password) = &parsed.password {
                config.password(password);
            }
            config.connect_timeout(timeouts.connect);
            config.ssl_mode(ssl_mode);
            Ok(config)
        };
        let config = build(&parsed)?;
        // The same parameters with other hosts (`strata_direct`, `strata_replica`).
        let elsewhere = |param: &str, hosts: &str, what: &str, any: bool| -> Result<Config> {
            let mut d = parsed.clone();
            d.take_param("host");
            d.take_param("hostaddr");
            d.take_param("port");
            if any {
                // A replica is a standby: whatever the URL asks of the primary.
                d.take_param("target_session_attrs");
            }
            let (mut names, mut ports) = (Vec::new(), Vec::new());
            for hp in hosts.split(',') {
                let (h, p) = hp.trim().rsplit_once(':').unwrap_or((hp.trim(), "5432"));
                if h.is_empty() || p.parse::<u16>().is_err() {
                    return Err(PgError::InvalidUrl {
                        reason: format!(
                            "`{param}` is `{}`; use HOST:PORT[,HOST:PORT…] ({what})",
                            conninfo::shown_value(hosts)
                        ),
                    }
                    .into());
                }
                names.push(h.to_string());
                ports.push(p.to_string());
            }
            d.params.push(("host".into(), names.join(",")));
            d.params.push(("port".into(), ports.join(",")));
            build(&d)
        };
        let direct = direct
            .map(|h| elsewhere(DIRECT_PARAM, &h, "the server behind the pooler", false))
            .transpose()?;
        let replica = replica
            .map(|h| {
                elsewhere(
                    REPLICA_PARAM,
                    &h,
                    "a hot standby for stale-tolerant reads",
                    true,
                )
            })
            .transpose()?;
        // Opened on first use: a replica that is down (or behind the table's creation)
        // fails the stale reads, never the store.
        let replica = replica.map(|config| {
            Arc::new(replica::ReplicaSlot::new(
                config,
                connector.clone(),
                timeouts,
                table.clone(),
                PgOptions {
                    create_table: false,
                    drop_table_on_drop: false,
                    ..options.clone()
                },
            ))
        });
        let sessions = crate::pool::Sessions {
            functions: options.session_functions,
            pooled,
            direct,
        };
        Self::open(
            config, connector, timeouts, table, options, sessions, replica,
        )
    }

    /// Opens the store at `config` (see [`PgStore::connect_with`]).
    pub(crate) fn open(
        config: Config,
        connector: crate::tls::Connector,
        timeouts: Timeouts,
        table: String,
        options: PgOptions,
        sessions: crate::pool::Sessions,
        replica: Option<Arc<replica::ReplicaSlot>>,
    ) -> Result<PgStore> {
        let target = describe(&config);
        let pool = Pool::new(
            config,
            connector,
            timeouts,
            target.clone(),
            table.clone(),
            options.max_connections,
            sessions,
        )?;

        // Create (or find) the table on a first, raw connection; the pool's connections
        // prepare their statements against it.
        let mut raw = pool.connect_raw()?;
        // Before anything relies on a session (a prepared statement, a lease): refuse a
        // transaction-mode pooler, which would hand this connection's session to others.
        // (Declared with `strata_pooler=transaction`, nothing is kept in a session.)
        let second = pool.connect_raw()?;
        let detected = match pool.pooled() {
            true => None,
            false => pool
                .block_on(crate::pool::transaction_pooler(&raw.client, &second.client))
                .and_then(|r| r.map_err(Failure::Pg))
                .map_err(|f| failure_error(f, "connect", &table, &target, pool.timeouts()))?,
        };
        if let Some(evidence) = detected {
            return Err(PgError::TransactionPooler {
                target: target.clone(),
                evidence,
            }
            .into());
        }
        let setup = pool.block_on(async {
            let client = &mut raw.client;
            let shape = client
                .query_typed(sql::TABLE_SHAPE, &[(&table, Type::TEXT)])
                .await?;
            if let Some(row) = shape.first() {
                let relkind: String = row.try_get(0)?;
                let columns: Vec<String> = row.try_get(1)?;
                let key: Vec<String> = row.try_get(2)?;
                if let Some(problem) = sql::shape_problem(&relkind, &columns, &key) {
                    return Err(Failure::from(PgError::TableShape {
                        table: table.clone(),
                        target: target.clone(),
                        problem,
                    }));
                }
                return Ok(None);
            }
            if !options.create_table {
                // Missing: where it was looked for, and where it would be created.
                let rows = client.query_typed(sql::SCHEMAS, &[]).await?;
                let row = rows.first().ok_or_else(|| {
                    Failure::from(PgError::Unexpected {
                        op: "connect",
                        table: table.clone(),
                        key: "(the search path)".into(),
                    })
                })?;
                let current: Option<String> = row.try_get(0)?;
                let searched: Vec<String> = row.try_get(1)?;
                return Ok(Some((current, searched)));
            }
            // Serialize concurrent creators (CREATE TABLE IF NOT EXISTS can still race on
            // the catalog) with the table-wide lock.
            let locks = LockIds::new(&table);
            let tx = client.transaction().await?;
            tx.query_typed(
                "SELECT pg_advisory_xact_lock($1::int8)",
                &[(&locks.table, Type::INT8)],
            )
            .await?;
            tx.batch_execute(&sql::create_table(&table)).await?;
            tx.commit().await?;
            tracing::info!(%target, %table, "created the postgres store table");
            Ok(None)
        });
        let missing = flatten(setup)
            .map_err(|f| failure_error(f, "connect", &table, &target, pool.timeouts()))?;
        if let Some((current, searched)) = missing {
            return Err(table_not_found(&table, &target, current, &searched));
        }
        // The first connection becomes the pool's first: preparing its statements now
        // makes a table of the wrong shape fail here, not on first use.
        pool.adopt(raw)?;
        if options.max_connections > 1 {
            pool.adopt(second)?;
        } else {
            drop(second);
            pool.settle();
        }
        let texts = sql::Texts::new(&table);
        Ok(PgStore {
            pool,
            lease: Arc::default(),
            locks: LockIds::new(&table),
            table,
            drop_table_on_drop: options.drop_table_on_drop,
            unflushed: AtomicBool::new(false),
            hints: hints::Hints::new(true),
            texts,
            replica,
        })
    }

    /// The table holding this store.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Reads that tolerate staleness, from the read replica the URL names
    /// (`strata_replica=HOST:PORT`); `None` without one. The store's own reads — and
    /// every read that decides a write (a read-modify-write's, a precondition's, a
    /// lease's or the fence's) — always go to the primary; see [`StaleReads`](crate::StaleReads)
    /// for the staleness rule.
    pub fn stale_reads(&self) -> Option<crate::StaleReads<'_>> {
        self.replica.as_ref().map(|slot| crate::StaleReads { slot })
    }

    /// The read replica as a store of its own ([`ReplicaStore`](crate::ReplicaStore)):
    /// a backend for a read-only command that tolerates staleness (it refuses every
    /// write); `None` when the URL names no replica. It lives on after this handle.
    pub fn replica_store(&self) -> Option<crate::ReplicaStore> {
        self.replica.as_ref().map(|slot| crate::ReplicaStore {
            slot: Arc::clone(slot),
        })
    }

    /// True when the server this handle's session is on is a hot standby (in recovery:
    /// read-only, possibly behind its primary) — a URL naming a standby without
    /// `target_session_attrs=read-write`.
    pub fn is_standby(&self) -> Result<bool> {
        self.with_conn("recovery state", async |conn| {
            let rows = conn
                .client
                .query_typed("SELECT pg_is_in_recovery()", &[])
                .await?;
            match rows.first() {
                Some(r) => Ok(r.try_get::<_, bool>(0)?),
                None => Ok(false),
            }
        })
    }

    /// The server that answers this handle's reads and writes, as `HOST:PORT` — with a
    /// multi-host URL, the one of its hosts that accepted the session (the primary). The
    /// server's own address (`inet_server_addr()`, `inet_server_port()`), so through a
    /// pooler it is the server behind it; over a Unix socket, [`PgStore::target`].
    pub fn answering_server(&self) -> Result<String> {
        let found = self.with_conn("server address", async |conn| {
            let rows = conn.client.query_typed(sql::SERVER_ADDRESS, &[]).await?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let host: Option<String> = row.try_get(0)?;
            let port: Option<i32> = row.try_get(1)?;
            Ok(host.zip(port))
        })?;
        Ok(match found {
            Some((host, port)) if host.contains(':') => format!("[{host}]:{port}"),
            Some((host, port)) => format!("{host}:{port}"),
            None => self.target().to_string(),
        })
    }

    /// Where the store lives (host, port, database, user; never the password).
    pub fn target(&self) -> &str {
        self.pool.target()
    }

    /// Runs `f` on a pooled connection under the statement timeout; failures become
    /// store errors naming the operation and the table.
    fn with_conn<T>(
        &self,
        op: &'static str,
        f: impl AsyncFnOnce(&mut Conn) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        self.pool.with(f).map_err(|e| self.error(e, op))
    }

    fn error(&self, failure: Failure, op: &'static str) -> StoreError {
        let lock_wait =
            matches!(&failure, Failure::Pg(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE));
        let error = failure_error(
            failure,
            op,
            &self.table,
            self.pool.target(),
            self.pool.timeouts(),
        );
        if !lock_wait {
            return error;
        }
        // The server does not say who held the lock: ask it who holds one on the table.
        let holder = self
            .pool
            .with(async |conn| Ok(crate::pool::lock_holder(&conn.client, &self.table).await));
        match (error, holder) {
            (StoreError::Backend { backend, source }, Ok(Some(holder))) => {
                match source.downcast::<PgError>() {
                    Ok(pg) => match *pg {
                        PgError::LockTimeout {
                            op, table, after, ..
                        } => PgError::LockTimeout {
                            op,
                            table,
                            after,
                            holder,
                        }
                        .into(),
                        other => other.into(),
                    },
                    Err(source) => StoreError::Backend { backend, source },
                }
            }
            (error, _) => error,
        }
    }

    async fn scan_rows(
        &self,
        conn: &mut Conn,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
    ) -> std::result::Result<ScanPage, Failure> {
        let mut page = PageBuilder::new(limits);
        let query = PageQuery::new(prefix, after, limits);
        let Some(stmt) = query.statement(conn).cloned() else {
            // Through a transaction pooler: one unnamed statement for the whole page (a
            // portal would outlive the statement's transaction); rows beyond the byte
            // budget carry only their keys and lengths.
            let rows = conn
                .client
                .query_typed(query.text(&self.texts), &query.typed_params())
                .await?;
            self.offer_rows(&mut page, rows)?;
            return Ok(page.finish());
        };
        let stmt = &stmt;
        let params = query.params();
        if query.row_limit <= FETCH_ROWS as i64 {
            let rows = conn.client.query(stmt, &params).await?;
            self.offer_rows(&mut page, rows)?;
        } else {
            let tx = conn
                .client
                .build_transaction()
                .read_only(true)
                .start()
                .await?;
            let portal = tx.bind(stmt, &params).await?;
            loop {
                let rows = tx.query_portal(&portal, FETCH_ROWS as i32).await?;
                let full = rows.len() == FETCH_ROWS;
                if !self.offer_rows(&mut page, rows)? || !full {
                    break;
                }
            }
            tx.commit().await?;
        }
        Ok(page.finish())
    }

    /// [`KvRead::scan_visit`] over the rows of one page query: the records the page takes
    /// (decided as [`PageBuilder`] decides, before any is visited, so that the errors are
    /// the same as [`KvRead::scan`]'s) are handed over as slices of the received rows.
    fn visit_rows(
        &self,
        rows: &[tokio_postgres::Row],
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> std::result::Result<VisitEnd, Failure> {
        let (max_records, max_bytes) = (limits.max_records(), limits.max_bytes());
        let mut taken = 0;
        let mut used = 0usize;
        let mut more = false;
        for row in rows {
            let key: &[u8] = row.try_get(0)?;
            let len: i32 = row.try_get(1)?;
            let size = key
                .len()
                .saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
            if size > max_bytes {
                if taken > 0 {
                    more = true;
                    break;
                }
                return Err(Failure::from(StoreError::RecordTooLarge {
                    key: key.to_vec(),
                    size,
                    limit: max_bytes,
                }));
            }
            if taken >= max_records || used.saturating_add(size) > max_bytes {
                more = true;
                break;
            }
            used += size;
            taken += 1;
        }
        for (i, row) in rows.iter().take(taken).enumerate() {
            let key: &[u8] = row.try_get(0)?;
            let value: Option<&[u8]> = row.try_get(2)?;
            let Some(value) = value else {
                // The server withheld a value the page takes: the two disagree about the
                // limits, which must not happen.
                return Err(Failure::from(PgError::Unexpected {
                    op: "scan",
                    table: self.table.clone(),
                    key: escape_key(key),
                }));
            };
            if visit(key, value) == Visit::Stop {
                return Ok(VisitEnd {
                    records: i + 1,
                    more: true,
                });
            }
        }
        Ok(VisitEnd {
            records: taken,
            more,
        })
    }

    /// Feeds rows `(k, octet_length(v), v or NULL)` to the page builder; false once it
    /// said stop.
    fn offer_rows(
        &self,
        page: &mut PageBuilder,
        rows: Vec<tokio_postgres::Row>,
    ) -> std::result::Result<bool, Failure> {
        for row in rows {
            let key: Vec<u8> = row.try_get(0)?;
            let len: i32 = row.try_get(1)?;
            match page.offer(&key, usize::try_from(len).unwrap_or(usize::MAX))? {
                Offer::Stop => return Ok(false),
                Offer::Take => {
                    let value: Option<Vec<u8>> = row.try_get(2)?;
                    match value {
                        Some(v) => page.push(key, v),
                        // The server withheld a value the builder takes: the two
                        // disagree about the limits, which must not happen.
                        None => {
                            return Err(Failure::from(PgError::Unexpected {
                                op: "scan",
                                table: self.table.clone(),
                                key: escape_key(&key),
                            }))
                        }
                    }
                }
            }
        }
        Ok(true)
    }
}

/// The statement and parameters of one page query.
struct PageQuery<'a> {
    lower: &'a [u8],
    strict: bool,
    upper: Option<Vec<u8>>,
    max_bytes: i64,
    max_records: i64,
    /// One row past the record limit tells whether there is more.
    row_limit: i64,
}

impl<'a> PageQuery<'a> {
    fn new(prefix: &'a [u8], after: Option<&'a [u8]>, limits: ScanLimits) -> Self {
        let (lower, strict) = match after {
            Some(a) if a >= prefix => (a, true),
            _ => (prefix, false),
        };
        PageQuery {
            lower,
            strict,
            upper: successor(prefix),
            max_bytes: clamp(limits.max_bytes()),
            max_records: clamp(limits.max_records()),
            row_limit: clamp(limits.max_records().saturating_add(1)),
        }
    }

    /// The prepared statement (none through a transaction pooler).
    fn statement<'c>(&self, conn: &'c Conn) -> Option<&'c tokio_postgres::Statement> {
        let s = conn.stmts.as_ref()?;
        Some(&s.scan[usize::from(self.strict)][usize::from(self.upper.is_some())])
    }

    /// The statement's text (through a transaction pooler).
    fn text<'t>(&self, texts: &'t sql::Texts) -> &'t str {
        &texts.scan[usize::from(self.strict)][usize::from(self.upper.is_some())]
    }

    /// The parameters with their types, for an unnamed statement.
    fn typed_params(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&self.lower, Type::BYTEA)];
        if let Some(u) = &self.upper {
            params.push((u, Type::BYTEA));
        }
        params.extend([
            (&self.max_bytes as &(dyn ToSql + Sync), Type::INT8),
            (&self.max_records, Type::INT8),
            (&self.row_limit, Type::INT8),
        ]);
        params
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&self.lower];
        if let Some(u) = &self.upper {
            params.push(u);
        }
        params.extend([
            &self.max_bytes as &(dyn ToSql + Sync),
            &self.max_records,
            &self.row_limit,
        ]);
        params
    }
}

/// A pool result whose value is itself a connection-level result.
fn flatten<T>(
    r: std::result::Result<std::result::Result<T, Failure>, Failure>,
) -> std::result::Result<T, Failure> {
    r.and_then(|inner| inner)
}

/// The store error for a failed operation `op` on `table`.
fn failure_error(
    failure: Failure,
    op: &'static str,
    table: &str,
    target: &str,
    timeouts: Timeouts,
) -> StoreError {
    match failure {
        Failure::Store(e) => e,
        Failure::Timeout => PgError::Timeout {
            phase: "statement",
            target: target.to_string(),
            after: timeouts.client_deadline(),
        }
        .into(),
        Failure::Lost(e) => PgError::ConnectionLost {
            op,
            table: table.to_string(),
            target: target.to_string(),
            source: Box::new(e),
        }
        .into(),
        Failure::Pg(e) if e.code() == Some(&SqlState::QUERY_CANCELED) => PgError::Timeout {
            phase: "statement",
            target: target.to_string(),
            after: timeouts.statement,
        }
        .into(),
        Failure::Pg(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => PgError::LockTimeout {
            op,
            table: table.to_string(),
            after: timeouts.lock_wait,
            holder: "another session".into(),
        }
        .into(),
        Failure::Pg(e) => PgError::Query {
            op,
            table: table.to_string(),
            source: Box::new(e),
        }
        .into(),
    }
}

/// A timeout parameter: seconds, a positive decimal number.
fn parse_secs(name: &str, value: &str) -> Result<Duration> {
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

/// A `usize` limit as the `int8` the SQL compares with.
fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn check_table_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && !name.as_bytes()[0].is_ascii_digit()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(PgError::InvalidTable {
            name: name.to_string(),
        }
        .into())
    }
}

/// [`StoreError::NotFound`] of a missing store table: where it was looked for (the
/// schemas of the connection's search path), where it would be created (`current`, the
/// first of them that exists) and what creates it.
fn table_not_found(
    table: &str,
    target: &str,
    current: Option<String>,
    searched: &[String],
) -> StoreError {
    let searched = match searched {
        [] => "no schema (the connection's search_path names none that exists)".to_string(),
        [one] => format!("schema `{one}`"),
        many => format!(
            "schemas {}",
            many.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let created_in = match current {
        Some(schema) => format!("in schema `{schema}` "),
        None => String::new(),
    };
    StoreError::NotFound {
        path: format!("{target} table {table}").into(),
        what: format!("postgres table `{table}` in {target} (searched {searched})"),
        remedy: format!("it is created {created_in}by the first connection with table creation on (`PgStore::connect`, the default: the application's first start) or by `strata copy --from SOURCE --to` this URL; strata's read, migrate and admin commands never create it (check the URL's database and `strata_table`)"),
    }
}

/// `postgres://host:port[,…]/database as user`, for messages (never the password).
pub(crate) fn describe(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            };
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_string()
    } else {
        hosts.join(",")
    };
    format!(
        "postgres://{hosts}/{} as {}",
        config.get_dbname().unwrap_or("(default database)"),
        config.get_user().unwrap_or("(default user)")
    )
}

impl KvRead for PgStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_conn("get", async |conn| {
            let row = match &conn.stmts {
                Some(s) => conn.client.query_opt(&s.get, &[&key]).await?,
                None => conn
                    .client
                    .query_typed(&self.texts.get, &[(&key, Type::BYTEA)])
                    .await?
                    .into_iter()
                    .next(),
            };
            Ok(match row {
                Some(row) => Some(row.try_get(0)?),
                None => None,
            })
        })
    }

    /// Without copying a record: the page's rows are received whole (one query), and
    /// keys and values are handed over as slices of them. Pages larger than one query's
    /// rows are fetched as a page first (the server computes the running byte total, so an
    /// oversized record's value never crosses the wire).
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let query = PageQuery::new(prefix, after, limits);
        if query.row_limit > FETCH_ROWS as i64 {
            let page = self.with_conn("scan", async |conn| {
                self.scan_rows(conn, prefix, after, limits).await
            })?;
            return Ok(page.visit(visit));
        }
        let rows = self.with_conn("scan", async |conn| {
            Ok(match query.statement(conn) {
                Some(stmt) => conn.client.query(stmt, &query.params()).await?,
                None => {
                    conn.client
                        .query_typed(query.text(&self.texts), &query.typed_params())
                        .await?
                }
            })
        })?;
        self.visit_rows(&rows, limits, visit)
            .map_err(|e| self.error(e, "scan"))
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            // Every read is a statement on the server.
            remote_reads: true,
            cross_process_lease: Some(self),
            write_epoch: None,
        }
    }
}

impl PgStore {
    /// True when at least one key starts with `prefix`: one indexed probe.
    pub fn prefix_exists_probe(&self, prefix: &[u8]) -> Result<bool> {
        self.with_conn("prefix_exists", async |conn| {
            let upper = successor(prefix);
            let rows = match (&conn.stmts, &upper) {
                (Some(s), Some(upper)) => {
                    conn.client.query(&s.exists[1], &[&prefix, upper]).await?
                }
                (Some(s), None) => conn.client.query(&s.exists[0], &[&prefix]).await?,
                (None, Some(upper)) => {
                    conn.client
                        .query_typed(
                            &self.texts.exists[1],
                            &[(&prefix, Type::BYTEA), (upper, Type::BYTEA)],
                        )
                        .await?
                }
                (None, None) => {
                    conn.client
                        .query_typed(&self.texts.exists[0], &[(&prefix, Type::BYTEA)])
                        .await?
                }
            };
            match rows.first() {
                Some(row) => Ok(row.try_get(0)?),
                None => Ok(false),
            }
        })
    }
}

impl Backend for PgStore {
    fn name(&self) -> &'static str {
        crate::BACKEND
    }
}

impl CrossProcessLease for PgStore {
    /// The store lease across processes and machines: see the `lease` module. `wait`
    /// defaults to the lock wait (`strata_lock_wait`).
    fn acquire_lease(&self, holder: &str, wait: Option<Duration>) -> Result<Box<dyn HeldLease>> {
        let wait = wait.unwrap_or(self.pool.timeouts().lock_wait);
        let held = lease::acquire(
            &self.pool,
            &self.lease,
            &self.table,
            self.locks.lease,
            holder,
            wait,
        )?;
        Ok(Box::new(held))
    }

    /// A named lease across processes and machines (see the `lease` module): its own lock
    /// and record; the store's writers are not held up.
    fn acquire_named_lease(&self, name: &str, holder: &str, wait: Duration) -> Result<NamedLease> {
        Ok(
            match lease::acquire_named(&self.pool, &self.table, name, holder, wait)? {
                Ok(held) => NamedLease::Held(Box::new(held)),
                // The record's expiry is not renewed for named leases (the lock session
                // decides), so it is not reported.
                Err(who) => NamedLease::Busy {
                    holder: who.map(|(holder, _, _)| holder).unwrap_or_else(|| {
                        "another process (its lease record could not be read)".into()
                    }),
                },
            },
        )
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if !self.drop_table_on_drop {
            return;
        }
        let drop_sql = sql::drop_table(&self.table);
        let result = self.pool.with(async |conn| {
            conn.client.batch_execute(&drop_sql).await?;
            Ok(())
        });
        match result {
            Ok(()) => {
                tracing::debug!(table = %self.table, "dropped the scratch postgres table")
            }
            Err(e) => {
                let e = self.error(e, "drop table");
                tracing::warn!(table = %self.table, error = %e, "could not drop the scratch postgres table")
            }
        }
    }
}
