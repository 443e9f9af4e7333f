//! Document iteration in key order, page by page.

use super::{Collection, CollectionError, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::Bound;
use strata_store::{Pages, Record, Records, ScanLimits, Store};

/// Records per page of an iteration.
const ITER_PAGE_RECORDS: usize = 256;
/// Byte budget per page of an iteration.
const ITER_PAGE_BYTES: usize = 64 << 20;

/// An iterator over documents in key order, reading the store page by page (through the
/// store's one page iterator, [`strata_store::Pages`]). Every item goes through the
/// payload read path; a document that fails to read yields an `Err` item and iteration
/// continues with the next one; a failed scan yields one `Err` and ends it.
pub struct Iter<'a, T> {
    coll: &'a Collection<T>,
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
        let (records, failed) = match ScanLimits::new(ITER_PAGE_RECORDS, ITER_PAGE_BYTES) {
            Ok(limits) => (
                Some(
                    Pages::new(&coll.inner.store, scan_prefix, limits)
                        .after(after.as_deref())
                        .records(),
                ),
                None,
            ),
            Err(e) => (None, Some(CollectionError::store(&coll.inner.name, e))),
        };
        Iter {
            coll,
            first,
            records,
            failed,
            end,
            done: false,
        }
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
                Some(Err(e)) => {
                    let e = CollectionError::store(&self.coll.inner.name, e);
                    return self.stop(e);
                }
                Some(Ok(r)) => r,
            },
        };
        let past_end = match &self.end {
            Bound::Unbounded => false,
            Bound::Included(e) => rec.key > *e,
            Bound::Excluded(e) => rec.key >= *e,
        };
        if past_end {
            self.done = true;
            return None;
        }
        let key = match self.coll.suffix_of(&rec.key) {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        Some(self.coll.read_document(key, &rec.key, &rec.value))
    }
}
