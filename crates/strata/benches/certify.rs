//! Certification throughput and peak RSS of a legacy v0→v1 migration.
//!
//! ```sh
//! cargo bench -p strata --bench certify
//! # smaller: STRATA_BENCH_RECORDS=200000 cargo bench -p strata --bench certify
//! # batch size of both sides (default 512): STRATA_BENCH_MAX_RECORDS=4096
//! ```
//!
//! 1. Builds a legacy (header-less) sled datastore of N records (default 1M) spread evenly
//!    over the 14 Numax tables, written through `strata_sled`.
//! 2. Throughput, measured in one run on the same data: a raw scan of the store
//!    (`KvRead::scan` pages of 512 records / 4 MiB over every table prefix, each payload
//!    decoded with the same Numax decoders) vs `Migrator` certification (lease, checkpoint
//!    batches, header writes). After a warm-up scan, four rounds each, interleaved in alternating order; the fastest
//!    of each is kept.
//!    Headers are deleted between certification rounds so each round certifies everything.
//! 3. Peak RSS: the raw scan and the migration each run in a fresh child process (this
//!    binary re-executed with `STRATA_BENCH_ROLE`), which reports `VmHWM` from
//!    `/proc/self/status`; strata's overhead is migrate − raw. Measured at N/10 and N.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use strata::header::header_key;
use strata::migrate::{Migrator, Registry};
use strata::numax::{self, wire};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

/// Batch record limit of both sides (`STRATA_BENCH_MAX_RECORDS`, default 512).
fn batch_env() -> usize {
    std::env::var("STRATA_BENCH_MAX_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

fn records_env() -> usize {
    std::env::var("STRATA_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// One legacy record of table index `t` (0..14), number `i`.
fn record(t: usize, i: usize) -> (Vec<u8>, Vec<u8>) {
    use wire::*;
    let k = format!("key-{i:09}");
    let node = |n: usize| format!("node-{}", n % 7);
    match t {
        0 => (
            key(GCOUNTER_PREFIX, &k),
            encode_gcounter_materialized(i as u64),
        ),
        1 => (
            key(GCOUNTER_STATE_PREFIX, &k),
            encode_gcounter_state(&GCounterState {
                counts: [(node(i), i as u64), (node(i + 1), 3)]
                    .into_iter()
                    .collect(),
            })
            .unwrap(),
        ),
        2 => (
            key(PNCOUNTER_PREFIX, &k),
            encode_pncounter_materialized(i as i64 - 5),
        ),
        3 => (
            key(PNCOUNTER_STATE_PREFIX, &k),
            encode_pncounter_state(&PNCounterState {
                positive: GCounterState {
                    counts: [(node(i), 10)].into_iter().collect(),
                },
                negative: GCounterState {
                    counts: [(node(i), 4)].into_iter().collect(),
                },
            })
            .unwrap(),
        ),
        4 => (
            key(LWW_REGISTER_PREFIX, &k),
            format!("value-{i}").into_bytes(),
        ),
        5 => (
            key(LWW_REGISTER_STATE_PREFIX, &k),
            encode_lww_register_state(&LwwRegisterState {
                value: format!("value-{i}").into_bytes(),
                timestamp_ms: i as u64,
                writer: node(i),
            })
            .unwrap(),
        ),
        6 => (
            key(LWW_MAP_PREFIX, &k),
            encode_lww_map_materialized(&[("region".into(), b"eu".to_vec())]).unwrap(),
        ),
        7 => (
            key(LWW_MAP_STATE_PREFIX, &k),
            encode_lww_map_state(&LwwMapState {
                entries: [(
                    "region".to_string(),
                    LwwMapEntry {
                        value: Some(b"eu".to_vec()),
                        timestamp_ms: 1,
                        writer: node(i),
                    },
                )]
                .into_iter()
                .collect(),
            })
            .unwrap(),
        ),
        8 => (
            key(ORSET_PREFIX, &k),
            encode_orset_materialized(&["blue".into()]).unwrap(),
        ),
        9 => (
            key(ORSET_STATE_PREFIX, &k),
            encode_orset_state(&ORSetState {
                adds: [("blue".to_string(), ["t1".to_string()].into_iter().collect())]
                    .into_iter()
                    .collect(),
                removes: Default::default(),
            })
            .unwrap(),
        ),
        10 => (
            key(RGA_PREFIX, &k),
            encode_rga_materialized(&[b"hello".to_vec()]).unwrap(),
        ),
        11 => {
            let mut s = RgaState::default();
            s.elements.insert(
                "e1".into(),
                RgaElement {
                    id: "e1".into(),
                    parent: None,
                    value: b"hello".to_vec(),
                },
            );
            (key(RGA_STATE_PREFIX, &k), encode_rga_state(&s).unwrap())
        }
        12 => (key(SEEN_OP_PREFIX, &k), encode_seen_op(i as u64)),
        _ => {
            let op = Op::new(
                k.clone(),
                node(i),
                OpKind::GCounterIncrement {
                    key: "visits".into(),
                    increment: 1,
                },
            );
            (
                key(OP_LOG_PREFIX, &k),
                encode_op_log(i as u64, &op).unwrap(),
            )
        }
    }
}

fn build(path: &Path, n: usize) {
    let store = strata_sled::SledStore::open_store(path).unwrap();
    let mut batch = Batch::new();
    for i in 0..n {
        let (k, v) = record(i % 14, i);
        batch.push(strata_store::Mutation::Set { key: k, value: v });
        if batch.mutations().len() == 10_000 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

/// The baseline: scan every table in pages and decode every payload with the same decoder.
fn raw_scan(store: &Store) -> u64 {
    let limits = ScanLimits::new(batch_env(), 4 << 20).unwrap();
    let mut n = 0u64;
    for t in numax::catalog().tables() {
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let page = store.scan(t.prefix(), cursor.as_deref(), limits).unwrap();
            for r in &page.records {
                t.decode(&r.key, &r.value).unwrap();
                n += 1;
            }
            match page.cursor() {
                Some(c) if page.more => cursor = Some(c.to_vec()),
                _ => break,
            }
        }
    }
    n
}

fn reset_headers(store: &Store) {
    let mut b = Batch::new();
    for (_, name, _) in numax::NUMAX_TABLES {
        b = b.delete(header_key(name));
    }
    store.apply(b).unwrap();
}

fn certify(store: &Store) -> u64 {
    let report = Migrator::new(Registry::numax())
        .unwrap()
        .run(store)
        .unwrap();
    report.tables.iter().map(|t| t.records).sum()
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Child role: run one operation on the datastore and print `records vmhwm_kib`.
fn child(role: &str, db: &Path) {
    let store = strata_sled::SledStore::open_existing(db)
        .unwrap()
        .into_store();
    let n = match role {
        "raw" => raw_scan(&store),
        "migrate" => {
            reset_headers(&store);
            certify(&store)
        }
        other => panic!("unknown role {other}"),
    };
    println!("ROLE={role} {n} {}", vm_hwm_kib());
}

fn run_child(role: &str, db: &Path) -> (u64, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .env("STRATA_BENCH_ROLE", role)
        .env("STRATA_BENCH_DB", db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{role} child failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("ROLE="))
        .unwrap_or_else(|| panic!("no result from {role}: {text}"));
    let mut parts = line.split_whitespace();
    // Check the child ran the role we asked for.
    assert_eq!(parts.next(), Some(format!("ROLE={role}").as_str()));
    let n = parts.next().unwrap().parse().unwrap();
    let kib = parts.next().unwrap().parse().unwrap();
    (n, kib)
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    if let (Ok(role), Ok(db)) = (
        std::env::var("STRATA_BENCH_ROLE"),
        std::env::var("STRATA_BENCH_DB"),
    ) {
        child(&role, Path::new(&db));
        return;
    }
    // `cargo test` runs benches with `--test`/no `--bench`: skip the heavy work then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("certify bench: pass --bench (cargo bench) to run");
        return;
    }
    let n = records_env();
    let dir = tempfile::tempdir().unwrap();
    let small_db: PathBuf = dir.path().join("small");
    let big_db: PathBuf = dir.path().join("big");
    eprintln!("building {} and {n} legacy records ...", n / 10);
    build(&small_db, n / 10);
    build(&big_db, n);

    // Throughput (one process, same data, interleaved rounds).
    {
        let store = strata_sled::SledStore::open_existing(&big_db)
            .unwrap()
            .into_store();
        let (mut best_raw, mut best_cert) = (Duration::MAX, Duration::MAX);
        // Warm-up pass (page cache, sled's background work after the bulk load).
        raw_scan(&store);
        for round in 0..4 {
            // Alternate the order so neither side always runs on a warmer cache.
            for which in [round % 2, 1 - round % 2] {
                if which == 0 {
                    let t = Instant::now();
                    assert_eq!(raw_scan(&store), n as u64);
                    best_raw = best_raw.min(t.elapsed());
                } else {
                    reset_headers(&store);
                    let t = Instant::now();
                    assert_eq!(certify(&store), n as u64);
                    best_cert = best_cert.min(t.elapsed());
                }
            }
        }
        let (r, c) = (rate(n as u64, best_raw), rate(n as u64, best_cert));
        println!(
            "certification throughput, {n} legacy records (14 tables, sled), batches of {} records / 4 MiB:",
            batch_env()
        );
        println!(
            "  raw scan + decode : {:>8.3} s  {:>12.0} records/s",
            best_raw.as_secs_f64(),
            r
        );
        println!(
            "  strata certify    : {:>8.3} s  {:>12.0} records/s",
            best_cert.as_secs_f64(),
            c
        );
        println!("  ratio certify/raw : {:>8.3}x  (target >= 0.9x)", c / r);
    }

    // Peak RSS in separate child processes.
    println!("peak RSS (VmHWM, separate child processes):");
    let mut overheads = Vec::new();
    for (label, db) in [(n / 10, &small_db), (n, &big_db)] {
        let (rn, raw) = run_child("raw", db);
        let (mn, mig) = run_child("migrate", db);
        assert_eq!((rn, mn), (label as u64, label as u64));
        let over = mig as i64 - raw as i64;
        overheads.push(over);
        println!(
            "  {label:>9} records: raw {:>8.1} MiB  migrate {:>8.1} MiB  strata adds {:>6.1} MiB (target <= 16 MiB)",
            raw as f64 / 1024.0,
            mig as f64 / 1024.0,
            over as f64 / 1024.0
        );
    }
    println!(
        "  growth of the overhead from {} to {n} records: {:.1} MiB",
        n / 10,
        (overheads[1] - overheads[0]) as f64 / 1024.0
    );
}
