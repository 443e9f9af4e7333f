//! The AEAD cost of sealed documents (harness = false): sealed vs clear document values
//! over the same sled store, in one run, ratios printed.
//!
//! ```text
//! cargo bench -p strata --bench seal
//! STRATA_BENCH_ROWS=20000 STRATA_BENCH_ROUNDS=5 cargo bench -p strata --bench seal
//! ```
//!
//! * `put`: envelope + JSON bytes (clear: `envelope::encode`; sealed:
//!   `seal::seal_document`, XChaCha20-Poly1305 with a fresh nonce) and one store write;
//! * `get`: one store read, the envelope opened (sealed: authenticated and decrypted in
//!   place in the buffer the store returned) and the JSON parsed into a `serde_json::Value`.
//!
//! Then the same through the collection API (`Database` + `Collection<serde_json::Value>`,
//! a sealed and a clear collection over the same store): current-version `get` (both sides:
//! the same documents by the same keys, each timed pass right after an untimed pass of its
//! own, so both read from the same cache state), `put`
//! (sealed: one key snapshot + the keyring precondition on the batch), the eager `sweep`
//! of stale rows (sealed: open, upcast, seal again), and the data-key rotation
//! (`rotate_data_key` over a fresh database of one sealed collection, compared with the
//! eager sweep of a fresh database of one clear collection of as many rows).
//!
//! Documents are ~1 KiB of JSON. Target: sealed ≤ 1.3× clear. The collection API lines
//! give the ratio of each side's best round and, below it, the median (min, max) of the
//! per-round ratios: both sides run back to back in every round, so each round's ratio is
//! a paired measurement and their median does not depend on one lucky round of one side.
//!
//! Below the get lines: the floor the cipher sets — the AEAD alone over the same sealed rows
//! (copy + open in place, as the get does it), as `1 + aead / clear get` per round.
//!
//! Knobs: `STRATA_BENCH_ROWS`, `STRATA_BENCH_ROUNDS`; `STRATA_BENCH_ONLY=codec` (the codec
//! alone, beside the reference `chacha20poly1305` crate), `=store` (the raw-store part
//! only), `=collection` (the collection API and the rotation), `=rotation`, or `=steady`
//! (the get in a steady state: flushed, warm, both sides and the AEAD alone per round);
//! `STRATA_BENCH_INTERLEAVE=N` (collection API: the two sides' get passes interleaved in
//! blocks of N keys instead of one whole pass each); `STRATA_BENCH_ROUNDS_PRINT=1` (every
//! round's figures);
//! `STRATA_BENCH_SIDE=sealed|clear` (raw store and collection API, one side, no rotation:
//! for instruction counts under callgrind); `STRATA_BENCH_CLOCK=cpu` times the thread's
//! on-CPU time instead of the wall clock (a loaded machine).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;
use strata::layout::envelope::{self, Envelope};
use strata::ops::rotate::RotateOptions;
use strata::ops::sweep::SweepOptions;
use strata::seal::{self, Credential, KdfParams, Keyring, Sealer};
use strata::CollectionOptions;
use strata::Database;
use strata::Mode;
use strata_store::{Batch, KvRead, KvWrite, Store};

const COLLECTION_ID: u16 = 1024;

#[path = "support/timer.rs"]
mod timer;
use timer::Timer;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn doc(i: usize) -> Vec<u8> {
    let notes = "lorem ipsum dolor sit amet ".repeat(30);
    format!(
        r#"{{"id":"a{i:07}","owner":"Owner Number {i}","email":"owner{i}@example.com","balance_cents":{},"tags":["alpha","beta","gamma"],"active":true,"notes":"{notes}"}}"#,
        i * 100
    )
    .into_bytes()
}

fn key(i: usize, sealed: bool) -> Vec<u8> {
    let c = if sealed { "sealed" } else { "clear" };
    format!("__nx/doc/{c}/a{i:07}").into_bytes()
}

/// Writes every document; `round` is the lock version, so every round really writes (sled
/// skips a set of the bytes already stored: rewriting identical clear values would time
/// nothing).
fn put_all(store: &Store, sealer: Option<&Sealer>, docs: &[Vec<u8>], round: u64) -> Duration {
    let t = Timer::start();
    for (i, json) in docs.iter().enumerate() {
        let k = key(i, sealer.is_some());
        let env = Envelope::new(1, round);
        let value = match sealer {
            Some(s) => seal::seal_document(s, &k, COLLECTION_ID, env, json).unwrap(),
            None => envelope::encode(env, json),
        };
        store.apply(Batch::new().set(k, value)).unwrap();
    }
    t.elapsed()
}

fn get_all(store: &Store, sealer: Option<&Sealer>, rows: usize) -> Duration {
    let t = Timer::start();
    for i in 0..rows {
        let k = key(i, sealer.is_some());
        let mut value = store.get(&k).unwrap().unwrap();
        let v: serde_json::Value = match sealer {
            Some(s) => {
                // Opened in place in the buffer the store returned (as the read path does).
                let hl = envelope::ENVELOPE_HEADER_LEN;
                let mut head = [0u8; envelope::ENVELOPE_HEADER_LEN];
                head.copy_from_slice(&value[..hl]);
                let ctx = seal::RecordContext {
                    key: &k,
                    collection_id: COLLECTION_ID,
                    header: &head,
                };
                s.open_in_place(ctx, &mut value, hl).unwrap();
                serde_json::from_slice(&value[hl..]).unwrap()
            }
            None => {
                let (_, json) = envelope::decode(&value).unwrap();
                serde_json::from_slice(json).unwrap()
            }
        };
        black_box(v);
    }
    t.elapsed()
}

fn main() {
    let rows = env_usize("STRATA_BENCH_ROWS", 20_000);
    let rounds = env_usize("STRATA_BENCH_ROUNDS", 5);
    let dir = tempfile::tempdir().unwrap();
    let store = strata_sled::SledStore::open_store(dir.path()).unwrap();
    let sealer = Keyring::database()
        .create(
            &store,
            &Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast()),
            "bench",
        )
        .unwrap();
    let docs: Vec<Vec<u8>> = (0..rows).map(doc).collect();
    let avg = docs.iter().map(Vec::len).sum::<usize>() / rows.max(1);
    let clock = match Timer::start() {
        Timer::Cpu(_) => "thread on-CPU time",
        Timer::Wall(_) => "wall clock",
    };
    println!(
        "seal bench: {rows} rows of ~{avg} bytes of JSON, {rounds} rounds, best round, {clock}"
    );
    let only = std::env::var("STRATA_BENCH_ONLY").unwrap_or_default();
    if only == "codec" {
        codec_bench(&sealer, &docs);
        return;
    }
    if only == "collection" {
        drop(store);
        collection_bench(rows, rounds, &docs);
        return;
    }
    if only == "steady" {
        drop(store);
        steady_bench(rows, rounds, &docs);
        return;
    }
    if only == "rotation" {
        drop(store);
        let values: Vec<serde_json::Value> = docs
            .iter()
            .map(|d| serde_json::from_slice(d).unwrap())
            .collect();
        rotation_bench(&values, rounds);
        return;
    }

    let (mut put_c, mut put_s, mut get_c, mut get_s) =
        (Duration::MAX, Duration::MAX, Duration::MAX, Duration::MAX);
    let side = std::env::var("STRATA_BENCH_SIDE").unwrap_or_default();
    for round in 1..=rounds as u64 {
        // Alternate the contenders so drift on a shared machine hits both.
        if side != "sealed" {
            put_c = put_c.min(put_all(&store, None, &docs, round));
        }
        if side != "clear" {
            put_s = put_s.min(put_all(&store, Some(&sealer), &docs, round));
        }
        // Each timed read pass right after an untimed one of its own side: both read from
        // the cache state one full pass of that side leaves (not what the puts left).
        if side != "sealed" {
            get_all(&store, None, rows);
            get_c = get_c.min(get_all(&store, None, rows));
        }
        if side != "clear" {
            get_all(&store, Some(&sealer), rows);
            get_s = get_s.min(get_all(&store, Some(&sealer), rows));
        }
    }
    let per = |d: Duration| {
        if d == Duration::MAX {
            f64::NAN
        } else {
            d.as_nanos() as f64 / rows as f64
        }
    };
    let line = |name: &str, s: Duration, c: Duration| {
        println!(
            "{name:<4} sealed {:>8.0} ns/op   clear {:>8.0} ns/op   ratio {:.2}x (target <= 1.30x)",
            per(s),
            per(c),
            per(s) / per(c)
        );
    };
    line("put", put_s, put_c);
    line("get", get_s, get_c);
    if only == "store" {
        return;
    }

    codec_bench(&sealer, &docs);
    drop(store);
    collection_bench(rows, rounds, &docs);
}

/// The codec alone (no store): where the AEAD time goes, beside the reference
/// `chacha20poly1305` crate on the same bytes.
fn codec_bench(sealer: &Sealer, docs: &[Vec<u8>]) {
    use chacha20poly1305::aead::AeadInOut;
    use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
    let rows = docs.len();
    let per = |d: Duration| d.as_nanos() as f64 / rows as f64;
    let k = key(0, true);
    let t = Timer::start();
    for json in docs {
        black_box(
            seal::seal_document(sealer, &k, COLLECTION_ID, Envelope::new(1, 1), json).unwrap(),
        );
    }
    let seal_ns = per(t.elapsed());
    let sealed =
        seal::seal_document(sealer, &k, COLLECTION_ID, Envelope::new(1, 1), &docs[0]).unwrap();
    let t = Timer::start();
    for _ in 0..rows {
        black_box(seal::open_document(sealer, &k, COLLECTION_ID, &sealed).unwrap());
    }
    let open_ns = per(t.elapsed());
    // The floor of a sealed read: authenticate + decrypt one body into a reused buffer
    // (HChaCha20 subkey, ChaCha20-Poly1305, the associated data; no allocation).
    let (head, body) = sealed.split_at(envelope::ENVELOPE_HEADER_LEN);
    let ctx = seal::RecordContext {
        key: &k,
        collection_id: COLLECTION_ID,
        header: head,
    };
    let mut buf = Vec::with_capacity(sealed.len());
    let t = Timer::start();
    for _ in 0..rows {
        buf.clear();
        sealer.open_into(ctx, body, &mut buf).unwrap();
        black_box(&buf);
    }
    let floor_ns = per(t.elapsed());
    let t = Timer::start();
    for json in docs {
        black_box(envelope::encode(Envelope::new(1, 1), json));
    }
    let clear_ns = per(t.elapsed());
    // The AEAD in the read path's context: every document sealed under its own record key
    // (a fresh nonce each), copied into a reused buffer (as the store hands a row over),
    // opened in place and parsed, against the clear envelope copied and parsed alike.
    let keys: Vec<Vec<u8>> = (0..rows).map(|i| key(i, true)).collect();
    let sealed_rows: Vec<Vec<u8>> = docs
        .iter()
        .zip(&keys)
        .map(|(json, k)| {
            seal::seal_document(sealer, k, COLLECTION_ID, Envelope::new(1, 1), json).unwrap()
        })
        .collect();
    let clear_rows: Vec<Vec<u8>> = docs
        .iter()
        .map(|json| envelope::encode(Envelope::new(1, 1), json))
        .collect();
    let hl = envelope::ENVELOPE_HEADER_LEN;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    // Copies a sealed row into `buf` (as a store read does) and opens it in place.
    let open_row = |buf: &mut Vec<u8>, row: &[u8], k: &[u8]| {
        buf.clear();
        buf.extend_from_slice(row);
        let mut head = [0u8; envelope::ENVELOPE_HEADER_LEN];
        head.copy_from_slice(&row[..hl]);
        let ctx = seal::RecordContext {
            key: k,
            collection_id: COLLECTION_ID,
            header: &head,
        };
        sealer.open_in_place(ctx, buf, hl).unwrap();
    };
    let t = Timer::start();
    for (row, k) in sealed_rows.iter().zip(&keys) {
        open_row(&mut buf, row, k);
        black_box(&buf);
    }
    let in_place_ns = per(t.elapsed());
    let t = Timer::start();
    for (row, k) in sealed_rows.iter().zip(&keys) {
        open_row(&mut buf, row, k);
        black_box(serde_json::from_slice::<serde_json::Value>(&buf[hl..]).unwrap());
    }
    let sealed_parse_ns = per(t.elapsed());
    let t = Timer::start();
    for row in &clear_rows {
        buf.clear();
        buf.extend_from_slice(row);
        black_box(serde_json::from_slice::<serde_json::Value>(&buf[hl..]).unwrap());
    }
    let clear_parse_ns = per(t.elapsed());
    // The reference crate: encrypt + decrypt the same bytes with a fixed nonce.
    let c = XChaCha20Poly1305::new(&[7u8; 32].into());
    let nonce = XNonce::from([9u8; 24]);
    let aad = [0u8; 64];
    let mut buf = docs[0].clone();
    let t = Timer::start();
    for _ in 0..rows {
        black_box(
            c.encrypt_inout_detached(&nonce, &aad, buf.as_mut_slice().into())
                .unwrap(),
        );
    }
    let ref_ns = per(t.elapsed());
    println!(
        "codec alone: seal {seal_ns:.0} ns, open {open_ns:.0} ns (into a reused buffer \
         {floor_ns:.0} ns), clear encode {clear_ns:.0} ns per ~{} B document; the \
         chacha20poly1305 crate's encrypt alone {ref_ns:.0} ns",
        docs[0].len()
    );
    println!(
        "codec in a read path: copy + open in place {in_place_ns:.0} ns; copy + open + JSON \
         parse {sealed_parse_ns:.0} ns vs copy + parse of the clear row {clear_parse_ns:.0} ns \
         (ratio {:.2}x, difference {:.0} ns), distinct documents and nonces",
        sealed_parse_ns / clear_parse_ns,
        sealed_parse_ns - clear_parse_ns
    );
}

/// The options of a sealed or clear collection, optionally with one eager step to v2.
fn coll_opts(sealed: bool, step: bool) -> CollectionOptions {
    let opts = if sealed {
        CollectionOptions::new().sealed()
    } else {
        CollectionOptions::new()
    };
    if !step {
        return opts;
    }
    opts.upcast(1, Mode::Eager, |o| {
        o.insert("v2".into(), serde_json::Value::Bool(true));
        Ok(())
    })
}

/// Reads every key once through `Collection::get`.
fn get_pass(c: &strata::Collection<serde_json::Value>, keys: &[String]) -> Duration {
    let t = Timer::start();
    for k in keys {
        black_box(c.get(k).unwrap().unwrap());
    }
    t.elapsed()
}

fn collection_bench(rows: usize, rounds: usize, docs: &[Vec<u8>]) {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_sled::SledStore::open_store(dir.path()).unwrap();
    let cred = || Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast());
    let db = Database::builder(store.clone()).key(cred()).open().unwrap();
    let values: Vec<serde_json::Value> = docs
        .iter()
        .map(|d| serde_json::from_slice(d).unwrap())
        .collect();
    let keys: Vec<String> = (0..values.len()).map(|i| format!("a{i:07}")).collect();
    let mut best = [[Duration::MAX; 3]; 2];
    // Every round's time per side and phase: the sides run back to back in each round, so
    // a round's sealed/clear ratio is a paired measurement (same store size, same load).
    let mut each: [[Vec<Duration>; 3]; 2] = Default::default();
    let mut aead = Vec::new();
    // `STRATA_BENCH_SIDE=sealed|clear`: one side only (instruction counts under callgrind).
    let side = std::env::var("STRATA_BENCH_SIDE").unwrap_or_default();
    let sides: Vec<bool> = [false, true]
        .into_iter()
        .filter(|&sealed| !((side == "sealed" && !sealed) || (side == "clear" && sealed)))
        .collect();
    for round in 0..rounds {
        // The store grows round by round: alternate which side goes first in every phase.
        let mut order = sides.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        // Collection names of equal length: the record keys differ only in one letter.
        let name = |sealed: bool| format!("{}{round:03}", if sealed { "s" } else { "c" });
        // put: the same values under the same keys into a fresh collection per side.
        for &sealed in &order {
            let c = db
                .collection::<serde_json::Value>(&name(sealed), coll_opts(sealed, false))
                .unwrap();
            let t = Timer::start();
            for (k, v) in keys.iter().zip(&values) {
                c.put(k, v).unwrap();
            }
            let i = usize::from(sealed);
            best[i][0] = best[i][0].min(t.elapsed());
            each[i][0].push(t.elapsed());
        }
        // get, like with like: both sides read the same documents by the same keys through
        // the same `Collection::get`, each right after an untimed pass over its own rows
        // (so both start from the same cache state: the store's caches hold what one full
        // pass of that side leaves, not what its puts or the other side left).
        if let Ok(chunk) = std::env::var("STRATA_BENCH_INTERLEAVE") {
            let chunk: usize = chunk.parse().unwrap();
            let cs: Vec<_> = order
                .iter()
                .map(|&sealed| {
                    (
                        sealed,
                        db.collection::<serde_json::Value>(&name(sealed), coll_opts(sealed, false))
                            .unwrap(),
                    )
                })
                .collect();
            for (_, c) in &cs {
                get_pass(c, &keys);
            }
            let mut tot = [Duration::ZERO; 2];
            for (n, part) in keys.chunks(chunk).enumerate() {
                for j in 0..cs.len() {
                    let (sealed, c) = &cs[if n % 2 == 0 { j } else { cs.len() - 1 - j }];
                    tot[usize::from(*sealed)] += get_pass(c, part);
                }
            }
            for i in 0..2 {
                best[i][1] = best[i][1].min(tot[i]);
                each[i][1].push(tot[i]);
            }
        } else {
            for &sealed in &order {
                let c = db
                    .collection::<serde_json::Value>(&name(sealed), coll_opts(sealed, false))
                    .unwrap();
                get_pass(&c, &keys);
                let i = usize::from(sealed);
                let d = get_pass(&c, &keys);
                best[i][1] = best[i][1].min(d);
                each[i][1].push(d);
            }
        }
        // The AEAD alone over this round's sealed rows: the floor of the get ratio.
        if sides.contains(&true) {
            let c = db
                .collection::<serde_json::Value>(&name(true), coll_opts(true, false))
                .unwrap();
            aead.push(aead_pass(&db, &c, &keys));
        }
        // sweep: the rows are stale for a handle with one eager step; sweep them to v2.
        for &sealed in &order {
            let c = db
                .collection::<serde_json::Value>(&name(sealed), coll_opts(sealed, true))
                .unwrap();
            let t = Timer::start();
            let report = c.sweep(SweepOptions::new()).unwrap();
            let i = usize::from(sealed);
            best[i][2] = best[i][2].min(t.elapsed());
            each[i][2].push(t.elapsed());
            assert_eq!(report.rewritten() as usize, values.len());
        }
    }
    // A side left out by `STRATA_BENCH_SIDE` prints as NaN.
    let per = |d: Duration, n: usize| {
        if d == Duration::MAX {
            f64::NAN
        } else {
            d.as_nanos() as f64 / n as f64
        }
    };
    println!("collection API ({rows} rows per collection, best of {rounds} rounds):");
    for (j, name) in ["put", "get", "sweep"].into_iter().enumerate() {
        let (s, c) = (per(best[1][j], rows), per(best[0][j], rows));
        println!(
            "{name:<5} sealed {s:>8.0} ns/row  clear {c:>8.0} ns/row  ratio {:.2}x (target <= 1.30x)",
            s / c
        );
        if std::env::var("STRATA_BENCH_ROUNDS_PRINT").is_ok() {
            for (r, (s, c)) in each[1][j].iter().zip(&each[0][j]).enumerate() {
                println!(
                    "      round {r}: sealed {:>6.0} clear {:>6.0} ns/row",
                    per(*s, rows),
                    per(*c, rows)
                );
            }
        }
        if let Some((lo, mid, hi)) = paired_ratios(&each[1][j], &each[0][j]) {
            println!("      per-round sealed/clear: median {mid:.2}x (min {lo:.2}x, max {hi:.2}x)");
        }
        if name == "get" {
            if let Some((lo, mid, hi)) = paired_ratios(&aead, &each[0][1]) {
                println!(
                    "      floor set by the AEAD alone ({:.0} ns/row), 1 + aead/clear: median {:.2}x (min {:.2}x, max {:.2}x)",
                    per(*aead.iter().min().unwrap(), rows),
                    1.0 + mid,
                    1.0 + lo,
                    1.0 + hi
                );
            }
        }
    }
    if side.is_empty() {
        rotation_bench(&values, rounds);
    }
}

/// The AEAD alone over the stored rows of sealed collection `c`: each row's stored bytes
/// copied into a reused buffer and opened in place, minus a pass that only copies them
/// (the get copies the row too, and the copy is what brings a cold row into the cache) —
/// what a sealed get adds to a clear one, without the store read, the envelope and the
/// JSON parse.
fn aead_pass(
    db: &Database,
    c: &strata::Collection<serde_json::Value>,
    keys: &[String],
) -> Duration {
    let sealer = db.sealer().unwrap();
    let rows: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .map(|k| {
            let full = c.key_of(k);
            let raw = db.store().get(&full).unwrap().unwrap();
            (full, raw)
        })
        .collect();
    let mut buf = Vec::with_capacity(4096);
    let t = Timer::start();
    for (_, raw) in &rows {
        buf.clear();
        buf.extend_from_slice(raw);
        black_box(&buf);
    }
    let copy = t.elapsed();
    let t = Timer::start();
    for (full, raw) in &rows {
        buf.clear();
        buf.extend_from_slice(raw);
        let head: [u8; envelope::ENVELOPE_HEADER_LEN] =
            raw[..envelope::ENVELOPE_HEADER_LEN].try_into().unwrap();
        let ctx = seal::RecordContext {
            key: full,
            collection_id: c.table_id(),
            header: &head,
        };
        sealer
            .open_in_place(ctx, &mut buf, envelope::ENVELOPE_HEADER_LEN)
            .unwrap();
        black_box(&buf);
    }
    t.elapsed().saturating_sub(copy)
}

/// `STRATA_BENCH_ONLY=steady`: the current-version get in a steady state — one sealed and
/// one clear collection of the same documents, flushed, every row read once untimed, then
/// `rounds` rounds of one timed pass per side (alternating which goes first) and one pass
/// of the AEAD alone ([`aead_pass`]). Prints the median of the paired ratios and the
/// floor the AEAD sets: `1 + aead / clear get`. `STRATA_BENCH_SIDE=sealed|clear` runs one
/// side only (for a profiler).
fn steady_bench(rows: usize, rounds: usize, docs: &[Vec<u8>]) {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_sled::SledStore::open_store(dir.path()).unwrap();
    let cred = Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast());
    let db = Database::builder(store.clone()).key(cred).open().unwrap();
    let side = std::env::var("STRATA_BENCH_SIDE").unwrap_or_default();
    let keys: Vec<String> = (0..rows).map(|i| format!("a{i:07}")).collect();
    let mut cs = Vec::new();
    for sealed in [false, true] {
        if (side == "sealed" && !sealed) || (side == "clear" && sealed) {
            continue;
        }
        let name = if sealed { "s" } else { "c" };
        let c = db
            .collection::<serde_json::Value>(name, coll_opts(sealed, false))
            .unwrap();
        for (k, d) in keys.iter().zip(docs) {
            c.put(k, &serde_json::from_slice(d).unwrap()).unwrap();
        }
        cs.push((sealed, c));
    }
    store.flush().unwrap();
    for (_, c) in &cs {
        get_pass(c, &keys);
    }
    let mut each: [Vec<Duration>; 3] = Default::default();
    for round in 0..rounds {
        for j in 0..cs.len() {
            let (sealed, c) = &cs[if round % 2 == 0 { j } else { cs.len() - 1 - j }];
            each[usize::from(*sealed)].push(get_pass(c, &keys));
            if *sealed {
                each[2].push(aead_pass(&db, c, &keys));
            }
        }
    }
    let per = |v: &[Duration]| {
        v.iter()
            .min()
            .map_or(f64::NAN, |d| d.as_nanos() as f64 / rows as f64)
    };
    println!(
        "steady get ({rows} rows, flushed, warm, best of {rounds}): sealed {:.0} ns/row  clear {:.0} ns/row  AEAD alone {:.0} ns/row",
        per(&each[1]),
        per(&each[0]),
        per(&each[2])
    );
    if let Some((lo, mid, hi)) = paired_ratios(&each[1], &each[0]) {
        println!("      per-round sealed/clear: median {mid:.2}x (min {lo:.2}x, max {hi:.2}x)");
    }
    if let Some((lo, mid, hi)) = paired_ratios(&each[2], &each[0]) {
        println!(
            "      floor set by the AEAD alone, 1 + aead/clear: median {:.2}x (min {:.2}x, max {:.2}x)",
            1.0 + mid,
            1.0 + lo,
            1.0 + hi
        );
    }
}

/// The min, median and max of the per-round ratios `sealed[r] / clear[r]` (both sides
/// ran in round `r`, back to back); `None` when a side did not run.
fn paired_ratios(sealed: &[Duration], clear: &[Duration]) -> Option<(f64, f64, f64)> {
    let mut r: Vec<f64> = sealed
        .iter()
        .zip(clear)
        .map(|(s, c)| s.as_secs_f64() / c.as_secs_f64())
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    Some((r[0], r[r.len() / 2], r[r.len() - 1]))
}

/// A fresh database holding one collection of `values` at payload version 1, sealed or
/// clear.
fn fresh_db(values: &[serde_json::Value], sealed: bool) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_sled::SledStore::open_store(dir.path()).unwrap();
    let cred = Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast());
    let db = Database::builder(store).key(cred).open().unwrap();
    let opts = if sealed {
        CollectionOptions::new().sealed()
    } else {
        CollectionOptions::new()
    };
    let c = db.collection::<serde_json::Value>("docs", opts).unwrap();
    for (i, v) in values.iter().enumerate() {
        c.put(&format!("a{i:07}"), v).unwrap();
    }
    (dir, db)
}

/// Rotation throughput: `rotate_data_key` over a fresh database of one sealed collection,
/// against the eager sweep of the same rows in a fresh database of one clear collection
/// (same store size, same scan; best of `rounds` each).
fn rotation_bench(values: &[serde_json::Value], rounds: usize) {
    let rows = values.len();
    let cred = Credential::passphrase("bench").with_kdf(KdfParams::insecure_fast());
    let (mut rot, mut sweep) = (Duration::MAX, Duration::MAX);
    for _ in 0..rounds {
        let (_dir, db) = fresh_db(values, true);
        let t = Timer::start();
        let report = db.rotate_data_key(&[&cred], RotateOptions::new()).unwrap();
        rot = rot.min(t.elapsed());
        assert_eq!(report.resealed() as usize, rows);
        drop(db);
        let (_dir, db) = fresh_db(values, false);
        let c = db
            .collection::<serde_json::Value>(
                "docs",
                CollectionOptions::new().upcast(1, Mode::Eager, |o| {
                    o.insert("v2".into(), serde_json::Value::Bool(true));
                    Ok(())
                }),
            )
            .unwrap();
        let t = Timer::start();
        let report = c.sweep(SweepOptions::new()).unwrap();
        sweep = sweep.min(t.elapsed());
        assert_eq!(report.rewritten() as usize, rows);
    }
    let r = rot.as_nanos() as f64 / rows as f64;
    let c = sweep.as_nanos() as f64 / rows as f64;
    println!(
        "rotate {r:>8.0} ns/row ({:.0} rows/s over {rows} sealed rows; clear sweep of as many \
         rows {c:.0} ns/row; ratio {:.2}x)",
        1e9 / r,
        r / c
    );
}
