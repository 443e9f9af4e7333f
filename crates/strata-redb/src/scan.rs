//! Ordered scans over the store's redb tables: one range of one table, or — for a prefix
//! that spans the document table and the other one (`""`, `__nx/`) — the two ranges
//! merged by key, so a caller sees exactly the records, in exactly the order, it would
//! see if every key were in one table (module `tables`).

use crate::tables::{Span, DOCS};
use crate::RedbStore;
use redb::{AccessGuard, ReadOnlyTable, TableDefinition};
use std::ops::Bound;
use strata_store::{Result, ScanLimits, Visit, VisitBudget, VisitEnd};

type Entry = (
    AccessGuard<'static, &'static [u8]>,
    AccessGuard<'static, &'static [u8]>,
);
type Range = redb::Range<'static, &'static [u8], &'static [u8]>;

/// The lower bound of a scan of `prefix` resuming after `after`.
fn start_bound<'a>(prefix: &'a [u8], after: Option<&'a [u8]>) -> Bound<&'a [u8]> {
    match after {
        Some(a) if a >= prefix => Bound::Excluded(a),
        _ => Bound::Included(prefix),
    }
}

/// One table's side of a scan: its range and the next record in it under the prefix.
struct Side {
    range: Option<Range>,
    next: Option<Entry>,
}

impl RedbStore {
    /// The range of `table` from the scan's start, `None` when the table does not exist
    /// (an empty store).
    fn side(
        &self,
        txn: &redb::ReadTransaction,
        table: TableDefinition<&[u8], &[u8]>,
        start: Bound<&[u8]>,
    ) -> Result<Side> {
        let range = self.guard(|| {
            let table: ReadOnlyTable<&[u8], &[u8]> = match txn.open_table(table) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(self.error(e)),
            };
            table
                .range::<&[u8]>((start, Bound::Unbounded))
                .map(Some)
                .map_err(|e| self.error(e))
        })?;
        Ok(Side { range, next: None })
    }

    /// Moves `side` to its next record under `prefix` (`None` past its last).
    fn advance(&self, side: &mut Side, prefix: &[u8]) -> Result<()> {
        side.next = None;
        let Some(range) = side.range.as_mut() else {
            return Ok(());
        };
        match self.guard(|| Ok(range.next()))? {
            Some(item) => {
                let (key, value) = item.map_err(|e| self.error(e))?;
                if key.value().starts_with(prefix) {
                    side.next = Some((key, value));
                } else {
                    side.range = None;
                }
            }
            None => side.range = None,
        }
        Ok(())
    }

    /// [`strata_store::KvRead::scan_visit`]: every call into redb is guarded, `visit` (the
    /// caller's code) is not, so a panic of the caller stays the caller's.
    pub(crate) fn visit_range(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let mut budget = VisitBudget::new(limits);
        let txn = self.begin_read()?;
        let start = start_bound(prefix, after);
        let layout = self.layout();
        let (first, second) = match layout.span(prefix) {
            Span::Main => (layout.main(), None),
            Span::Docs => (DOCS, None),
            Span::Both => (layout.main(), Some(DOCS)),
        };
        let mut a = self.side(&txn, first, start)?;
        let mut b = match second {
            Some(table) => self.side(&txn, table, start)?,
            None => Side {
                range: None,
                next: None,
            },
        };
        self.advance(&mut a, prefix)?;
        self.advance(&mut b, prefix)?;
        loop {
            // The smaller key of the two sides (the tables hold disjoint keys).
            let from_a = match (&a.next, &b.next) {
                (None, None) => return Ok(budget.exhausted()),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((ka, _)), Some((kb, _))) => ka.value() < kb.value(),
            };
            let side = if from_a { &mut a } else { &mut b };
            if let Some((key, value)) = &side.next {
                let (key, value) = (key.value(), value.value());
                if !budget.admit(key, value.len())? || visit(key, value) == Visit::Stop {
                    return Ok(budget.more());
                }
            }
            self.advance(side, prefix)?;
        }
    }
}
