//! An ordinary writer's one-document batch as ONE top-level SQL statement (issue 24).
//!
//! The session functions (`function.rs`) and the one-message batches (`one_message.rs`)
//! make the server run a PL/pgSQL call or three statements per put; measured with the
//! backend's CPU time, that costs about twice one plain statement carrying the same
//! locks and checks (BENCHMARKS.md, issue 24, session 17). Here a batch of exactly one
//! set — a document's put, insert or update — with its preconditions is one prepared
//! `INSERT … SELECT … WHERE … ON CONFLICT (k) DO UPDATE` ([`crate::sql::one_statement`]):
//! the locks are the conditions of nested `CASE`s in its `WHERE` and the checks one
//! InitPlan inside the innermost one (a single index scan of every key the batch
//! requires: the guards, and the document when it must be present), so they are
//! evaluated in that order before the row is touched, and
//! the document's own precondition decides the conflict branch — the new value, or the
//! row's own value back (nothing changes) with the current value in the answer, so that
//! a write decided on a wrong guess is decided again without a read.
//!
//! Why it is serializable against every other write path. Every writer of a key — this
//! statement, the session functions, the one-message and pipelined batches, the lease
//! holder's — holds that key's advisory lock exclusively (or the table-wide lock
//! exclusively, which excludes the shared table lock every per-key writer takes) until
//! its transaction ends, and commits (becomes visible) before releasing it. This
//! statement takes the same locks in the same global order (the store lease and the table
//! shared, then the keys in id order: exclusive for the key it writes, shared for the
//! keys it only requires) before it reads or writes anything, so from the moment they
//! are granted until it commits, no other writer changes any key it reads. What remains
//! is what it sees of the commits made *before* the locks were granted:
//!
//! * A top-level statement has ONE snapshot, taken before its lock waits, so a batch
//!   committed between the snapshot and the grant (for instance while this statement
//!   waited for its key lock) would be invisible to it. The statement therefore proves,
//!   after the locks, that no such commit exists: every transaction that could have
//!   committed since the snapshot either was running when it was taken (it is in the
//!   snapshot's `xip` list) or got its id at or after the snapshot's `xmax` — and before
//!   this statement's own id, which is assigned after the locks (a writer that committed
//!   before the grant was given its id before it wrote, i.e. before it released the lock
//!   this statement then took; the statement checks, after the grant, that its
//!   transaction has no id yet — a plan-time evaluation of `pg_current_xact_id()`, as
//!   `generate_series`'s row estimate made before the `OFFSET 0` fence, assigned one
//!   before the snapshot and let a lost update through the conformance suite's
//!   `cas_increments_are_not_lost`). `pg_xact_status` of each of those ids says whether it
//!   committed; if one did (or more than [`crate::sql::MAX_XIDS_SINCE`] ids were handed
//!   out in between), the snapshot is not proven fresh and the statement writes nothing.
//!   A proven-fresh snapshot sees exactly the committed state at the grant, so its plain
//!   read of the guards (present or absent) and of the document is the latest values,
//!   as a fresh snapshot after the locks gives the other paths. (Since session 20 that
//!   read is ONE index scan of all those keys instead of one lookup each: the same
//!   snapshot, the same place in the order — after the proof —, and the same verdict:
//!   every row found must hold what its key requires — a guard required absent fails on
//!   any row, the document on a row that holds the value to write without the required
//!   one — and as many rows must be found as keys are required present, so a missing
//!   one fails too; a key required twice can only fail, which is undecided, never a
//!   wrong write.)
//! * The write itself is the `INSERT … ON CONFLICT`, whose conflict check and row lock
//!   see the newest row version whatever the snapshot.
//!
//! When the statement answers no row — not proven fresh, a guard failed, or the document
//! was expected present and is absent — nothing was written, and the batch is sent again
//! on the same connection through the path with a fresh snapshot after its locks (the
//! session function, or one message), which writes it or says which precondition failed
//! with the current values. So the one-statement path only ever decides cases it can
//! prove; everything else takes the path it always took (the lease holder's batches,
//! batches of several mutations or under the table-wide lock, connections through a
//! transaction-mode pooler never try it). [`crate::PgOptions::one_statement`] turns it
//! on for a store: it is off by default since session 20 measured it against the
//! session function — more server instructions per put (306,000 against 291,000 with
//! callgrind, after this session's cheaper form; 389,000 before), no lower latency for
//! one writer, and with four writers at once 4–15% of its writes undecided (a commit
//! between its snapshot and its locks) and slower than the function in 9 of 12 runs, by
//! up to 27% (BENCHMARKS.md, issue 24, session 20).

use super::PgStore;
use crate::pool::{Failure, Rejected};
use strata_store::{Batch, Mutation, Precondition};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

/// A batch the one statement can carry: one set, at most one precondition on its key,
/// at most [`crate::sql::MAX_GUARDS`] preconditions on other keys.
pub(super) struct Plan<'a> {
    key: &'a [u8],
    value: &'a [u8],
    /// The document's own precondition: its 1-based position among the batch's and the
    /// value it requires (`None`: absent).
    own: Option<(usize, Option<&'a [u8]>)>,
    /// The other keys the batch requires, and the value each must hold (`None`: absent).
    guard_keys: Vec<&'a [u8]>,
    guard_values: Vec<Option<&'a [u8]>>,
}

impl<'a> Plan<'a> {
    /// The plan of `batch`, or `None` when the one statement cannot carry it.
    pub(super) fn of(batch: &'a Batch) -> Option<Self> {
        let [Mutation::Set { key, value }] = batch.mutations() else {
            return None;
        };
        let mut plan = Plan {
            key,
            value,
            own: None,
            guard_keys: Vec::new(),
            guard_values: Vec::new(),
        };
        for (i, p) in batch.preconditions().iter().enumerate() {
            match p {
                p if p.key() == key.as_slice() => {
                    if plan.own.is_some() {
                        // Two requirements on the document: the general path decides.
                        return None;
                    }
                    let want = match p {
                        Precondition::Equals { value, .. } => Some(value.as_slice()),
                        Precondition::Absent { .. } => None,
                    };
                    plan.own = Some((i + 1, want));
                }
                Precondition::Equals { key, value } => {
                    plan.guard_keys.push(key);
                    plan.guard_values.push(Some(value));
                }
                Precondition::Absent { key } => {
                    plan.guard_keys.push(key);
                    plan.guard_values.push(None);
                }
            }
        }
        // The document's lock and one per guard must fit the statement's lock slots
        // (`sql::KEY_LOCKS`).
        (plan.guard_keys.len() <= crate::sql::MAX_GUARDS).then_some(plan)
    }
}

/// What the one statement answered.
pub(super) enum Answer {
    /// The batch was written.
    Written,
    /// The document's own precondition failed: nothing was written; its current value.
    Refused(Rejected),
    /// It could not decide (see the module): nothing was written; send the batch on the
    /// general path.
    Undecided,
}

impl PgStore {
    /// One attempt at `plan`'s batch as the one statement `stmt` (see the module);
    /// `ids`/`modes` the sorted key lock ids and their exclusive flags.
    pub(super) async fn try_one_statement(
        &self,
        client: &Client,
        stmt: &Statement,
        plan: &Plan<'_>,
        (ids, modes): (&[i32], &[bool]),
    ) -> Result<Answer, Failure> {
        if ids.len() > crate::sql::KEY_LOCKS {
            // Never for a plan's keys (the document and at most `MAX_GUARDS`); the
            // statement has no slot for more, so the general path takes the batch.
            return Ok(Answer::Undecided);
        }
        let has_own = plan.own.is_some();
        let want = plan.own.and_then(|(_, w)| w);
        // The keys the statement reads: the guards, and the document when it is required
        // present (with the value it must hold; see `sql::one_statement`).
        let (mut keys, mut values) = (plan.guard_keys.clone(), plan.guard_values.clone());
        if let Some(want) = want {
            keys.push(plan.key);
            values.push(Some(want));
        }
        let params: [&(dyn ToSql + Sync); 11] = [
            &plan.key,
            &plan.value,
            &has_own,
            &want,
            &keys,
            &values,
            &self.locks.lease,
            &self.locks.table,
            &self.locks.class,
            &ids,
            &modes,
        ];
        let rows = client.query(stmt, &params).await?;
        let Some(row) = rows.first() else {
            return Ok(Answer::Undecided);
        };
        let ok: bool = row.try_get(0)?;
        if ok {
            return Ok(Answer::Written);
        }
        let current: Option<Vec<u8>> = row.try_get(1)?;
        let position = plan.own.map_or(0, |(i, _)| i);
        // `NULL`: the row holds exactly the value this batch would have written (only when
        // it was required absent: see `sql::one_statement`).
        let current = current.unwrap_or_else(|| plan.value.to_vec());
        Ok(Answer::Refused(Rejected {
            failed: vec![(position, Some(current))],
        }))
    }
}
