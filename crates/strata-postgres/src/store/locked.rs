//! A read-modify-write under its keys' locks: the progress guarantee behind the
//! one-round-trip primitive (`write.rs`, [`strata_store::KvWrite::read_modify_write`] on
//! [`PgStore`]).
//!
//! The primitive decides on the values it expects and lets the server check them in the
//! statement that writes. Under contention on the same keys that alone can starve a
//! writer: the one whose batch just committed knows the new values and commits again,
//! while the others keep deciding on values that changed before their batch's locks were
//! granted (measured: eight threads moving units between two accounts through one handle,
//! a writer used up its decisions within 100 transfers and failed with a conflict it did
//! not cause). So after [`OPTIMISTIC_DECISIONS`] decisions overtaken by other writers a
//! write takes this path instead — one transaction, two round trips:
//!
//! 1. `BEGIN`, the store lease and table locks exactly as every batch of the lock
//!    protocol takes them (`write.rs`, "The lock protocol"; the lease holder's fence check
//!    included), then the locks of every key the write reads and its last decided batch
//!    touched — all exclusive, in the protocol's one order —, then the keys' values;
//! 2. the decision on those values, and, when every key of the decided batch is among
//!    those locked, the conditional write and `COMMIT`.
//!
//! No writer that follows the protocol can change a key between the read and the commit,
//! so the decision cannot be overtaken: the write commits unless its own guards fail (the
//! caller's conflict) or the decision refuses (final: it saw the current values). A
//! decision that touches a key not locked rolls the transaction back and is taken again
//! with that key locked too (the set only grows; the [`MAX_ROUNDS`]th transaction locks
//! the whole table, as a batch of many keys does, so every decision is covered).

use super::params::{rejected_error, rejection, require_values_read, values_by_key, WriteParams};
use super::pipeline::{is_retryable, join_all, Step, MAX_ATTEMPTS, MAX_KEY_LOCKS};
use super::PgStore;
use crate::error::PgError;
use crate::pool::{Conn, Failure, Rejected};
use std::sync::atomic::Ordering;
use std::time::Duration;
use strata_store::{Batch, Decide, Mutation, Result};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

/// Decisions a read-modify-write makes on the one-round-trip path before it takes this
/// one (the first on expected values; the next ones on values the server reported).
pub(super) const OPTIMISTIC_DECISIONS: usize = 3;

/// Transactions this path runs for one write when its decisions keep touching keys not
/// locked yet (each round locks them too; the last one locks the whole table).
const MAX_ROUNDS: usize = 8;

/// What one locked transaction ended with.
enum Outcome {
    /// Written and committed: the decided batch and the values it was decided on.
    Written(Batch, Vec<Option<Vec<u8>>>),
    /// The decision refused on the values read (rolled back; nothing written).
    Refused,
    /// The decided batch touches keys not locked: rolled back, to be taken again with
    /// them locked too.
    Unlocked(Batch),
    /// The batch's preconditions failed (nothing written): the batch and the failures.
    Rejected(Batch, Rejected),
}

impl PgStore {
    /// The write primitive's locked path (see the module): `last` is the batch the write
    /// decided last, whose keys are locked with the keys read.
    pub(super) fn read_modify_write_locked(
        &self,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
        last: &Batch,
    ) -> Result<bool> {
        let mut keys: Vec<Vec<u8>> = reads.iter().map(|k| k.to_vec()).collect();
        add_keys(&mut keys, last);
        let mut round = 0;
        let mut attempt = 0;
        loop {
            round += 1;
            attempt += 1;
            // The last round locks the whole table: every decision is then covered.
            let locks = match round < MAX_ROUNDS {
                true => Some(self.locks.key_locks(keys.iter().map(Vec::as_slice))),
                false => None,
            };
            let fence = self.lease.token();
            self.round_trips.locked.fetch_add(1, Ordering::Relaxed);
            let outcome = self.pool.with(async |conn| {
                self.try_locked(conn, reads, decide, locks.as_deref(), fence)
                    .await
            });
            let failure = match outcome {
                Ok(Outcome::Written(batch, values)) => {
                    if fence.is_some() {
                        self.unflushed.store(true, Ordering::SeqCst);
                    }
                    self.remember(&batch, reads, &values);
                    return Ok(true);
                }
                Ok(Outcome::Refused) => return Ok(false),
                Ok(Outcome::Unlocked(batch)) => {
                    tracing::debug!(table = %self.table, round, "a decision under locks touched keys not locked; locking them too");
                    add_keys(&mut keys, &batch);
                    attempt = 0;
                    continue;
                }
                Ok(Outcome::Rejected(batch, rejected)) => {
                    self.forget_all(reads);
                    return Err(rejected_error(batch.preconditions(), &rejected));
                }
                Err(f) => f,
            };
            self.forget_all(reads);
            match failure {
                Failure::Pg(e) if is_retryable(&e) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(table = %self.table, attempt, error = %e, "retrying a locked read-modify-write");
                    std::thread::sleep(Duration::from_millis(1 << attempt.min(6)));
                    round -= 1;
                }
                Failure::Pg(e) if is_retryable(&e) => {
                    return Err(PgError::Contention {
                        table: self.table.clone(),
                        attempts: attempt,
                        source: Box::new(e),
                    }
                    .into())
                }
                Failure::Pg(e)
                    if fence.is_none() && e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) =>
                {
                    return Err(self.lock_wait_error());
                }
                other => return Err(self.error(other, "apply")),
            }
        }
    }

    /// One locked transaction (see the module). Any failure before the commit rolls it
    /// back before the connection is returned.
    async fn try_locked(
        &self,
        conn: &mut Conn,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
        ids: Option<&[i32]>,
        fence: Option<i64>,
    ) -> std::result::Result<Outcome, Failure> {
        let client = &conn.client;
        let outcome = self
            .locked_transaction(client, conn.stmts.is_none(), reads, decide, ids, fence)
            .await;
        if !matches!(outcome, Ok(Outcome::Written(..) | Outcome::Rejected(..))) {
            // Still open (refused, unlocked or failed): end it. A connection that is gone
            // answers with an error the pool sees as lost; the outcome says what happened.
            let _ = client.query_typed("ROLLBACK", &[]).await;
        }
        outcome
    }

    /// The transaction's two round trips; it is committed when the outcome is
    /// `Written` or `Rejected`, and left open otherwise.
    async fn locked_transaction(
        &self,
        client: &tokio_postgres::Client,
        pooled: bool,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
        ids: Option<&[i32]>,
        fence: Option<i64>,
    ) -> std::result::Result<Outcome, Failure> {
        type P<'a> = (&'a (dyn ToSql + Sync), Type);
        // Per-key locks, or (too many keys, or the last round) the whole table.
        let ids: Vec<i32> = ids
            .filter(|ids| ids.len() <= MAX_KEY_LOCKS)
            .map(<[i32]>::to_vec)
            .unwrap_or_default();
        let per_key = !ids.is_empty();
        let modes = vec![true; ids.len()];
        let read_keys: Vec<&[u8]> = reads.to_vec();
        let read_param: [P<'_>; 1] = [(&read_keys, Type::BYTEA_ARRAY)];
        let texts = &self.texts;
        let tail: Vec<Step<'_>> = vec![Box::pin(client.query_typed(&texts.read_many, &read_param))];
        let key_locks = per_key.then_some((ids.as_slice(), modes.as_slice()));
        let (mut answers, fence_at) = self
            .locked_pipeline(client, pooled, key_locks, fence, tail)
            .await;
        let token = fence.unwrap_or_default();
        let rows = answers.pop().unwrap_or_else(|| Ok(Vec::new()));
        self.head_answers(answers, fence_at, token)?;
        let values = values_by_key(reads, rows?)?;
        let Some(mut batch) = decide(&strata_store::borrowed(&values)) else {
            return Ok(Outcome::Refused);
        };
        batch.validate()?;
        batch.check_key_lengths()?;
        if per_key {
            let mut needed: Vec<Vec<u8>> = Vec::new();
            add_keys(&mut needed, &batch);
            let needed = self.locks.key_locks(needed.iter().map(Vec::as_slice));
            if needed.iter().any(|id| ids.binary_search(id).is_err()) {
                return Ok(Outcome::Unlocked(batch));
            }
        }
        // The keys read still hold what the decision saw (they are locked); checked
        // again in the statement that writes, as on the one-round-trip path.
        require_values_read(&mut batch, reads, &values);
        let write = WriteParams::of(&batch);
        let params = write.typed();
        let steps: Vec<Step<'_>> = vec![
            Box::pin(client.query_typed(&texts.write, &params)),
            Box::pin(client.query_typed("COMMIT", &[])),
        ];
        let mut answers = join_all(steps).await;
        let committed = answers.pop().unwrap_or_else(|| Ok(Vec::new()));
        let failed = answers.pop().unwrap_or_else(|| Ok(Vec::new()))?;
        committed?;
        match rejection(&failed) {
            Ok(()) => Ok(Outcome::Written(batch, values)),
            Err(Failure::Rejected(r)) => Ok(Outcome::Rejected(batch, r)),
            Err(other) => Err(other),
        }
    }
}

/// Adds the keys `batch` writes or requires to `keys` (once each).
fn add_keys(keys: &mut Vec<Vec<u8>>, batch: &Batch) {
    let touched = batch
        .mutations()
        .iter()
        .map(Mutation::key)
        .chain(batch.preconditions().iter().map(|p| p.key()));
    for key in touched {
        if !keys.iter().any(|k| k.as_slice() == key) {
            keys.push(key.to_vec());
        }
    }
}
