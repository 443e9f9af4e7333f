//! Writers that scale (issue 24 item 3): writers of different documents through ONE
//! handle never wait for each other on strata's own locks — the store handle's write
//! gate, the manifest watch, the policy's fence and registry checks, the sealer, sled's
//! writer lock. Proven without timing: one writer is held inside its decision (inside
//! every lock strata takes for a write) while another writer of another document, through
//! the same collection handle, must finish.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata::policy::SchemaOptions;
use strata::policy::{additive_only, PolicyConfig};
use strata::seal::{Credential, KdfParams};
use strata::{CollectionOptions, Database};
use strata_store::{
    Backend, Capabilities, Decide, KvRead, KvWrite, Result, ScanLimits, Store, Visit, VisitEnd,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Doc {
    id: String,
    n: u64,
}

/// A backend that, once armed, holds the first decided write of a key ending in `slow`
/// inside its decision (the caller's locks all held) until told to go on.
#[derive(Debug)]
struct Holding<B> {
    inner: B,
    #[allow(clippy::type_complexity)]
    hold: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    /// Calls of `get` and of the write primitive.
    gets: AtomicUsize,
    writes: AtomicUsize,
}

impl<B: KvRead> KvRead for Holding<B> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl<B: KvWrite> KvWrite for Holding<B> {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let slow = reads.first().is_some_and(|k| k.ends_with(b"slow"));
        let held = if slow {
            self.hold.lock().unwrap().take()
        } else {
            None
        };
        let mut held = held;
        self.inner.read_modify_write(reads, &mut |values| {
            let batch = decide(values);
            if let Some((entered, go)) = held.take() {
                entered.send(()).unwrap();
                // Bounded: a writer that never gets its turn fails the test instead of
                // hanging it (the other side sends `go` in every case).
                go.recv_timeout(Duration::from_secs(120)).unwrap();
            }
            batch
        })
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

impl<B: Backend> Backend for Holding<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// Holds a write of `slow` inside its decision and requires a write of `fast` through the
/// same collection handle to finish meanwhile.
fn writers_do_not_wait(policy: bool, sealed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(Holding {
        inner: strata_sled::SledStore::open(dir.path().join("db")).unwrap(),
        hold: Mutex::new(None),
        gets: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
    });
    let store = Store::from_arc(backend.clone());
    let mut b = Database::builder(store);
    if policy {
        b = b.policy(PolicyConfig::new().heartbeat(None));
    }
    if sealed {
        b = b.key(Credential::passphrase("pw").with_kdf(KdfParams::insecure_fast()));
    }
    let db = b.open().unwrap();
    let mut options = CollectionOptions::new();
    if policy {
        options = options.schema(SchemaOptions::of::<Doc>().strategy(additive_only()));
    }
    if sealed {
        options = options.sealed();
    }
    let docs = db.collection::<Doc>("docs", options).unwrap();
    // A first write, as any handle makes before the steady state (it reads the fence and
    // the guards once).
    docs.put(
        "warm",
        &Doc {
            id: "warm".into(),
            n: 0,
        },
    )
    .unwrap();

    let (entered_tx, entered_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    *backend.hold.lock().unwrap() = Some((entered_tx, go_rx));
    std::thread::scope(|s| {
        let slow = s.spawn(|| {
            docs.put(
                "slow",
                &Doc {
                    id: "slow".into(),
                    n: 1,
                },
            )
        });
        entered_rx.recv().unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        let docs = &docs;
        let fast = s.spawn(move || {
            let r = docs.put(
                "fast",
                &Doc {
                    id: "fast".into(),
                    n: 2,
                },
            );
            done_tx.send(()).unwrap();
            r
        });
        let finished = done_rx.recv_timeout(Duration::from_secs(60));
        // Released in every case, so a failure below does not hang the scope.
        go_tx.send(()).unwrap();
        assert!(
            finished.is_ok(),
            "a write of another document waited for the held one (policy {policy}, sealed {sealed}): writers serialize"
        );
        assert_eq!(fast.join().unwrap().unwrap(), 1);
        assert_eq!(slow.join().unwrap().unwrap(), 1);
    });
    for (key, n) in [("warm", 0), ("slow", 1), ("fast", 2)] {
        assert_eq!(docs.get(key).unwrap().map(|d| d.n), Some(n), "{key}");
    }
}

#[test]
fn writers_of_different_documents_do_not_wait_for_each_other() {
    writers_do_not_wait(false, false);
}

#[test]
fn writers_under_policy_do_not_wait_for_each_other() {
    writers_do_not_wait(true, false);
}

#[test]
fn sealed_writers_under_policy_do_not_wait_for_each_other() {
    writers_do_not_wait(true, true);
}

/// A sealed put under policy on redb is ONE call of the write primitive — one redb write
/// transaction — and no read before it (issue 24: the document, the fence, the window
/// record and the keyring are all read inside that transaction), for a new document and
/// for an overwrite; a sealed update likewise.
#[test]
fn a_sealed_put_on_redb_is_one_write_transaction_and_no_separate_read() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(Holding {
        inner: strata_redb::RedbStore::create(dir.path().join("s.redb")).unwrap(),
        hold: Mutex::new(None),
        gets: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
    });
    let db = Database::builder(Store::from_arc(backend.clone()))
        .policy(PolicyConfig::new().heartbeat(None))
        .key(Credential::passphrase("pw").with_kdf(KdfParams::insecure_fast()))
        .open()
        .unwrap();
    let docs = db
        .collection::<Doc>(
            "docs",
            CollectionOptions::new()
                .schema(SchemaOptions::of::<Doc>().strategy(additive_only()))
                .sealed(),
        )
        .unwrap();
    docs.put(
        "warm",
        &Doc {
            id: "warm".into(),
            n: 0,
        },
    )
    .unwrap();
    let counts = || {
        (
            backend.gets.swap(0, Ordering::SeqCst),
            backend.writes.swap(0, Ordering::SeqCst),
        )
    };
    counts();
    docs.put(
        "a",
        &Doc {
            id: "a".into(),
            n: 1,
        },
    )
    .unwrap();
    assert_eq!(
        counts(),
        (0, 1),
        "a new sealed document: (gets, write calls)"
    );
    let lock = docs
        .put(
            "a",
            &Doc {
                id: "a".into(),
                n: 2,
            },
        )
        .unwrap();
    assert_eq!(counts(), (0, 1), "an overwrite: (gets, write calls)");
    docs.update(
        "a",
        &Doc {
            id: "a".into(),
            n: 3,
        },
        lock,
    )
    .unwrap();
    assert_eq!(counts(), (0, 1), "an update: (gets, write calls)");
    assert_eq!(docs.get("a").unwrap().map(|d| d.n), Some(3));
}
