//! Document iteration in key order, page by page.

use super::{Collection, CollectionError, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::Bound;
use strata_store::{Pages, Record, Records, ScanLimits, Store, StoreError};

/// Records per page of an iteration.
const ITER_PAGE_RECORDS: usize = 256;
/// Byte budget per page of an iteration: a document record (key + value) larger than
/// this on its own is skipped and reported ([`CollectionError::OversizeDocument`]).
pub const ITER_PAGE_BYTES: usize = 64 << 20;

/// An iterator over documents in key order, reading the store page by page (through the
/// store's one page iterator, [`strata_store::Pages`]). Every item goes through the
/// payload read path; a document that fails to read yields an `Err` item and iteration
/// continues with the next one. A document larger than the page budget
/// ([`ITER_PAGE_BYTES`], written by an older build or another tool) yields one
/// [`CollectionError::OversizeDocument`] naming its key and the budget, and iteration
/// continues after it. Any other failed scan yields one `Err` and ends it.
pub struct Iter<'a, T> {
    coll: &'a Collection<T>,
    scan_prefix: Vec<u8>,
    first: Option<Vec<u8>>,
    records: Option<Records<'a, Store>>,
    failed: Option<CollectionError>,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl<T> std::fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("collection", &self.coll.inner.name)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'a, T> Iter<'a, T> {
    pub(super) fn new(
        coll: &'a Collection<T>,
        scan_prefix: &[u8],
        after: Option<Vec<u8>>,
        first: Option<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Self {
        let (records, failed) = match Self::pages(coll, scan_prefix, after.as_deref()) {
            Ok(records) => (Some(records), None),
            Err(e) => (None, Some(e)),
        };
        Iter {
            coll,
            scan_prefix: scan_prefix.to_vec(),
            first,
            records,
            failed,
            end,
            done: false,
        }
    }

    /// The records under `scan_prefix` after `after`, page by page.
    fn pages(
        coll: &'a Collection<T>,
        scan_prefix: &[u8],
        after: Option<&[u8]>,
    ) -> Result<Records<'a, Store>, CollectionError> {
        let limits = ScanLimits::new(ITER_PAGE_RECORDS, ITER_PAGE_BYTES)
            .map_err(|e| CollectionError::store(&coll.inner.name, e))?;
        Ok(Pages::new(&coll.inner.store, scan_prefix, limits)
            .after(after)
            .records())
    }

    fn past_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Unbounded => false,
            Bound::Included(e) => key > e.as_slice(),
            Bound::Excluded(e) => key >= e.as_slice(),
        }
    }

    /// A record too large for a page: reported as one item, and the scan resumes after it.
    fn skip_oversize(
        &mut self,
        key: Vec<u8>,
        size: usize,
        limit: usize,
    ) -> Option<Result<Document<T>, CollectionError>> {
        if self.past_end(&key) {
            self.done = true;
            return None;
        }
        match Self::pages(self.coll, &self.scan_prefix, Some(&key)) {
            Ok(records) => self.records = Some(records),
            Err(e) => return self.stop(e),
        }
        let suffix = key
            .strip_prefix(self.coll.inner.prefix.as_slice())
            .unwrap_or(&key);
        tracing::warn!(
            collection = %self.coll.inner.name,
            key = %strata_store::escape_key(suffix),
            size,
            limit,
            "iteration skipped a document larger than its read budget"
        );
        Some(Err(CollectionError::OversizeDocument {
            collection: self.coll.inner.name.clone(),
            key: String::from_utf8_lossy(suffix).into_owned(),
            size,
            limit,
        }))
    }

    fn stop(&mut self, e: CollectionError) -> Option<Result<Document<T>, CollectionError>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<T: Serialize + DeserializeOwned> Iterator for Iter<'_, T> {
    type Item = Result<Document<T>, CollectionError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            return self.stop(e);
        }
        let rec = match self.first.take() {
            Some(first) => match self.coll.get_raw(&first) {
                Ok(Some(value)) => Some(Record { key: first, value }),
                Ok(None) => None,
                Err(e) => return self.stop(e),
            },
            None => None,
        };
        let rec = match rec {
            Some(r) => r,
            None => match self.records.as_mut().and_then(Iterator::next) {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(StoreError::RecordTooLarge { key, size, limit })) => {
                    return self.skip_oversize(key, size, limit);
                }
                Some(Err(e)) => {
                    let e = CollectionError::store(&self.coll.inner.name, e);
                    return self.stop(e);
                }
                Some(Ok(r)) => r,
            },
        };
        if self.past_end(&rec.key) {
            self.done = true;
            return None;
        }
        let key = match self.coll.suffix_of(&rec.key) {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        Some(self.coll.read_document(key, &rec.key, rec.value))
    }
}
