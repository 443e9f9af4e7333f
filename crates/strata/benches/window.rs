//! Deploy-window write benchmark (harness = false, issue #26): a build-2 `put` inside a
//! deploy window (the window record read in the write's transaction, the downcast, the
//! round trip that finds the kept fields, the kept member) against the same build's plain
//! `put` outside a window, and a build-2 `get` of a row written in the window (upcast +
//! kept fields merged) against a `get` of a current row — on redb with deferred commits,
//! in one run, rounds interleaved, best round of each reported with the ratio.
//!
//! ```text
//! cargo bench -p strata --bench window
//! STRATA_BENCH_WRITES=50000 STRATA_BENCH_ROUNDS=5 cargo bench -p strata --bench window
//! ```
//!
//! Target: a write during a window ≤ 1.3× a plain write; reads unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::{Duration, Instant};
use strata::policy::{covered_by_upcasts, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_redb::{RedbDurability, RedbOptions};

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct V1 {
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct V2 {
    id: String,
    owner_name: String,
    email: String,
    balance_cents: i64,
    #[serde(default)]
    tags: Vec<String>,
}

fn rename(o: &mut serde_json::Map<String, Value>, from: &str, to: &str) -> Result<(), StepError> {
    let v = o.remove(from).ok_or_else(|| StepError::new("missing"))?;
    o.insert(to.into(), v);
    Ok(())
}

fn build1() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .schema(SchemaOptions::of::<V1>())
}

fn build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| {
            rename(o, "owner", "owner_name")?;
            o.entry("tags").or_insert_with(|| json!([]));
            Ok(())
        })
        .downcast(2, |o| {
            rename(o, "owner_name", "owner")?;
            o.remove("tags");
            Ok(())
        })
        .schema(SchemaOptions::of::<V2>().strategy(covered_by_upcasts()))
}

fn doc(i: usize, serial: usize) -> V2 {
    V2 {
        id: format!("a{i:07}"),
        owner_name: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: (i * 100 + serial) as i64,
        tags: vec!["alpha".into(), "beta".into()],
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A fresh redb store; `window`: build 1 declared first, so build 2 opens a window.
fn setup(dir: &std::path::Path, window: bool) -> (Database, Collection<V2>) {
    let store = RedbOptions::new()
        .durability(RedbDurability::Deferred)
        .create(dir.join("db.redb"))
        .unwrap()
        .into_store();
    let db = Database::builder(store)
        .policy(PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap();
    if window {
        db.collection::<V1>("accts", build1()).unwrap();
    }
    let c = db.collection::<V2>("accts", build2()).unwrap();
    let open = strata::ops::window::operational(db.store(), "accts").unwrap();
    assert_eq!(open.is_some(), window);
    (db, c)
}

fn puts(writes: usize, round: usize, window: bool) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (_db, c) = setup(dir.path(), window);
    let start = Instant::now();
    for n in 0..writes {
        c.put(&format!("a{n:07}"), &doc(n, round)).unwrap();
    }
    let put = start.elapsed();
    let start = Instant::now();
    for n in 0..writes {
        black_box(c.get(&format!("a{n:07}")).unwrap());
    }
    (put, start.elapsed())
}

fn main() {
    let writes = env_usize("STRATA_BENCH_WRITES", 20_000);
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 3);
    let mut best = [Duration::MAX; 4];
    for round in 0..rounds {
        let (p, g) = puts(writes, round, false);
        best[0] = best[0].min(p);
        best[1] = best[1].min(g);
        let (p, g) = puts(writes, round, true);
        best[2] = best[2].min(p);
        best[3] = best[3].min(g);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / writes as f64;
    println!("window bench: {writes} documents, {rounds} rounds, best round each (redb, deferred commits)");
    println!(
        "  put  plain {:>7.2} µs   in a window {:>7.2} µs   ratio {:.2}x",
        per(best[0]),
        per(best[2]),
        per(best[2]) / per(best[0])
    );
    println!(
        "  get  plain {:>7.2} µs   in a window {:>7.2} µs   ratio {:.2}x (the window's rows are upcast on read)",
        per(best[1]),
        per(best[3]),
        per(best[3]) / per(best[1])
    );
}
