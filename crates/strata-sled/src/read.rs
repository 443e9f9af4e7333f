//! The read paths: point reads, scans, visits.

use crate::SledStore;
use std::ops::Bound;
use strata_store::{Capabilities, KvRead, Result, ScanLimits, Visit, VisitBudget, VisitEnd};

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

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            write_epoch: Some(&self.epoch),
            ..Capabilities::default()
        }
    }
}
