//! Helpers shared by the CLI integration tests (one binary, `tests/it`): the `strata`
//! runner, its output as text or JSON, store seeders and snapshots, the PostgreSQL scratch tables.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};
use strata::numax::wire;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

/// Runs the `strata` binary with `args`.
pub fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `strata --db <db> <args>`.
pub fn strata_db(db: impl AsRef<OsStr>, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the `strata` binary with `args` and the environment variables `env` added.
pub fn strata_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Runs `strata --db <db> <args>` with the environment variables `env` added.
pub fn strata_db_env(db: impl AsRef<OsStr>, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The command's stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The command's stdout parsed as one JSON document (panics with both streams if not).
pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(out),
            stderr(out)
        )
    })
}

/// Opens the sled store at `db`, runs `f` on it and flushes it before it is closed.
pub fn with_store<R>(db: &Path, f: impl FnOnce(&Store) -> R) -> R {
    let store = strata_sled::SledStore::open_store(db).unwrap();
    let out = f(&store);
    store.flush().unwrap();
    out
}

/// Writes `n` legacy (header-less) Numax records to `store` — gcounters, seen-ops and
/// op-log entries, 4:3:3 — in batches of 1,000, and returns them. Not flushed.
pub fn legacy_records(store: &Store, n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut batch = Batch::new();
    for i in 0..n {
        let (k, v) = match i % 10 {
            0..=3 => (
                wire::key(wire::GCOUNTER_PREFIX, &format!("counter-{i:08}")),
                wire::encode_gcounter_materialized(i as u64),
            ),
            4..=6 => (
                wire::key(wire::SEEN_OP_PREFIX, &format!("op-{i:08}")),
                wire::encode_seen_op(i as u64),
            ),
            _ => {
                let id = format!("op-{i:08}");
                let op = wire::Op::new(
                    id.clone(),
                    "node-a",
                    wire::OpKind::GCounterIncrement {
                        key: format!("counter-{i:08}"),
                        increment: i as u64,
                    },
                );
                (
                    wire::key(wire::OP_LOG_PREFIX, &id),
                    wire::encode_op_log(i as u64, &op).unwrap(),
                )
            }
        };
        batch = batch.set(k.clone(), v.clone());
        all.insert(k, v);
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    all
}

/// Writes the collection `acc` into `store` — registered by opening it, then `docs`
/// documents `a00000`, `a00001`, … (document `i` is `body(i, id)`) at payload and lock
/// version 1, in batches of 500 — the source of the copy tests. Not flushed.
pub fn acc_documents(store: &Store, docs: u32, body: impl Fn(u32, &str) -> Value) {
    strata::Database::builder(store.clone())
        .open()
        .unwrap()
        .collection::<Value>("acc", strata::CollectionOptions::new())
        .unwrap();
    for chunk in (0..docs).collect::<Vec<_>>().chunks(500) {
        let mut b = Batch::new();
        for &i in chunk {
            let id = format!("a{i:05}");
            b = b.set(
                strata::layout::keys::doc_key("acc", &id),
                strata::layout::envelope::encode(
                    strata::layout::envelope::Envelope::new(1, 1),
                    &serde_json::to_vec(&body(i, &id)).unwrap(),
                ),
            );
        }
        store.apply(b).unwrap();
    }
}

/// Every record of `store` under `prefix`, read in pages.
pub fn scan_prefix(store: &Store, prefix: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut cursor: Option<Vec<u8>> = None;
    let limits = ScanLimits::new(4096, 1 << 24).unwrap();
    loop {
        let page = store.scan(prefix, cursor.as_deref(), limits).unwrap();
        for r in &page.records {
            out.insert(r.key.clone(), r.value.clone());
        }
        match page.cursor() {
            Some(c) if page.more => cursor = Some(c.to_vec()),
            _ => break,
        }
    }
    out
}

/// Every record of `store`.
pub fn snapshot(store: &Store) -> BTreeMap<Vec<u8>, Vec<u8>> {
    scan_prefix(store, b"")
}

/// The payload records of a snapshot: without schema headers, migration checkpoints,
/// manifests and the manifest epoch.
pub fn payload(all: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    all.iter()
        .filter(|(k, _)| {
            !k.starts_with(b"__nx/schema/")
                && !k.starts_with(b"__nx/migration/")
                && !k.starts_with(b"__nx/manifest")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// PostgreSQL: the server of `STRATA_PG_URL` and scratch tables on it.
#[cfg(feature = "postgres")]
pub mod pg {
    use strata_postgres::{PgOptions, PgStore};
    use strata_store::Store;

    /// `STRATA_PG_URL` at run time, else the value the tests were built with.
    pub fn pg_url() -> String {
        std::env::var("STRATA_PG_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
            .expect("STRATA_PG_URL is set (these tests are ignored otherwise)")
    }

    /// A table name no other test (or test process) uses: `<prefix>_<pid>_<n>_<nanos>`.
    pub fn scratch_table(prefix: &str) -> String {
        strata_postgres::testing::scratch_table(prefix)
    }

    /// `url` with extra query parameters.
    pub fn with_params(url: &str, params: &str) -> String {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{params}")
    }

    /// The `--db` of a scratch table: writers wait up to 2 minutes for a lease (the
    /// machine may be slow), nothing else changed.
    pub fn db_url(table: &str) -> String {
        with_params(
            &pg_url(),
            &format!("strata_table={table}&strata_lock_wait=120"),
        )
    }

    /// The handle that owns a scratch table (drops it when dropped).
    pub fn owner(table: &str) -> Store {
        Store::new(
            PgStore::connect_with(
                &pg_url(),
                PgOptions::new().table(table).dangerous_drop_table_on_drop(),
            )
            .unwrap(),
        )
    }
}

/// Every command a user runs on one store, the read-only ones first, then the ones that
/// write (`copy`, which names two stores, is not among them): `table` is the one
/// `inspect` shows, `collection` the one `schema show|log` names.
pub fn store_commands<'a>(table: &'a str, collection: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["status"],
        vec!["status", "--json"],
        vec!["verify"],
        vec!["verify", "--json"],
        vec!["collections"],
        vec!["collections", "--json"],
        vec!["inspect", table],
        vec!["schema", "show", collection],
        vec!["schema", "log", collection],
        vec!["fence"],
        vec!["keys", "status"],
        vec!["repair"],
        vec!["migrate", "--dry-run"],
        vec!["migrate"],
        vec!["repair", "--apply"],
        vec!["fence", "abort"],
    ]
}

/// The names of the entries of `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
