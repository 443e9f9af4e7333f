//! Bounded scans.

use crate::{Result, StoreError};

/// One key-value record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The full key (including any table prefix).
    pub key: Vec<u8>,
    /// The value bytes.
    pub value: Vec<u8>,
}

impl Record {
    /// Key length plus value length: what a record costs against a byte budget.
    pub fn size(&self) -> usize {
        self.key.len() + self.value.len()
    }
}

/// The two bounds of one scan page: a record count and a byte budget (keys + values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanLimits {
    max_records: usize,
    max_bytes: usize,
}

impl ScanLimits {
    /// Both limits must be at least 1.
    pub fn new(max_records: usize, max_bytes: usize) -> Result<Self> {
        if max_records == 0 {
            return Err(StoreError::InvalidArgument(
                "scan record limit must be at least 1".into(),
            ));
        }
        if max_bytes == 0 {
            return Err(StoreError::InvalidArgument(
                "scan byte budget must be at least 1".into(),
            ));
        }
        Ok(ScanLimits {
            max_records,
            max_bytes,
        })
    }

    /// Effectively unbounded by count, bounded only by bytes.
    pub fn bytes(max_bytes: usize) -> Result<Self> {
        Self::new(usize::MAX, max_bytes)
    }

    /// The record limit.
    pub fn max_records(&self) -> usize {
        self.max_records
    }

    /// The byte budget.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// The result of one bounded scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// Records in ascending key order.
    pub records: Vec<Record>,
    /// True when the scan stopped at a limit with at least one more record under the
    /// prefix; false when the prefix is exhausted.
    pub more: bool,
}

impl ScanPage {
    /// The cursor to pass as `after` for the next page: the last returned key.
    pub fn cursor(&self) -> Option<&[u8]> {
        self.records.last().map(|r| r.key.as_slice())
    }

    /// Sum of key and value lengths of the returned records.
    pub fn bytes(&self) -> usize {
        self.records.iter().map(Record::size).sum()
    }

    /// Hands the page's records to `visit` in order, as
    /// [`KvRead::scan_visit`](crate::KvRead::scan_visit) would have: a
    /// [`Visit::Stop`] ends it (the record just seen counts as taken,
    /// and `more` is true).
    pub fn visit(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit) -> VisitEnd {
        for (i, r) in self.records.iter().enumerate() {
            if visit(&r.key, &r.value) == Visit::Stop {
                return VisitEnd {
                    records: i + 1,
                    more: true,
                };
            }
        }
        VisitEnd {
            records: self.records.len(),
            more: self.more,
        }
    }
}

/// Incrementally builds a [`ScanPage`] while enforcing the limits — the one place the
/// scan contract is implemented, shared by every backend.
///
/// Backends iterate their range in key order and call [`PageBuilder::offer`] with each
/// key and the value's *length* first; only when it answers [`Offer::Take`] do they copy
/// the value and call [`PageBuilder::push`].
#[derive(Debug)]
pub struct PageBuilder {
    limits: ScanLimits,
    used: usize,
    page: ScanPage,
}

/// What a backend must do with the next record it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Copy the value and [`PageBuilder::push`] it.
    Take,
    /// Stop: the page is full (the record is left for the next page).
    Stop,
}

impl PageBuilder {
    /// A builder for one page under `limits`.
    pub fn new(limits: ScanLimits) -> Self {
        PageBuilder {
            limits,
            used: 0,
            page: ScanPage::default(),
        }
    }

    /// Decides about a record given its key and value length, before the value is copied.
    ///
    /// Errors with [`StoreError::RecordTooLarge`] when the record alone exceeds the budget.
    pub fn offer(&mut self, key: &[u8], value_len: usize) -> Result<Offer> {
        let size = key.len().saturating_add(value_len);
        if size > self.limits.max_bytes {
            if !self.page.records.is_empty() {
                // Return what we have; the next page starts at this record and reports it.
                self.page.more = true;
                return Ok(Offer::Stop);
            }
            return Err(StoreError::RecordTooLarge {
                key: key.to_vec(),
                size,
                limit: self.limits.max_bytes,
            });
        }
        if self.page.records.len() >= self.limits.max_records
            || self.used.saturating_add(size) > self.limits.max_bytes
        {
            self.page.more = true;
            return Ok(Offer::Stop);
        }
        Ok(Offer::Take)
    }

    /// Adds a record that [`PageBuilder::offer`] accepted.
    pub fn push(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.used += key.len() + value.len();
        self.page.records.push(Record { key, value });
    }

    /// The finished page.
    pub fn finish(self) -> ScanPage {
        self.page
    }
}

/// The page budget of a [`KvRead::scan_visit`](crate::KvRead::scan_visit): the scan
/// contract of [`PageBuilder`] for a visitor that borrows each record instead of a page
/// that copies it — the one place it is implemented for every backend's visiting scan.
///
/// A backend iterates its range in key order and [`admits`](VisitBudget::admit) each
/// record before handing it to the visitor:
///
/// ```
/// # use strata_store::{ScanLimits, VisitBudget, VisitEnd, Visit};
/// # fn main() -> strata_store::Result<()> {
/// let records: [(&[u8], &[u8]); 3] = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
/// let mut budget = VisitBudget::new(ScanLimits::new(2, 1024)?);
/// let mut seen = Vec::new();
/// let mut end = None;
/// for (key, value) in records {
///     if !budget.admit(key, value.len())? {
///         end = Some(budget.more());
///         break;
///     }
///     seen.push(key);
///     // a visitor answering `Visit::Stop` would end the page with `budget.more()` too
/// }
/// let end = end.unwrap_or(budget.exhausted());
/// assert_eq!(seen, [b"a", b"b"]);
/// assert_eq!(end, VisitEnd { records: 2, more: true });
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct VisitBudget {
    limits: ScanLimits,
    records: usize,
    used: usize,
}

impl VisitBudget {
    /// A budget for one page under `limits`.
    pub fn new(limits: ScanLimits) -> Self {
        VisitBudget {
            limits,
            records: 0,
            used: 0,
        }
    }

    /// Counts the next record (its key and value length) against the page: `true` when it
    /// fits (hand it to the visitor), `false` when the page is full (end it with
    /// [`VisitBudget::more`]; the record is the next page's first).
    ///
    /// Errors with [`StoreError::RecordTooLarge`] when the record alone exceeds the byte
    /// budget and it would be the page's first (after other records the page just ends
    /// there, and the next page reports it), exactly as [`PageBuilder::offer`].
    pub fn admit(&mut self, key: &[u8], value_len: usize) -> Result<bool> {
        let size = key.len().saturating_add(value_len);
        if size > self.limits.max_bytes && self.records == 0 {
            return Err(StoreError::RecordTooLarge {
                key: key.to_vec(),
                size,
                limit: self.limits.max_bytes,
            });
        }
        if self.records >= self.limits.max_records
            || self.used.saturating_add(size) > self.limits.max_bytes
        {
            return Ok(false);
        }
        self.records += 1;
        self.used += size;
        Ok(true)
    }

    /// The end of a page cut short: at a limit, or by the visitor's
    /// [`Visit::Stop`].
    pub fn more(&self) -> VisitEnd {
        VisitEnd {
            records: self.records,
            more: true,
        }
    }

    /// The end of a page that reached the end of the prefix.
    pub fn exhausted(&self) -> VisitEnd {
        VisitEnd {
            records: self.records,
            more: false,
        }
    }
}

/// What a [`KvRead::scan_visit`](crate::KvRead::scan_visit) visitor wants after a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Hand over the next record.
    Continue,
    /// End the page here.
    Stop,
}

/// How a [`KvRead::scan_visit`](crate::KvRead::scan_visit) page ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisitEnd {
    /// Records handed to the visitor.
    pub records: usize,
    /// True when the page stopped before the prefix was exhausted (at a limit or on
    /// [`Visit::Stop`]; there may be no record left in the latter case).
    pub more: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod visit_budget_tests {
    use super::*;

    fn limits(records: usize, bytes: usize) -> ScanLimits {
        ScanLimits::new(records, bytes).unwrap()
    }

    #[test]
    fn a_page_visit_counts_the_stopping_record_and_keeps_more() {
        let rec = |k: &[u8]| Record {
            key: k.to_vec(),
            value: b"v".to_vec(),
        };
        let page = ScanPage {
            records: vec![rec(b"a"), rec(b"b"), rec(b"c")],
            more: false,
        };
        let mut seen = Vec::new();
        let end = page.visit(&mut |k, _| {
            seen.push(k.to_vec());
            if k == b"b" {
                Visit::Stop
            } else {
                Visit::Continue
            }
        });
        assert_eq!(seen, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            end,
            VisitEnd {
                records: 2,
                more: true
            }
        );
        let full = ScanPage { more: true, ..page };
        let end = full.visit(&mut |_, _| Visit::Continue);
        assert_eq!(
            end,
            VisitEnd {
                records: 3,
                more: true
            }
        );
    }

    #[test]
    fn stops_at_the_record_limit() {
        let mut b = VisitBudget::new(limits(2, 100));
        assert!(matches!(b.admit(b"a", 1), Ok(true)));
        assert!(matches!(b.admit(b"b", 1), Ok(true)));
        assert!(matches!(b.admit(b"c", 1), Ok(false)));
        assert_eq!(
            b.more(),
            VisitEnd {
                records: 2,
                more: true
            }
        );
        assert_eq!(
            b.exhausted(),
            VisitEnd {
                records: 2,
                more: false
            }
        );
    }

    #[test]
    fn stops_at_the_byte_budget_and_leaves_the_record_for_the_next_page() {
        let mut b = VisitBudget::new(limits(10, 10));
        assert!(matches!(b.admit(b"k1", 4), Ok(true))); // 6 bytes
        assert!(matches!(b.admit(b"k2", 4), Ok(false))); // 12 > 10
        assert_eq!(b.more().records, 1);
    }

    #[test]
    fn an_oversize_first_record_is_an_error_and_a_later_one_ends_the_page() {
        let mut first = VisitBudget::new(limits(10, 10));
        match first.admit(b"big", 20) {
            Err(StoreError::RecordTooLarge { key, size, limit }) => {
                assert_eq!((key.as_slice(), size, limit), (&b"big"[..], 23, 10));
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
        let mut later = VisitBudget::new(limits(10, 10));
        assert!(matches!(later.admit(b"k", 1), Ok(true)));
        assert!(matches!(later.admit(b"big", 20), Ok(false)));
        assert_eq!(
            later.more(),
            VisitEnd {
                records: 1,
                more: true
            }
        );
    }
}
