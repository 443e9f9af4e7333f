//! The SQL of the backend, prepared once per connection.
//!
//! One table holds the whole key space of a store:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS <table> (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)
//! ```
//!
//! `bytea` compares like `memcmp` (then shorter first), which is exactly the unsigned
//! byte order the store trait promises; the primary-key B-tree serves every range scan.

use std::time::Duration;
use tokio_postgres::{Client, Statement};

/// `CREATE TABLE IF NOT EXISTS` for `table` (a validated identifier).
pub(crate) fn create_table(table: &str) -> String {
    format!(r#"CREATE TABLE IF NOT EXISTS "{table}" (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)"#)
}

/// `DROP TABLE IF EXISTS` for `table`.
pub(crate) fn drop_table(table: &str) -> String {
    format!(r#"DROP TABLE IF EXISTS "{table}""#)
}

/// The shape of the relation `table` names in the connection's search path (no row when
/// there is none): its `relkind`, its columns as `name type[ not null]` in order, and its
/// primary-key columns.
pub(crate) const TABLE_SHAPE: &str = r#"SELECT c.relkind::text,
  ARRAY(SELECT a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
        FROM pg_attribute a
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum),
  ARRAY(SELECT a.attname::text
        FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = c.oid AND i.indisprimary
        ORDER BY a.attnum)
FROM pg_class c WHERE c.oid = to_regclass(quote_ident($1))"#;

/// The schema a new table goes to (`current_schema()`, `NULL` when no schema of the
/// search path exists) and the schemas a table name is looked up in.
pub(crate) const SCHEMAS: &str = "SELECT current_schema()::text, current_schemas(false)::text[]";

/// What is wrong with a relation of shape `(relkind, columns, primary key)` (see
/// [`TABLE_SHAPE`]) as a store table, or `None` when it is exactly
/// `(k bytea primary key, v bytea not null)`.
pub(crate) fn shape_problem(relkind: &str, columns: &[String], key: &[String]) -> Option<String> {
    let kind = match relkind {
        "r" => None,
        "v" => Some("a view"),
        "m" => Some("a materialized view"),
        "p" => Some("a partitioned table"),
        "f" => Some("a foreign table"),
        "S" => Some("a sequence"),
        "i" | "I" => Some("an index"),
        "c" => Some("a composite type"),
        _ => Some("not a plain table"),
    };
    if let Some(kind) = kind {
        return Some(format!("is {kind}, not a table"));
    }
    let expected = ["k bytea not null", "v bytea not null"];
    // A table of the two right columns without the key on `k` (its `k` then may be
    // nullable): the key is what is missing, not a column.
    let named_k_v =
        columns.len() == 2 && columns[0].starts_with("k bytea") && columns[1] == expected[1];
    if columns != expected && !(named_k_v && key != ["k"]) {
        return Some(format!(
            "has columns ({}), not (k bytea primary key, v bytea not null)",
            columns.join(", ")
        ));
    }
    if key != ["k"] {
        return Some(if key.is_empty() {
            "has no primary key (k must be its primary key)".to_string()
        } else {
            format!("has primary key ({}), not (k)", key.join(", "))
        });
    }
    None
}

/// The body of a page query: keys in order with their value lengths, and the value only
/// while the running total of key+value bytes stays within the budget (`$B`) and the row
/// number within the record limit (`$R`). The server thus never sends a value the
/// [`PageBuilder`](strata_store::PageBuilder) will not take — in particular not the value
/// of a record larger than the budget — while the builder still makes every decision.
pub(crate) fn scan_sql(table: &str, lower_strict: bool, bounded: bool) -> String {
    let lower = if lower_strict { ">" } else { ">=" };
    let (upper, b, r, l) = if bounded {
        ("AND k < $2", "$3", "$4", "$5")
    } else {
        ("", "$2", "$3", "$4")
    };
    format!(
        r#"SELECT k, len, CASE WHEN rn <= {r}::int8 AND cum <= {b}::int8 THEN v END
FROM (
  SELECT k, v, octet_length(v) AS len,
         row_number() OVER w AS rn,
         sum(octet_length(k)) OVER w + sum(octet_length(v)) OVER w AS cum
  FROM "{table}"
  WHERE k {lower} $1 {upper}
  WINDOW w AS (ORDER BY k ROWS UNBOUNDED PRECEDING)
) page
ORDER BY k
LIMIT {l}::int8"#
    )
}

/// Session settings of every connection: the backend's statements are all served by the
/// primary-key B-tree, and scans rely on reading it in order — a sequential or bitmap scan
/// followed by a sort would read the whole rest of the range for every page (the planner
/// picks exactly that for generic plans of prepared statements, or before `ANALYZE`).
/// Disabling those paths leaves the index scan as the only sensible plan; and as the plan
/// never depends on the parameters, every prepared statement is planned once per
/// connection (`plan_cache_mode = force_generic_plan`) instead of at every execution (a
/// batch's conditional write took about 0.1 ms to plan, as long as it takes to run). The
/// settings affect only this backend's own connections.
///
/// The one-message batches (`store::one_message`) write `bytea` literals as `'\x…'` and
/// read the failed preconditions' values in the hex text form: the sessions fix both
/// settings rather than rely on the server's defaults.
pub(crate) const SESSION_SETTINGS: &str = "SET enable_seqscan = off; SET enable_bitmapscan = off; \
     SET enable_sort = off; SET plan_cache_mode = force_generic_plan; \
     SET standard_conforming_strings = on; SET bytea_output = hex";

/// The per-key locks in one global order: `unnest` yields the (sorted) ids `$ids` in
/// array order, each taken exclusively (`$modes` true: the batch writes the key) or
/// shared (the batch only requires the key), in lock class `$class` — the parameters
/// numbered from `$first` (`$first`, `$first + 1`, `$first + 2`).
pub(crate) fn lock_keys(first: usize) -> String {
    let (class, ids, modes) = (first, first + 1, first + 2);
    format!(
        "SELECT count(CASE WHEN x THEN pg_advisory_xact_lock(${class}::int4, id) \
         ELSE pg_advisory_xact_lock_shared(${class}::int4, id) END) \
         FROM unnest(${ids}::int4[], ${modes}::bool[]) AS u(id, x)"
    )
}

/// One record's value.
pub(crate) fn get_sql(t: &str) -> String {
    format!(r#"SELECT v FROM "{t}" WHERE k = $1"#)
}

/// Whether a key at or above `$1` (and below `$2` when `bounded`) exists.
pub(crate) fn exists_sql(t: &str, bounded: bool) -> String {
    match bounded {
        false => format!(r#"SELECT EXISTS (SELECT 1 FROM "{t}" WHERE k >= $1)"#),
        true => format!(r#"SELECT EXISTS (SELECT 1 FROM "{t}" WHERE k >= $1 AND k < $2)"#),
    }
}

/// `(lease id, table id)`: the lease shared, the table shared.
pub(crate) const LOCK_TABLE_SHARED: &str =
    "SELECT pg_advisory_xact_lock_shared($1::int8), pg_advisory_xact_lock_shared($2::int8)";
/// `(lease id, table id)`: the lease shared, the table exclusive.
pub(crate) const LOCK_TABLE_EXCLUSIVE: &str =
    "SELECT pg_advisory_xact_lock_shared($1::int8), pg_advisory_xact_lock($2::int8)";
/// `(table id)`: the lease holder's table lock, shared.
pub(crate) const HOLDER_LOCK_TABLE_SHARED: &str = "SELECT pg_advisory_xact_lock_shared($1::int8)";
/// `(table id)`: the lease holder's table lock, exclusive.
pub(crate) const HOLDER_LOCK_TABLE_EXCLUSIVE: &str = "SELECT pg_advisory_xact_lock($1::int8)";
/// The rest of the transaction commits without waiting for the WAL flush.
pub(crate) const ASYNC_COMMIT: &str = "SELECT set_config('synchronous_commit', 'off', true)";
/// The session timeouts for one transaction only (`$1` statement, `$2` lock wait, in
/// milliseconds as text): through a transaction-mode pooler nothing is set per session.
pub(crate) const LOCAL_TIMEOUTS: &str =
    "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)";

/// The SQL of a store's statements as text, for connections through a transaction-mode
/// pooler: each is sent whole, with its parameters' types, as the unnamed statement.
#[derive(Debug)]
pub(crate) struct Texts {
    pub(crate) get: String,
    /// `[lower_strict][bounded]`.
    pub(crate) scan: [[String; 2]; 2],
    /// `[bounded]`.
    pub(crate) exists: [String; 2],
    pub(crate) lock_keys: String,
    pub(crate) write: String,
    /// The keys and values of the keys in `$1` (a `bytea[]`) that are present.
    pub(crate) read_many: String,
}

impl Texts {
    pub(crate) fn new(t: &str) -> Self {
        Texts {
            get: get_sql(t),
            scan: [
                [scan_sql(t, false, false), scan_sql(t, false, true)],
                [scan_sql(t, true, false), scan_sql(t, true, true)],
            ],
            exists: [exists_sql(t, false), exists_sql(t, true)],
            lock_keys: lock_keys(1),
            write: conditional_write(t),
            read_many: format!(r#"SELECT k, v FROM "{t}" WHERE k = ANY($1)"#),
        }
    }
}

/// The timeouts of a store's connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Opening the TCP connection (per host).
    pub(crate) connect: Duration,
    /// The startup and authentication exchange after the TCP connection is open.
    pub(crate) handshake: Duration,
    /// One operation (a read, a page, a batch's transaction); also the server's
    /// `statement_timeout` of the store's sessions.
    pub(crate) statement: Duration,
    /// How long an ordinary batch waits for a lock (in particular for another process's
    /// exclusive store lease) before failing; the server's `lock_timeout`.
    pub(crate) lock_wait: Duration,
}

impl Timeouts {
    /// How long the client waits for one operation: the statement timeout plus a grace
    /// period, so that the server's own cancellation (a clean error on a connection that
    /// stays usable) normally comes first and the client's deadline only catches a server
    /// that stopped answering altogether.
    pub(crate) fn client_deadline(&self) -> Duration {
        self.statement.saturating_add(Duration::from_secs(2))
    }
}

/// The prepared statements of one connection.
pub(crate) struct Statements {
    pub(crate) get: Statement,
    /// `[lower_strict][bounded]`.
    pub(crate) scan: [[Statement; 2]; 2],
    /// `[bounded]`.
    pub(crate) exists: [Statement; 2],
    /// `(lease id, table id)`: the lease shared, the table shared.
    pub(crate) lock_table_shared: Statement,
    /// `(lease id, table id)`: the lease shared, the table exclusive.
    pub(crate) lock_table_exclusive: Statement,
    /// `(table id)`: for the lease holder, who has the lease already.
    pub(crate) holder_lock_table_shared: Statement,
    /// `(table id)`: for the lease holder.
    pub(crate) holder_lock_table_exclusive: Statement,
    /// `(class, ids, exclusive flags)`: the per-key locks in one global order.
    pub(crate) lock_keys: Statement,
    /// `BEGIN` and `COMMIT`, prepared so that a batch's statements can be pipelined.
    pub(crate) begin: Statement,
    pub(crate) commit: Statement,
    /// The conditional write of a batch in one statement (see [`conditional_write`]).
    pub(crate) write: Statement,
    /// `synchronous_commit = off` for the rest of the transaction (the lease holder's
    /// batches).
    pub(crate) async_commit: Statement,
    /// The lease holder's fence check ([`crate::lease::FENCE_CHECK`]), prepared on the
    /// connection's first batch of a holder (the lease table exists by then).
    pub(crate) fence: Option<Statement>,
    /// The session functions of an ordinary writer's batches (`store::function`), when
    /// the session could create them.
    pub(crate) functions: Option<Functions>,
}

/// A batch's preconditions and mutations in one statement: `$1`/`$2` the precondition
/// keys and the values they require (`NULL`: absent), `$3`/`$4` the keys and values to
/// set, `$5` the keys to delete. The writes happen only when every precondition holds;
/// the rows returned are the failed preconditions (1-based position, current value), so
/// an empty result means the batch was written. Run inside the batch's transaction after
/// its locks are taken: the statement's snapshot then sees every earlier commit.
///
/// Each precondition key is looked up by itself in the primary-key index: the `LATERAL`
/// subquery with `OFFSET 0` (which the planner does not flatten into a plain join) keeps
/// the generic plan from joining the keys against a walk of the WHOLE index. For the
/// plain `LEFT JOIN` on a table of a few hundred rows the generic plan was a hash join
/// over a full index scan (`EXPLAIN ANALYZE` on 501 rows: all 501 read for 3
/// preconditions, 0.11 ms against 0.06 ms for the lookups); only larger tables (100,000
/// rows) got the nested loop of index lookups.
pub(crate) fn conditional_write(t: &str) -> String {
    format!(
        r#"WITH pre AS (
  SELECT p.i, t.v AS cur, t.v IS NOT DISTINCT FROM p.want AS ok
  FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS p(k, want, i)
  LEFT JOIN LATERAL (SELECT t.v FROM "{t}" t WHERE t.k = p.k OFFSET 0) t ON true
), go AS (
  SELECT coalesce(bool_and(ok), true) AS go FROM pre
), up AS (
  INSERT INTO "{t}" (k, v) SELECT * FROM unnest($3::bytea[], $4::bytea[])
  WHERE (SELECT go FROM go)
  ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v
), del AS (
  DELETE FROM "{t}" WHERE k = ANY($5::bytea[]) AND (SELECT go FROM go)
)
SELECT i, cur FROM pre WHERE NOT ok"#
    )
}

/// [`conditional_write`] for the commonest batch — one set, no delete (a document's
/// put): `$1`/`$2` the preconditions as there, `$3`/`$4` the key and value. The same
/// answer (the failed preconditions), with less for the server to run: no `unnest` of
/// the sets and no empty `DELETE`.
pub(crate) fn conditional_set(t: &str) -> String {
    format!(
        r#"WITH pre AS (
  SELECT p.i, t.v AS cur, t.v IS NOT DISTINCT FROM p.want AS ok
  FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS p(k, want, i)
  LEFT JOIN LATERAL (SELECT t.v FROM "{t}" t WHERE t.k = p.k OFFSET 0) t ON true
), up AS (
  INSERT INTO "{t}" (k, v) SELECT $3::bytea, $4::bytea
  WHERE NOT EXISTS (SELECT 1 FROM pre WHERE NOT ok)
  ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v
)
SELECT i, cur FROM pre WHERE NOT ok"#
    )
}

impl Statements {
    pub(crate) async fn prepare(
        client: &Client,
        table: &str,
        timeouts: Timeouts,
        session_functions: bool,
    ) -> Result<Self, tokio_postgres::Error> {
        client.batch_execute(SESSION_SETTINGS).await?;
        client.batch_execute(&session_timeouts(timeouts)).await?;
        client
            .batch_execute(&prepare_sql(
                &lock_keys(1),
                &conditional_write(table),
                &conditional_set(table),
            ))
            .await?;
        let functions = match session_functions {
            true => Functions::create(client, table).await?,
            false => None,
        };
        let t = table;
        let p = |sql: String| async move { client.prepare(&sql).await };
        Ok(Statements {
            get: p(get_sql(t)).await?,
            scan: [
                [
                    p(scan_sql(t, false, false)).await?,
                    p(scan_sql(t, false, true)).await?,
                ],
                [
                    p(scan_sql(t, true, false)).await?,
                    p(scan_sql(t, true, true)).await?,
                ],
            ],
            exists: [
                p(exists_sql(t, false)).await?,
                p(exists_sql(t, true)).await?,
            ],
            lock_table_shared: p(LOCK_TABLE_SHARED.into()).await?,
            lock_table_exclusive: p(LOCK_TABLE_EXCLUSIVE.into()).await?,
            holder_lock_table_shared: p(HOLDER_LOCK_TABLE_SHARED.into()).await?,
            holder_lock_table_exclusive: p(HOLDER_LOCK_TABLE_EXCLUSIVE.into()).await?,
            lock_keys: p(lock_keys(1)).await?,
            begin: p("BEGIN".into()).await?,
            commit: p("COMMIT".into()).await?,
            write: p(conditional_write(t)).await?,
            async_commit: p(ASYNC_COMMIT.into()).await?,
            fence: None,
            functions,
        })
    }
}

/// The server-side timeouts of a session: statements the client no longer waits for are
/// cancelled by the server too, and lock waits end with an error after `lock_wait`.
pub(crate) fn session_timeouts(t: Timeouts) -> String {
    format!(
        "SET statement_timeout = {}; SET lock_timeout = {}",
        t.statement.as_millis().max(1),
        t.lock_wait.as_millis().max(1)
    )
}

/// The address and port of the server that answers a session (`NULL`s over a Unix
/// socket): which host of a multi-host URL (or behind a pooler) a command talked to.
pub(crate) const SERVER_ADDRESS: &str = "SELECT host(inet_server_addr()), inet_server_port()";

// ---- session functions (see `crate::store::function` for their use) ----

/// The two functions' calling statements on one connection.
pub(crate) struct Functions {
    /// `pg_temp.strata_set_<table>`: a batch of one set.
    pub(crate) set: Statement,
    /// `pg_temp.strata_write_<table>`: any other batch.
    pub(crate) write: Statement,
}

/// The longest identifier PostgreSQL keeps (`NAMEDATALEN - 1`); longer ones are cut.
pub(crate) const MAX_IDENT: usize = 63;

/// `<kind>_<table>`, or `<kind>_<hash of the table>` when that would be longer than an
/// identifier can be (PostgreSQL would cut it, and two tables could then share a name).
pub(crate) fn function_name(kind: &str, table: &str) -> String {
    let name = format!("{kind}_{table}");
    if name.len() <= MAX_IDENT {
        return name;
    }
    let h = crate::keys::fnv1a(&[b"strata-postgres-function", table.as_bytes()]);
    format!("{kind}_{h:016x}")
}

/// The `CREATE FUNCTION`s of one connection for `table` (one string: one implicit
/// transaction, so both are created or neither).
pub(crate) fn create_sql(table: &str) -> String {
    // The conditional write's parameters come first (`$1`…`$4` / `$5`), so its SQL is
    // the prepared statement's text unchanged; then the lock parameters.
    let set = function_name("strata_set", table);
    let write = function_name("strata_write", table);
    format!(
        "CREATE FUNCTION pg_temp.{set}(bytea[], bytea[], bytea, bytea, int8, int8, int4, int4[], bool[]) \
         {body_set}; \
         CREATE FUNCTION pg_temp.{write}(bytea[], bytea[], bytea[], bytea[], bytea[], int8, int8, int4, int4[], bool[]) \
         {body_write}",
        body_set = body(5, &conditional_set(table)),
        body_write = body(6, &conditional_write(table)),
    )
}

/// The rest of a `CREATE FUNCTION` whose lock parameters start at `$first` (lease id,
/// table id, class, ids, modes) and whose result is `write`'s.
///
/// The locks are taken one by one, in the protocol's order — the store lease (shared),
/// the table (shared), then the key locks in array order (the ids sorted, exclusive for
/// written keys, shared for keys only required) — each as a PL/pgSQL assignment of a
/// plain expression (`strata_b := pg_advisory_xact_lock…(…) IS NULL`): PL/pgSQL evaluates
/// such an expression without starting the executor, while a `PERFORM` (a query) builds
/// and tears down executor state at every call — for the put, the locks cost the server
/// ~70,000 instructions as one `PERFORM` over an `unnest` and ~40,000 this way
/// (BENCHMARKS.md, issue 24, session 21). Statements of a function run in order, and a
/// loop over the sorted ids takes them in array order, so the order is the one every
/// other write path takes (`write.rs`, the lock protocol). The conditional write is a
/// query that starts after the last lock was granted: its snapshot sees every commit of
/// the locks' previous holders (see `crate::store::function`).
fn body(first: usize, write: &str) -> String {
    let (lease, table, class, ids, modes) = (first, first + 1, first + 2, first + 3, first + 4);
    format!(
        "RETURNS TABLE (strata_i int8, strata_cur bytea) LANGUAGE plpgsql VOLATILE AS $strata$\n\
         #variable_conflict use_column\n\
         DECLARE strata_b bool;\n\
         BEGIN\n\
         strata_b := pg_advisory_xact_lock_shared(${lease}) IS NULL;\n\
         strata_b := pg_advisory_xact_lock_shared(${table}) IS NULL;\n\
         FOR strata_n IN 1 .. coalesce(cardinality(${ids}), 0) LOOP\n\
         IF ${modes}[strata_n] THEN strata_b := pg_advisory_xact_lock(${class}, ${ids}[strata_n]) IS NULL;\n\
         ELSE strata_b := pg_advisory_xact_lock_shared(${class}, ${ids}[strata_n]) IS NULL;\n\
         END IF;\n\
         END LOOP;\n\
         RETURN QUERY {write};\n\
         END $strata$"
    )
}

impl Functions {
    /// Creates the functions on a fresh connection and prepares their calls; `None` (said
    /// at debug level) when the server refuses to create them — no `TEMPORARY` privilege,
    /// no `plpgsql`, a read-only server — so that the connection keeps the one-message
    /// batches. Lost connections, cancellations and timeouts are errors: those say nothing
    /// about the server's abilities.
    pub(crate) async fn create(
        client: &Client,
        table: &str,
    ) -> Result<Option<Self>, tokio_postgres::Error> {
        if let Err(e) = client.batch_execute(&create_sql(table)).await {
            if !refused(&e) {
                return Err(e);
            }
            tracing::debug!(
                %table,
                error = %e,
                "cannot create the session functions; this connection sends batches as one message of three statements"
            );
            return Ok(None);
        }
        let call = |name: String, n: usize| {
            let params: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
            format!(
                "SELECT strata_i, strata_cur FROM pg_temp.{name}({})",
                params.join(", ")
            )
        };
        Ok(Some(Functions {
            set: client
                .prepare(&call(function_name("strata_set", table), 9))
                .await?,
            write: client
                .prepare(&call(function_name("strata_write", table), 10))
                .await?,
        }))
    }
}

/// Whether `e`, from the `CREATE FUNCTION`s, means the server will not have them: an
/// ordinary SQL error (privilege, missing language, read-only transaction, …), not a
/// lost connection, a fatal error or a cancellation.
pub(crate) fn refused(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::{Severity, SqlState};
    let Some(db) = e.as_db_error() else {
        return false;
    };
    db.parsed_severity() == Some(Severity::Error)
        && *db.code() != SqlState::QUERY_CANCELED
        && *db.code() != SqlState::ADMIN_SHUTDOWN
}

/// The session's prepared statements behind the `EXECUTE`s (run once per connection).
pub(crate) fn prepare_sql(lock_keys: &str, write: &str, set: &str) -> String {
    format!(
        "PREPARE strata_lock_shared(int8, int8) AS \
         SELECT pg_advisory_xact_lock_shared($1), pg_advisory_xact_lock_shared($2); \
         PREPARE strata_lock_keys(int4, int4[], bool[]) AS {lock_keys}; \
         PREPARE strata_write(bytea[], bytea[], bytea[], bytea[], bytea[]) AS {write}; \
         PREPARE strata_set(bytea[], bytea[], bytea, bytea) AS {set}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(c: &[&str]) -> Vec<String> {
        c.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_exact_shape_passes() {
        let good = cols(&["k bytea not null", "v bytea not null"]);
        assert_eq!(shape_problem("r", &good, &cols(&["k"])), None);
        assert_eq!(
            shape_problem("v", &good, &[]).as_deref(),
            Some("is a view, not a table")
        );
        assert_eq!(
            shape_problem("r", &good, &[]).as_deref(),
            Some("has no primary key (k must be its primary key)")
        );
        assert_eq!(
            shape_problem("r", &good, &cols(&["k", "v"])).as_deref(),
            Some("has primary key (k, v), not (k)")
        );
        let text = cols(&["k text not null", "v text not null"]);
        assert_eq!(
            shape_problem("r", &text, &cols(&["k"])).as_deref(),
            Some("has columns (k text not null, v text not null), not (k bytea primary key, v bytea not null)")
        );
        // No primary key: `k` is nullable then, and the key is what the message names.
        let no_key = cols(&["k bytea", "v bytea not null"]);
        assert_eq!(
            shape_problem("r", &no_key, &[]).as_deref(),
            Some("has no primary key (k must be its primary key)")
        );
        let extra = cols(&["k bytea not null", "v bytea not null", "x integer"]);
        assert!(shape_problem("r", &extra, &cols(&["k"])).is_some());
        let nullable = cols(&["k bytea not null", "v bytea"]);
        assert!(shape_problem("r", &nullable, &cols(&["k"])).is_some());
    }
}
