//! What the write paths share (`write.rs`, `locked.rs`): pipelined statements (and a
//! transaction's head of them: `BEGIN` and the locks), the retryable failures, the
//! lock-count limit.

use super::PgStore;
use crate::error::PgError;
use crate::pool::Failure;
use crate::{lease, sql};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

/// Batches touching more keys than this take the table-wide write lock instead of one
/// advisory lock per key (PostgreSQL's lock table is small: 64 locks per connection by
/// default).
pub(super) const MAX_KEY_LOCKS: usize = 48;

/// Attempts of one batch that fails with a serialization failure or a deadlock.
pub(super) const MAX_ATTEMPTS: u32 = 8;

/// One statement of a pipelined batch.
pub(super) type Step<'f> = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>,
            > + Send
            + 'f,
    >,
>;

/// Awaits futures together, polling them in order (so that statements on one connection
/// are sent in that order, in one round trip); their outputs in the same order.
pub(super) async fn join_all<T>(
    mut futures: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + '_>>>,
) -> Vec<T> {
    use std::task::Poll;
    let mut outputs: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(outputs.iter_mut().filter_map(Option::take).collect())
        }
    })
    .await
}

/// Serialization failures and deadlocks: the transaction was rolled back and may simply
/// be run again.
pub(super) fn is_retryable(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// The answers of pipelined statements, in the order they were sent.
pub(super) type Answers = Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>;

impl PgStore {
    /// Runs in ONE round trip, as unnamed statements (what a transaction-mode pooler
    /// allows): `BEGIN`; the transaction's own timeouts when `local_timeouts` (nothing is
    /// set per session through such a pooler); the locks of the lock protocol (`write.rs`)
    /// — the lease holder's (`fence`: its token) with its asynchronous commit and fence
    /// check, else an ordinary writer's —, per key (`key_locks`: sorted ids and their
    /// exclusive flags) or of the whole table (`None`); then `tail`. Returns every answer
    /// and where the fence check's is.
    pub(super) async fn locked_pipeline<'a>(
        &'a self,
        client: &'a tokio_postgres::Client,
        local_timeouts: bool,
        key_locks: Option<(&[i32], &[bool])>,
        fence: Option<i64>,
        tail: Vec<Step<'a>>,
    ) -> (Answers, Option<usize>) {
        type P<'p> = (&'p (dyn ToSql + Sync), Type);
        let (lease_id, table) = (&self.locks.lease, &self.locks.table);
        let timeouts = self.pool.timeouts();
        let statement_ms = timeouts.statement.as_millis().max(1).to_string();
        let lock_ms = timeouts.lock_wait.as_millis().max(1).to_string();
        let token = fence.unwrap_or_default();
        let renew = lease::renew_secs();
        let (ids, modes) = key_locks.unwrap_or_default();
        let (ids, modes) = (ids.to_vec(), modes.to_vec());
        let local: [P<'_>; 2] = [(&statement_ms, Type::TEXT), (&lock_ms, Type::TEXT)];
        let lock_params: [P<'_>; 2] = [(lease_id, Type::INT8), (table, Type::INT8)];
        let table_param: [P<'_>; 1] = [(table, Type::INT8)];
        let key_params: [P<'_>; 3] = [
            (&self.locks.class, Type::INT4),
            (&ids, Type::INT4_ARRAY),
            (&modes, Type::BOOL_ARRAY),
        ];
        let fence_params: [P<'_>; 4] = [
            (&self.table, Type::TEXT),
            (&token, Type::INT8),
            (lease_id, Type::INT8),
            (&renew, Type::FLOAT8),
        ];
        let lock_keys = &self.texts.lock_keys;
        let mut steps: Vec<Step<'_>> = vec![Box::pin(client.query_typed("BEGIN", &[]))];
        if local_timeouts {
            steps.push(Box::pin(client.query_typed(sql::LOCAL_TIMEOUTS, &local)));
        }
        let mut fence_at = None;
        match (fence, key_locks) {
            (Some(_), _) => {
                steps.push(Box::pin(client.query_typed(sql::ASYNC_COMMIT, &[])));
                if key_locks.is_some() {
                    steps.push(Box::pin(
                        client.query_typed(sql::HOLDER_LOCK_TABLE_SHARED, &table_param),
                    ));
                    steps.push(Box::pin(client.query_typed(lock_keys, &key_params)));
                } else {
                    steps.push(Box::pin(
                        client.query_typed(sql::HOLDER_LOCK_TABLE_EXCLUSIVE, &table_param),
                    ));
                }
                fence_at = Some(steps.len());
                steps.push(Box::pin(
                    client.query_typed(lease::FENCE_CHECK, &fence_params),
                ));
            }
            (None, Some(_)) => {
                steps.push(Box::pin(
                    client.query_typed(sql::LOCK_TABLE_SHARED, &lock_params),
                ));
                steps.push(Box::pin(client.query_typed(lock_keys, &key_params)));
            }
            (None, None) => {
                steps.push(Box::pin(
                    client.query_typed(sql::LOCK_TABLE_EXCLUSIVE, &lock_params),
                ));
            }
        }
        steps.extend(tail);
        (join_all(steps).await, fence_at)
    }
}

impl PgStore {
    /// The answers of a transaction's head statements (`BEGIN`, the locks, the lease
    /// holder's fence check at `fence_at`): the first error is the cause (the later
    /// statements failed because of it), a failed fence check the lease lost.
    pub(super) fn head_answers(
        &self,
        answers: Answers,
        fence_at: Option<usize>,
        token: i64,
    ) -> std::result::Result<(), Failure> {
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Err(e) if Some(i) == fence_at && lease::is_fence_failure(&e) => {
                    return Err(Failure::from(PgError::LeaseLost {
                        table: self.table.clone(),
                        token,
                    }))
                }
                answer => answer?,
            };
        }
        Ok(())
    }
}
