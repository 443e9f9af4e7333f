//! The store layer's one error type.

use crate::escape::escape_key;
use std::path::PathBuf;

/// Why a batch precondition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// The key was expected to be absent but holds a value.
    Present,
    /// The key was expected to hold a value but is absent.
    Missing,
    /// The key holds a different value than expected.
    Changed,
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictReason::Present => "expected absent, but it holds a value",
            ConflictReason::Missing => "expected a value, but it is absent",
            ConflictReason::Changed => "it holds a different value than expected",
        })
    }
}

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A precondition of a batch did not hold; nothing of the batch was written.
    #[error("write conflict on key `{}`: {reason}; nothing was written, re-read and retry", escape_key(.key))]
    Conflict {
        /// The key whose precondition failed.
        key: Vec<u8>,
        /// How it failed.
        reason: ConflictReason,
    },
    /// A single record is larger than the scan's byte budget.
    #[error("record `{}` is {size} bytes (key + value), larger than the byte budget of {limit} bytes; raise the budget", crate::shown_key(.key))]
    RecordTooLarge {
        /// The record's key (rendered escaped).
        key: Vec<u8>,
        /// Key length plus value length.
        size: usize,
        /// The budget it exceeded.
        limit: usize,
    },
    /// The datastore is locked by another process.
    #[error("datastore `{}` is in use by another process; stop that process or open another datastore", shown_path(.path))]
    InUse {
        /// The datastore path.
        path: PathBuf,
    },
    /// The datastore does not exist and the caller asked not to create it. Made with
    /// [`StoreError::not_found`] for a datastore path (file or directory); a backend whose
    /// store is not a path (a PostgreSQL table) says what is missing and what creates it.
    #[error("{what} does not exist; {remedy}")]
    NotFound {
        /// The datastore path (PostgreSQL: the server and the table).
        path: PathBuf,
        /// What is missing, as shown (``datastore `PATH` ``, ``postgres table `T` in …``).
        what: String,
        /// What to do about it.
        remedy: String,
    },
    /// The datastore's files exist but cannot be read as a datastore (truncated, corrupted,
    /// or not a datastore of this backend). The reason says whether the files were left
    /// untouched.
    #[error("datastore `{}` is damaged: {reason}; restore it from a backup or a complete copy", shown_path(.path))]
    Damaged {
        /// The damaged file (or datastore directory).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The datastore cannot be opened the way it was asked (for example a backend that
    /// must write on open, on read-only media); nothing was changed.
    #[error("datastore `{}` cannot be opened: {reason}", shown_path(.path))]
    CannotOpen {
        /// The datastore path.
        path: PathBuf,
        /// Why, and what to do.
        reason: String,
    },
    /// A caller passed an invalid argument (for example a zero limit).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A batch names the same key twice (set/delete conflicts in one batch).
    #[error("batch touches key `{}` more than once; each key may be set or deleted at most once per batch", escape_key(.key))]
    DuplicateKey {
        /// The duplicated key.
        key: Vec<u8>,
    },
    /// A key longer than [`crate::MAX_KEY_BYTES`] was to be written. Not retryable: the
    /// same key is refused every time, on every backend.
    #[error("key `{}` is {len} bytes, longer than the {limit}-byte maximum key length of strata stores (PostgreSQL's index cannot hold longer keys, so no backend takes them); nothing was written; use a shorter key", crate::shown_key(.key))]
    KeyTooLong {
        /// The key (shown shortened).
        key: Vec<u8>,
        /// Its length in bytes.
        len: usize,
        /// The limit ([`crate::MAX_KEY_BYTES`]).
        limit: usize,
    },
    /// An error of the underlying backend.
    #[error("{backend} backend error")]
    Backend {
        /// Which backend (`sled`, `postgres`, ...).
        backend: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl StoreError {
    /// Wraps a backend error.
    pub fn backend(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError::Backend {
            backend,
            source: source.into(),
        }
    }

    /// [`StoreError::NotFound`] of the datastore at `path` (a file or a directory).
    pub fn not_found(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        StoreError::NotFound {
            what: format!("datastore `{}`", shown_path(&path)),
            remedy: "check the path (a store is never created by opening it to read or migrate)"
                .into(),
            path,
        }
    }

    /// True for a failed precondition (the caller may re-read and retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }
}

/// What to do about an I/O failure of a datastore's files, by its kind, for the messages
/// of the embedded backends. Only a failure that can pass by itself (an interrupted or
/// timed-out call) says "retry"; a full disk, missing permissions or a missing path are
/// not fixed by running the same operation again, so their advice names the fix.
///
/// ```
/// use std::io::{Error, ErrorKind};
/// let full = strata_store::io_remedy(&Error::new(ErrorKind::StorageFull, "x"));
/// assert!(full.contains("free space") && !full.contains("retry"));
/// let denied = strata_store::io_remedy(&Error::new(ErrorKind::PermissionDenied, "x"));
/// assert!(denied.contains("permissions") && !denied.contains("retry"));
/// let interrupted = strata_store::io_remedy(&Error::new(ErrorKind::Interrupted, "x"));
/// assert!(interrupted.contains("retry"));
/// ```
pub fn io_remedy(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::StorageFull | K::QuotaExceeded | K::FileTooLarge => {
            "the disk or quota is full: free space on it (the failed write was not committed), then run the operation again"
        }
        K::PermissionDenied | K::ReadOnlyFilesystem => {
            "the files cannot be written or read with these permissions: check the owner and mode of the datastore and its directory, and that the file system is mounted writable"
        }
        K::NotFound => {
            "a file of the datastore is missing: check the path and that nothing else removed or moved its files"
        }
        K::Interrupted | K::TimedOut | K::WouldBlock | K::ResourceBusy => {
            "a transient I/O failure: retry"
        }
        _ => "an I/O failure of its files: check the disk and the path (the cause follows)",
    }
}

/// A path as a message shows it: escaped and, when long, shortened
/// ([`crate::shown_text`]).
pub(crate) fn shown_path(path: &std::path::Path) -> String {
    crate::shown_text(&path.to_string_lossy())
}
