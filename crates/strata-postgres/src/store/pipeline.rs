//! What the write paths share (`write.rs`, `locked.rs`): pipelined statements, the
//! retryable failures, the lock-count limit.

use tokio_postgres::error::SqlState;

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
