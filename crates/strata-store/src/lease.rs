//! The cloneable [`Store`] handle and its in-process write lease.

use crate::manifest::{ArmedScope, ManifestWatch};
use crate::{Backend, Batch, KvRead, KvWrite, Result, ScanLimits, ScanPage};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

#[derive(Debug, Default)]
struct GateState {
    /// Ordinary writes in flight.
    shared: usize,
    /// The thread holding the exclusive lease, if any.
    holder: Option<ThreadId>,
    /// Lease requests waiting (new shared writers yield to them, so a lease is not
    /// starved by a steady stream of writes).
    waiting: usize,
    /// Ordinary writes parked at the gate (waiting for a lease to be released or for a
    /// waiting lease request to be served). Observability only.
    parked: usize,
}

/// A readers-writer gate for writes: ordinary writes share it, a lease holds it alone.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // A poisoned gate only means another thread panicked while holding the mutex for a
        // few instructions of bookkeeping; the counters are still meaningful.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// Enters the shared side; returns false when the calling thread holds the lease (its
    /// writes go straight through and must not be counted).
    fn enter_shared(&self) -> bool {
        let me = thread::current().id();
        let mut g = self.lock();
        let mut parked = false;
        let counted = loop {
            if g.holder == Some(me) {
                break false;
            }
            if g.holder.is_none() && g.waiting == 0 {
                g.shared += 1;
                break true;
            }
            if !parked {
                parked = true;
                g.parked += 1;
            }
            g = self.wait(g);
        };
        if parked {
            g.parked -= 1;
        }
        counted
    }

    fn leave_shared(&self) {
        let mut g = self.lock();
        g.shared -= 1;
        if g.shared == 0 {
            self.changed.notify_all();
        }
    }

    fn acquire(&self, block: bool) -> bool {
        let me = thread::current().id();
        let mut g = self.lock();
        g.waiting += 1;
        loop {
            if g.holder.is_none() && g.shared == 0 {
                g.waiting -= 1;
                g.holder = Some(me);
                return true;
            }
            if !block {
                g.waiting -= 1;
                self.changed.notify_all();
                return false;
            }
            g = self.wait(g);
        }
    }

    fn parked(&self) -> usize {
        self.lock().parked
    }

    fn release(&self) {
        let mut g = self.lock();
        g.holder = None;
        self.changed.notify_all();
    }
}

/// A cloneable handle to one datastore. Clones share the backend and the write gate.
///
/// Reads go straight to the backend and never block. Ordinary writes ([`KvWrite::apply`])
/// run concurrently with each other but wait while a [`WriteLease`] is held — except
/// writes from the thread that holds the lease, which go through.
#[derive(Clone, Debug)]
pub struct Store {
    backend: Arc<dyn Backend>,
    gate: Arc<Gate>,
    /// The live bulk-operation manifests (see [`crate::manifest`]).
    manifests: Arc<ManifestWatch>,
}

impl Store {
    /// Wraps a backend in a handle.
    pub fn new(backend: impl Backend + 'static) -> Self {
        Self::from_arc(Arc::new(backend))
    }

    /// Wraps a shared backend in a handle (with a fresh gate).
    pub fn from_arc(backend: Arc<dyn Backend>) -> Self {
        Store {
            backend,
            gate: Arc::new(Gate::default()),
            manifests: Arc::new(ManifestWatch::default()),
        }
    }

    /// Arms `prefix` for certification by a bulk operation that runs beside ordinary
    /// writers: a manifest for that prefix is not recorded if an ordinary write through
    /// this handle (or a clone) touches the prefix while the guard lives (see
    /// [`crate::manifest`]).
    pub fn arm_manifest_scope(&self, prefix: &[u8]) -> ArmedScope {
        self.manifests.arm(prefix)
    }

    /// The backend's name (`memory`, `sled`, ...).
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// Takes the exclusive write lease, waiting for in-flight writes to finish. Held until
    /// the returned guard is dropped.
    ///
    /// The lease is not re-entrant: calling this from the thread that already holds the
    /// lease waits forever (use [`Store::try_lease`] when unsure).
    pub fn lease(&self) -> WriteLease {
        self.gate.acquire(true);
        WriteLease {
            store: self.clone(),
        }
    }

    /// Takes the lease only if nobody holds it and no write is in flight.
    pub fn try_lease(&self) -> Option<WriteLease> {
        self.gate.acquire(false).then(|| WriteLease {
            store: self.clone(),
        })
    }

    /// True while some handle holds the lease.
    pub fn is_leased(&self) -> bool {
        self.gate.lock().holder.is_some()
    }

    /// How many ordinary writes ([`KvWrite::apply`] through some clone) are currently
    /// parked at the write gate, waiting for a lease to be released (or for a queued lease
    /// request to be served).
    ///
    /// For observability and for tests that must wait deterministically until a writer is
    /// blocked (poll it with [`std::thread::yield_now`]); it is a snapshot and may change
    /// as soon as it is read.
    pub fn waiting_writers(&self) -> usize {
        self.gate.parked()
    }

    /// The backend under this handle, **without** the write gate: writes through it ignore
    /// any lease. Meant for wrappers (fault injection, instrumentation) that build a new
    /// [`Store`] around it with [`Store::from_arc`]; ordinary code uses the handle itself.
    pub fn unguarded_backend(&self) -> Arc<dyn Backend> {
        Arc::clone(&self.backend)
    }
}

/// Leaves the shared side of the gate when dropped, so a panicking backend cannot leave a
/// write counted forever (which would block every later lease).
struct SharedEntry<'a> {
    gate: &'a Gate,
    counted: bool,
}

impl Drop for SharedEntry<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.gate.leave_shared();
        }
    }
}

impl KvRead for Store {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.backend.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        self.backend.scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        self.backend.prefix_exists(prefix)
    }
    fn write_epoch(&self) -> Option<crate::WriteEpoch> {
        self.backend.write_epoch()
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.backend.scan_visit(prefix, after, limits, visit)
    }
}

impl KvWrite for Store {
    fn apply(&self, batch: Batch) -> Result<()> {
        let _entry = SharedEntry {
            gate: &self.gate,
            counted: self.gate.enter_shared(),
        };
        self.manifests.apply(self.backend.as_ref(), batch)
    }
    fn flush(&self) -> Result<()> {
        self.backend.flush()
    }
}

/// The exclusive in-process write lease (RAII): while it lives, ordinary writes through any
/// clone of the [`Store`] wait; writes through the lease go straight through. Reads are
/// never blocked.
#[derive(Debug)]
pub struct WriteLease {
    store: Store,
}

impl WriteLease {
    /// The store this lease guards (writes through it from the holder's thread also pass).
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl Drop for WriteLease {
    fn drop(&mut self) {
        self.store.gate.release();
    }
}

impl KvRead for WriteLease {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.backend.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        self.store.backend.scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        self.store.backend.prefix_exists(prefix)
    }
    fn write_epoch(&self) -> Option<crate::WriteEpoch> {
        self.store.backend.write_epoch()
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.store.backend.scan_visit(prefix, after, limits, visit)
    }
}

impl KvWrite for WriteLease {
    fn apply(&self, batch: Batch) -> Result<()> {
        self.store
            .manifests
            .apply(self.store.backend.as_ref(), batch)
    }
    fn flush(&self) -> Result<()> {
        self.store.backend.flush()
    }
}
