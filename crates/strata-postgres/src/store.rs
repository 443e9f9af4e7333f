//! [`PgStore`]: the store trait over one PostgreSQL table.

pub(crate) mod function;
mod hints;
mod locked;
pub(crate) mod one_message;
mod options;
mod params;
mod pipeline;
mod read;
pub(crate) mod receipt;
pub(crate) mod replica;
mod write;

use crate::conninfo;
use crate::error::PgError;
use crate::keys::LockIds;
use crate::lease::{self, LeaseState};
use crate::pool::{Conn, Failure, Pool, Timeouts};
use crate::sql;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use strata_store::{Backend, CrossProcessLease, HeldLease, NamedLease, Result, Store, StoreError};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::Config;

use options::parse_secs;
pub use options::{
    PgOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_LOCK_WAIT,
    DEFAULT_STATEMENT_TIMEOUT, DEFAULT_TABLE, DIRECT_PARAM, POOLER_PARAM, REPLICA_PARAM,
    TABLE_PARAM,
};

/// Pages asking for at most this many rows are fetched with one plain query; larger ones
/// through a cursor (portal) in chunks of this many rows, so a page with a huge record
/// limit and a small byte budget does not make the server list the whole prefix. (The
/// server sends no value beyond the byte budget, so a large chunk costs only keys and
/// lengths; 8,192 covers a certification's 4,096-record batches in one query.)
const FETCH_ROWS: usize = 8192;

/// The PostgreSQL backend: one table `(k BYTEA PRIMARY KEY, v BYTEA NOT NULL)` holds the
/// whole key space of a store, shared by every process and machine connected to it.
///
/// * Reads are single statements (one consistent snapshot each).
/// * A scan sends values only for the records the page takes: the server
///   computes the running byte total and the client's [`PageBuilder`](strata_store::PageBuilder) decides with key and
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
    /// Round trips the write primitive spent: batches sent, and keys read before deciding
    /// (for the tests that pin how many a write takes).
    round_trips: write::RoundTrips,
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
                        // The driver's own words ("invalid connection string") name
                        // nothing; its source says which option or value is wrong.
                        reason: match std::error::Error::source(&e) {
                            Some(cause) => format!("{e}: {cause}"),
                            None => e.to_string(),
                        },
                    })?;
            if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
                // The driver would say "both host and hostaddr are missing" at connect
                // time, under a target it shows as localhost; say it here, plainly.
                return Err(PgError::InvalidUrl {
                    reason: "it names no server host".into(),
                }
                .into());
            }
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
        let target = crate::pool::describe(&config);
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
            round_trips: write::RoundTrips::default(),
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
        // The write paths turn a rejection into its precondition's error before it gets
        // here (`PgStore::apply_batch`); a bare one still says what it is.
        Failure::Rejected(_) => StoreError::Conflict {
            key: Vec::new(),
            reason: strata_store::ConflictReason::Changed,
        },
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
