//! The one page iterator: every scan loop over a prefix walks [`Pages`] (or its flattened
//! [`Records`]) instead of re-implementing the cursor bookkeeping.
//!
//! One rule for oversize records, the store's: a record larger than the byte budget on
//! its own is [`StoreError::RecordTooLarge`], yielded
//! as an `Err` item that ends the iteration (a scan never skips it silently, and never
//! returns an empty page that would stall the cursor). A caller that must see every
//! record whatever its size (a manifest's tally) says so with
//! [`Pages::oversize`]`(`[`Oversize::ReadAlone`]`)`: such a record is then read on its
//! own.
//!
//! [`Pages::visit`] is the zero-copy form: each record is handed over as the backend
//! holds it, nothing is copied but the cursor.
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

use crate::{KvRead, Record, Result, ScanLimits, ScanPage, StoreError, Visit};
use std::collections::VecDeque;

/// What a scan does with a record larger than the page budget on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Oversize {
    /// [`StoreError::RecordTooLarge`] ends the scan
    /// (the default).
    #[default]
    Fail,
    /// The record is read on its own ([`KvRead::get`]) and the scan goes on.
    ReadAlone,
}

/// The pages of a prefix scan, in key order, each resuming after the previous page's
/// cursor. A failed scan is yielded once as an `Err` and ends the iteration.
#[derive(Debug)]
pub struct Pages<'a, S: ?Sized> {
    store: &'a S,
    prefix: Vec<u8>,
    after: Option<Vec<u8>>,
    limits: ScanLimits,
    done: bool,
    oversize: Oversize,
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
            oversize: Oversize::Fail,
        }
    }

    /// What [`Pages::visit`] does with a record over the page budget (default
    /// [`Oversize::Fail`]).
    pub fn oversize(mut self, rule: Oversize) -> Self {
        self.oversize = rule;
        self
    }

    /// Hands every record, in key order, to `f` without copying it (the backend's
    /// [`KvRead::scan_visit`], page after page); `f` returning [`Visit::Stop`] ends the
    /// scan. Returns the records visited.
    pub fn visit(mut self, mut f: impl FnMut(&[u8], &[u8]) -> Visit) -> Result<u64> {
        let mut visited = 0u64;
        let mut last: Vec<u8> = Vec::new();
        while !self.done {
            let mut stopped = false;
            let mut any = false;
            let scanned = self.store.scan_visit(
                &self.prefix,
                self.after.as_deref(),
                self.limits,
                &mut |k, v| {
                    visited += 1;
                    any = true;
                    last.clear();
                    last.extend_from_slice(k);
                    let next = f(k, v);
                    stopped = next == Visit::Stop;
                    next
                },
            );
            if any {
                self.after = Some(last.clone());
            }
            if stopped {
                return Ok(visited);
            }
            match scanned {
                Ok(end) => {
                    // A page that says "more" but visited nothing cannot advance.
                    if !end.more || !any {
                        self.done = true;
                    }
                }
                Err(StoreError::RecordTooLarge { key, .. })
                    if self.oversize == Oversize::ReadAlone =>
                {
                    if let Some(v) = self.store.get(&key)? {
                        visited += 1;
                        if f(&key, &v) == Visit::Stop {
                            return Ok(visited);
                        }
                    }
                    self.after = Some(key);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(visited)
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
    fn visit_hands_over_every_record_and_reads_an_oversize_one_alone_when_asked() {
        let s = store();
        s.apply(Batch::new().set(b"t/b".to_vec(), vec![0; 100]))
            .unwrap();
        let limits = ScanLimits::new(1, 20).unwrap();
        let mut seen = Vec::new();
        let err = Pages::new(&s, b"t/", limits).visit(|k, _| {
            seen.push(k.to_vec());
            Visit::Continue
        });
        assert!(matches!(err, Err(StoreError::RecordTooLarge { ref key, .. }) if key == b"t/b"));
        assert_eq!(seen, [b"t/a".to_vec()]);
        let mut seen = Vec::new();
        let n = Pages::new(&s, b"t/", limits)
            .oversize(Oversize::ReadAlone)
            .visit(|k, v| {
                seen.push((k.to_vec(), v.len()));
                Visit::Continue
            })
            .unwrap();
        assert_eq!(n, 3);
        let keys: Vec<&[u8]> = seen.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, [b"t/a".as_slice(), b"t/b", b"t/c"]);
        assert_eq!(seen[1].1, 100);
        // Stop ends the scan.
        let n = Pages::new(&s, b"", ScanLimits::new(10, 1 << 20).unwrap())
            .visit(|k, _| {
                if k == b"t/b" {
                    Visit::Stop
                } else {
                    Visit::Continue
                }
            })
            .unwrap();
        assert_eq!(n, 2);
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
