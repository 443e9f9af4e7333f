//! Crash test of the coordinated cutover (harness = false).
//!
//! The parent seeds a sled store with ≥100k documents, spawns itself as a child
//! coordinator (`STRATA_CRASH_ROLE=coordinator`) that registers a cutover and runs it in
//! small batches, SIGKILLs it after a random number of committed batches, reopens the
//! store as a different client whose clock is past the dead coordinator's lease, reruns
//! the cutover and checks that every document was transformed exactly once.
//!
//! The kill lands right after a batch the child reported durable (it flushes the store
//! every [`FLUSH_EVERY`] batches, as an application that wants durable progress would),
//! so a committed checkpoint always survives the kill; batches after it may or may not
//! have reached the disk, which is sled's crash consistency under test.
//!
//! `STRATA_CRASH_ITERS` (default 3) sets the number of kill/resume rounds;
//! `STRATA_CRASH_RECORDS` (default 100000) the number of documents.

use super::harness::{env_usize, spawn, Rng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;
use strata::clock::{Clock, ManualClock, SystemClock};
use strata::layout::envelope::{self, Envelope};
use strata::layout::keys::doc_key;
use strata::ops::cutover::{cutover_key, CutoverOptions};
use strata::pass::PassLimits;
use strata::policy::{coordinated_cutover, FenceState, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata_sled::SledStore;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits};

const LEASE_MS: u64 = 60_000;
/// The child flushes the store after every this many batches and says so.
const FLUSH_EVERY: u64 = 4;

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct RecV1 {
    n: u64,
    v: u64,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct RecV2 {
    n: u64,
    v: u64,
    moved: bool,
}

fn transform(mut d: Value) -> Result<Value, String> {
    let v = d["v"].as_u64().ok_or("missing v")?;
    d["v"] = json!(v + 1);
    d["moved"] = json!(true);
    Ok(d)
}

fn v2_options<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>().strategy(coordinated_cutover(transform))
}

/// The child: registers the cutover and runs it in small batches until killed.
pub fn child(dir: &Path) {
    let store = SledStore::open_store(dir).unwrap();
    let config = PolicyConfig::new().heartbeat(None).lease_ms(LEASE_MS);
    let db = Database::builder(store.clone())
        .policy(config)
        .open()
        .unwrap();
    db.collection::<RecV2>(
        "recs",
        CollectionOptions::new().schema(v2_options::<RecV2>()),
    )
    .unwrap();
    println!(
        "role=coordinator client={}",
        db.policy().unwrap().client_id()
    );
    let mut batches = 0u64;
    let report = db
        .run_schema_cutover(
            CutoverOptions::new()
                .limits(PassLimits::new(200, 1 << 20).unwrap())
                .on_progress(|p| {
                    batches += 1;
                    if batches.is_multiple_of(FLUSH_EVERY) {
                        store.flush().unwrap();
                        println!("batch {} records {} durable", batches, p.records);
                    } else {
                        println!("batch {} records {}", batches, p.records);
                    }
                }),
        )
        .unwrap();
    println!("done {}", report.records);
}

fn seed(dir: &Path, n: usize) {
    let store = SledStore::open_store(dir).unwrap();
    let clock = ManualClock::new(0);
    let config = PolicyConfig::new().clock(Arc::new(clock)).heartbeat(None);
    let db = Database::builder(store.clone())
        .policy(config)
        .open()
        .unwrap();
    let c = db
        .collection::<RecV1>(
            "recs",
            CollectionOptions::new().schema(SchemaOptions::of::<RecV1>()),
        )
        .unwrap();
    c.put("k0000000", &RecV1 { n: 0, v: 0 }).unwrap();
    let mut batch = Batch::new();
    for i in 1..n {
        let json = serde_json::to_vec(&json!({"n": i, "v": 0})).unwrap();
        batch = batch.set(
            doc_key("recs", &format!("k{i:07}")),
            envelope::encode(Envelope::new(1, 1), &json),
        );
        if i % 5_000 == 0 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

fn verify(dir: &Path, n: usize, iteration: usize) {
    let store = SledStore::open_store(dir).unwrap();
    // A different client, whose clock is past the dead coordinator's lease and stale window.
    let clock = ManualClock::new(SystemClock.now_ms() + LEASE_MS + 600_000);
    let config = PolicyConfig::new()
        .clock(Arc::new(clock))
        .heartbeat(None)
        .lease_ms(LEASE_MS);
    let db = Database::builder(store.clone())
        .policy(config)
        .open()
        .unwrap();
    let fence = db.fence_state().unwrap();
    assert!(
        matches!(fence.state, FenceState::Migrating | FenceState::Draining),
        "iteration {iteration}: the child was killed mid-cutover, fence is {:?}",
        fence.state
    );
    let c = db
        .collection::<RecV2>(
            "recs",
            CollectionOptions::new().schema(v2_options::<RecV2>()),
        )
        .unwrap();
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(report.migrated, 1);
    assert_eq!(report.generation, 1);
    assert!(
        report.records < n as u64,
        "iteration {iteration}: the rerun resumed from the checkpoint ({} of {n} left)",
        report.records
    );
    assert!(report.collections[0].resumed_from.is_some());
    // Every document transformed exactly once.
    let prefix = strata::layout::keys::doc_prefix("recs");
    let mut after: Option<Vec<u8>> = None;
    let mut seen = 0usize;
    loop {
        let page = store
            .scan(
                &prefix,
                after.as_deref(),
                ScanLimits::new(10_000, 64 << 20).unwrap(),
            )
            .unwrap();
        for r in &page.records {
            let (env, json) = envelope::decode(&r.value).unwrap();
            let doc: Value = serde_json::from_slice(json).unwrap();
            assert_eq!(
                doc["v"],
                json!(1),
                "iteration {iteration}: {:?} transformed {} times",
                String::from_utf8_lossy(&r.key),
                doc["v"]
            );
            assert_eq!(doc["moved"], json!(true));
            assert_eq!(env.lock_version, 2, "rewritten exactly once");
            seen += 1;
        }
        if !page.more {
            break;
        }
        after = page.cursor().map(<[u8]>::to_vec);
    }
    assert_eq!(seen, n);
    assert_eq!(store.get(&cutover_key("recs")).unwrap(), None);
    let fence = db.fence_state().unwrap();
    assert_eq!((fence.state, fence.generation), (FenceState::Normal, 1));
    assert!(fence.pending.is_empty());
    assert_eq!(c.get("k0000007").unwrap().unwrap().v, 1);
    println!(
        "iteration {iteration}: resumed after a kill, rerun rewrote {} of {n} records; all transformed exactly once",
        report.records
    );
}

/// The parent: seeds, kills the coordinator `STRATA_CRASH_ITERS` times, checks each time.
pub fn run() {
    let iters = env_usize("STRATA_CRASH_ITERS", 3);
    let n = env_usize("STRATA_CRASH_RECORDS", 100_000);
    let mut rng = Rng::from_env_or_time();
    println!(
        "crash_cutover: {iters} iterations over {n} records, seed {}",
        rng.seed()
    );
    let batches = (n / 200).max(2) as u64;
    for iteration in 0..iters {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        seed(&dir, n);
        // Kill after a random number of committed batches: at least one, and at most 90%
        // of them so the kill always lands before the end (the child may run a few batches
        // ahead of the parent reading its output); the kill waits for the next batch the
        // child reported durable, so the rerun always has a checkpoint to resume from.
        let kill_after = 1 + rng.next() % (batches * 9 / 10).saturating_sub(FLUSH_EVERY).max(1);
        let mut child = spawn("coordinator", &dir);
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        // The test harness's own output (`running 1 test`, `test crash::child ... `) comes
        // first.
        let first = lines
            .by_ref()
            .map(|l| l.unwrap())
            .find_map(|l| l.find("role=").map(|at| l[at..].to_string()))
            .unwrap();
        assert!(
            first.starts_with("role=coordinator "),
            "the child runs the wrong role: {first}"
        );
        let mut seen = 0u64;
        for line in lines {
            let line = line.unwrap();
            assert!(
                !line.starts_with("done"),
                "the child finished before the kill"
            );
            if line.starts_with("batch ") {
                seen += 1;
                if seen >= kill_after && line.ends_with(" durable") {
                    break;
                }
            }
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success());
        println!("iteration {iteration}: killed the coordinator after {seen} batches");
        verify(&dir, n, iteration);
    }
    println!("crash_cutover: ok");
}
