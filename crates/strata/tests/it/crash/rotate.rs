//! Real crash test of the data-key rotation (harness = false).
//!
//! The parent seeds two sealed collections in a sled datastore, then repeatedly runs this
//! same binary as a child (`STRATA_CRASH_ROLE=rotator`) that rotates the data key through
//! the bulk pass and reports every committed batch on stdout, and SIGKILLs it after a
//! random number of reports (0..=120: a kill may land before the rotation even began; the
//! child keeps running until the signal lands, so the kill hits a random point of a
//! batch), `STRATA_CRASH_ITERS` times (default 6). After every kill it reopens the store
//! and checks: the keyring unlocks; every record opens (under the old or the new key —
//! both are held while the rotation is in progress) with its own content, exactly once
//! (no record lost or duplicated); only keys 1 and 2 occur; the number of records under
//! the new key never decreases. A final uninterrupted run must finish, after which every
//! record is sealed under key 2, key 1 is wrapped by no entry, the rotation checkpoints
//! are gone and the collections read back through the `Database` API.
//!
//! `STRATA_CRASH_ROWS` overrides the rows per collection (default 10 000).

use super::harness::{env_usize, kill_after, run_to_end, Rng};
use serde::{Deserialize, Serialize};
use std::time::Instant;
use strata::layout;
use strata::layout::envelope::{Envelope, ENVELOPE_HEADER_LEN};
use strata::ops::rotate::{rotate_data_key, rotation_checkpoint_key, RotateOptions};
use strata::pass::PassLimits;
use strata::seal::{body_key_id, open_document, seal_document, Credential, KdfParams, Keyring};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const COLLECTIONS: [&str; 2] = ["accounts", "ledger"];

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    n: u64,
}

fn cred() -> Credential {
    Credential::passphrase("crash test passphrase").with_kdf(KdfParams::insecure_fast())
}

fn open(dir: &std::path::Path) -> Store {
    strata_sled::SledStore::open_store(dir).unwrap()
}

fn rows() -> usize {
    std::env::var("STRATA_CRASH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// The child: reports its role, then works on the store at `dir` until killed.
pub fn child(dir: &str) {
    let store = open(std::path::Path::new(dir));
    println!("role=rotator ready");
    let report = rotate_data_key(
        &store,
        &[&cred()],
        RotateOptions::new()
            .limits(PassLimits::new(128, 16_000).unwrap())
            .on_progress(|_| println!("batch")),
    )
    .unwrap();
    println!("done finished={}", report.finished);
}

/// A tiny xorshift generator seeded from the clock (the seed is printed).
fn seed(dir: &std::path::Path, n: usize) {
    let store = open(dir);
    let db = Database::builder(store.clone()).key(cred()).open().unwrap();
    let sealer = db.sealer().unwrap();
    for name in COLLECTIONS {
        let c = db
            .collection::<Doc>(name, CollectionOptions::new().sealed())
            .unwrap();
        let mut b = Batch::new();
        for i in 0..n {
            let id = format!("d{i:07}");
            let key = layout::keys::doc_key(name, &id);
            let json = format!(r#"{{"id":"{name}/{id}","n":{i}}}"#);
            let value = seal_document(
                &sealer,
                &key,
                c.table_id(),
                Envelope::new(1, 1),
                json.as_bytes(),
            )
            .unwrap();
            b = b.set(key, value);
            if (i + 1) % 2000 == 0 {
                store.apply(std::mem::take(&mut b)).unwrap();
            }
        }
        if !b.is_empty() {
            store.apply(b).unwrap();
        }
    }
    store.flush().unwrap();
}

/// Opens every record; returns how many are sealed under the new key (2) and whether
/// the rotation is finished.
fn check(dir: &std::path::Path, n: usize) -> (usize, bool) {
    let store = open(dir);
    let ring = Keyring::database();
    let sealer = ring.unlock(&store, &cred()).unwrap();
    let (_, rec) = ring.read(&store).unwrap().unwrap();
    let finished = rec.retiring_key_id().is_none() && rec.active_key_id() == 2;
    let db = Database::builder(store.clone()).open().unwrap();
    let mut under_new = 0;
    for name in COLLECTIONS {
        let table_id = db
            .collections()
            .unwrap()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap()
            .table_id;
        let prefix = layout::keys::doc_prefix(name);
        let mut seen = vec![false; n];
        let mut after: Option<Vec<u8>> = None;
        let limits = ScanLimits::new(5_000, 64 << 20).unwrap();
        loop {
            let page = store.scan(&prefix, after.as_deref(), limits).unwrap();
            for r in &page.records {
                let id = std::str::from_utf8(&r.key[prefix.len()..]).unwrap();
                let key_id = body_key_id(&r.value[ENVELOPE_HEADER_LEN..]).unwrap();
                assert!(key_id == 1 || key_id == 2, "{name}/{id}: key {key_id}");
                if finished {
                    assert_eq!(key_id, 2, "{name}/{id}: old key after the finish");
                }
                under_new += usize::from(key_id == 2);
                let (env, json) = open_document(&sealer, &r.key, table_id, &r.value)
                    .unwrap_or_else(|e| panic!("{name}/{id} does not open: {e}"));
                assert_eq!(env, Envelope::new(1, 1), "{name}/{id}: envelope changed");
                let doc: Doc = serde_json::from_slice(&json).unwrap();
                assert_eq!(doc.id, format!("{name}/{id}"), "content moved");
                let i = doc.n as usize;
                assert_eq!(id, format!("d{i:07}"));
                assert!(!seen[i], "{name}/{id} twice");
                seen[i] = true;
            }
            if !page.more {
                break;
            }
            after = page.cursor().map(<[u8]>::to_vec);
        }
        assert!(seen.iter().all(|s| *s), "{name}: records lost");
    }
    (under_new, finished)
}

/// The parent: seeds, kills the child `STRATA_CRASH_ITERS` times, checks each time.
pub fn run() {
    let iters = env_usize("STRATA_CRASH_ITERS", 6);
    let n = rows();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let started = Instant::now();
    seed(&dir, n);
    let mut rng = Rng::from_env_or_time();
    let seed_rng = rng.seed();
    println!(
        "crash_rotate: {} rows seeded in {:?}, rng seed {seed_rng}",
        2 * n,
        started.elapsed()
    );
    let mut last_new = 0;
    let mut kills = 0;
    for i in 0..iters {
        let reports = rng.next() % 121;
        let finished = kill_after("rotator", &dir, reports, "done");
        if !finished {
            kills += 1;
        }
        let (under_new, done) = check(&dir, n);
        assert!(
            under_new >= last_new,
            "records under the new key went from {last_new} to {under_new}"
        );
        last_new = under_new;
        println!(
            "crash_rotate: iteration {i}: killed after {reports} batch reports (finished first: {finished}); {under_new} of {} under the new key, finished: {done}",
            2 * n
        );
        if done {
            break;
        }
    }
    assert!(kills > 0, "no kill landed before the rotation finished");
    // Rerun to completion (resumes; a no-op start is impossible: the rotation either is in
    // progress or finished above).
    let (_, done) = check(&dir, n);
    if !done {
        let line = run_to_end("rotator", &dir, "done");
        assert_eq!(line.trim(), "done finished=true");
    }
    let (under_new, done) = check(&dir, n);
    assert!(done, "the rotation did not finish");
    assert_eq!(under_new, 2 * n, "every record under the new key");
    let store = open(&dir);
    let (_, rec) = Keyring::database().read(&store).unwrap().unwrap();
    assert!(
        rec.entries().iter().all(|e| e.key_ids == vec![2]),
        "the old key is removed from every entry"
    );
    for name in COLLECTIONS {
        assert_eq!(store.get(&rotation_checkpoint_key(name)).unwrap(), None);
    }
    // Read back through the API with the key.
    let db = Database::builder(store).key(cred()).open().unwrap();
    for name in COLLECTIONS {
        let c = db
            .collection::<Doc>(name, CollectionOptions::new().sealed())
            .unwrap();
        assert_eq!(c.get("d0000007").unwrap().unwrap().n, 7);
        assert_eq!(c.iter().count(), n);
    }
    println!(
        "crash_rotate: ok ({kills} kills of {iters}, {} rows, {:?})",
        2 * n,
        started.elapsed()
    );
}
