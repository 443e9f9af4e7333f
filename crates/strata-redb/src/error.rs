//! redb's failures as [`StoreError`]s naming the file and what to do.

use crate::{open_here, NAME};
use std::path::{Path, PathBuf};
use strata_store::StoreError;

pub(crate) fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    map_error(path, redb::Error::Io(e))
}

pub(crate) fn open_error(path: &Path, e: redb::Error) -> StoreError {
    map_error(path, e)
}

pub(crate) fn map_error(path: &Path, e: redb::Error) -> StoreError {
    match e {
        // Open in this process already: not another process's lock.
        redb::Error::DatabaseAlreadyOpen if open_here::contains(path) => StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: "it is already open in this process; use the handle that opened it (or a clone of its `Store`) instead of opening the file again".into(),
        },
        redb::Error::DatabaseAlreadyOpen => StoreError::InUse {
            path: path.to_path_buf(),
        },
        redb::Error::Corrupted(reason) => StoreError::Damaged {
            path: path.to_path_buf(),
            reason,
        },
        // A page the tree refers to lies past the end of the file: the file was cut.
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            StoreError::Damaged {
                path: path.to_path_buf(),
                reason: format!("a page its tree refers to lies past the end of the file ({io}): the file was cut short (an interrupted copy or restore)"),
            }
        }
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            StoreError::Damaged {
                path: path.to_path_buf(),
                reason: io.to_string(),
            }
        }
        other => StoreError::backend(
            NAME,
            RedbError {
                path: path.to_path_buf(),
                source: other,
            },
        ),
    }
}

/// The boxed source of [`StoreError::Backend`] for redb: names the file, carries redb's
/// error as its own source. Private: redb's types are not part of the API.
#[derive(Debug, thiserror::Error)]
#[error("redb store `{}` failed: {}", .path.display(), remedy(.source))]
struct RedbError {
    path: PathBuf,
    #[source]
    source: redb::Error,
}

/// What to do about a redb failure: by the I/O error's kind ([`strata_store::io_remedy`]:
/// "retry" only for a transient one), otherwise the generic advice (never "retry": the
/// same call meets the same state again).
fn remedy(e: &redb::Error) -> &'static str {
    match e {
        redb::Error::Io(io) => strata_store::io_remedy(io),
        _ => "check the disk and the path (the cause follows)",
    }
}

/// True when `e` is redb's I/O failure for lack of room: a full disk (`ENOSPC`), a full
/// quota (`EDQUOT`) or a file over the file system's size limit (`EFBIG`). Nothing else:
/// a damaged file, a failing disk (`EIO`) or redb's own errors are not about room.
pub(crate) fn is_out_of_room(e: &StoreError) -> bool {
    use std::io::ErrorKind as K;
    let StoreError::Backend { source, .. } = e else {
        return false;
    };
    match source.downcast_ref::<RedbError>() {
        Some(RedbError {
            source: redb::Error::Io(io),
            ..
        }) => matches!(
            io.kind(),
            K::StorageFull | K::QuotaExceeded | K::FileTooLarge
        ),
        _ => false,
    }
}
