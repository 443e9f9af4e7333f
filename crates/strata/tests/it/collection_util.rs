//! Shared helpers of the collection, payload and sweep tests.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::layout::envelope::{self, Envelope};
use strata::Database;
use strata_store::{Backend, Batch, KvRead, KvWrite, MemoryStore, Result, ScanLimits, Store};

/// The document type most tests use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub id: String,
    #[serde(default)]
    pub balance_cents: i64,
}

pub fn account(id: &str, cents: i64) -> Account {
    Account {
        id: id.into(),
        balance_cents: cents,
    }
}

pub fn mem_store() -> Store {
    Store::new(MemoryStore::new())
}

pub fn mem_db() -> (Store, Database) {
    let store = mem_store();
    let db = Database::builder(store.clone()).open().unwrap();
    (store, db)
}

/// Writes a raw document value (an envelope at `version` with `json`) behind the API.
pub fn raw_put(store: &Store, collection: &str, id: &str, version: i32, lock: u64, json: &str) {
    let key = strata::layout::keys::doc_key(collection, id);
    store
        .apply(Batch::new().set(
            key,
            envelope::encode(Envelope::new(version, lock), json.as_bytes()),
        ))
        .unwrap();
}

pub fn raw_get(store: &Store, collection: &str, id: &str) -> Option<Vec<u8>> {
    store
        .get(&strata::layout::keys::doc_key(collection, id))
        .unwrap()
}

pub fn stored_env(store: &Store, collection: &str, id: &str) -> Envelope {
    let bytes = raw_get(store, collection, id).unwrap();
    envelope::decode(&bytes).unwrap().0
}

pub fn stored_json(store: &Store, collection: &str, id: &str) -> serde_json::Value {
    let bytes = raw_get(store, collection, id).unwrap();
    serde_json::from_slice(envelope::decode(&bytes).unwrap().1).unwrap()
}

type Hook = Box<dyn FnMut(&Batch, &dyn Backend) + Send>;

/// A backend wrapper that counts reads and can run a hook right before a write is
/// applied (to simulate a concurrent writer winning a race).
#[derive(Clone)]
pub struct Spy {
    inner: Arc<dyn Backend>,
    pub gets: Arc<AtomicUsize>,
    pub scans: Arc<AtomicUsize>,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl std::fmt::Debug for Spy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spy")
    }
}

impl Spy {
    pub fn new() -> (Spy, Store) {
        let spy = Spy {
            inner: Arc::new(MemoryStore::new()),
            gets: Arc::default(),
            scans: Arc::default(),
            hook: Arc::default(),
        };
        (spy.clone(), Store::new(spy))
    }

    /// Runs `hook` before every later write (until cleared).
    pub fn before_apply(&self, hook: impl FnMut(&Batch, &dyn Backend) + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    pub fn clear_hook(&self) {
        *self.hook.lock().unwrap() = None;
    }

    pub fn reset_counts(&self) {
        self.gets.store(0, Ordering::SeqCst);
        self.scans.store(0, Ordering::SeqCst);
    }
}

impl KvRead for Spy {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> Result<strata_store::VisitEnd> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    // Forwarded: the hook's write goes to the inner backend and moves its epoch, so a
    // batch observed before it is checked in full.
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for Spy {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> Result<bool> {
        let inner = self.inner.as_ref();
        strata_store::faults::read_decide_write(inner, reads, decide, &mut |batch| {
            if let Some(h) = self.hook.lock().unwrap().as_mut() {
                h(batch, inner);
            }
            Ok(())
        })
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

impl Backend for Spy {
    fn name(&self) -> &'static str {
        "spy"
    }
}
