#!/usr/bin/env python3
"""Writes the statement variants measured in BENCHMARKS.md (issue 24, session 20) as .sql
files into the directory given (default /tmp/pg_variants), for
`cargo run --release -p strata-bench --example pg_statement_cost -- FILES...`.

session_function_assign.sql is session 21's session function (the locks as PL/pgSQL
expressions); one.sql is session 19's one statement (crate::sql::one_statement at a4ca976), fold.sql
session 20's; the others take one part away from one.sql (or keep one part) to price it.
Every file takes the same 11 parameters as the one statement (see sql::one_statement).
"""
import os
import sys

T = "acc"
MAX_XIDS = 32

PROOF = f"""(pg_current_xact_id() = pg_snapshot_xmax(pg_current_snapshot())
    AND pg_snapshot_xmin(pg_current_snapshot()) = pg_snapshot_xmax(pg_current_snapshot())
    OR (SELECT o::text::int8 - m::text::int8 <= {MAX_XIDS} AND NOT EXISTS (
        SELECT FROM (SELECT pg_snapshot_xip(s)
          UNION ALL SELECT generate_series(m::text::int8, o::text::int8 - 1)::text::xid8) z(x)
        WHERE pg_xact_status(x) = 'committed')
      FROM (SELECT s, pg_snapshot_xmax(s) AS m, pg_current_xact_id() AS o
        FROM pg_current_snapshot() AS s OFFSET 0) fresh))"""
# The proof's common case alone (no transaction running at the snapshot, none got an id
# since): NOT complete by itself — a statement using it must fall back when it fails.
FAST = """(pg_current_xact_id() = pg_snapshot_xmax(pg_current_snapshot())
    AND pg_snapshot_xmin(pg_current_snapshot()) = pg_snapshot_xmax(pg_current_snapshot()))"""


def key_lock(i):
    return (f"(CASE WHEN ($11::bool[])[{i}] THEN pg_advisory_xact_lock($9::int4, ($10::int4[])[{i}]) "
            f"ELSE pg_advisory_xact_lock_shared($9::int4, ($10::int4[])[{i}]) END)")


def locks_19():
    """Session 19: three inline slots, an unnest for more, void cast to text."""
    locks = ["pg_advisory_xact_lock_shared($7::int8)::text = ''",
             "pg_advisory_xact_lock_shared($8::int8)::text = ''"]
    for i in range(1, 4):
        locks.append(f"(cardinality($10::int4[]) < {i} OR {key_lock(i)}::text = '')")
    locks.append("(cardinality($10::int4[]) < 4 OR (SELECT count(CASE WHEN x THEN pg_advisory_xact_lock($9::int4, id) "
                 "ELSE pg_advisory_xact_lock_shared($9::int4, id) END) FROM unnest(($10::int4[])[4:], ($11::bool[])[4:]) "
                 "AS u(id, x)) >= 0)")
    locks.append("pg_current_xact_id_if_assigned() IS NULL")
    return locks


def locks_20():
    """Session 20: exactly the three slots a one-document batch can need, IS NOT NULL."""
    locks = ["pg_advisory_xact_lock_shared($7::int8) IS NOT NULL",
             "pg_advisory_xact_lock_shared($8::int8) IS NOT NULL",
             f"{key_lock(1)} IS NOT NULL"]
    for i in (2, 3):
        locks.append(f"(cardinality($10::int4[]) < {i} OR {key_lock(i)} IS NOT NULL)")
    locks.append("pg_current_xact_id_if_assigned() IS NULL")
    return locks


def guards_19(n=2):
    return "\n  ".join(
        f'AND (cardinality($5::bytea[]) < {i} OR (SELECT g.v FROM "{T}" g WHERE g.k = ($5::bytea[])[{i}]) '
        f"IS NOT DISTINCT FROM ($6::bytea[])[{i}])" for i in range(1, n + 1))


DOC_19 = f"""AND (NOT $3::bool OR $4::bytea IS NULL
    OR coalesce((SELECT c.v = $4::bytea OR c.v <> $2::bytea FROM "{T}" c WHERE c.k = $1::bytea), false))"""
FOLD = f"""AND ARRAY(SELECT CASE WHEN g.k = $1::bytea THEN g.v = $4::bytea OR g.v <> $2::bytea
      ELSE g.v IS NOT DISTINCT FROM ($6::bytea[])[array_position($5::bytea[], g.k)] END
    FROM "{T}" g WHERE g.k = ANY($5::bytea[]))
    = array_fill(true, ARRAY[cardinality(array_remove($6::bytea[], NULL))])"""
CONFLICT = "ON CONFLICT (k) DO UPDATE SET v = CASE WHEN NOT $3::bool OR t.v = $4::bytea THEN EXCLUDED.v ELSE t.v END"
RET = """RETURNING CASE WHEN NOT $3::bool THEN true WHEN $4::bytea IS NULL THEN t.xmax = 0 ELSE t.v = $2::bytea END,
  CASE WHEN t.v = $2::bytea THEN NULL ELSE t.v END"""


def stmt(locks, proof=PROOF, checks=None, conflict=CONFLICT, ret=RET):
    checks = guards_19() + "\n  " + DOC_19 if checks is None else checks
    return (f'INSERT INTO "{T}" AS t (k, v) SELECT $1::bytea, $2::bytea\n'
            f'WHERE {"".join(f"CASE WHEN {l} THEN " for l in locks)}{proof}\n  {checks}\n'
            f'{" ELSE false END" * len(locks)}\n{conflict}\n{ret}')


PLAIN = "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"

# The session function path (crate::sql::create_sql, `strata_set`): created per session
# (the part before "-- statement"), called with the batch's preconditions — the guards,
# then the document's own — as the store does.
CONDITIONAL_SET = f"""WITH pre AS (
  SELECT p.i, t.v AS cur, t.v IS NOT DISTINCT FROM p.want AS ok
  FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS p(k, want, i)
  LEFT JOIN LATERAL (SELECT t.v FROM "{T}" t WHERE t.k = p.k OFFSET 0) t ON true
), up AS (
  INSERT INTO "{T}" (k, v) SELECT $3::bytea, $4::bytea
  WHERE NOT EXISTS (SELECT 1 FROM pre WHERE NOT ok)
  ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v
)
SELECT i, cur FROM pre WHERE NOT ok"""
SESSION_FUNCTION = (
    "CREATE FUNCTION pg_temp.strata_set_acc(bytea[], bytea[], bytea, bytea, int8, int8, int4, int4[], bool[]) "
    "RETURNS TABLE (strata_i int8, strata_cur bytea) LANGUAGE plpgsql VOLATILE AS $strata$\n"
    "#variable_conflict use_column\nBEGIN\n"
    "PERFORM count(CASE n WHEN 1 THEN pg_advisory_xact_lock_shared($5) WHEN 2 THEN pg_advisory_xact_lock_shared($6) "
    "ELSE CASE WHEN x THEN pg_advisory_xact_lock($7::int4, id) ELSE pg_advisory_xact_lock_shared($7::int4, id) END END) "
    "FROM unnest(ARRAY[0, 0]::int4[] || $8::int4[], ARRAY[false, false] || $9::bool[]) WITH ORDINALITY AS u(id, x, n);\n"
    f"RETURN QUERY {CONDITIONAL_SET};\nEND $strata$"
    "\n-- statement\n"
    "SELECT strata_i, strata_cur FROM pg_temp.strata_set_acc($5::bytea[] || $1::bytea, $6::bytea[] || $4::bytea, "
    "$1::bytea, $2::bytea, $7, $8, $9, $10, $11) WHERE $3::bool IS NOT NULL")
def session_function_with(locks, decl="DECLARE strata_b bool;\n"):
    """The session function with another lock prologue (session 21)."""
    head, rest = SESSION_FUNCTION.split("BEGIN\n", 1)
    body = rest.split("\n", 1)[1]  # drop the PERFORM line
    return head.replace("#variable_conflict use_column\n", "#variable_conflict use_column\n" + decl) + "BEGIN\n" + locks + body


def assign(fn, *args):
    return f"strata_b := {fn}({', '.join(args)}) IS NULL;\n"


# Session 21: the same five locks in the same order as plain PL/pgSQL expressions (what
# crate::sql::body now creates), and — for pricing only, NOT sound (see store/write.rs,
# "The lock protocol") — the put with the lease and table locks folded into one and no
# key lock on the guards, and with no lock at all.
ASSIGN_LOCKS = (assign("pg_advisory_xact_lock_shared", "$5") + assign("pg_advisory_xact_lock_shared", "$6")
                + "FOR strata_n IN 1 .. coalesce(cardinality($8), 0) LOOP\n"
                "IF $9[strata_n] THEN " + assign("pg_advisory_xact_lock", "$7", "$8[strata_n]")
                + "ELSE " + assign("pg_advisory_xact_lock_shared", "$7", "$8[strata_n]") + "END IF;\nEND LOOP;\n")
FOLD_LOCKS = (assign("pg_advisory_xact_lock_shared", "$5")
              + "FOR strata_n IN 1 .. coalesce(cardinality($8), 0) LOOP\n"
              "IF $9[strata_n] THEN " + assign("pg_advisory_xact_lock", "$7", "$8[strata_n]") + "END IF;\nEND LOOP;\n")

VARIANTS = {
    "raw": f'INSERT INTO "{T}" (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v',
    "one": stmt(locks_19()),
    "nolocks": stmt([]),
    "noproof": stmt(locks_19(), proof="true"),
    "fastproof": stmt(locks_19(), proof=FAST),
    "noguards": stmt(locks_19(), checks=DOC_19),
    "nodoc": stmt(locks_19(), checks=guards_19()),
    "noret": stmt(locks_19(), ret="RETURNING true"),
    "bare_select": stmt([], proof="true", checks="", conflict=PLAIN, ret=""),
    "locks_only": stmt(locks_19(), proof="true", checks="", conflict=PLAIN, ret=""),
    "fold": stmt(locks_20(), checks=FOLD),
    "fold_fast": stmt(locks_20(), proof=FAST, checks=FOLD),
    "fold_noproof": stmt(locks_20(), proof="true", checks=FOLD),
    "fold_nolocks": stmt([], checks=FOLD),
    "fold_checks_only": stmt([], proof="true", checks=FOLD),
    "session_function": SESSION_FUNCTION,
    "session_function_assign": session_function_with(ASSIGN_LOCKS),
    "session_function_fold_unsound": session_function_with(FOLD_LOCKS),
    "session_function_nolocks": session_function_with("", decl=""),
}

# Session 25: timed on one core (server CPU per put from schedstat), how much of the
# function's cost is the PL/pgSQL call itself, and a leaner body (the checks as InitPlans
# of a plain upsert, no CTE, no RETURN QUERY). PLAIN_CHECKS_LOCKS takes its locks inside
# the statement whose snapshot precedes them: NOT sound, pricing only.
PL_CALL_ONLY = """CREATE FUNCTION pg_temp.strata_p_acc(bytea, bytea) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $strata$
BEGIN
INSERT INTO "acc" (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
RETURN 0;
END $strata$
-- statement
SELECT pg_temp.strata_p_acc($1::bytea, $2::bytea) WHERE $3::bool IS NOT NULL"""
GUARD_INITPLANS = """WHERE (SELECT g.v FROM "acc" g WHERE g.k = {k}[1]) IS NOT DISTINCT FROM {w}[1]
  AND (SELECT g.v FROM "acc" g WHERE g.k = {k}[2]) IS NOT DISTINCT FROM {w}[2]"""
PL_LEAN = ("""CREATE FUNCTION pg_temp.strata_q_acc(bytea[], bytea[], bytea, bytea, int8, int8, int4, int4[], bool[], bool, bytea) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $strata$
DECLARE strata_b bool; strata_r int8;
BEGIN
""" + ASSIGN_LOCKS + """INSERT INTO "acc" AS t (k, v) SELECT $3, $4
""" + GUARD_INITPLANS.format(k="$1", w="$2") + """
ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE NOT $10 OR t.v = $11;
GET DIAGNOSTICS strata_r = ROW_COUNT;
RETURN strata_r;
END $strata$
-- statement
SELECT pg_temp.strata_q_acc($5::bytea[], $6::bytea[], $1::bytea, $2::bytea, $7, $8, $9, $10, $11, $3::bool, $4::bytea)""")
PLAIN_CHECKS = ("""INSERT INTO "acc" AS t (k, v) SELECT $1::bytea, $2::bytea
""" + GUARD_INITPLANS.format(k="($5::bytea[])", w="($6::bytea[])") + """
ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE NOT $3::bool OR t.v = $4::bytea""")
PLAIN_CHECKS_LOCKS = PLAIN_CHECKS.replace("WHERE (SELECT", """WHERE pg_advisory_xact_lock_shared($7::int8) IS NOT NULL AND pg_advisory_xact_lock_shared($8::int8) IS NOT NULL
  AND pg_advisory_xact_lock($9::int4, ($10::int4[])[1]) IS NOT NULL
  AND pg_advisory_xact_lock_shared($9::int4, ($10::int4[])[2]) IS NOT NULL
  AND pg_advisory_xact_lock_shared($9::int4, ($10::int4[])[3]) IS NOT NULL
  AND (SELECT""", 1)
VARIANTS.update({
    "pl_call_only": PL_CALL_ONLY,
    "pl_lean": PL_LEAN,
    "plain_checks": PLAIN_CHECKS,
    "plain_checks_locks_unsound": PLAIN_CHECKS_LOCKS,
})


def _slots(n):
    """The shipped function with the upsert tried first, its n preconditions as InitPlans,
    and the CTE only after a failure (session 25; measured no better in the bench)."""
    head, rest = VARIANTS["session_function_assign"].split("RETURN QUERY", 1)
    stmt = rest.split("-- statement", 1)[1]
    slots = "\n  AND ".join(
        f'(cardinality($1) < {i} OR (SELECT g.v FROM "acc" g WHERE g.k = $1[{i}]) IS NOT DISTINCT FROM $2[{i}])'
        for i in range(1, n + 1))
    body = ('INSERT INTO "acc" (k, v) SELECT $3::bytea, $4::bytea\nWHERE ' + slots
            + "\nON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;\nIF FOUND THEN RETURN; END IF;\nRETURN QUERY"
            + rest.split("-- statement", 1)[0])
    return (head + body + "-- statement" + stmt).replace("strata_set_acc", f"strata_slots{n}_acc")


def _scalar():
    """The shipped function returning its failures as one scalar bytea[] (session 25)."""
    s = VARIANTS["session_function_assign"].replace("strata_set_acc", "strata_sc_acc")
    s = s.replace("RETURNS TABLE (strata_i int8, strata_cur bytea)", "RETURNS bytea[]")
    s = s.replace("DECLARE strata_b bool;", "DECLARE strata_b bool; strata_r bytea[];")
    s = s.replace("RETURN QUERY WITH pre AS", "WITH pre AS")
    s = s.replace("SELECT i, cur FROM pre WHERE NOT ok;\nEND $strata$",
                  "SELECT array_agg(cur) INTO strata_r FROM pre WHERE NOT ok;\nRETURN strata_r;\nEND $strata$")
    return s.replace("SELECT strata_i, strata_cur FROM pg_temp.strata_sc_acc(", "SELECT pg_temp.strata_sc_acc(")


VARIANTS.update({"pl_slots3": _slots(3), "pl_slots4": _slots(4), "session_function_scalar": _scalar()})

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/pg_variants"
    os.makedirs(out, exist_ok=True)
    for name, sql in VARIANTS.items():
        with open(os.path.join(out, f"{name}.sql"), "w") as f:
            f.write(sql)
    print(f"{len(VARIANTS)} variants in {out}")
