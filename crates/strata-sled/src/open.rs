//! Opening a sled datastore: [`SledOptions`], and the retry while another handle's file
//! lock is being released.

use crate::private_copy::PrivateCopy;
use crate::values::ValueCache;
use crate::{backend_error, log, safety, Sealer, SledStore};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use strata_store::{epoch::EpochClock, Result, StoreError};

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
    write_cache_entries: usize,
    write_cache_bytes: usize,
    durability: SledDurability,
}

/// When a returned write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SledDurability {
    /// sled's own: a write is atomic and in sled's log buffer when it returns, and sled
    /// writes it out in the background (every 500 ms) or at [`KvWrite::flush`]; a crash or
    /// power loss can lose the writes since the last flush (each one whole, never part
    /// of it). How Numax runs sled, and the default.
    ///
    /// [`KvWrite::flush`]: strata_store::KvWrite::flush
    #[default]
    Background,
    /// Every write is flushed (sled's `flush`, which syncs its log) before it returns: a
    /// returned write survives a crash or power loss, as redb's default does, at the cost
    /// of one sync per write.
    Immediate,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            cache_capacity: Self::DEFAULT_CACHE_CAPACITY,
            lock_wait: Self::DEFAULT_LOCK_WAIT,
            write_cache_entries: Self::DEFAULT_WRITE_CACHE_ENTRIES,
            write_cache_bytes: Self::DEFAULT_WRITE_CACHE_BYTES,
            durability: SledDurability::default(),
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
    /// handle is dropped, so a datastore another program (or sled itself) just closed can
    /// briefly be found locked; a short wait bridges that. (Dropping the last clone of a
    /// [`SledStore`] returns only once sled released it.) A datastore that stays locked
    /// for longer is [`StoreError::InUse`].
    pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(1);

    /// How many recently written values the write cache keeps at most: 8192 (see
    /// [`SledOptions::write_cache`]).
    pub const DEFAULT_WRITE_CACHE_ENTRIES: usize = 8192;

    /// How many bytes the write cache holds at most: 8 MiB (see
    /// [`SledOptions::write_cache`]).
    pub const DEFAULT_WRITE_CACHE_BYTES: usize = 8 * 1024 * 1024;

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

    /// Bounds the exact write-through cache: the values most recently written through this
    /// store (any clone) are served to `get` without a sled tree traversal — the read every
    /// document write makes before it writes. At most `entries` entries and `bytes` bytes
    /// (each entry counts its key, its value and 64 bytes of bookkeeping), split evenly
    /// over up to 64 stripes; a value above a quarter of a stripe's bytes (32 KiB with the
    /// defaults) is not cached. `0` for either disables the cache.
    ///
    /// The cache never changes what a read returns: a cached value is the one sled holds,
    /// because every write of the datastore goes through this store (one process holds the
    /// datastore) and a write updates its keys' entries before another read of them can
    /// run (crate documentation). Values sled still holds share their buffer with it.
    pub fn write_cache(mut self, entries: usize, bytes: usize) -> Self {
        self.write_cache_entries = entries;
        self.write_cache_bytes = bytes;
        self
    }

    /// Sets when a returned write reaches the disk ([`SledDurability::Background`] by
    /// default; [`SledDurability::Immediate`] flushes each write before it returns).
    pub fn durability(mut self, durability: SledDurability) -> Self {
        self.durability = durability;
        self
    }

    /// The configured durability.
    pub fn durability_mode(&self) -> SledDurability {
        self.durability
    }

    /// The write cache's bounds: `(entries, bytes)`.
    pub fn write_cache_bounds(&self) -> (usize, usize) {
        (self.write_cache_entries, self.write_cache_bytes)
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
        let seal = match safety::inspect(path)? {
            safety::Found::Sled => {
                self.probe_unsealed(path)?;
                safety::prepare_existing(path, self.lock_wait)?
            }
            safety::Found::Nothing => None,
        };
        self.open_at(path, seal)
    }

    /// Opens an existing datastore at `path` (for readers and inspection): a missing path,
    /// or a directory that holds no sled datastore, is [`StoreError::NotFound`] and nothing
    /// is created.
    ///
    /// Before sled sees the directory: `conf` must be sled's configuration and `conf`/`db`
    /// regular files (not symlinks), else [`StoreError::Damaged`] naming the file; a `db`
    /// shorter than at the last clean close is [`StoreError::Damaged`] (sled would cut it
    /// down to what it can read); without a seal, sled first runs on a private copy and a
    /// log that holds more than sled recovers is [`StoreError::Damaged`], the datastore
    /// untouched; a `snap.*.generating` leftover (never the last good snapshot) is
    /// removed, as sled itself would; media sled cannot write are
    /// [`StoreError::CannotOpen`] (sled writes on every open). A panic inside sled while
    /// opening is [`StoreError::Damaged`].
    pub fn open_existing(&self, path: impl AsRef<Path>) -> Result<SledStore> {
        let path = path.as_ref();
        match safety::inspect(path)? {
            safety::Found::Nothing => Err(not_found(path)),
            safety::Found::Sled => {
                self.probe_unsealed(path)?;
                let seal = safety::prepare_existing(path, self.lock_wait)?;
                self.open_at(path, seal)
            }
        }
    }

    /// Before a datastore without a seal (never closed by strata, or killed while open) is
    /// opened for writing: sled is first run on a private copy, and a log that holds
    /// more than sled recovers from it ([`check_log`]) is [`StoreError::Damaged`] — sled
    /// would overwrite and cut away what it does not recover, so the datastore is not
    /// opened and stays byte for byte as it was. A sealed datastore needs no probe: its
    /// seal catches a `db` cut short.
    fn probe_unsealed(&self, path: &Path) -> Result<()> {
        if safety::has_seal(path) {
            return Ok(());
        }
        let copy = PrivateCopy::of(path, self.lock_wait)?;
        let before = log_segments(copy.path());
        let db = safety::prepare_existing(copy.path(), Duration::ZERO)
            .and_then(|seal| self.open_checked(copy.path(), seal))
            .map_err(|e| copy.rename(e))?;
        let checked = check_log(path, &before, copy.path());
        drop(db);
        drop(copy);
        checked
    }

    /// Opens an existing datastore at `path` for reading only, without writing anything
    /// to it: sled 0.34 cannot open a datastore without writing to it (it appends to its
    /// log, writes a new `snap.*` snapshot and removes the old one on every open), so the
    /// datastore's files are copied, under its lock, into a private temporary directory
    /// (`TMPDIR`) and the copy is opened; it is removed when the store is dropped. This
    /// costs the time and the temporary space of one copy of the datastore; it works on
    /// read-only media.
    ///
    /// A missing path, or a directory that holds no sled datastore, is
    /// [`StoreError::NotFound`]; the checks of [`SledOptions::open_existing`] are made on
    /// the copy, and errors name the datastore's own files. Writes to the store fail with
    /// [`StoreError::CannotOpen`] (they would only change the copy).
    pub fn open_read_only(&self, path: impl AsRef<Path>) -> Result<SledStore> {
        let path = path.as_ref();
        if safety::inspect(path)? == safety::Found::Nothing {
            return Err(not_found(path));
        }
        let copy = PrivateCopy::of(path, self.lock_wait)?;
        let before = log_segments(copy.path());
        let db = safety::prepare_existing(copy.path(), Duration::ZERO)
            .and_then(|seal| self.open_checked(copy.path(), seal))
            .map_err(|e| copy.rename(e))?;
        check_log(path, &before, copy.path())?;
        Ok(self.store(path, db, Some(copy)))
    }

    fn open_at(&self, path: &Path, seal: Option<safety::Seal>) -> Result<SledStore> {
        let db = self.open_checked(path, seal)?;
        Ok(self.store(path, db, None))
    }

    /// Opens with sled; `seal` is what the last clean close recorded (consumed by
    /// [`safety::prepare_existing`]): the recovered keys are checked against it, and it is
    /// put back when the open fails, so that a damaged datastore stays reported as such.
    fn open_checked(&self, path: &Path, seal: Option<safety::Seal>) -> Result<sled::Db> {
        let opened = self.open_sled(path).and_then(|db| match &seal {
            Some(seal) => {
                let bounds = key_bounds(&db).map_err(|e| open_error(path, e))?;
                let now = bounds.as_ref().map(|(f, l)| (f.as_ref(), l.as_ref()));
                safety::check_recovered(path, seal, now).map(|()| db)
            }
            None => Ok(db),
        });
        let db = match opened {
            Ok(db) => db,
            Err(e) => {
                if let Some(seal) = &seal {
                    safety::restore_seal(path, seal);
                }
                return Err(e);
            }
        };
        Ok(db)
    }

    fn open_sled(&self, path: &Path) -> Result<sled::Db> {
        tracing::debug!(
            path = %path.display(),
            cache_capacity = self.cache_capacity,
            "opening sled datastore"
        );
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(self.cache_capacity);
        strata_store::guarded_open(path, || {
            retry_while_locked(|| config.open(), self.lock_wait, std::thread::sleep)
        })?
        .map_err(|e| open_error(path, e))
    }

    /// The store of `db`, the datastore at `path` (or, `copy`, a private copy of it).
    fn store(&self, path: &Path, db: sled::Db, copy: Option<PrivateCopy>) -> SledStore {
        let epoch: Arc<EpochClock> = Arc::default();
        SledStore {
            read_only: copy.is_some(),
            flush_each_write: self.durability == SledDurability::Immediate,
            _seal: Arc::new(Sealer {
                db: Some(db.clone()),
                path: path.to_path_buf(),
                lock_wait: self.lock_wait.max(Self::DEFAULT_LOCK_WAIT),
                copy,
                opened: epoch.observe(),
                epoch: epoch.clone(),
            }),
            db,
            path: path.to_path_buf(),
            writers: Arc::default(),
            guards: Arc::default(),
            epoch,
            checks: Arc::default(),
            values: Arc::new(ValueCache::new(
                self.write_cache_entries,
                self.write_cache_bytes,
            )),
        }
    }
}

/// The segment headers of the log in `dir` and its segment size, read before sled opens
/// it (`None` when `conf` names no segment size or the log cannot be read: sled's open
/// reports that).
fn log_segments(dir: &Path) -> Option<(Vec<log::Segment>, u64)> {
    let conf = std::fs::read(dir.join("conf")).ok()?;
    let size = log::segment_size(&conf)?;
    let segments = log::segments(&dir.join("db"), size).ok()?;
    Some((segments, size))
}

/// After sled opened the log at `opened` (whose headers were `before`): a header written
/// when the log was completely written past the point sled recovered it to proves that
/// once-durable log is gone from the file (a `db` cut short by an interrupted copy or
/// restore: sled then replays only what precedes the first lost segment and overwrites
/// the rest). [`StoreError::Damaged`] naming `original`'s `db` and what was found.
fn check_log(
    original: &Path,
    before: &Option<(Vec<log::Segment>, u64)>,
    opened: &Path,
) -> Result<()> {
    let Some((segments, size)) = before else {
        return Ok(());
    };
    let recovered = log::recovered_lsn(opened)
        .map_err(|e| backend_error(original, sled::Error::Io(e)))?
        .unwrap_or(0);
    let lost = log::beyond_recovered(segments, recovered);
    let Some(newest) = lost.iter().map(|s| s.stable).max() else {
        return Ok(());
    };
    let mut offsets: Vec<String> = lost.iter().take(3).map(|s| s.offset.to_string()).collect();
    if lost.len() > 3 {
        offsets.push("…".into());
    }
    let len = std::fs::metadata(original.join("db"))
        .map(|m| m.len())
        .unwrap_or(0);
    Err(StoreError::Damaged {
        path: original.join("db"),
        reason: format!(
            "the sled log ({len} bytes) holds {} segment(s) of {size} bytes (at offsets {}) written after log position {newest} was complete, but sled recovers the log only to position {recovered}: the file holds more than sled recovers (cut short or overwritten: an interrupted copy or restore?), and sled would overwrite and cut away the rest; nothing was opened for writing and the file is unchanged; restore the datastore directory from a complete copy",
            lost.len(),
            offsets.join(", "),
        ),
    })
}

/// [`StoreError::NotFound`] of `path`: missing, or a directory without sled's files.
fn not_found(path: &Path) -> StoreError {
    if path.is_dir() {
        StoreError::NotFound {
            path: path.to_path_buf(),
            what: format!("a sled datastore in directory `{}`", path.display()),
            remedy: "the directory holds no sled `conf` and `db`; check the path (a store is never created by opening it to read or migrate)".into(),
        }
    } else {
        StoreError::not_found(path)
    }
}

/// The smallest and the largest key of `db` (`None`: empty).
pub(crate) fn key_bounds(db: &sled::Db) -> sled::Result<Option<(sled::IVec, sled::IVec)>> {
    match (db.first()?, db.last()?) {
        (Some((first, _)), Some((last, _))) => Ok(Some((first, last))),
        _ => Ok(None),
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
    } else if let sled::Error::Corruption { .. } = e {
        StoreError::Damaged {
            path: path.to_path_buf(),
            reason: format!("sled found corrupted data in its log or snapshot ({e})"),
        }
    } else {
        backend_error(path, e)
    }
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
            Some("sled datastore `/x` failed: the files cannot be written or read with these permissions: check the owner and mode of the datastore and its directory, and that the file system is mounted writable")
        );
    }

    /// The message of a sled failure says "retry" only for a transient I/O failure.
    #[test]
    fn a_failure_says_retry_only_when_a_retry_can_help() {
        let shown = |e: sled::Error| {
            let err = open_error(Path::new("/srv/s"), e);
            std::error::Error::source(&err)
                .map(ToString::to_string)
                .unwrap_or_default()
        };
        let full = shown(sled::Error::Io(io::Error::new(
            io::ErrorKind::StorageFull,
            "no space",
        )));
        assert!(
            full.contains("`/srv/s`") && full.contains("free space"),
            "{full}"
        );
        let other = shown(sled::Error::Unsupported("nope".into()));
        let bug = shown(sled::Error::ReportableBug("bug".into()));
        for msg in [&full, &other, &bug] {
            assert!(!msg.contains("retry"), "{msg}");
        }
        let transient = shown(sled::Error::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            "slow",
        )));
        assert!(transient.contains("retry"), "{transient}");
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
    fn default_cache_capacity_is_64_mib() {
        assert_eq!(SledOptions::new().cache_capacity_bytes(), 64 << 20);
        assert_eq!(
            SledOptions::new().cache_capacity(5).cache_capacity_bytes(),
            5
        );
    }
}
