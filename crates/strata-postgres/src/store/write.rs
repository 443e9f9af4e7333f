//! The write path of [`PgStore`]: atomic conditional batches.
//!
//! # The lock protocol
//!
//! Every batch of every path (the session function, one message, the opt-in one
//! statement, the pipelined transaction, the lease holder's batches) takes advisory locks
//! (ids: `keys::LockIds`, derived the same way by every process and every build) in ONE
//! order — store lease, table, keys by id —, takes them all before it reads anything it
//! decides on (its reads see every commit of the locks' earlier holders), and holds them
//! until it commits:
//!
//! | writer | lease | table | keys |
//! |---|---|---|---|
//! | ordinary batch of ≤ 48 keys (a put) | shared | shared | written: exclusive; only required: shared |
//! | ordinary batch of more keys | shared | exclusive | — |
//! | the lease holder's lock session, for its tenure | exclusive (session) | — | — |
//! | the holder's batch of ≤ 48 keys (+ the fence check) | — (its session has it) | shared | as above |
//! | the holder's batch of more keys (+ the fence check) | — | exclusive | — |
//! | creating the table | — | exclusive | — |
//!
//! So any two batches that touch a common key, or one of them the whole table, hold a
//! common lock in conflicting modes: their commits are in the order of their lock grants,
//! and a batch that waited sees what the other committed (no lost update, no write past a
//! guard that another batch changed first); no cycle of waits (one order).
//!
//! **Could a put take fewer locks? (issue 24, session 21: no — not provably.)** A put
//! takes five: lease, table, its document and the two keys it only requires (the fence
//! record and one more guard).
//!
//! * *The lease and table locks folded into one.* Within one build it would be sound: a
//!   put takes the lease shared and no table lock, an ordinary batch of many keys takes
//!   the lease *exclusively* instead of the lease shared and the table exclusive (it takes
//!   nothing after it: no new cycle; it already excluded the lease acquirer, through the
//!   lease shared), the holder's batches are unchanged (its session's exclusive lease
//!   excludes every put). But the table is shared with processes of EARLIER builds,
//!   whose batch of many keys holds the lease shared and the table exclusive: against
//!   a folded put (lease shared, key locks) no lock conflicts, so the two read-then-write
//!   the same document at once — a lost update. The backend records no protocol version
//!   (the table is `(k, v)`; `strata_leases` holds holders and tokens), earlier builds read
//!   none, and a version written now would be ignored by them: the only thing an earlier
//!   build obeys is the locks it takes, so a put must keep conflicting with each of them.
//! * *No key lock on a key the put only requires (a guard).* Sound only if every writer
//!   of that key held, for its whole transaction, a lock that excludes every put. The
//!   fence record's writers do not: the schema gate recording a pending cutover
//!   (`Fence::add_pending`, any handle's open), `abort_schema_cutover`, and the cutover
//!   coordinator, whose named lease `cutover` excludes only other coordinators — all
//!   ordinary batches holding the lease and the table shared, as the put does. Without the
//!   guard's key lock a put whose locks were granted before such a batch committed reads
//!   the guard as it was and commits after it: a write past the fence, missed by the
//!   cutover that reads the documents after its fence commit. Making it sound would need
//!   the engine to mark the writes of guards (the backend cannot tell a guard from any
//!   other required key) so that they take the table exclusively, and the protocol gate
//!   above for earlier builds.
//!
//! `tests/it/protocol.rs` holds each of those writers' locks on a raw connection with its
//! write uncommitted and checks that a put (on each path) waits for it and then fails on
//! its commit: a put with fewer locks fails it. What the locks cost was reduced instead
//! without changing them — the session function takes them as plain PL/pgSQL expressions,
//! not a query (`sql::body`; ~70,000 → ~40,000 server instructions per put) — and what the
//! two changes above would still save is measured in BENCHMARKS.md (issue 24, session 21):
//! 9,000–18,000 instructions (≈ 1.5–2.7 µs) per put, where the 1.3× target needs about
//! 70,000 fewer — more than all five locks cost now.

use super::locked::OPTIMISTIC_DECISIONS;
use super::params::{
    mutation_params, precondition_params, rejected_error, require_values_read, WriteParams,
};
use super::pipeline::{is_retryable, join_all, Step, MAX_ATTEMPTS, MAX_KEY_LOCKS};
use super::{one_message, PgStore};
use crate::error::PgError;
use crate::lease;
use crate::pool::Rejected;
use crate::pool::{Conn, Failure};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use strata_store::{Batch, Decide, KvWrite, Mutation, Result, StoreError};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

impl PgStore {
    /// One attempt at a batch: one round trip. `BEGIN`, the locks, the lease holder's
    /// fence check, the conditional write (preconditions checked in the same statement,
    /// see [`crate::sql::Statements::write`]) and `COMMIT` are pipelined: sent together, answered
    /// in order. A statement that fails aborts the transaction, so the later ones write
    /// nothing and the `COMMIT` rolls it back.
    ///
    /// * A writer that does not hold the store lease takes the lease lock shared (waiting
    ///   while a holder has it), then its key locks (or the table-wide lock).
    /// * The holder (`fence` is its token) takes only its key locks (or the table-wide
    ///   lock), and the fence statement fails the transaction unless the lease record
    ///   still has its token and its lock session is alive ([`lease::FENCE_CHECK`]). Its
    ///   batches commit with `synchronous_commit = off`: no wait for the WAL flush (see
    ///   [`KvWrite::flush`] on [`PgStore`] for why that loses nothing a resumed operation
    ///   needs).
    async fn try_apply(
        &self,
        conn: &mut Conn,
        batch: &Batch,
        key_locks: Option<(&[i32], &[bool])>,
        fence: Option<i64>,
    ) -> std::result::Result<(), Failure> {
        let Conn { client, stmts, .. } = conn;
        let Some(stmts) = stmts else {
            return self.try_apply_pooled(client, batch, key_locks, fence).await;
        };
        if fence.is_some() && stmts.fence.is_none() {
            // Prepared on first use: the lease table exists once a lease was taken.
            stmts.fence = Some(client.prepare(lease::FENCE_CHECK).await?);
        }
        let (lease_id, table) = (&self.locks.lease, &self.locks.table);
        let preconditions = batch.preconditions();
        let (pre_keys, pre_values) = precondition_params(preconditions);
        let (set_keys, set_values, deletes) = mutation_params(batch.mutations());
        let client = &*client;
        let lock_params: [&(dyn ToSql + Sync); 2] = [lease_id, table];
        let table_param: [&(dyn ToSql + Sync); 1] = [table];
        let (ids, modes) = key_locks.unwrap_or_default();
        let key_params: [&(dyn ToSql + Sync); 3] = [&self.locks.class, &ids, &modes];
        let params: [&(dyn ToSql + Sync); 5] =
            [&pre_keys, &pre_values, &set_keys, &set_values, &deletes];
        let token = fence.unwrap_or_default();
        let renew = lease::renew_secs();
        let fence_params: [&(dyn ToSql + Sync); 4] = [&self.table, &token, lease_id, &renew];
        let mut steps: Vec<Step<'_>> = vec![Box::pin(client.query(&stmts.begin, &[]))];
        // Where the fence check's answer is in `steps`.
        let mut fence_at = None;
        match (&stmts.fence, key_locks) {
            (Some(check), _) if fence.is_some() => {
                steps.push(Box::pin(client.query(&stmts.async_commit, &[])));
                if key_locks.is_some() {
                    steps.push(Box::pin(
                        client.query(&stmts.holder_lock_table_shared, &table_param),
                    ));
                    steps.push(Box::pin(client.query(&stmts.lock_keys, &key_params)));
                } else {
                    steps.push(Box::pin(
                        client.query(&stmts.holder_lock_table_exclusive, &table_param),
                    ));
                }
                fence_at = Some(steps.len());
                steps.push(Box::pin(client.query(check, &fence_params)));
            }
            (_, Some(_)) => {
                // Other writers share the store lease (waiting while a holder has it).
                steps.push(Box::pin(
                    client.query(&stmts.lock_table_shared, &lock_params),
                ));
                steps.push(Box::pin(client.query(&stmts.lock_keys, &key_params)));
            }
            (_, None) => {
                steps.push(Box::pin(
                    client.query(&stmts.lock_table_exclusive, &lock_params),
                ));
            }
        }
        steps.push(Box::pin(client.query(&stmts.write, &params)));
        steps.push(Box::pin(client.query(&stmts.commit, &[])));
        self.finish_apply(join_all(steps).await, fence_at, token)
    }

    /// [`PgStore::try_apply`] through a transaction-mode pooler: the same pipelined
    /// transaction of unnamed statements, each sent whole with its parameters' types, and
    /// the session settings it relies on (`statement_timeout`, `lock_timeout`) set for
    /// the transaction only — nothing stays in the server session the pooler lends to
    /// others next.
    async fn try_apply_pooled(
        &self,
        client: &tokio_postgres::Client,
        batch: &Batch,
        key_locks: Option<(&[i32], &[bool])>,
        fence: Option<i64>,
    ) -> std::result::Result<(), Failure> {
        let write = WriteParams::of(batch);
        let params = write.typed();
        let tail: Vec<Step<'_>> = vec![
            Box::pin(client.query_typed(&self.texts.write, &params)),
            Box::pin(client.query_typed("COMMIT", &[])),
        ];
        let (answers, fence_at) = self
            .locked_pipeline(client, true, key_locks, fence, tail)
            .await;
        self.finish_apply(answers, fence_at, fence.unwrap_or_default())
    }

    /// The outcome of a pipelined batch from its statements' answers (the write's and
    /// the `COMMIT`'s last; the fence check's at `fence_at`).
    fn finish_apply(
        &self,
        mut results: Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>,
        fence_at: Option<usize>,
        token: i64,
    ) -> std::result::Result<(), Failure> {
        let committed = results.pop();
        let written = results.pop();
        self.head_answers(results, fence_at, token)?;
        let failed = match written {
            Some(r) => r?,
            None => Vec::new(),
        };
        if let Some(r) = committed {
            r?;
        }
        // Nothing was written when rows came back: the failed preconditions.
        super::params::rejection(&failed)
    }
}

/// Why an atomic batch wrote nothing.
enum BatchError {
    /// Preconditions failed (the server's answer: which, and the current values).
    Rejected(Rejected),
    /// Any other failure, as the store error it is.
    Store(StoreError),
}

impl From<StoreError> for BatchError {
    fn from(e: StoreError) -> Self {
        BatchError::Store(e)
    }
}

/// The round trips of [`KvWrite::read_modify_write`] on one handle (relaxed counters).
#[derive(Debug, Default)]
pub(super) struct RoundTrips {
    /// Batches the primitive sent (each one round trip).
    batches: AtomicU64,
    /// Keys it read before deciding.
    reads: AtomicU64,
    /// The statements those reads took (one per decision that read, whatever the keys).
    read_statements: AtomicU64,
    /// Transactions of the locked path (module `locked`): writes whose decisions other
    /// writers kept overtaking.
    pub(super) locked: AtomicU64,
}

impl PgStore {
    /// `(batches sent, keys read)` by this handle's write primitive so far: a write that
    /// decided on the values it expected took one batch and no read. For tests.
    #[cfg(feature = "testing")]
    pub fn write_round_trips(&self) -> (u64, u64) {
        (
            self.round_trips.batches.load(Ordering::Relaxed),
            self.round_trips.reads.load(Ordering::Relaxed),
        )
    }
}

impl PgStore {
    /// The statements this handle's write primitive read keys with before deciding: one
    /// per decision that read, however many keys (see [`PgStore::write_round_trips`] for
    /// the keys). For tests.
    #[cfg(feature = "testing")]
    pub fn write_read_statements(&self) -> u64 {
        self.round_trips.read_statements.load(Ordering::Relaxed)
    }

    /// Transactions this handle's write primitive ran on its locked path (module
    /// `locked`): writes whose decisions other writers kept overtaking. For tests.
    #[cfg(feature = "testing")]
    pub fn locked_writes(&self) -> u64 {
        self.round_trips.locked.load(Ordering::Relaxed)
    }
}

/// The write primitive on PostgreSQL: ONE round trip when the values the write decides on
/// are the ones the backend expects. A write that reads nothing is one batch (see
/// `PgStore::apply_batch`). A write that reads keys decides on what the handle expects
/// them to hold, without reading them first: the bytes it last wrote (its write hints,
/// see `hints`), or — a key it has no hint for, such as a new id — *absent*. It sends the
/// decided batch with one more precondition per key read, "still holds the value decided
/// on", which the server checks in the statement that writes, under the keys' locks: when
/// they hold, the read, the decision and the write are atomic exactly as inside one
/// transaction, and the write took one round trip. When one does not (another handle or
/// process wrote the key, or the guess was wrong), nothing is written and the server
/// answers with the key's current value, on which the write is decided again — one more
/// round trip, and still no separate read. A write overtaken that way three times takes
/// the locked path (module `locked`): its keys' locks, a read, the decision and the write
/// in one transaction of two round trips, which no other writer can overtake.
///
/// A decision that refuses on an expected value is not final: the keys it was not read
/// for are read (all in one statement) and it decides again on what they hold; a refusal on
/// values read or reported by the server is. A failed precondition of the decided batch
/// itself (a guard) is the caller's conflict — once the keys read held what it was
/// decided on (a decision on a wrong value may have chosen other guards).
impl KvWrite for PgStore {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        if reads.is_empty() {
            let Some(batch) = decide(&[]) else {
                return Ok(false);
            };
            self.apply_batch(&batch)?;
            self.remember(&batch, &[], &[]);
            return Ok(true);
        }
        // What each key read is known to hold: read, or reported by the server (`None`
        // while the write decides on an expected value).
        let mut known: Vec<Option<Option<Vec<u8>>>> = vec![None; reads.len()];
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut values = Vec::with_capacity(reads.len());
            let mut expected = false;
            for (key, k) in reads.iter().zip(&known) {
                values.push(match k {
                    Some(v) => v.clone(),
                    None => {
                        expected = true;
                        self.hints.get(key)
                    }
                });
            }
            let Some(mut batch) = decide(&strata_store::borrowed(&values)) else {
                if !expected {
                    return Ok(false);
                }
                // A refusal is only trusted on values known: read the expected ones (in
                // one statement) and decide again on them.
                let unknown: Vec<&[u8]> = reads
                    .iter()
                    .zip(&known)
                    .filter(|(_, k)| k.is_none())
                    .map(|(key, _)| *key)
                    .collect();
                let mut read = self.get_many(&unknown)?.into_iter();
                self.round_trips
                    .reads
                    .fetch_add(unknown.len() as u64, Ordering::Relaxed);
                self.round_trips
                    .read_statements
                    .fetch_add(1, Ordering::Relaxed);
                for k in known.iter_mut().filter(|k| k.is_none()) {
                    *k = Some(read.next().unwrap_or_default());
                }
                continue;
            };
            // The decided batch's own preconditions come first; the reads' after them.
            let own = batch.preconditions().len();
            require_values_read(&mut batch, reads, &values);
            self.round_trips.batches.fetch_add(1, Ordering::Relaxed);
            let rejected = match self.try_batch(&batch) {
                Ok(()) => {
                    self.remember(&batch, reads, &values);
                    return Ok(true);
                }
                Err(BatchError::Rejected(r)) => r,
                Err(BatchError::Store(e)) => {
                    self.forget_all(reads);
                    return Err(e);
                }
            };
            // Only the decision's own guards failed: the caller's conflict. When a key
            // read failed too, the guards were chosen on a value the key did not hold:
            // the decision on the current values says which guards to check.
            let read_failed = rejected
                .failed
                .iter()
                .any(|(i, _)| *i > own && *i <= own + reads.len());
            if !read_failed {
                self.forget_all(reads);
                return Err(rejected_error(batch.preconditions(), &rejected));
            }
            if attempt >= OPTIMISTIC_DECISIONS {
                // Other writers keep overtaking this one: decide under the keys' locks.
                self.forget_all(reads);
                return self.read_modify_write_locked(reads, decide, &batch);
            }
            // Only keys read changed: each now known, as reported (failed) or as decided
            // on (held); decide again on them.
            for (j, (key, value)) in reads.iter().zip(values).enumerate() {
                known[j] = Some(value);
                if let Some((_, current)) = rejected.failed.iter().find(|(i, _)| *i == own + j + 1)
                {
                    tracing::debug!(table = %self.table, key = %strata_store::escape_key(key), attempt, "a key read held another value than decided on; deciding again on it");
                    self.hints.forget(key);
                    known[j] = Some(current.clone());
                }
            }
        }
    }

    /// Makes the lease holder's batches durable (every other batch is: it commits with the
    /// server's default `synchronous_commit`). The holder's batches commit without waiting
    /// for the WAL flush; PostgreSQL writes the WAL in commit order, so a server crash can
    /// only lose a *suffix* of them, each batch whole — the store is then exactly as it was
    /// after an earlier batch, checkpoint included, and a resumed bulk operation redoes
    /// the lost batches. What must not be lost is the end: this runs a synchronous commit
    /// (`lease::FLUSH`), which waits for the WAL up to it, and migrations call it before
    /// they report (releasing the lease commits synchronously too).
    fn flush(&self) -> Result<()> {
        if !self.unflushed.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let flushed = self.pool.with(async |conn| {
            conn.client
                .query_typed(
                    lease::FLUSH,
                    &[(&self.table, tokio_postgres::types::Type::TEXT)],
                )
                .await?;
            Ok(())
        });
        flushed.map_err(|e| {
            self.unflushed.store(true, Ordering::SeqCst);
            self.error(e, "flush")
        })
    }
}

impl PgStore {
    /// Forgets the hints of `reads` (a write on them failed: what they hold is unknown).
    pub(super) fn forget_all(&self, reads: &[&[u8]]) {
        for key in reads {
            self.hints.forget(key);
        }
    }

    /// After a committed write: the keys it set are hinted with their new bytes, the keys
    /// it deleted forgotten, the keys it read and left alone hinted with what they hold.
    pub(super) fn remember(&self, batch: &Batch, reads: &[&[u8]], values: &[Option<Vec<u8>>]) {
        for (key, value) in reads.iter().zip(values) {
            if batch.mutations().iter().all(|m| m.key() != *key) {
                match value {
                    Some(v) => self.hints.remember(key.to_vec(), v.clone()),
                    None => self.hints.forget(key),
                }
            }
        }
        for m in batch.mutations() {
            match m {
                // Only keys a read-modify-write may read again are worth the copy: a
                // hinted key, or one read by this write.
                Mutation::Set { key, value }
                    if reads.contains(&key.as_slice()) || self.hints.get(key).is_some() =>
                {
                    self.hints.remember(key.clone(), value.clone())
                }
                Mutation::Set { .. } => {}
                Mutation::Delete { key } => self.hints.forget(key),
            }
        }
    }

    /// One atomic batch: the locks, the preconditions checked and the mutations written
    /// by the server, in one round trip where it can (see the module).
    pub(super) fn apply_batch(&self, batch: &Batch) -> Result<()> {
        self.try_batch(batch).map_err(|e| match e {
            BatchError::Rejected(r) => rejected_error(batch.preconditions(), &r),
            BatchError::Store(e) => e,
        })
    }

    /// [`PgStore::apply_batch`], a rejection (the failed preconditions, with the current
    /// values the server read) kept apart from the other errors.
    fn try_batch(&self, batch: &Batch) -> std::result::Result<(), BatchError> {
        batch.validate()?;
        // A key PostgreSQL's index could not hold: the same error as every backend's
        // collections give, never a server error "retry" cannot fix.
        batch.check_key_lengths()?;
        if batch.is_empty() {
            return Ok(());
        }
        // A key the batch writes is locked exclusively; a key it only requires (a guard
        // such as the fence record every write checks) is locked shared, so that writers
        // of different documents do not queue behind each other on it.
        let written = self
            .locks
            .key_locks(batch.mutations().iter().map(Mutation::key));
        let mut key_locks: Vec<(i32, bool)> = self
            .locks
            .key_locks(batch.preconditions().iter().map(|p| p.key()))
            .into_iter()
            .map(|id| (id, false))
            .chain(written.into_iter().map(|id| (id, true)))
            .collect();
        // One global order; an id both read and written is taken exclusively.
        key_locks.sort_unstable_by_key(|&(id, exclusive)| (id, !exclusive));
        key_locks.dedup_by_key(|&mut (id, _)| id);
        let lock_ids: Vec<i32> = key_locks.iter().map(|&(id, _)| id).collect();
        let lock_modes: Vec<bool> = key_locks.iter().map(|&(_, x)| x).collect();
        let key_locks = (lock_ids.len() <= MAX_KEY_LOCKS)
            .then_some((lock_ids.as_slice(), lock_modes.as_slice()));
        let fence = self.lease.token();
        // An ordinary writer's batch (not the lease holder's, not under the table-wide
        // lock) is one call of the connection's session function (see `function`), or,
        // on a connection without them, a small one goes in one message (`one_message`).
        let ordinary = key_locks.filter(|_| fence.is_none());
        let fits = one_message::fits(batch);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.pool.with(async |conn| match ordinary {
                Some(locks) => self.try_ordinary(conn, batch, locks, fits).await,
                None => self.try_apply(conn, batch, key_locks, fence).await,
            }) {
                Ok(()) => {
                    if fence.is_some() {
                        self.unflushed.store(true, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                Err(f) => f,
            };
            match failure {
                Failure::Rejected(r) => return Err(BatchError::Rejected(r)),
                Failure::Pg(e) if is_retryable(&e) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(table = %self.table, attempt, error = %e, "retrying a postgres batch");
                    // Let the transaction we collided with finish.
                    std::thread::sleep(Duration::from_millis(1 << attempt.min(6)));
                }
                Failure::Pg(e) if is_retryable(&e) => {
                    return Err(BatchError::Store(
                        PgError::Contention {
                            table: self.table.clone(),
                            attempts: attempt,
                            source: Box::new(e),
                        }
                        .into(),
                    ))
                }
                Failure::Pg(e)
                    if fence.is_none() && e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) =>
                {
                    return Err(BatchError::Store(self.lock_wait_error()));
                }
                other => return Err(BatchError::Store(self.error(other, "apply"))),
            }
        }
    }
}

impl PgStore {
    /// One attempt at an ordinary writer's batch with per-key locks: one call of the
    /// connection's session function, or the one-message batch on a connection without
    /// them (or the pipelined transaction when neither fits).
    async fn try_ordinary(
        &self,
        conn: &mut Conn,
        batch: &Batch,
        locks: (&[i32], &[bool]),
        fits: bool,
    ) -> std::result::Result<(), Failure> {
        match conn.stmts.as_ref().map(|s| &s.functions) {
            Some(Some(f)) => self.try_apply_function(&conn.client, f, batch, locks).await,
            Some(None) if fits => self.try_apply_one_message(conn, batch, locks).await,
            _ => self.try_apply(conn, batch, Some(locks), None).await,
        }
    }

    /// The error of a batch that waited for a lock too long: "migration in progress …"
    /// when another process holds the store lease.
    pub(super) fn lock_wait_error(&self) -> StoreError {
        let waited = self.pool.timeouts().lock_wait;
        match self
            .pool
            .with(async |conn| Ok(lease::holder_of(&conn.client, &self.table).await?))
        {
            Ok(who) => lease::held_error(&self.table, who, waited),
            Err(e) => self.error(e, "apply"),
        }
    }
}
