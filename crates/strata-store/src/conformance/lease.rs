//! The in-process write lease.

use super::{bkeys, expect_conflict, fixture, keys, put, unbounded};
use crate::{Backend, Batch, ConflictReason, KvRead, KvWrite, Result, ScanLimits, Store};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread;

/// Starts a writer thread that applies `set key=value` through `store` and reports the
/// result on the returned channel. Returns after the writer has signalled it started and
/// is parked at the write gate (fails if it completes instead).
fn start_blocked_writer(
    store: &Store,
    key: &[u8],
    value: &[u8],
) -> (Receiver<Result<()>>, thread::JoinHandle<()>) {
    let writer = store.clone();
    let (started_tx, started_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let batch = Batch::new().set(key.to_vec(), value.to_vec());
    let before = store.waiting_writers();
    let handle = thread::spawn(move || {
        started_tx.send(()).unwrap();
        let result = writer.apply(batch);
        // The receiver may be gone if the test already failed.
        let _ = done_tx.send(result);
    });
    started_rx.recv().unwrap();
    while store.waiting_writers() == before {
        match done_rx.try_recv() {
            Ok(result) => panic!("the writer was not blocked by the lease: {result:?}"),
            Err(TryRecvError::Disconnected) => panic!("the writer thread died"),
            Err(TryRecvError::Empty) => thread::yield_now(),
        }
    }
    (done_rx, handle)
}

/// A writer on a clone blocks while the lease is held and proceeds once it is dropped.
pub fn lease_blocks_writer_on_clone<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let store = &fx.store;
    assert_eq!(store.waiting_writers(), 0);
    let lease = store.lease();
    assert!(store.is_leased());
    let (done, handle) = start_blocked_writer(store, b"w/blocked", b"1");
    assert_eq!(store.waiting_writers(), 1);
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));
    assert_eq!(
        store.get(b"w/blocked").unwrap(),
        None,
        "blocked write landed"
    );
    // The holder still writes meanwhile.
    lease
        .apply(Batch::new().set(b"w/holder".to_vec(), b"h".to_vec()))
        .unwrap();
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));

    drop(lease);
    done.recv().unwrap().unwrap();
    handle.join().unwrap();
    assert!(!store.is_leased());
    assert_eq!(store.waiting_writers(), 0);
    assert_eq!(store.get(b"w/blocked").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get(b"w/holder").unwrap(), Some(b"h".to_vec()));
}

/// Reads through a clone on another thread proceed while the lease is held (even with a
/// writer parked behind it).
pub fn lease_does_not_block_reads<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    put(&fx.store, b"r/a", b"1");
    let lease = fx.store.lease();
    let (done, writer) = start_blocked_writer(&fx.store, b"r/b", b"2");

    let reader = fx.store.clone();
    let read = thread::spawn(move || {
        let value = reader.get(b"r/a").unwrap();
        let page = reader.scan(b"r/", None, unbounded()).unwrap();
        let exists = reader.prefix_exists(b"r/").unwrap();
        let leased = reader.is_leased();
        (value, page, exists, leased)
    });
    let (value, page, exists, leased) = read.join().unwrap();
    assert_eq!(value, Some(b"1".to_vec()));
    assert_eq!(
        keys(&page),
        bkeys(&[b"r/a"]),
        "the parked write must not be visible"
    );
    assert!(exists);
    assert!(leased);
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));

    drop(lease);
    done.recv().unwrap().unwrap();
    writer.join().unwrap();
    assert_eq!(fx.store.get(b"r/b").unwrap(), Some(b"2".to_vec()));
}

/// The holder's writes go through: via the [`WriteLease`](crate::WriteLease), via its
/// [`store`](crate::WriteLease::store), and via any clone of the [`Store`] from the
/// holder's thread. Conditional batches keep their meaning under the lease.
pub fn lease_holder_writes_pass<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let clone = fx.store.clone();
    let lease = fx.store.lease();
    lease
        .apply(Batch::new().set(b"h/lease".to_vec(), b"1".to_vec()))
        .unwrap();
    lease
        .store()
        .apply(Batch::new().set(b"h/lease-store".to_vec(), b"2".to_vec()))
        .unwrap();
    fx.store
        .apply(Batch::new().set(b"h/store".to_vec(), b"3".to_vec()))
        .unwrap();
    clone
        .apply(Batch::new().set(b"h/clone".to_vec(), b"4".to_vec()))
        .unwrap();
    expect_conflict(
        lease.apply(
            Batch::new()
                .require_absent(b"h/lease".to_vec())
                .set(b"h/never".to_vec(), b"x".to_vec()),
        ),
        b"h/lease",
        ConflictReason::Present,
    );
    lease.flush().unwrap();
    assert_eq!(lease.get(b"h/never").unwrap(), None);
    let page = lease.scan(b"h/", None, unbounded()).unwrap();
    assert_eq!(
        keys(&page),
        bkeys(&[b"h/clone", b"h/lease", b"h/lease-store", b"h/store"])
    );
    assert!(lease.prefix_exists(b"h/").unwrap());
    assert!(fx.store.is_leased());
    drop(lease);
    assert!(!fx.store.is_leased());
    assert_eq!(clone.get(b"h/store").unwrap(), Some(b"3".to_vec()));
}

/// `try_lease` fails while another lease is held (from any thread) and succeeds after it
/// is dropped; a failed attempt leaves ordinary writes unblocked.
pub fn try_lease_fails_while_leased<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let lease = fx.store.try_lease().expect("a free store can be leased");
    assert!(
        fx.store.try_lease().is_none(),
        "second lease on the same thread"
    );
    let other = fx.store.clone();
    let from_other_thread = thread::spawn(move || other.try_lease().is_none())
        .join()
        .unwrap();
    assert!(from_other_thread, "second lease from another thread");
    drop(lease);
    let again = fx.store.try_lease().expect("lease is free after drop");
    drop(again);
    // Failed attempts must not leave the gate closed to ordinary writers.
    let writer = fx.store.clone();
    thread::spawn(move || writer.apply(Batch::new().set(b"t/ok".to_vec(), b"1".to_vec())))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(fx.store.get(b"t/ok").unwrap(), Some(b"1".to_vec()));
    assert_eq!(fx.store.waiting_writers(), 0);
}

/// A backend wrapper whose `apply` signals when it starts and then waits for permission,
/// to hold a write "in flight" deterministically.
#[derive(Debug)]
struct PausingBackend {
    inner: Arc<dyn Backend>,
    entered: Mutex<Sender<()>>,
    resume: Mutex<Receiver<()>>,
}

impl KvRead for PausingBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> crate::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for PausingBackend {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut crate::Decide<'_>) -> Result<bool> {
        self.entered.lock().unwrap().send(()).unwrap();
        self.resume.lock().unwrap().recv().unwrap();
        self.inner.read_modify_write(reads, decide)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

impl Backend for PausingBackend {
    fn name(&self) -> &'static str {
        "pausing"
    }
}

/// `try_lease` fails while an ordinary write is in flight and succeeds once it finished.
pub fn try_lease_fails_while_write_in_flight<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let paused = Store::from_arc(Arc::new(PausingBackend {
        inner: fx.store.unguarded_backend(),
        entered: Mutex::new(entered_tx),
        resume: Mutex::new(resume_rx),
    }));
    let writer = paused.clone();
    let handle = thread::spawn(move || {
        writer.apply(Batch::new().set(b"f/inflight".to_vec(), b"1".to_vec()))
    });
    entered_rx.recv().unwrap(); // the write is inside the gate now
    assert!(
        paused.try_lease().is_none(),
        "leased over an in-flight write"
    );
    assert!(!paused.is_leased());
    resume_tx.send(()).unwrap();
    handle.join().unwrap().unwrap();
    assert_eq!(fx.store.get(b"f/inflight").unwrap(), Some(b"1".to_vec()));

    // The failed attempt left the gate open: another write passes (permission granted in
    // advance), and then the lease can be taken.
    resume_tx.send(()).unwrap();
    paused
        .apply(Batch::new().set(b"f/after".to_vec(), b"2".to_vec()))
        .unwrap();
    entered_rx.recv().unwrap();
    let lease = paused.try_lease().expect("no write in flight any more");
    assert!(paused.is_leased());
    drop(lease);
    assert_eq!(fx.store.get(b"f/after").unwrap(), Some(b"2".to_vec()));
}
