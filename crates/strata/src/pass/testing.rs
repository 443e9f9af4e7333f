//! Test support: a fault-injecting store wrapper, reusable by every crate's tests.
//!
//! [`FaultyStore`] wraps any backend and fails chosen writes, which is how tests simulate
//! a process that dies between two batches (deterministic crash tests).
//!
//! ```
//! use strata::pass::testing::FaultyStore;
//! use strata_store::{Batch, KvWrite, MemoryStore, Store};
//!
//! let inner = Store::new(MemoryStore::new());
//! let faulty = FaultyStore::crash_at_write(inner.unguarded_backend(), 2);
//! let store = Store::new(faulty.clone());
//! assert!(store.apply(Batch::new().set(b"a".to_vec(), b"1".to_vec())).is_ok());
//! assert!(store.apply(Batch::new().set(b"b".to_vec(), b"2".to_vec())).is_err());
//! assert!(store.apply(Batch::new().set(b"c".to_vec(), b"3".to_vec())).is_err());
//! assert_eq!(faulty.writes(), 3);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata_store::{Backend, KvRead, KvWrite, Result, ScanLimits, StoreError};

/// How a [`FaultyStore`] fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// Only the N-th write fails; later writes succeed (a transient error).
    Once,
    /// The N-th and every later write fail (the process died at that write).
    FromThenOn,
}

/// A backend wrapper that fails the N-th write (1-based: a call of the one write
/// primitive [`KvWrite::read_modify_write`], which every batch, single-key write and
/// decided write is) without applying anything of it. Reads and flushes pass through.
/// Clones share the counter.
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn Backend>,
    writes: Arc<AtomicUsize>,
    fail_at: usize,
    mode: FaultMode,
}

impl FaultyStore {
    /// Fails only the `n`-th write.
    pub fn fail_nth_write(inner: Arc<dyn Backend>, n: usize) -> Self {
        FaultyStore {
            inner,
            writes: Arc::new(AtomicUsize::new(0)),
            fail_at: n,
            mode: FaultMode::Once,
        }
    }

    /// Fails the `n`-th write and every write after it.
    pub fn crash_at_write(inner: Arc<dyn Backend>, n: usize) -> Self {
        FaultyStore {
            mode: FaultMode::FromThenOn,
            ..Self::fail_nth_write(inner, n)
        }
    }

    /// Writes attempted so far (failed ones included).
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
}

impl KvRead for FaultyStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for FaultyStore {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> Result<bool> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let fail = match self.mode {
            FaultMode::Once => n == self.fail_at,
            FaultMode::FromThenOn => n >= self.fail_at,
        };
        if fail {
            tracing::debug!(write = n, "injected write fault");
            return Err(StoreError::backend(
                "faulty",
                std::io::Error::other(format!("injected fault at write {n}")),
            ));
        }
        self.inner.read_modify_write(reads, decide)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

impl Backend for FaultyStore {
    fn name(&self) -> &'static str {
        "faulty"
    }
}
