//! Server work per statement shape (issue 24, session 20): the one-statement write and
//! its variants against the raw upsert, each statement prepared on its own connection
//! (the backends' session settings, `synchronous_commit = off`) and run with the
//! parameters a collection put sends (a 150-byte document, two guard keys required
//! absent, three key locks): N puts of new ids, then N overwrites of 500 of them, each
//! requiring the value written before. Prints, per statement file, the backend's CPU
//! time per put (`/proc/<pid>/schedstat`: the server must run on this machine) and the
//! wall time, best of the rounds.
//!
//! ```text
//! python3 scripts/pg_statement_variants.py /tmp/variants   # writes the .sql files
//! URL=postgresql://postgres@127.0.0.1:55471/postgres N=4000 ROUNDS=3 \
//!   cargo run --release -p strata-bench --example pg_statement_cost -- /tmp/variants/raw.sql /tmp/variants/one.sql …
//! ```
//!
//! A statement file names its table `"acc"`; each gets its own table. A file whose name
//! contains `fold` gets the document's key and required value appended to the guard
//! arrays on overwrites (the session-20 statement's parameters). For instruction counts,
//! point `URL` at a throwaway cluster started under
//! `valgrind --tool=callgrind --trace-children=yes` (BENCHMARKS.md, issue 24, session 20):
//! the lines `pid <pid> <file>` on stderr name each statement's backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use postgres::types::{ToSql, Type};
use std::time::Instant;

const TYPES: [Type; 11] = [
    Type::BYTEA,
    Type::BYTEA,
    Type::BOOL,
    Type::BYTEA,
    Type::BYTEA_ARRAY,
    Type::BYTEA_ARRAY,
    Type::INT8,
    Type::INT8,
    Type::INT4,
    Type::INT4_ARRAY,
    Type::BOOL_ARRAY,
];

fn cpu_ns(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn value(i: usize, generation: usize) -> Vec<u8> {
    format!(
        "{{\"id\":\"a{i:07}\",\"owner\":\"Owner Number {i}\",\"email\":\"owner{i}@example.com\",\"balance_cents\":{},\"tags\":[\"alpha\",\"beta\",\"gamma\"],\"active\":true,\"gen\":{generation}}}",
        i * 100
    )
    .into_bytes()
}

struct Contender {
    file: String,
    client: postgres::Client,
    stmt: postgres::Statement,
    pid: i32,
    /// Best (CPU µs, wall µs) per put: new ids, overwrites.
    best: [(f64, f64); 2],
}

fn main() {
    let url = std::env::var("URL").expect("URL: the server to measure");
    let n = env_usize("N", 5000).max(1);
    let rounds = env_usize("ROUNDS", 3).max(1);
    let files: Vec<String> = std::env::args().skip(1).collect();
    let mut contenders = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let table = format!("cost_{i}");
        let sql = std::fs::read_to_string(file)
            .unwrap()
            .replace("\"acc\"", &format!("\"{table}\""));
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(
                "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off; \
                 SET plan_cache_mode = force_generic_plan; SET synchronous_commit = off",
            )
            .unwrap();
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS \"{table}\"; CREATE TABLE \"{table}\" (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)"
            ))
            .unwrap();
        // A file may set its session up first (a session function): the part before a
        // line `-- statement`.
        let sql = match sql.split_once("\n-- statement\n") {
            Some((setup, sql)) => {
                client.batch_execute(setup).unwrap();
                sql.to_string()
            }
            None => sql,
        };
        let stmt = client.prepare_typed(&sql, &TYPES).unwrap();
        let pid: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        eprintln!("pid {pid} {file}");
        contenders.push(Contender {
            file: file.clone(),
            client,
            stmt,
            pid,
            best: [(f64::MAX, f64::MAX); 2],
        });
    }
    let guard_keys: Vec<Vec<u8>> = vec![b"__nx/fence".to_vec(), b"__nx/manifest-epoch".to_vec()];
    let guard_values: Vec<Option<Vec<u8>>> = vec![None, None];
    let (lease, table, class) = (77i64, 78i64, 79i32);
    let modes = vec![false, false, true];
    for round in 0..rounds {
        for c in &mut contenders {
            let fold = c.file.contains("fold");
            let mut ok = 0usize;
            for phase in 0..2 {
                let (cpu0, wall0) = (cpu_ns(c.pid), Instant::now());
                for i in 0..n {
                    // Phase 0: new ids; phase 1: overwrites of the first 500, each
                    // requiring the value written before.
                    let (j, generation) = match phase {
                        0 => (i, 0),
                        _ => (i % 500, i / 500 + 1),
                    };
                    let k = format!("__nx/doc/acc/n{round}-{j:07}").into_bytes();
                    let v = value(j, generation);
                    let want = (phase == 1).then(|| value(j, generation - 1));
                    let ids = vec![-1913530430i32, -1727060063, 1000 + (j % 500) as i32];
                    let (mut keys, mut values) = (guard_keys.clone(), guard_values.clone());
                    if let (true, Some(w)) = (fold, &want) {
                        keys.push(k.clone());
                        values.push(Some(w.clone()));
                    }
                    let p: [&(dyn ToSql + Sync); 11] = [
                        &k, &v, &true, &want, &keys, &values, &lease, &table, &class, &ids, &modes,
                    ];
                    let rows = c.client.query(&c.stmt, &p).unwrap();
                    // The one statement answers (true, _) when it wrote; the session
                    // function answers no row when it wrote.
                    let written = match rows.first() {
                        Some(r) => r.try_get::<_, bool>(0).ok() == Some(true),
                        None => c.file.contains("function"),
                    };
                    ok += usize::from(written);
                }
                let cpu = cpu_ns(c.pid).saturating_sub(cpu0) as f64 / 1e3 / n as f64;
                let wall = wall0.elapsed().as_secs_f64() * 1e6 / n as f64;
                let best = &mut c.best[phase];
                *best = (best.0.min(cpu), best.1.min(wall));
            }
            if round == 0 {
                eprintln!("{}: {ok} of {} puts answered written", c.file, 2 * n);
            }
        }
    }
    for c in &contenders {
        println!(
            "{:40} new id: server CPU {:6.1} µs, wall {:6.1} µs | overwrite: server CPU {:6.1} µs, wall {:6.1} µs",
            c.file, c.best[0].0, c.best[0].1, c.best[1].0, c.best[1].1
        );
    }
}
