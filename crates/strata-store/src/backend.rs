//! The capability traits every backend implements.

use crate::{Batch, Result, ScanLimits, ScanPage};

/// Reading: point lookups and bounded, cursor-resumed prefix scans.
pub trait KvRead {
    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Records whose key starts with `prefix` and is strictly greater than `after` (when
    /// given), in ascending byte order, bounded by `limits`:
    ///
    /// * at most `max_records` records;
    /// * the sum of key+value lengths never exceeds `max_bytes`: the scan stops *before*
    ///   the record that would overflow (the first record is always taken when it fits);
    /// * a record whose key+value alone exceeds `max_bytes` is
    ///   [`StoreError::RecordTooLarge`](crate::StoreError::RecordTooLarge), raised before
    ///   its value is copied (when it is the first record of the page; otherwise the page
    ///   ends before it and the next page reports it).
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage>;

    /// True when at least one key starts with `prefix`.
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool>;
}

/// Writing: atomic conditional batches and durability.
pub trait KvWrite {
    /// Applies `batch` atomically: every precondition is checked and every mutation
    /// applied, or — on the first failed precondition — nothing is written and
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) is returned. A batch that
    /// touches one key twice is refused with
    /// [`StoreError::DuplicateKey`](crate::StoreError::DuplicateKey).
    fn apply(&self, batch: Batch) -> Result<()>;

    /// Makes every applied batch durable.
    fn flush(&self) -> Result<()>;
}

/// A complete backend: [`KvRead`] + [`KvWrite`], shareable across threads.
pub trait Backend: KvRead + KvWrite + Send + Sync + std::fmt::Debug {
    /// Short backend name for messages (`memory`, `sled`, `postgres`).
    fn name(&self) -> &'static str;
}

impl<T: KvRead + ?Sized> KvRead for &T {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        (**self).scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        (**self).prefix_exists(prefix)
    }
}

impl<T: KvWrite + ?Sized> KvWrite for &T {
    fn apply(&self, batch: Batch) -> Result<()> {
        (**self).apply(batch)
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
}
