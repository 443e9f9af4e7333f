//! The write path on redb, the default backend (issue 24), against raw redb in the same
//! run: `put` (overwrite) and `update` with non-durable commits vs one raw write
//! transaction inserting the same serde_json bytes; a sealed `put` under policy vs the same
//! raw insert; loading 20,000 documents through ONE write set (`Database::write`) and
//! through `put_many` (bounded atomic sets) vs ONE raw write transaction inserting the
//! same rows (native_db is not in the
//! registry this project can reach: raw redb + serde_json is the baseline); `get` of a
//! current document vs a raw read transaction `get` + `serde_json::from_slice`.
//!
//! ```text
//! cargo bench -p strata --bench redb_path
//! # sizes: STRATA_BENCH_WRITES (20000), STRATA_BENCH_ROWS (1000 keys, round-robin),
//! # STRATA_BENCH_LOAD (20000 documents), STRATA_BENCH_ROUNDS (3; interleaved, best round
//! # of each contender), STRATA_BENCH_ONLY=put,update,sealed,load,get,
//! # (put-plain / put-policy: one of put's two),
//! # STRATA_BENCH_CLOCK=cpu (the thread's on-CPU time instead of wall clock)
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use strata::policy::{additive_only, PolicyConfig, SchemaOptions};
use strata::seal::{Credential, KdfParams};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata_redb::{RedbDurability, RedbOptions};

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Account {
    id: String,
    owner: String,
    email: String,
    balance_cents: i64,
    tags: Vec<String>,
    active: bool,
}

fn doc(i: usize, serial: usize) -> Account {
    Account {
        id: format!("a{i:07}"),
        owner: format!("Owner Number {i}"),
        email: format!("owner{i}@example.com"),
        balance_cents: (i * 100 + serial) as i64,
        tags: vec!["alpha".into(), "beta".into(), "gamma".into()],
        active: true,
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[path = "support/timer.rs"]
mod timer;
use timer::Timer;

const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("bench");

struct Setup {
    writes: usize,
    rows: usize,
    load: usize,
}

fn raw_db(dir: &Path) -> redb::Database {
    redb::Database::create(dir.join("raw.redb")).unwrap()
}

fn raw_key(i: usize) -> Vec<u8> {
    format!("__nx/doc/acc/a{i:07}").into_bytes()
}

/// One raw write transaction (no fsync) inserting `value` at `key`.
fn raw_insert(db: &redb::Database, key: &[u8], value: &[u8]) {
    let mut txn = db.begin_write().unwrap();
    txn.set_durability(redb::Durability::None).unwrap();
    {
        let mut t = txn.open_table(TABLE).unwrap();
        t.insert(key, value).unwrap();
    }
    txn.commit().unwrap();
}

/// One durable (empty) commit: what an application's flush does. Both sides measure from
/// the state after one, as every real store is (a store only ever written with
/// `Durability::None` keeps nothing).
fn raw_flush(db: &redb::Database) {
    db.begin_write().unwrap().commit().unwrap();
}

fn strata_db(dir: &Path, policy: bool, sealed: bool) -> (Database, Collection<Account>) {
    let store = RedbOptions::new()
        .durability(RedbDurability::Deferred)
        .create(dir.join("strata.redb"))
        .unwrap()
        .into_store();
    let mut b = Database::builder(store);
    let mut options = CollectionOptions::new().identity_fields(["id"]);
    if policy {
        b = b.policy(PolicyConfig::new().heartbeat(None));
        options = options.schema(SchemaOptions::of::<Account>().strategy(additive_only()));
    }
    if sealed {
        b = b.key(Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast()));
        options = options.sealed();
    }
    let db = b.open().unwrap();
    let c = db.collection::<Account>("acc", options).unwrap();
    (db, c)
}

/// Raw: `writes` overwrites round-robin over `rows` keys, one transaction each.
#[inline(never)]
fn raw_puts(s: &Setup, round: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = raw_db(dir.path());
    for i in 0..s.rows {
        raw_insert(&db, &raw_key(i), &serde_json::to_vec(&doc(i, 0)).unwrap());
    }
    raw_flush(&db);
    let started = Timer::start();
    for n in 0..s.writes {
        let i = n % s.rows;
        let bytes = serde_json::to_vec(&doc(i, round * s.writes + n + 1)).unwrap();
        raw_insert(&db, &raw_key(i), &bytes);
    }
    started.elapsed()
}

/// strata: the same overwrites through `put` (or `update` with the lock version).
#[inline(never)]
fn strata_puts(s: &Setup, round: usize, update: bool, policy: bool, sealed: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (db, c) = strata_db(dir.path(), policy, sealed);
    let mut locks = Vec::with_capacity(s.rows);
    for i in 0..s.rows {
        locks.push(c.put(&format!("a{i:07}"), &doc(i, 0)).unwrap());
    }
    strata_store::KvWrite::flush(db.store()).unwrap();
    let keys: Vec<String> = (0..s.rows).map(|i| format!("a{i:07}")).collect();
    let started = Timer::start();
    for n in 0..s.writes {
        let i = n % s.rows;
        let d = doc(i, round * s.writes + n + 1);
        locks[i] = if update {
            c.update(&keys[i], &d, locks[i]).unwrap()
        } else {
            black_box(c.put(&keys[i], &d).unwrap())
        };
    }
    started.elapsed()
}

/// The documents a load writes (made before either contender's measured function, so
/// that an instruction count of that function is its timed part).
fn load_docs(s: &Setup) -> Vec<(String, Account)> {
    (0..s.load)
        .map(|i| (format!("a{i:07}"), doc(i, 0)))
        .collect()
}

/// Raw: `docs` inserted in write transactions of `per_txn` rows (non-durable, the last
/// one durable, as a load ends); `per_txn` ≥ `docs.len()` is ONE transaction.
#[inline(never)]
fn raw_load(docs: &[(String, Account)], per_txn: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = raw_db(dir.path());
    let started = Timer::start();
    let chunks: Vec<_> = docs.chunks(per_txn.max(1)).collect();
    for (n, chunk) in chunks.iter().enumerate() {
        let mut txn = db.begin_write().unwrap();
        if n + 1 < chunks.len() {
            txn.set_durability(redb::Durability::None).unwrap();
        }
        {
            let mut t = txn.open_table(TABLE).unwrap();
            for (k, d) in chunk.iter() {
                let key = format!("__nx/doc/acc/{k}");
                t.insert(key.as_bytes(), serde_json::to_vec(d).unwrap().as_slice())
                    .unwrap();
            }
        }
        txn.commit().unwrap();
    }
    started.elapsed()
}

/// Raw in ONE transaction (its own function: counted apart from the bounded-sets run).
#[inline(never)]
fn raw_load_one_txn(docs: &[(String, Account)]) -> Duration {
    raw_load(docs, usize::MAX)
}

/// strata: the same rows through `put_many` (bounded atomic write sets), then one flush.
#[inline(never)]
fn strata_load(docs: &[(String, Account)]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (db, c) = strata_db(dir.path(), false, false);
    let started = Timer::start();
    let n = c
        .put_many(docs.iter().map(|(k, d)| (k.as_str(), d)))
        .unwrap();
    assert_eq!(n, docs.len());
    strata_store::KvWrite::flush(db.store()).unwrap();
    started.elapsed()
}

/// strata: the same rows in ONE write set (`Database::write`), then one flush: the one
/// transaction raw's load makes.
#[inline(never)]
fn strata_load_one_set(docs: &[(String, Account)]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (db, c) = strata_db(dir.path(), false, false);
    let started = Timer::start();
    let (_, written) = db
        .write(|w| {
            for (k, d) in docs {
                c.put_in(w, k, d)?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(written.len(), docs.len());
    strata_store::KvWrite::flush(db.store()).unwrap();
    started.elapsed()
}

/// Raw: `writes` gets (read transaction + get + serde_json decode), round-robin.
#[inline(never)]
fn raw_gets(s: &Setup) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let db = raw_db(dir.path());
    for i in 0..s.rows {
        raw_insert(&db, &raw_key(i), &serde_json::to_vec(&doc(i, 0)).unwrap());
    }
    let keys: Vec<Vec<u8>> = (0..s.rows).map(raw_key).collect();
    let started = Timer::start();
    for n in 0..s.writes {
        use redb::ReadableDatabase;
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(TABLE).unwrap();
        let v = t.get(keys[n % s.rows].as_slice()).unwrap().unwrap();
        let d: Account = serde_json::from_slice(v.value()).unwrap();
        black_box(d);
    }
    started.elapsed()
}

#[inline(never)]
fn strata_gets(s: &Setup) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (_db, c) = strata_db(dir.path(), false, false);
    let keys: Vec<String> = (0..s.rows).map(|i| format!("a{i:07}")).collect();
    for (i, k) in keys.iter().enumerate() {
        c.put(k, &doc(i, 0)).unwrap();
    }
    let started = Timer::start();
    for n in 0..s.writes {
        black_box(c.get(&keys[n % s.rows]).unwrap().unwrap());
    }
    started.elapsed()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let s = Setup {
        writes: env_usize("STRATA_BENCH_WRITES", 20_000),
        rows: env_usize("STRATA_BENCH_ROWS", 1_000).max(1),
        load: env_usize("STRATA_BENCH_LOAD", 20_000),
    };
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 3).max(1);
    let only = std::env::var("STRATA_BENCH_ONLY").ok();
    let wanted = |tag: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|t| t.trim() == tag))
    };
    // (name, target, raw, strata)
    type Pair = (&'static str, &'static str, Duration, Duration);
    let mut pairs: Vec<Pair> = Vec::new();
    let mut note = |name, target, raw: Duration, strata: Duration| {
        match pairs.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.2 = p.2.min(raw);
                p.3 = p.3.min(strata);
            }
            None => pairs.push((name, target, raw, strata)),
        }
        println!(
            "  ({name}: raw {:.1} ms, strata {:.1} ms, {:.2}×)",
            raw.as_secs_f64() * 1e3,
            strata.as_secs_f64() * 1e3,
            strata.as_secs_f64() / raw.as_secs_f64()
        );
    };
    for round in 0..rounds {
        if wanted("put") || wanted("put-plain") {
            let raw = raw_puts(&s, round);
            let st = strata_puts(&s, round, false, false, false);
            note("put (overwrite), no policy", "≤ 1.10×", raw, st);
        }
        if wanted("put") || wanted("put-policy") {
            let raw = raw_puts(&s, round);
            let st = strata_puts(&s, round, false, true, false);
            note("put (overwrite), policy", "≤ 1.10×", raw, st);
        }
        if wanted("update") {
            let raw = raw_puts(&s, round);
            let st = strata_puts(&s, round, true, false, false);
            note("update, no policy", "≤ 1.10×", raw, st);
        }
        if wanted("sealed") {
            let raw = raw_puts(&s, round);
            let st = strata_puts(&s, round, false, true, true);
            note("sealed put, policy", "one write txn", raw, st);
        }
        if wanted("load") {
            let docs = load_docs(&s);
            let raw = raw_load_one_txn(&docs);
            let st = strata_load(&docs);
            note("load via put_many vs 1 raw txn", "≤ 1.2×", raw, st);
            // The same raw rows in put_many's bounded sets: what strata adds per row,
            // apart from committing in bounded sets.
            let raw_sets = raw_load(&docs, strata::PUT_MANY_DOCUMENTS);
            note("load vs raw in the same sets", "—", raw_sets, st);
            let one = strata_load_one_set(&docs);
            note("load via one write set vs 1 raw txn", "≤ 1.2×", raw, one);
        }
        if wanted("get") {
            let raw = raw_gets(&s);
            let st = strata_gets(&s);
            note("get vs raw get + serde", "≤ 1.1×", raw, st);
        }
    }
    println!(
        "redb (strata: RedbDurability::Deferred; raw: Durability::None), {} writes/gets over {} rows, load of {} documents, best of {rounds} rounds, clock: {}",
        s.writes, s.rows, s.load, std::env::var("STRATA_BENCH_CLOCK").unwrap_or_else(|_| "wall".into())
    );
    println!(
        "  {:<34} {:>10} {:>10} {:>8}  target",
        "measure", "raw", "strata", "ratio"
    );
    for (name, target, raw, st) in pairs {
        let (per_raw, per_st, unit) = if name.starts_with("load") {
            (raw.as_secs_f64() * 1e3, st.as_secs_f64() * 1e3, "ms")
        } else {
            (
                raw.as_secs_f64() * 1e6 / s.writes as f64,
                st.as_secs_f64() * 1e6 / s.writes as f64,
                "µs",
            )
        };
        println!(
            "  {name:<34} {per_raw:>7.2} {unit} {per_st:>7.2} {unit} {:>7.2}×  {target}",
            st.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
