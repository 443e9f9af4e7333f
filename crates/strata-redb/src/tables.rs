//! The physical layout of a strata store inside its redb file: which redb table each
//! strata key lives in, and the one-time move of an older file to the current layout.
//!
//! **Layout 2** (the current one, written by every writable open): the keys of collection
//! documents (every key starting with [`DOCUMENT_PREFIX`], `__nx/doc/`) are in the redb
//! table `strata_doc`; every other key is in the redb table `strata_meta`; the redb table
//! `strata` holds the one record `layout` = 2, typed `&str → u64`. That name is taken on
//! purpose: every older build opens `strata` as its one `&[u8] → &[u8]` table, so on a
//! layout-2 file it fails with redb's table-type mismatch — it can neither read the store
//! as empty nor write into it. Each key keeps its full bytes, so
//! strata's key space (docs/format.md, "Key-space map") is unchanged: a scan whose prefix
//! spans both tables (the empty prefix, `__nx/`) merges the two ordered ranges and returns
//! exactly the records, in exactly the order, of one table holding every key.
//!
//! Why two tables: strata's metadata keys (`__nx/schema/…`, `__nx/window/…`,
//! `__nx/manifest/…`) sort *after* `__nx/doc/`, so in one table documents were inserted
//! in the middle of the key space, where redb splits a full leaf in half — twice the
//! leaves and, from ~1,500 documents, one more tree level than the same documents alone
//! (BENCHMARKS.md, "Issue 24"). In their own table new documents of a collection append
//! at its end like any ordered load. One table for all collections (not one per
//! collection) keeps the routing a prefix test and a scan a merge of at most two ranges.
//!
//! **Layout 1** (files written before): every key in `strata` (`&[u8] → &[u8]`).
//! A writable open moves the document keys into `strata_doc` and the others into
//! `strata_meta`, deletes the old table and writes the marker in its place, in **one**
//! redb write transaction committed durably ([`upgrade`]): redb commits are
//! atomic, so an interrupted move leaves the file in layout 1, whole, and the next
//! writable open moves it again. A read-only open reads a layout-1 file as it is, all
//! keys from `strata`, and writes nothing. A writable open without room for the move
//! leaves it in layout 1 and writes there (module `postpone`).

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata, Table,
    TableDefinition, TableError, WriteTransaction,
};
use std::path::{Path, PathBuf};
use strata_store::{Result, StoreError};

/// Every key starting with these bytes (strata's document keys, `__nx/doc/<collection>/<id>`)
/// is kept in the redb table `strata_doc`; every other key in `strata`.
pub const DOCUMENT_PREFIX: &[u8] = b"__nx/doc/";

/// The layout this build writes (see [`LAYOUT_KEY`]).
pub const CURRENT_LAYOUT: u64 = 2;

/// Layout 1's one table, holding every key.
pub(crate) const LEGACY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata");

/// The redb table of every key that is not a document's (layout 2).
pub(crate) const META: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata_meta");

/// The redb table of the document keys (layout 2).
pub(crate) const DOCS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata_doc");

/// The redb table of the layout marker (layout 2 and later): named `strata`, like layout
/// 1's one table, with another type, so an older build cannot open it (module docs).
const LAYOUTS: TableDefinition<&str, u64> = TableDefinition::new("strata");

/// The key of the layout marker in the `strata` table; its value is the layout version.
pub const LAYOUT_KEY: &str = "layout";

/// How many documents the upgrade copies between two range lookups.
const MOVE_CHUNK: usize = 4096;

/// Which layout an open file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Layout 1: every key in `strata` (a file written before the split, opened read-only,
    /// or writable when its upgrade found no room: module `postpone`).
    Single,
    /// Layout 2: documents in `strata_doc`, every other key in `strata_meta`.
    Split,
}

/// The tables a scan of a prefix reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// Only the table of the keys that are not documents.
    Main,
    /// Only `strata_doc`.
    Docs,
    /// Both, merged in key order.
    Both,
}

/// True when `key` is a document key (kept in `strata_doc` in layout 2).
pub(crate) fn is_document(key: &[u8]) -> bool {
    key.starts_with(DOCUMENT_PREFIX)
}

impl Layout {
    /// The version number of the layout ([`CURRENT_LAYOUT`] for [`Layout::Split`]).
    pub(crate) fn version(self) -> u64 {
        match self {
            Layout::Single => 1,
            Layout::Split => CURRENT_LAYOUT,
        }
    }

    /// The redb table of the keys that are not documents (every key in layout 1).
    pub(crate) fn main(self) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
        match self {
            Layout::Single => LEGACY,
            Layout::Split => META,
        }
    }

    /// The redb table `key` lives in.
    pub(crate) fn table_of(
        self,
        key: &[u8],
    ) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
        match self {
            Layout::Split if is_document(key) => DOCS,
            _ => self.main(),
        }
    }

    /// The tables holding the keys that start with `prefix`.
    pub(crate) fn span(self, prefix: &[u8]) -> Span {
        match self {
            Layout::Single => Span::Main,
            Layout::Split if prefix.starts_with(DOCUMENT_PREFIX) => Span::Docs,
            Layout::Split if DOCUMENT_PREFIX.starts_with(prefix) => Span::Both,
            Layout::Split => Span::Main,
        }
    }
}

/// A file whose layout this build does not know, or whose tables do not match its marker.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LayoutError {
    /// The marker names a layout newer than this build's.
    #[error("redb store `{}` has layout {found} (its `strata` table), this build reads layouts 1 and {CURRENT_LAYOUT}: it was written by a newer strata; open it with that version", .path.display())]
    Newer {
        /// The file.
        path: PathBuf,
        /// The layout version found.
        found: u64,
    },
    /// The marker is missing but keys are already in `strata_doc` or `strata_meta`.
    #[error("redb store `{}` has keys in its `strata_doc` or `strata_meta` table but no layout marker (table `strata`); it was not written by strata; restore it from a backup or copy its records with the tool that wrote it", .path.display())]
    Unmarked {
        /// The file.
        path: PathBuf,
    },
}

impl LayoutError {
    fn into_store(self) -> StoreError {
        let path = match &self {
            LayoutError::Newer { path, .. } | LayoutError::Unmarked { path } => path.clone(),
        };
        StoreError::CannotOpen {
            path,
            reason: self.to_string(),
        }
    }
}

/// `e` as the [`StoreError`] of the file at `path`.
fn fail(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |e| crate::map_error(path, e)
}

/// The layout marker of a file: `None` when it has none (layout 1, or a new empty file).
fn marker(path: &Path, txn: &ReadTransaction) -> Result<Option<u64>> {
    match txn.open_table(LAYOUTS) {
        Ok(table) => Ok(table
            .get(LAYOUT_KEY)
            .map_err(|e| fail(path)(e.into()))?
            .map(|v| v.value())),
        // No `strata` table: a new file. `strata` of another type: layout 1's byte table.
        Err(TableError::TableDoesNotExist(_) | TableError::TableTypeMismatch { .. }) => Ok(None),
        Err(e) => Err(fail(path)(e.into())),
    }
}

/// The layout of a file opened read-only (nothing is written: a layout-1 file is read as
/// it is).
pub(crate) fn read_layout(path: &Path, txn: &ReadTransaction) -> Result<Layout> {
    match marker(path, txn)? {
        None => Ok(Layout::Single),
        Some(CURRENT_LAYOUT) => Ok(Layout::Split),
        Some(found) => Err(LayoutError::Newer {
            path: path.to_path_buf(),
            found,
        }
        .into_store()),
    }
}

/// Whether a file opened for writing needs the upgrade to the current layout (one read
/// transaction): `None` when it has the current layout already, else about how many bytes
/// of free space the upgrade needs ([`room_needed`]).
pub(crate) fn pending_upgrade(path: &Path, db: &Database) -> Result<Option<u64>> {
    let txn = db.begin_read().map_err(|e| fail(path)(e.into()))?;
    if read_layout(path, &txn)? == Layout::Split {
        return Ok(None);
    }
    match txn.open_table(LEGACY) {
        Ok(_) => {}
        // A new file: no table yet, nothing to move (its tables and marker take a few
        // pages; a disk too full even for them is caught like a move without room).
        Err(TableError::TableDoesNotExist(_)) => return Ok(Some(0)),
        Err(e) => return Err(fail(path)(e.into())),
    }
    let len = std::fs::metadata(path)
        .map_err(|e| crate::error::io_error(path, e))?
        .len();
    Ok(Some(room_needed(len)))
}

/// About how many bytes of free space moving a layout-1 file of `len` bytes needs: redb
/// copies on write and frees the old table's pages only at the commit, so the new tables
/// are written beside it — at most the file's size again (a compacted 3.75 MB file took
/// 3.74 MB: `strata-cli`'s `full_disk_layout` test prints it), and 1 MiB for redb's own
/// pages. The file's length, not redb's table statistics: those walk every page of the
/// table, at every writable open while the move is postponed. An estimate on the safe
/// side (a file with free pages inside needs less); a move that still runs out of room is
/// caught (module `postpone`).
pub(crate) fn room_needed(bytes: u64) -> u64 {
    bytes.saturating_add(1 << 20)
}

/// Brings a file of layout 1 opened for writing ([`pending_upgrade`]) to the current
/// layout: one durable write transaction creates the tables, moves every document key of
/// `strata` into `strata_doc` and writes the marker. Returns how many documents it moved.
pub(crate) fn upgrade(path: &Path, db: &Database) -> Result<u64> {
    #[cfg(test)]
    let fault = fault::take();
    let mut txn = db.begin_write().map_err(|e| fail(path)(e.into()))?;
    let done = txn
        .set_durability(redb::Durability::Immediate)
        .map_err(|e| fail(path)(e.into()))
        .and_then(|()| move_documents(path, &txn, None));
    #[cfg(test)]
    let done = done.and_then(|moved| fault.before_commit(path).map(|()| moved));
    match done {
        Ok(moved) => {
            txn.commit().map_err(|e| fail(path)(e.into()))?;
            #[cfg(test)]
            fault.after_commit(path)?;
            Ok(moved)
        }
        Err(e) => {
            if let Err(abort) = txn.abort() {
                tracing::warn!(path = %path.display(), error = %abort, "aborting the layout upgrade failed");
            }
            #[cfg(test)]
            fault.leave_pages(path);
            Err(e)
        }
    }
}

/// Failures injected into the next [`upgrade`] on this thread (unit tests only): the upgrade
/// meets an I/O error of a given kind before its commit (the transaction is then aborted,
/// as on a real failure), or after a commit that landed (a commit whose outcome its caller
/// cannot know).
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::Cell;
    use std::io::ErrorKind;
    use std::path::Path;
    use strata_store::Result;

    /// Where the injected failure happens.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) enum Fault {
        /// No failure.
        #[default]
        None,
        /// After the move, before the commit.
        BeforeCommit(ErrorKind),
        /// After the commit landed.
        AfterCommit(ErrorKind),
        /// Before the commit, like [`Fault::BeforeCommit`], and the file left this many
        /// bytes longer after the abort, as a commit that failed writing its pages leaves it
        /// (redb's abort trims the growth of a transaction it can still abort).
        BeforeCommitGrown(ErrorKind, u64),
    }

    thread_local! {
        static NEXT: Cell<Fault> = const { Cell::new(Fault::None) };
    }

    /// Makes the next upgrade on this thread meet `fault`.
    pub(crate) fn inject(fault: Fault) {
        NEXT.with(|next| next.set(fault));
    }

    /// The injected failure of this upgrade (taken: the next one has none).
    pub(super) fn take() -> Fault {
        NEXT.with(Cell::take)
    }

    fn io(path: &Path, kind: ErrorKind) -> strata_store::StoreError {
        super::fail(path)(redb::Error::Io(std::io::Error::new(
            kind,
            "injected by a test",
        )))
    }

    impl Fault {
        pub(super) fn before_commit(self, path: &Path) -> Result<()> {
            match self {
                Fault::BeforeCommit(kind) | Fault::BeforeCommitGrown(kind, _) => {
                    Err(io(path, kind))
                }
                _ => Ok(()),
            }
        }

        pub(super) fn leave_pages(self, path: &Path) {
            if let Fault::BeforeCommitGrown(_, bytes) = self {
                // (A test checks the length this gives the file.)
                if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) {
                    if let Ok(meta) = file.metadata() {
                        let _ = file.set_len(meta.len() + bytes);
                    }
                }
            }
        }

        pub(super) fn after_commit(self, path: &Path) -> Result<()> {
            match self {
                Fault::AfterCommit(kind) => Err(io(path, kind)),
                _ => Ok(()),
            }
        }
    }
}

/// The upgrade's work inside `txn` (not committed): moves every key of layout 1's
/// `strata` table into `strata_doc` (documents) or `strata_meta` (the rest), deletes that
/// table and writes the marker under its name. Returns how many document keys it moved.
/// `stop_after` (tests only) fails the move once that many keys were moved, to prove an
/// interrupted upgrade leaves nothing behind.
pub(crate) fn move_documents(
    path: &Path,
    txn: &WriteTransaction,
    stop_after: Option<u64>,
) -> Result<u64> {
    let f = fail(path);
    let mut legacy = txn.open_table(LEGACY).map_err(|e| f(e.into()))?;
    let mut meta = txn.open_table(META).map_err(|e| f(e.into()))?;
    let mut docs = txn.open_table(DOCS).map_err(|e| f(e.into()))?;
    if !docs.is_empty().map_err(|e| f(e.into()))? || !meta.is_empty().map_err(|e| f(e.into()))? {
        return Err(LayoutError::Unmarked {
            path: path.to_path_buf(),
        }
        .into_store());
    }
    let (mut moved, mut documents) = (0u64, 0u64);
    loop {
        let mut chunk: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for item in legacy.iter().map_err(|e| f(e.into()))? {
            if chunk.len() == MOVE_CHUNK {
                break;
            }
            let (key, value) = item.map_err(|e| f(e.into()))?;
            chunk.push((key.value().to_vec(), value.value().to_vec()));
        }
        if chunk.is_empty() {
            break;
        }
        for (key, value) in &chunk {
            if stop_after.is_some_and(|n| moved >= n) {
                return Err(f(redb::Error::Corrupted(
                    "the layout upgrade was stopped by a test".into(),
                )));
            }
            let target = if is_document(key) {
                documents += 1;
                &mut docs
            } else {
                &mut meta
            };
            target
                .insert(key.as_slice(), value.as_slice())
                .map_err(|e| f(e.into()))?;
            legacy.remove(key.as_slice()).map_err(|e| f(e.into()))?;
            moved += 1;
        }
    }
    drop((legacy, meta, docs));
    txn.delete_table(LEGACY).map_err(|e| f(e.into()))?;
    txn.open_table(LAYOUTS)
        .map_err(|e| f(e.into()))?
        .insert(LAYOUT_KEY, CURRENT_LAYOUT)
        .map_err(|e| f(e.into()))?;
    Ok(documents)
}

/// The two tables of one write transaction, each opened the first time a key of it is
/// read or written (a one-document write opens `strata_doc` alone).
pub(crate) struct WriteTables<'t> {
    txn: &'t WriteTransaction,
    path: &'t Path,
    layout: Layout,
    main: Option<ByteTable<'t>>,
    docs: Option<ByteTable<'t>>,
}

pub(crate) type ByteTable<'t> = Table<'t, &'static [u8], &'static [u8]>;

impl<'t> WriteTables<'t> {
    /// No table open yet.
    pub(crate) fn new(txn: &'t WriteTransaction, path: &'t Path, layout: Layout) -> Self {
        WriteTables {
            txn,
            path,
            layout,
            main: None,
            docs: None,
        }
    }

    /// The table of `key`, opened if it is not yet.
    pub(crate) fn open_for(&mut self, key: &[u8]) -> Result<&mut ByteTable<'t>> {
        let definition = self.layout.table_of(key);
        let slot = match self.layout {
            Layout::Split if is_document(key) => &mut self.docs,
            _ => &mut self.main,
        };
        if slot.is_none() {
            let table = self
                .txn
                .open_table(definition)
                .map_err(|e| fail(self.path)(e.into()))?;
            return Ok(slot.insert(table));
        }
        slot.as_mut().ok_or_else(|| not_opened(self.path, key))
    }

    /// True when `key` lives in the documents' table (layout 2's `strata_doc`).
    pub(crate) fn is_document_table(&self, key: &[u8]) -> bool {
        self.layout == Layout::Split && is_document(key)
    }

    /// The documents' table, mutably, and the other table, shared — each `None` when it
    /// is not open (or, for the documents', when the layout keeps documents in the one
    /// table).
    pub(crate) fn split(&mut self) -> (Option<&mut ByteTable<'t>>, Option<&ByteTable<'t>>) {
        match self.layout {
            Layout::Split => (self.docs.as_mut(), self.main.as_ref()),
            _ => (None, self.main.as_ref()),
        }
    }

    /// The table of `key` if [`WriteTables::open_for`] opened it.
    pub(crate) fn opened(&self, key: &[u8]) -> Result<&ByteTable<'t>> {
        match self.layout {
            Layout::Split if is_document(key) => self.docs.as_ref(),
            _ => self.main.as_ref(),
        }
        .ok_or_else(|| not_opened(self.path, key))
    }
}

/// The error of a key read before its table was opened (a bug; never a panic).
fn not_opened(path: &Path, key: &[u8]) -> StoreError {
    StoreError::backend(
        crate::NAME,
        NotOpened {
            path: path.to_path_buf(),
            key: String::from_utf8_lossy(key).into_owned(),
        },
    )
}

/// A key read before the table holding it was opened: a bug of this crate, reported as an
/// error instead of a panic.
#[derive(Debug, thiserror::Error)]
#[error("redb store `{}`: the table of key {key:?} was read before it was opened (a bug in strata-redb; nothing was written — please report it)", .path.display())]
struct NotOpened {
    path: PathBuf,
    key: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::RedbStore;
    use redb::TableHandle;
    use strata_store::KvRead;

    const KEYS: [&[u8]; 6] = [
        b"__nx/catalog/a",
        b"__nx/doc/a/1",
        b"__nx/doc/a/2",
        b"__nx/doc/b/1",
        b"__nx/schema/a",
        b"app",
    ];

    /// A layout-1 file (every key in `strata`) and its bytes.
    fn old_file(path: &Path) -> Vec<u8> {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(LEGACY).unwrap();
            for k in KEYS {
                table.insert(k, &[k, b"!"].concat()[..]).unwrap();
            }
        }
        txn.commit().unwrap();
        drop(db);
        std::fs::read(path).unwrap()
    }

    /// The records of the table of non-documents (`strata` in layout 1, `strata_meta` in
    /// layout 2); whether `strata_doc` exists; whether the layout marker does.
    type Contents = (Vec<(Vec<u8>, Vec<u8>)>, bool, bool);

    /// Every record of the non-document table, and whether `strata_doc` and the marker
    /// exist.
    fn contents(db: &Database) -> Contents {
        let txn = db.begin_read().unwrap();
        let layouts = txn.open_table(LAYOUTS).is_ok();
        let main = txn.open_table(if layouts { META } else { LEGACY }).unwrap();
        let records = main
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect();
        let docs = txn.open_table(DOCS).is_ok();
        (records, docs, layouts)
    }

    /// An upgrade that fails part way, or is never committed (a crash before its commit),
    /// leaves the file in layout 1 with every key where it was; the next writable open
    /// moves it.
    #[test]
    fn an_interrupted_upgrade_leaves_the_old_layout_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.redb");
        old_file(&path);
        let db = Database::open(&path).unwrap();
        let before = contents(&db);
        assert_eq!(before.0.len(), KEYS.len());
        assert!(!before.1 && !before.2);
        // Stopped after two of the three documents were moved: the error names the file.
        let txn = db.begin_write().unwrap();
        let err = move_documents(&path, &txn, Some(2)).unwrap_err();
        assert!(err.to_string().contains("old.redb"), "{err}");
        txn.abort().unwrap();
        assert_eq!(contents(&db), before);
        // Moved completely, marker written, but never committed.
        let txn = db.begin_write().unwrap();
        assert_eq!(move_documents(&path, &txn, None).unwrap(), 3);
        drop(txn);
        assert_eq!(contents(&db), before);
        drop(db);
        let store = RedbStore::open_read_only(&path).unwrap();
        assert_eq!(store.layout_version(), 1);
        drop(store);
        // The next writable open moves it, whole.
        let store = RedbStore::open_existing(&path).unwrap();
        assert_eq!(store.layout_version(), CURRENT_LAYOUT);
        for k in KEYS {
            assert_eq!(store.get(k).unwrap(), Some([k, b"!"].concat()));
        }
        drop(store);
        let db = Database::open(&path).unwrap();
        let (main, docs, layouts) = contents(&db);
        assert!(docs && layouts);
        assert_eq!(main.len(), 3);
        assert!(main.iter().all(|(k, _)| !is_document(k)));
    }

    /// An older build opens `strata` as its one byte table: on a layout-2 file that fails
    /// with redb's table-type mismatch, for reading and for writing, so an older build can
    /// neither see the store as empty nor write beside the moved keys.
    #[test]
    fn an_older_build_cannot_open_a_layout_2_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.redb");
        old_file(&path);
        drop(RedbStore::open_existing(&path).unwrap());
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        assert!(matches!(
            txn.open_table(LEGACY),
            Err(TableError::TableTypeMismatch { .. })
        ));
        drop(txn);
        let txn = db.begin_write().unwrap();
        assert!(matches!(
            txn.open_table(LEGACY),
            Err(TableError::TableTypeMismatch { .. })
        ));
        txn.abort().unwrap();
        // A new file gets layout 2 at once, the same way.
        let fresh = dir.path().join("new.redb");
        drop(RedbStore::create(&fresh).unwrap());
        let db = Database::open(&fresh).unwrap();
        let txn = db.begin_read().unwrap();
        assert!(matches!(
            txn.open_table(LEGACY),
            Err(TableError::TableTypeMismatch { .. })
        ));
    }

    /// A file whose documents are already in `strata_doc` but that has no marker was not
    /// written by strata: refused, not merged.
    #[test]
    fn documents_in_the_document_table_without_a_marker_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.redb");
        old_file(&path);
        {
            let db = Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(DOCS)
                .unwrap()
                .insert(&b"__nx/doc/z/1"[..], &b"?"[..])
                .unwrap();
            txn.commit().unwrap();
        }
        let err = RedbStore::open_existing(&path).unwrap_err();
        assert!(matches!(err, StoreError::CannotOpen { .. }), "{err:?}");
        assert!(err.to_string().contains("no layout marker"), "{err}");
    }

    #[test]
    fn routing_and_spans() {
        let split = Layout::Split;
        assert_eq!(split.table_of(b"__nx/doc/a/1").name(), "strata_doc");
        assert_eq!(split.table_of(b"__nx/doc/").name(), "strata_doc");
        for k in [&b"__nx/doc"[..], b"__nx/doc0", b"__nx/fence", b"", b"a"] {
            assert_eq!(split.table_of(k).name(), "strata_meta", "{k:?}");
            assert_eq!(Layout::Single.table_of(k).name(), "strata");
        }
        assert_eq!(Layout::Single.table_of(b"__nx/doc/a/1").name(), "strata");
        for p in [&b""[..], b"_", b"__nx/", b"__nx/doc", b"__nx/doc"] {
            assert_eq!(split.span(p), Span::Both, "{p:?}");
        }
        for p in [&b"__nx/doc/"[..], b"__nx/doc/a/"] {
            assert_eq!(split.span(p), Span::Docs, "{p:?}");
        }
        for p in [&b"__nx/doc0"[..], b"__nx/e", b"a", b"__nx/f"] {
            assert_eq!(split.span(p), Span::Main, "{p:?}");
        }
        assert_eq!(Layout::Single.span(b"__nx/doc/"), Span::Main);
    }
}
