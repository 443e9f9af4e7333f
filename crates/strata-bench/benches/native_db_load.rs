//! Loading documents into an embedded store, in one run: strata on redb (the default
//! backend) through ONE write set (`Database::write`) and through `put_many` (bounded
//! atomic sets), against the peer issue 24 names — native_db (0.8, on redb 2) inserting the
//! same rows in ONE read-write transaction — and against a raw redb transaction inserting
//! the rows' JSON (the floor: no envelope, no check, no read).
//!
//! ```sh
//! cargo bench -p strata-bench --features native-db --bench native_db_load
//! # STRATA_BENCH_LOAD (20000 documents), STRATA_BENCH_ROUNDS (5; interleaved, best round
//! # of each contender), STRATA_BENCH_CLOCK=cpu (the thread's on-CPU time, not wall clock)
//! ```
//!
//! Every contender starts from an empty database file in its own temporary directory and
//! ends with a durable commit (strata: a deferred-durability store, then one flush; the
//! others: their transaction committed durably). The documents are built before any
//! contender's timed part.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use native_db::{native_db, Builder, Models, ToKey};
use native_model::{native_model, Model};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use strata::{CollectionOptions, Database};
use strata_redb::{RedbDurability, RedbOptions};

/// The document every contender writes (the shape of `crates/strata/benches/redb_path.rs`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[native_model(id = 1, version = 1)]
#[native_db]
struct Account {
    #[primary_key]
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
    tags: Vec<String>,
    active: bool,
}

fn doc(i: usize) -> Account {
    Account {
        id: format!("a{i:07}"),
        owner: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: (i * 100) as i64,
        tags: vec!["alpha".into(), "beta".into(), "gamma".into()],
        active: true,
    }
}

#[path = "../../strata/benches/support/timer.rs"]
mod timer;
use timer::Timer;

/// native_db: every row in ONE read-write transaction, committed (durably: redb's
/// default).
#[inline(never)]
fn native_db_load(models: &Models, docs: &[Account]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = Builder::new()
        .create(models, dir.path().join("native.redb"))
        .unwrap();
    // `insert` takes the row by value: the rows are cloned before the timed part.
    let rows: Vec<Account> = docs.to_vec();
    let started = Timer::start();
    let rw = db.rw_transaction().unwrap();
    for d in rows {
        rw.insert(d).unwrap();
    }
    rw.commit().unwrap();
    let took = started.elapsed();
    // The rows are there (outside the timed part).
    let r = db.r_transaction().unwrap();
    let last = docs.last().unwrap();
    let got: Option<Account> = r.get().primary(last.id.clone()).unwrap();
    assert_eq!(got.as_ref(), Some(last));
    took
}

const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("bench");

/// Raw redb: every row's JSON in ONE write transaction, committed durably.
#[inline(never)]
fn raw_load(docs: &[Account]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = redb::Database::create(dir.path().join("raw.redb")).unwrap();
    let started = Timer::start();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(TABLE).unwrap();
        for d in docs {
            let key = format!("__nx/doc/acc/{}", d.id);
            t.insert(key.as_bytes(), serde_json::to_vec(d).unwrap().as_slice())
                .unwrap();
        }
    }
    txn.commit().unwrap();
    started.elapsed()
}

fn strata_db(dir: &Path) -> (Database, strata::Collection<Account>) {
    let store = RedbOptions::new()
        .durability(RedbDurability::Deferred)
        .create(dir.join("strata.redb"))
        .unwrap()
        .into_store();
    let db = Database::builder(store).open().unwrap();
    let c = db
        .collection::<Account>("acc", CollectionOptions::new().identity_fields(["id"]))
        .unwrap();
    (db, c)
}

/// strata: every document in ONE write set, then one flush.
#[inline(never)]
fn strata_one_set(docs: &[Account]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (db, c) = strata_db(dir.path());
    let started = Timer::start();
    let (_, written) = db
        .write(|w| {
            for d in docs {
                c.put_in(w, &d.id, d)?;
            }
            Ok(())
        })
        .unwrap();
    strata_store::KvWrite::flush(db.store()).unwrap();
    let took = started.elapsed();
    assert_eq!(written.len(), docs.len());
    assert_eq!(c.get(&docs[0].id).unwrap().as_ref(), Some(&docs[0]));
    took
}

/// strata: the documents through `put_many` (bounded atomic sets), then one flush.
#[inline(never)]
fn strata_put_many(docs: &[Account]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (db, c) = strata_db(dir.path());
    let started = Timer::start();
    let n = c.put_many(docs.iter().map(|d| (d.id.as_str(), d))).unwrap();
    strata_store::KvWrite::flush(db.store()).unwrap();
    let took = started.elapsed();
    assert_eq!(n, docs.len());
    took
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let load = env_usize("STRATA_BENCH_LOAD", 20_000);
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 5).max(1);
    let mut models = Models::new();
    models.define::<Account>().unwrap();
    let docs: Vec<Account> = (0..load).map(doc).collect();
    let mut best = [Duration::MAX; 4];
    for _ in 0..rounds {
        // Interleaved: each round runs every contender once.
        let took = [
            native_db_load(&models, black_box(&docs)),
            strata_one_set(black_box(&docs)),
            strata_put_many(black_box(&docs)),
            raw_load(black_box(&docs)),
        ];
        for (b, t) in best.iter_mut().zip(took) {
            *b = (*b).min(t);
        }
    }
    let [native, one_set, put_many, raw] = best;
    let clock = std::env::var("STRATA_BENCH_CLOCK").unwrap_or_else(|_| "wall".into());
    println!("load of {load} documents, best of {rounds} interleaved rounds, clock: {clock}");
    println!("  {:<44} {:>10} {:>8}", "contender", "ms", "× native_db");
    let row = |name: &str, d: Duration| {
        println!(
            "  {:<44} {:>10.1} {:>8.3}",
            name,
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() / native.as_secs_f64()
        )
    };
    row("native_db 0.8, one rw transaction", native);
    row("strata, one write set (target ≤ 1.2×)", one_set);
    row("strata, put_many (sets of 1,000)", put_many);
    row("raw redb 4, one transaction of JSON rows", raw);
    println!(
        "  strata one write set / raw redb: {:.3}×; put_many / raw redb: {:.3}×",
        one_set.as_secs_f64() / raw.as_secs_f64(),
        put_many.as_secs_f64() / raw.as_secs_f64()
    );
}
