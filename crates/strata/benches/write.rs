//! Write path benchmarks (harness = false): `put` and `update` of a current-version
//! document through a collection, with and without the shape policy, against a raw sled
//! `insert` of the same serde_json bytes — all measured in one run, ratios printed.
//!
//! ```text
//! cargo bench -p strata --bench write
//! STRATA_BENCH_WRITES=50000 STRATA_BENCH_ROWS=2000 STRATA_BENCH_ROUNDS=5 cargo bench -p strata --bench write
//! # instruction counts of the timed loops alone (raw insert + one contender):
//! STRATA_BENCH_WRITES=2000 STRATA_BENCH_ROUNDS=1 STRATA_BENCH_ONLY=put \
//!   valgrind --tool=callgrind --toggle-collect='write::*_loop' target/release/deps/write-*
//! ```
//!
//! Targets (issue 9): ≤ 1.15× the raw insert without policy, ≤ 1.3× with policy. Every
//! contender gets its own fresh sled datastore with the same cache capacity; the rounds are
//! interleaved and the best round of each contender is reported.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::{Duration, Instant};
use strata::policy::{additive_only, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata_sled::SledOptions;

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Account {
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
    tags: Vec<String>,
    active: bool,
}

/// Document `i` at write `serial`: every write changes its bytes (sled skips an `insert`
/// of the value a key already holds, so repeating a value would measure no write at all).
fn doc(i: usize, serial: usize) -> Account {
    Account {
        id: format!("a{i:07}"),
        owner: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: (i * 100 + serial) as i64,
        tags: vec!["alpha".into(), "beta".into(), "gamma".into()],
        active: true,
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Setup {
    writes: usize,
    rows: usize,
}

/// The serial number of write `n` of `round` (distinct across rounds).
fn serial(s: &Setup, round: usize, n: usize) -> usize {
    round * s.writes + n + 1
}

/// The key of write `n` and its document index.
fn key_of(n: usize, rows: usize) -> (String, usize) {
    let i = n % rows;
    (format!("a{i:07}"), i)
}

fn raw_insert(s: &Setup, round: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new()
        .path(dir.path())
        .cache_capacity(SledOptions::default().cache_capacity_bytes())
        .open()
        .unwrap();
    let tree = db.open_tree("bench").unwrap();
    let started = Instant::now();
    raw_loop(s, round, &tree);
    started.elapsed()
}

/// The timed loops are functions of their own so that a profiler can count them alone
/// (`valgrind --tool=callgrind --toggle-collect='write::*_loop'`).
#[inline(never)]
fn raw_loop(s: &Setup, round: usize, tree: &sled::Tree) {
    for n in 0..s.writes {
        let (key, i) = key_of(n, s.rows);
        let bytes = serde_json::to_vec(&doc(i, serial(s, round, n))).unwrap();
        tree.insert(format!("__nx/doc/acc/{key}").as_bytes(), bytes)
            .unwrap();
    }
}

fn collection(dir: &std::path::Path, policy: bool) -> (Database, Collection<Account>) {
    let store = SledOptions::new().open(dir).unwrap();
    let store = strata_store::Store::new(store);
    let mut b = Database::builder(store);
    let mut options = CollectionOptions::new().identity_fields(["id"]);
    if policy {
        b = b.policy(PolicyConfig::new().heartbeat(None));
        options = options.schema(SchemaOptions::of::<Account>().strategy(additive_only()));
    }
    let db = b.open().unwrap();
    let c = db.collection::<Account>("acc", options).unwrap();
    (db, c)
}

fn puts(s: &Setup, round: usize, policy: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (_db, c) = collection(dir.path(), policy);
    let started = Instant::now();
    put_loop(s, round, &c);
    started.elapsed()
}

#[inline(never)]
fn put_loop(s: &Setup, round: usize, c: &Collection<Account>) {
    for n in 0..s.writes {
        let (key, i) = key_of(n, s.rows);
        black_box(c.put(&key, &doc(i, serial(s, round, n))).unwrap());
    }
}

fn updates(s: &Setup, round: usize, policy: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (_db, c) = collection(dir.path(), policy);
    // Each row's lock version, by row index (no hashing in the timed loop).
    let mut locks: Vec<u64> = Vec::with_capacity(s.rows);
    for i in 0..s.rows {
        let (key, _) = key_of(i, s.rows);
        locks.push(c.insert(&key, &doc(i, round)).unwrap());
    }
    let started = Instant::now();
    update_loop(s, round, &c, &mut locks);
    started.elapsed()
}

#[inline(never)]
fn update_loop(s: &Setup, round: usize, c: &Collection<Account>, locks: &mut [u64]) {
    for n in 0..s.writes {
        let (key, i) = key_of(n, s.rows);
        locks[i] = c
            .update(&key, &doc(i, serial(s, round, n)), locks[i])
            .unwrap();
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let s = Setup {
        writes: env_usize("STRATA_BENCH_WRITES", 20_000),
        rows: env_usize("STRATA_BENCH_ROWS", 1_000).max(1),
    };
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 3).max(1);
    let names = [
        "raw sled insert",
        "put, no policy",
        "put, policy",
        "update, no policy",
        "update, policy",
    ];
    // STRATA_BENCH_ONLY=put,update-policy,...: run only these contenders (for a
    // profiler); the raw insert always runs (it is the baseline of every ratio).
    let only = std::env::var("STRATA_BENCH_ONLY").ok();
    let wanted = |tag: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|t| t.trim() == tag))
    };
    let tags = ["raw", "put", "put-policy", "update", "update-policy"];
    let mut best = [Duration::MAX; 5];
    for round in 0..rounds {
        for (c, tag) in tags.iter().enumerate() {
            if c > 0 && !wanted(tag) {
                continue;
            }
            let t = match c {
                0 => raw_insert(&s, round),
                1 => puts(&s, round, false),
                2 => puts(&s, round, true),
                3 => updates(&s, round, false),
                _ => updates(&s, round, true),
            };
            best[c] = best[c].min(t);
        }
    }
    println!(
        "write path: {} writes over {} rows, best of {rounds} rounds",
        s.writes, s.rows
    );
    let base = best[0].as_secs_f64();
    for (name, t) in names.iter().zip(best) {
        if t == Duration::MAX {
            continue;
        }
        let per = t.as_secs_f64() * 1e6 / s.writes as f64;
        println!(
            "  {name:<18} {:>8.1} ms  {per:>6.2} µs/op  {:>5.2}×",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() / base
        );
    }
}
