//! The PostgreSQL backend's one error type.
//!
//! It reaches callers boxed inside [`StoreError::Backend`] (backend `postgres`), so the
//! `postgres` crate's types never become public API: the driver's error is only ever the
//! [`source`](std::error::Error::source) of a [`PgError`].

use strata_store::StoreError;

/// A boxed driver error (the `postgres` crate's error, kept out of the public API).
type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the PostgreSQL backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The connection string could not be parsed.
    #[error(
        "invalid postgres connection string: {reason}; use postgres://USER@HOST:PORT/DATABASE"
    )]
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// The table name is not a plain lowercase SQL identifier.
    #[error("invalid postgres table name `{name}`; use 1 to 63 lowercase ASCII letters, digits and underscores, not starting with a digit")]
    InvalidTable {
        /// The rejected name.
        name: String,
    },
    /// An option has a value the backend cannot use.
    #[error("invalid postgres store option: {reason}")]
    InvalidOption {
        /// What is wrong.
        reason: String,
    },
    /// No connection could be established.
    #[error("cannot connect to postgres at {target}{hint}; check that the server is running, reachable and accepts this user")]
    Connect {
        /// Where (host, port, database, user; never the password).
        target: String,
        /// What else to know, possibly empty: with several hosts (a failover URL), that
        /// none accepted the session asked for — a failover may be in progress.
        hint: String,
        /// The driver's error.
        #[source]
        source: Source,
    },
    /// A statement failed.
    #[error("postgres {op} on table `{table}` failed; check the server log and that the table is intact")]
    Query {
        /// The store operation (`get`, `scan`, `apply`, ...).
        op: &'static str,
        /// The table.
        table: String,
        /// The driver's error.
        #[source]
        source: Source,
    },
    /// A batch kept failing with serialization failures or deadlocks.
    #[error("postgres apply on table `{table}` failed {attempts} times with serialization failures or deadlocks; nothing was written, retry later")]
    Contention {
        /// The table.
        table: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last driver error.
        #[source]
        source: Source,
    },
    /// The table does not exist and the store was opened without creating it.
    #[error("postgres table `{table}` does not exist in {target}; create the store first (connect with table creation on) or check the URL and table name")]
    TableMissing {
        /// The table.
        table: String,
        /// Where (host, port, database, user).
        target: String,
    },
    /// The table exists but is not of the store's shape (or is not a table at all).
    #[error("postgres table `{table}` in {target} {problem}; a strata store needs exactly (k bytea primary key, v bytea not null): fix the table or name another one with `strata_table`")]
    TableShape {
        /// The table.
        table: String,
        /// Where (host, port, database, user).
        target: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The server did not answer in time.
    #[error("postgres server at {target} did not answer the {phase} within {after:?}; check that it is up and not overloaded, or raise the timeout in the URL ({})", timeout_param(.phase))]
    Timeout {
        /// `connect`, `handshake` or `statement`.
        phase: &'static str,
        /// Where (host, port, database, user).
        target: String,
        /// The timeout that expired.
        after: std::time::Duration,
    },
    /// The connection broke during an operation (server restart, network loss).
    #[error("lost the connection to postgres at {target} during {op} on table `{table}`; an unfinished batch is committed whole or not at all: rerun the operation once the server is back")]
    ConnectionLost {
        /// The store operation.
        op: &'static str,
        /// The table.
        table: String,
        /// Where (host, port, database, user).
        target: String,
        /// The driver's error.
        #[source]
        source: Source,
    },
    /// A batch waited for a lock longer than the lock wait.
    #[error("postgres {op} on table `{table}` waited {after:?} (the lock wait, `strata_lock_wait`) for a lock held by {holder} and gave up; nothing was written, retry later (when that session has finished) or raise `strata_lock_wait` in the URL")]
    LockTimeout {
        /// The store operation.
        op: &'static str,
        /// The table.
        table: String,
        /// The lock wait that expired.
        after: std::time::Duration,
        /// Who holds a lock on the table, as the server tells it (`another session (pid
        /// N, application `A`)`), or `another session` when it does not.
        holder: String,
    },
    /// Another process holds the store's exclusive lease (a migration) and the wait for it
    /// expired.
    #[error("migration in progress on `{table}` by {holder}{hint}; waited {waited:?} and wrote nothing: retry when it has finished, or raise `strata_lock_wait` in the URL")]
    LeaseHeld {
        /// The store table.
        table: String,
        /// Who holds the lease.
        holder: String,
        /// How long the wait was.
        waited: std::time::Duration,
        /// Extra advice (a stuck holder), possibly empty.
        hint: String,
    },
    /// A batch of the lease holder found its lease taken over (or its lock session gone).
    #[error("the store lease on `{table}` (token {token}) was lost — its session ended or another process took it over; nothing of this batch was written: rerun the operation")]
    LeaseLost {
        /// The store table.
        table: String,
        /// The token this holder had.
        token: i64,
    },
    /// The connection string reaches the server through a pooler that hands one client's
    /// session to others between transactions (PgBouncer `pool_mode = transaction` or
    /// `statement`): strata's session state — prepared statements, the session functions
    /// and the session advisory lock of a lease — would be used by, or lost to, other
    /// clients. Detected when the store is opened, before anything is written.
    #[error("postgres at {target} is reached through a transaction-mode connection pooler ({evidence}); strata keeps session state there (prepared statements, its session functions, the session advisory locks of leases) that such a pooler hands to other clients, so it refuses to open the store: add `strata_pooler=transaction&strata_direct=HOST:PORT` (the server behind the pooler, for leases) to the URL, or connect directly or through a session-mode pool (PgBouncer `pool_mode = session`)")]
    TransactionPooler {
        /// Where (host, port, database, user).
        target: String,
        /// What showed it (two connections served by one server session, or one
        /// connection by two).
        evidence: String,
    },
    /// Something that needs a server session of its own (a lease's advisory lock) was
    /// asked of a store whose URL names a transaction-mode pooler and no direct server.
    #[error("the {what} needs a server session of its own, and postgres at {target} is a transaction-mode pooler (`strata_pooler=transaction`): add `strata_direct=HOST:PORT` naming the server behind the pooler to the URL")]
    SessionNeedsDirect {
        /// Where (the pooler).
        target: String,
        /// What needed the session (`store lease`, `lease `sweep/orders``).
        what: String,
    },
    /// The server reported a batch committed although its wait for the synchronous
    /// standby was cancelled (`pg_cancel_backend`, a cancel request): only the primary
    /// has it. Never reported as a success: a failover before the standby catches up
    /// would lose it.
    #[error("postgres at {target} committed a batch on table `{table}` without the synchronous standby's confirmation (its wait for the standby was cancelled): the batch is on the primary only and a failover now could lose it; check the standby's replication, then read the batch back before relying on it")]
    CommitNotReplicated {
        /// Where (host, port, database, user).
        target: String,
        /// The table.
        table: String,
    },
    /// A write (or a lease) asked of a read replica's store ([`crate::ReplicaStore`]),
    /// which only answers stale-tolerant reads.
    #[error("the read replica at {target} answers stale-tolerant reads of table `{table}` only, and nothing was written; write through the primary (the store the URL opens, not its `strata_replica`)")]
    ReplicaReadOnly {
        /// The replica (host, port, database, user).
        target: String,
        /// The table.
        table: String,
    },
    /// A commit receipt that is not `TIMELINE:LSN`.
    #[error("invalid commit receipt `{text}`; use TIMELINE:LSN as `strata status --json` prints it (`hosts.receipt`, e.g. 1:0/3000148)")]
    InvalidReceipt {
        /// The text given (escaped).
        text: String,
    },
    /// The server's timeline history could not be read to check a commit receipt.
    #[error("cannot check the commit receipt at {target}: reading the timeline history `{file}` failed ({reason}); connect as a superuser or a role granted `pg_read_server_files`")]
    ReceiptUnchecked {
        /// Where (host, port, database, user).
        target: String,
        /// The history file.
        file: String,
        /// What the server said.
        reason: String,
    },
    /// The server returned something the backend did not ask for.
    #[error("postgres {op} on table `{table}` returned an unexpected row for key `{key}`; check that nothing else writes to the table")]
    Unexpected {
        /// The store operation.
        op: &'static str,
        /// The table.
        table: String,
        /// The key (escaped).
        key: String,
    },
}

/// The URL parameter that sets the timeout of `phase`.
fn timeout_param(phase: &str) -> &'static str {
    match phase {
        "connect" => "`connect_timeout`",
        "handshake" => "`strata_handshake_timeout`",
        _ => "`strata_statement_timeout`",
    }
}

impl PgError {
    /// True when retrying the same operation later may succeed (connection trouble or
    /// contention), false for errors in the arguments.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            PgError::Connect { .. }
                | PgError::Query { .. }
                | PgError::Contention { .. }
                | PgError::Timeout { .. }
                | PgError::ConnectionLost { .. }
                | PgError::LockTimeout { .. }
                | PgError::LeaseHeld { .. }
                | PgError::LeaseLost { .. }
        )
    }
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        StoreError::backend(crate::BACKEND, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn wraps_into_a_store_backend_error_with_the_source_chain() {
        let inner = std::io::Error::other("boom");
        let err: StoreError = PgError::Query {
            op: "get",
            table: "strata_kv".into(),
            source: Box::new(inner),
        }
        .into();
        assert!(matches!(
            err,
            StoreError::Backend {
                backend: "postgres",
                ..
            }
        ));
        assert_eq!(err.to_string(), "postgres backend error");
        let pg = err.source().unwrap();
        assert_eq!(
            pg.to_string(),
            "postgres get on table `strata_kv` failed; check the server log and that the table is intact"
        );
        assert_eq!(pg.source().unwrap().to_string(), "boom");
    }
}
