//! A small blocking connection pool over `tokio-postgres`: at most `max` connections,
//! each with its prepared statements, driven by one small runtime per store.
//!
//! The runtime is a current-thread one: a statement's connection I/O runs on the thread
//! that waits for it (inside its `block_on`), with no hand-off to a worker thread and
//! back — that hop cost about as much as a local round trip. Between operations the I/O
//! tasks sleep; [`Pool::settle`] runs them after a failure.
//!
//! Every operation runs under a client-side deadline (the statement timeout), and
//! connecting under the connect and handshake timeouts: a server that accepts a
//! connection and then never answers, or stalls in the middle of a statement, gives a
//! timeout error instead of a hang. A connection that timed out or was closed by the
//! server is discarded, never reused.

use crate::error::PgError;
use crate::sql::Statements;
pub(crate) use crate::sql::Timeouts;
use crate::tls::Connector;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use strata_store::StoreError;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, NoTls};

/// One pooled connection with the statements prepared on it — none through a
/// transaction-mode pooler ([`Sessions::pooled`]), where every statement is an unnamed
/// one sent with its parameters (`query_typed`) and nothing is left in the session.
pub(crate) struct Conn {
    pub(crate) client: Client,
    /// Boxed: a connection moves out of the idle list and back on every operation, and
    /// the statements are most of its size.
    pub(crate) stmts: Option<Box<Statements>>,
    /// Set by the connection's I/O task when the server warned that a commit's wait for
    /// the synchronous standby was cancelled (see [`Raw`]).
    unconfirmed: Arc<AtomicBool>,
}

/// A new connection and the flag its I/O task sets when the server reports a commit
/// whose wait for the synchronous standby was cancelled (`WARNING: canceling wait for
/// synchronous replication …` — PostgreSQL then reports the commit as successful though
/// only the primary has it).
pub(crate) struct Raw {
    pub(crate) client: Client,
    unconfirmed: Arc<AtomicBool>,
}

/// What the store's connections may keep in their server session.
#[derive(Debug, Clone)]
pub(crate) struct Sessions {
    /// Whether connections create the session functions (`store::function`).
    pub(crate) functions: bool,
    /// The URL names a transaction-mode pooler (`strata_pooler=transaction`): a
    /// connection's session changes between transactions, so nothing is prepared or set
    /// per session.
    pub(crate) pooled: bool,
    /// Where the session-bound parts (the store lease, named leases) connect instead:
    /// the URL's `strata_direct=HOST:PORT[,…]`, the server behind the pooler.
    pub(crate) direct: Option<Config>,
}

/// Why an operation on a connection failed: a store-level outcome (conflict, oversize
/// record), a driver error still to be wrapped, or the deadline.
pub(crate) enum Failure {
    Store(StoreError),
    Pg(tokio_postgres::Error),
    /// The connection was lost (closed by the server, reset, or the server went away).
    Lost(tokio_postgres::Error),
    /// The operation did not finish within the statement timeout.
    Timeout,
    /// A conditional write found preconditions failed and wrote nothing.
    Rejected(Rejected),
}

/// The preconditions a conditional write found failed (it wrote nothing): each one's
/// 1-based position in its batch's preconditions and the key's current value as the server
/// read it in the statement, in position order.
#[derive(Debug, Default)]
pub(crate) struct Rejected {
    pub(crate) failed: Vec<(usize, Option<Vec<u8>>)>,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Pg(e)
    }
}

impl From<PgError> for Failure {
    fn from(e: PgError) -> Self {
        Failure::Store(e.into())
    }
}

#[derive(Default)]
struct State {
    idle: Vec<Conn>,
    /// Connections that exist (idle or checked out).
    open: usize,
    /// Threads waiting in [`Pool::checkout`] for a connection. Returning a connection
    /// wakes one only when there is one: `Condvar::notify_one` is a system call even
    /// without waiters, once per operation.
    waiting: usize,
}

pub(crate) struct Pool {
    rt: Arc<Runtime>,
    config: Config,
    connector: Connector,
    timeouts: Timeouts,
    target: String,
    table: String,
    max: usize,
    sessions: Sessions,
    state: Mutex<State>,
    freed: Condvar,
}

impl Pool {
    pub(crate) fn new(
        config: Config,
        connector: Connector,
        timeouts: Timeouts,
        target: String,
        table: String,
        max: usize,
        sessions: Sessions,
    ) -> Result<Self, PgError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PgError::Connect {
                target: target.clone(),
                hint: String::new(),
                source: Box::new(e),
            })?;
        Ok(Pool {
            rt: Arc::new(rt),
            config,
            connector,
            timeouts,
            target,
            table,
            max,
            sessions,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        })
    }

    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    pub(crate) fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// True when the URL names a transaction-mode pooler (`strata_pooler=transaction`).
    pub(crate) fn pooled(&self) -> bool {
        self.sessions.pooled
    }

    /// A connection of its own for something that needs a server session for its whole
    /// life (a lease's advisory lock): straight to the server, or to `strata_direct` when
    /// the store's URL names a transaction-mode pooler — refused when it names none.
    pub(crate) fn connect_session(&self, what: &str) -> Result<Client, PgError> {
        match (&self.sessions.direct, self.sessions.pooled) {
            (Some(direct), _) => connect(
                &self.rt,
                direct,
                &self.connector,
                self.timeouts,
                &describe(direct),
            )
            .map(|raw| raw.client),
            (None, false) => self.connect_raw().map(|raw| raw.client),
            (None, true) => Err(PgError::SessionNeedsDirect {
                target: self.target.clone(),
                what: what.to_string(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is two plain fields updated in single steps: still consistent after a
        // panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a raw connection (no statements prepared), outside the pool's accounting,
    /// under the connect and handshake timeouts.
    pub(crate) fn connect_raw(&self) -> Result<Raw, PgError> {
        connect(
            &self.rt,
            &self.config,
            &self.connector,
            self.timeouts,
            &self.target,
        )
    }

    /// Runs `fut` on this pool's runtime under the statement timeout.
    pub(crate) fn block_on<T>(
        &self,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, Failure> {
        block_on(&self.rt, self.timeouts.client_deadline(), fut)
    }

    /// Runs `f` on a checked-out connection (an idle one, a new one while fewer than
    /// `max` exist, or else the next one returned) under the statement timeout. The
    /// connection goes back to the pool afterwards — unless it timed out or broke.
    pub(crate) fn with<T>(
        &self,
        f: impl AsyncFnOnce(&mut Conn) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let mut conn = self.checkout().map_err(Failure::from)?;
        // Should `f` panic, the connection is dropped (closed) and its slot freed.
        let mut slot = Slot {
            pool: self,
            armed: true,
        };
        // On a timeout the connection is in an unknown state (a statement may still be
        // running): it is dropped, and the slot guard frees its place.
        // The operation's future is made inside the runtime's future, not passed to it: an
        // operation's future is large (a statement's future inside the caller's), and
        // every move before its first poll copies it whole (callgrind: ≈ 1,400 more
        // instructions per `get` than the raw statement's client, issue 24 session 21).
        let limit = self.timeouts.client_deadline();
        let conn_ref = &mut conn;
        let mut out = self
            .rt
            .block_on(async move { tokio::time::timeout(limit, f(conn_ref)).await })
            .map_err(|_| Failure::Timeout)?;
        slot.armed = false;
        if conn.unconfirmed.swap(false, Ordering::SeqCst) && out.is_ok() {
            // Committed on the primary only: never reported as a success.
            out = Err(Failure::Store(
                PgError::CommitNotReplicated {
                    target: self.target.clone(),
                    table: self.table.clone(),
                }
                .into(),
            ));
        }
        let lost = conn.client.is_closed()
            || matches!(&out, Err(Failure::Pg(e)) if is_connection_error(e));
        let failed = lost || out.is_err();
        if lost {
            // Never reuse a connection the server ended (its I/O task may not know yet).
            drop(conn);
            self.release_slot();
        } else {
            self.put_back(conn);
        }
        if failed {
            // A failed operation may have left a `ROLLBACK` queued (a dropped transaction)
            // or a connection to close: send it now, not at the runtime's next use.
            self.settle();
        }
        match out {
            Err(Failure::Pg(e)) if lost => Err(Failure::Lost(e)),
            other => other,
        }
    }

    /// Lets the connections' I/O tasks run for a moment. The runtime runs on the calling
    /// thread (a current-thread runtime: no thread hop per statement), so its tasks only
    /// make progress inside a `block_on`; after a failure this flushes what dropped
    /// transactions and clients queued (a `ROLLBACK` that releases locks, a close).
    pub(crate) fn settle(&self) {
        settle(&self.rt);
    }

    fn checkout(&self) -> Result<Conn, PgError> {
        let mut state = self.lock();
        loop {
            while let Some(conn) = state.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(conn);
                }
                // Closed while idle (server restart, idle timeout): forget it.
                state.open -= 1;
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return self.open_conn().inspect_err(|_| self.release_slot());
            }
            state.waiting += 1;
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
            state.waiting -= 1;
        }
    }

    fn release_slot(&self) {
        let mut state = self.lock();
        state.open -= 1;
        self.wake_one(state);
    }

    /// Wakes one thread waiting for a connection, if any (after `state` changed).
    fn wake_one(&self, state: MutexGuard<'_, State>) {
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            self.freed.notify_one();
        }
    }

    /// Adds a connection opened with [`Pool::connect_raw`] to the pool (counted against
    /// `max`), preparing its statements.
    pub(crate) fn adopt(&self, raw: Raw) -> Result<(), PgError> {
        let conn = self.prepare(raw)?;
        self.lock().open += 1;
        self.put_back(conn);
        Ok(())
    }

    fn open_conn(&self) -> Result<Conn, PgError> {
        self.prepare(self.connect_raw()?)
    }

    fn prepare(&self, raw: Raw) -> Result<Conn, PgError> {
        let Raw {
            client,
            unconfirmed,
        } = raw;
        let query_err = |e: tokio_postgres::Error| {
            if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
                // Preparing waits for a lock on the table (another session holds it, e.g.
                // `LOCK TABLE`): name the wait and, where the server tells, the holder.
                let holder = block_on(
                    &self.rt,
                    self.timeouts.client_deadline(),
                    lock_holder(&client, &self.table),
                )
                .ok()
                .flatten()
                .unwrap_or_else(|| "another session".into());
                return PgError::LockTimeout {
                    op: "prepare",
                    table: self.table.clone(),
                    after: self.timeouts.lock_wait,
                    holder,
                };
            }
            PgError::Query {
                op: "prepare",
                table: self.table.clone(),
                source: Box::new(e),
            }
        };
        if self.sessions.pooled {
            // Nothing is kept in a session the pooler lends to others.
            return Ok(Conn {
                client,
                stmts: None,
                unconfirmed,
            });
        }
        let stmts = block_on(
            &self.rt,
            self.timeouts.client_deadline(),
            Statements::prepare(&client, &self.table, self.timeouts, self.sessions.functions),
        )
        .map_err(|_| PgError::Timeout {
            phase: "statement",
            target: self.target.clone(),
            after: self.timeouts.statement,
        })?
        .map_err(query_err)?;
        tracing::debug!(target = %self.target, table = %self.table, "opened a postgres connection");
        Ok(Conn {
            client,
            stmts: Some(Box::new(stmts)),
            unconfirmed,
        })
    }

    fn put_back(&self, conn: Conn) {
        let mut state = self.lock();
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        self.wake_one(state);
    }
}

/// Who holds a granted lock on `table` (another session), as the server tells it:
/// `another session (pid N, application `A`)`; `None` when none is found or the query
/// fails.
pub(crate) async fn lock_holder(client: &Client, table: &str) -> Option<String> {
    let row = client
        .query_typed(
            "SELECT l.pid, coalesce(a.application_name, ''), l.mode \
             FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.relation = to_regclass($1) AND l.granted AND l.pid <> pg_backend_pid() \
             ORDER BY (l.mode = 'AccessExclusiveLock') DESC LIMIT 1",
            &[(&table, tokio_postgres::types::Type::TEXT)],
        )
        .await
        .ok()?
        .into_iter()
        .next()?;
    let pid: i32 = row.try_get(0).ok()?;
    let app: String = row.try_get(1).unwrap_or_default();
    let mode: String = row.try_get(2).unwrap_or_default();
    let app = if app.is_empty() {
        String::new()
    } else {
        format!(", application `{}`", strata_store::shown_text(&app))
    };
    Some(format!("another session (pid {pid}{app}, {mode})"))
}

/// How many times [`transaction_pooler`] looks.
const POOLER_ROUNDS: usize = 3;

/// Whether two open connections `a` and `b` to one store are served by server sessions
/// that change between transactions — a transaction- or statement-mode pooler such as
/// PgBouncer with `pool_mode = transaction` — and if so what showed it.
///
/// The server session of a connection is its backend pid (`pg_backend_pid()`, asked with
/// the simple protocol, which any pooler passes through). Straight to a server (or through
/// a session-mode pooler or a TCP proxy) each connection keeps its own session for its
/// whole life and two open connections never share one, so neither of the tests below can
/// fire. Through a transaction pooler the session is lent for one transaction only: after
/// `a`'s statement its session goes back to the pooler, which hands the most recently
/// freed server connection to the next transaction (PgBouncer's default,
/// `server_round_robin = 0`), so `b` is served by the same pid; with round-robin lending
/// `a`'s next statement lands on another one. A few rounds of both make a miss unlikely
/// for either lending order.
pub(crate) async fn transaction_pooler(
    a: &Client,
    b: &Client,
) -> Result<Option<String>, tokio_postgres::Error> {
    async fn pid(c: &Client) -> Result<Option<String>, tokio_postgres::Error> {
        let rows = c.simple_query("SELECT pg_backend_pid()").await?;
        Ok(rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        }))
    }
    let first = pid(a).await?;
    for _ in 0..POOLER_ROUNDS {
        let of_b = pid(b).await?;
        if of_b.is_some() && of_b == first {
            return Ok(Some(format!(
                "two connections were both served by server session pid {}",
                of_b.unwrap_or_default()
            )));
        }
        let again = pid(a).await?;
        if again != first {
            return Ok(Some(format!(
                "one connection was served by server session pid {} and then by pid {}",
                first.unwrap_or_default(),
                again.unwrap_or_default()
            )));
        }
    }
    Ok(None)
}

/// Lets the I/O tasks of `rt` run for a moment (see [`Pool::settle`]).
pub(crate) fn settle(rt: &Runtime) {
    rt.block_on(async {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    });
}

/// Runs `fut` on `rt` (from outside it), giving up after `limit`.
pub(crate) fn block_on<T>(
    rt: &Runtime,
    limit: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, Failure> {
    rt.block_on(async { tokio::time::timeout(limit, fut).await })
        .map_err(|_| Failure::Timeout)
}

/// Opens a connection under the connect timeout (TCP, per host, by the driver) and the
/// handshake timeout (the whole startup exchange), and spawns its I/O task on `rt`.
pub(crate) fn connect(
    rt: &Runtime,
    config: &Config,
    connector: &Connector,
    timeouts: Timeouts,
    target: &str,
) -> Result<Raw, PgError> {
    let limit = timeouts.connect.saturating_add(timeouts.handshake);
    let attempt = rt.block_on(async {
        tokio::time::timeout(limit, async {
            match connector {
                Connector::Plain => open(config, NoTls).await,
                #[cfg(feature = "tls")]
                Connector::Rustls(tls) => open(config, tls.clone()).await,
            }
        })
        .await
    });
    match attempt {
        Ok(Ok(raw)) => Ok(raw),
        Ok(Err(e)) => {
            // The driver's own connect timeout is a plain I/O timeout: report it as ours.
            if is_io_timeout(&e) {
                return Err(PgError::Timeout {
                    phase: "connect",
                    target: target.to_string(),
                    after: timeouts.connect,
                });
            }
            // Several hosts: none was up and of the kind asked for (a primary, with
            // `target_session_attrs=read-write`) — the middle of a failover looks so.
            let hint = if config.get_hosts().len() > 1 {
                " (none of its hosts accepted a session of the kind the URL asks for: all down, or only standbys while a failover is in progress; retry in a few seconds, once a standby has been promoted)".to_string()
            } else {
                String::new()
            };
            Err(PgError::Connect {
                target: target.to_string(),
                hint,
                source: Box::new(e),
            })
        }
        Err(_) => Err(PgError::Timeout {
            phase: "handshake",
            target: target.to_string(),
            after: limit,
        }),
    }
}

/// Opens one connection with `tls` and spawns its I/O task, which watches the server's
/// notices for a cancelled wait for the synchronous standby.
async fn open<T>(config: &Config, tls: T) -> Result<Raw, tokio_postgres::Error>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await?;
    let unconfirmed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&unconfirmed);
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(tokio_postgres::AsyncMessage::Notice(notice))) => {
                    if is_unreplicated_commit(&notice) {
                        tracing::warn!(notice = %notice, "a commit's wait for the synchronous standby was cancelled");
                        flag.store(true, Ordering::SeqCst);
                    } else {
                        tracing::debug!(notice = %notice, "postgres notice");
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "a postgres connection ended");
                    break;
                }
                None => break,
            }
        }
    });
    Ok(Raw {
        client,
        unconfirmed,
    })
}

/// True for PostgreSQL's warning that a commit stopped waiting for the synchronous
/// standby (cancelled; the transaction "has already committed locally, but might not have
/// been replicated to the standby"). Matched on the server's English message text: with
/// another `lc_messages` it is not recognized.
fn is_unreplicated_commit(notice: &tokio_postgres::error::DbError) -> bool {
    notice.code() == &tokio_postgres::error::SqlState::WARNING
        && notice
            .message()
            .contains("wait for synchronous replication")
}

/// True when `e` ended the connection: closed, an I/O error, or a FATAL/PANIC from the
/// server (terminated session, shutdown) — the connection task may not have noticed yet.
pub(crate) fn is_connection_error(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::Severity;
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        return matches!(
            db.parsed_severity(),
            Some(Severity::Fatal) | Some(Severity::Panic)
        );
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

fn is_io_timeout(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::TimedOut;
        }
        source = s.source();
    }
    false
}

/// Frees a connection slot when the work on a checked-out connection panicked or timed
/// out (the connection itself is dropped, which closes it).
struct Slot<'a> {
    pool: &'a Pool,
    armed: bool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.pool.release_slot();
        }
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
