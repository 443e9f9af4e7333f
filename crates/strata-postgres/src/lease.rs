//! The store lease across processes and machines ([`strata_store::CrossProcessLease`]).
//!
//! * **Exclusion**: the holder keeps a session-level exclusive advisory lock (the store's
//!   lease id) on a connection of its own; every other batch takes the same lock *shared*
//!   for its transaction, so while the lease is held other processes' batches wait — up
//!   to the lock wait (`strata_lock_wait`), then fail with "migration in progress on
//!   `<table>` by `<holder>`". Acquiring queues behind the batches in flight and ahead of
//!   new ones (PostgreSQL grants conflicting lock requests in order).
//! * **Record**: a row of `strata_leases (store_table, holder, token, pid, acquired_at,
//!   expires_at)` names the holder for those messages and carries the fencing token,
//!   incremented by every acquisition.
//! * **Fencing**: every batch of the holder checks, in its own transaction, that the
//!   record still has its token and that the holder's lock session is still alive (and
//!   pushes `expires_at` forward); otherwise it fails with [`PgError::LeaseLost`] and
//!   writes nothing. A holder whose lease connection died can therefore not write after
//!   another process took over.
//! * **Death**: a killed holder's server session ends with its connection, which releases
//!   the lock at once; the next acquirer takes over (a new token) and resumes.
//!
//! **Named leases** ([`strata_store::NamedLease`]: `sweep/<collection>`, `cutover`) work the
//! same way with a lock id and a record of their own (`store_table` = `<table>#<name>`),
//! except that nobody else's batches take their lock: they exclude only the other holders
//! of the name, never the store's writers. Their fencing is the holder's stored lease
//! record (the sweep marker, the fence), which carries the token and which every batch of
//! the holder preconditions on.

use crate::error::PgError;
use crate::keys::LEASE_TABLE_LOCK;
use crate::pool::{block_on, settle, Pool, Timeouts};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use strata_store::{HeldLease, Result, StoreError};
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// How far each batch of the holder pushes `expires_at` (informational: the lock session
/// decides; an expired record with a live session is reported as possibly stuck).
const RENEW_SECS: f64 = 60.0;

const CREATE_LEASE_TABLE: &str = "CREATE TABLE IF NOT EXISTS strata_leases (
  store_table text PRIMARY KEY,
  holder text,
  token int8 NOT NULL,
  pid int4,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL DEFAULT now())";

const TAKE: &str =
    "INSERT INTO strata_leases AS l (store_table, holder, token, pid, acquired_at, expires_at)
VALUES ($1, $2, 1, pg_backend_pid(), now(), now() + make_interval(secs => $3))
ON CONFLICT (store_table) DO UPDATE SET holder = $2, token = l.token + 1, pid = pg_backend_pid(),
  acquired_at = now(), expires_at = now() + make_interval(secs => $3)
RETURNING token";

/// Checks (and renews) the holder's lease inside a batch's transaction: the record still
/// has `$2` as its token and the session holding the lease lock `$3` is alive, or the
/// statement fails with a division by zero ([`is_fence_failure`]) — an error, so that it
/// can be pipelined with the batch's write: the failed transaction writes nothing.
pub(crate) const FENCE_CHECK: &str = "WITH f AS (
  UPDATE strata_leases l SET expires_at = now() + make_interval(secs => $4)
  WHERE l.store_table = $1 AND l.token = $2 AND l.holder IS NOT NULL
    AND EXISTS (SELECT 1 FROM pg_locks k
                WHERE k.locktype = 'advisory' AND k.granted AND k.mode = 'ExclusiveLock'
                  AND k.pid = l.pid AND k.objsubid = 1
                  AND k.classid = (($3::int8 >> 32) & 4294967295)::oid
                  AND k.objid = ($3::int8 & 4294967295)::oid)
  RETURNING 1)
SELECT 1 / (SELECT count(*)::int4 FROM f)";

/// True for the error [`FENCE_CHECK`] raises when the lease is no longer the holder's.
pub(crate) fn is_fence_failure(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::DIVISION_BY_ZERO)
}

/// Makes the holder's earlier batches durable: a synchronous commit that writes WAL (one
/// row of the lease table, unchanged) waits for the WAL flush up to its own commit
/// record, which covers every commit before it — in particular the holder's batches,
/// committed with `synchronous_commit = off`.
pub(crate) const FLUSH: &str =
    "UPDATE strata_leases SET expires_at = expires_at WHERE store_table = $1";

/// The current holder of a store's lease (no row when free or never taken).
pub(crate) const WHO: &str = "SELECT holder, pid, expires_at < now() FROM strata_leases
WHERE store_table = $1 AND holder IS NOT NULL";

const RELEASE: &str =
    "UPDATE strata_leases SET holder = NULL, pid = NULL, expires_at = now() WHERE store_table = $1 AND token = $2";

/// The token this handle's lease holds, shared by the store and its [`PgLease`].
#[derive(Debug, Default)]
pub(crate) struct LeaseState(Mutex<Option<i64>>);

impl LeaseState {
    fn lock(&self) -> MutexGuard<'_, Option<i64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fencing token while this handle holds the lease.
    pub(crate) fn token(&self) -> Option<i64> {
        *self.lock()
    }
}

/// The holder of a store's lease, read after a batch gave up waiting for a lock.
pub(crate) async fn holder_of(
    client: &Client,
    table: &str,
) -> std::result::Result<Option<(String, Option<i32>, bool)>, tokio_postgres::Error> {
    // Unnamed statements (`query_typed`): this runs on the store's connections, which
    // may go through a transaction-mode pooler.
    let exists = client
        .query_typed("SELECT to_regclass('strata_leases') IS NOT NULL", &[])
        .await?
        .first()
        .map(|r| r.try_get::<_, bool>(0))
        .transpose()?
        .unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_typed(WHO, &[(&table, tokio_postgres::types::Type::TEXT)])
        .await?
        .into_iter()
        .next();
    Ok(match row {
        Some(row) => Some((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get::<_, Option<bool>>(2)?.unwrap_or(false),
        )),
        None => None,
    })
}

/// The renewal interval bound as the fence statement's `$4`.
pub(crate) fn renew_secs() -> f64 {
    RENEW_SECS
}

/// A lease's current holder as read from its record: name, server pid, expired.
pub(crate) type Holder = (String, Option<i32>, bool);

/// A taken lease, or the holder that kept it (when its record could be read).
pub(crate) type Taken = std::result::Result<PgLease, Option<Holder>>;

/// The record key (`strata_leases.store_table`) of the lease `name` of `table`.
pub(crate) fn named_record(table: &str, name: &str) -> String {
    format!("{table}#{name}")
}

/// The advisory-lock id of the lease `name` of `table`.
pub(crate) fn named_lock(table: &str, name: &str) -> i64 {
    crate::keys::fnv1a(&[
        b"strata-postgres-named-lease",
        table.as_bytes(),
        name.as_bytes(),
    ]) as i64
}

/// A held lease: its own connection (holding the session lock) and the token.
pub(crate) struct PgLease {
    client: Option<Client>,
    rt: Arc<Runtime>,
    /// The store's lease state (the store lease only; named leases fence through the
    /// holder's own record).
    state: Option<Arc<LeaseState>>,
    table: String,
    holder: String,
    token: i64,
    lock_id: i64,
    timeouts: Timeouts,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("table", &self.table)
            .field("holder", &self.holder)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl HeldLease for PgLease {
    fn holder(&self) -> &str {
        &self.holder
    }
    fn fencing_token(&self) -> u64 {
        u64::try_from(self.token).unwrap_or(0)
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            *state.lock() = None;
        }
        let Some(client) = self.client.take() else {
            return;
        };
        let (table, token, lock_id) = (&self.table, self.token, self.lock_id);
        let released = block_on(&self.rt, self.timeouts.client_deadline(), async {
            client.execute(RELEASE, &[table, &token]).await?;
            client
                .execute("SELECT pg_advisory_unlock($1::int8)", &[&lock_id])
                .await?;
            Ok::<_, tokio_postgres::Error>(())
        });
        match released {
            Ok(Ok(())) => tracing::info!(table = %self.table, token, "released the store lease"),
            // Closing the connection (dropping the client) releases the lock anyway.
            Ok(Err(e)) => {
                tracing::warn!(table = %self.table, error = %e, "could not clear the lease record; the lock is released with the connection")
            }
            Err(_) => {
                tracing::warn!(table = %self.table, "the server did not answer the lease release; the lock is released with the connection")
            }
        }
        drop(client);
        // Let the connection's task see it is closed (the runtime runs only on demand).
        settle(&self.rt);
    }
}

/// Takes the lease of `table` for `holder`, waiting up to `wait`.
pub(crate) fn acquire(
    pool: &Pool,
    state: &Arc<LeaseState>,
    table: &str,
    lock_id: i64,
    holder: &str,
    wait: Duration,
) -> Result<PgLease> {
    if state.token().is_some() {
        return Err(StoreError::InvalidArgument(format!(
            "this handle already holds the store lease of postgres table `{table}`; release it before taking it again"
        )));
    }
    match take(pool, Some(state), table, lock_id, holder, wait)? {
        Ok(lease) => Ok(lease),
        Err(who) => Err(held_error(table, who, wait)),
    }
}

/// Takes the lease `name` of `table` for `holder`, waiting up to `wait`: `Err` with the
/// current holder (if it could be read) when the wait expired.
pub(crate) fn acquire_named(
    pool: &Pool,
    table: &str,
    name: &str,
    holder: &str,
    wait: Duration,
) -> Result<Taken> {
    take(
        pool,
        None,
        &named_record(table, name),
        named_lock(table, name),
        holder,
        wait,
    )
}

/// Takes the lock `lock_id` and the record `table` (a store table or a named lease's
/// record key); `Ok(Err(holder))` when the wait expired.
fn take(
    pool: &Pool,
    state: Option<&Arc<LeaseState>>,
    table: &str,
    lock_id: i64,
    holder: &str,
    wait: Duration,
) -> Result<Taken> {
    let what = match state {
        Some(_) => "store lease".to_string(),
        None => format!("lease `{table}`"),
    };
    let mut client = pool.connect_session(&what)?;
    let timeouts = pool.timeouts();
    let deadline = timeouts.client_deadline().saturating_add(wait);
    let wait_ms = wait.as_millis().max(1);
    let attempt = block_on(pool.runtime(), deadline, async {
        client
            .batch_execute(&format!(
                "SET lock_timeout = {wait_ms}; SET statement_timeout = 0"
            ))
            .await?;
        {
            // Creating the lease table is serialized across everyone (it may race).
            let c = client.transaction().await?;
            c.execute(
                "SELECT pg_advisory_xact_lock($1::int8)",
                &[&LEASE_TABLE_LOCK],
            )
            .await?;
            c.batch_execute(CREATE_LEASE_TABLE).await?;
            c.commit().await?;
        }
        match client
            .execute("SELECT pg_advisory_lock($1::int8)", &[&lock_id])
            .await
        {
            Ok(_) => {}
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                let who = holder_of(&client, table).await?;
                return Ok(Err(who));
            }
            Err(e) => return Err(e),
        }
        let tx = client.transaction().await?;
        let previous: Option<Option<String>> = tx
            .query_opt(
                "SELECT holder FROM strata_leases WHERE store_table = $1 FOR UPDATE",
                &[&table],
            )
            .await?
            .map(|row| row.try_get(0))
            .transpose()?;
        let token: i64 = tx
            .query_one(TAKE, &[&table, &holder, &RENEW_SECS])
            .await?
            .try_get(0)?;
        tx.commit().await?;
        client.batch_execute("SET lock_timeout = 0").await?;
        Ok(Ok((token, previous.flatten())))
    });
    let target = pool.target().to_string();
    let (token, previous) = match attempt {
        Ok(Ok(Ok(taken))) => taken,
        failed => {
            // Close the connection now (releasing whatever its session took), not at the
            // runtime's next use (the runtime runs only on demand).
            drop(client);
            pool.settle();
            return match failed {
                Ok(Ok(Err(who))) => Ok(Err(who)),
                Ok(Err(e)) => Err(PgError::Query {
                    op: "lease",
                    table: table.to_string(),
                    source: Box::new(e),
                }
                .into()),
                _ => Err(PgError::Timeout {
                    phase: "statement",
                    target,
                    after: deadline,
                }
                .into()),
            };
        }
    };
    if let Some(previous) = previous {
        tracing::warn!(%table, %previous, token, "took over the store lease of a holder whose session ended without releasing it");
    }
    tracing::info!(%table, %holder, token, "took the store lease");
    if let Some(state) = state {
        *state.lock() = Some(token);
    }
    Ok(Ok(PgLease {
        client: Some(client),
        rt: Arc::clone(pool.runtime()),
        state: state.map(Arc::clone),
        table: table.to_string(),
        holder: holder.to_string(),
        token,
        lock_id,
        timeouts,
    }))
}

/// The error of a wait for the lease (by an acquirer or a batch) that expired.
pub(crate) fn held_error(
    table: &str,
    who: Option<(String, Option<i32>, bool)>,
    waited: Duration,
) -> StoreError {
    match who {
        Some((holder, pid, stale)) => PgError::LeaseHeld {
            table: table.to_string(),
            holder,
            waited,
            hint: if stale {
                format!(
                    " (its lease was not renewed in time: if that process is stuck, end its session with `SELECT pg_terminate_backend({})`)",
                    pid.unwrap_or(0)
                )
            } else {
                String::new()
            },
        }
        .into(),
        None => PgError::LockTimeout {
            op: "lease",
            table: table.to_string(),
            after: waited,
            holder: "another session".into(),
        }
        .into(),
    }
}
