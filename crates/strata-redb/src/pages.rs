//! Checking every page of a redb file against redb's checksums, without writing to it.
//!
//! redb keeps a checksum of every B-tree page: a leaf's or branch's in its parent, a
//! root's in the commit slot of the header. It checks them only when it repairs a file
//! (crash recovery) or when asked (`Database::check_integrity`); ordinary reads return a
//! page's bytes as they are. So a bit flipped inside a record's value is read back flipped,
//! and a record that still decodes (a letter of a JSON string changed) passes every check
//! strata makes of records. [`check_pages`] asks redb: on a **private copy** of the file
//! (`check_integrity` needs a writable handle, and may write), in a directory of its own
//! under the system's temporary directory (`TMPDIR`), removed afterwards; the file itself
//! is only read.
//!
//! What a failing check proves depends on how the file was left:
//!
//! * closed cleanly (its header does not ask for crash recovery): nothing but damage makes
//!   a page of its last commit miss its checksum — [`StoreError::Damaged`];
//! * left open (its writer was killed, or it was copied while open): redb's recovery, run
//!   on the copy, checks the last commit and, when one of its pages misses its checksum,
//!   falls back to the commit before — which is also exactly what a commit torn by the
//!   crash looks like, so that is not damage ([`PageCheck::Recovered`]); a page the commit
//!   before needs too that misses its checksum is damage.
//!
//! Pages no commit uses (free pages) are not checked: nothing reads them.

use crate::error::{io_error, open_error};
use std::path::Path;
use strata_store::{Result, StoreError};

/// A private copy of a redb file to check could not be made (a full or missing temporary
/// directory): names the file and what to do; the I/O error is its source.
#[derive(Debug, thiserror::Error)]
#[error("cannot make a private copy of redb store `{}` in the temporary directory to check its pages: set TMPDIR to a directory with room for a copy of it", .path.display())]
struct CheckCopyError {
    path: std::path::PathBuf,
    #[source]
    source: std::io::Error,
}

/// What [`check_pages`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageCheck {
    /// The file was closed cleanly and every page of its last commit matches its checksum.
    Verified,
    /// The file asked for crash recovery (its writer did not close it); every page of the
    /// commit redb's recovery keeps matches its checksum. Whether that is the file's last
    /// commit cannot be told: a commit torn by the crash is dropped like a damaged one.
    Recovered,
    /// No private copy could be made (no room for one in the temporary directory, say):
    /// the pages were not checked. `reason` says why and what to do.
    NotChecked {
        /// Why, naming the file and the temporary directory.
        reason: String,
    },
}

/// The bit of the header's flags byte (after the magic number) that asks for crash
/// recovery (redb's `RECOVERY_REQUIRED`).
const RECOVERY_REQUIRED: u8 = 2;

/// Whether the header of the redb file at `path` asks for crash recovery.
fn asks_for_recovery(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut head = [0u8; crate::MAGIC.len() + 1];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|e| io_error(path, e))?;
    Ok(head[crate::MAGIC.len()] & RECOVERY_REQUIRED != 0)
}

/// Checks every page of every commit-reachable tree of the redb file at `path` against
/// redb's checksums (module docs), reading the file once to copy it; never writes to it.
/// A page that misses its checksum in a file closed cleanly, or in the commit redb's
/// recovery falls back to, is [`StoreError::Damaged`] naming the file. Call it while the
/// store is open in this process (no other process can write the file meanwhile); the copy
/// needs the file's size free in the temporary directory, and without it the answer is
/// [`PageCheck::NotChecked`] (the pages are not judged either way).
pub fn check_pages(path: &Path) -> Result<PageCheck> {
    if !crate::is_redb_file(path) {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            reason: "it is not a redb database (no redb header)".into(),
        });
    }
    crate::cut::refuse_cut(path)?;
    let recovery = asks_for_recovery(path)?;
    let no_copy = |e: std::io::Error| {
        let error = CheckCopyError {
            path: path.to_path_buf(),
            source: e,
        };
        tracing::warn!(error = %error, "redb page checksums not checked");
        PageCheck::NotChecked {
            reason: format!("{error} ({})", error.source),
        }
    };
    let scratch = match tempfile::Builder::new()
        .prefix("strata-redb-check-")
        .tempdir()
    {
        Ok(dir) => dir,
        Err(e) => return Ok(no_copy(e)),
    };
    let copy = scratch.path().join("copy.redb");
    if let Err(e) = std::fs::copy(path, &copy) {
        return Ok(no_copy(e));
    }
    tracing::debug!(path = %path.display(), recovery, "checking every page of a private copy of the redb store");
    let damaged = |reason: String| StoreError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let checked = strata_store::guarded_open(path, || {
        let mut db = redb::Database::open(&copy)?;
        db.check_integrity()
    })
    .map_err(|e| match e {
        // A panic inside redb reading the copy: the pages are not what redb wrote.
        StoreError::Damaged { reason, .. } => damaged(reason),
        other => other,
    })?;
    match checked {
        Ok(true) if recovery => Ok(PageCheck::Recovered),
        Ok(true) => Ok(PageCheck::Verified),
        // After a recovery at open, the check repairs nothing more; a repair now is an
        // allocator state or a commit that did not check out.
        Ok(false) if recovery => Ok(PageCheck::Recovered),
        Ok(false) => Err(damaged(
            "pages of its last commit do not match redb's checksums (a bit changed on disk or by a copy); redb's repair would fall back to the commit before it".into(),
        )),
        Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(reason))) => {
            Err(damaged(format!(
                "pages do not match redb's checksums ({reason}): a bit changed on disk or by a copy"
            )))
        }
        Err(e) => Err(open_error(path, e.into())),
    }
}
