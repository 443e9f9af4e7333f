//! Real crash test of the eager sweep (harness = false).
//!
//! The parent seeds ≥ 100k stale documents in a sled datastore, then repeatedly runs this
//! same binary as a child (`STRATA_CRASH_ROLE=sweeper`) that sweeps the collection and
//! reports every batch boundary on stdout, and SIGKILLs it after a random number of
//! reports (1..=60; the child keeps running until the signal lands, so the kill hits a
//! random point of a batch), `STRATA_CRASH_ITERS` times (default 3). The child's byte
//! budget is small enough that batches end mid-page. After every kill it reopens the
//! store and checks: no document lost, every document either untouched (v1, `n == 0`) or
//! fully upcast (v3, `n == 2`: each of the two steps incremented `n` exactly once — a
//! double transformation would show as `n > 2` or as a v3 document upcast again), the
//! marker's cursor never moved backwards, and the marker's counters match the documents
//! exactly (they commit in the same batch as the rows). A final uninterrupted run must
//! complete, after which every document is at v3 with `n == 2`.
//!
//! `STRATA_CRASH_ROWS` overrides the row count (default 100 000).

use super::harness::{env_usize, kill_after, run_to_end, Rng};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Instant;
use strata::layout;
use strata::layout::envelope::{self, Envelope};
use strata::ops::sweep::SweepMarker;
use strata::ops::sweep::SweepOptions;
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const NAME: &str = "crash";

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    n: i64,
}

fn bump(o: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), StepError> {
    let n = o
        .get("n")
        .and_then(|v| v.as_i64())
        .ok_or_else(|| StepError::new("missing counter `n`"))?;
    o.insert("n".into(), json!(n + 1));
    Ok(())
}

fn collection(db: &Database) -> Collection<Doc> {
    db.collection(
        NAME,
        CollectionOptions::new()
            .identity_fields(["id"])
            .upcast(1, Mode::Lazy, bump)
            .upcast(2, Mode::Eager, bump),
    )
    .unwrap()
}

fn open(dir: &std::path::Path) -> Store {
    strata_sled::SledStore::open_store(dir).unwrap()
}

fn rows() -> usize {
    std::env::var("STRATA_CRASH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// The child: reports its role, then works on the store at `dir` until killed.
pub fn child(dir: &str) {
    let store = open(std::path::Path::new(dir));
    let db = Database::builder(store).open().unwrap();
    let c = collection(&db);
    println!("role=sweeper ready");
    let report = c
        .sweep(
            SweepOptions::new()
                .runner_id("crash-child")
                .limits(strata::pass::PassLimits::new(256, 20_000).unwrap())
                .abort_when(|| {
                    println!("batch");
                    false
                }),
        )
        .unwrap();
    println!("note={}", report.note);
}

/// A tiny xorshift generator seeded from the clock (the seed is printed).
fn seed(dir: &std::path::Path, n: usize) {
    let store = open(dir);
    let db = Database::builder(store.clone()).open().unwrap();
    collection(&db);
    let mut b = Batch::new();
    for i in 0..n {
        let id = format!("d{i:07}");
        let json = format!(r#"{{"id":"{id}","n":0}}"#);
        b = b.set(
            layout::keys::doc_key(NAME, &id),
            envelope::encode(Envelope::new(1, 1), json.as_bytes()),
        );
        if (i + 1) % 5000 == 0 {
            store.apply(std::mem::take(&mut b)).unwrap();
        }
    }
    if !b.is_empty() {
        store.apply(b).unwrap();
    }
    store.flush().unwrap();
}

/// Checks every document; returns (untouched, upcast) counts and the marker.
fn check(dir: &std::path::Path, n: usize) -> (usize, usize, Option<SweepMarker>) {
    let store = open(dir);
    let prefix = layout::keys::doc_prefix(NAME);
    let (mut old, mut new) = (0usize, 0usize);
    let mut after: Option<Vec<u8>> = None;
    let limits = ScanLimits::new(10_000, 64 << 20).unwrap();
    loop {
        let page = store.scan(&prefix, after.as_deref(), limits).unwrap();
        for r in &page.records {
            let (env, json) = envelope::decode(&r.value).unwrap();
            let doc: serde_json::Value = serde_json::from_slice(json).unwrap();
            let id = std::str::from_utf8(&r.key[prefix.len()..]).unwrap();
            assert_eq!(doc["id"], json!(id), "identity changed");
            assert_eq!(env.lock_version, 1, "{id}: lock version changed");
            match (env.payload_version, doc["n"].as_i64()) {
                (1, Some(0)) => old += 1,
                (3, Some(2)) => new += 1,
                other => panic!("{id}: transformed a wrong number of times: {other:?}"),
            }
        }
        if !page.more {
            break;
        }
        after = page.cursor().map(<[u8]>::to_vec);
    }
    assert_eq!(old + new, n, "documents lost or duplicated");
    let marker = store
        .get(&layout::keys::sweep_key(NAME))
        .unwrap()
        .map(|b| SweepMarker::decode(NAME, &b).unwrap());
    (old, new, marker)
}

/// The parent: seeds, kills the child `STRATA_CRASH_ITERS` times, checks each time.
pub fn run() {
    let iters = env_usize("STRATA_CRASH_ITERS", 3);
    let n = rows();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let started = Instant::now();
    seed(&dir, n);
    let mut rng = Rng::from_env_or_time();
    let seed_rng = rng.seed();
    println!(
        "crash_sweep: {n} rows seeded in {:?}, rng seed {seed_rng}",
        started.elapsed()
    );
    let mut last_cursor: Option<Vec<u8>> = None;
    let mut kills = 0;
    for i in 0..iters {
        let reports = 1 + rng.next() % 60;
        let finished = kill_after("sweeper", &dir, reports, "note=");
        if !finished {
            kills += 1;
        }
        let (old, new, marker) = check(&dir, n);
        if let Some(m) = &marker {
            // Rows and marker commit in one batch: the counters are exact after a kill.
            assert_eq!(
                m.counters.rewritten as usize, new,
                "marker counters drifted"
            );
            assert_eq!(m.counters.conflicted, 0);
            if let Some(c) = m.cursor() {
                let upto = (0..n)
                    .filter(|i| layout::keys::doc_key(NAME, &format!("d{i:07}")) <= c)
                    .count();
                assert_eq!(
                    m.counters.scanned as usize, upto,
                    "scanned != rows up to the cursor"
                );
                assert_eq!(
                    upto, new,
                    "rows up to the cursor are exactly the upcast ones"
                );
            }
        }
        let cursor = marker.as_ref().and_then(SweepMarker::cursor);
        if let (Some(prev), Some(cur)) = (&last_cursor, &cursor) {
            assert!(cur >= prev, "the sweep cursor moved backwards");
        }
        if cursor.is_some() {
            last_cursor = cursor;
        }
        println!(
            "crash_sweep: iteration {i}: killed after {reports} batch reports (finished first: {finished}); {new} upcast, {old} untouched"
        );
    }
    assert!(kills > 0, "no kill landed before the sweep finished");
    // Rerun to completion.
    let line = run_to_end("sweeper", &dir, "note=");
    let note = line.trim().to_string();
    assert!(
        note == "note=complete" || note == "note=already at v3",
        "unexpected final note {note}"
    );
    let (old, new, marker) = check(&dir, n);
    assert_eq!(
        (old, new),
        (0, n),
        "every document must end at v3 exactly once transformed"
    );
    let marker = marker.unwrap();
    assert_eq!((marker.completed, marker.in_progress), (3, None));
    assert_eq!(
        (marker.counters.scanned, marker.counters.rewritten),
        (n as u64, n as u64),
        "every row scanned and rewritten exactly once over the resumed runs"
    );
    // The collection reads back through the API too.
    let db = Database::builder(open(&dir)).open().unwrap();
    let c = collection(&db);
    assert_eq!(c.get("d0000000").unwrap().unwrap().n, 2);
    println!(
        "crash_sweep: ok ({kills} kills of {iters}, {n} rows, {:?})",
        started.elapsed()
    );
}
