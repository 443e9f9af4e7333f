//! [`Runtime`]: the embedding entry point.

use crate::{SyncError, SyncManager, SyncOptions};
use std::path::{Path, PathBuf};
use strata_store::{Store, StoreError};

/// The embedding entry point: opens the datastore at a path and builds the
/// [`SyncManager`] over it, propagating every error — a store that needs a migration, or
/// was written by a newer build, is refused here instead of running with empty state.
///
/// The path is detected without writing anything: an existing **sled directory** (a Numax
/// datastore) opens with sled, byte for byte as before; an existing **redb file** opens
/// with redb; a **missing path** becomes a new redb file (redb is the default for new
/// stores: see the README's backend section). Anything else (another file, an empty or
/// foreign directory, a dangling symlink) is refused untouched.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use strata::numax::wire::{Op, OpKind};
/// let dir = tempfile::tempdir()?;
/// let rt = strata_sync::Runtime::new(dir.path().join("db"))?;
/// rt.sync().apply(&Op::new("op-1", "node-a", OpKind::GCounterIncrement { key: "visits".into(), increment: 2 }))?;
/// assert_eq!(rt.sync().gcounter("visits")?, Some(2));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Runtime {
    path: Option<PathBuf>,
    backend: &'static str,
    sync: SyncManager,
}

/// Opens the datastore at `path` the way [`Runtime::new`] does (detected without writing;
/// a missing path becomes a new redb file).
pub fn open_path(path: &Path) -> Result<Store, StoreError> {
    let refuse = |reason: &str| {
        StoreError::CannotOpen {
        path: path.to_path_buf(),
        reason: format!("{reason}; nothing was changed: point the runtime at a sled directory, a redb file, or a path that does not exist yet (a new redb store)"),
    }
    };
    match std::fs::metadata(path) {
        Err(_) if std::fs::symlink_metadata(path).is_ok() => {
            Err(refuse("it is a symlink to a missing file"))
        }
        Err(_) => strata_redb::RedbStore::create_store(path),
        Ok(m) if m.is_dir() && strata_sled::is_sled_dir(path) => {
            strata_sled::SledStore::open_existing(path).map(Store::new)
        }
        Ok(m) if m.is_dir() && std::fs::symlink_metadata(path.join("conf")).is_ok() => {
            // A sled `conf` that fails the checks: sled's checks say what is wrong.
            strata_sled::SledStore::open_existing(path).map(Store::new)
        }
        Ok(m) if m.is_file() && strata_redb::is_redb_file(path) => {
            strata_redb::RedbStore::open_existing(path).map(|s| s.into_store())
        }
        Ok(m) if m.is_dir() => Err(refuse("it is a directory that holds no sled datastore")),
        Ok(_) => Err(refuse("it is neither a redb file nor a sled directory")),
    }
}

impl Runtime {
    /// Opens the datastore at `path` (a sled directory, a redb file, or a new redb file
    /// at a missing path) with default options.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, SyncError> {
        Self::with_options(path, SyncOptions::default())
    }

    /// Opens the datastore at `path` (as [`Runtime::new`]) with `options`.
    pub fn with_options(path: impl AsRef<Path>, options: SyncOptions) -> Result<Self, SyncError> {
        let path = path.as_ref();
        let store = open_path(path)?;
        let backend = store.backend_name();
        let sync = SyncManager::open_with(store, options)?;
        tracing::info!(path = %path.display(), backend, "sync runtime started");
        Ok(Runtime {
            path: Some(path.to_path_buf()),
            backend,
            sync,
        })
    }

    /// A runtime over an already opened store (any backend).
    pub fn with_store(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        Ok(Runtime {
            path: None,
            backend: store.backend_name(),
            sync: SyncManager::open_with(store, options)?,
        })
    }

    /// The backend the datastore was opened with (`redb`, `sled`, …).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The datastore path, when opened by path.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The sync manager.
    pub fn sync(&self) -> &SyncManager {
        &self.sync
    }

    /// Consumes the runtime, returning its manager.
    pub fn into_sync(self) -> SyncManager {
        self.sync
    }
}
