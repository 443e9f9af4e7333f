//! Data-key rotation through the bulk pass (issue 15): every sealed record re-encrypted
//! under the new key, resumable after a failed write at any batch, both keys readable
//! until it finishes, then the old key removed; sealed writes racing a rotation never
//! land under a retired key. The real kill test (SIGKILL of a child) is
//! `tests/it/crash/rotate.rs`.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use strata::layout::envelope::ENVELOPE_HEADER_LEN;
use strata::ops::rotate::{rotation_checkpoint_key, RotateOptions};
use strata::pass::testing::FaultyStore;
use strata::pass::PassLimits;
use strata::seal::{
    body_key_id, peek, Credential, KdfParams, Keyring, SealError, DATABASE_KEYRING_KEY,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Backend, Batch, KvRead, KvWrite, MemoryStore, ScanLimits, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    id: String,
    n: u64,
}

fn pass(p: &str) -> Credential {
    Credential::passphrase(p).with_kdf(KdfParams::insecure_fast())
}

fn alice() -> Credential {
    pass("alice's passphrase")
}

fn open(store: &Store) -> Database {
    Database::builder(store.clone())
        .key(alice())
        .open()
        .unwrap()
}

fn all(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(100_000, 1 << 26).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

/// Data key ids of every sealed document, and how many clear ones.
fn key_ids(store: &Store) -> (Vec<u32>, usize) {
    let mut ids = Vec::new();
    let mut clear = 0;
    for (k, v) in all(store) {
        if !k.starts_with(b"__nx/doc/") {
            continue;
        }
        match peek(&v) {
            Some((_, true)) => ids.push(body_key_id(&v[ENVELOPE_HEADER_LEN..]).unwrap()),
            _ => clear += 1,
        }
    }
    (ids, clear)
}

/// Two sealed collections (`a`: 40 docs, `b`: 25) and a clear one (`c`: 10).
fn seed(store: &Store) -> Database {
    let db = open(store);
    for (name, n) in [("a", 40), ("b", 25)] {
        let c = db
            .collection::<Doc>(name, CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..n {
            c.put(
                &format!("{i:03}"),
                &Doc {
                    id: format!("{name}{i}"),
                    n: i,
                },
            )
            .unwrap();
        }
    }
    let c = db.collection::<Doc>("c", CollectionOptions::new()).unwrap();
    for i in 0..10 {
        c.put(
            &format!("{i:03}"),
            &Doc {
                id: format!("c{i}"),
                n: i,
            },
        )
        .unwrap();
    }
    db
}

/// Every document readable exactly once with the right content.
fn check_docs(db: &Database) {
    for (name, n, sealed) in [("a", 40u64, true), ("b", 25, true), ("c", 10, false)] {
        let opts = if sealed {
            CollectionOptions::new().sealed()
        } else {
            CollectionOptions::new()
        };
        let c = db.collection::<Doc>(name, opts).unwrap();
        let docs: Vec<_> = c.iter().map(|d| d.unwrap()).collect();
        assert_eq!(docs.len() as u64, n, "{name}");
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(d.key, format!("{i:03}"));
            assert_eq!(d.value.id, format!("{name}{i}"));
            assert_eq!(d.value.n, i as u64);
            assert_eq!(d.lock_version, 1, "a rotation is not a document write");
        }
    }
}

fn small() -> PassLimits {
    PassLimits::new(7, 1 << 20).unwrap()
}

/// Starts a data-key rotation and aborts it after three batches: some records under key
/// 2, the rest still under key 1.
fn rotate_partway(db: &Database, store: &Store) {
    let mut batches = 0;
    let report = db
        .rotate_data_key(
            &[&alice()],
            RotateOptions::new().limits(small()).abort_when(|| {
                batches += 1;
                batches > 3
            }),
        )
        .unwrap();
    assert!(report.aborted && !report.finished);
    let (ids, _) = key_ids(store);
    assert!(ids.contains(&1) && ids.contains(&2), "{ids:?}");
}

#[test]
fn rotation_reseals_every_record_then_removes_the_old_key() {
    let store = Store::new(MemoryStore::new());
    let db = seed(&store);
    let clear_before: Vec<_> = all(&store)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/c/"))
        .collect();
    assert_eq!(key_ids(&store), (vec![1; 65], 10));

    let report = db
        .rotate_data_key(&[&alice()], RotateOptions::new().limits(small()))
        .unwrap();
    assert!(report.began && report.finished && !report.aborted);
    assert_eq!((report.old_key_id, report.new_key_id), (1, 2));
    assert_eq!(report.resealed(), 65);
    assert_eq!(report.collections.len(), 3);
    assert_eq!(report.collections[2].unchanged, 10, "clear rows left alone");
    assert_eq!(key_ids(&store), (vec![2; 65], 10));
    let (_, rec) = Keyring::database().read(&store).unwrap().unwrap();
    assert_eq!(rec.active_key_id(), 2);
    assert_eq!(rec.retiring_key_id(), None);
    assert!(rec.entries().iter().all(|e| e.key_ids == vec![2]));
    // Checkpoints are gone, clear rows byte-identical.
    for name in ["a", "b", "c"] {
        assert_eq!(store.get(&rotation_checkpoint_key(name)).unwrap(), None);
    }
    let clear_after: Vec<_> = all(&store)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/c/"))
        .collect();
    assert_eq!(clear_before, clear_after);
    // This handle (refreshed) and a fresh one read everything.
    check_docs(&db);
    check_docs(&open(&store));
    assert_eq!(db.sealer().unwrap().key_ids(), vec![2]);

    // A second rotation: 2 → 3.
    let report = db
        .rotate_data_key(&[&alice()], RotateOptions::new())
        .unwrap();
    assert_eq!((report.old_key_id, report.new_key_id), (2, 3));
    assert_eq!(key_ids(&store), (vec![3; 65], 10));
    check_docs(&open(&store));
}

#[test]
fn both_keys_open_every_record_until_the_rotation_finishes() {
    let store = Store::new(MemoryStore::new());
    let db = seed(&store);
    // A handle opened before the rotation: it only knows key 1.
    let before = open(&store);
    assert_eq!(before.sealer().unwrap().key_ids(), vec![1]);

    // Abort part-way: some records under key 2, the rest under key 1.
    rotate_partway(&db, &store);
    check_docs(&before); // refreshes on the first record under key 2
    check_docs(&open(&store));

    // Resume without finishing: every record under key 2, key 1 still held.
    let report = db
        .rotate_data_key(
            &[&alice()],
            RotateOptions::new().limits(small()).finish(false),
        )
        .unwrap();
    assert!(!report.began && !report.finished);
    assert!(report.collections[0].resumed_from.is_some());
    assert_eq!(key_ids(&store), (vec![2; 65], 10));
    assert_eq!(
        Keyring::database()
            .read(&store)
            .unwrap()
            .unwrap()
            .1
            .retiring_key_id(),
        Some(1)
    );
    // Finishing now re-scans nothing: every collection is done.
    let report = db
        .rotate_data_key(&[&alice()], RotateOptions::new())
        .unwrap();
    assert!(report.finished && report.collections.iter().all(|c| c.already_done));
    assert_eq!(report.resealed(), 0);
    check_docs(&before);
}

#[test]
fn a_rotation_failing_at_any_write_resumes_and_reseals_every_record_once() {
    // Write 1 is the begin; every later write is one batch (or the finish).
    for crash_at in 1..=14 {
        let inner = Store::new(MemoryStore::new());
        seed(&inner);
        let faulty = Store::new(FaultyStore::crash_at_write(
            inner.unguarded_backend(),
            crash_at,
        ));
        let err = strata::ops::rotate::rotate_data_key(
            &faulty,
            &[&alice()],
            RotateOptions::new().limits(small()),
        );
        if let Ok(r) = &err {
            assert!(r.finished);
            assert!(crash_at > 13, "crash at {crash_at} should have failed");
        }
        // Resume on the healthy store: completes, every record under key 2 exactly once.
        let report =
            strata::ops::rotate::rotate_data_key(&inner, &[&alice()], RotateOptions::new())
                .unwrap();
        assert!(report.finished, "crash at {crash_at}");
        assert_eq!(report.began, crash_at == 1, "crash at {crash_at}");
        assert_eq!(key_ids(&inner), (vec![2; 65], 10), "crash at {crash_at}");
        check_docs(&open(&inner));
        let (_, rec) = Keyring::database().read(&inner).unwrap().unwrap();
        assert_eq!((rec.active_key_id(), rec.retiring_key_id()), (2, None));
    }
}

#[test]
fn a_record_that_fails_to_open_keeps_the_old_key() {
    let store = Store::new(MemoryStore::new());
    let db = seed(&store);
    let k = b"__nx/doc/b/007".to_vec();
    let mut v = store.get(&k).unwrap().unwrap();
    let last = v.len() - 1;
    v[last] ^= 1;
    store.apply(Batch::new().set(k.clone(), v)).unwrap();

    let err = db
        .rotate_data_key(&[&alice()], RotateOptions::new().limits(small()))
        .unwrap_err();
    assert!(
        matches!(&err, SealError::RotationIncomplete { collection, failed: 1 } if collection == "b"),
        "{err}"
    );
    assert!(err.to_string().contains("the old key was kept"), "{err}");
    let (_, rec) = Keyring::database().read(&store).unwrap().unwrap();
    assert_eq!(rec.retiring_key_id(), Some(1), "old key kept");
    // Every other record moved to key 2.
    let (ids, _) = key_ids(&store);
    assert_eq!(ids.iter().filter(|i| **i == 1).count(), 1);

    // Rerunning without fixing it still refuses; after deleting it the rotation finishes.
    assert!(db
        .rotate_data_key(&[&alice()], RotateOptions::new())
        .is_err());
    store.apply(Batch::new().delete(k)).unwrap();
    let report = db
        .rotate_data_key(&[&alice()], RotateOptions::new())
        .unwrap();
    assert!(report.finished);
    assert_eq!(key_ids(&store), (vec![2; 64], 10));
}

#[test]
fn starting_needs_every_entry_and_a_wrong_key_writes_nothing() {
    let store = Store::new(MemoryStore::new());
    seed(&store);
    let before = all(&store);
    let err = strata::ops::rotate::rotate_data_key(&store, &[&pass("nope")], RotateOptions::new())
        .unwrap_err();
    assert!(err.is_wrong_key(), "{err}");
    assert_eq!(all(&store), before);

    let kms = Credential::raw_key(&[7; 32]).unwrap();
    Keyring::database()
        .add_entry(&store, &alice(), "kms", &kms)
        .unwrap();
    let before = all(&store);
    let err = strata::ops::rotate::rotate_data_key(&store, &[&alice()], RotateOptions::new())
        .unwrap_err();
    assert!(
        matches!(&err, SealError::RotationNeedsEveryEntry { missing, .. } if missing == &["kms".to_string()]),
        "{err}"
    );
    assert_eq!(all(&store), before);
    // With both: the new key is wrapped under both entries; either opens it afterwards.
    strata::ops::rotate::rotate_data_key(&store, &[&alice(), &kms], RotateOptions::new()).unwrap();
    for cred in [&alice(), &kms] {
        let s = Keyring::database().unlock(&store, cred).unwrap();
        assert_eq!(s.key_ids(), vec![2]);
    }
}

/// A backend that, once armed, begins a data-key rotation on the inner store right before
/// the next write commits: the write was sealed under the old key by a handle that did
/// not see the rotation.
#[derive(Debug)]
struct RotateBeforeWrite {
    inner: Store,
    armed: AtomicBool,
}

impl KvRead for RotateBeforeWrite {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for RotateBeforeWrite {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let inner = self.inner.unguarded_backend();
        strata_store::faults::read_decide_write(inner.as_ref(), reads, decide, &mut |_| {
            if self.armed.swap(false, Ordering::SeqCst) {
                Keyring::database()
                    .begin_rotation(&self.inner, &[&alice()])
                    .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            }
            Ok(())
        })
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}

impl Backend for RotateBeforeWrite {
    fn name(&self) -> &'static str {
        "rotate-before-write"
    }
}

#[test]
fn a_write_sealed_under_a_key_a_rotation_just_retired_retries_under_the_new_key() {
    let inner = Store::new(MemoryStore::new());
    seed(&inner);
    let racing = Arc::new(RotateBeforeWrite {
        inner: inner.clone(),
        armed: AtomicBool::new(false),
    });
    let store = Store::from_arc(racing.clone() as Arc<dyn Backend>);
    let db = open(&store);
    let a = db
        .collection::<Doc>("a", CollectionOptions::new().sealed())
        .unwrap();
    assert_eq!(db.sealer().unwrap().key_ids(), vec![1]);

    // The put seals under key 1; the rotation begins before it commits.
    racing.armed.store(true, Ordering::SeqCst);
    a.put(
        "new",
        &Doc {
            id: "new".into(),
            n: 99,
        },
    )
    .unwrap();
    assert!(!racing.armed.load(Ordering::SeqCst), "the rotation ran");
    let v = inner.get(b"__nx/doc/a/new").unwrap().unwrap();
    assert_eq!(
        body_key_id(&v[ENVELOPE_HEADER_LEN..]),
        Some(2),
        "the write retried under the new key instead of landing under the retiring one"
    );
    assert_eq!(
        db.sealer().unwrap().active_key_id(),
        2,
        "the handle refreshed"
    );

    // The rotation completes; the record written during it opens with the new key only.
    let report =
        strata::ops::rotate::rotate_data_key(&inner, &[&alice()], RotateOptions::new()).unwrap();
    assert!(report.finished);
    assert_eq!(
        report.collections[0].unchanged, 1,
        "`new` was already under key 2"
    );
    let fresh = open(&inner);
    let a = fresh
        .collection::<Doc>("a", CollectionOptions::new().sealed())
        .unwrap();
    assert_eq!(a.get("new").unwrap().unwrap().n, 99);
    assert_eq!(a.iter().count(), 41);

    // Without the keyring precondition the same write would have landed under key 1:
    // after the finish it would be unreadable. The bare primitive shows it.
    let stale = Keyring::database().unlock(&inner, &alice()).unwrap();
    Keyring::database()
        .begin_rotation(&inner, &[&alice()])
        .unwrap();
    let key = b"__nx/doc/a/late".to_vec();
    let value = strata::seal::seal_document(
        &stale,
        &key,
        a.table_id(),
        strata::layout::envelope::Envelope::new(1, 1),
        br#"{"id":"late","n":1}"#,
    )
    .unwrap();
    let mut batch = Batch::new().set(key.clone(), value);
    batch.push_precondition(stale.keyring_precondition());
    assert!(inner.apply(batch).unwrap_err().is_conflict());
    assert_eq!(inner.get(&key).unwrap(), None);
    assert!(inner.get(DATABASE_KEYRING_KEY).unwrap().is_some());
}

#[test]
fn a_sweep_batch_racing_a_rotation_reseals_under_the_new_key() {
    let inner = Store::new(MemoryStore::new());
    seed(&inner); // `a`: 40 sealed docs at v1
    let racing = Arc::new(RotateBeforeWrite {
        inner: inner.clone(),
        armed: AtomicBool::new(false),
    });
    let store = Store::from_arc(racing.clone() as Arc<dyn Backend>);
    let db = open(&store);
    let a = db
        .collection::<Doc>(
            "a",
            CollectionOptions::new()
                .sealed()
                .upcast(1, strata::Mode::Eager, |_| Ok(())),
        )
        .unwrap();
    // The sweep's claim is the first write: arm after it, so the rotation begins right
    // before the first batch of rows (sealed under key 1) commits.
    let armed = Arc::clone(&racing);
    let first = Arc::new(AtomicBool::new(true));
    let report = a
        .sweep(
            strata::ops::sweep::SweepOptions::new()
                .limits(small())
                .abort_when(move || {
                    if first.swap(false, Ordering::SeqCst) {
                        armed.armed.store(true, Ordering::SeqCst);
                    }
                    false
                }),
        )
        .unwrap();
    assert!(!racing.armed.load(Ordering::SeqCst), "the rotation ran");
    assert_eq!(report.rewritten(), 40);
    let ids: Vec<u32> = all(&inner)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/a/"))
        .map(|(_, v)| body_key_id(&v[ENVELOPE_HEADER_LEN..]).unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![2; 40],
        "no swept row landed under the retiring key"
    );
    // Finishing the rotation leaves every row readable.
    strata::ops::rotate::rotate_data_key(&inner, &[&alice()], RotateOptions::new()).unwrap();
    let fresh = open(&inner);
    let a = fresh
        .collection::<Doc>("a", CollectionOptions::new().sealed())
        .unwrap();
    assert_eq!(a.iter().filter(|d| d.is_ok()).count(), 40);
}

/// `get` decrypts a current sealed row in place in the buffer the store returned: a
/// handle unlocked before a rotation started elsewhere meets rows under the new key,
/// refreshes its keys once (the buffer untouched by the failed lookup) and reads every
/// row, old key and new alike; `get_document` and `get` agree; reads write nothing.
#[test]
fn get_on_a_handle_older_than_a_rotation_reads_rows_under_either_key() {
    let store = Store::new(MemoryStore::new());
    let db = seed(&store);
    let before = open(&store);
    rotate_partway(&db, &store);
    assert_eq!(before.sealer().unwrap().key_ids(), vec![1]);
    let snapshot = all(&store);
    for (name, n) in [("a", 40u64), ("b", 25)] {
        let c = before
            .collection::<Doc>(name, CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..n {
            let id = format!("{i:03}");
            let want = Doc {
                id: format!("{name}{i}"),
                n: i,
            };
            assert_eq!(c.get(&id).unwrap(), Some(want.clone()), "{name}/{id}");
            let d = c.get_document(&id).unwrap().unwrap();
            assert_eq!((d.value, d.lock_version, d.upcast), (want, 1, false));
        }
        assert_eq!(c.get("999").unwrap(), None);
    }
    assert_eq!(before.sealer().unwrap().key_ids(), vec![1, 2], "refreshed");
    assert_eq!(all(&store), snapshot, "reads wrote nothing");
}
