//! Real crash test of a revert (issue #26 item 4; harness = false).
//!
//! The parent lets build 1 write `STRATA_CRASH_REVERT_ROWS` documents (default 20 000) at
//! payload v1 in a sled datastore, keeps a copy of every row's JSON, opens build 2 (a
//! deploy window at v1), completes the window (the sweep moves every row to v2), then
//! runs this binary as a child (`STRATA_CRASH_ROLE=reverter`) that reverts the collection
//! to v1 and reports every batch boundary on stdout, and SIGKILLs it after a random number
//! of reports, `STRATA_CRASH_ITERS` times (default 3). After every kill every row is
//! either still at v2 in build 2's shape or back at v1 exactly as the copy holds it, the
//! rows up to the revert record's cursor are all back, and the cursor never moves
//! backwards. A final uninterrupted run must finish: every row equals the copy, the
//! record is gone, and build 1 reads the collection.

use super::harness::{env_usize, kill_after, run_to_end, Rng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Instant;
use strata::layout;
use strata::layout::envelope;
use strata::ops::revert::{decode_record, revert_key, RevertOptions};
use strata::ops::window::WindowOptions;
use strata::policy::PolicyConfig;
use strata::policy::{additive_only, covered_by_upcasts, SchemaOptions};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::{KvRead, KvWrite, Pages, ScanLimits, Store};

const NAME: &str = "accts";

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Acct {
    id: String,
    owner: String,
    balance: i64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct AcctV2 {
    id: String,
    owner_name: String,
    balance: i64,
}

fn rename(o: &mut serde_json::Map<String, Value>, from: &str, to: &str) -> Result<(), StepError> {
    let v = o
        .remove(from)
        .ok_or_else(|| StepError::new(format!("no `{from}`")))?;
    o.insert(to.into(), v);
    Ok(())
}

fn build1(db: &Database) -> Collection<Acct> {
    db.collection(
        NAME,
        CollectionOptions::new()
            .identity_fields(["id"])
            .schema(SchemaOptions::of::<Acct>().strategy(additive_only())),
    )
    .unwrap()
}

fn build2(db: &Database) -> Collection<AcctV2> {
    db.collection(
        NAME,
        CollectionOptions::new()
            .identity_fields(["id"])
            .upcast(1, Mode::Eager, |o| rename(o, "owner", "owner_name"))
            .downcast(2, |o| rename(o, "owner_name", "owner"))
            .schema(SchemaOptions::of::<AcctV2>().strategy(covered_by_upcasts())),
    )
    .unwrap()
}

fn open(dir: &std::path::Path) -> Database {
    let store = strata_sled::SledStore::open_store(dir).unwrap();
    Database::builder(store)
        .policy(PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap()
}

fn rows() -> usize {
    env_usize("STRATA_CRASH_REVERT_ROWS", 20_000)
}

/// The child: build 2 reverting to v1 until killed.
pub fn child(dir: &str) {
    let db = open(std::path::Path::new(dir));
    let c = build2(&db);
    println!("role=reverter ready");
    let report = c
        .revert(
            1,
            RevertOptions::new()
                .limits(strata::pass::PassLimits::new(128, 20_000).unwrap())
                .abort_when(|| {
                    println!("batch");
                    false
                }),
        )
        .unwrap();
    println!(
        "note=finished {} reverted {} failed {}",
        report.finished, report.reverted, report.failed
    );
}

/// Seeds build 1's rows, completes build 2's window; returns the copy of every row.
fn seed(dir: &std::path::Path, n: usize) -> BTreeMap<Vec<u8>, Value> {
    let db = open(dir);
    let c1 = build1(&db);
    let docs: Vec<(String, Acct)> = (0..n)
        .map(|i| {
            let id = format!("d{i:07}");
            let a = Acct {
                id: id.clone(),
                owner: format!("owner {i}"),
                balance: i as i64,
            };
            (id, a)
        })
        .collect();
    c1.put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
        .unwrap();
    let copy = rows_of(db.store()).into_iter().map(|(k, (v, doc))| {
        assert_eq!(v, 1);
        (k, doc)
    });
    let copy: BTreeMap<_, _> = copy.collect();
    drop(c1);
    let c2 = build2(&db);
    // Build 1's handle is closed (its presence went with it): the window completes.
    let r = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(r.swept, n as u64);
    db.store().flush().unwrap();
    copy
}

/// Every document: key → (payload version, JSON).
fn rows_of(store: &Store) -> BTreeMap<Vec<u8>, (i32, Value)> {
    let prefix = layout::keys::doc_prefix(NAME);
    Pages::new(store, &prefix, ScanLimits::new(10_000, 64 << 20).unwrap())
        .records()
        .map(|r| {
            let r = r.unwrap();
            let (env, json) = envelope::decode(&r.value).unwrap();
            (
                r.key.to_vec(),
                (env.payload_version, serde_json::from_slice(json).unwrap()),
            )
        })
        .collect()
}

/// Checks every row against the copy; returns (reverted, not yet) and the cursor.
fn check(
    dir: &std::path::Path,
    copy: &BTreeMap<Vec<u8>, Value>,
) -> (usize, usize, Option<Vec<u8>>) {
    let store = strata_sled::SledStore::open_store(dir).unwrap();
    let now = rows_of(&store);
    assert_eq!(now.len(), copy.len(), "documents lost or added");
    let cursor = store
        .get(&revert_key(NAME))
        .unwrap()
        .map(|b| decode_record(&b).unwrap())
        .map(|(target, cursor)| {
            assert_eq!(target, 1);
            cursor
        });
    let (mut back, mut forward) = (0, 0);
    for (key, (version, doc)) in &now {
        let original = &copy[key];
        match version {
            1 => {
                assert_eq!(doc, original, "a reverted row differs from the copy");
                back += 1;
            }
            2 => {
                assert_eq!(doc["owner_name"], original["owner"]);
                assert!(doc.get("owner").is_none());
                assert_eq!(doc["balance"], original["balance"]);
                if let Some(c) = &cursor {
                    assert!(key > c, "a row up to the cursor was not reverted");
                }
                forward += 1;
            }
            v => panic!("row at v{v}"),
        }
    }
    (back, forward, cursor)
}

/// The parent: seeds, kills the child `STRATA_CRASH_ITERS` times, checks each time.
pub fn run() {
    let iters = env_usize("STRATA_CRASH_ITERS", 3);
    let n = rows();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let started = Instant::now();
    let copy = seed(&dir, n);
    let mut rng = Rng::from_env_or_time();
    println!(
        "crash_revert: {n} rows seeded and swept to v2 in {:?}, rng seed {}",
        started.elapsed(),
        rng.seed()
    );
    let mut last: Option<Vec<u8>> = None;
    let mut kills = 0;
    for i in 0..iters {
        let reports = 1 + rng.next() % 60;
        let finished = kill_after("reverter", &dir, reports, "note=");
        if !finished {
            kills += 1;
        }
        let (back, forward, cursor) = check(&dir, &copy);
        if let (Some(prev), Some(cur)) = (&last, &cursor) {
            assert!(cur >= prev, "the revert cursor moved backwards");
        }
        if cursor.is_some() {
            last = cursor;
        }
        println!(
            "crash_revert: iteration {i}: killed after {reports} batch reports (finished first: {finished}); {back} reverted, {forward} not yet"
        );
    }
    assert!(kills > 0, "no kill landed before the revert finished");
    let line = run_to_end("reverter", &dir, "note=");
    assert!(
        line.starts_with("note=finished true") && line.trim_end().ends_with("failed 0"),
        "unexpected final note {line}"
    );
    let (back, forward, cursor) = check(&dir, &copy);
    assert_eq!((back, forward, cursor), (n, 0, None));
    // Build 1 reads every row again.
    let db = open(&dir);
    let c1 = build1(&db);
    assert_eq!(c1.get("d0000001").unwrap().unwrap().owner, "owner 1");
    assert_eq!(c1.iter().count(), n);
    assert_eq!(
        json!(c1.get("d0000002").unwrap().unwrap().balance),
        json!(2)
    );
    println!(
        "crash_revert: ok ({kills} kills of {iters}, {n} rows, {:?})",
        started.elapsed()
    );
}
