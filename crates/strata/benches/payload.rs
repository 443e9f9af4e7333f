//! Payload read path and sweep benchmarks (harness = false): every figure is measured in
//! one run against the raw sled store, and the ratios are printed.
//!
//! ```text
//! cargo bench -p strata --bench payload
//! STRATA_BENCH_ROWS=20000 STRATA_BENCH_GETS=200000 cargo bench -p strata --bench payload
//! STRATA_BENCH_ONLY=sweep cargo bench -p strata --bench payload   # one contender, for a profiler
//! STRATA_BENCH_ONLY=seed ...   # the shared set-up alone, to subtract from a perf stat count
//! STRATA_BENCH_SWEEP_ROWS=50000 STRATA_BENCH_SWEEP_ROUNDS=5 cargo bench -p strata --bench payload
//! STRATA_BENCH_CLOCK=cpu ...   # the sweep contenders timed by their thread's on-CPU time
//! ```
//!
//! * current-version `get` vs a raw `get` + `serde_json::from_slice` of the same bytes
//!   (target ≤ 1.10×);
//! * `get` of a document 1 and 3 versions behind (no read-repair), vs the same raw get;
//! * eager sweep throughput vs a hand-written batched read-transform-write loop over the
//!   raw store (same steps, same batch size, a cursor key written per batch; target
//!   ≥ 0.9×, issue 9). The timed parts are their own symbols (`payload::sweep_pass`,
//!   `payload::hand_pass`) for `valgrind --tool=callgrind --toggle-collect=...`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::hint::black_box;
use std::time::{Duration, Instant};
use strata::layout;
use strata::layout::envelope::{self, Envelope, ENVELOPE_HEADER_LEN};
use strata::ops::sweep::SweepOptions;
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

#[derive(Debug, Serialize, Deserialize)]
struct Account {
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
    tags: Vec<String>,
    active: bool,
    #[serde(default)]
    tier: String,
    #[serde(default)]
    steps: i64,
}

fn v1_json(i: usize) -> String {
    format!(
        r#"{{"id":"a{i:07}","owner":"Owner Number {i}","email":"owner{i}@example.com","balance":{i},"tags":["alpha","beta","gamma"],"active":true}}"#
    )
}

fn current_json(i: usize) -> String {
    format!(
        r#"{{"id":"a{i:07}","owner":"Owner Number {i}","email":"owner{i}@example.com","balance_cents":{},"tags":["alpha","beta","gamma"],"active":true,"tier":"basic","steps":1}}"#,
        i * 100
    )
}

fn step1(o: &mut Map<String, Value>) -> Result<(), StepError> {
    let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
    o.insert("balance_cents".into(), json!(d * 100));
    Ok(())
}
fn step2(o: &mut Map<String, Value>) -> Result<(), StepError> {
    o.insert("tier".into(), json!("basic"));
    Ok(())
}
fn step3(o: &mut Map<String, Value>) -> Result<(), StepError> {
    let n = o.get("steps").and_then(|v| v.as_i64()).unwrap_or(0);
    o.insert("steps".into(), json!(n + 1));
    Ok(())
}

fn options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, step1)
        .upcast(2, Mode::Eager, step2)
        .upcast(3, Mode::Lazy, step3)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn open(dir: &std::path::Path) -> (Store, Database, Collection<Account>) {
    let store = strata_sled::SledStore::open_store(dir).unwrap();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db.collection::<Account>("acc", options()).unwrap();
    (store, db, c)
}

fn seed(store: &Store, rows: usize, version: i32, json: impl Fn(usize) -> String) {
    let mut b = Batch::new();
    for i in 0..rows {
        let id = format!("a{i:07}");
        b = b.set(
            layout::keys::doc_key("acc", &id),
            envelope::encode(Envelope::new(version, 1), json(i).as_bytes()),
        );
        if (i + 1) % 5000 == 0 {
            store.apply(std::mem::take(&mut b)).unwrap();
        }
    }
    if !b.is_empty() {
        store.apply(b).unwrap();
    }
}

fn ids(rows: usize, gets: usize) -> Vec<String> {
    // A fixed pseudo-random order (xorshift), the same for every contender.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..gets)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("a{:07}", x as usize % rows)
        })
        .collect()
}

#[path = "support/timer.rs"]
mod timer;
use timer::Timer;

/// Best of `rounds` timings of `f`.
fn best(rounds: usize, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn raw_get(store: &Store, keys: &[String]) {
    for id in keys {
        let key = [b"__nx/doc/acc/".as_slice(), id.as_bytes()].concat();
        let bytes = store.get(&key).unwrap().unwrap();
        let a: Account = serde_json::from_slice(&bytes[ENVELOPE_HEADER_LEN..]).unwrap();
        black_box(a);
    }
}

fn coll_get(c: &Collection<Account>, keys: &[String]) {
    for id in keys {
        black_box(c.get(id).unwrap().unwrap());
    }
}

fn per_op(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rows = env_usize("STRATA_BENCH_ROWS", 20_000);
    let gets = env_usize("STRATA_BENCH_GETS", 200_000);
    let sweep_rows = env_usize("STRATA_BENCH_SWEEP_ROWS", 50_000);
    let rounds = 5;
    // Profiling aid: STRATA_BENCH_ONLY=sweep|hand runs only that sweep contender (seed: the
    // set-up alone).
    if let Ok(only) = std::env::var("STRATA_BENCH_ONLY") {
        let d = match only.as_str() {
            "sweep" => our_sweep(sweep_rows, 256),
            "hand" => hand_loop(sweep_rows, 256),
            // The set-up both contenders share (open + seed), to subtract from a whole-process
            // count (`perf stat -e cycles:u`) of `sweep` or `hand`.
            "seed" => seed_only(sweep_rows),
            other => {
                panic!("STRATA_BENCH_ONLY must be `sweep`, `hand` or `seed`, not `{other}`")
            }
        };
        println!("{only}: {sweep_rows} rows in {d:?}");
        return;
    }
    let keys = ids(rows, gets);
    println!("payload bench: {rows} rows, {gets} gets per round, best of {rounds} rounds; sweep over {sweep_rows} rows");

    // --- reads ---------------------------------------------------------------------
    // The baseline: raw get + from_slice of current-version bytes (the same bytes the
    // current-version get binds); stale reads are compared with it too.
    let mut results = Vec::new();
    let mut baseline = f64::NAN;
    for (label, version, json) in [
        ("current (v4)", 4, current_json as fn(usize) -> String),
        ("1 behind (v3)", 3, |i| {
            current_json(i).replace(r#","steps":1"#, r#","steps":0"#)
        }),
        ("3 behind (v1)", 1, v1_json),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _db, c) = open(tmp.path());
        seed(&store, rows, version, json);
        coll_get(&c, &keys[..1000]);
        let mut ours = Duration::MAX;
        if version == 4 {
            raw_get(&store, &keys[..1000]);
            // Interleave the contenders so drift hits both alike.
            let mut raw = Duration::MAX;
            for _ in 0..rounds {
                raw = raw.min(best(1, || raw_get(&store, &keys)));
                ours = ours.min(best(1, || coll_get(&c, &keys)));
            }
            baseline = per_op(raw, gets);
        } else {
            ours = best(rounds, || coll_get(&c, &keys));
        }
        results.push((label, baseline, per_op(ours, gets)));
    }
    println!("\n| read | raw get + from_slice of a current row (ns/op) | Collection::get (ns/op) | ratio |");
    println!("|---|---|---|---|");
    for (label, raw, ours) in &results {
        println!("| {label} | {raw:.0} | {ours:.0} | {:.2}x |", ours / raw);
    }

    // --- sweep ---------------------------------------------------------------------
    let batch = 256usize;
    let sweep_rounds = env_usize("STRATA_BENCH_SWEEP_ROUNDS", 5);
    let (mut hand, mut ours) = (Duration::MAX, Duration::MAX);
    // Interleaved pairs: each pair's ratio sees the same machine load; the median of the
    // pair ratios is the figure least disturbed by a loaded machine.
    let mut pair_ratios = Vec::new();
    for _ in 0..sweep_rounds {
        let h = hand_loop(sweep_rows, batch);
        let o = our_sweep(sweep_rows, batch);
        pair_ratios.push(h.as_secs_f64() / o.as_secs_f64());
        hand = hand.min(h);
        ours = ours.min(o);
    }
    pair_ratios.sort_by(f64::total_cmp);
    let median = pair_ratios[pair_ratios.len() / 2];
    let hand_rate = sweep_rows as f64 / hand.as_secs_f64();
    let our_rate = sweep_rows as f64 / ours.as_secs_f64();
    let clock = std::env::var("STRATA_BENCH_CLOCK").unwrap_or_else(|_| "wall".into());
    println!(
        "\n| sweep ({sweep_rows} rows, batch {batch}, best of {sweep_rounds}, clock {clock}) | rows/s | time |"
    );
    println!("|---|---|---|");
    println!("| hand-written batched loop (raw store) | {hand_rate:.0} | {hand:?} |");
    println!("| Collection::sweep | {our_rate:.0} | {ours:?} |");
    println!(
        "| throughput ratio (sweep / hand-written), best of each | {:.2}x | |",
        our_rate / hand_rate
    );
    println!("| throughput ratio, median of interleaved pairs | {median:.2}x | |");
}

/// The hand-written baseline: scan a batch, decode, run the three steps, re-encode, write
/// the batch plus a cursor key as one plain batch.
fn hand_loop(rows: usize, batch: usize) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _db, _c) = open(tmp.path());
    seed(&store, rows, 1, v1_json);
    let t = Timer::start();
    let n = hand_pass(&store, batch);
    let elapsed = t.elapsed();
    assert_eq!(n, rows);
    elapsed
}

/// The timed part of [`hand_loop`] (its own symbol, for `callgrind --toggle-collect`).
#[inline(never)]
fn hand_pass(store: &Store, batch: usize) -> usize {
    let prefix = layout::keys::doc_prefix("acc");
    let mut after: Option<Vec<u8>> = None;
    let limits = ScanLimits::new(batch, 16 << 20).unwrap();
    let mut n = 0usize;
    loop {
        let page = store.scan(&prefix, after.as_deref(), limits).unwrap();
        let mut b = Batch::new();
        for r in &page.records {
            let (env, json) = envelope::decode(&r.value).unwrap();
            let mut obj: Map<String, Value> = serde_json::from_slice(json).unwrap();
            step1(&mut obj).unwrap();
            step2(&mut obj).unwrap();
            step3(&mut obj).unwrap();
            let out = serde_json::to_vec(&obj).unwrap();
            b = b.set(
                r.key.clone(),
                envelope::encode(Envelope::new(4, env.lock_version), &out),
            );
            n += 1;
        }
        if let Some(c) = page.cursor() {
            b = b.set(b"__nx/bench-cursor".to_vec(), c.to_vec());
            after = Some(c.to_vec());
        }
        store.apply(b).unwrap();
        if !page.more {
            break;
        }
    }
    n
}

/// Only the set-up of [`hand_loop`] and [`our_sweep`] (open, seed); times the seeding.
fn seed_only(rows: usize) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _db, _c) = open(tmp.path());
    let t = Instant::now();
    seed(&store, rows, 1, v1_json);
    t.elapsed()
}

/// The eager sweep over the same data.
fn our_sweep(rows: usize, batch: usize) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _db, c) = open(tmp.path());
    seed(&store, rows, 1, v1_json);
    let t = Timer::start();
    let rewritten = sweep_pass(&c, batch);
    let elapsed = t.elapsed();
    assert_eq!(rewritten, rows);
    elapsed
}

/// The timed part of [`our_sweep`] (its own symbol, for `callgrind --toggle-collect`).
#[inline(never)]
fn sweep_pass(c: &Collection<Account>, batch: usize) -> usize {
    let report = c
        .sweep(SweepOptions::new().limits(strata::pass::PassLimits::new(batch, 4 << 20).unwrap()))
        .unwrap();
    report.rewritten() as usize
}
