//! redb vs sled on the same data, in one run: bulk put (batches), single-key put, get,
//! full scan, open, and copy throughput sled → redb (the `strata copy` loop); then the
//! engine on each backend: certification (`strata migrate` of legacy Numax records),
//! open + validate, current-version collection get, collection put, the eager sweep and
//! durable sync apply.
//!
//! `cargo bench -p strata-bench --bench backends` (`STRATA_BENCH_RECORDS`, default 100k;
//! 100-byte values; batches of 1,000; `STRATA_BENCH_CERT_RECORDS` legacy records to
//! certify, default 100k — 1000000 for the issue's 1M; `STRATA_BENCH_DOCS` documents for
//! get and the sweep, default 20k; `STRATA_BENCH_WRITES` collection puts and sync ops,
//! default 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};
use strata::layout;
use strata::layout::envelope::{self, Envelope};
use strata::migrate::{Migrator, Registry};
use strata::numax::wire::{Op, OpKind};
use strata::ops::sweep::SweepOptions;
use strata::CollectionOptions;
use strata::Database;
use strata::Mode;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};
use strata_sync::SyncManager;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn records() -> usize {
    env("STRATA_BENCH_RECORDS", 100_000)
}

fn key(i: usize) -> Vec<u8> {
    format!("t/{:010}", i.wrapping_mul(2_654_435_761) % 1_000_000_007).into_bytes()
}

fn fill(store: &Store, n: usize) -> Duration {
    let start = Instant::now();
    let mut batch = Batch::new();
    for i in 0..n {
        batch = batch.set(key(i), vec![(i % 251) as u8; 100]);
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
    start.elapsed()
}

fn single_puts(store: &Store, n: usize) -> Duration {
    let start = Instant::now();
    for i in 0..n {
        store
            .apply(Batch::new().set(format!("s/{i:08}").into_bytes(), vec![1u8; 100]))
            .unwrap();
    }
    store.flush().unwrap();
    start.elapsed()
}

fn gets(store: &Store, n: usize) -> Duration {
    let start = Instant::now();
    for i in (0..n).step_by(7) {
        assert!(store.get(&key(i)).unwrap().is_some());
    }
    start.elapsed()
}

fn scan_all(store: &Store) -> (Duration, usize) {
    let start = Instant::now();
    let limits = ScanLimits::new(10_000, 4 << 20).unwrap();
    let (mut cursor, mut total) = (None::<Vec<u8>>, 0);
    loop {
        let page = store.scan(b"t/", cursor.as_deref(), limits).unwrap();
        total += page.records.len();
        if !page.more {
            break;
        }
        cursor = page.cursor().map(<[u8]>::to_vec);
    }
    (start.elapsed(), total)
}

fn copy(from: &Store, to: &Store) -> Duration {
    let start = Instant::now();
    let limits = ScanLimits::new(10_000, 4 << 20).unwrap();
    let mut cursor = None::<Vec<u8>>;
    loop {
        let page = from.scan(b"", cursor.as_deref(), limits).unwrap();
        let next = page.cursor().map(<[u8]>::to_vec);
        let more = page.more;
        let mut batch = Batch::new();
        for r in page.records {
            batch = batch.set(r.key, r.value);
        }
        to.apply(batch).unwrap();
        if !more {
            break;
        }
        cursor = next;
    }
    to.flush().unwrap();
    start.elapsed()
}

// ---------------------------------------------------------------------------------------
// The engine on each backend.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    n: u64,
    #[serde(default)]
    tier: String,
}

fn doc_options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| {
            o.insert("tier".into(), serde_json::json!("basic"));
            Ok(())
        })
}

/// `n` legacy (header-less) gcounter values, as a Numax release wrote them.
fn fill_legacy(store: &Store, n: usize) {
    let mut batch = Batch::new();
    for i in 0..n {
        batch = batch.set(
            format!("__nx/crdt/gcounter/c{i:09}").into_bytes(),
            (i as u64).to_le_bytes().to_vec(),
        );
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

fn certify(store: &Store, n: usize) -> Duration {
    let t = Instant::now();
    let report = Migrator::new(Registry::numax())
        .unwrap()
        .run(store)
        .unwrap();
    let certified: u64 = report.tables.iter().map(|t| t.records).sum();
    assert_eq!(certified, n as u64);
    t.elapsed()
}

fn open_validate(reopen: impl FnOnce() -> Store) -> Duration {
    let t = Instant::now();
    let store = reopen();
    strata::validate::validate_and_init(&store, &strata::numax::catalog()).unwrap();
    t.elapsed()
}

/// `n` documents at payload v1 (behind the eager step), written raw in batches.
fn fill_docs(store: &Store, n: usize) {
    let mut batch = Batch::new();
    for i in 0..n {
        let id = format!("d{i:08}");
        let json = format!(r#"{{"id":"{id}","n":{i}}}"#);
        batch = batch.set(
            layout::keys::doc_key("docs", &id),
            envelope::encode(Envelope::new(1, 1), json.as_bytes()),
        );
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

struct Engine {
    certify: Duration,
    open_validate: Duration,
    sweep: Duration,
    get: Duration,
    put: Duration,
    sync_apply: Duration,
}

fn engine(
    dir: &Path,
    name: &str,
    open: &dyn Fn(&Path) -> Store,
    reopen: &dyn Fn(&Path) -> Store,
    sizes: (usize, usize, usize),
) -> Engine {
    let (cert, docs, writes) = sizes;
    let cert_path = dir.join(format!("cert.{name}"));
    let (certify_d, open_validate_d) = {
        let store = open(&cert_path);
        fill_legacy(&store, cert);
        let d = certify(&store, cert);
        drop(store);
        std::thread::sleep(Duration::from_millis(300)); // sled releases its lock asynchronously
        (d, open_validate(|| reopen(&cert_path)))
    };
    let store = open(&dir.join(format!("docs.{name}")));
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db.collection::<Doc>("docs", doc_options()).unwrap();
    fill_docs(&store, docs);
    let t = Instant::now();
    let report = c.sweep(SweepOptions::new()).unwrap();
    let sweep = t.elapsed();
    assert_eq!(report.rewritten(), docs as u64);
    let t = Instant::now();
    for i in (0..docs).step_by(3) {
        assert!(c.get(&format!("d{i:08}")).unwrap().is_some());
    }
    let get = t.elapsed();
    let t = Instant::now();
    for i in 0..writes {
        let id = format!("p{i:08}");
        c.put(
            &id,
            &Doc {
                id: id.clone(),
                n: i as u64,
                tier: "gold".into(),
            },
        )
        .unwrap();
    }
    let put = t.elapsed();
    drop((c, db, store));
    let sync_store = open(&dir.join(format!("sync.{name}")));
    let sync = SyncManager::open(sync_store).unwrap();
    let t = Instant::now();
    for i in 0..writes {
        let op = Op::new(
            format!("op-{i}"),
            "node-a",
            OpKind::GCounterIncrement {
                key: format!("k{}", i % 64),
                increment: 1,
            },
        );
        sync.apply(&op).unwrap();
    }
    let sync_apply = t.elapsed();
    Engine {
        certify: certify_d,
        open_validate: open_validate_d,
        sweep,
        get,
        put,
        sync_apply,
    }
}

fn sled_open(p: &Path) -> Store {
    strata_sled::SledStore::open_store(p).unwrap()
}

fn redb_open(p: &Path) -> Store {
    strata_redb::RedbStore::create_store(p).unwrap()
}

fn row(what: &str, redb: Duration, sled: Duration, unit: &str, n: usize) {
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "| {what} | {:.0} {unit}/s | {:.0} {unit}/s | {:.2}x |",
        rate(redb),
        rate(sled),
        sled.as_secs_f64() / redb.as_secs_f64()
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = records();
    let dir = tempfile::tempdir().unwrap();
    let (rp, sp) = (dir.path().join("b.redb"), dir.path().join("b.sled"));
    println!("{n} records of 100 bytes, batches of 1,000");
    println!("| operation | redb | sled | redb speed vs sled |");
    println!("|---|---|---|---|");
    let (redb, sled) = (redb_open(&rp), sled_open(&sp));
    row("bulk put", fill(&redb, n), fill(&sled, n), "records", n);
    let singles = 2_000;
    row(
        "single-key put (durable on return for redb)",
        single_puts(&redb, singles),
        single_puts(&sled, singles),
        "puts",
        singles,
    );
    row("get", gets(&redb, n), gets(&sled, n), "gets", n.div_ceil(7));
    let ((rs, rn), (ss, sn)) = (scan_all(&redb), scan_all(&sled));
    assert_eq!((rn, sn), (n, n));
    row("full scan", rs, ss, "records", n);
    drop((redb, sled));
    std::thread::sleep(Duration::from_millis(300)); // sled releases its lock asynchronously
    let t = Instant::now();
    let redb = strata_redb::RedbStore::open_existing(&rp)
        .unwrap()
        .into_store();
    let ro = t.elapsed();
    let t = Instant::now();
    let sled = strata_sled::SledStore::open_existing(&sp)
        .unwrap()
        .into_store();
    let so = t.elapsed();
    row("open", ro, so, "opens", 1);
    drop(redb);
    let target = redb_open(&dir.path().join("copy.redb"));
    let c = copy(&sled, &target);
    println!(
        "copy sled -> redb: {:.0} records/s ({} records in {:.2} s)",
        (n + singles) as f64 / c.as_secs_f64(),
        n + singles,
        c.as_secs_f64()
    );
    drop((sled, target));
    std::thread::sleep(Duration::from_millis(300));

    let sizes = (
        env("STRATA_BENCH_CERT_RECORDS", 100_000),
        env("STRATA_BENCH_DOCS", 20_000),
        env("STRATA_BENCH_WRITES", 1_000),
    );
    let (cert, docs, writes) = sizes;
    let redb_reopen = |p: &Path| {
        strata_redb::RedbStore::open_existing(p)
            .unwrap()
            .into_store()
    };
    let sled_reopen = |p: &Path| {
        strata_sled::SledStore::open_existing(p)
            .unwrap()
            .into_store()
    };
    let r = engine(dir.path(), "redb", &redb_open, &redb_reopen, sizes);
    let s = engine(dir.path(), "sled", &sled_open, &sled_reopen, sizes);
    println!();
    println!("engine: {cert} legacy records certified, {docs} documents, {writes} puts / sync ops");
    println!("| operation | redb | sled | redb speed vs sled |");
    println!("|---|---|---|---|");
    row(
        "certification (`strata migrate`)",
        r.certify,
        s.certify,
        "records",
        cert,
    );
    println!(
        "| open + validate ({cert} records) | {:.1} ms | {:.1} ms | {:.2}x |",
        r.open_validate.as_secs_f64() * 1e3,
        s.open_validate.as_secs_f64() * 1e3,
        s.open_validate.as_secs_f64() / r.open_validate.as_secs_f64()
    );
    row("eager sweep", r.sweep, s.sweep, "docs", docs);
    row(
        "current-version get",
        r.get,
        s.get,
        "gets",
        docs.div_ceil(3),
    );
    row(
        "collection put (durable on return for redb)",
        r.put,
        s.put,
        "puts",
        writes,
    );
    row(
        "sync apply (one op per call)",
        r.sync_apply,
        s.sync_apply,
        "ops",
        writes,
    );
}
