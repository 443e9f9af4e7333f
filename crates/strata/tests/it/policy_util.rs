//! Shared helpers of the policy and fence tests.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::clock::ManualClock;
use strata::policy::{PolicyConfig, PolicyError};
use strata::CollectionError;
use strata_store::{Backend, Batch, KvRead, KvWrite, MemoryStore, Store, StoreError};

/// A deterministic config: manual clock, no heartbeat thread, 1 s stale window, 5 s lease.
pub fn config(clock: &ManualClock) -> PolicyConfig {
    PolicyConfig::new()
        .clock(Arc::new(clock.clone()))
        .heartbeat(None)
        .stale_after_ms(1_000)
        .lease_ms(5_000)
}

pub fn mem() -> Store {
    Store::new(MemoryStore::new())
}

/// A refused collection write as the policy error.
pub fn guard_err(e: CollectionError) -> PolicyError {
    match e {
        CollectionError::Refused { collection, reason } => {
            PolicyError::Refused { collection, reason }
        }
        other => panic!("expected a policy refusal, got {other}"),
    }
}

/// An object schema with the given (name, type, required) properties.
pub fn obj(props: &[(&str, &str, bool)]) -> Value {
    let mut p = serde_json::Map::new();
    let mut req = Vec::new();
    for (name, ty, required) in props {
        p.insert((*name).into(), json!({ "type": ty }));
        if *required {
            req.push(json!(name));
        }
    }
    json!({"type": "object", "properties": p, "required": req})
}

/// A backend wrapper: can fail reads of keys with a prefix, and can run a hook once
/// before the first batch that touches a key with a prefix.
#[derive(Debug)]
pub struct Faulty {
    pub inner: MemoryStore,
    pub fail_get_prefix: Mutex<Option<Vec<u8>>>,
    #[allow(clippy::type_complexity)]
    pub before_apply: Mutex<Option<(Vec<u8>, Batch)>>,
    pub applies: AtomicUsize,
}

impl Faulty {
    pub fn new() -> Arc<Self> {
        Arc::new(Faulty {
            inner: MemoryStore::new(),
            fail_get_prefix: Mutex::new(None),
            before_apply: Mutex::new(None),
            applies: AtomicUsize::new(0),
        })
    }
}

impl KvRead for Faulty {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        if let Some(p) = self.fail_get_prefix.lock().unwrap().as_ref() {
            if key.starts_with(p) {
                return Err(StoreError::backend("faulty", "injected read failure"));
            }
        }
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

impl KvWrite for Faulty {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        self.applies.fetch_add(1, Ordering::SeqCst);
        strata_store::faults::read_decide_write(&self.inner, reads, decide, &mut |batch| {
            let hook = {
                let mut g = self.before_apply.lock().unwrap();
                let touches = g
                    .as_ref()
                    .is_some_and(|(p, _)| batch.mutations().iter().any(|m| m.key().starts_with(p)));
                if touches {
                    g.take()
                } else {
                    None
                }
            };
            if let Some((_, injected)) = hook {
                self.inner.apply(injected)?;
            }
            Ok(())
        })
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}

impl Backend for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
}
