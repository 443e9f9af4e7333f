//! Coordinated-cutover throughput vs a hand-written batched rewrite on the raw sled store.
//!
//! Both rewrite the same N enveloped JSON documents through the same transform (parse,
//! transform, serialize, bump the lock version) in batches of 512:
//!
//! * `raw`: a hand-written loop over `SledStore` — bounded scan, plain batches (no
//!   preconditions), a cursor key written with every batch;
//! * `strata`: `Database::run_schema_cutover` (drain barrier with no other client,
//!   the bulk pass with its checkpoint compare-and-swap, the lease compare-and-swap on the
//!   fence in every batch, the final generation bump).
//!
//! Run with `cargo bench -p strata --bench cutover` (`STRATA_BENCH_RECORDS=N`, default
//! 100000; `STRATA_BENCH_RUNS=R`, default 3). Prints the medians, the ratio strata/raw
//! in records per second and the median of the interleaved pairs' ratios (target ≥ 0.9,
//! issue 9). `STRATA_BENCH_CLOCK=cpu` times both by the calling thread's on-CPU time
//! instead of wall clock (the flush's wait for the disk left out of both alike). The timed parts are their own symbols (`cutover::raw_rewrite`,
//! `cutover::strata_cutover`) for `valgrind --tool=callgrind --toggle-collect=...`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use strata::clock::ManualClock;
use strata::layout::envelope::{self, Envelope};
use strata::layout::keys::{doc_key, doc_prefix};
use strata::ops::cutover::CutoverOptions;
use strata::pass::PassLimits;
use strata::policy::{coordinated_cutover, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const BATCH: usize = 512;

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct V1 {
    n: u64,
    name: String,
    total: f64,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct Amount {
    gross: f64,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct V2 {
    n: u64,
    name: String,
    amount: Amount,
}

fn transform(d: Value) -> Result<Value, String> {
    Ok(json!({"n": d["n"], "name": d["name"], "amount": {"gross": d["total"]}}))
}

fn config() -> PolicyConfig {
    PolicyConfig::new()
        .clock(Arc::new(ManualClock::new(0)))
        .heartbeat(None)
}

fn seed(path: &Path, n: usize) -> Store {
    let store = strata_sled::SledStore::open_store(path).unwrap();
    {
        let db = Database::builder(store.clone())
            .policy(config())
            .open()
            .unwrap();
        db.collection::<V1>(
            "inv",
            CollectionOptions::new().schema(SchemaOptions::of::<V1>()),
        )
        .unwrap();
    }
    let mut batch = Batch::new();
    for i in 0..n {
        let json = serde_json::to_vec(
            &json!({"n": i, "name": format!("customer {i}"), "total": i as f64 * 1.5}),
        )
        .unwrap();
        batch = batch.set(
            doc_key("inv", &format!("k{i:08}")),
            envelope::encode(Envelope::new(1, 1), &json),
        );
        if batch.mutations().len() == 10_000 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
    store
}

#[inline(never)]
fn raw_rewrite(store: &Store) -> u64 {
    let prefix = doc_prefix("inv");
    let limits = ScanLimits::new(BATCH, 4 << 20).unwrap();
    let mut after: Option<Vec<u8>> = None;
    let mut n = 0;
    loop {
        let page = store.scan(&prefix, after.as_deref(), limits).unwrap();
        let mut batch = Batch::new();
        for r in &page.records {
            let (env, json) = envelope::decode(&r.value).unwrap();
            let doc: Value = serde_json::from_slice(json).unwrap();
            let out = serde_json::to_vec(&transform(doc).unwrap()).unwrap();
            batch = batch.set(
                r.key.clone(),
                envelope::encode(
                    Envelope::new(env.payload_version, env.lock_version + 1),
                    &out,
                ),
            );
            n += 1;
        }
        if let Some(c) = page.cursor() {
            batch = batch.set(b"__nx/bench-cursor".to_vec(), c.to_vec());
        }
        store.apply(batch).unwrap();
        if !page.more {
            return n;
        }
        after = page.cursor().map(<[u8]>::to_vec);
    }
}

#[inline(never)]
fn strata_cutover(store: &Store) -> u64 {
    let db = Database::builder(store.clone())
        .policy(config())
        .open()
        .unwrap();
    db.collection::<V2>(
        "inv",
        CollectionOptions::new()
            .schema(SchemaOptions::of::<V2>().strategy(coordinated_cutover(transform))),
    )
    .unwrap();
    let report = db
        .run_schema_cutover(CutoverOptions::new().limits(PassLimits::new(BATCH, 4 << 20).unwrap()))
        .unwrap();
    assert_eq!(report.migrated, 1);
    report.records
}

#[path = "support/timer.rs"]
mod timer;
use timer::Timer;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("cutover: bench");
        return;
    }
    let n = env("STRATA_BENCH_RECORDS", 100_000);
    let runs = env("STRATA_BENCH_RUNS", 3);
    let mut raw = Vec::new();
    let mut ours = Vec::new();
    // Interleaved pairs: each pair's ratio sees the same machine load; the median of the
    // pair ratios is the figure least disturbed by a loaded machine.
    let mut pairs = Vec::new();
    for _ in 0..runs {
        let tmp = tempfile::tempdir().unwrap();
        let store = seed(&tmp.path().join("raw"), n);
        let t = Timer::start();
        assert_eq!(raw_rewrite(&store), n as u64);
        store.flush().unwrap();
        let r = t.elapsed();
        drop(store);

        let store = seed(&tmp.path().join("strata"), n);
        let t = Timer::start();
        assert_eq!(strata_cutover(&store), n as u64);
        store.flush().unwrap();
        let o = t.elapsed();
        pairs.push(r.as_secs_f64() / o.as_secs_f64());
        raw.push(r);
        ours.push(o);
    }
    let (raw, ours) = (median(raw), median(ours));
    pairs.sort_by(f64::total_cmp);
    let pair = pairs[pairs.len() / 2];
    let rps = |d: Duration| n as f64 / d.as_secs_f64();
    let clock = std::env::var("STRATA_BENCH_CLOCK").unwrap_or_else(|_| "wall".into());
    println!(
        "cutover of {n} documents, batches of {BATCH}, median of {runs} runs (sled, clock {clock})"
    );
    println!(
        "  raw batched rewrite : {:>10.3?}  {:>12.0} records/s",
        raw,
        rps(raw)
    );
    println!(
        "  strata cutover      : {:>10.3?}  {:>12.0} records/s",
        ours,
        rps(ours)
    );
    println!(
        "  ratio strata/raw    : {:.2}x of the medians, {pair:.2}x median of interleaved pairs (target >= 0.90)",
        rps(ours) / rps(raw)
    );
}
