//! A redb file cut short (an interrupted copy or restore) is refused before redb opens it.
//!
//! redb's header (its first 320 bytes) records the file's layout: the page size, the pages
//! of a region and how many regions there are, so the length the file had when that header
//! was written. redb keeps the file at least that long at every instant: it makes a larger
//! file durable before the larger layout can reach the header, and it writes a smaller
//! layout before it shrinks the file (redb's `page_manager`), so no crash, kill or power
//! loss leaves a file shorter than its header says. A shorter file was cut after redb
//! wrote it.
//!
//! redb itself refuses such a file only when it was closed cleanly. A file whose writer had
//! it open when it was copied (or was killed) asks for crash recovery, and redb's recovery
//! takes the file's length as the truth: it rewrites the header for the shorter length
//! (changing the file) and then fails reading the pages the cut removed — or, when the cut
//! only removed pages the last commit does not use, opens it. So strata compares the
//! lengths itself, reading only, before any open: a file shorter than its header's layout
//! is [`StoreError::Damaged`] and is left byte for byte as it was. Reads that meet the end
//! of the file later (a header rewritten by an earlier recovery) are damaged too
//! (`error::map_error`).

use std::io::Read;
use std::path::Path;
use strata_store::{Result, StoreError};

/// The length of redb's header (magic number, flags, layout, two commit slots).
const HEADER_LEN: usize = 320;
/// Where the layout's fields (each a u32, little-endian) are in the header.
const PAGE_SIZE_AT: usize = 12;
const REGION_HEADER_PAGES_AT: usize = 16;
const REGION_MAX_DATA_PAGES_AT: usize = 20;
const FULL_REGIONS_AT: usize = 24;
const TRAILING_DATA_PAGES_AT: usize = 28;

/// The length redb's `header` records for its file (`DatabaseLayout::len`: the super-header
/// page, the full regions, the trailing region), or `None` when the fields make no layout
/// (redb's own checks then say what is wrong).
fn recorded_len(header: &[u8; HEADER_LEN]) -> Option<u64> {
    let field = |at: usize| -> Option<u64> {
        let bytes: [u8; 4] = header.get(at..at + 4)?.try_into().ok()?;
        Some(u64::from(u32::from_le_bytes(bytes)))
    };
    let page = field(PAGE_SIZE_AT)?;
    let region_header = field(REGION_HEADER_PAGES_AT)?;
    let region_data = field(REGION_MAX_DATA_PAGES_AT)?;
    let full = field(FULL_REGIONS_AT)?;
    let trailing = field(TRAILING_DATA_PAGES_AT)?;
    if page == 0 || region_data == 0 || trailing > region_data {
        return None;
    }
    let full_region = region_header.checked_add(region_data)?.checked_mul(page)?;
    let trailing_region = if trailing > 0 {
        region_header.checked_add(trailing)?.checked_mul(page)?
    } else {
        0
    };
    page.checked_add(full.checked_mul(full_region)?)?
        .checked_add(trailing_region)
}

/// Refuses the redb file at `path` (it starts with redb's magic number) when it is shorter
/// than its header, or than the layout its header records: cut short. Reads at most
/// [`HEADER_LEN`] bytes; never writes.
pub(crate) fn refuse_cut(path: &Path) -> Result<()> {
    let mut file = std::fs::File::open(path).map_err(|e| crate::error::io_error(path, e))?;
    let len = file
        .metadata()
        .map_err(|e| crate::error::io_error(path, e))?
        .len();
    let cut = |reason: String| {
        tracing::debug!(path = %path.display(), len, "{reason}");
        Err(StoreError::Damaged {
            path: path.to_path_buf(),
            reason,
        })
    };
    let mut header = [0u8; HEADER_LEN];
    if len < HEADER_LEN as u64 {
        return cut(format!(
            "it is {len} bytes long, shorter than redb's {HEADER_LEN}-byte header: the file was cut short (an interrupted copy or restore); it was left as it is"
        ));
    }
    file.read_exact(&mut header)
        .map_err(|e| crate::error::io_error(path, e))?;
    match recorded_len(&header) {
        Some(recorded) if len < recorded => cut(format!(
            "it is {len} bytes long, but its redb header records {recorded} bytes: the file was cut short (an interrupted copy or restore; redb never leaves a file shorter than its header, not even after a crash); it was left as it is"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_length_of_a_new_file_is_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        drop(redb::Database::create(&path).unwrap());
        let bytes = std::fs::read(&path).unwrap();
        let header: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().unwrap();
        assert_eq!(recorded_len(&header), Some(bytes.len() as u64));
        refuse_cut(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(refuse_cut(&path), Err(StoreError::Damaged { .. })));
    }
}
