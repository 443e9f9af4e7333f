//! PostgreSQL certification and multi-process write benchmarks (harness = false, issue 10).
//!
//! ```text
//! STRATA_PG_URL=postgresql://postgres@127.0.0.1:55443/postgres cargo bench -p strata-bench --bench pg_certify
//! STRATA_BENCH_RECORDS=1000000 ...     # certification size (default 100,000)
//! STRATA_BENCH_ROUNDS=3 ...            # interleaved certification rounds (best kept)
//! STRATA_BENCH_WRITES=2000 ...         # collection puts per writer process
//! STRATA_BENCH_ONLY=certify|writers    # one of the two parts
//! STRATA_BENCH_MAX_RECORDS=512 ...     # explicit migrator record limit (default: the
//!                                      # library's, 4,096 for certification)
//! STRATA_BENCH_PROFILE=1 ...           # time per kind of store call of each certification
//! ```
//!
//! 1. **Certification** of N legacy Numax records (spread over the 14 tables) vs a raw
//!    paged scan: `SELECT k, v FROM t WHERE k > $cursor AND k < $end ORDER BY k LIMIT 512`
//!    per table prefix on a plain `postgres::Client`, every payload decoded with the same
//!    Numax decoders. strata certifies with its default limits (checkpoint batch per page,
//!    header per table). Target (issue 10): strata ≥ 0.8× the raw scan's throughput.
//! 2. **Writer processes**: 1, 2 and 4 child processes (this binary re-executed), each
//!    putting `STRATA_BENCH_WRITES` documents (its own keys) through a collection on one
//!    store; total puts per second, and the same with raw `INSERT … ON CONFLICT`.
//!
//! Without `STRATA_PG_URL` the bench prints that it was skipped and measures nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde::{Deserialize, Serialize};
use std::process::Command;
use std::time::{Duration, Instant};
use strata::layout::header::header_key;
use strata::migrate::{Migrator, Registry};
use strata::numax::{self, wire};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvWrite, Mutation, Store};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn with_table(url: &str, table: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}strata_table={table}")
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

fn build(store: &Store, n: usize) {
    let mut batch = Batch::new();
    for i in 0..n {
        let (k, v) = record(i % 14, i);
        batch.push(Mutation::Set { key: k, value: v });
        if batch.mutations().len() == 5_000 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
}

/// The smallest key above every key that starts with `prefix` (`None`: unbounded).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// The baseline: a paged, ordered scan of every table prefix over raw SQL, each payload
/// decoded with the certification's decoder.
fn raw_scan(client: &mut postgres::Client, table: &str) -> u64 {
    let page = client
        .prepare(&format!(
            r#"SELECT k, v FROM "{table}" WHERE k > $1 AND k < $2 ORDER BY k LIMIT 512"#
        ))
        .unwrap();
    let first = client
        .prepare(&format!(
            r#"SELECT k, v FROM "{table}" WHERE k >= $1 AND k < $2 ORDER BY k LIMIT 512"#
        ))
        .unwrap();
    let mut n = 0u64;
    for t in numax::catalog().tables() {
        let end = successor(t.prefix()).unwrap();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let rows = match &cursor {
                None => client.query(&first, &[&t.prefix(), &end]).unwrap(),
                Some(c) => client.query(&page, &[c, &end]).unwrap(),
            };
            let full = rows.len() == 512;
            for row in &rows {
                let k: &[u8] = row.get(0);
                let v: &[u8] = row.get(1);
                t.decode(k, v).unwrap();
                n += 1;
            }
            match rows.last() {
                Some(last) if full => cursor = Some(last.get::<_, Vec<u8>>(0)),
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
    let mut m = Migrator::new(Registry::numax()).unwrap();
    if let Ok(n) = std::env::var("STRATA_BENCH_MAX_RECORDS") {
        m = m.limits(strata::pass::PassLimits::new(n.parse().unwrap(), 4 << 20).unwrap());
    }
    let report = m.run(store).unwrap();
    report.tables.iter().map(|t| t.records).sum()
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn certification(url: &str) {
    let n = env_usize("STRATA_BENCH_RECORDS", 100_000);
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 3).max(1);
    let table = format!("strata_bench_cert_{}", std::process::id());
    let store = strata_postgres::connect_store(&with_table(url, &table)).unwrap();
    let t = Instant::now();
    build(&store, n);
    let mut raw = postgres::Client::connect(url, postgres::NoTls).unwrap();
    raw.batch_execute(&format!(r#"ANALYZE "{table}""#)).unwrap();
    println!(
        "certification: {n} records built in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Warm-up: both read everything once.
    raw_scan(&mut raw, &table);
    let (mut best_raw, mut best_cert) = (Duration::MAX, Duration::MAX);
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let t = Instant::now();
                let got = raw_scan(&mut raw, &table);
                best_raw = best_raw.min(t.elapsed());
                assert_eq!(got, n as u64);
            } else {
                reset_headers(&store);
                let t = Instant::now();
                let got = if std::env::var_os("STRATA_BENCH_PROFILE").is_some() {
                    let timed = std::sync::Arc::new(Timed {
                        inner: strata_postgres::PgStore::connect(&with_table(url, &table)).unwrap(),
                        t: Default::default(),
                    });
                    let s = Store::from_arc(timed.clone());
                    let t0 = Instant::now();
                    let got = certify(&s);
                    println!(
                        "profile: total {:?} get/scan/apply {:?}",
                        t0.elapsed(),
                        timed.t.lock().unwrap()
                    );
                    got
                } else {
                    certify(&store)
                };
                best_cert = best_cert.min(t.elapsed());
                assert_eq!(got, n as u64);
            }
        }
    }
    let (r, c) = (rate(n as u64, best_raw), rate(n as u64, best_cert));
    println!(
        "certification: raw paged scan + decode {:.3} s ({r:.0} rec/s), strata certify {:.3} s ({c:.0} rec/s), throughput ratio {:.2}× (target ≥ 0.8×), best of {rounds}",
        best_raw.as_secs_f64(),
        best_cert.as_secs_f64(),
        c / r
    );
    drop(store);
    raw.batch_execute(&format!(r#"DROP TABLE IF EXISTS "{table}""#))
        .unwrap();
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Account {
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
    tags: Vec<String>,
    active: bool,
}

fn account(i: usize, serial: usize) -> Account {
    Account {
        id: format!("a{i:07}"),
        owner: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: serial as i64,
        tags: vec!["alpha".into(), "beta".into(), "gamma".into()],
        active: true,
    }
}

/// Child process: `writes` puts of its own keys (`w<writer>-…`, 100 keys round-robin),
/// through strata or raw SQL; prints the elapsed seconds after a start signal on stdin.
fn writer_child(url: &str, table: &str, writer: usize, raw: bool) {
    let writes = env_usize("STRATA_BENCH_WRITES", 2000);
    let keys: Vec<String> = (0..100).map(|i| format!("w{writer}-{i:03}")).collect();
    let mut line = String::new();
    if raw {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        let ins = client
            .prepare(&format!(
                r#"INSERT INTO "{table}" (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"#
            ))
            .unwrap();
        println!("ready");
        std::io::stdin().read_line(&mut line).unwrap();
        let t = Instant::now();
        for n in 0..writes {
            let key = &keys[n % keys.len()];
            let bytes = serde_json::to_vec(&account(n % 100, n)).unwrap();
            client.execute(&ins, &[&key.as_bytes(), &bytes]).unwrap();
        }
        println!("{}", t.elapsed().as_secs_f64());
    } else {
        let store = strata_postgres::connect_store(&with_table(url, table)).unwrap();
        let db = Database::builder(store).open().unwrap();
        let c = db
            .collection::<Account>("acc", CollectionOptions::new())
            .unwrap();
        c.put(&keys[0], &account(0, 0)).unwrap();
        println!("ready");
        std::io::stdin().read_line(&mut line).unwrap();
        let t = Instant::now();
        for n in 0..writes {
            c.put(&keys[n % keys.len()], &account(n % 100, n)).unwrap();
        }
        println!("{}", t.elapsed().as_secs_f64());
    }
}

/// Runs `procs` writer children at once; total puts per second (all writes over the
/// slowest child's time).
fn run_writers(table: &str, procs: usize, raw: bool) -> f64 {
    use std::io::{BufRead, BufReader, Write};
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for w in 0..procs {
        let child = Command::new(&exe)
            .env("STRATA_BENCH_ROLE", if raw { "raw" } else { "strata" })
            .env("STRATA_BENCH_TABLE", table)
            .env("STRATA_BENCH_WRITER", w.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push(child);
    }
    let mut outs = Vec::new();
    for c in &mut children {
        let mut out = BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        outs.push(out);
    }
    for c in &mut children {
        writeln!(c.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut slowest = 0f64;
    for (c, mut out) in children.iter_mut().zip(outs) {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        slowest = slowest.max(line.trim().parse::<f64>().unwrap());
        assert!(c.wait().unwrap().success());
    }
    let writes = env_usize("STRATA_BENCH_WRITES", 2000);
    (procs * writes) as f64 / slowest
}

fn writers(url: &str) {
    let table = format!("strata_bench_w_{}", std::process::id());
    let raw_table = format!("{table}_raw");
    // Creates the store table and the collection's catalog entry once.
    {
        let store = strata_postgres::connect_store(&with_table(url, &table)).unwrap();
        let db = Database::builder(store).open().unwrap();
        db.collection::<Account>("acc", CollectionOptions::new())
            .unwrap();
    }
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            r#"CREATE TABLE IF NOT EXISTS "{raw_table}" (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)"#
        ))
        .unwrap();
    let writes = env_usize("STRATA_BENCH_WRITES", 2000);
    println!("writer processes: {writes} puts each (100 keys per process, round-robin)");
    let mut base = None;
    for procs in [1, 2, 4] {
        let s = run_writers(&table, procs, false);
        let r = run_writers(&raw_table, procs, true);
        let b = *base.get_or_insert(s);
        println!(
            "  {procs} process(es): strata {s:.0} puts/s ({:.2}× of 1 process), raw SQL {r:.0} puts/s, strata/raw time ratio {:.2}×",
            s / b,
            r / s
        );
    }
    admin
        .batch_execute(&format!(
            r#"DROP TABLE IF EXISTS "{raw_table}"; DROP TABLE IF EXISTS "{table}""#
        ))
        .unwrap();
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Ok(url) = std::env::var("STRATA_PG_URL") else {
        println!("pg_certify: skipped (STRATA_PG_URL is not set)");
        return;
    };
    if let Ok(role) = std::env::var("STRATA_BENCH_ROLE") {
        let table = std::env::var("STRATA_BENCH_TABLE").unwrap();
        let writer = env_usize("STRATA_BENCH_WRITER", 0);
        writer_child(&url, &table, writer, role == "raw");
        return;
    }
    let only = std::env::var("STRATA_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "certify" {
        certification(&url);
    }
    if only.is_empty() || only == "writers" {
        writers(&url);
    }
}

/// Profiling aid (`STRATA_BENCH_PROFILE=1`): time spent in each kind of store call
/// (get, scan, apply, scan_visit — the visit's own work included) of a certification.
#[derive(Debug)]
struct Timed {
    inner: strata_postgres::PgStore,
    t: std::sync::Mutex<[(Duration, u64); 4]>,
}
impl Timed {
    fn add(&self, i: usize, d: Duration) {
        let mut g = self.t.lock().unwrap();
        g[i].0 += d;
        g[i].1 += 1;
    }
}
impl strata_store::KvRead for Timed {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        let t = Instant::now();
        let r = self.inner.get(key);
        self.add(0, t.elapsed());
        r
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        let t = Instant::now();
        let r = self.inner.scan_visit(prefix, after, limits, visit);
        self.add(3, t.elapsed());
        r
    }
}
impl KvWrite for Timed {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let t = Instant::now();
        let r = self.inner.read_modify_write(reads, decide);
        self.add(2, t.elapsed());
        r
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}
impl strata_store::Backend for Timed {
    fn name(&self) -> &'static str {
        "timed"
    }
}
