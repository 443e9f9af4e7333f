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

/// A private copy of a datastore; removed when dropped (after sled released it).
pub(crate) struct PrivateCopy {
    dir: Option<tempfile::TempDir>,
    original: PathBuf,
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
        let dir = tempfile::Builder::new()
            .prefix("strata-sled-read-")
            .tempdir()
            .map_err(no_room)?;
        let copy = PrivateCopy {
            dir: Some(dir),
            original: original.to_path_buf(),
        };
        copy_tree(original, copy.path()).map_err(no_room)?;
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
            Some(dir) => dir.path(),
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
        if let Ok(file) = fs::File::open(dir.path().join("db")) {
            if let Err(e) = safety::lock(&file, dir.path(), Duration::from_secs(5)) {
                tracing::warn!(copy = %dir.path().display(), error = %e, "sled still holds the private copy; removing it anyway");
            }
        }
        let path = dir.path().to_path_buf();
        if let Err(e) = dir.close() {
            tracing::warn!(copy = %path.display(), error = %e, "could not remove the private copy of the sled datastore");
        }
    }
}

/// Copies the regular files and directories below `from` into `to` (an existing empty
/// directory), each file writable by its owner (sled opens them for writing). Symlinks
/// and special files are skipped: sled's own files are regular files
/// ([`safety::inspect`] refuses a `conf` or `db` that is not).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            fs::create_dir(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target)?;
            owner_writable(&target)?;
        } else {
            tracing::debug!(file = %entry.path().display(), "not copied: not a regular file or directory");
        }
    }
    Ok(())
}

#[cfg(unix)]
fn owner_writable(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = fs::metadata(file)?.permissions();
    let mode = permissions.mode();
    if mode & 0o200 == 0 {
        permissions.set_mode(mode | 0o200);
        fs::set_permissions(file, permissions)?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn owner_writable(file: &Path) -> std::io::Result<()> {
    let mut permissions = fs::metadata(file)?.permissions();
    if permissions.readonly() {
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        fs::set_permissions(file, permissions)?;
    }
    Ok(())
}
