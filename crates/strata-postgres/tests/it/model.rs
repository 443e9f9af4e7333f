//! Random data and random scans: `PgStore` answers exactly like `MemoryStore` (the
//! reference), through both the single-query and the cursor (portal) fetch paths.

use crate::{owner, scratch_table};
use proptest::prelude::*;
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, ScanLimits, StoreError};

/// Keys over a tiny alphabet with the extreme bytes, so prefixes, cursors and `0xFF` runs
/// collide often.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![0x00u8, 0x01, b'a', b'b', 0x7f, 0x80, 0xfe, 0xff]),
        0..5,
    )
}

fn limits() -> impl Strategy<Value = ScanLimits> {
    (
        prop::sample::select(vec![1usize, 2, 3, 7, 1023, 1024, 1025, 5000, usize::MAX]),
        prop::sample::select(vec![1usize, 4, 9, 20, 64, 300, usize::MAX]),
    )
        .prop_map(|(records, bytes)| ScanLimits::new(records, bytes).unwrap())
}

/// The outcome of a scan, comparable across backends.
fn outcome(
    r: Result<strata_store::ScanPage, StoreError>,
) -> Result<strata_store::ScanPage, String> {
    r.map_err(|e| match e {
        StoreError::RecordTooLarge { key, size, limit } => {
            format!("too large {key:?} {size} {limit}")
        }
        other => panic!("unexpected error: {other}"),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    #[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
    fn scans_match_the_memory_model(
        records in prop::collection::btree_map(key(), prop::collection::vec(any::<u8>(), 0..40), 0..60),
        queries in prop::collection::vec((key(), prop::option::of(key()), limits()), 1..12),
    ) {
        let url = crate::pg_url();
        let pg = owner(&url, &scratch_table());
        let mem = MemoryStore::new();
        let mut batch = Batch::new();
        for (k, v) in &records {
            batch = batch.set(k.clone(), v.clone());
        }
        pg.apply(batch.clone()).unwrap();
        mem.apply(batch).unwrap();
        for (prefix, after, limits) in queries {
            // Besides the drawn limits, budgets exactly at, and one byte under, the size
            // of the full page and of its first record: the edges of the byte rule.
            let full = mem
                .scan(&prefix, after.as_deref(), ScanLimits::new(limits.max_records(), usize::MAX).unwrap())
                .unwrap();
            let first = full.records.first().map_or(1, |r| r.size());
            let mut all_limits = vec![limits];
            for bytes in [full.bytes(), full.bytes().saturating_sub(1), first, first.saturating_sub(1)] {
                all_limits.push(ScanLimits::new(limits.max_records(), bytes.max(1)).unwrap());
            }
            for limits in all_limits {
                let want = outcome(mem.scan(&prefix, after.as_deref(), limits));
                let got = outcome(pg.scan(&prefix, after.as_deref(), limits));
                prop_assert_eq!(&got, &want, "prefix {:?} after {:?} {:?}", prefix, after, limits);
            }
            prop_assert_eq!(pg.prefix_exists(&prefix).unwrap(), mem.prefix_exists(&prefix).unwrap());
            prop_assert_eq!(pg.get(&prefix).unwrap(), mem.get(&prefix).unwrap());
        }
    }
}
