//! A writable open, and the layout upgrade it runs — postponed when it finds no room.
//!
//! Moving a layout-1 file to layout 2 (module `tables`) is one redb write transaction that
//! copies every key into the new tables; redb copies on write and frees the old pages only
//! when the transaction commits, so the move needs about the file's size in free space.
//! When the file system has less free space than that (`tables::room_needed`, checked
//! with `statvfs` before the move starts), or the move fails **for lack of room** (a full
//! disk or quota, a file over the file system's size limit: `error::is_out_of_room`;
//! nothing else), the store opens writable **in layout 1** instead of failing: every key
//! stays in `strata`, reads and writes work as in layout 2, a `tracing` warning names the
//! file, the cause and how much to free, and the next writable open with room moves it
//! ([`RedbStore::layout_upgrade_postponed`]). The check comes first because a move that
//! runs out of room has filled the disk on its way (redb writes the transaction's pages
//! before its commit finds no room), and giving that room back costs a compaction (below).
//!
//! Whether a failed transaction left the file whole in layout 1 is not assumed, it is
//! checked: the database is dropped (an I/O failure fails redb's handle for good) and
//! reopened, which runs redb's crash recovery (its commits are atomic, so the file is at
//! its last whole commit), and the layout marker read. No marker: the move did not commit
//! and the file is layout 1 as it was — open in layout 1. The marker: the commit landed
//! although it reported the failure (an error after the commit record was written) — open
//! in layout 2. A reopen that fails returns the upgrade's error, as before this fallback.
//! Before it opens in layout 1, the room the failed move took is given back: when the file
//! grew, redb's compaction trims the pages it wrote past the file's old end. Any other
//! failure of the upgrade (a damaged file, a failing disk, a file of a newer layout) is
//! returned as it is.

use crate::error::{is_out_of_room, open_error};
use crate::tables::{self, Layout};
use crate::{Db, RedbOptions, RedbStore, CURRENT_LAYOUT};
use redb::{Database, ReadableDatabase};
use std::path::Path;
use strata_store::{Result, StoreError};

impl RedbOptions {
    /// The store over `db`, opened for writing, once its file has the current layout (a
    /// file of an older layout is moved to it in one durable write transaction), or in
    /// layout 1 when that move found no room (module docs).
    pub(crate) fn writable(&self, path: &Path, db: Database) -> Result<RedbStore> {
        let (db, layout, postponed) = self.upgraded(path, db)?;
        Ok(RedbStore::from_db(
            path,
            Db::Rw(db),
            layout,
            postponed,
            self.durability,
        ))
    }

    /// The file at `path` (open as `db`) in the current layout, or — when moving it there
    /// finds no room — in layout 1 with the reason (module docs).
    fn upgraded(&self, path: &Path, db: Database) -> Result<(Database, Layout, Option<String>)> {
        let Some(need) = strata_store::guarded_open(path, || tables::pending_upgrade(path, &db))??
        else {
            return Ok((db, Layout::Split, None));
        };
        if let Some(available) = available_space(path).filter(|&a| a < need) {
            let reason = format!(
                "moving redb store `{}` to layout {CURRENT_LAYOUT} needs about {} of free space on its file system, {} is available: it stays in layout 1 and works as it is (nothing was moved); free about {} more there and open it writable again to move it",
                path.display(),
                mib(need),
                mib(available),
                mib(need - available),
            );
            tracing::warn!(path = %path.display(), needs_bytes = need, available_bytes = available, "{reason}");
            return Ok((db, Layout::Single, Some(reason)));
        }
        let before = file_len(path);
        match strata_store::guarded_open(path, || tables::upgrade(path, &db))? {
            Ok(moved) => {
                tracing::info!(path = %path.display(), documents = moved, layout = CURRENT_LAYOUT, "redb store moved to the current layout");
                Ok((db, Layout::Split, None))
            }
            Err(error) if is_out_of_room(&error) => {
                drop(db);
                self.after_no_room(path, error, need, before)
            }
            Err(error) => Err(error),
        }
    }

    /// After an upgrade of the file at `path` that ran out of room (`error`): the file
    /// reopened, its layout as the reopen finds it, and why it stays in layout 1 (module
    /// docs).
    fn after_no_room(
        &self,
        path: &Path,
        error: StoreError,
        need: u64,
        before: Option<u64>,
    ) -> Result<(Database, Layout, Option<String>)> {
        let (db, layout) = match self.reopen(path) {
            Ok(reopened) => reopened,
            Err(reopen) => {
                tracing::warn!(path = %path.display(), error = %reopen, "reopening the redb store after its layout upgrade found no room failed; returning the upgrade's error");
                return Err(error);
            }
        };
        let cause = root_cause(&error);
        if layout == Layout::Split {
            tracing::warn!(path = %path.display(), error = %cause, "the layout upgrade of the redb store reported a failure after its commit; reopened, the file has layout {CURRENT_LAYOUT}, every key moved");
            return Ok((db, Layout::Split, None));
        }
        let (db, room) = self.give_back(path, db, before).map_err(|reopen| {
            tracing::warn!(path = %path.display(), error = %reopen, "reopening the redb store after giving back the room of its layout upgrade failed; returning the upgrade's error");
            error
        })?;
        let left = match room {
            Room::Untouched => "the failed move left the file as long as it was".to_string(),
            Room::GivenBack => "the room the failed move took is given back".to_string(),
            Room::Left(bytes) => format!("the failed move left the file {bytes} bytes longer, which redb's compaction could not give back: the disk may be full, and writes fail until there is room"),
        };
        let reason = format!(
            "moving redb store `{}` to layout {CURRENT_LAYOUT} ran out of room ({cause}): it stays in layout 1, whole, and works as it is ({left}); free about {} on its file system (or raise the quota or file-size limit that stopped it) and open it writable again to move it",
            path.display(),
            mib(need),
        );
        tracing::warn!(path = %path.display(), needs_bytes = need, "{reason}");
        Ok((db, Layout::Single, Some(reason)))
    }

    /// The file at `path` opened again for writing, and its layout.
    fn reopen(&self, path: &Path) -> Result<(Database, Layout)> {
        strata_store::guarded_open(path, || {
            let db = self
                .builder()
                .open(path)
                .map_err(|e| open_error(path, e.into()))?;
            let txn = db.begin_read().map_err(|e| open_error(path, e.into()))?;
            let layout = tables::read_layout(path, &txn)?;
            drop(txn);
            Ok((db, layout))
        })?
    }

    /// Gives back the room a move that ran out of it took: redb grew the file and wrote the
    /// move's pages past the end of the committed file before the failure, so a full disk
    /// stays full (and the store cannot write) until the file is trimmed to its last used
    /// page — which redb's compaction does (it also moves pages from the end into free
    /// pages before it). Only when the file is longer than `before` (its length before the
    /// move); a compaction that fails (it may need room too) leaves it so, and the file is
    /// reopened, as after any I/O failure, and must still be in layout 1.
    fn give_back(
        &self,
        path: &Path,
        mut db: Database,
        before: Option<u64>,
    ) -> Result<(Database, Room)> {
        let grown = match (before, file_len(path)) {
            (Some(before), Some(now)) if now <= before => return Ok((db, Room::Untouched)),
            (Some(before), Some(now)) => now - before,
            _ => 0,
        };
        let compacted = strata_store::guarded_open(path, || {
            db.compact()
                .map(drop)
                .map_err(|e| open_error(path, e.into()))
        })
        .and_then(|compacted| compacted);
        let Err(e) = compacted else {
            return Ok((db, Room::GivenBack));
        };
        tracing::warn!(path = %path.display(), error = %e, "compacting the redb store to give back the room of its failed layout upgrade failed; reopening it");
        drop(db);
        match self.reopen(path)? {
            (db, Layout::Single) => Ok((db, Room::Left(grown))),
            (_, Layout::Split) => Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: "its layout changed while strata gave back the room of a failed layout upgrade (a bug in strata-redb; nothing was lost — open it again)".into(),
            }),
        }
    }
}

/// What became of the room a move that ran out of it took.
enum Room {
    /// The file is no longer than before the move: nothing to give back.
    Untouched,
    /// The file was compacted to its last used page.
    GivenBack,
    /// The compaction failed: the file is this many bytes longer than before the move.
    Left(u64),
}

/// The length of the file at `path` (`None`: unknown).
fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).map(|m| m.len()).ok()
}

/// Bytes available to this process on the file system of `path` (`None`: unknown; the
/// upgrade is then tried).
fn available_space(path: &Path) -> Option<u64> {
    #[cfg(test)]
    if let Some(bytes) = tests::AVAILABLE.with(std::cell::Cell::take) {
        return Some(bytes);
    }
    fs2::available_space(path).ok()
}

/// The innermost cause of `error` (for a redb I/O failure, the operating system's words).
fn root_cause(error: &StoreError) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// `bytes` in MiB, rounded up to a tenth.
fn mib(bytes: u64) -> String {
    let tenths = bytes.saturating_mul(10).div_ceil(1024 * 1024);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub(crate) mod tests {
    use super::*;
    use crate::tables::fault::{inject, Fault};
    use crate::tables::LEGACY;
    use redb::ReadableTable;
    use std::io::ErrorKind;
    use strata_store::{Batch, KvRead, KvWrite, Store};

    thread_local! {
        /// The free space the next open on this thread sees (`None`: the real one).
        pub(crate) static AVAILABLE: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    }

    /// A layout-1 file at `path` (every key in the byte table `strata`, written by raw redb
    /// the way older builds wrote it) holding `records`.
    pub(crate) fn layout_1_file(path: &Path, records: &[(Vec<u8>, Vec<u8>)]) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(LEGACY).unwrap();
            for (k, v) in records {
                table.insert(k.as_slice(), v.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    /// A new, empty layout-1 file at `path` opened writable, its upgrade postponed by an
    /// injected full disk: a writable store in layout 1.
    pub(crate) fn writable_layout_1(path: &Path) -> RedbStore {
        layout_1_file(path, &[]);
        inject(Fault::BeforeCommit(ErrorKind::StorageFull));
        // A small cache: many of these stores are open at once while tests run in parallel.
        let store = RedbOptions::new()
            .cache_capacity(4 << 20)
            .open_existing(path)
            .unwrap();
        assert_eq!(store.layout_version(), 1);
        assert!(store.layout_upgrade_postponed().is_some());
        store
    }

    /// The whole store conformance suite over a writable layout-1 store: scans, guards,
    /// decided writes, refusals, duplicates, leases — layout 1 writes as layout 2 does.
    mod layout_1_conformance {
        use super::*;

        fn open_in(dir: &Path) -> Store {
            writable_layout_1(&dir.join("store.redb")).into_store()
        }

        strata_store::conformance_tests!(open_in);
    }

    fn records() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut records: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
            .map(|i| {
                (
                    format!("__nx/doc/c/{i:04}").into_bytes(),
                    format!("document {i}").into_bytes(),
                )
            })
            .collect();
        for k in ["__nx/catalog/c", "__nx/schema/c", "__nx/window/c", "app/1"] {
            records.push((k.as_bytes().to_vec(), format!("{k}!").into_bytes()));
        }
        records.sort();
        records
    }

    /// Every record of the file at `path`, read by raw redb from layout 1's one table
    /// (`None`: the file is not in layout 1).
    fn layout_1_records(path: &Path) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let db = Database::open(path).unwrap();
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(LEGACY).ok()?;
        let records = table
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect();
        Some(records)
    }

    fn assert_holds(store: &RedbStore, records: &[(Vec<u8>, Vec<u8>)]) {
        for (k, v) in records {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{k:?}");
        }
    }

    /// An upgrade that runs out of room — a full disk, a full quota, a file over the size
    /// limit — opens the store writable in layout 1: nothing moved, every record there,
    /// writes durable; the message names the file and how much to free. The next writable
    /// open with room moves it, new records with the old.
    #[test]
    fn an_upgrade_without_room_opens_writable_in_layout_1_and_the_next_open_moves_it() {
        for kind in [
            ErrorKind::StorageFull,
            ErrorKind::QuotaExceeded,
            ErrorKind::FileTooLarge,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("old.redb");
            let mut records = records();
            layout_1_file(&path, &records);
            inject(Fault::BeforeCommit(kind));
            let store = RedbStore::open_existing(&path).unwrap();
            assert_eq!(store.layout_version(), 1, "{kind:?}");
            assert!(!store.is_read_only());
            let why = store.layout_upgrade_postponed().unwrap();
            for part in [
                "old.redb",
                "layout 1",
                "free about",
                "injected by a test",
                "left the file as long as it was",
            ] {
                assert!(why.contains(part), "{kind:?}: {why}");
            }
            assert_holds(&store, &records);
            let new = (b"__nx/doc/c/new".to_vec(), b"written in layout 1".to_vec());
            store
                .apply(Batch::new().set(new.0.clone(), new.1.clone()))
                .unwrap();
            drop(store);
            records.push(new);
            records.sort();
            // On disk: layout 1, the old records byte for byte and the new one.
            assert_eq!(layout_1_records(&path).as_ref(), Some(&records), "{kind:?}");
            let store = RedbStore::open_existing(&path).unwrap();
            assert_eq!(store.layout_version(), CURRENT_LAYOUT);
            assert_eq!(store.layout_upgrade_postponed(), None);
            assert_holds(&store, &records);
            drop(store);
            assert_eq!(layout_1_records(&path), None, "moved: no byte table left");
        }
    }

    /// A move that failed after redb grew the file (a commit that failed writing its
    /// pages): the room is given back — the file compacted to its old length at most —
    /// before the store opens in layout 1, whole.
    #[test]
    fn the_room_a_failed_move_took_is_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.redb");
        let records = records();
        layout_1_file(&path, &records);
        let len = std::fs::metadata(&path).unwrap().len();
        inject(Fault::BeforeCommitGrown(ErrorKind::StorageFull, 8 << 20));
        let store = RedbStore::open_existing(&path).unwrap();
        assert_eq!(store.layout_version(), 1);
        let why = store.layout_upgrade_postponed().unwrap();
        assert!(
            why.contains("the room the failed move took is given back"),
            "{why}"
        );
        let now = std::fs::metadata(&path).unwrap().len();
        assert!(now <= len, "{now} > {len}");
        assert_holds(&store, &records);
        drop(store);
        assert_eq!(layout_1_records(&path).as_ref(), Some(&records));
    }

    /// Too little free space for the move (checked before it starts): the store opens
    /// writable in layout 1 without trying, so the move cannot fill the disk; the message
    /// says how much is needed and available. With room, the next writable open moves it.
    #[test]
    fn too_little_free_space_postpones_the_upgrade_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.redb");
        let mut records = records();
        layout_1_file(&path, &records);
        AVAILABLE.with(|a| a.set(Some(300 << 10)));
        let store = RedbStore::open_existing(&path).unwrap();
        assert_eq!(store.layout_version(), 1);
        let why = store.layout_upgrade_postponed().unwrap();
        for part in [
            "old.redb",
            "0.3 MiB is available",
            "nothing was moved",
            "free about",
        ] {
            assert!(why.contains(part), "{why}");
        }
        assert_holds(&store, &records);
        let new = (b"app/new".to_vec(), b"written in layout 1".to_vec());
        store
            .apply(Batch::new().set(new.0.clone(), new.1.clone()))
            .unwrap();
        drop(store);
        records.push(new);
        records.sort();
        assert_eq!(layout_1_records(&path).as_ref(), Some(&records));
        let store = RedbStore::open_existing(&path).unwrap();
        assert_eq!(store.layout_version(), CURRENT_LAYOUT);
        assert_holds(&store, &records);
    }

    /// A new store has nothing to move: it gets the current layout whatever the free space.
    #[test]
    fn a_new_store_gets_the_current_layout_on_a_full_disk() {
        let dir = tempfile::tempdir().unwrap();
        AVAILABLE.with(|a| a.set(Some(0)));
        let store = RedbStore::create(dir.path().join("new.redb")).unwrap();
        assert_eq!(store.layout_version(), CURRENT_LAYOUT);
        assert_eq!(store.layout_upgrade_postponed(), None);
    }

    /// A failure reported after the commit landed (the commit's outcome unknown to its
    /// caller): reopened, the file has the marker, so the store opens in layout 2.
    #[test]
    fn a_failure_after_the_commit_landed_opens_in_layout_2() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.redb");
        let records = records();
        layout_1_file(&path, &records);
        inject(Fault::AfterCommit(ErrorKind::StorageFull));
        let store = RedbStore::open_existing(&path).unwrap();
        assert_eq!(store.layout_version(), CURRENT_LAYOUT);
        assert_eq!(store.layout_upgrade_postponed(), None);
        assert_holds(&store, &records);
        drop(store);
        assert_eq!(layout_1_records(&path), None);
    }

    /// A failure that is not about room (a failing disk, a damaged page, an I/O error
    /// after the commit) is not papered over: the open fails as before, naming the file,
    /// and the file is left in layout 1, whole.
    #[test]
    fn a_failure_that_is_not_about_room_fails_the_open() {
        for fault in [
            Fault::BeforeCommit(ErrorKind::Other),
            Fault::BeforeCommit(ErrorKind::InvalidData),
            Fault::BeforeCommit(ErrorKind::PermissionDenied),
            Fault::AfterCommit(ErrorKind::Other),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("old.redb");
            let records = records();
            layout_1_file(&path, &records);
            inject(fault);
            let err = RedbStore::open_existing(&path).unwrap_err();
            assert!(
                err.to_string().contains("old.redb")
                    || std::error::Error::source(&err)
                        .is_some_and(|s| s.to_string().contains("old.redb")),
                "{fault:?}: {err}"
            );
            if let Fault::BeforeCommit(_) = fault {
                assert_eq!(
                    layout_1_records(&path).as_ref(),
                    Some(&records),
                    "{fault:?}"
                );
            }
        }
    }

    #[test]
    fn sizes_are_shown_in_mib_rounded_up() {
        assert_eq!(mib(0), "0.0 MiB");
        assert_eq!(mib(1), "0.1 MiB");
        assert_eq!(mib(10 * 1024 * 1024), "10.0 MiB");
        assert_eq!(mib(2_516_582), "2.4 MiB");
    }
}
