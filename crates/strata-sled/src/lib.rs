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
//!   exact: it is read and filled only under the exclusive side of the writer lock, and
//!   any batch that writes a cached key removes it before it releases its side of the
//!   lock (a conditional batch before it writes). Since every writer of the
//!   datastore goes through that lock (see above), a cached value always equals sled's.
//!
//! What this crate is not: it adds no layout of its own (the engine above decides the key
//! encoding), and it never exposes `sled` types: sled errors become
//! [`StoreError::Backend`] (or [`StoreError::InUse`] when another process holds the
//! datastore's lock).
//!
//! Memory: sled's own default page cache is 1 GiB and does not bound memory by itself;
//! [`SledOptions`] defaults to [`SledOptions::DEFAULT_CACHE_CAPACITY`] (64 MiB).
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

mod safety;

pub use safety::is_sled_dir;

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;
use strata_store::{
    Backend, Batch, KvRead, KvWrite, Mutation, Offer, PageBuilder, Precondition, Result,
    ScanLimits, ScanPage, Store, StoreError, Visit, VisitEnd,
};

/// The backend name used in messages and [`StoreError::Backend`].
const NAME: &str = "sled";

/// How to open a sled datastore.
///
/// ```
/// use strata_sled::SledOptions;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = SledOptions::new().cache_capacity(8 << 20).open(dir.path())?;
/// assert_eq!(store.path(), dir.path());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledOptions {
    cache_capacity: u64,
    lock_wait: Duration,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            cache_capacity: Self::DEFAULT_CACHE_CAPACITY,
            lock_wait: Self::DEFAULT_LOCK_WAIT,
        }
    }
}

impl SledOptions {
    /// The default page-cache capacity: 64 MiB. sled's own default (1 GiB) is far more
    /// than a bounded migration needs and is not a hard memory bound either.
    pub const DEFAULT_CACHE_CAPACITY: u64 = 64 * 1024 * 1024;

    /// How long opening keeps retrying while the datastore's lock is taken: 1 second.
    ///
    /// sled 0.34 releases its file lock from a background thread shortly *after* the last
    /// handle is dropped, so closing a datastore and reopening it at once (in this process
    /// or another) can briefly find it locked; a short wait bridges that. A datastore that
    /// stays locked for longer is [`StoreError::InUse`].
    pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(1);

    /// Options with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets sled's page-cache capacity in bytes (how much of the datastore sled keeps in
    /// memory; sled's estimate, not a strict bound on the process's memory).
    pub fn cache_capacity(mut self, bytes: u64) -> Self {
        self.cache_capacity = bytes;
        self
    }

    /// Sets how long opening retries while the datastore is locked before reporting
    /// [`StoreError::InUse`] (`Duration::ZERO`: try once).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// The configured page-cache capacity in bytes.
    pub fn cache_capacity_bytes(&self) -> u64 {
        self.cache_capacity
    }

    /// Opens the datastore at `path`, creating it (and missing parent directories) if it
    /// does not exist.
    ///
    /// An existing datastore is checked first (see [`SledOptions::open_existing`]); a
    /// directory whose `conf`/`db` are not sled's (or are symlinks) is refused with
    /// [`StoreError::Damaged`] and left untouched.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<SledStore> {
        let path = path.as_ref();
        if safety::inspect(path)? == safety::Found::Sled {
            safety::prepare_existing(path, self.lock_wait)?;
        }
        self.open_at(path)
    }

    /// Opens an existing datastore at `path` (for readers and inspection): a missing path,
    /// or a directory that holds no sled datastore, is [`StoreError::NotFound`] and nothing
    /// is created.
    ///
    /// Before sled sees the directory: `conf` must be sled's configuration and `conf`/`db`
    /// regular files (not symlinks), else [`StoreError::Damaged`] naming the file; a `db`
    /// shorter than at the last clean close is [`StoreError::Damaged`] (sled would cut it
    /// down to what it can read); an empty `snap.*.generating` leftover is removed, any
    /// other is reported; media sled cannot write are [`StoreError::CannotOpen`] (sled
    /// writes on every open). A panic inside sled while opening is [`StoreError::Damaged`].
    pub fn open_existing(&self, path: impl AsRef<Path>) -> Result<SledStore> {
        let path = path.as_ref();
        match safety::inspect(path)? {
            safety::Found::Nothing => Err(StoreError::NotFound {
                path: path.to_path_buf(),
            }),
            safety::Found::Sled => {
                safety::prepare_existing(path, self.lock_wait)?;
                self.open_at(path)
            }
        }
    }

    fn open_at(&self, path: &Path) -> Result<SledStore> {
        tracing::debug!(
            path = %path.display(),
            cache_capacity = self.cache_capacity,
            "opening sled datastore"
        );
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(self.cache_capacity);
        let db = strata_store::guarded_open(path, || {
            retry_while_locked(|| config.open(), self.lock_wait, std::thread::sleep)
        })?
        .map_err(|e| open_error(path, e))?;
        Ok(SledStore {
            _seal: Arc::new(Sealer {
                db: db.clone(),
                path: path.to_path_buf(),
            }),
            db,
            path: path.to_path_buf(),
            writers: Arc::default(),
            guards: Arc::default(),
        })
    }
}

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
    /// It guards no data (a panic while holding it leaves nothing half-done: the checks
    /// write nothing and the write is one atomic sled call), so poisoning is ignored.
    writers: Arc<RwLock<()>>,
    /// The exact cache of guard-key values (see the crate documentation).
    guards: Arc<GuardCache>,
    /// Flushes and seals the datastore when the last clone is dropped.
    _seal: Arc<Sealer>,
}

/// On a clean close (the last clone of a [`SledStore`] dropped): flushes and records the
/// length of `db` in the seal that the next open checks against truncation.
struct Sealer {
    db: sled::Db,
    path: PathBuf,
}

impl Drop for Sealer {
    fn drop(&mut self) {
        match self.db.flush() {
            Ok(_) => safety::write_seal(&self.path),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "flushing sled on close failed; not sealed")
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

    /// Bytes the datastore occupies on disk (sled's own accounting).
    pub fn size_on_disk(&self) -> Result<u64> {
        self.db.size_on_disk().map_err(|e| self.error(e))
    }

    fn error(&self, e: sled::Error) -> StoreError {
        backend_error(&self.path, e)
    }

    /// Checks `preconditions` and writes `mutations`. The caller holds the exclusive side
    /// of `writers`.
    fn apply_conditional(
        &self,
        mut mutations: Vec<Mutation>,
        preconditions: Vec<Precondition>,
    ) -> Result<()> {
        let mut cache = self.guards.lock();
        if let [only] = mutations.as_slice() {
            let key = only.key();
            let mut own = None;
            for p in &preconditions {
                if p.key() == key {
                    if own.is_some() {
                        own = None;
                        break;
                    }
                    own = Some(p);
                } else {
                    self.check_guard(&mut cache, p)?;
                }
            }
            if let Some(own) = own {
                // One traversal checks and writes the key; nothing else is written.
                cache.forget(key);
                return match mutations.pop() {
                    Some(Mutation::Set { key, value }) => self.cas(own, &key, Some(value)),
                    Some(Mutation::Delete { key }) => self.cas(own, &key, None),
                    None => Ok(()),
                };
            }
            // Several preconditions on the key itself: the general path below (the guard
            // preconditions were checked above; checking them again is cheap).
        }
        let written: std::collections::HashSet<&[u8]> =
            mutations.iter().map(Mutation::key).collect();
        for p in &preconditions {
            if written.contains(p.key()) {
                let current = self.db.get(p.key()).map_err(|e| self.error(e))?;
                p.check(current.as_deref())?;
            } else {
                self.check_guard(&mut cache, p)?;
            }
        }
        // A written key leaves the cache (it is filled again, from sled, when next
        // required): whatever the write's outcome, no entry can be stale.
        for m in &mutations {
            cache.forget(m.key());
        }
        self.write(mutations)
    }

    /// Checks a precondition on a key the batch does not write, through the guard cache
    /// (filled from sled on a miss). The caller holds the exclusive side of `writers`.
    fn check_guard(&self, cache: &mut GuardEntries, p: &Precondition) -> Result<()> {
        if let Some(current) = cache.get(p.key()) {
            return p.check(current.as_deref());
        }
        let current = self.db.get(p.key()).map_err(|e| self.error(e))?;
        let result = p.check(current.as_deref());
        cache.fill(&self.guards.lengths, p.key(), current.as_deref());
        result
    }

    /// One sled compare-and-swap of `key` from what `own` requires to `new`.
    fn cas(&self, own: &Precondition, key: &[u8], new: Option<Vec<u8>>) -> Result<()> {
        let old = match own {
            Precondition::Equals { value, .. } => Some(value.as_slice()),
            Precondition::Absent { .. } => None,
        };
        match self
            .db
            .compare_and_swap(key, old, new)
            .map_err(|e| self.error(e))?
        {
            Ok(()) => Ok(()),
            Err(e) => {
                own.check(e.current.as_deref())?;
                // sled reported a mismatch the precondition does not see: report it as a
                // conflict all the same (nothing was written).
                Err(StoreError::Conflict {
                    key: key.to_vec(),
                    reason: strata_store::ConflictReason::Changed,
                })
            }
        }
    }

    /// Writes `mutations` as one atomic sled call. The caller holds `writers`.
    fn write(&self, mut mutations: Vec<Mutation>) -> Result<()> {
        if mutations.len() <= 1 {
            // One key is atomic on its own. `Tree::apply_batch` takes sled's global write
            // lock and seals (and writes) the current log buffer twice to delimit the
            // batch; a single insert or remove needs neither (it is what the bulk pass's
            // checkpoint-only batches are).
            let result = match mutations.pop() {
                Some(Mutation::Set { key, value }) => self.db.insert(key, value).map(drop),
                Some(Mutation::Delete { key }) => self.db.remove(key).map(drop),
                None => Ok(()),
            };
            return result.map_err(|e| self.error(e));
        }
        let mut batch = sled::Batch::default();
        for m in mutations {
            match m {
                Mutation::Set { key, value } => batch.insert(key, value),
                Mutation::Delete { key } => batch.remove(key),
            }
        }
        self.db.apply_batch(batch).map_err(|e| self.error(e))
    }
}

/// `Database::builder(SledStore::open(path)?)`: a sled datastore is a [`Store`].
impl From<SledStore> for Store {
    fn from(store: SledStore) -> Store {
        store.into_store()
    }
}

impl KvRead for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| self.error(e))
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let mut page = PageBuilder::new(limits);
        for item in self.db.range::<&[u8], _>((start, Bound::Unbounded)) {
            let (key, value) = item.map_err(|e| self.error(e))?;
            if !key.starts_with(prefix) {
                break;
            }
            // Decide on the length first: an oversize value is never copied.
            match page.offer(&key, value.len())? {
                Offer::Take => page.push(key.to_vec(), value.to_vec()),
                Offer::Stop => break,
            }
        }
        Ok(page.finish())
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let (mut records, mut used) = (0usize, 0usize);
        for item in self.db.range::<&[u8], _>((start, Bound::Unbounded)) {
            let (key, value) = item.map_err(|e| self.error(e))?;
            if !key.starts_with(prefix) {
                break;
            }
            let size = key.len().saturating_add(value.len());
            if size > limits.max_bytes() && records == 0 {
                return Err(StoreError::RecordTooLarge {
                    key: key.to_vec(),
                    size,
                    limit: limits.max_bytes(),
                });
            }
            if records >= limits.max_records() || used.saturating_add(size) > limits.max_bytes() {
                return Ok(VisitEnd {
                    records,
                    more: true,
                });
            }
            records += 1;
            used += size;
            if visit(&key, &value) == Visit::Stop {
                return Ok(VisitEnd {
                    records,
                    more: true,
                });
            }
        }
        Ok(VisitEnd {
            records,
            more: false,
        })
    }

    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        match self.db.scan_prefix(prefix).keys().next() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(self.error(e)),
        }
    }
}

impl KvWrite for SledStore {
    fn apply(&self, batch: Batch) -> Result<()> {
        if batch.mutations().len() > 1 {
            // (One mutation cannot repeat a key.)
            batch.validate()?;
        }
        let (mutations, preconditions) = batch.into_parts();
        if preconditions.is_empty() {
            if mutations.is_empty() {
                return Ok(());
            }
            let _shared = self.writers.read().unwrap_or_else(PoisonError::into_inner);
            // A plain write of a cached guard key drops it from the cache (before the
            // shared side is released, so no conditional batch sees it stale).
            let cached = self.guards.lengths.load(Ordering::Acquire);
            if cached != 0 && mutations.iter().any(|m| length_bit(m.key()) & cached != 0) {
                let mut cache = self.guards.lock();
                for m in &mutations {
                    cache.forget(m.key());
                }
            }
            self.write(mutations)
        } else {
            // Exclusive: no other write lands between the checks and the write.
            let _exclusive = self.writers.write().unwrap_or_else(PoisonError::into_inner);
            self.apply_conditional(mutations, preconditions)
        }
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map(drop).map_err(|e| self.error(e))
    }
}

impl Backend for SledStore {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// How many guard keys the cache holds at most (the oldest is dropped for a new one).
const MAX_GUARDS: usize = 16;
/// Guard values larger than this are not cached (read from sled each time).
const MAX_GUARD_VALUE: usize = 64 * 1024;

/// The bit of a key's length in [`GuardCache::lengths`].
fn length_bit(key: &[u8]) -> u64 {
    1u64 << (key.len() % 64)
}

/// The exact cache of guard-key values shared by every clone of a [`SledStore`].
#[derive(Debug, Default)]
struct GuardCache {
    /// One bit per cached key length (modulo 64), set when a key is cached and never
    /// cleared: a plain write whose keys hit no bit skips the cache without locking it.
    lengths: AtomicU64,
    entries: Mutex<GuardEntries>,
}

impl GuardCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, GuardEntries> {
        // The entries are only ever forgotten on a panic path: a poisoned cache is cleared.
        self.entries.lock().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            g.forget_all();
            g
        })
    }
}

/// Cached guard keys and their current values (`None`: absent), oldest first.
#[derive(Debug, Default)]
struct GuardEntries {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl GuardEntries {
    fn position(&self, key: &[u8]) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k.as_slice() == key)
    }

    fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    fn fill(&mut self, lengths: &AtomicU64, key: &[u8], value: Option<&[u8]>) {
        if value.is_some_and(|v| v.len() > MAX_GUARD_VALUE) || self.position(key).is_some() {
            return;
        }
        if self.entries.len() >= MAX_GUARDS {
            self.entries.remove(0);
        }
        lengths.fetch_or(length_bit(key), Ordering::AcqRel);
        self.entries.push((key.to_vec(), value.map(<[u8]>::to_vec)));
    }

    fn forget(&mut self, key: &[u8]) {
        if let Some(i) = self.position(key) {
            self.entries.remove(i);
        }
    }

    fn forget_all(&mut self) {
        self.entries.clear();
    }
}

/// sled 0.34 reports a datastore locked by another process as an `Io` error of kind
/// `Other` whose message starts with "could not acquire lock on" (see `Config::try_lock`
/// in sled's `config.rs`); `WouldBlock` is accepted too in case a platform reports the
/// lock failure directly.
fn is_lock_error(e: &sled::Error) -> bool {
    match e {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock
                || (io.kind() == std::io::ErrorKind::Other
                    && io.to_string().contains("could not acquire lock"))
        }
        _ => false,
    }
}

/// Calls `open` until it succeeds, fails with something other than a lock error, or the
/// time slept (through `sleep`, injectable for tests) would exceed `wait`. Backs off from
/// 5 ms, doubling, capped at 100 ms.
fn retry_while_locked<T>(
    mut open: impl FnMut() -> sled::Result<T>,
    wait: Duration,
    sleep: impl Fn(Duration),
) -> sled::Result<T> {
    let mut slept = Duration::ZERO;
    let mut pause = Duration::from_millis(5);
    loop {
        match open() {
            Err(e) if is_lock_error(&e) && slept < wait => {
                let step = pause.min(wait - slept);
                tracing::debug!(?step, "sled datastore is locked; retrying");
                sleep(step);
                slept += step;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

fn open_error(path: &Path, e: sled::Error) -> StoreError {
    if is_lock_error(&e) {
        tracing::debug!(path = %path.display(), error = %e, "sled datastore is locked");
        StoreError::InUse {
            path: path.to_path_buf(),
        }
    } else {
        backend_error(path, e)
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
#[error("sled datastore `{}` failed; check the disk and the path, then retry", .path.display())]
struct SledError {
    path: PathBuf,
    #[source]
    source: sled::Error,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn lock_error_is_recognised() {
        let locked = sled::Error::Io(io::Error::other(
            "could not acquire lock on \"/x/db\": Os { code: 11 }",
        ));
        assert!(is_lock_error(&locked));
        assert!(matches!(
            open_error(Path::new("/x"), locked),
            StoreError::InUse { path } if path == Path::new("/x")
        ));
        let other = sled::Error::Io(io::Error::new(io::ErrorKind::PermissionDenied, "no"));
        assert!(!is_lock_error(&other));
        let err = open_error(Path::new("/x"), other);
        assert!(matches!(
            err,
            StoreError::Backend {
                backend: "sled",
                ..
            }
        ));
        assert!(err.to_string().contains("sled"));
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("sled datastore `/x` failed; check the disk and the path, then retry")
        );
    }

    fn locked() -> sled::Error {
        sled::Error::Io(io::Error::other("could not acquire lock on \"/x/db\""))
    }

    #[test]
    fn open_retries_a_lock_error_until_it_clears() {
        let attempts = std::cell::Cell::new(0);
        let slept = std::cell::RefCell::new(Vec::new());
        let result = retry_while_locked(
            || {
                attempts.set(attempts.get() + 1);
                if attempts.get() < 4 {
                    Err(locked())
                } else {
                    Ok(7)
                }
            },
            Duration::from_secs(1),
            |d| slept.borrow_mut().push(d),
        );
        assert_eq!(result.unwrap(), 7);
        assert_eq!(attempts.get(), 4);
        assert_eq!(
            *slept.borrow(),
            [5, 10, 20].map(Duration::from_millis).to_vec()
        );
    }

    #[test]
    fn open_gives_up_after_the_lock_wait() {
        let slept = std::cell::RefCell::new(Vec::new());
        let result: sled::Result<()> = retry_while_locked(
            || Err(locked()),
            Duration::from_millis(300),
            |d| slept.borrow_mut().push(d),
        );
        assert!(is_lock_error(&result.unwrap_err()));
        let total: Duration = slept.borrow().iter().sum();
        assert_eq!(total, Duration::from_millis(300));
        assert!(slept
            .borrow()
            .iter()
            .all(|d| *d <= Duration::from_millis(100)));
        // Zero wait: one attempt, no sleep.
        let attempts = std::cell::Cell::new(0);
        let result: sled::Result<()> = retry_while_locked(
            || {
                attempts.set(attempts.get() + 1);
                Err(locked())
            },
            Duration::ZERO,
            |_| panic!("must not sleep"),
        );
        assert!(result.is_err());
        assert_eq!(attempts.get(), 1);
    }

    #[test]
    fn open_does_not_retry_other_errors() {
        let attempts = std::cell::Cell::new(0);
        let result: sled::Result<()> = retry_while_locked(
            || {
                attempts.set(attempts.get() + 1);
                Err(sled::Error::Unsupported("nope".into()))
            },
            Duration::from_secs(1),
            |_| panic!("must not sleep"),
        );
        assert!(result.is_err());
        assert_eq!(attempts.get(), 1);
    }

    #[test]
    fn single_mutation_batches_apply_and_keep_the_batch_rules() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        store
            .apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()))
            .unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), Some(b"1".to_vec()));
        store
            .apply(Batch::new().set(b"t/a".to_vec(), b"2".to_vec()))
            .unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), Some(b"2".to_vec()));
        store.apply(Batch::new().delete(b"t/a".to_vec())).unwrap();
        assert_eq!(store.get(b"t/a").unwrap(), None);
        // Deleting an absent key is not an error; an empty batch writes nothing.
        store.apply(Batch::new().delete(b"t/a".to_vec())).unwrap();
        store.apply(Batch::new()).unwrap();
        // A failed precondition still refuses a one-mutation batch.
        let err = store
            .apply(
                Batch::new()
                    .require_eq(b"t/b".to_vec(), b"x".to_vec())
                    .set(b"t/b".to_vec(), b"y".to_vec()),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        assert_eq!(store.get(b"t/b").unwrap(), None);
        // Survives a reopen once flushed.
        store
            .apply(Batch::new().set(b"t/c".to_vec(), b"3".to_vec()))
            .unwrap();
        store.flush().unwrap();
        drop(store);
        let store = SledStore::open_existing(dir.path().join("db")).unwrap();
        assert_eq!(store.get(b"t/c").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn guard_cache_follows_every_write_of_a_guard_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        let guarded = |fence: Option<&[u8]>, doc: &[u8]| {
            Batch::new()
                .require(b"f".to_vec(), fence.map(<[u8]>::to_vec))
                .set(b"t/doc".to_vec(), doc.to_vec())
        };
        // Absent guard: cached as absent, then a plain write changes it.
        store.apply(guarded(None, b"1")).unwrap();
        assert!(store.guards.lock().get(b"f").is_some());
        store
            .apply(Batch::new().set(b"f".to_vec(), b"A".to_vec()))
            .unwrap();
        assert!(store.guards.lock().get(b"f").is_none());
        let err = store.apply(guarded(None, b"2")).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { ref key, .. } if key == b"f"),
            "{err}"
        );
        store.apply(guarded(Some(b"A"), b"2")).unwrap();
        // A conditional write of the guard key (a compare-and-swap) is seen too.
        store
            .apply(
                Batch::new()
                    .require_eq(b"f".to_vec(), b"A".to_vec())
                    .set(b"f".to_vec(), b"B".to_vec()),
            )
            .unwrap();
        assert!(store.apply(guarded(Some(b"A"), b"3")).is_err());
        store.apply(guarded(Some(b"B"), b"3")).unwrap();
        // A multi-key batch deleting it, through a clone of the store.
        store
            .clone()
            .apply(
                Batch::new()
                    .require_eq(b"t/doc".to_vec(), b"3".to_vec())
                    .delete(b"f".to_vec())
                    .set(b"t/other".to_vec(), b"x".to_vec()),
            )
            .unwrap();
        assert!(store.apply(guarded(Some(b"B"), b"4")).is_err());
        store.apply(guarded(None, b"4")).unwrap();
        assert_eq!(store.get(b"t/doc").unwrap(), Some(b"4".to_vec()));
        assert_eq!(store.get(b"f").unwrap(), None);
    }

    #[test]
    fn a_single_key_compare_and_swap_reports_the_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("db")).unwrap();
        let put = |old: Option<&[u8]>, new: &[u8]| {
            store.apply(
                Batch::new()
                    .require(b"t/k".to_vec(), old.map(<[u8]>::to_vec))
                    .set(b"t/k".to_vec(), new.to_vec()),
            )
        };
        put(None, b"1").unwrap();
        let reason = |e: StoreError| match e {
            StoreError::Conflict { reason, .. } => reason,
            other => panic!("{other}"),
        };
        assert_eq!(
            reason(put(None, b"2").unwrap_err()),
            strata_store::ConflictReason::Present
        );
        assert_eq!(
            reason(put(Some(b"0"), b"2").unwrap_err()),
            strata_store::ConflictReason::Changed
        );
        put(Some(b"1"), b"2").unwrap();
        let del = Batch::new()
            .require_eq(b"t/k".to_vec(), b"2".to_vec())
            .delete(b"t/k".to_vec());
        store.apply(del.clone()).unwrap();
        assert_eq!(
            reason(store.apply(del).unwrap_err()),
            strata_store::ConflictReason::Missing
        );
        assert_eq!(store.get(b"t/k").unwrap(), None);
    }

    #[test]
    fn default_cache_capacity_is_64_mib() {
        assert_eq!(SledOptions::new().cache_capacity_bytes(), 64 << 20);
        assert_eq!(
            SledOptions::new().cache_capacity(5).cache_capacity_bytes(),
            5
        );
    }
}
