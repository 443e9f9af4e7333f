//! The redb backend of strata's store trait: the embedded default for new stores.
//!
//! [`RedbStore`] keeps strata's key space (byte keys to byte values) in two redb tables of
//! **one file**: the documents (every key starting with [`DOCUMENT_PREFIX`], `__nx/doc/`)
//! in `strata_doc`, every other key in `strata_meta` (**layout 2**, marked in the table
//! `strata`, typed so that an older build, which opens `strata` as its one byte table,
//! fails instead of seeing an empty store; docs/format.md, "redb tables"). Keys keep their full bytes, so a `get`
//! or a write is routed by prefix, a batch spanning both tables is one redb write
//! transaction, and a scan whose prefix spans both (`""`, `__nx/`) merges the two ordered
//! ranges into the one key order. Documents apart from the metadata keys that sort after
//! them are appended at the end of their table instead of splitting leaves mid-tree.
//!
//! **Older files** (layout 1: every key in the byte table `strata`) are moved to layout 2
//! by the first writable open, in one durable write transaction (a crash during it leaves layout 1
//! whole); a read-only open reads them as they are and writes nothing
//! ([`RedbStore::layout_version`] says which layout an open store has). A move without room
//! (less free space than it needs, or a full disk, quota or file-size limit met on the way)
//! leaves the file in layout 1 and opens it writable there, with a warning
//! ([`RedbStore::layout_upgrade_postponed`]); a later writable open with room moves it.
//!
//! **The write primitive**: every write ([`KvWrite::read_modify_write`], and so every
//! batch) is one redb write transaction. redb runs one write transaction at a time per
//! database, so the keys a write decides on are read inside the transaction that then
//! checks the decided batch's preconditions and writes its mutations: read-decide-write
//! is atomic against every other writer, and a refusal or a failed precondition aborts
//! the transaction, writing nothing ([`StoreError::Conflict`]). A one-document write reads
//! its document for writing (redb's `get_mut`: one descent that copies the path), so when
//! its batch only sets that document to a value no longer than the stored one it is
//! replaced where it is, without the second descent an insert makes; any other batch is
//! applied as usual on the path already copied. redb locks the file, so
//! another process opening it gets [`StoreError::InUse`]; a second open in this process is
//! [`StoreError::CannotOpen`] saying so.
//!
//! **Guard keys are cached**: the keys a write requires or reads but does not write (the
//! fence record, a collection's deploy-window record) are kept, exactly, in a small
//! in-process cache taken under the write transaction, so a document write makes one
//! B-tree lookup (its document) instead of one per guard (module `guards`: why the
//! cache cannot go stale — one process writes the file, every write of a key drops it
//! from the cache before writing it).
//!
//! **Durability** (chosen deliberately, see [`RedbDurability`]): by default every batch is
//! committed with redb's `Durability::Immediate`: when [`KvWrite::apply`] returns, the
//! batch is on disk (redb's commit fsyncs, its copy-on-write B-tree and checksummed commit
//! slots make a torn commit roll back to the previous one). A crash or power loss loses
//! **no acknowledged batch**; an interrupted one is absent as a whole. [`KvWrite::flush`]
//! has nothing left to do. [`RedbDurability::Deferred`] trades that for throughput:
//! batches are committed without fsync and a crash may lose every batch since the last
//! [`KvWrite::flush`] (never part of one).
//!
//! **Opening safely**: [`RedbOptions::create`] refuses an existing file that is not a redb
//! database (it is left byte for byte unchanged) and a dangling symlink (it would create
//! the link's target); [`RedbOptions::open_existing`] never creates anything and falls back
//! to a read-only open when the file or its medium is not writable (writes then fail with
//! [`StoreError::CannotOpen`]); a panic inside redb while opening a damaged file becomes
//! [`StoreError::Damaged`] naming the file.
//!
//! ```
//! use strata_redb::RedbStore;
//! use strata_store::{Batch, KvRead, KvWrite, ScanLimits};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = RedbStore::create(dir.path().join("store.redb"))?;
//! store.apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()))?;
//! let page = store.scan(b"t/", None, ScanLimits::new(10, 1024)?)?;
//! assert_eq!(page.records[0].value, b"1");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod cut;
mod error;
mod guards;
mod open_here;
mod pages;
mod postpone;
mod reads;
mod scan;
mod tables;

use error::{io_error, map_error, open_error};

pub use pages::{check_pages, PageCheck};
pub use tables::{CURRENT_LAYOUT, DOCUMENT_PREFIX, LAYOUT_KEY};

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_store::{
    Backend, Capabilities, Decide, KvRead, KvWrite, Mutation, Result, ScanLimits, Store,
    StoreError, Visit, VisitEnd,
};
use tables::Layout;

/// The backend name used in messages and [`StoreError::Backend`].
const NAME: &str = "redb";

/// A write reading at most this many keys caches the guards among them (module `guards`).
const FILL_FROM_READS: usize = 4;

/// The first bytes of every redb file (redb's header magic number).
pub const MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// True when `path` is a regular file (after following symlinks) that starts with redb's
/// magic number. Reads at most 9 bytes; never writes.
pub fn is_redb_file(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
        return false;
    }
    let mut head = [0u8; MAGIC.len()];
    file.read_exact(&mut head).is_ok() && head == MAGIC
}

/// When a committed batch reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedbDurability {
    /// Every batch is fsynced by its commit: a returned [`KvWrite::apply`] survives a crash
    /// or power loss. The default.
    #[default]
    Immediate,
    /// Batches are committed without fsync; [`KvWrite::flush`] makes them durable. A crash
    /// may lose the batches since the last flush (each one whole, never part of it).
    Deferred,
}

/// How to open a redb store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedbOptions {
    cache_capacity: usize,
    durability: RedbDurability,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            cache_capacity: Self::DEFAULT_CACHE_CAPACITY,
            durability: RedbDurability::Immediate,
        }
    }
}

impl RedbOptions {
    /// The default page-cache capacity: 64 MiB (redb's own default is 1 GiB).
    pub const DEFAULT_CACHE_CAPACITY: usize = 64 * 1024 * 1024;

    /// Options with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets redb's page-cache capacity in bytes.
    pub fn cache_capacity(mut self, bytes: usize) -> Self {
        self.cache_capacity = bytes;
        self
    }

    /// Sets when committed batches reach the disk.
    pub fn durability(mut self, durability: RedbDurability) -> Self {
        self.durability = durability;
        self
    }

    fn builder(&self) -> redb::Builder {
        let mut builder = redb::Builder::new();
        builder.set_cache_size(self.cache_capacity);
        builder
    }

    /// Opens the redb store at `path`, creating the file (not its parent directory) when
    /// nothing exists there. An existing file that is not a redb database is refused with
    /// [`StoreError::Damaged`] and left unchanged; so is a symlink whose target is missing.
    pub fn create(&self, path: impl AsRef<Path>) -> Result<RedbStore> {
        let path = path.as_ref();
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(path = %path.display(), "creating redb store");
                let db = strata_store::guarded_open(path, || self.builder().create(path))?
                    .map_err(|e| open_error(path, e.into()))?;
                // The tables and the layout marker are created now (`writable`), so that a
                // read-only open of a new store finds them.
                self.writable(path, db)
            }
            Err(e) => Err(io_error(path, e)),
            Ok(_) if !path.exists() => Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: "it is a symlink to a missing file; use the path of the real file".into(),
            }),
            Ok(_) => self.open_existing(path),
        }
    }

    /// Opens the existing redb store at `path` for reading and writing; never creates
    /// anything. A missing path is [`StoreError::NotFound`]; a file that is not a redb
    /// database is [`StoreError::Damaged`] (and is not modified). When the file or its
    /// medium is not writable, the store is opened read-only (reads work, writes fail with
    /// [`StoreError::CannotOpen`]).
    pub fn open_existing(&self, path: impl AsRef<Path>) -> Result<RedbStore> {
        let path = path.as_ref();
        self.check_existing(path)?;
        tracing::debug!(path = %path.display(), "opening redb store");
        match strata_store::guarded_open(path, || self.builder().open(path))? {
            Ok(db) => self.writable(path, db),
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(e))) if is_not_writable(&e) => {
                tracing::debug!(path = %path.display(), error = %e, "not writable; opening read-only");
                self.open_read_only(path)
            }
            Err(e) => Err(open_error(path, e.into())),
        }
    }

    /// Opens the existing redb store at `path` read-only: nothing is written to the file,
    /// so it works on read-only media and for other users. A store that needs crash
    /// recovery cannot be opened this way ([`StoreError::CannotOpen`]: open it once
    /// writable). Writes fail with [`StoreError::CannotOpen`].
    pub fn open_read_only(&self, path: impl AsRef<Path>) -> Result<RedbStore> {
        let path = path.as_ref();
        self.check_existing(path)?;
        match strata_store::guarded_open(path, || self.builder().open_read_only(path))? {
            Ok(db) => {
                // A layout-1 file is read as it is (nothing is written).
                let layout = strata_store::guarded_open(path, || {
                    let txn = db.begin_read().map_err(|e| open_error(path, e.into()))?;
                    tables::read_layout(path, &txn)
                })??;
                Ok(RedbStore::from_db(path, Db::Ro(db), layout, None, self.durability))
            }
            Err(redb::DatabaseError::RepairAborted) => Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: "it needs crash recovery, which a read-only open cannot do; open it once with write access (any strata command on a writable copy)".into(),
            }),
            Err(e) => Err(open_error(path, e.into())),
        }
    }

    fn check_existing(&self, path: &Path) -> Result<()> {
        if !path.exists() {
            return Err(StoreError::not_found(path));
        }
        if !is_redb_file(path) {
            return Err(StoreError::Damaged {
                path: path.to_path_buf(),
                reason: "it is not a redb database (no redb header)".into(),
            });
        }
        // Before redb opens it: a recovery would rewrite the header of a cut file.
        cut::refuse_cut(path)
    }
}

fn is_not_writable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

enum Db {
    Rw(Database),
    Ro(ReadOnlyDatabase),
}

struct Inner {
    db: Db,
    /// Which redb table each key lives in (module `tables`).
    layout: Layout,
    /// Why this writable open left the file in layout 1 (module `postpone`).
    postponed: Option<String>,
    path: PathBuf,
    durability: RedbDurability,
    /// The exact cache of guard keys (module `guards`).
    guards: guards::Guards,
    /// Documents replaced in place (tests).
    #[cfg(test)]
    in_place: std::sync::atomic::AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        open_here::unregister(&self.path);
    }
}

/// A strata store in one redb file (one process at a time).
///
/// Clones (and clones of the [`Store`] made from it) share one open database. redb locks
/// the file while it is open: another process opening it, or a second open in this
/// process, gets [`StoreError::InUse`].
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.inner.path)
            .field("read_only", &self.is_read_only())
            .finish_non_exhaustive()
    }
}

impl RedbStore {
    fn from_db(
        path: &Path,
        db: Db,
        layout: Layout,
        postponed: Option<String>,
        durability: RedbDurability,
    ) -> Self {
        open_here::register(path);
        RedbStore {
            inner: Arc::new(Inner {
                db,
                layout,
                postponed,
                path: path.to_path_buf(),
                durability,
                guards: guards::Guards::default(),
                #[cfg(test)]
                in_place: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Opens (creating if nothing is there) the store at `path` with default
    /// [`RedbOptions`].
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        RedbOptions::new().create(path)
    }

    /// Opens the existing store at `path` with default [`RedbOptions`]; never creates one.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self> {
        RedbOptions::new().open_existing(path)
    }

    /// Opens the existing store at `path` read-only with default [`RedbOptions`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        RedbOptions::new().open_read_only(path)
    }

    /// Opens (creating if needed) the store at `path` and wraps it in a [`Store`] handle.
    pub fn create_store(path: impl AsRef<Path>) -> Result<Store> {
        Self::create(path).map(Self::into_store)
    }

    /// Wraps this backend in a [`Store`] handle (which adds the write lease).
    pub fn into_store(self) -> Store {
        Store::new(self)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// True when the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        matches!(self.inner.db, Db::Ro(_))
    }

    /// The layout version of the file (module docs: 2, [`CURRENT_LAYOUT`], documents in
    /// their own redb table; 1 for a file of an older build opened read-only, which is read
    /// as it is, or opened writable when moving it to layout 2 found no room: see
    /// [`RedbStore::layout_upgrade_postponed`]). A store in layout 1 reads and writes like
    /// one in layout 2.
    pub fn layout_version(&self) -> u64 {
        self.inner.layout.version()
    }

    /// Why this writable open left a layout-1 file in layout 1: moving it to layout 2 ran
    /// out of room (a full disk or quota; the move needs about the file's size in free
    /// space). The message names the file, the error and how much to free; the store works
    /// fully in layout 1 and a later writable open with room moves it. `None` when the
    /// upgrade was not postponed (the file has the current layout, or was opened
    /// read-only).
    pub fn layout_upgrade_postponed(&self) -> Option<&str> {
        self.inner.postponed.as_deref()
    }

    fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// Bytes the database file occupies.
    pub fn size_on_disk(&self) -> Result<u64> {
        std::fs::metadata(&self.inner.path)
            .map(|m| m.len())
            .map_err(|e| io_error(&self.inner.path, e))
    }

    fn error(&self, e: impl Into<redb::Error>) -> StoreError {
        map_error(&self.inner.path, e.into())
    }

    /// Runs `f`, a call into redb, with a panic (redb panics on some damaged pages, for
    /// example "entered unreachable code" while descending a corrupted B-tree) reported as
    /// [`StoreError::Damaged`] naming the file instead of ending the process.
    fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        strata_store::guarded_open(&self.inner.path, f)?
    }

    fn begin_read(&self) -> Result<redb::ReadTransaction> {
        match &self.inner.db {
            Db::Rw(db) => db.begin_read(),
            Db::Ro(db) => db.begin_read(),
        }
        .map_err(|e| self.error(e))
    }

    /// The table of `key` in a read transaction, `None` when it was never created (an
    /// empty store).
    fn read_table(
        &self,
        key: &[u8],
    ) -> Result<Option<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>> {
        let txn = self.begin_read()?;
        match txn.open_table(self.layout().table_of(key)) {
            Ok(table) => Ok(Some(table)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// One write transaction: reads `reads`, hands them to `decide`, checks the decided
    /// batch's preconditions, applies its mutations, commits (with
    /// `Durability::Immediate` when `durable` or the store's durability asks for it). A
    /// refusal (or an empty batch) aborts the transaction: nothing is written.
    fn write(&self, reads: &[&[u8]], decide: &mut Decide<'_>, durable: bool) -> Result<bool> {
        let db = match &self.inner.db {
            Db::Rw(db) => db,
            Db::Ro(_) => {
                return Err(StoreError::CannotOpen {
                    path: self.inner.path.clone(),
                    reason: "it was opened read-only (the file or its medium is not writable), so it cannot be written; give strata write access to it".into(),
                })
            }
        };
        let mut txn = self.guard(|| db.begin_write().map_err(|e| self.error(e)))?;
        if !durable && self.inner.durability == RedbDurability::Deferred {
            txn.set_durability(redb::Durability::None)
                .map_err(|e| self.error(e))?;
        }
        // Held for the whole transaction: redb runs one write transaction at a time, so
        // this lock is never waited for (see module `guards` for why the cache is exact).
        let mut cache = self.inner.guards.lock();
        // `Some(true)`: commit; `Some(false)`: nothing to commit (abort).
        let outcome = (|| {
            // Each table is opened the first time one of its keys is read or written.
            let mut tables = tables::WriteTables::new(&txn, &self.inner.path, self.layout());
            let (batch, fill, in_place) = {
                // The values are read inside this write transaction: redb runs one at a
                // time, so they are current until it commits. One look in the guard cache
                // per key: what it serves is neither opened nor read. (On the stack for
                // the few keys of a one-document write.)
                let mut few = [None; 4];
                let many: Vec<Option<Option<&[u8]>>>;
                let served: &[Option<Option<&[u8]>>] = match few.get_mut(..reads.len()) {
                    Some(few) => {
                        for (slot, key) in few.iter_mut().zip(reads) {
                            *slot = cache.peek(key);
                        }
                        few
                    }
                    None => {
                        many = reads.iter().map(|k| cache.peek(k)).collect();
                        &many
                    }
                };
                cache.count_hits(served.iter().filter(|c| c.is_some()).count());
                // The keys it does not serve, in order: read from their tables.
                let mut few_keys: [&[u8]; 4] = [&[]; 4];
                let many_keys: Vec<&[u8]>;
                let uncached = reads
                    .iter()
                    .zip(served)
                    .filter(|(_, c)| c.is_none())
                    .map(|(k, _)| *k);
                let to_read: &[&[u8]] = if reads.len() <= few_keys.len() {
                    let mut n = 0;
                    for (slot, key) in few_keys.iter_mut().zip(uncached) {
                        *slot = key;
                        n += 1;
                    }
                    &few_keys[..n]
                } else {
                    many_keys = uncached.collect();
                    &many_keys
                };
                // A one-document write whose document is the first key it reads from the
                // tables (and the only one in the documents' table) reads it for writing:
                // `get_mut` descends once, copying the path, so a decision that sets the
                // document replaces it there without a second descent (see below).
                let one_doc = reads.len() <= FILL_FROM_READS
                    && !to_read.is_empty()
                    && to_read.first() == reads.first()
                    && tables.is_document_table(to_read[0])
                    && !to_read[1..].iter().any(|k| tables.is_document_table(k));
                {
                    let tables = &mut tables;
                    self.guard(move || {
                        for key in to_read {
                            tables.open_for(key)?;
                        }
                        Ok(())
                    })?;
                }
                let mut for_write = None;
                let stored: reads::Slots<'_> = if one_doc {
                    let (docs, main) = tables.split();
                    let (Some(docs), [doc, rest @ ..]) = (docs, to_read) else {
                        return Err(self.error(redb::StorageError::Corrupted(
                            "the documents' table was not open for a document write".into(),
                        )));
                    };
                    for_write = self.guard(|| docs.get_mut(*doc).map_err(|e| self.error(e)))?;
                    self.guard(|| {
                        let mut slots = reads::Slots::with_capacity(rest.len());
                        for key in rest {
                            let table = main.ok_or_else(|| {
                                self.error(redb::StorageError::Corrupted(
                                    "the metadata table was not open for a write's read".into(),
                                ))
                            })?;
                            slots.push(table.get(*key).map_err(|e| self.error(e))?);
                        }
                        Ok(slots)
                    })?
                } else {
                    // (The tables are only read from now on, as long as `stored` lives.)
                    let tables: &tables::WriteTables<'_> = &tables;
                    self.guard(|| reads::read_all(&self.inner.path, tables, to_read))?
                };
                let mut values: smallvec::SmallVec<[Option<&[u8]>; 3]> =
                    smallvec::SmallVec::with_capacity(reads.len());
                {
                    // The document read for writing is the first key not served.
                    let doc = for_write.as_ref().map(|g| g.value());
                    let mut first = one_doc;
                    let mut slots = stored.iter();
                    for cached in served {
                        values.push(match cached {
                            Some(v) => *v,
                            None if std::mem::take(&mut first) => doc,
                            None => slots.next().and_then(|g| g.as_ref()).map(|g| g.value()),
                        });
                    }
                }
                // The caller's decision runs outside the panic guard: its panic is its own.
                let batch = decide(&values);
                drop(values);
                // The keys a one-document write reads besides its document (a
                // deploy-window record, the fence record) that its batch does not write
                // are guards: cached for the next write. (Not those of a write reading
                // many keys — a write set: it would only churn the cache.)
                let mut fill: Vec<(&[u8], Option<Vec<u8>>)> = Vec::new();
                if let (Some(b), true) = (&batch, reads.len() <= FILL_FROM_READS) {
                    let mut first = one_doc;
                    let mut slots = stored.iter();
                    for (i, (key, cached)) in reads.iter().zip(served).enumerate() {
                        if cached.is_some() || std::mem::take(&mut first) {
                            continue;
                        }
                        let got = slots.next().and_then(|g| g.as_ref()).map(|g| g.value());
                        if i > 0 && !b.mutations().iter().any(|m| m.key() == *key) {
                            fill.push((key, got.map(<[u8]>::to_vec)));
                        }
                    }
                }
                // The document read for writing, set by the batch's one mutation to a value
                // no longer than it was (so it fits where it is: the leaf is never rebuilt
                // past its size, which only an insert may split), with every precondition
                // served by the guard cache: replaced in place. Anything else is applied as
                // any batch is, below (the path `get_mut` copied is then written as an
                // insert would have).
                let mut in_place = false;
                if let (Some(g), Some(b)) = (for_write.as_mut(), &batch) {
                    if let [Mutation::Set { key, value }] = b.mutations() {
                        if key.as_slice() == to_read[0]
                            && value.len() <= g.value().len()
                            && b.preconditions()
                                .iter()
                                .all(|p| cache.peek(p.key()).is_some())
                        {
                            for p in b.preconditions() {
                                if let Some(current) = cache.get(p.key()) {
                                    p.check(current)?;
                                }
                            }
                            cache.forget(key);
                            self.guard(|| g.insert(value.as_slice()).map_err(|e| self.error(e)))?;
                            in_place = true;
                            #[cfg(test)]
                            self.inner
                                .in_place
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
                (batch, fill, in_place)
            };
            for (key, value) in fill {
                cache.fill(key, value.as_deref());
            }
            if in_place {
                return Ok(true);
            }
            let Some(batch) = batch else {
                return Ok(false);
            };
            if batch.mutations().len() > 1 {
                // (One mutation cannot repeat a key: no set of keys built for it.)
                batch.validate()?;
            }
            if batch.is_empty() {
                return Ok(false);
            }
            let (mutations, preconditions) = batch.into_parts();
            self.guard(|| {
                let written = guards::Written::of(&mutations, preconditions.len());
                for p in &preconditions {
                    if let Some(current) = cache.get(p.key()) {
                        p.check(current)?;
                        continue;
                    }
                    let table = tables.open_for(p.key())?;
                    let current = table.get(p.key()).map_err(|e| self.error(e))?;
                    let current = current.as_ref().map(|g| g.value());
                    let checked = p.check(current);
                    if !written.contains(p.key()) {
                        // A guard: its committed value (this transaction does not write it).
                        cache.fill(p.key(), current);
                    }
                    checked?;
                }
                for m in mutations {
                    // Dropped before it is written: no entry outlives a change of its key,
                    // whatever the commit's outcome.
                    cache.forget(m.key());
                    match m {
                        Mutation::Set { key, value } => {
                            tables
                                .open_for(&key)?
                                .insert(key.as_slice(), value.as_slice())
                                .map_err(|e| self.error(e))?;
                        }
                        Mutation::Delete { key } => {
                            tables
                                .open_for(&key)?
                                .remove(key.as_slice())
                                .map_err(|e| self.error(e))?;
                        }
                    }
                }
                Ok(())
            })?;
            Ok(true)
        })();
        drop(cache);
        match outcome {
            Ok(true) => self
                .guard(|| txn.commit().map_err(|e| self.error(e)))
                .map(|()| true),
            // An empty commit when asked for durability (`flush`), else nothing to do.
            Ok(false) if durable => self
                .guard(|| txn.commit().map_err(|e| self.error(e)))
                .map(|()| false),
            Ok(false) => {
                self.abort(txn);
                Ok(false)
            }
            Err(e) => {
                self.abort(txn);
                Err(e)
            }
        }
    }

    /// Reads and precondition checks the guard cache served so far.
    #[cfg(test)]
    fn guard_cache_hits(&self) -> u64 {
        self.inner.guards.lock().hits()
    }

    fn abort(&self, txn: redb::WriteTransaction) {
        if let Err(abort) = txn.abort() {
            tracing::warn!(path = %self.inner.path.display(), error = %abort, "aborting a redb write transaction failed");
        }
    }
}

impl KvRead for RedbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.guard(|| {
            let Some(table) = self.read_table(key)? else {
                return Ok(None);
            };
            let value = table.get(key).map_err(|e| self.error(e))?;
            Ok(value.map(|v| v.value().to_vec()))
        })
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        self.visit_range(prefix, after, limits, visit)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        // One write transaction reads the keys, runs the decision once, and commits.
        Capabilities {
            decides_once: true,
            ..Capabilities::default()
        }
    }
}

/// One redb write transaction per write: the keys read, the decision, the
/// preconditions and the mutations (redb runs one write transaction at a time).
impl KvWrite for RedbStore {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        self.write(reads, decide, false)
    }

    fn flush(&self) -> Result<()> {
        match (&self.inner.db, self.inner.durability) {
            // Every commit was already durable; a read-only store has nothing to flush.
            (Db::Ro(_), _) | (_, RedbDurability::Immediate) => Ok(()),
            // An empty durable commit makes every earlier non-durable one durable.
            (Db::Rw(_), RedbDurability::Deferred) => self.write(&[], &mut |_| None, true).map(drop),
        }
    }
}

impl Backend for RedbStore {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// `Database::builder(RedbStore::create(path)?)`: a redb datastore is a [`Store`].
impl From<RedbStore> for Store {
    fn from(store: RedbStore) -> Store {
        store.into_store()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
