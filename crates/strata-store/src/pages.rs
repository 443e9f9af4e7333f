//! The one page iterator: every scan loop over a prefix walks [`Pages`] (or its flattened
//! [`Records`]) instead of re-implementing the cursor bookkeeping.
//!
//! One rule for oversize records, the store's: a record larger than the byte budget on
//! its own is [`StoreError::RecordTooLarge`](crate::StoreError::RecordTooLarge), yielded
//! as an `Err` item that ends the iteration (a scan never skips it silently, and never
//! returns an empty page that would stall the cursor).
//!
//! ```
//! use strata_store::{Batch, KvWrite, MemoryStore, Pages, ScanLimits, Store};
//!
//! # fn main() -> Result<(), strata_store::StoreError> {
//! let store = Store::new(MemoryStore::new());
//! store.apply(Batch::new().set(b"t/a".to_vec(), b"1".to_vec()).set(b"t/b".to_vec(), b"2".to_vec()))?;
//! let keys: Vec<Vec<u8>> = Pages::new(&store, b"t/", ScanLimits::new(1, 1024)?)
//!     .records()
//!     .map(|r| r.map(|r| r.key))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(keys, [b"t/a".to_vec(), b"t/b".to_vec()]);
//! # Ok(()) }
//! ```

use crate::{KvRead, Record, Result, ScanLimits, ScanPage};
use std::collections::VecDeque;

/// The pages of a prefix scan, in key order, each resuming after the previous page's
/// cursor. A failed scan is yielded once as an `Err` and ends the iteration.
#[derive(Debug)]
pub struct Pages<'a, S: ?Sized> {
    store: &'a S,
    prefix: Vec<u8>,
    after: Option<Vec<u8>>,
    limits: ScanLimits,
    done: bool,
}

impl<'a, S: KvRead + ?Sized> Pages<'a, S> {
    /// Pages of every key starting with `prefix`, each capped by `limits`.
    pub fn new(store: &'a S, prefix: &[u8], limits: ScanLimits) -> Self {
        Pages {
            store,
            prefix: prefix.to_vec(),
            after: None,
            limits,
            done: false,
        }
    }

    /// Starts after `cursor` (exclusive), as a resumed scan does.
    pub fn after(mut self, cursor: Option<&[u8]>) -> Self {
        self.after = cursor.map(<[u8]>::to_vec);
        self
    }

    /// The cursor of the last page yielded (the key the next page starts after).
    pub fn cursor(&self) -> Option<&[u8]> {
        self.after.as_deref()
    }

    /// The records of every page, one at a time.
    pub fn records(self) -> Records<'a, S> {
        Records {
            pages: self,
            buf: VecDeque::new(),
        }
    }
}

impl<S: KvRead + ?Sized> Iterator for Pages<'_, S> {
    type Item = Result<ScanPage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let page = match self
            .store
            .scan(&self.prefix, self.after.as_deref(), self.limits)
        {
            Ok(page) => page,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        if !page.more {
            self.done = true;
        }
        if let Some(c) = page.cursor() {
            self.after = Some(c.to_vec());
        } else if page.more {
            // A page that says "more" but returned nothing cannot advance: stop rather
            // than scan the same page forever.
            self.done = true;
        }
        Some(Ok(page))
    }
}

/// The records of a prefix scan, page by page (see [`Pages::records`]).
#[derive(Debug)]
pub struct Records<'a, S: ?Sized> {
    pages: Pages<'a, S>,
    buf: VecDeque<Record>,
}

impl<S: KvRead + ?Sized> Records<'_, S> {
    /// The key the next page starts after (the last key read from the store).
    pub fn cursor(&self) -> Option<&[u8]> {
        self.pages.cursor()
    }
}

impl<S: KvRead + ?Sized> Iterator for Records<'_, S> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.buf.pop_front() {
                return Some(Ok(r));
            }
            match self.pages.next()? {
                Ok(page) => self.buf.extend(page.records),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{Batch, KvWrite, MemoryStore, StoreError};

    fn store() -> MemoryStore {
        let s = MemoryStore::new();
        let mut b = Batch::new();
        for k in ["t/a", "t/b", "t/c", "u/a"] {
            b = b.set(k.as_bytes().to_vec(), vec![b'x'; 4]);
        }
        s.apply(b).unwrap();
        s
    }

    #[test]
    fn pages_walk_the_prefix_in_order_and_resume_after_a_cursor() {
        let s = store();
        let limits = ScanLimits::new(2, 1024).unwrap();
        let pages: Vec<ScanPage> = Pages::new(&s, b"t/", limits)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].records.len(), 2);
        assert!(!pages[1].more);
        let keys: Vec<Vec<u8>> = Pages::new(&s, b"t/", limits)
            .after(Some(b"t/a"))
            .records()
            .map(|r| r.unwrap().key)
            .collect();
        assert_eq!(keys, [b"t/b".to_vec(), b"t/c".to_vec()]);
    }

    #[test]
    fn an_oversize_record_is_one_error_that_ends_the_iteration() {
        let s = store();
        s.apply(Batch::new().set(b"t/b".to_vec(), vec![0; 100]))
            .unwrap();
        let limits = ScanLimits::new(10, 20).unwrap();
        let items: Vec<Result<Record>> = Pages::new(&s, b"t/", limits).records().collect();
        assert_eq!(items.len(), 2, "t/a, then the error");
        assert_eq!(items[0].as_ref().unwrap().key, b"t/a");
        assert!(matches!(
            items[1],
            Err(StoreError::RecordTooLarge { ref key, .. }) if key == b"t/b"
        ));
    }
}
