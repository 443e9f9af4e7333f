//! Fault injection for tests (feature `testing`, never compiled by default): a backend
//! wrapper that fails the N-th read, write or batch, so a test can loop N over every
//! store call of an operation and check that each failure leaves nothing half-applied.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{
    Backend, Batch, KvRead, KvWrite, Result, ScanLimits, ScanPage, StoreError, Visit, VisitEnd,
};

/// Which store calls count towards the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `get`, `scan`, `scan_visit`, `prefix_exists`.
    Read,
    /// `apply` (a batch: all or nothing) and `flush`.
    Write,
    /// Any call.
    Any,
}

/// The error an injected fault raises (as [`StoreError::Backend`] with backend `faults`).
#[derive(Debug, thiserror::Error)]
#[error("injected fault at store call {call}")]
pub struct InjectedFault {
    /// The 1-based number of the failing call (of the counted kind).
    pub call: u64,
}

/// Wraps a backend and fails the `fail_at`-th call of `kind` (1-based; 0 never fails).
/// A failed `apply` writes nothing. Later calls succeed again. Clones share the call
/// count, so a test can keep one and read [`FaultyStore::calls`] after handing the other
/// to a store handle.
#[derive(Debug, Clone)]
pub struct FaultyStore<B> {
    inner: B,
    kind: FaultKind,
    fail_at: u64,
    calls: Arc<AtomicU64>,
}

impl<B> FaultyStore<B> {
    /// A wrapper failing call number `fail_at` of `kind`.
    pub fn new(inner: B, kind: FaultKind, fail_at: u64) -> Self {
        FaultyStore {
            inner,
            kind,
            fail_at,
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Calls of the counted kind so far (run once with `fail_at` 0 to learn how many
    /// sites an operation has).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn check(&self, kind: FaultKind) -> Result<()> {
        if self.kind != FaultKind::Any && self.kind != kind {
            return Ok(());
        }
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if call == self.fail_at {
            return Err(StoreError::backend("faults", InjectedFault { call }));
        }
        Ok(())
    }
}

impl<B: KvRead> KvRead for FaultyStore<B> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(FaultKind::Read)?;
        self.inner.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        self.check(FaultKind::Read)?;
        self.inner.scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        self.check(FaultKind::Read)?;
        self.inner.prefix_exists(prefix)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        self.check(FaultKind::Read)?;
        self.inner.scan_visit(prefix, after, limits, visit)
    }
}

impl<B: KvWrite> KvWrite for FaultyStore<B> {
    fn apply(&self, batch: Batch) -> Result<()> {
        self.check(FaultKind::Write)?;
        self.inner.apply(batch)
    }
    fn flush(&self) -> Result<()> {
        self.check(FaultKind::Write)?;
        self.inner.flush()
    }
}

impl<B: Backend> Backend for FaultyStore<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cross_process_lease(&self) -> Option<&dyn crate::CrossProcessLease> {
        self.inner.cross_process_lease()
    }
    fn remote_reads(&self) -> bool {
        self.inner.remote_reads()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    #[test]
    fn fails_exactly_the_nth_call_of_its_kind_and_writes_nothing() {
        let s = FaultyStore::new(MemoryStore::new(), FaultKind::Write, 2);
        s.apply(Batch::new().set(b"a".to_vec(), b"1".to_vec()))
            .unwrap();
        // Reads do not count towards a write fault.
        assert_eq!(s.get(b"a").unwrap(), Some(b"1".to_vec()));
        let e = s
            .apply(Batch::new().set(b"b".to_vec(), b"2".to_vec()))
            .unwrap_err();
        assert!(e.to_string().contains("faults"), "{e}");
        assert_eq!(s.get(b"b").unwrap(), None, "a failed batch wrote nothing");
        s.apply(Batch::new().set(b"b".to_vec(), b"2".to_vec()))
            .unwrap();
        assert_eq!(s.calls(), 3);

        let r = FaultyStore::new(MemoryStore::new(), FaultKind::Read, 1);
        assert!(r.get(b"a").is_err());
        assert!(r.get(b"a").is_ok());
        let any = FaultyStore::new(MemoryStore::new(), FaultKind::Any, 0);
        for _ in 0..5 {
            any.get(b"x").unwrap();
        }
        assert_eq!(any.calls(), 5);
    }
}
