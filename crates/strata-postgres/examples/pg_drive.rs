//! How the client waits for one `SELECT v ... WHERE k = $1` round trip (issue 10, the
//! `get` gap of `benches/pg_collection.rs`): the sync `postgres::Client` (its connection
//! polled inline in its own `block_on`) against `tokio_postgres` on a current-thread
//! runtime with the connection spawned as a task (as `crates/strata-postgres/src/pool.rs`
//! does) or polled inline together with the query (as the `postgres` crate does), each
//! with and without a `tokio::time::timeout` around the query. Best of 7 rounds.
//!
//! ```text
//! STRATA_PG_URL=postgresql://postgres@127.0.0.1:55445/postgres \
//!   cargo run --release -p strata-postgres --example pg_drive
//! STRATA_BENCH_OPS=4000   # round trips per round and variant
//! # pin the client and the server to control where the scheduler puts them, e.g.
//! # taskset -p 1 <postmaster pid>; taskset -c 0 target/release/examples/pg_drive
//! ```
//!
//! Without `STRATA_PG_URL` it prints that it was skipped and measures nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::{poll_fn, Future};
use std::hint::black_box;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{Connection, NoTls, Socket};

const KEYS: u32 = 500;
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `fut` on `rt`, polling `conn` inline before every poll of `fut` (the `postgres`
/// crate's `Connection::block_on`).
fn inline<T>(
    rt: &Runtime,
    conn: &mut Connection<Socket, NoTlsStream>,
    fut: impl Future<Output = T>,
) -> T {
    let mut fut = pin!(fut);
    rt.block_on(poll_fn(|cx| {
        loop {
            match conn.poll_message(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => panic!("connection failed: {e}"),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        fut.as_mut().poll(cx)
    }))
}

fn main() {
    let Ok(url) = std::env::var("STRATA_PG_URL") else {
        println!("pg_drive: skipped (STRATA_PG_URL is not set)");
        return;
    };
    let ops: usize = std::env::var("STRATA_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let table = format!("strata_pg_drive_{}", std::process::id());
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    raw.batch_execute(&format!(
        r#"CREATE TABLE "{table}" (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)"#
    ))
    .unwrap();
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| i.to_be_bytes().to_vec()).collect();
    let value = vec![b'x'; 150];
    let ins = raw
        .prepare(&format!(r#"INSERT INTO "{table}" VALUES ($1, $2)"#))
        .unwrap();
    for k in &keys {
        raw.execute(&ins, &[k, &value]).unwrap();
    }
    let sql = format!(r#"SELECT v FROM "{table}" WHERE k = $1"#);
    let sel = raw.prepare(&sql).unwrap();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (spawned, conn) = rt.block_on(tokio_postgres::connect(&url, NoTls)).unwrap();
    rt.spawn(async move {
        let _ = conn.await;
    });
    let sel_spawned = rt.block_on(spawned.prepare(&sql)).unwrap();
    let (polled, mut conn) = rt.block_on(tokio_postgres::connect(&url, NoTls)).unwrap();
    let sel_polled = inline(&rt, &mut conn, polled.prepare(&sql)).unwrap();

    let names = [
        "postgres::Client (inline)",
        "tokio, spawned connection",
        "tokio, spawned + timeout",
        "tokio, inline connection",
        "tokio, inline + timeout",
    ];
    let mut best = [Duration::MAX; 5];
    for _ in 0..7 {
        for (variant, best) in best.iter_mut().enumerate() {
            let t = Instant::now();
            for i in 0..ops {
                let key = &keys[i % keys.len()];
                let row = match variant {
                    0 => raw.query_one(&sel, &[key]).unwrap(),
                    1 => rt
                        .block_on(spawned.query_one(&sel_spawned, &[key]))
                        .unwrap(),
                    2 => rt
                        .block_on(async {
                            tokio::time::timeout(DEADLINE, spawned.query_one(&sel_spawned, &[key]))
                                .await
                        })
                        .unwrap()
                        .unwrap(),
                    3 => inline(&rt, &mut conn, polled.query_one(&sel_polled, &[key])).unwrap(),
                    _ => inline(&rt, &mut conn, async {
                        tokio::time::timeout(DEADLINE, polled.query_one(&sel_polled, &[key])).await
                    })
                    .unwrap()
                    .unwrap(),
                };
                let v: Vec<u8> = row.get(0);
                black_box(v);
            }
            *best = (*best).min(t.elapsed());
        }
    }
    println!("pg_drive: {ops} SELECTs per round and variant, best of 7 interleaved rounds");
    for (name, d) in names.iter().zip(best) {
        println!("{name:28} {:.1} µs/op", d.as_secs_f64() * 1e6 / ops as f64);
    }
    raw.batch_execute(&format!(r#"DROP TABLE "{table}""#))
        .unwrap();
}
