//! Open + validate time on a sled store with 1k vs 1M records.
//!
//! Validation is O(tables), not O(data): the ratio of validation times should be close to
//! 1. Run with `cargo bench -p strata --bench open` (`STRATA_BENCH_BIG=N` to change 1M).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};
use strata::numax;
use strata::validate::validate_and_init;
use strata_store::{Batch, KvWrite};

fn build(path: &std::path::Path, records: usize) {
    let store = strata_sled::SledStore::open_store(path).unwrap();
    validate_and_init(&store, &numax::catalog()).unwrap();
    let mut batch = Batch::new();
    for i in 0..records {
        let (_, _, prefix) = numax::NUMAX_TABLES[i % 14];
        let key = format!("{prefix}key-{i:010}").into_bytes();
        batch.push(strata_store::Mutation::Set {
            key,
            value: vec![7u8; 8],
        });
        if batch.mutations().len() == 10_000 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// (median open time, median validate time)
fn measure(path: &std::path::Path, runs: usize) -> (Duration, Duration) {
    let mut opens = Vec::new();
    let mut validates = Vec::new();
    let catalog = numax::catalog();
    for _ in 0..runs {
        let t0 = Instant::now();
        let store = strata_sled::SledStore::open_existing(path)
            .unwrap()
            .into_store();
        let t1 = Instant::now();
        let report = validate_and_init(&store, &catalog).unwrap();
        let t2 = Instant::now();
        assert!(report.initialized.is_empty());
        opens.push(t1 - t0);
        validates.push(t2 - t1);
        drop(store);
    }
    (median(opens), median(validates))
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench`-less args; keep it quick.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let big: usize = std::env::var("STRATA_BENCH_BIG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let small_path = dir.path().join("small");
    let big_path = dir.path().join("big");
    build(&small_path, 1_000);
    build(&big_path, big);
    let (open_s, val_s) = measure(&small_path, 7);
    let (open_b, val_b) = measure(&big_path, 7);
    println!("open + validate, sled, median of 7 runs");
    println!(
        "  1k records: sled open {:>10.3?}  validate {:>10.3?}",
        open_s, val_s
    );
    println!(
        "  {big} records: sled open {:>10.3?}  validate {:>10.3?}",
        open_b, val_b
    );
    println!(
        "  validate ratio {big}/1k = {:.2}x   (open+validate ratio = {:.2}x)",
        val_b.as_secs_f64() / val_s.as_secs_f64(),
        (open_b + val_b).as_secs_f64() / (open_s + val_s).as_secs_f64()
    );
}
