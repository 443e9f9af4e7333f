//! A small blocking connection pool: at most `max` connections, each with its prepared
//! statements. `postgres::Client` is `Send` but not `Sync`, so every operation checks one
//! connection out for its duration.

use crate::error::PgError;
use crate::sql::Statements;
use postgres::{Client, Config, NoTls};
use std::sync::{Condvar, Mutex, MutexGuard};

/// One pooled connection with the statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) stmts: Statements,
}

#[derive(Default)]
struct State {
    idle: Vec<Conn>,
    /// Connections that exist (idle or checked out).
    open: usize,
}

pub(crate) struct Pool {
    config: Config,
    target: String,
    table: String,
    max: usize,
    state: Mutex<State>,
    freed: Condvar,
}

impl Pool {
    pub(crate) fn new(config: Config, target: String, table: String, max: usize) -> Self {
        Pool {
            config,
            target,
            table,
            max,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is two plain fields updated in single steps: still consistent after a
        // panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a raw connection (no statements prepared), outside the pool's accounting.
    pub(crate) fn connect_raw(&self) -> Result<Client, PgError> {
        self.config.connect(NoTls).map_err(|e| PgError::Connect {
            target: self.target.clone(),
            source: Box::new(e),
        })
    }

    /// Runs `f` on a checked-out connection: an idle one, a new one while fewer than
    /// `max` exist, or else the next one returned. The connection goes back to the pool
    /// afterwards (or is discarded when it broke).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Conn) -> T) -> Result<T, PgError> {
        let mut conn = self.checkout()?;
        // Should `f` panic, the connection is dropped (closed) and its slot freed.
        let mut slot = Slot {
            pool: self,
            armed: true,
        };
        let out = f(&mut conn);
        slot.armed = false;
        self.put_back(conn);
        Ok(out)
    }

    fn checkout(&self) -> Result<Conn, PgError> {
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(conn);
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return self.open_conn().inspect_err(|_| self.release_slot());
            }
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn release_slot(&self) {
        self.lock().open -= 1;
        self.freed.notify_one();
    }

    /// Adds a connection opened with [`Pool::connect_raw`] to the pool (counted against
    /// `max`), preparing its statements.
    pub(crate) fn adopt(&self, client: Client) -> Result<(), PgError> {
        let conn = self.prepare(client)?;
        self.lock().open += 1;
        self.put_back(conn);
        Ok(())
    }

    fn open_conn(&self) -> Result<Conn, PgError> {
        self.prepare(self.connect_raw()?)
    }

    fn prepare(&self, mut client: Client) -> Result<Conn, PgError> {
        let stmts = Statements::prepare(&mut client, &self.table).map_err(|e| PgError::Query {
            op: "prepare",
            table: self.table.clone(),
            source: Box::new(e),
        })?;
        tracing::debug!(target = %self.target, table = %self.table, "opened a postgres connection");
        Ok(Conn { client, stmts })
    }

    fn put_back(&self, conn: Conn) {
        let mut state = self.lock();
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.freed.notify_one();
    }
}

/// Frees a connection slot when the work on a checked-out connection panicked.
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
