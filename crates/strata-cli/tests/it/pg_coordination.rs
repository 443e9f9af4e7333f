//! Coordination across processes on one PostgreSQL store: real child processes (this test
//! binary re-run as the `child` entry point, see [`child`]) against the server in
//! `STRATA_PG_URL`, each test on its own scratch table.
//!
//! * two sweepers: the second is contended while the first runs (one line naming the
//!   holder's pid), the first is SIGKILLed mid-sweep and a third process takes over at
//!   once, resuming after the cursor: every row swept exactly once (the upcast counts its
//!   applications in the row; the marker's cumulative counter is the row count);
//! * a drain barrier with clients in three processes: one holdout (a process busy with a
//!   long exclusive write) times the barrier out, the cutover is aborted and nothing was
//!   rewritten; with the holdout gone the cutover proceeds;
//! * a cutover coordinator SIGKILLed mid-rewrite and finished by another process: every
//!   record transformed exactly once (the transform counts its applications).
//!
//! Built without `STRATA_PG_URL` the tests are ignored ("needs STRATA_PG_URL").
#![cfg(feature = "postgres")]

use crate::support::pg::{db_url, owner, scratch_table};
use crate::support::scan_prefix;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Lines};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};
use strata::clock::ManualClock;
use strata::layout::envelope::{self, Envelope};
use strata::layout::keys::{doc_key, doc_prefix, sweep_key};
use strata::ops::cutover::{cutover_key, CutoverOptions};
use strata::ops::sweep::SweepMarker;
use strata::pass::PassLimits;
use strata::policy::{
    additive_only, coordinated_cutover, FenceState, PolicyConfig, PolicyError, SchemaDeclaration,
};
use strata::Mode;
use strata::{CollectionOptions, Database};
use strata_store::{Batch, KvRead, KvWrite, NamedLease, Store};

const ROLE: &str = "STRATA_PGMULTI_ROLE";
const DB: &str = "STRATA_PGMULTI_DB";
const ARGS: &str = "STRATA_PGMULTI_ARGS";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

// ---------------------------------------------------------------------------------------
// The child processes.

/// A document of the sweep test; the eager step (v1 → v2) counts its applications.
#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    #[serde(default)]
    sweeps: u64,
}

fn sweep_options() -> CollectionOptions {
    CollectionOptions::new().upcast(1, Mode::Eager, |obj| {
        let n = obj.get("sweeps").and_then(Value::as_u64).unwrap_or(0);
        obj.insert("sweeps".into(), (n + 1).into());
        Ok(())
    })
}

#[derive(Debug, Serialize, Deserialize)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct InvNew {
    id: String,
    amount: Amount,
}

fn old_schema() -> Value {
    json!({"type":"object","properties":{"id":{"type":"string"},"total":{"type":"number"}},"required":["id","total"]})
}

fn new_schema() -> Value {
    json!({"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"object","properties":{"gross":{"type":"number"}},"required":["gross"]}},"required":["id","amount"]})
}

/// The cutover's transform; `n` counts its applications to a record.
fn reshape(d: Value) -> Result<Value, String> {
    let n = d.get("n").and_then(Value::as_u64).unwrap_or(0);
    Ok(json!({"id": d["id"], "amount": {"gross": d["total"]}, "n": n + 1}))
}

/// Opens a database handle of the new build (the invoices' transform declared) with a
/// policy clock of `clock`.
fn new_build(store: Store, config: PolicyConfig) -> Database {
    let db = Database::builder(store).policy(config).open().unwrap();
    let inv = db
        .collection::<InvNew>("invoices", CollectionOptions::new())
        .unwrap();
    db.declare(
        SchemaDeclaration::new("invoices", new_schema())
            .payload(inv.current_version(), [])
            .strategy(coordinated_cutover(reshape))
            .strategy(additive_only()),
    )
    .unwrap();
    db
}

/// The child entry point: the multi-process tests run this test binary again with only
/// this test (`pg_coordination::child`) selected and `STRATA_PGMULTI_ROLE` set. Roles:
///
/// * `sweep`: the application's admin command line (`strata_cli::Admin` with the `docs`
///   collection and its eager step) with the arguments in `STRATA_PGMULTI_ARGS`;
/// * `client`, `holdout`: a database handle with a 50 ms heartbeat (the holdout also holds
///   its store's exclusive write lease, as a long bulk write would), printing
///   `ready <client id>` on stderr and running until stdin closes;
/// * `coordinate`: runs the pending cutover in batches of 10 records, one
///   `cutover batch committed` line per batch, then `cutover done <records>`.
#[test]
#[ignore = "the child process of the multi-process tests (they run it)"]
fn child() {
    let role = std::env::var(ROLE).expect("run by the multi-process tests");
    let db = std::env::var(DB).unwrap();
    match role.as_str() {
        "sweep" => {
            let args = std::env::var(ARGS).unwrap();
            let code = strata_cli::Admin::new()
                .name("app")
                .collection::<Doc>("docs", sweep_options())
                .run_from(
                    ["app", "--db", db.as_str()]
                        .into_iter()
                        .chain(args.split(' ')),
                );
            // `ExitCode` has no stable accessor: its debug form carries the status.
            let status: i32 = format!("{code:?}")
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap();
            std::process::exit(status)
        }
        "client" | "holdout" => {
            let store = strata_postgres::connect_store(&db).unwrap();
            let handle = Database::builder(store.clone())
                .policy(PolicyConfig::new().heartbeat(Some(std::time::Duration::from_millis(50))))
                .open()
                .unwrap();
            let busy = (role == "holdout").then(|| store.lease());
            eprintln!("ready {}", handle.policy().unwrap().client_id());
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {}
            drop(busy);
            drop(handle);
            std::process::exit(0)
        }
        "coordinate" => {
            let store = strata_postgres::connect_store(&db).unwrap();
            let handle = new_build(store, PolicyConfig::new().heartbeat(None));
            let result = handle.run_schema_cutover(
                CutoverOptions::new()
                    .limits(PassLimits::new(10, 1 << 20).unwrap())
                    .on_progress(|_| eprintln!("cutover batch committed")),
            );
            match result {
                Ok(report) => {
                    eprintln!("cutover done {}", report.records);
                    std::process::exit(0)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(1)
                }
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn_child(role: &str, db: &str, args: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "pg_coordination::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(DB, db)
        .env(ARGS, args)
        .env("STRATA_LOG", "strata::pass=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run_child(role: &str, db: &str, args: &str) -> Output {
    // Waiting for the output closes its stdin first.
    spawn_child(role, db, args).wait_with_output().unwrap()
}

/// The JSON document a child printed (after the test harness's own lines).
/// The JSON document in the command's stdout (between its first `{` and its last `}`).
fn json_within(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in {text}"));
    let end = text.rfind('}').unwrap();
    serde_json::from_str(&text[start..=end]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Reads `lines` until `n` lines contain `needle`.
fn wait_for(lines: &mut Lines<BufReader<ChildStderr>>, needle: &str, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut count = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains(needle) {
            count += 1;
            seen.push(line);
            if count == n {
                return seen;
            }
        } else if line.starts_with("error") {
            panic!("child failed: {line}");
        }
    }
    panic!("the child ended before {n} lines with {needle:?}");
}

/// Writes `n` v1 documents of `collection` (created in the catalog first) in batches.
fn write_docs(store: &Store, collection: &str, n: usize, doc: impl Fn(&str) -> Value) {
    for start in (0..n).step_by(500) {
        let mut batch = Batch::new();
        for i in start..(start + 500).min(n) {
            let id = format!("d{i:06}");
            let json = serde_json::to_vec(&doc(&id)).unwrap();
            let env = Envelope {
                payload_version: 1,
                lock_version: 1,
            };
            batch = batch.set(doc_key(collection, &id), envelope::encode(env, &json));
        }
        store.apply(batch).unwrap();
    }
}

/// Takes the named lease `name` once its dead holder's server session has ended (the
/// caller drops it at once).
fn until_released(store: &Store, name: &str) -> NamedLease {
    let lease = NamedLease::acquire(store, name, "the test", Duration::from_secs(30)).unwrap();
    assert!(matches!(lease, NamedLease::Held(_)), "{lease:?}");
    lease
}

fn marker(store: &Store) -> SweepMarker {
    SweepMarker::decode("docs", &store.get(&sweep_key("docs")).unwrap().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn two_sweepers_one_contended_then_a_killed_holder_is_taken_over_and_each_row_swept_once() {
    const N: usize = 3000;
    let table = scratch_table("strata_co");
    let store = owner(&table);
    {
        let db = Database::builder(store.clone())
            .policy(PolicyConfig::new().heartbeat(None))
            .open()
            .unwrap();
        db.collection::<Doc>("docs", CollectionOptions::new())
            .unwrap();
    }
    write_docs(&store, "docs", N, |id| json!({"id": id}));
    let db = db_url(&table);

    // The first sweeper, in small batches.
    let mut first = spawn_child("sweep", &db, "sweep docs --batch-size 5");
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "pass batch committed", 1);

    // A second process while the first holds the lease: contended, naming the holder.
    let out = run_child("sweep", &db, "sweep docs --json");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_within(&out);
    assert!(
        doc["note"].as_str().unwrap().starts_with("contended"),
        "{doc}"
    );
    let holder = doc["holder"].as_str().unwrap();
    assert!(
        holder.contains(&format!("(pid {} ", first.id())),
        "{holder}"
    );
    assert_eq!(doc["rewritten"], 0, "{doc}");

    // Kill the holder mid-sweep.
    wait_for(&mut lines, "pass batch committed", 4);
    first.kill().unwrap();
    assert_eq!(first.wait().unwrap().signal(), Some(9));
    // A batch the holder sent before dying may still commit: its server session ends only
    // after that, releasing the named lease — taking it (briefly) waits for exactly that.
    drop(until_released(&store, "sweep/docs"));
    let left = marker(&store);
    assert_eq!(left.in_progress, Some(2), "{left:?}");
    let done_by_first = left.counters.rewritten;
    assert!(done_by_first >= 25 && done_by_first < N as u64, "{left:?}");
    let first_token = left.token.unwrap();

    // A third process takes over at once (no lease expiry to wait for) and resumes.
    let out = run_child("sweep", &db, "sweep docs --json");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_within(&out);
    assert_eq!(doc["note"], "complete", "{doc}");
    assert_eq!(doc["resumed"], true, "{doc}");
    assert_eq!(doc["rewritten"], N as u64 - done_by_first, "{doc}");

    // Every row exactly once: at v2 with one application of the step; the marker's
    // cumulative counter is the row count, under a larger fencing token.
    let done = marker(&store);
    assert_eq!(done.completed, 2);
    assert_eq!(done.in_progress, None);
    assert_eq!(done.counters.rewritten, N as u64, "{done:?}");
    assert!(done.token.unwrap() > first_token, "{done:?}");
    let rows = scan_prefix(&store, &doc_prefix("docs"));
    assert_eq!(rows.len(), N);
    for (k, v) in &rows {
        let (env, json) = envelope::decode(v).unwrap();
        assert_eq!(env.payload_version, 2, "{}", String::from_utf8_lossy(k));
        let d: Value = serde_json::from_slice(json).unwrap();
        assert_eq!(d["sweeps"], 1, "{}: {d}", String::from_utf8_lossy(k));
    }
}

/// Generation 0 with `n` invoices of the old schema.
fn old_build_with_invoices(store: &Store, n: usize) {
    let db = Database::builder(store.clone())
        .policy(PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap();
    db.collection::<InvOld>("invoices", CollectionOptions::new())
        .unwrap();
    db.declare(SchemaDeclaration::new("invoices", old_schema()).payload(1, []))
        .unwrap();
    write_docs(store, "invoices", n, |id| json!({"id": id, "total": 7.5}));
}

/// Every invoice transformed exactly once.
fn assert_transformed_once(store: &Store, n: usize) {
    let rows = scan_prefix(store, &doc_prefix("invoices"));
    assert_eq!(rows.len(), n);
    for (k, v) in &rows {
        let (_, json) = envelope::decode(v).unwrap();
        let d: Value = serde_json::from_slice(json).unwrap();
        assert_eq!(d["n"], 1, "{}: {d}", String::from_utf8_lossy(k));
        assert_eq!(d["amount"]["gross"], 7.5, "{d}");
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_drain_barrier_over_three_client_processes_times_out_on_a_holdout_and_passes_without_it() {
    let table = scratch_table("strata_co");
    let store = owner(&table);
    old_build_with_invoices(&store, 20);
    let db = db_url(&table);

    // Three client processes: two that acknowledge, one busy holdout.
    let mut clients: Vec<(Child, String)> = ["client", "client", "holdout"]
        .into_iter()
        .map(|role| {
            let mut c = spawn_child(role, &db, "");
            let mut lines = BufReader::new(c.stderr.take().unwrap()).lines();
            let ready = wait_for(&mut lines, "ready ", 1);
            let id = ready[0].rsplit(' ').next().unwrap().to_string();
            // Keep draining its stderr so it never blocks.
            std::thread::spawn(move || lines.for_each(drop));
            (c, id)
        })
        .collect();
    let holdout_id = clients[2].1.clone();
    let ackers: Vec<String> = clients[..2].iter().map(|(_, id)| id.clone()).collect();

    // The coordinator (this process) on a manual clock at the wall time: the clients'
    // heartbeats are live. The clock passes the quiesce timeout only once both acking
    // clients have acknowledged, so the holdout is the only one left.
    let clock = ManualClock::new(now_ms());
    let coord = new_build(
        store.clone(),
        PolicyConfig::new()
            .clock(Arc::new(clock.clone()))
            .heartbeat(None),
    );
    let acked = |store: &Store| {
        let clients = strata::policy::list_clients(store).unwrap();
        ackers.iter().all(|id| {
            clients
                .iter()
                .any(|c| &c.client == id && c.acked_generation == Some(1))
        })
    };
    let err = coord
        .run_schema_cutover(CutoverOptions::new().quiesce_timeout_ms(3_000).poll(|| {
            if acked(&store) {
                clock.advance(3_000);
            } else {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }))
        .unwrap_err();
    match &err {
        PolicyError::QuiesceTimeout { holdouts, .. } => {
            assert_eq!(holdouts, std::slice::from_ref(&holdout_id), "{err}")
        }
        other => panic!("expected a quiesce timeout, got {other}"),
    }
    // Abort: back to normal at generation 0, nothing rewritten.
    let fence = coord.abort_schema_cutover().unwrap();
    assert_eq!((fence.state, fence.generation), (FenceState::Normal, 0));
    assert_eq!(store.get(&cutover_key("invoices")).unwrap(), None);
    let rows = scan_prefix(&store, &doc_prefix("invoices"));
    assert!(rows.values().all(|v| envelope::decode(v)
        .unwrap()
        .1
        .windows(7)
        .any(|w| w == b"\"total\"")));

    // The holdout finishes its work and closes; the barrier now passes.
    let (mut holdout, _) = clients.pop().unwrap();
    drop(holdout.stdin.take());
    assert!(holdout.wait().unwrap().success());
    let report = coord
        .run_schema_cutover(CutoverOptions::new().quiesce_timeout_ms(3_000).poll(|| {
            if acked(&store) {
                clock.advance(100);
            } else {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }))
        .unwrap();
    assert_eq!((report.migrated, report.records), (1, 20));
    assert_eq!(coord.fence_state().unwrap().generation, 1);
    assert_transformed_once(&store, 20);
    for (mut c, _) in clients {
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success());
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_sigkilled_cutover_coordinator_is_finished_by_another_process_each_record_once() {
    const N: usize = 1000;
    let table = scratch_table("strata_co");
    let store = owner(&table);
    old_build_with_invoices(&store, N);
    let db = db_url(&table);

    let mut first = spawn_child("coordinate", &db, "");
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "cutover batch committed", 5);
    first.kill().unwrap();
    assert_eq!(first.wait().unwrap().signal(), Some(9));
    drop(until_released(&store, "cutover"));
    let fence = strata::policy::Fence::read(&store).unwrap();
    assert_eq!(fence.state, FenceState::Migrating, "{fence:?}");
    // The fence's own lease is still live: only the cross-process lease tells the
    // coordinator is gone.
    assert!(fence.lease_until_ms > now_ms(), "{fence:?}");
    let rows = scan_prefix(&store, &doc_prefix("invoices"));
    let done_by_first = rows
        .values()
        .filter(|v| {
            envelope::decode(v)
                .unwrap()
                .1
                .windows(3)
                .any(|w| w == b"\"n\"")
        })
        .count();
    assert!((50..N).contains(&done_by_first), "{done_by_first}");

    let out = run_child("coordinate", &db, "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let records: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("cutover done "))
        .unwrap_or_else(|| panic!("{err}"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(records, N - done_by_first, "{err}");
    let fence = strata::policy::Fence::read(&store).unwrap();
    assert_eq!((fence.state, fence.generation), (FenceState::Normal, 1));
    assert_transformed_once(&store, N);
}

// ---------------------------------------------------------------------------------------
// Issue 28: a failover in the middle of the eager sweep and of the cutover, on a private
// primary with a synchronous standby (`strata_postgres::testing::HaPair`), the processes
// on the multi-host URL. The holder's named lease dies with the old primary; the holder's
// next batch fails (one line) and the process ends; the rerun on the promoted standby
// takes the lease at once and resumes after the last committed batch — every row once.

/// The failover URL of `ha` with the store table `table`.
fn ha_db(ha: &strata_postgres::testing::HaPair, table: &str) -> String {
    format!("{}&strata_table={table}", ha.url())
}

/// The lines of a child's stderr that are not the pass's progress log.
fn error_lines(lines: Lines<BufReader<ChildStderr>>, progress: &str) -> Vec<String> {
    lines
        .map(|l| l.unwrap())
        .filter(|l| !l.contains(progress) && !l.contains("strata::pass") && !l.trim().is_empty())
        .collect()
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_promotion_mid_sweep_ends_the_sweeper_in_one_line_and_the_rerun_sweeps_each_row_once() {
    const N: usize = 3000;
    let Some(ha) = strata_postgres::testing::HaPair::start_for_test(
        "a_promotion_mid_sweep_ends_the_sweeper_in_one_line_and_the_rerun_sweeps_each_row_once",
    )
    .unwrap() else {
        return;
    };
    let db = ha_db(&ha, "sweep_failover");
    {
        let store = strata_postgres::connect_store(&db).unwrap();
        let handle = Database::builder(store.clone())
            .policy(PolicyConfig::new().heartbeat(None))
            .open()
            .unwrap();
        handle
            .collection::<Doc>("docs", CollectionOptions::new())
            .unwrap();
        write_docs(&store, "docs", N, |id| json!({"id": id}));
    }

    let mut first = spawn_child("sweep", &db, "sweep docs --batch-size 5");
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "pass batch committed", 4);
    ha.fail_over().unwrap();
    let errors = error_lines(lines, "pass batch committed");
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{errors:#?}");
    assert_eq!(errors.len(), 1, "not one line: {errors:#?}");
    eprintln!("the cut-off sweeper said: {}", errors[0]);
    assert!(
        errors[0].contains("lost the connection to postgres")
            || errors[0].contains("cannot connect"),
        "{errors:?}"
    );

    // On the promoted standby: the sweep stopped in progress after the first's batches.
    let store = strata_postgres::connect_store(&db).unwrap();
    let left = marker(&store);
    assert_eq!(left.in_progress, Some(2), "{left:?}");
    let done_by_first = left.counters.rewritten;
    assert!(done_by_first >= 20 && done_by_first < N as u64, "{left:?}");

    let out = run_child("sweep", &db, "sweep docs --json");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_within(&out);
    assert_eq!(doc["note"], "complete", "{doc}");
    assert_eq!(doc["resumed"], true, "{doc}");
    assert_eq!(doc["rewritten"], N as u64 - done_by_first, "{doc}");
    let done = marker(&store);
    assert_eq!(done.counters.rewritten, N as u64, "{done:?}");
    assert!(done.token.unwrap() > left.token.unwrap(), "{done:?}");
    let rows = scan_prefix(&store, &doc_prefix("docs"));
    assert_eq!(rows.len(), N);
    for (k, v) in &rows {
        let (env, json) = envelope::decode(v).unwrap();
        assert_eq!(env.payload_version, 2, "{}", String::from_utf8_lossy(k));
        let d: Value = serde_json::from_slice(json).unwrap();
        assert_eq!(d["sweeps"], 1, "{}: {d}", String::from_utf8_lossy(k));
    }
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_promotion_mid_cutover_ends_the_coordinator_in_one_line_and_the_rerun_transforms_each_record_once(
) {
    const N: usize = 1000;
    let Some(ha) = strata_postgres::testing::HaPair::start_for_test(
        "a_promotion_mid_cutover_ends_the_coordinator_in_one_line",
    )
    .unwrap() else {
        return;
    };
    let db = ha_db(&ha, "cutover_failover");
    old_build_with_invoices(&strata_postgres::connect_store(&db).unwrap(), N);

    let mut first = spawn_child("coordinate", &db, "");
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "cutover batch committed", 5);
    ha.fail_over().unwrap();
    let errors = error_lines(lines, "cutover batch committed");
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{errors:#?}");
    let reported: Vec<&String> = errors.iter().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(reported.len(), 1, "not one error line: {errors:#?}");
    eprintln!("the cut-off coordinator said: {}", reported[0]);

    let store = strata_postgres::connect_store(&db).unwrap();
    let fence = strata::policy::Fence::read(&store).unwrap();
    assert_eq!(fence.state, FenceState::Migrating, "{fence:?}");
    let rows = scan_prefix(&store, &doc_prefix("invoices"));
    let done_by_first = rows
        .values()
        .filter(|v| {
            envelope::decode(v)
                .unwrap()
                .1
                .windows(3)
                .any(|w| w == b"\"n\"")
        })
        .count();
    assert!((50..N).contains(&done_by_first), "{done_by_first}");

    let out = run_child("coordinate", &db, "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let records: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("cutover done "))
        .unwrap_or_else(|| panic!("{err}"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(records, N - done_by_first, "{err}");
    let fence = strata::policy::Fence::read(&store).unwrap();
    assert_eq!((fence.state, fence.generation), (FenceState::Normal, 1));
    assert_transformed_once(&store, N);
}
