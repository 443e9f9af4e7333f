//! Sync ops from many processes on one PostgreSQL store (issue 10, item 2): real child
//! processes (this test binary re-run with `STRATA_SYNC_PG_ROLE=child`, echoing
//! `role=child`) apply distinct `GCounterIncrement(+1)` ops — and re-deliver some of the
//! other children's — all released at once; a fresh reader sees exactly one increment per
//! op, every sequence used once, and a consistent store. Needs `STRATA_PG_URL` (CI's
//! `.ci/run` starts a server); without it the test prints `skipped: STRATA_PG_URL is not
//! set` and asserts nothing.

use crate::common::{op_log_by_seq, plus_one, seen_by_seq};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use strata_postgres::{PgOptions, PgStore};
use strata_store::Store;
use strata_sync::{SyncManager, SyncOptions};

const ROLE_VAR: &str = "STRATA_SYNC_PG_ROLE";
const TABLE_VAR: &str = "STRATA_SYNC_PG_TABLE";
const INDEX_VAR: &str = "STRATA_SYNC_PG_INDEX";
const CHILD_TEST: &str = "pg_processes::pg_child_applies_its_ops";
const PROCESSES: usize = 4;
const OPS_PER_PROCESS: usize = 1000;

fn url() -> Option<String> {
    std::env::var("STRATA_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

fn connect(url: &str, table: &str) -> Store {
    Store::new(PgStore::connect_with(url, PgOptions::new().table(table)).unwrap())
}

fn op(process: usize, i: usize) -> strata_sync::Op {
    plus_one(
        &format!("p{process}-op-{i:05}"),
        &format!("node-{process}"),
        "visits",
    )
}

/// The child role, run only by [`processes_applying_ops_converge_exactly`] (with
/// `--ignored`); it refuses to run without the role variable.
#[test]
#[ignore = "child process role of processes_applying_ops_converge_exactly"]
fn pg_child_applies_its_ops() {
    assert_eq!(
        std::env::var(ROLE_VAR).as_deref(),
        Ok("child"),
        "run only as a child process"
    );
    println!("role=child");
    let url = url().expect("STRATA_PG_URL");
    let table = std::env::var(TABLE_VAR).expect("table");
    let me: usize = std::env::var(INDEX_VAR).unwrap().parse().unwrap();
    let sync = SyncManager::open_with(connect(&url, &table), SyncOptions::default()).unwrap();
    println!("ready");
    let mut line = String::new();
    // "go": every child starts together (EOF: the parent is gone, do nothing).
    if std::io::stdin().read_line(&mut line).unwrap() == 0 {
        return;
    }
    let mut at = 0;
    let mut size = me + 1;
    while at < OPS_PER_PROCESS {
        let end = (at + size).min(OPS_PER_PROCESS);
        let mut chunk: Vec<_> = (at..end).map(|i| op(me, i)).collect();
        // Re-deliver an op another process also applies: it must count once.
        chunk.push(op((me + 1) % PROCESSES, at));
        sync.apply_batch(&chunk).unwrap();
        at = end;
        size = size % 9 + 1;
    }
    println!("done");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn processes_applying_ops_converge_exactly() {
    let Some(url) = url() else {
        // Built with a URL, run without one: say so instead of passing silently.
        panic!("STRATA_PG_URL was set when this test was built but is not set now");
    };
    let table = format!(
        "strata_sync_mp_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let owner = Store::new(
        PgStore::connect_with(
            &url,
            PgOptions::new()
                .table(&table)
                .dangerous_drop_table_on_drop(),
        )
        .unwrap(),
    );
    // Headers are initialized once, before the children open.
    drop(SyncManager::open(owner.clone()).unwrap());

    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for i in 0..PROCESSES {
        let mut child = Command::new(&exe)
            .args([
                CHILD_TEST,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_VAR, "child")
            .env(TABLE_VAR, &table)
            .env(INDEX_VAR, i.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut role = false;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "child {i} ended early"
            );
            role |= line.trim_end().ends_with("role=child");
            if line.trim_end().ends_with("ready") {
                break;
            }
        }
        assert!(role, "child {i} did not run the child role");
        children.push((child, out));
    }
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    for (i, (mut child, mut out)) in children.into_iter().enumerate() {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        assert!(child.wait().unwrap().success(), "child {i} failed");
        assert!(rest.contains("done"), "child {i}: {rest}");
    }

    let total = (PROCESSES * OPS_PER_PROCESS) as u64;
    let reader = SyncManager::open(connect(&url, &table)).unwrap();
    assert_eq!(reader.gcounter("visits").unwrap(), Some(total));
    assert_eq!(reader.stored_sequences().unwrap(), (total, total));
    let seqs: Vec<u64> = seen_by_seq(&reader).iter().map(|e| e.0).collect();
    assert_eq!(seqs, (0..total).collect::<Vec<_>>(), "each sequence once");
    assert_eq!(op_log_by_seq(&reader).len() as u64, total);
    let report = reader.verify().unwrap();
    assert!(report.is_consistent(), "{:?}", report.problems);
    drop(owner);
}
