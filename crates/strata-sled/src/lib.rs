//! The sled 0.34 backend of strata's store trait: the embedded default.
//!
//! [`SledStore`] keeps every table in sled's one default tree, tables being key prefixes,
//! so a scan is a plain ordered range scan and a batch spanning tables is one atomic sled
//! batch. Every batch's mutations are written with one `sled::Batch` (a single-mutation
//! one is a plain `insert`/`remove`, atomic by itself and much cheaper).
//!
//! Preconditions are checked without a sled transaction: every clone of a [`SledStore`]
//! shares one in-process reader-writer lock. Batches without preconditions take its shared
//! side; a batch with preconditions takes its exclusive side, reads each precondition's key
//! with a plain `get`, and then writes its mutations (or fails with the typed
//! [`StoreError::Conflict`], writing nothing). Every writer of the datastore goes through
//! that lock: sled's file lock keeps other processes out, a second open of the same
//! datastore in this process is refused the same way ([`StoreError::InUse`]), and the open
//! `sled::Db` never leaves this crate. So check-then-write is atomic against every other
//! writer, without a sled transaction's cost (reads through its per-key versioning, a
//! commit that writes one key at a time).
//!
//! Two things keep a conditional write close to a plain `insert`:
//! * a batch of one mutation whose key is also a precondition's key (a document written
//!   over the bytes it was read with) is one sled `compare_and_swap`: the check and the
//!   write are one tree traversal, not a `get` and an `insert`;
//! * the current values of *guard keys* — keys a batch requires but does not write, such
//!   as a fence record every write preconditions on — are kept in a small cache that is
//!   exact: it lives inside the writer lock and is filled and emptied only under its
//!   exclusive side (read under either side), and any write of a cached key removes it
//!   there before it writes (a plain batch writing a key of a cached length takes the
//!   exclusive side for that; a decided one-document write of a cached key is decided
//!   under the exclusive side). Since every writer of the datastore goes through that
//!   lock (see above), a cached value always equals sled's while either side is held; no
//!   second lock is taken per write.
//!
//! For the same reason the store keeps a [write epoch](strata_store::epoch), advanced
//! after every write while its side of the lock is still held: a batch whose row
//! preconditions were [observed](strata_store::Batch::observed_at) at the epoch that is
//! still current when it takes the exclusive side is committed without reading those rows
//! again (the eager sweep's batches: one precondition per row, no `get` per row).
//!
//! And one thing keeps the read before a write (a document write reads the document it
//! replaces) off sled's tree: the **write cache**, an exact write-through cache of the
//! values most recently written through the store, served to `get` and to precondition
//! checks. A write holds the cache stripes of its keys from before its sled call until it
//! has recorded the outcome, so for a cached key the entry and sled's value change together
//! (module `values`; tests in `values_tests`). Bounded by entries and bytes
//! ([`SledOptions::write_cache`], 8192 entries / 8 MiB by default). A compare-and-swap that
//! fails records the value sled reported, so the retry's read is served from the cache.
//!
//! The one write primitive ([`strata_store::KvWrite::read_modify_write`]) is one critical
//! section: a write that reads keys holds the exclusive side of the writer lock while it
//! reads them (write cache, else sled), decides, checks its guards and writes — except the
//! commonest write, one document decided on its stored value (and on keys the guard cache
//! holds, such as a deploy-window record) and written alone, with guards the guard cache
//! holds: it holds only the shared side, so writers of different documents run in
//! parallel, and writes with one compare-and-swap over the value it decided on, deciding
//! again when a concurrent writer of the same key won.
//!
//! What this crate is not: it adds no layout of its own (the engine above decides the key
//! encoding), and it never exposes `sled` types: sled errors become
//! [`StoreError::Backend`] (or [`StoreError::InUse`] when another process holds the
//! datastore's lock).
//!
//! Memory: sled's own default page cache is 1 GiB and does not bound memory by itself;
//! [`SledOptions`] defaults to [`SledOptions::DEFAULT_CACHE_CAPACITY`] (64 MiB). The write
//! cache adds at most [`SledOptions::DEFAULT_WRITE_CACHE_BYTES`] (8 MiB) of keys and values,
//! most of them buffers shared with sled's own cache.
//!
//! ```
//! use strata_sled::SledStore;
//! use strata_store::{Batch, KvRead, KvWrite, ScanLimits};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = SledStore::open_store(dir.path().join("db"))?;
//! store.apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()))?;
//! store.flush()?;
//! let page = store.scan(b"t/", None, ScanLimits::new(10, 1024)?)?;
//! assert_eq!(page.records[0].value, b"1");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod batch;
mod cache;
mod log;
mod open;
mod private_copy;
mod read;
mod safety;
mod values;
#[cfg(test)]
mod values_tests;

pub use open::{SledDurability, SledOptions};
pub use safety::{has_foreign_conf, is_sled_dir};

use cache::GuardCache;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use strata_store::{epoch::EpochClock, Backend, Result, Store, StoreError};
use values::ValueCache;

/// The backend name used in messages and [`StoreError::Backend`].
const NAME: &str = "sled";

/// A strata store in one sled datastore (one directory, one process at a time).
///
/// Clones (and clones of the [`Store`] made from it) share one open datastore and one
/// writer lock. sled locks the datastore's file for as long as it is open: another process
/// opening it, or a second open in this process, gets [`StoreError::InUse`] — so all the
/// writers of a datastore are clones of one `SledStore`.
#[derive(Clone)]
pub struct SledStore {
    db: sled::Db,
    path: PathBuf,
    /// Orders conditional batches against every other write: plain writes take the shared
    /// side, a batch with preconditions the exclusive side for its check and its write.
    /// It holds the exact cache of guard-key values (see the crate documentation), read
    /// and changed under the exclusive side only (emptied after a panic while held).
    writers: Arc<RwLock<cache::GuardEntries>>,
    /// The lengths of the cached guard keys (see the crate documentation).
    guards: Arc<GuardCache>,
    /// The write epoch: advanced after every write, under `writers`.
    epoch: Arc<EpochClock>,
    /// Preconditions checked against stored values (see [`SledStore::precondition_checks`]).
    checks: Arc<AtomicU64>,
    /// The exact write-through cache of recently written values (module `values`).
    values: Arc<ValueCache>,
    /// Opened with [`SledOptions::open_read_only`] (a private copy): writes are refused.
    read_only: bool,
    /// [`SledDurability::Immediate`]: every write is flushed before it returns.
    flush_each_write: bool,
    /// Flushes and seals the datastore when the last clone is dropped.
    _seal: Arc<Sealer>,
}

/// On a clean close (the last clone of a [`SledStore`] dropped): flushes and records the
/// length of `db` in the seal that the next open checks against truncation. A private
/// copy (a read-only open) is not sealed: it is removed once sled has closed it (`copy`
/// is dropped after `db`).
struct Sealer {
    /// The last handle of the datastore once every clone of the store is gone; closed
    /// (taken) before the seal is written.
    db: Option<sled::Db>,
    path: PathBuf,
    /// How long the close waits for sled to release the datastore (see [`Drop`]).
    lock_wait: std::time::Duration,
    copy: Option<private_copy::PrivateCopy>,
    /// The store's write epoch, and its value when the datastore was opened: unchanged at
    /// the close, strata wrote nothing in this session (recorded in the seal).
    epoch: Arc<EpochClock>,
    opened: strata_store::epoch::WriteEpoch,
}

/// The seal records the datastore as sled leaves it when it is closed: sled may still
/// write its log from a background thread after the final flush (it moves live pages out
/// of fragmented segments, and it closes the datastore after its last handle is dropped),
/// so the close drops the last handle, waits for sled's lock on `db` to be released (sled
/// has closed the file: no more writes) and writes the seal holding that lock. A close
/// that cannot get the lock in time (another process opened the datastore first) leaves
/// it unsealed, which is checked as any unsealed datastore is.
impl Drop for Sealer {
    fn drop(&mut self) {
        let Some(db) = self.db.take() else {
            return;
        };
        if self.copy.is_some() {
            return;
        }
        let bounds = db.flush().and_then(|_| open::key_bounds(&db));
        drop(db);
        let bounds = match bounds {
            Ok(bounds) => bounds,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "flushing sled on close failed; not sealed");
                return;
            }
        };
        let closed = std::fs::File::open(self.path.join("db"))
            .map_err(|e| e.to_string())
            .and_then(|file| {
                safety::lock(&file, &self.path, self.lock_wait).map_err(|e| e.to_string())?;
                Ok(file)
            });
        match closed {
            // Written while the lock is held: no sled open can write in between.
            Ok(_locked) => safety::write_seal(
                &self.path,
                bounds.as_ref().map(|(f, l)| (f.as_ref(), l.as_ref())),
                self.epoch.unchanged_since(self.opened),
            ),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "sled did not release the datastore in time after the close; not sealed")
            }
        }
    }
}

impl fmt::Debug for SledStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SledStore {
    /// Opens (creating if needed) the datastore at `path` with default [`SledOptions`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        SledOptions::new().open(path)
    }

    /// Opens an existing datastore at `path` with default [`SledOptions`]; never creates
    /// one (a missing datastore is [`StoreError::NotFound`]).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self> {
        SledOptions::new().open_existing(path)
    }

    /// Opens an existing datastore at `path` for reading only with default
    /// [`SledOptions`]: nothing is written to it (a private copy is read; see
    /// [`SledOptions::open_read_only`]).
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        SledOptions::new().open_read_only(path)
    }

    /// True when the store was opened with [`SledOptions::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// [`StoreError::CannotOpen`] for a write to a store opened read-only.
    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(StoreError::CannotOpen {
                path: self.path.clone(),
                reason: "it was opened read-only (a private copy of the datastore, for a read-only command), so it cannot be written; open it with `SledStore::open_existing` to write".into(),
            });
        }
        Ok(())
    }

    /// Opens (creating if needed) the datastore at `path` and wraps it in a [`Store`]
    /// handle.
    pub fn open_store(path: impl AsRef<Path>) -> Result<Store> {
        Self::open(path).map(Self::into_store)
    }

    /// Wraps this backend in a [`Store`] handle (which adds the write lease).
    pub fn into_store(self) -> Store {
        Store::new(self)
    }

    /// The datastore directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many preconditions this datastore has checked against stored values so far
    /// (all clones; guard-cache hits included): the ones a current write epoch vouched
    /// for are not counted. For tests and diagnostics.
    pub fn precondition_checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// Bytes the datastore occupies on disk (sled's own accounting).
    pub fn size_on_disk(&self) -> Result<u64> {
        self.db.size_on_disk().map_err(|e| self.error(e))
    }

    fn error(&self, e: sled::Error) -> StoreError {
        backend_error(&self.path, e)
    }
}

/// `Database::builder(SledStore::open(path)?)`: a sled datastore is a [`Store`].
impl From<SledStore> for Store {
    fn from(store: SledStore) -> Store {
        store.into_store()
    }
}

impl Backend for SledStore {
    fn name(&self) -> &'static str {
        NAME
    }
}

fn backend_error(path: &Path, e: sled::Error) -> StoreError {
    StoreError::backend(
        NAME,
        SledError {
            path: path.to_path_buf(),
            source: e,
        },
    )
}

/// The boxed source of [`StoreError::Backend`] for sled: names the datastore, carries
/// sled's error as its own source. Private: sled's types are not part of the API.
#[derive(Debug, thiserror::Error)]
#[error("sled datastore `{}` failed: {}", .path.display(), remedy(.source))]
struct SledError {
    path: PathBuf,
    #[source]
    source: sled::Error,
}

/// What to do about a sled failure: by the I/O error's kind ([`strata_store::io_remedy`]:
/// "retry" only for a transient one), otherwise the generic advice (never "retry": the
/// same call meets the same state again).
fn remedy(e: &sled::Error) -> &'static str {
    match e {
        sled::Error::Io(io) => strata_store::io_remedy(io),
        _ => "check the disk and the path (the cause follows)",
    }
}
