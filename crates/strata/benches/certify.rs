//! Certification throughput and peak RSS of a legacy v0→v1 migration.
//!
//! ```sh
//! cargo bench -p strata --bench certify
//! # smaller: STRATA_BENCH_RECORDS=200000 cargo bench -p strata --bench certify
//! # batch size (default 512): STRATA_BENCH_MAX_RECORDS=4096; rounds (default 4): STRATA_BENCH_ROUNDS=8
//! ```
//!
//! 1. Builds two legacy (header-less) sled datastores of N/10 and N records (default
//!    N = 1M) spread evenly over the 14 Numax tables, written through `strata_sled`.
//! 2. Throughput at N/10 and at N, measured in one run on the same data:
//!    * the baseline: a **raw sled scan** (`sled::Tree::range` from every table prefix to
//!      its last key, the datastore opened with `sled` directly and the same page-cache
//!      capacity), every payload decoded in place with the same Numax decoders;
//!    * for reference, the same decode over strata's paged `KvRead::scan` (owned pages of
//!      the batch size), no writes;
//!    * `Migrator` certification (lease, checkpoint batches, header writes, final flush).
//!
//!    sled allows one open handle per datastore, so every timed run opens its own handle
//!    (not timed). After a warm-up scan, the sides run `STRATA_BENCH_ROUNDS` rounds
//!    interleaved in rotating order; the fastest of each is kept and min/median/max shown.
//!    Headers are deleted (and flushed, untimed) before each certification so it
//!    certifies everything.
//! 3. Peak RSS: the raw scan and the migration each run in a fresh child process (this
//!    binary re-executed with `STRATA_BENCH_ROLE`), which reports `VmHWM` from
//!    `/proc/self/status`; strata's overhead is migrate − raw. Measured at N/10 and N.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use strata::layout::header::header_key;
use strata::migrate::{Migrator, Registry};
use strata::numax::{self, wire};
use strata::pass::{PassLimits, DEFAULT_MAX_BYTES};
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

/// Opens the datastore directly with sled (the raw baseline), with the same page-cache
/// capacity `strata_sled` uses. sled releases its file lock shortly after the previous
/// handle is dropped, so opening retries for a moment.
fn open_raw(path: &Path) -> sled::Db {
    let config = sled::Config::new()
        .path(path)
        .cache_capacity(strata_sled::SledOptions::DEFAULT_CACHE_CAPACITY);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match config.open() {
            Ok(db) => return db,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("cannot open {}: {e}", path.display()),
        }
    }
}

fn open_store(path: &Path) -> Store {
    strata_sled::SledStore::open_existing(path)
        .unwrap()
        .into_store()
}

/// The baseline: a raw sled scan of every table prefix, each payload decoded in place (no
/// copy) with the same decoder certification uses. `range(prefix..)` stopped at the first
/// key outside the prefix is the cheapest raw form (`scan_prefix` compares every key with
/// an upper bound: about 5% more instructions per record).
fn raw_scan(db: &sled::Db) -> u64 {
    let mut n = 0u64;
    for t in numax::catalog().tables() {
        for item in db.range(t.prefix()..) {
            let (k, v) = item.unwrap();
            if !k.starts_with(t.prefix()) {
                break;
            }
            t.decode(&k, &v).unwrap();
            n += 1;
        }
    }
    n
}

/// Reference: the same decode over strata's paged `KvRead::scan` (owned records).
fn paged_scan(store: &Store) -> u64 {
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
    store.flush().unwrap();
}

fn certify(store: &Store) -> u64 {
    let report = Migrator::new(Registry::numax())
        .unwrap()
        .limits(PassLimits::new(batch_env(), DEFAULT_MAX_BYTES).unwrap())
        .run(store)
        .unwrap();
    report.tables.iter().map(|t| t.records).sum()
}

/// Opens `db` for `side` (untimed) and times one run of it.
fn timed(side: Side, db: &Path) -> (u64, Duration) {
    match side {
        Side::Raw => {
            let raw = open_raw(db);
            let t = Instant::now();
            (raw_scan(&raw), t.elapsed())
        }
        Side::Paged => {
            let store = open_store(db);
            let t = Instant::now();
            (paged_scan(&store), t.elapsed())
        }
        Side::Certify => {
            let store = open_store(db);
            reset_headers(&store);
            let t = Instant::now();
            (certify(&store), t.elapsed())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Raw,
    Paged,
    Certify,
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Child role: run one operation on the datastore and print `records vmhwm_kib seconds`.
fn child(role: &str, db: &Path) {
    let side = match role {
        "raw" => Side::Raw,
        "paged" => Side::Paged,
        "migrate" => Side::Certify,
        other => panic!("unknown role {other}"),
    };
    let (n, d) = timed(side, db);
    println!("ROLE={role} {n} {} {:.4}", vm_hwm_kib(), d.as_secs_f64());
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

/// `min / median / max` seconds of the rounds.
fn spread(times: &[Duration]) -> String {
    let mut t = times.to_vec();
    t.sort();
    format!(
        "{:.3} / {:.3} / {:.3} s",
        t[0].as_secs_f64(),
        t[t.len() / 2].as_secs_f64(),
        t[t.len() - 1].as_secs_f64()
    )
}

/// Throughput on one datastore of `n` records, `rounds` rounds of every side, interleaved
/// in rotating order. Returns certify/raw of the fastest runs.
fn throughput(db: &Path, n: usize, rounds: usize) -> f64 {
    // Warm-up (the OS page cache, sled's background work after the bulk load).
    assert_eq!(timed(Side::Raw, db).0, n as u64);
    let sides = [Side::Raw, Side::Paged, Side::Certify];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for round in 0..rounds {
        // Rotate the order so no side always runs right after the same other one.
        for k in 0..sides.len() {
            let i = (round + k) % sides.len();
            let (records, d) = timed(sides[i], db);
            assert_eq!(records, n as u64, "{:?}", sides[i]);
            times[i].push(d);
        }
    }
    let best: Vec<Duration> = times.iter().map(|t| *t.iter().min().unwrap()).collect();
    println!(
        "certification throughput, {n} legacy records (14 tables, sled), batches of {} records / 4 MiB, best of {rounds} (min / median / max):",
        batch_env()
    );
    let labels = [
        "raw sled scan + decode",
        "KvRead::scan pages + decode",
        "strata certify",
    ];
    for ((label, b), t) in labels.iter().zip(&best).zip(&times) {
        println!(
            "  {label:<28}: {:>7.3} s  {:>10.0} records/s  ({})",
            b.as_secs_f64(),
            rate(n as u64, *b),
            spread(t)
        );
    }
    let ratio = best[0].as_secs_f64() / best[2].as_secs_f64();
    println!(
        "  ratio certify/raw           : {ratio:>7.3}x  (target >= 0.9x; paged scan/raw {:.3}x)",
        best[0].as_secs_f64() / best[1].as_secs_f64()
    );
    // Paired per round (the sides of one round ran back to back): robust to load drifting
    // between rounds on a shared machine.
    let mut paired: Vec<f64> = times[0]
        .iter()
        .zip(&times[2])
        .map(|(r, c)| r.as_secs_f64() / c.as_secs_f64())
        .collect();
    paired.sort_by(f64::total_cmp);
    println!(
        "  per-round certify/raw       : median {:.3}x  (min {:.3}x, max {:.3}x)",
        paired[paired.len() / 2],
        paired[0],
        paired[paired.len() - 1]
    );
    ratio
}

fn main() {
    if let (Ok(role), Ok(db)) = (
        std::env::var("STRATA_BENCH_ROLE"),
        std::env::var("STRATA_BENCH_DB"),
    ) {
        if role == "build" {
            // Keep a datastore around for profiling the child roles.
            build(Path::new(&db), records_env());
        } else {
            child(&role, Path::new(&db));
        }
        return;
    }
    // `cargo test` runs benches with `--test`/no `--bench`: skip the heavy work then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("certify bench: pass --bench (cargo bench) to run");
        return;
    }
    let n = records_env();
    let rounds = std::env::var("STRATA_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let small_db: PathBuf = dir.path().join("small");
    let big_db: PathBuf = dir.path().join("big");
    eprintln!("building {} and {n} legacy records ...", n / 10);
    build(&small_db, n / 10);
    build(&big_db, n);

    throughput(&small_db, n / 10, rounds);
    throughput(&big_db, n, rounds);

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
