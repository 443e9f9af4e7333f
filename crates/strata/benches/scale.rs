//! Writers that scale (issue 24 item 3): T threads writing distinct keys through ONE
//! handle, for T = 1, 2 and 4, on sled and on redb (non-durable commits), against the raw
//! store written the same way (the same serde_json bytes, one `insert` / one write
//! transaction per document) — all in one run. For each T it prints the throughput, each
//! side's speedup over its own one thread, and the ratio the issue targets:
//! strata's speedup ÷ the raw store's speedup (target ≥ 0.9).
//!
//! ```text
//! cargo bench -p strata --bench scale
//! # sizes: STRATA_BENCH_WRITES (20000 per measurement, split over the threads),
//! # STRATA_BENCH_ROUNDS (3; interleaved, best round of each), STRATA_BENCH_POLICY=1
//! # (the collection under a shape policy), STRATA_BENCH_BACKENDS=sled,redb
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};
use strata::policy::{additive_only, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata_redb::{RedbDurability, RedbOptions};
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

fn doc(id: &str, i: usize) -> Account {
    Account {
        id: id.to_string(),
        owner: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: i as i64 * 100,
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

const THREADS: [usize; 3] = [1, 2, 4];
const REDB_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("bench");

/// The key of write `i` of thread `t` in measurement `m` (distinct everywhere).
fn key(m: usize, t: usize, i: usize) -> String {
    format!("m{m:03}t{t}n{i:07}")
}

/// Runs `write(thread, index)` for `writes` writes split over `threads` threads; the
/// wall-clock time of the whole.
fn run(threads: usize, writes: usize, write: &(dyn Fn(usize, usize) + Sync)) -> Duration {
    let per = writes / threads;
    let start = std::sync::Barrier::new(threads);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let start = &start;
            s.spawn(move || {
                start.wait();
                for i in 0..per {
                    write(t, i);
                }
            });
        }
    });
    started.elapsed()
}

enum Raw {
    Sled(sled::Db),
    Redb(redb::Database),
}

impl Raw {
    fn open(backend: &str, dir: &Path) -> Raw {
        match backend {
            "sled" => Raw::Sled(
                sled::Config::new()
                    .path(dir.join("raw"))
                    .cache_capacity(SledOptions::default().cache_capacity_bytes())
                    .open()
                    .unwrap(),
            ),
            _ => Raw::Redb(redb::Database::create(dir.join("raw.redb")).unwrap()),
        }
    }

    fn put(&self, key: &str, value: &Account) {
        let full = format!("__nx/doc/acc/{key}");
        match self {
            Raw::Sled(db) => {
                db.insert(full.as_bytes(), serde_json::to_vec(value).unwrap())
                    .unwrap();
            }
            Raw::Redb(db) => {
                let bytes = serde_json::to_vec(value).unwrap();
                let mut txn = db.begin_write().unwrap();
                txn.set_durability(redb::Durability::None).unwrap();
                {
                    let mut t = txn.open_table(REDB_TABLE).unwrap();
                    t.insert(full.as_bytes(), bytes.as_slice()).unwrap();
                }
                txn.commit().unwrap();
            }
        }
    }
}

fn strata_open(backend: &str, dir: &Path, policy: bool) -> (Database, Collection<Account>) {
    let store: strata_store::Store = match backend {
        "sled" => SledOptions::new().open(dir.join("strata")).unwrap().into(),
        _ => RedbOptions::new()
            .durability(RedbDurability::Deferred)
            .create(dir.join("strata.redb"))
            .unwrap()
            .into_store(),
    };
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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let writes = env_usize("STRATA_BENCH_WRITES", 20_000);
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 3).max(1);
    let policy = std::env::var("STRATA_BENCH_POLICY").is_ok_and(|v| v == "1");
    let backends = std::env::var("STRATA_BENCH_BACKENDS").unwrap_or_else(|_| "sled,redb".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "writers through one handle: {writes} distinct-key puts per measurement, best of {rounds} interleaved rounds, {cores} cores, policy: {policy}"
    );
    for backend in backends.split(',').map(str::trim) {
        let dir = tempfile::tempdir().unwrap();
        let raw = Raw::open(backend, dir.path());
        let (_db, coll) = strata_open(backend, dir.path(), policy);
        // [side][threads]: best time.
        let mut best = [[Duration::MAX; THREADS.len()]; 2];
        let mut m = 0;
        for _ in 0..rounds {
            for (ti, &threads) in THREADS.iter().enumerate() {
                for (side, best) in best.iter_mut().enumerate() {
                    m += 1;
                    let t = if side == 0 {
                        run(threads, writes, &|t, i| {
                            let k = key(m, t, i);
                            raw.put(&k, &doc(&k, i));
                        })
                    } else {
                        run(threads, writes, &|t, i| {
                            let k = key(m, t, i);
                            coll.put(&k, &doc(&k, i)).unwrap();
                        })
                    };
                    best[ti] = best[ti].min(t);
                }
            }
        }
        let ops = |d: Duration| writes as f64 / d.as_secs_f64();
        println!("{backend}:");
        println!("  threads   raw ops/s  strata ops/s  strata/raw time  raw speedup  strata speedup  ratio (target ≥ 0.9)");
        for (ti, &threads) in THREADS.iter().enumerate() {
            let raw_up = ops(best[0][ti]) / ops(best[0][0]);
            let strata_up = ops(best[1][ti]) / ops(best[1][0]);
            println!(
                "  {threads:>7}  {:>10.0}  {:>12.0}  {:>14.2}×  {raw_up:>10.2}×  {strata_up:>13.2}×  {:>6.2}",
                ops(best[0][ti]),
                ops(best[1][ti]),
                best[1][ti].as_secs_f64() / best[0][ti].as_secs_f64(),
                strata_up / raw_up
            );
        }
    }
}
