//! The CLI's read-only walks over a prefix (the record count behind `strata migrate`'s
//! progress bar, the payload-version survey of `strata collections` / `status`), on the
//! one page iterator ([`strata_store::Pages`]).
//!
//! One rule for oversize records, the read-only rule of the bulk pass
//! ([`strata::pass::Pass::run_read_only`]; docs/format.md, "Read budgets"): the page
//! budget binds only what one page reads, so a record larger than the budget on its own
//! is read alone (one `get`) and handed on like any other record, and the walk continues
//! after it. Nothing is skipped and nothing stops the walk but a store error.

use strata_store::{KvRead, Pages, ScanLimits, StoreError};

/// The page budget of the CLI's read-only walks: 4,096 records or 16 MiB per page.
pub(crate) fn limits() -> Result<ScanLimits, StoreError> {
    ScanLimits::new(4096, 16 << 20)
}

/// Calls `f(key, value)` for every record under `prefix`, in key order, under the
/// read-only oversize rule above.
pub(crate) fn each_record<S: KvRead + ?Sized>(
    store: &S,
    prefix: &[u8],
    limits: ScanLimits,
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<(), StoreError> {
    let mut after: Option<Vec<u8>> = None;
    loop {
        let mut pages = Pages::new(store, prefix, limits).after(after.as_deref());
        let oversize = loop {
            match pages.next() {
                None => return Ok(()),
                Some(Ok(page)) => {
                    for r in &page.records {
                        f(&r.key, &r.value);
                    }
                }
                Some(Err(StoreError::RecordTooLarge { key, .. })) => break key,
                Some(Err(e)) => return Err(e),
            }
        };
        // Read alone; a record deleted since the scan is simply gone.
        if let Some(value) = store.get(&oversize)? {
            f(&oversize, &value);
        }
        after = Some(oversize);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use strata_store::{Batch, KvWrite, MemoryStore, Store};

    /// Records larger than the page budget are read alone, in key order among the others;
    /// the walk neither skips them nor stops; other prefixes are not visited.
    #[test]
    fn oversize_records_are_read_alone_in_order() {
        let store = Store::new(MemoryStore::new());
        let mut b = Batch::new();
        for (k, len) in [
            ("t/a", 4),
            ("t/b", 300),
            ("t/c", 4),
            ("t/d", 4),
            ("t/e", 500),
            ("u/a", 4),
        ] {
            b = b.set(k.as_bytes().to_vec(), vec![b'x'; len]);
        }
        store.apply(b).unwrap();
        let mut seen = Vec::new();
        each_record(&store, b"t/", ScanLimits::new(2, 100).unwrap(), |k, v| {
            seen.push((String::from_utf8(k.to_vec()).unwrap(), v.len()))
        })
        .unwrap();
        let expect: Vec<(String, usize)> = [
            ("t/a", 4),
            ("t/b", 300),
            ("t/c", 4),
            ("t/d", 4),
            ("t/e", 500),
        ]
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
        assert_eq!(seen, expect);
        // An oversize record as the very first one, and nothing else.
        let store = Store::new(MemoryStore::new());
        store
            .apply(Batch::new().set(b"t/big".to_vec(), vec![b'x'; 1000]))
            .unwrap();
        let mut n = 0;
        each_record(&store, b"t/", ScanLimits::new(2, 100).unwrap(), |_, v| {
            assert_eq!(v.len(), 1000);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 1);
    }
}
