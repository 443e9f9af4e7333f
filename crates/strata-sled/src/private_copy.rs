//! Reading a datastore without writing to it: sled 0.34 has no read-only open. Every open
//! writes to the datastore's directory — sled appends to its log `db` (the recovered tail
//! and its id-generator and meta pages), writes a new `snap.<lsn>` snapshot (through
//! `snap.<lsn>.generating` and a rename) and removes the older ones, removes blob files
//! older than the snapshot, and flushes the log again on close; strata consumes its
//! `strata.seal` on open and writes it again on close. So a read-only open copies the
//! datastore's files, under the datastore's lock, into a private temporary directory
//! (`TMPDIR`) and opens the copy; the datastore itself is only read. The copy costs the
//! time and the temporary space of one copy of the datastore, and is removed when the
//! store is dropped.

use crate::safety;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use strata_store::{Result, StoreError};

/// The prefix of every private copy's directory in `TMPDIR`.
const COPY_PREFIX: &str = "strata-sled-read-";
/// The lock file a live copy holds in its directory (beside the copied datastore).
const OWNER_LOCK: &str = "owner.lock";
/// The copied datastore, inside the copy's directory.
const STORE_DIR: &str = "store";
/// A copy directory without an owner lock file younger than this may be one another run
/// is creating right now; older, it is a leftover.
const UNLOCKED_GRACE: Duration = Duration::from_secs(600);

/// A private copy of a datastore; removed when dropped (after sled released it).
///
/// Owner-only: the directory in `TMPDIR` is created with mode 0700 and every copied file
/// with 0600 (sub-directories 0700), so a datastore kept in a private directory stays
/// private while a command reads it. The copy holds a lock on `owner.lock` in its
/// directory for as long as it lives; a copy left by a killed run (its lock released by
/// the kernel) is removed by the next private copy made in the same `TMPDIR`.
pub(crate) struct PrivateCopy {
    dir: Option<tempfile::TempDir>,
    store: PathBuf,
    original: PathBuf,
    /// Locked while the copy lives.
    _owner: Option<fs::File>,
}

impl PrivateCopy {
    /// Copies the datastore at `original` (checked by [`safety::inspect`]) while holding
    /// its lock (waiting up to `lock_wait` for another process to release it).
    pub(crate) fn of(original: &Path, lock_wait: Duration) -> Result<PrivateCopy> {
        let db = original.join("db");
        let file = fs::File::open(&db).map_err(|e| StoreError::CannotOpen {
            path: db.clone(),
            reason: format!("{e}; check the path and its permissions"),
        })?;
        safety::lock(&file, original, lock_wait)?;
        let no_room = |e: std::io::Error| {
            StoreError::CannotOpen {
            path: original.to_path_buf(),
            reason: format!(
                "sled cannot open a datastore without writing to it, so a read-only command reads a private copy of it, and copying it into the temporary directory `{}` failed ({e}); set TMPDIR to a writable directory with room for one copy of the datastore (the datastore was not changed)",
                std::env::temp_dir().display()
            ),
        }
        };
        let dir = private_dir().map_err(no_room)?;
        let owner = owner_lock(dir.path()).map_err(no_room)?;
        remove_stale_copies(dir.path());
        let store = dir.path().join(STORE_DIR);
        let copy = PrivateCopy {
            dir: Some(dir),
            store,
            original: original.to_path_buf(),
            _owner: Some(owner),
        };
        create_private_dir(&copy.store).map_err(no_room)?;
        copy_tree(original, &copy.store).map_err(no_room)?;
        drop(file); // releases the lock: the copy is complete.
        tracing::debug!(
            datastore = %original.display(),
            copy = %copy.path().display(),
            "reading a private copy of the sled datastore"
        );
        Ok(copy)
    }

    /// The copy's directory.
    pub(crate) fn path(&self) -> &Path {
        match &self.dir {
            Some(_) => &self.store,
            None => &self.original,
        }
    }

    /// `e`, an error of opening the copy, naming the original datastore's files instead.
    pub(crate) fn rename(&self, e: StoreError) -> StoreError {
        let fix = |p: PathBuf| match p.strip_prefix(self.path()) {
            Ok(rest) if rest.as_os_str().is_empty() => self.original.clone(),
            Ok(rest) => self.original.join(rest),
            Err(_) => p,
        };
        match e {
            StoreError::InUse { path } => StoreError::InUse { path: fix(path) },
            StoreError::NotFound { path, .. } => StoreError::not_found(fix(path)),
            StoreError::Damaged { path, reason } => StoreError::Damaged {
                path: fix(path),
                reason,
            },
            StoreError::CannotOpen { path, reason } => StoreError::CannotOpen {
                path: fix(path),
                reason,
            },
            StoreError::Backend { backend, source } => {
                match source.downcast::<crate::SledError>() {
                    Ok(sled) => crate::backend_error(&fix(sled.path), sled.source),
                    Err(source) => StoreError::Backend { backend, source },
                }
            }
            other => other,
        }
    }
}

impl Drop for PrivateCopy {
    /// Waits (up to 5 seconds) for sled to release the copy — it closes its files from a
    /// background thread shortly after the last handle is dropped — then removes it.
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        if let Ok(file) = fs::File::open(self.store.join("db")) {
            if let Err(e) = safety::lock(&file, &self.store, Duration::from_secs(5)) {
                tracing::warn!(copy = %dir.path().display(), error = %e, "sled still holds the private copy; removing it anyway");
            }
        }
        let path = dir.path().to_path_buf();
        if let Err(e) = dir.close() {
            tracing::warn!(copy = %path.display(), error = %e, "could not remove the private copy of the sled datastore");
        }
    }
}

/// A new directory `strata-sled-read-*` in `TMPDIR`, mode 0700 from its creation.
fn private_dir() -> std::io::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(COPY_PREFIX);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o700));
    }
    builder.tempdir()
}

/// Creates `dir` (owner-only on unix).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates a new file at `path` that only its owner can read and write.
fn create_private_file(path: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Creates and locks the owner lock of the copy directory `dir`. The file is locked
/// under a temporary name and then renamed into place, so another run looking for stale
/// copies never finds an `owner.lock` that is not locked yet (it would take it for a
/// killed run's and remove the directory).
fn owner_lock(dir: &Path) -> std::io::Result<fs::File> {
    let fresh = dir.join(format!("{OWNER_LOCK}.new"));
    let file = create_private_file(&fresh)?;
    file.try_lock().map_err(std::io::Error::from)?;
    fs::rename(&fresh, dir.join(OWNER_LOCK))?;
    Ok(file)
}

/// Removes the private copies in the parent of `ours` (the `TMPDIR` of this run) that no
/// live run holds: their owner lock can be taken (its holder was killed), or, without one,
/// they are older than [`UNLOCKED_GRACE`]. Only directories of this user (the owner of
/// `ours`) are touched; failures are logged, never fatal.
fn remove_stale_copies(ours: &Path) {
    let Some(parent) = ours.parent() else {
        return;
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    #[cfg(unix)]
    let me = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(ours).map(|m| m.uid()).ok()
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == ours || !entry.file_name().to_string_lossy().starts_with(COPY_PREFIX) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if Some(meta.uid()) != me {
                continue;
            }
        }
        let stale = match fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path.join(OWNER_LOCK))
        {
            // Held by a live run: WouldBlock. Taken: its holder is gone (the lock is
            // released when the file closes, however the run ended).
            Ok(lock) => lock.try_lock().is_ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > UNLOCKED_GRACE),
            Err(_) => false,
        };
        if stale {
            match fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(copy = %path.display(), "removed a private copy of a sled datastore left by a killed run")
                }
                Err(e) => {
                    tracing::warn!(copy = %path.display(), error = %e, "could not remove a stale private copy of a sled datastore")
                }
            }
        }
    }
}

/// Copies the regular files and directories below `from` into `to` (an existing empty
/// directory): every file created owner-only (0600: readable and writable by its owner,
/// as sled opens them for writing), every directory 0700. Symlinks and special files are
/// skipped: sled's own files are regular files ([`safety::inspect`] refuses a `conf` or
/// `db` that is not).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            create_private_dir(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            let mut source = fs::File::open(entry.path())?;
            let mut copy = create_private_file(&target)?;
            std::io::copy(&mut source, &mut copy)?;
        } else {
            tracing::debug!(file = %entry.path().display(), "not copied: not a regular file or directory");
        }
    }
    Ok(())
}
