//! The read paths: point reads, scans, visits.

use crate::SledStore;
use std::ops::Bound;
use strata_store::{
    KvRead, Offer, PageBuilder, Peek, Result, ScanLimits, ScanPage, Visit, VisitBudget, VisitEnd,
    WriteEpoch,
};

impl KvRead for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // The write cache first: exactly sled's value for a key written recently.
        if let Some(v) = self.values.get_copy(key) {
            return Ok(Some(v));
        }
        self.db
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| self.error(e))
    }

    fn peek(&self, key: &[u8]) -> Result<Peek> {
        if let Some(v) = self.values.get_copy(key) {
            return Ok(Peek::Value(Some(v)));
        }
        if !self.values.enabled() {
            return self.get(key).map(Peek::Value);
        }
        // A single-key compare-and-swap that fails on the key's own precondition is one
        // traversal (as a read would be) and records the value sled reported in the write
        // cache (see `SledStore::cas`): the promise of `Peek::Unread`.
        Ok(Peek::Unread)
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let mut page = PageBuilder::new(limits);
        for item in self.db.range::<&[u8], _>((start, Bound::Unbounded)) {
            let (key, value) = item.map_err(|e| self.error(e))?;
            if !key.starts_with(prefix) {
                break;
            }
            // Decide on the length first: an oversize value is never copied.
            match page.offer(&key, value.len())? {
                Offer::Take => page.push(key.to_vec(), value.to_vec()),
                Offer::Stop => break,
            }
        }
        Ok(page.finish())
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let mut budget = VisitBudget::new(limits);
        for item in self.db.range::<&[u8], _>((start, Bound::Unbounded)) {
            let (key, value) = item.map_err(|e| self.error(e))?;
            if !key.starts_with(prefix) {
                break;
            }
            if !budget.admit(&key, value.len())? || visit(&key, &value) == Visit::Stop {
                return Ok(budget.more());
            }
        }
        Ok(budget.exhausted())
    }

    fn write_epoch(&self) -> Option<WriteEpoch> {
        Some(self.epoch.observe())
    }

    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        match self.db.scan_prefix(prefix).keys().next() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(self.error(e)),
        }
    }
}
