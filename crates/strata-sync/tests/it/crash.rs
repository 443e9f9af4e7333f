//! Real crash test: a child process applies ops on a sled store and is SIGKILLed at a
//! random point after it reported durable progress; the reopened store must be
//! consistent and hold at least every op reported durable.

use crate::common::{manager, op_for};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use strata_sync::{Runtime, SyncOptions};

const ROLE_VAR: &str = "STRATA_SYNC_CRASH_ROLE";
const DB_VAR: &str = "STRATA_SYNC_CRASH_DB";
const CHILD_TEST: &str = "crash::crash_child_applies_ops_until_killed";

/// The child role: does nothing unless the role variable says so.
#[test]
fn crash_child_applies_ops_until_killed() {
    if std::env::var(ROLE_VAR).as_deref() != Ok("child") {
        return;
    }
    println!("role=child");
    let path = std::env::var(DB_VAR).expect("db path");
    let rt = Runtime::with_options(&path, SyncOptions::default().max_ops_per_batch(5)).unwrap();
    let mut next = rt.sync().next_sequences().1;
    let mut group = 1u64;
    // Bounded so an orphaned child still ends.
    while next < 200_000 {
        let ops: Vec<_> = (next..next + group).map(op_for).collect();
        // Re-send an earlier op now and then: it must stay a no-op.
        let mut stream = ops.clone();
        if next > 3 {
            stream.push(op_for(next - 3));
        }
        rt.sync().apply_batch(&stream).unwrap();
        rt.sync().flush().unwrap();
        next += group;
        println!("durable {next}");
        group = group % 13 + 1;
    }
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn killed_writer_leaves_a_consistent_store() {
    let iters: usize = std::env::var("STRATA_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut rng = seed() | 1;
    let exe = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut last_durable = 0u64;
    for iter in 0..iters {
        // Kill after a random amount of further progress.
        let target = last_durable + 5 + xorshift(&mut rng) % 300;
        let mut child = Command::new(&exe)
            .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE_VAR, "child")
            .env(DB_VAR, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut role_seen = false;
        let mut durable = 0u64;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            // libtest may print `test <name> ... ` on the same line before the echo.
            if line.ends_with("role=child") {
                role_seen = true;
            }
            if let Some(n) = line.strip_prefix("durable ") {
                durable = n.parse().unwrap();
                if durable >= target {
                    break;
                }
            }
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            role_seen,
            "iteration {iter}: the child did not echo its role"
        );
        assert!(
            !status.success(),
            "iteration {iter}: the child ended on its own"
        );
        assert!(
            durable >= target,
            "iteration {iter}: child stopped at {durable} before {target}"
        );

        let rt = Runtime::new(&path).unwrap();
        let sync = rt.sync();
        let report = sync.verify().unwrap();
        assert!(
            report.is_consistent(),
            "iteration {iter}: {:?}",
            report.problems
        );
        // Every op reported durable is there, and the log has no gaps: ops are applied
        // in index order, so the log holds exactly op 0..n for some n >= durable.
        let n = report.ops as u64;
        assert!(
            n >= durable,
            "iteration {iter}: {n} ops logged, {durable} reported durable"
        );
        for i in [0, durable.saturating_sub(1), n.saturating_sub(1)] {
            let id = op_for(i).id;
            let entry = sync
                .op_log_entry(&id)
                .unwrap()
                .unwrap_or_else(|| panic!("op {id} missing"));
            assert_eq!(entry.op, op_for(i));
        }
        assert!(sync.op_log_entry(&op_for(n).id).unwrap().is_none());
        let seqs: std::collections::BTreeSet<u64> =
            sync.seen_ops().unwrap().values().copied().collect();
        assert_eq!(
            seqs,
            (0..n).collect(),
            "iteration {iter}: seen-op sequences have gaps"
        );
        // Replaying the log reproduces the state: nothing half applied.
        let fresh = manager();
        fresh.replay_from(sync.store()).unwrap();
        assert_eq!(
            fresh.states().unwrap(),
            sync.states().unwrap(),
            "iteration {iter}"
        );
        last_durable = n;
    }
}
