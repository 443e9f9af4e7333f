//! Issue 28 figures (harness = false): store `put` (one-set batch) and `get` straight to
//! the server against the same through a private PgBouncer in session mode and in
//! transaction mode (`strata_pooler=transaction`), interleaved rounds, best round of each;
//! then the time from a primary's death (immediate stop) to the first successful write
//! through a multi-host URL, on a private primary + synchronous standby
//! (`testing::HaPair`), several failovers.
//!
//! ```text
//! STRATA_PG_URL=postgresql://postgres@127.0.0.1:55440/postgres \
//!   cargo bench -p strata-postgres --bench pg_pooler
//! STRATA_BENCH_OPS=2000 STRATA_BENCH_ROUNDS=3 STRATA_BENCH_FAILOVERS=3   # sizes
//! ```
//!
//! Without a loopback `STRATA_PG_URL`, `pgbouncer` or the server binaries the parts that
//! need them print that they were skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};
use strata_postgres::testing::{loopback_port, HaPair, Pgbouncer};
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, KvRead, KvWrite};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let Some(url) = std::env::var("STRATA_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        println!("pg_pooler: skipped (no STRATA_PG_URL)");
        return;
    };
    let ops = env("STRATA_BENCH_OPS", 2000);
    let rounds = env("STRATA_BENCH_ROUNDS", 3);
    pooler(&url, ops, rounds);
    failover(env("STRATA_BENCH_FAILOVERS", 3));
}

fn pooler(url: &str, ops: usize, rounds: usize) {
    let Some(upstream) = loopback_port(url) else {
        println!("pooler: skipped (STRATA_PG_URL is not a loopback URL)");
        return;
    };
    let (Ok(Some(session)), Ok(Some(transaction))) = (
        Pgbouncer::start_for_test("pg_pooler bench", upstream, "session"),
        Pgbouncer::start_for_test("pg_pooler bench", upstream, "transaction"),
    ) else {
        println!("pooler: skipped (no pgbouncer)");
        return;
    };
    let table = strata_postgres::testing::scratch_table("bench_pooler");
    let _owner = PgStore::connect_with(
        url,
        PgOptions::new()
            .table(&table)
            .dangerous_drop_table_on_drop(),
    )
    .unwrap();
    let contenders = [
        ("direct", url.to_string()),
        (
            "direct, unnamed statements (strata_pooler=transaction)",
            format!(
                "{url}{}strata_pooler=transaction",
                if url.contains('?') { '&' } else { '?' }
            ),
        ),
        (
            "pgbouncer session",
            format!("{}?strata_pooler=none", session.url()),
        ),
        (
            "pgbouncer transaction",
            format!(
                "{}?strata_pooler=transaction&strata_direct=127.0.0.1:{upstream}",
                transaction.url()
            ),
        ),
    ];
    let stores: Vec<PgStore> = contenders
        .iter()
        .map(|(_, u)| PgStore::connect_with(u, PgOptions::new().table(&table)).unwrap())
        .collect();
    let value = vec![b'x'; 200];
    let mut best = vec![[f64::MAX; 2]; stores.len()];
    for _ in 0..rounds {
        for (i, store) in stores.iter().enumerate() {
            let started = Instant::now();
            for n in 0..ops {
                let key = format!("k/{i}/{:04}", n % 500).into_bytes();
                store.apply(Batch::new().set(key, value.clone())).unwrap();
            }
            let put = started.elapsed().as_secs_f64() * 1e6 / ops as f64;
            let started = Instant::now();
            for n in 0..ops {
                let key = format!("k/{i}/{:04}", n % 500).into_bytes();
                assert!(store.get(&key).unwrap().is_some());
            }
            let get = started.elapsed().as_secs_f64() * 1e6 / ops as f64;
            best[i][0] = best[i][0].min(put);
            best[i][1] = best[i][1].min(get);
        }
    }
    println!("| path | put µs/op | get µs/op | put vs direct | get vs direct |");
    println!("|---|---|---|---|---|");
    for (i, (name, _)) in contenders.iter().enumerate() {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2}× | {:.2}× |",
            best[i][0],
            best[i][1],
            best[i][0] / best[0][0],
            best[i][1] / best[0][1]
        );
    }
}

fn failover(times: usize) {
    let mut recover = Vec::new();
    for _ in 0..times {
        let Ok(Some(ha)) = HaPair::start_for_test("pg_pooler bench failover") else {
            println!("failover: skipped (no server binaries)");
            return;
        };
        let store =
            PgStore::connect_with(&ha.url(), PgOptions::new().table("bench_failover")).unwrap();
        store
            .apply(Batch::new().set(b"k".to_vec(), b"0".to_vec()))
            .unwrap();
        let died = Instant::now();
        ha.fail_over().unwrap();
        let promoted = died.elapsed();
        let mut failed = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while store
            .apply(Batch::new().set(b"k".to_vec(), b"1".to_vec()))
            .is_err()
        {
            failed += 1;
            assert!(
                Instant::now() < deadline,
                "no write within 60 s of the failover"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let first = died.elapsed();
        println!(
            "failover: promoted after {:.0} ms, first successful write after {:.0} ms ({failed} failed attempts before it)",
            promoted.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3
        );
        recover.push(first);
    }
    recover.sort();
    if let Some(median) = recover.get(recover.len() / 2) {
        println!(
            "failover: median death-to-first-write {:.0} ms over {} runs",
            median.as_secs_f64() * 1e3,
            recover.len()
        );
    }
}
