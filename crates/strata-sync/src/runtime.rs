//! [`Runtime`]: the embedding entry point.

use crate::{SyncError, SyncManager, SyncOptions};
use std::path::{Path, PathBuf};
use strata_store::Store;

/// The embedding entry point: opens the datastore at a path (sled) and builds the
/// [`SyncManager`] over it, propagating every error — a store that needs a migration, or
/// was written by a newer build, is refused here instead of running with empty state.
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
    sync: SyncManager,
}

impl Runtime {
    /// Opens (creating if needed) the sled datastore at `path` with default options.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, SyncError> {
        Self::with_options(path, SyncOptions::default())
    }

    /// Opens the sled datastore at `path` with `options`.
    pub fn with_options(path: impl AsRef<Path>, options: SyncOptions) -> Result<Self, SyncError> {
        let path = path.as_ref();
        let store = strata_sled::SledStore::open_store(path)?;
        let sync = SyncManager::open_with(store, options)?;
        tracing::info!(path = %path.display(), "sync runtime started");
        Ok(Runtime {
            path: Some(path.to_path_buf()),
            sync,
        })
    }

    /// A runtime over an already opened store (any backend).
    pub fn with_store(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        Ok(Runtime {
            path: None,
            sync: SyncManager::open_with(store, options)?,
        })
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
