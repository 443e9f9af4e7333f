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
