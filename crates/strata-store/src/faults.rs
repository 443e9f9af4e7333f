//! Fault injection for tests (feature `testing`, never compiled by default): a backend
//! wrapper that fails the N-th read, write or batch, so a test can loop N over every
//! store call of an operation and check that each failure leaves nothing half-applied.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{Backend, Decide, KvRead, KvWrite, Result, ScanLimits, StoreError, Visit, VisitEnd};

/// Which store calls count towards the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `get`, `scan_visit` (and so `scan`, `prefix_exists`).
    Read,
    /// The write primitive `read_modify_write` (and so `apply`, `compare_and_swap`: all
    /// or nothing) and `flush`.
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
    fn capabilities(&self) -> crate::Capabilities<'_> {
        self.inner.capabilities()
    }
}

/// Every write — a batch ([`KvWrite::apply`]), a single-key write, a decided
/// read-modify-write — is the one primitive, so a write fault fails exactly the path
/// production takes.
impl<B: KvWrite> KvWrite for FaultyStore<B> {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        self.check(FaultKind::Write)?;
        self.inner.read_modify_write(reads, decide)
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
}

/// How often [`read_decide_write`] decides again after the keys it read changed.
const DECISIONS: usize = 64;

/// The write primitive for a test wrapper that must see (or act on) a decided batch
/// before it commits — to inject a concurrent writer's write between a write's read and
/// its commit, say: the keys are read from `inner`, the write decided, `before_commit`
/// called with the batch, and the batch committed through `inner`'s primitive only if
/// every key read still holds the value decided on (otherwise the write is decided again
/// on fresh values, as a backend validating optimistically does; at most 64 times, then
/// a conflict on the first key read). A write that reads nothing is decided once.
pub fn read_decide_write(
    inner: &dyn Backend,
    reads: &[&[u8]],
    decide: &mut Decide<'_>,
    before_commit: &mut dyn FnMut(&crate::Batch) -> Result<()>,
) -> Result<bool> {
    for _ in 0..DECISIONS {
        let mut values = Vec::with_capacity(reads.len());
        for key in reads {
            values.push(inner.get(key)?);
        }
        let Some(batch) = decide(&crate::borrowed(&values)) else {
            return Ok(false);
        };
        before_commit(&batch)?;
        let mut batch = Some(batch);
        let mut stale = false;
        let written = inner.read_modify_write(reads, &mut |now| {
            if now != crate::borrowed(&values).as_slice() {
                stale = true;
                return None;
            }
            batch.take()
        })?;
        if !stale {
            return Ok(written);
        }
    }
    Err(StoreError::Conflict {
        key: reads.first().map(|k| k.to_vec()).unwrap_or_default(),
        reason: crate::ConflictReason::Changed,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{Batch, MemoryStore};

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

    #[test]
    fn a_write_fault_fails_the_primitive_before_its_decision_and_writes_nothing() {
        let s = FaultyStore::new(MemoryStore::new(), FaultKind::Write, 1);
        let mut decided = 0;
        let e = s
            .read_modify_write(&[b"a"], &mut |_| {
                decided += 1;
                Some(Batch::new().set(b"a".to_vec(), b"1".to_vec()))
            })
            .unwrap_err();
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(
            cause.as_deref(),
            Some("injected fault at store call 1"),
            "{e}"
        );
        assert_eq!(decided, 0, "the decision ran on a failed write");
        assert_eq!(s.get(b"a").unwrap(), None);
        // A batch and a single-key write are the same primitive: each counts once.
        s.apply(Batch::new().set(b"a".to_vec(), b"1".to_vec()))
            .unwrap();
        s.compare_and_swap(crate::KeyWrite::set(
            b"a".to_vec(),
            Some(b"1".to_vec()),
            b"2".to_vec(),
        ))
        .unwrap();
        assert!(s
            .read_modify_write(&[b"a"], &mut |v| {
                assert_eq!(v, [Some(&b"2"[..])]);
                None
            })
            .map(|w| !w)
            .unwrap());
        assert_eq!(s.calls(), 4);
        let nth = FaultyStore::new(MemoryStore::new(), FaultKind::Write, 2);
        nth.apply(Batch::new().set(b"x".to_vec(), b"1".to_vec()))
            .unwrap();
        assert!(nth
            .compare_and_swap(crate::KeyWrite::set(b"y".to_vec(), None, b"1".to_vec()))
            .is_err());
        assert_eq!(nth.get(b"y").unwrap(), None);
    }
}
