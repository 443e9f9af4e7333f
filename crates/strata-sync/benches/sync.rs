//! Sync-store benchmark: prints ratios measured in one run against raw sled.
//!
//! * durable ops applied per second through `SyncManager` on sled vs writing the very same
//!   batches (same keys, same bytes) with raw `sled::Batch`es — one op per batch, and
//!   grouped (`apply_batch`, 512 ops per batch);
//! * hydration (`Runtime::new`) of a store holding 100k ops vs a raw sled scan of the same
//!   records.
//!
//! * apply throughput with eviction on (op-log and seen-ops limits of
//!   `STRATA_BENCH_EVICT_LIMIT`, default 1,000, so every batch evicts as much as it
//!   inserts) vs off (unbounded limits);
//! * hydration with the default limits (10,000 op-log records retained) after
//!   `STRATA_BENCH_HISTORY` ops (comma-separated, default `100000,1000000`) were applied:
//!   it must not grow with history.
//!
//! `STRATA_BENCH_OPS` (default 20000) sets the apply workload, `STRATA_BENCH_HYDRATE_OPS`
//! (default 100000) the hydration workload.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_store::{Backend, KvRead, KvWrite, MemoryStore, Mutation, Store};
use strata_sync::{Op, OpKind, Runtime, SyncManager, SyncOptions};

fn op(i: u64) -> Op {
    let key = format!("key-{}", i % 100);
    let kind = match i % 6 {
        0 => OpKind::GCounterIncrement { key, increment: 1 },
        1 => OpKind::PNCounterDecrement { key, decrement: 2 },
        2 => OpKind::LwwRegisterSet {
            key,
            value: i.to_le_bytes().to_vec(),
            timestamp_ms: i,
        },
        3 => OpKind::LwwMapSet {
            key,
            field: format!("f{}", i % 8),
            value: vec![1, 2, 3],
            timestamp_ms: i,
        },
        4 => OpKind::ORSetAdd {
            key,
            element: format!("e{}", i % 8),
            tag: format!("t{i}"),
        },
        _ => OpKind::PNCounterIncrement { key, increment: 3 },
    };
    Op::new(format!("op-{i:012}"), format!("node-{}", i % 5), kind)
}

/// A memory backend that records every batch (to replay the same bytes into raw sled).
#[derive(Debug, Default)]
struct Recorder {
    inner: MemoryStore,
    batches: Arc<Mutex<Vec<Vec<Mutation>>>>,
}

impl KvRead for Recorder {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}
impl KvWrite for Recorder {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let mut decided = None;
        let written = self.inner.read_modify_write(reads, &mut |values| {
            let batch = decide(values)?;
            decided = Some(batch.mutations().to_vec());
            Some(batch)
        })?;
        if let Some(mutations) = decided.filter(|_| written) {
            self.batches.lock().unwrap().push(mutations);
        }
        Ok(written)
    }
    fn flush(&self) -> strata_store::Result<()> {
        Ok(())
    }
}
impl Backend for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
}

fn record(ops: &[Op], group: usize) -> Vec<Vec<Mutation>> {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let store = Store::new(Recorder {
        inner: MemoryStore::new(),
        batches: batches.clone(),
    });
    let m = SyncManager::open(store).unwrap();
    batches.lock().unwrap().clear(); // drop the header batch
    for chunk in ops.chunks(group) {
        m.apply_batch(chunk).unwrap();
    }
    let out = std::mem::take(&mut *batches.lock().unwrap());
    out
}

fn raw_sled(batches: &[Vec<Mutation>]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new()
        .path(dir.path())
        .cache_capacity(64 << 20)
        .open()
        .unwrap();
    let t = Instant::now();
    for b in batches {
        let mut sb = sled::Batch::default();
        for m in b {
            match m {
                Mutation::Set { key, value } => sb.insert(key.as_slice(), value.as_slice()),
                Mutation::Delete { key } => sb.remove(key.as_slice()),
            }
        }
        db.apply_batch(sb).unwrap();
    }
    db.flush().unwrap();
    t.elapsed()
}

fn synced(ops: &[Op], group: usize) -> Duration {
    synced_with(ops, SyncOptions::default().max_ops_per_batch(group))
}

fn synced_with(ops: &[Op], options: SyncOptions) -> Duration {
    let group = options.max_ops_per_batch_value();
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::with_options(dir.path().join("db"), options).unwrap();
    let t = Instant::now();
    for chunk in ops.chunks(group) {
        rt.sync().apply_batch(chunk).unwrap();
    }
    rt.sync().flush().unwrap();
    t.elapsed()
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; any filter argument is ignored.
    let n = env("STRATA_BENCH_OPS", 20_000);
    let ops: Vec<Op> = (0..n).map(op).collect();
    println!("strata-sync bench: {n} ops over 100 keys");
    for group in [1usize, 512] {
        let batches = record(&ops, group);
        let bytes: usize = batches.iter().flatten().map(Mutation::size).sum();
        let raw = raw_sled(&batches);
        let ours = synced(&ops, group);
        let rate = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "apply (ops per store batch = {group:>3}): sync {:>10.0} ops/s, raw sled {:>10.0} ops/s ({} batches, {:.1} MiB); sync/raw time ratio {:.2}",
            rate(ours),
            rate(raw),
            batches.len(),
            bytes as f64 / (1 << 20) as f64,
            ours.as_secs_f64() / raw.as_secs_f64()
        );
    }

    let h = env("STRATA_BENCH_HYDRATE_OPS", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let rt = Runtime::with_options(&path, SyncOptions::default()).unwrap();
        let all: Vec<Op> = (0..h).map(op).collect();
        for chunk in all.chunks(4096) {
            rt.sync().apply_batch(chunk).unwrap();
        }
        rt.sync().flush().unwrap();
    }
    let t = Instant::now();
    let rt = Runtime::new(&path).unwrap();
    let hydrate = t.elapsed();
    assert_eq!(rt.sync().next_sequences(), (h, h));
    drop(rt);
    hydrate_after_history();
    eviction_on_off(&ops);
    let rt = Runtime::new(&path).unwrap();
    drop(rt);
    let db = sled::Config::new()
        .path(&path)
        .cache_capacity(64 << 20)
        .open()
        .unwrap();
    let t = Instant::now();
    let mut records = 0usize;
    let mut bytes = 0usize;
    for kv in db.scan_prefix(b"__nx/") {
        let (k, v) = kv.unwrap();
        records += 1;
        bytes += k.len() + v.len();
    }
    let raw = t.elapsed();
    println!(
        "hydrate {h} ops: Runtime::new {:.3} s (validate + bounded scans + decode), raw sled scan of {records} records / {:.1} MiB {:.3} s; ratio {:.2}",
        hydrate.as_secs_f64(),
        bytes as f64 / (1 << 20) as f64,
        raw.as_secs_f64(),
        hydrate.as_secs_f64() / raw.as_secs_f64()
    );
}

fn eviction_on_off(ops: &[Op]) {
    let limit = env("STRATA_BENCH_EVICT_LIMIT", 1_000) as usize;
    let n = ops.len();
    for group in [1usize, 512] {
        let on = synced_with(
            ops,
            SyncOptions::default()
                .max_ops_per_batch(group)
                .op_log_limit(limit)
                .seen_ops_limit(limit),
        );
        let off = synced_with(
            ops,
            SyncOptions::default()
                .max_ops_per_batch(group)
                .op_log_limit(usize::MAX)
                .seen_ops_limit(usize::MAX),
        );
        let rate = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "apply with eviction (limits {limit}) vs without (ops per batch = {group:>3}): on {:>10.0} ops/s, off {:>10.0} ops/s; on/off time ratio {:.2}",
            rate(on),
            rate(off),
            on.as_secs_f64() / off.as_secs_f64()
        );
    }
}

fn hydrate_after_history() {
    let histories: Vec<u64> = std::env::var("STRATA_BENCH_HISTORY")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut first: Option<f64> = None;
    for h in histories {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let t = Instant::now();
        {
            let rt = Runtime::with_options(&path, SyncOptions::default()).unwrap();
            let mut at = 0;
            while at < h {
                let end = (at + 4096).min(h);
                let chunk: Vec<Op> = (at..end).map(op).collect();
                rt.sync().apply_batch(&chunk).unwrap();
                at = end;
            }
            rt.sync().flush().unwrap();
        }
        let fill = t.elapsed();
        // Best of 3 opens.
        let mut best = f64::MAX;
        let mut retained = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let rt = Runtime::new(&path).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            assert_eq!(rt.sync().next_sequences(), (h, h));
            retained = rt.sync().op_log().count();
        }
        let base = *first.get_or_insert(best);
        println!(
            "hydrate after {h} ops applied ({retained} op-log records retained, default limits): Runtime::new {best:.3} s (best of 3), {:.2}x the first history size; filling took {:.1} s",
            best / base,
            fill.as_secs_f64()
        );
    }
}
