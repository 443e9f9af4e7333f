//! The cloneable [`Store`] handle and its in-process write lease.

use crate::manifest::{ArmedScope, ManifestWatch};
use crate::{Backend, KvRead, KvWrite, Result, ScanLimits};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

#[derive(Debug, Default)]
struct GateState {
    /// The thread holding the exclusive lease, if any.
    holder: Option<ThreadId>,
    /// Lease requests waiting (new shared writers yield to them, so a lease is not
    /// starved by a steady stream of writes).
    waiting: usize,
    /// Ordinary writes parked at the gate (waiting for a lease to be released or for a
    /// waiting lease request to be served). Observability only.
    parked: usize,
}

/// [`Gate::state`]: ordinary writes in flight (the low bits) and two flags.
const COUNT: u64 = (1 << 32) - 1;
/// A lease is held.
const LEASED: u64 = 1 << 32;
/// A lease request is waiting.
const WAITING: u64 = 1 << 33;

/// A readers-writer gate for writes: ordinary writes share it, a lease holds it alone.
///
/// An ordinary write enters with one compare-and-swap of `state` while no lease is held
/// or waited for; otherwise it parks under the mutex. The flags in `state` only change
/// under the mutex and mirror `holder`/`waiting`. Why a lease never shares the gate with
/// an ordinary write: a lease request sets [`WAITING`] before it reads the count, and an
/// ordinary write can only raise the count from a state without flags; both are
/// read-modify-writes of the one atomic, so either the write's increment comes first (the
/// request sees it and waits) or the flag does (the write's compare-and-swap fails and it
/// parks). A write leaving as the last one while a flag is set takes the mutex to wake the
/// request, so the wake-up cannot fall between the request's check and its wait.
#[derive(Debug, Default)]
struct Gate {
    state: AtomicU64,
    slow: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // A poisoned gate only means another thread panicked while holding the mutex for a
        // few instructions of bookkeeping; the counters are still meaningful.
        self.slow.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// Enters the shared side; returns false when the calling thread holds the lease (its
    /// writes go straight through and must not be counted).
    fn enter_shared(&self) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        // Retried while only the count changed under it (another write entering or
        // leaving): concurrent writers never fall back to the mutex just for meeting
        // each other — only a lease held or waited for sends a write to the slow path.
        while s & (LEASED | WAITING) == 0 {
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => s = actual,
            }
        }
        self.enter_shared_slow()
    }

    fn enter_shared_slow(&self) -> bool {
        let me = thread::current().id();
        let mut g = self.lock();
        let mut parked = false;
        let counted = loop {
            if g.holder == Some(me) {
                break false;
            }
            if g.holder.is_none() && g.waiting == 0 {
                // No flag can be set meanwhile (they change under the mutex we hold).
                self.state.fetch_add(1, Ordering::AcqRel);
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
        let before = self.state.fetch_sub(1, Ordering::AcqRel);
        if before & COUNT == 1 && before & (LEASED | WAITING) != 0 {
            // The last write out while a lease request waits: wake it (under the mutex,
            // so it is either before its check of the count or already waiting).
            let _g = self.lock();
            self.changed.notify_all();
        }
    }

    fn acquire(&self, block: bool) -> bool {
        let me = thread::current().id();
        let mut g = self.lock();
        g.waiting += 1;
        self.state.fetch_or(WAITING, Ordering::AcqRel);
        loop {
            if g.holder.is_none() && self.state.load(Ordering::Acquire) & COUNT == 0 {
                g.holder = Some(me);
                self.state.fetch_or(LEASED, Ordering::AcqRel);
                self.stop_waiting(&mut g);
                return true;
            }
            if !block {
                self.stop_waiting(&mut g);
                self.changed.notify_all();
                return false;
            }
            g = self.wait(g);
        }
    }

    /// One lease request stops waiting; the flag goes with the last one.
    fn stop_waiting(&self, g: &mut GateState) {
        g.waiting -= 1;
        if g.waiting == 0 {
            self.state.fetch_and(!WAITING, Ordering::AcqRel);
        }
    }

    fn parked(&self) -> usize {
        self.lock().parked
    }

    fn release(&self) {
        let mut g = self.lock();
        g.holder = None;
        self.state.fetch_and(!LEASED, Ordering::AcqRel);
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
        let shared = backend.capabilities().cross_process_lease.is_some();
        Store {
            backend,
            gate: Arc::new(Gate::default()),
            manifests: Arc::new(ManifestWatch::new(shared)),
        }
    }

    /// Arms `prefix` for certification by a bulk operation that runs beside ordinary
    /// writers: a manifest for that prefix is not recorded if an ordinary write through
    /// this handle (or a clone) touches the prefix while the guard lives (see
    /// [`crate::manifest`]).
    pub fn arm_manifest_scope(&self, prefix: &[u8]) -> ArmedScope {
        self.manifests.arm(prefix)
    }

    /// True when `other` is a handle (a clone) of the same store: the same backend.
    pub fn same_store(&self, other: &Store) -> bool {
        Arc::ptr_eq(&self.backend, &other.backend)
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
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.backend.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> crate::Capabilities<'_> {
        self.backend.capabilities()
    }
}

/// An ordinary write: the write gate (shared, waiting while another thread holds the
/// lease), the manifests it retires and the armed scopes it touches, then the backend's
/// primitive.
impl KvWrite for Store {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut crate::Decide<'_>) -> Result<bool> {
        let _entry = SharedEntry {
            gate: &self.gate,
            counted: self.gate.enter_shared(),
        };
        key_checked(decide, |decide| {
            self.manifests
                .read_modify_write(self.backend.as_ref(), reads, decide)
        })
    }
    fn flush(&self) -> Result<()> {
        self.backend.flush()
    }
}

/// Runs `write` with `decide` wrapped so that a decided batch setting a key longer than
/// [`crate::MAX_KEY_BYTES`] is not written: the write returns
/// [`StoreError::KeyTooLong`](crate::StoreError::KeyTooLong) naming the key, the same on
/// every backend (a copy's records, [`crate::Batch::copying_records`], excepted). Only
/// the last decision counts, as for the backend.
fn key_checked(
    decide: &mut crate::Decide<'_>,
    write: impl FnOnce(&mut crate::Decide<'_>) -> Result<bool>,
) -> Result<bool> {
    let mut refused = None;
    let written = write(&mut |values| {
        refused = None;
        let batch = decide(values)?;
        if !batch.is_copying_records() {
            if let Err(e) = batch.check_key_lengths() {
                refused = Some(e);
                return None;
            }
        }
        Some(batch)
    })?;
    match refused {
        Some(e) => Err(e),
        None => Ok(written),
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
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.store.backend.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> crate::Capabilities<'_> {
        self.store.backend.capabilities()
    }
}

/// The holder's writes: the manifests, then the backend's primitive (no gate).
impl KvWrite for WriteLease {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut crate::Decide<'_>) -> Result<bool> {
        key_checked(decide, |decide| {
            self.store
                .manifests
                .read_modify_write(self.store.backend.as_ref(), reads, decide)
        })
    }
    fn flush(&self) -> Result<()> {
        self.store.backend.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{Batch, MemoryStore};
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::mpsc;
    use std::sync::Barrier;

    /// A backend that counts the writes inside it and checks that none runs while a lease
    /// is held by another thread; `pause` holds a write in flight until told to go on.
    #[derive(Debug, Default)]
    struct Watched {
        inner: MemoryStore,
        in_flight: AtomicUsize,
        leased: AtomicBool,
        pause: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    }

    impl KvRead for Watched {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan_visit(
            &self,
            p: &[u8],
            a: Option<&[u8]>,
            l: ScanLimits,
            v: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
        ) -> Result<crate::VisitEnd> {
            self.inner.scan_visit(p, a, l, v)
        }
        fn capabilities(&self) -> crate::Capabilities<'_> {
            self.inner.capabilities()
        }
    }

    impl KvWrite for Watched {
        fn read_modify_write(
            &self,
            reads: &[&[u8]],
            decide: &mut crate::Decide<'_>,
        ) -> Result<bool> {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            assert!(
                !self.leased.load(Ordering::SeqCst),
                "a write ran under another thread's lease"
            );
            if let Some((entered, resume)) = self.pause.lock().unwrap().as_ref() {
                entered.send(()).unwrap();
                resume.recv().unwrap();
            }
            thread::yield_now();
            let result = self.inner.read_modify_write(reads, decide);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        }
        fn flush(&self) -> Result<()> {
            self.inner.flush()
        }
    }

    impl Backend for Watched {
        fn name(&self) -> &'static str {
            "watched"
        }
    }

    #[test]
    fn a_lease_never_overlaps_a_write_from_another_thread() {
        let backend = Arc::new(Watched::default());
        let store = Store::from_arc(backend.clone());
        let writers = 3;
        let leasers = 2;
        let start = Barrier::new(writers + leasers);
        let leases = AtomicUsize::new(0);
        thread::scope(|s| {
            for w in 0..writers {
                let (store, start) = (store.clone(), &start);
                s.spawn(move || {
                    start.wait();
                    for i in 0..400u32 {
                        let key = format!("w{w}/{i}").into_bytes();
                        store.apply(Batch::new().set(key, vec![1])).unwrap();
                    }
                });
            }
            for l in 0..leasers {
                let (store, start, backend, leases) =
                    (store.clone(), &start, backend.clone(), &leases);
                s.spawn(move || {
                    start.wait();
                    for i in 0..100u32 {
                        let lease = if i % 2 == 0 {
                            store.lease()
                        } else {
                            match store.try_lease() {
                                Some(lease) => lease,
                                None => continue,
                            }
                        };
                        backend.leased.store(true, Ordering::SeqCst);
                        assert_eq!(backend.in_flight.load(Ordering::SeqCst), 0);
                        // The holder's own writes pass (and are not the others').
                        backend.leased.store(false, Ordering::SeqCst);
                        let key = format!("l{l}/{i}").into_bytes();
                        store.apply(Batch::new().set(key, vec![2])).unwrap();
                        backend.leased.store(true, Ordering::SeqCst);
                        thread::yield_now();
                        assert_eq!(backend.in_flight.load(Ordering::SeqCst), 0);
                        backend.leased.store(false, Ordering::SeqCst);
                        leases.fetch_add(1, Ordering::SeqCst);
                        drop(lease);
                    }
                });
            }
        });
        assert!(leases.load(Ordering::SeqCst) >= 100);
        assert_eq!(store.gate.state.load(Ordering::SeqCst), 0);
        assert_eq!(store.waiting_writers(), 0);
        assert!(!store.is_leased());
        let page = store
            .scan(b"w", None, ScanLimits::new(10_000, 1 << 20).unwrap())
            .unwrap();
        assert_eq!(page.records.len(), writers * 400);
    }

    #[test]
    fn a_new_write_yields_to_a_waiting_lease_request() {
        let backend = Arc::new(Watched::default());
        let store = Store::from_arc(backend.clone());
        thread::scope(|s| {
            // (The channels live in the scope: a failed assertion drops them, which ends
            // the threads blocked on them instead of hanging the scope.)
            let (entered_tx, entered_rx) = mpsc::channel();
            let (resume_tx, resume_rx) = mpsc::channel();
            *backend.pause.lock().unwrap() = Some((entered_tx, resume_rx));
            // A write in flight, paused inside the backend.
            let first = store.clone();
            let first = s.spawn(move || first.apply(Batch::new().set(b"a".to_vec(), vec![1])));
            entered_rx.recv().unwrap();
            // A lease request waits for it.
            let leaser = store.clone();
            let (leased_tx, leased_rx) = mpsc::channel();
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let leaser = s.spawn(move || {
                let lease = leaser.lease();
                leased_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(lease);
            });
            // (Bounded: a gate that never flags the request fails here instead of hanging.)
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while store.gate.state.load(Ordering::SeqCst) & WAITING == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the request never waited"
                );
                thread::yield_now();
            }
            // A new write does not slip in ahead of the waiting request: it parks.
            let second = store.clone();
            let second = s.spawn(move || second.apply(Batch::new().set(b"b".to_vec(), vec![2])));
            while store.waiting_writers() == 0 {
                assert_eq!(
                    backend.in_flight.load(Ordering::SeqCst),
                    1,
                    "a new write slipped in ahead of the waiting lease request"
                );
                thread::yield_now();
            }
            assert!(leased_rx.try_recv().is_err());
            // The first write finishes: the lease is granted, the second write still waits.
            resume_tx.send(()).unwrap();
            first.join().unwrap().unwrap();
            leased_rx.recv().unwrap();
            assert!(store.is_leased());
            assert_eq!(store.waiting_writers(), 1);
            assert_eq!(backend.inner.get(b"b").unwrap(), None);
            // Released: the second write goes through.
            release_tx.send(()).unwrap();
            leaser.join().unwrap();
            entered_rx.recv().unwrap();
            resume_tx.send(()).unwrap();
            second.join().unwrap().unwrap();
        });
        assert_eq!(backend.inner.get(b"b").unwrap(), Some(vec![2]));
        assert_eq!(store.gate.state.load(Ordering::SeqCst), 0);
    }
}
