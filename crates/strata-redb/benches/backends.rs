//! redb vs sled on the same data, in one run: bulk put (batches), single-key put, get,
//! full scan, open, and copy throughput sled → redb (the `strata copy` loop).
//!
//! `cargo bench -p strata-redb --bench backends` (`STRATA_BENCH_RECORDS`, default 100k;
//! 100-byte values; batches of 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

fn records() -> usize {
    std::env::var("STRATA_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
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
}
