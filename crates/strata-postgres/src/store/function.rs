//! An ordinary writer's batch as ONE call of a session-local PL/pgSQL function.
//!
//! The pipelined transaction of `write.rs` sends `BEGIN`, two lock statements, the
//! conditional write and `COMMIT` as five statements, each answered on its own; the
//! one-message batch (`one_message.rs`) sends the three middle ones as one simple-protocol
//! string of `EXECUTE`s, with the bytes as hex literals the server parses. Both make the
//! server run three top-level statements per put, and each costs a statement cycle
//! (bind, portal, snapshot, a flushed answer) of about the executor time of the raw
//! `INSERT … ON CONFLICT` it is measured against.
//!
//! Here every connection creates, once, when it is set up, two functions in its own
//! temporary schema (`pg_temp`, private to the session and dropped with it):
//!
//! * `pg_temp.strata_set_<table>(pre keys, pre values, key, value, lease id, table id,
//!   lock class, lock ids, lock modes)` for a batch of one set (a put), and
//! * `pg_temp.strata_write_<table>(pre keys, pre values, set keys, set values, delete
//!   keys, lease id, table id, lock class, lock ids, lock modes)` for any other batch,
//!
//! each doing in order what the one-message batch does — take the store lease and table
//! locks (shared), then the per-key locks (sorted ids, exclusive for written keys, shared
//! for required ones), one PL/pgSQL assignment of a plain expression each, in statement
//! order and a loop over the ids in array order (no query per lock: see `sql::body`
//! for what that saves), then `RETURN QUERY` the conditional write
//! ([`crate::sql::conditional_set`] / [`crate::sql::conditional_write`], the same SQL text: the
//! functions' first parameters are the statement's) — and a batch is ONE prepared
//! extended-protocol statement `SELECT … FROM pg_temp.strata_set_<table>($1, …)` with
//! binary parameters: one message, no hex, one statement cycle, like the raw contender.
//!
//! Why the guarantees are those of the separate statements:
//!
//! * **Fresh snapshot after the locks.** The functions are `VOLATILE`, and under READ
//!   COMMITTED every SQL command a volatile function runs takes a new snapshot ("STABLE
//!   and IMMUTABLE functions use a snapshot established as of the start of the calling
//!   query, whereas VOLATILE functions obtain a fresh snapshot at the start of each query
//!   they execute", PostgreSQL 15 documentation, 38.7 Function Volatility Categories; and
//!   13.2.1 Read Committed Isolation Level: "a SELECT query … sees only data committed
//!   before the query began"). So the conditional write, which starts after the lock
//!   commands returned, sees every batch committed before its locks were granted (a
//!   lock holder commits — and becomes visible — before it releases its transaction-scoped
//!   locks). A single plain SQL statement would NOT do: its one snapshot is taken before
//!   any lock function inside it waits, so it could miss the commit it waited for
//!   (checked by hand: `SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock_shared(L))
//!   l), (SELECT v FROM t WHERE k = 'k')` waiting for a session that updates `k` and then
//!   releases `L` returns the OLD value; the same two steps in a volatile PL/pgSQL function
//!   return the new one; `tests/it/write_paths.rs` races a writer against the lease holder
//!   this way on both paths). The
//!   outer `SELECT`'s own snapshot predates the locks too, but it reads nothing but the
//!   function's result.
//! * **Same locks, same order** (lease, table, keys in id order), transaction-scoped
//!   (`pg_advisory_xact_lock*`, 9.27.10 Advisory Lock Functions): released at the end of
//!   the transaction.
//! * **One transaction, committed at the end.** Outside `BEGIN`, the extended-protocol
//!   message sequence up to `Sync` runs as one implicit transaction (55.2.4 Extended Query,
//!   "Pipelining": it is closed by the `Sync`), committed with the server's default
//!   durability (`synchronous_commit` as configured; no `SET` in the function). An error
//!   anywhere (a lock wait timeout, a deadlock, a cancellation) rolls the whole call back
//!   and reaches the client with its SQLSTATE (the retries and errors of `write.rs` apply
//!   unchanged).
//! * **Plans made once per session**: PL/pgSQL caches its statements' plans for the
//!   session (43.11.2 Plan Caching), generic ones under the session's
//!   `plan_cache_mode = force_generic_plan`.
//!
//! Security and naming: objects in `pg_temp` are visible to their own session only, and
//! functions there are never found through the search path — the call names
//! `pg_temp.<function>` explicitly. The name carries the table (a checked identifier of
//! at most 63 lowercase letters, digits and `_`; a hash of it when the name would be too
//! long), so stores of different tables never share a function, whichever connection
//! they run on. The table is looked up through the session's search path when the plan
//! is made, as the prepared statements' is.
//!
//! Fallback: creating the functions needs the `TEMPORARY` privilege on the database
//! (granted to `PUBLIC` by default) and the `plpgsql` language (installed by default).
//! When the `CREATE FUNCTION`s fail (one implicit transaction: both or neither), the
//! connection says so at debug level and keeps the one-message batches
//! (`one_message.rs`); a connection is never left with one function and not the other.
//! [`crate::PgOptions::session_functions`] turns the functions off for a store.

use super::PgStore;
use crate::pool::Failure;
use crate::sql::Functions;
use strata_store::{Batch, Mutation};
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

impl PgStore {
    /// One attempt at a batch as one function call (see the module); `functions` are the
    /// connection's, `key_locks` the sorted lock ids and their exclusive flags.
    pub(super) async fn try_apply_function(
        &self,
        client: &Client,
        functions: &Functions,
        batch: &Batch,
        (ids, modes): (&[i32], &[bool]),
    ) -> Result<(), Failure> {
        let preconditions = batch.preconditions();
        let (pre_keys, pre_values) = super::params::precondition_params(preconditions);
        let locks: [&(dyn ToSql + Sync); 5] = [
            &self.locks.lease,
            &self.locks.table,
            &self.locks.class,
            &ids,
            &modes,
        ];
        let rows = match batch.mutations() {
            // One set and nothing else (a put): the leaner function.
            [Mutation::Set { key, value }] => {
                let (key, value) = (key.as_slice(), value.as_slice());
                let mut params: Vec<&(dyn ToSql + Sync)> =
                    vec![&pre_keys, &pre_values, &key, &value];
                params.extend(locks);
                client.query(&functions.set, &params).await?
            }
            mutations => {
                let (set_keys, set_values, deletes) = super::params::mutation_params(mutations);
                let mut params: Vec<&(dyn ToSql + Sync)> =
                    vec![&pre_keys, &pre_values, &set_keys, &set_values, &deletes];
                params.extend(locks);
                client.query(&functions.write, &params).await?
            }
        };
        // Nothing was written when rows came back: the failed preconditions.
        super::params::rejection(&rows)
    }
}

impl PgStore {
    /// Whether a connection of this store (an idle one, or a new one) has the session
    /// functions, i.e. sends an ordinary writer's batches as one function call. For tests
    /// of the fallback.
    #[cfg(feature = "testing")]
    pub fn session_functions_in_use(&self) -> strata_store::Result<bool> {
        self.pool
            .with(async |conn| Ok(conn.stmts.as_ref().is_some_and(|s| s.functions.is_some())))
            .map_err(|e| self.error(e, "connect"))
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::{self, *};

    #[test]
    fn names_carry_the_table_and_fit_an_identifier() {
        assert_eq!(
            function_name("strata_set", "accounts"),
            "strata_set_accounts"
        );
        let long = "t".repeat(63);
        let a = function_name("strata_write", &long);
        let b = function_name("strata_write", &"u".repeat(63));
        assert!(a.len() <= MAX_IDENT && b.len() <= MAX_IDENT, "{a} {b}");
        assert_ne!(a, b);
        // Just fitting: the table itself.
        let fits = "x".repeat(MAX_IDENT - "strata_write_".len());
        assert_eq!(
            function_name("strata_write", &fits),
            format!("strata_write_{fits}")
        );
    }

    #[test]
    fn the_body_takes_the_locks_then_runs_the_write_unchanged() {
        let sql = create_sql("accounts");
        let set = sql::conditional_set("accounts");
        assert!(sql.contains(&format!("RETURN QUERY {set};")), "{sql}");
        // The put's function: the lease ($5), the table ($6), then the keys (class $7,
        // ids $8, modes $9) in array order — one plain expression each, in statement
        // order —, then the write.
        let at = |needle: &str| {
            sql.find(needle)
                .unwrap_or_else(|| panic!("{needle} not in {sql}"))
        };
        let order = [
            at("strata_b := pg_advisory_xact_lock_shared($5) IS NULL;"),
            at("strata_b := pg_advisory_xact_lock_shared($6) IS NULL;"),
            at("FOR strata_n IN 1 .. coalesce(cardinality($8), 0) LOOP"),
            at("IF $9[strata_n] THEN strata_b := pg_advisory_xact_lock($7, $8[strata_n]) IS NULL;"),
            at("ELSE strata_b := pg_advisory_xact_lock_shared($7, $8[strata_n]) IS NULL;"),
            at("END LOOP;"),
            at("RETURN QUERY"),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}\n{sql}");
        // The general write's function: the locks' parameters from $6.
        let general = sql
            .split("CREATE FUNCTION")
            .nth(2)
            .unwrap_or_else(|| panic!("two functions in {sql}"));
        let order = [
            general.find("strata_b := pg_advisory_xact_lock_shared($6) IS NULL;"),
            general.find("strata_b := pg_advisory_xact_lock_shared($7) IS NULL;"),
            general.find("FOR strata_n IN 1 .. coalesce(cardinality($9), 0) LOOP"),
            general
                .find("IF $10[strata_n] THEN strata_b := pg_advisory_xact_lock($8, $9[strata_n])"),
            general.find("RETURN QUERY"),
        ];
        assert!(
            order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] < w[1]),
            "{order:?}\n{general}"
        );
        // Every lock a plain expression (no query, hence no executor per lock); exactly
        // two table-level locks and two key-lock calls per function.
        assert_eq!(sql.matches("PERFORM").count(), 0, "{sql}");
        assert_eq!(
            sql.matches("pg_advisory_xact_lock_shared(").count(),
            6,
            "{sql}"
        );
        assert_eq!(sql.matches("pg_advisory_xact_lock(").count(), 2, "{sql}");
        assert_eq!(sql.matches("VOLATILE").count(), 2);
    }
}
