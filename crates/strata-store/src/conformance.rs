//! The one conformance suite every backend must pass (feature `conformance`).
//!
//! Each check is a function generic over a *factory*: a closure that, given an empty
//! scratch directory that lives until the check ends, returns a fresh, empty [`Store`].
//! In-memory backends ignore the directory; on-disk backends open their datastore inside
//! it. Each check panics (test style) when the backend breaks the contract.
//!
//! A backend's `tests/conformance.rs` turns every check into one `#[test]` with the
//! [`conformance_tests!`](crate::conformance_tests) macro:
//!
//! ```
//! # // The macro expands to `#[test]` functions; in a doc example they only compile.
//! use strata_store::{MemoryStore, Store};
//! strata_store::conformance_tests!(|_dir: &std::path::Path| Store::new(MemoryStore::new()));
//! # fn main() {}
//! ```
//!
//! Checks that write run over every write path: ordinary writes through the [`Store`]
//! handle and writes through a held [`WriteLease`](crate::WriteLease).
//!
//! The suite covers: byte order (keys with `0x00`/`0xFF` bytes, prefix boundaries), cursor
//! semantics, record limit, byte budget, oversize records, `prefix_exists`, `get`, atomic
//! batches, preconditions, duplicate keys, deletes of absent keys, `flush`, concurrent
//! compare-and-swap, and the in-process write lease.
// A test suite: assertions panic by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::{
    Backend, Batch, ConflictReason, KvRead, KvWrite, Record, Result, ScanLimits, ScanPage, Store,
    StoreError,
};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

/// Expands into one `#[test]` per conformance check, each calling the check with the
/// given factory expression (evaluated once per test). The factory is anything callable
/// as `Fn(&Path) -> Store` (the path is an empty directory that outlives the store).
///
/// ```
/// use strata_store::{MemoryStore, Store};
/// fn fresh(_dir: &std::path::Path) -> Store {
///     Store::new(MemoryStore::new())
/// }
/// strata_store::conformance_tests!(fresh);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr $(,)?) => {
        $crate::conformance_tests!(@each $factory;
            byte_order,
            prefix_boundaries,
            all_ff_prefix,
            cursor_is_exclusive,
            cursor_not_in_store,
            cursor_outside_prefix,
            paging_reaches_every_record_once,
            record_limit,
            byte_budget,
            oversize_first_record_rejected,
            oversize_later_record_ends_page,
            scan_visit_matches_scan,
            prefix_exists,
            get,
            atomic_batch,
            precondition_equals,
            precondition_absent,
            failed_precondition_writes_nothing,
            duplicate_key_rejected,
            delete_absent_ok,
            flush,
            concurrent_claim_has_one_winner,
            cas_increments_are_not_lost,
            lease_blocks_writer_on_clone,
            lease_does_not_block_reads,
            lease_holder_writes_pass,
            try_lease_fails_while_leased,
            try_lease_fails_while_write_in_flight,
        );
    };
    (@each $factory:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                $crate::conformance::$check($factory);
            }
        )*
    };
}

// ---------------------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------------------

/// A fresh store plus the scratch directory it may live in. Fields drop in order: the
/// store (and with it the backend) before the directory.
struct Fixture {
    store: Store,
    _dir: tempfile::TempDir,
}

fn fixture<F: Fn(&Path) -> Store>(factory: &F) -> Fixture {
    let dir = tempfile::tempdir().expect("create a scratch directory for the store");
    let store = factory(dir.path());
    assert!(
        dump(&store).is_empty(),
        "the factory must return an empty store"
    );
    Fixture { store, _dir: dir }
}

fn limits(max_records: usize, max_bytes: usize) -> ScanLimits {
    ScanLimits::new(max_records, max_bytes).expect("valid limits")
}

/// Limits that never stop a test-sized scan.
fn unbounded() -> ScanLimits {
    limits(usize::MAX, usize::MAX)
}

fn k(ns: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut key = ns.to_vec();
    key.extend_from_slice(rest);
    key
}

fn put(w: &dyn KvWrite, key: &[u8], value: &[u8]) {
    w.apply(Batch::new().set(key.to_vec(), value.to_vec()))
        .expect("plain set");
}

fn put_all(w: &dyn KvWrite, records: &[(Vec<u8>, Vec<u8>)]) {
    let mut batch = Batch::new();
    for (key, value) in records {
        batch = batch.set(key.clone(), value.clone());
    }
    w.apply(batch).expect("load records");
}

fn keys(page: &ScanPage) -> Vec<Vec<u8>> {
    page.records.iter().map(|r| r.key.clone()).collect()
}

fn bkeys(list: &[&[u8]]) -> Vec<Vec<u8>> {
    list.iter().map(|key| key.to_vec()).collect()
}

fn scan(r: &dyn KvRead, prefix: &[u8], after: Option<&[u8]>, l: ScanLimits) -> ScanPage {
    r.scan(prefix, after, l).expect("scan")
}

/// Pages through `prefix` with `l`, checking the paging contract on the way: every page is
/// non-empty, `more` is true on every page but the last, false on the last.
fn page_through(r: &dyn KvRead, prefix: &[u8], l: ScanLimits) -> (Vec<Record>, usize) {
    let mut all = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    let mut pages = 0;
    loop {
        let page = scan(r, prefix, cursor.as_deref(), l);
        pages += 1;
        assert!(
            page.records.len() <= l.max_records(),
            "page exceeds the record limit"
        );
        assert!(
            page.bytes() <= l.max_bytes(),
            "page exceeds the byte budget"
        );
        if page.records.is_empty() {
            assert!(!page.more, "an empty page must not claim more records");
            // Only an empty prefix may yield an empty first page.
            assert!(all.is_empty(), "paging produced an empty trailing page");
            return (all, pages);
        }
        for rec in &page.records {
            assert!(
                rec.key.starts_with(prefix),
                "scan returned a key outside the prefix"
            );
        }
        cursor = page.cursor().map(<[u8]>::to_vec);
        let more = page.more;
        all.extend(page.records);
        if !more {
            return (all, pages);
        }
        assert!(pages <= 100_000, "paging does not terminate");
    }
}

/// Every record in the store, in order.
fn dump(r: &dyn KvRead) -> Vec<Record> {
    page_through(r, b"", limits(1000, 1 << 24)).0
}

fn expect_conflict(result: Result<()>, key: &[u8], reason: ConflictReason) {
    match result {
        Err(StoreError::Conflict {
            key: got,
            reason: why,
        }) => {
            assert_eq!(got, key, "conflict names the wrong key");
            assert_eq!(why, reason, "conflict reports the wrong reason");
        }
        other => panic!("expected a {reason:?} conflict on {key:?}, got {other:?}"),
    }
}

/// Runs `body` over both write paths: ordinary writes through the store, then writes
/// through a held lease. Each run gets its own key namespace.
fn each_write_path(store: &Store, body: impl Fn(&dyn KvWrite, &dyn KvRead, &[u8])) {
    body(store, store, b"store/");
    let lease = store.lease();
    body(&lease, &lease, b"lease/");
}

// ---------------------------------------------------------------------------------------
// Ordering and scans
// ---------------------------------------------------------------------------------------

/// Scans return keys in ascending unsigned byte order, including `0x00` and `0xFF` bytes,
/// for a table prefix and for the empty prefix (the whole store).
pub fn byte_order<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let inside: Vec<&[u8]> = vec![
        b"t/",
        b"t/\x00",
        b"t/\x00\x00",
        b"t/\x00\xff",
        b"t/\x01",
        b"t/A",
        b"t/a",
        b"t/a\x00",
        b"t/a\xff",
        b"t/b",
        b"t/\x7f",
        b"t/\x80",
        b"t/\xfe\xff",
        b"t/\xff",
        b"t/\xff\x00",
        b"t/\xff\xff",
    ];
    let outside: Vec<&[u8]> = vec![
        b"\x00",
        b"s\xff",
        b"t",
        b"t.",
        b"t0",
        b"t\xff",
        b"u",
        b"\xff\xff\xff",
    ];
    // Insert in an order that is neither sorted nor reverse-sorted, one key per batch.
    let mut all: Vec<&[u8]> = inside.iter().chain(outside.iter()).copied().collect();
    all.reverse();
    all.rotate_left(7);
    for (i, key) in all.iter().enumerate() {
        put(&fx.store, key, format!("v{i}").as_bytes());
    }

    let mut want = bkeys(&inside);
    want.sort();
    let page = scan(&fx.store, b"t/", None, unbounded());
    assert_eq!(keys(&page), want, "prefix scan is not in byte order");
    assert!(!page.more);

    let mut want_all = bkeys(&all);
    want_all.sort();
    let everything: Vec<Vec<u8>> = dump(&fx.store).into_iter().map(|r| r.key).collect();
    assert_eq!(
        everything, want_all,
        "whole-store scan is not in byte order"
    );
    assert_eq!(everything.first().map(Vec::as_slice), Some(&b"\x00"[..]));
    assert_eq!(
        everything.last().map(Vec::as_slice),
        Some(&b"\xff\xff\xff"[..])
    );
}

/// A prefix scan includes the key equal to the prefix and `prefix + 0xFF...`, and excludes
/// keys just outside on either side.
pub fn prefix_boundaries<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let keys_in_store: Vec<&[u8]> = vec![
        b"a",
        b"aa",
        b"aa\xff",
        b"aa\xff\xff",
        b"ab",
        b"ab\x00",
        b"ab\x7f",
        b"ab\xff",
        b"ab\xff\xff",
        b"ac",
        b"ac\x00",
        b"b",
    ];
    let records: Vec<(Vec<u8>, Vec<u8>)> = keys_in_store
        .iter()
        .map(|key| (key.to_vec(), b"v".to_vec()))
        .collect();
    put_all(&fx.store, &records);

    let cases: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (
            b"ab",
            vec![b"ab", b"ab\x00", b"ab\x7f", b"ab\xff", b"ab\xff\xff"],
        ),
        (b"ab\xff", vec![b"ab\xff", b"ab\xff\xff"]),
        (b"ab\x00", vec![b"ab\x00"]),
        (b"aa", vec![b"aa", b"aa\xff", b"aa\xff\xff"]),
        (b"a\xff", vec![]),
        (b"ab\x01", vec![]),
        (b"b", vec![b"b"]),
        (b"c", vec![]),
    ];
    for (prefix, want) in cases {
        let page = scan(&fx.store, prefix, None, unbounded());
        assert_eq!(
            keys(&page),
            bkeys(&want),
            "wrong records for prefix {}",
            crate::escape_key(prefix)
        );
        assert!(!page.more, "a complete scan must report no more records");
        // The same through one-record pages.
        let (paged, _) = page_through(&fx.store, prefix, limits(1, usize::MAX));
        let paged: Vec<Vec<u8>> = paged.into_iter().map(|r| r.key).collect();
        assert_eq!(paged, bkeys(&want));
    }
}

/// Prefixes made only of `0xFF` bytes (which have no byte-string successor) scan correctly.
pub fn all_ff_prefix<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let records: Vec<(Vec<u8>, Vec<u8>)> = [
        &b"\xfe"[..],
        b"\xfe\xff",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\xff",
    ]
    .iter()
    .map(|key| (key.to_vec(), b"v".to_vec()))
    .collect();
    put_all(&fx.store, &records);
    let page = scan(&fx.store, b"\xff", None, unbounded());
    assert_eq!(
        keys(&page),
        bkeys(&[b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\xff"])
    );
    let page = scan(&fx.store, b"\xff\xff", None, unbounded());
    assert_eq!(keys(&page), bkeys(&[b"\xff\xff", b"\xff\xff\xff"]));
    let page = scan(&fx.store, b"\xff\xff", Some(b"\xff\xff"), unbounded());
    assert_eq!(keys(&page), bkeys(&[b"\xff\xff\xff"]));
    let page = scan(&fx.store, b"\xff\xff\xff\xff", None, unbounded());
    assert!(page.records.is_empty() && !page.more);
    assert!(fx.store.prefix_exists(b"\xff\xff\xff").unwrap());
    assert!(!fx.store.prefix_exists(b"\xff\xff\xff\xff").unwrap());
}

fn abc_table(store: &Store) {
    put_all(
        store,
        &[
            (b"s/z".to_vec(), b"before".to_vec()),
            (b"t/a".to_vec(), b"1".to_vec()),
            (b"t/b".to_vec(), b"2".to_vec()),
            (b"t/c".to_vec(), b"3".to_vec()),
            (b"u/a".to_vec(), b"after".to_vec()),
        ],
    );
}

/// `after` excludes the cursor key itself.
pub fn cursor_is_exclusive<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    abc_table(&fx.store);
    let cases: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (b"t/a", vec![b"t/b", b"t/c"]),
        (b"t/b", vec![b"t/c"]),
        (b"t/c", vec![]),
    ];
    for (after, want) in cases {
        let page = scan(&fx.store, b"t/", Some(after), unbounded());
        assert_eq!(
            keys(&page),
            bkeys(&want),
            "after {}",
            crate::escape_key(after)
        );
        assert!(!page.more);
    }
    // The values come along with the keys.
    let page = scan(&fx.store, b"t/", Some(b"t/a"), limits(1, usize::MAX));
    assert_eq!(
        page.records,
        vec![Record {
            key: b"t/b".to_vec(),
            value: b"2".to_vec()
        }]
    );
    assert!(page.more);
}

/// A cursor that is not a key in the store resumes at the next greater key.
pub fn cursor_not_in_store<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    abc_table(&fx.store);
    let cases: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (b"t/", vec![b"t/a", b"t/b", b"t/c"]),
        (b"t/\x00", vec![b"t/a", b"t/b", b"t/c"]),
        (b"t/a\x00", vec![b"t/b", b"t/c"]),
        (b"t/aa", vec![b"t/b", b"t/c"]),
        (b"t/a\xff\xff", vec![b"t/b", b"t/c"]),
        (b"t/bb", vec![b"t/c"]),
        (b"t/d", vec![]),
        (b"t/\xff", vec![]),
    ];
    for (after, want) in cases {
        let page = scan(&fx.store, b"t/", Some(after), unbounded());
        assert_eq!(
            keys(&page),
            bkeys(&want),
            "after {}",
            crate::escape_key(after)
        );
        assert!(!page.more);
    }
}

/// A cursor before the prefix starts at the beginning of the prefix; a cursor after it
/// yields an empty page without `more`.
pub fn cursor_outside_prefix<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    abc_table(&fx.store);
    for after in [&b""[..], b"\x00", b"s/z", b"t", b"t.", b"t/"] {
        let page = scan(&fx.store, b"t/", Some(after), unbounded());
        assert_eq!(
            keys(&page),
            bkeys(&[b"t/a", b"t/b", b"t/c"]),
            "after {}",
            crate::escape_key(after)
        );
    }
    for after in [&b"t0"[..], b"u", b"u/a", b"\xff"] {
        let page = scan(&fx.store, b"t/", Some(after), unbounded());
        assert!(
            page.records.is_empty() && !page.more,
            "after {} must yield nothing",
            crate::escape_key(after)
        );
    }
}

fn mixed_table() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut records = Vec::new();
    for i in 0u8..25 {
        let mut key = b"p/".to_vec();
        key.push(i.wrapping_mul(37)); // spreads over 0x00..0xFF, includes 0x00
        key.extend(std::iter::repeat_n(0xff, usize::from(i % 3)));
        let value = vec![i; usize::from(i % 7) * 3];
        records.push((key, value));
    }
    records.push((b"p/\xff\xff\xff\xff".to_vec(), b"last".to_vec()));
    records.sort();
    records.dedup_by(|a, b| a.0 == b.0);
    records
}

/// Paging through a table with small record limits and byte budgets reaches every record
/// exactly once, in order, and the page count shows no empty trailing page.
pub fn paging_reaches_every_record_once<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let records = mixed_table();
    put_all(&fx.store, &records);
    // Neighbours outside the prefix must not leak in.
    put_all(
        &fx.store,
        &[
            (b"p".to_vec(), b"x".to_vec()),
            (b"p.".to_vec(), b"x".to_vec()),
            (b"q/".to_vec(), b"x".to_vec()),
            (b"o/\xff".to_vec(), b"x".to_vec()),
        ],
    );
    let want: Vec<Record> = records
        .iter()
        .map(|(key, value)| Record {
            key: key.clone(),
            value: value.clone(),
        })
        .collect();
    let n = want.len();
    let biggest = want.iter().map(Record::size).max().unwrap();

    for max_records in [1, 2, 3, n - 1, n, n + 1] {
        let (got, pages) = page_through(&fx.store, b"p/", limits(max_records, usize::MAX));
        assert_eq!(got, want, "paging with record limit {max_records}");
        assert_eq!(
            pages,
            n.div_ceil(max_records),
            "page count, limit {max_records}"
        );
    }
    for max_bytes in [biggest, biggest + 1, 2 * biggest - 1, 3 * biggest] {
        let (got, _) = page_through(&fx.store, b"p/", ScanLimits::bytes(max_bytes).unwrap());
        assert_eq!(got, want, "paging with byte budget {max_bytes}");
        let (got, _) = page_through(&fx.store, b"p/", limits(2, max_bytes));
        assert_eq!(got, want, "paging with 2 records / {max_bytes} bytes");
    }
}

/// A page holds at most `max_records`; `more` tells whether records remain.
pub fn record_limit<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let records: Vec<(Vec<u8>, Vec<u8>)> =
        (0u8..5).map(|i| (k(b"r/", &[b'a' + i]), vec![i])).collect();
    put_all(&fx.store, &records);
    put(&fx.store, b"r0", b"outside");

    let page = scan(&fx.store, b"r/", None, limits(3, usize::MAX));
    assert_eq!(keys(&page), bkeys(&[b"r/a", b"r/b", b"r/c"]));
    assert!(page.more);
    let page = scan(&fx.store, b"r/", None, limits(5, usize::MAX));
    assert_eq!(page.records.len(), 5);
    assert!(!page.more, "exactly the remaining records: no more");
    let page = scan(&fx.store, b"r/", None, limits(6, usize::MAX));
    assert_eq!(page.records.len(), 5);
    assert!(!page.more);
    let page = scan(&fx.store, b"r/", Some(b"r/c"), limits(1, usize::MAX));
    assert_eq!(keys(&page), bkeys(&[b"r/d"]));
    assert!(page.more);
    let page = scan(&fx.store, b"r/", Some(b"r/d"), limits(1, usize::MAX));
    assert_eq!(keys(&page), bkeys(&[b"r/e"]));
    assert!(!page.more, "the last record of the prefix: no more");
}

/// The byte budget (keys + values) stops the page before the record that would overflow,
/// takes an exact fit, always takes a fitting first record, and sets `more` correctly.
pub fn byte_budget<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    // Four records of exactly 10 bytes each (3-byte key + 7-byte value).
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0u8..4)
        .map(|i| (k(b"b/", &[b'0' + i]), vec![b'x'; 7]))
        .collect();
    put_all(&fx.store, &records);

    let cases = [
        (9, None),
        (10, Some((1, true))),
        (19, Some((1, true))),
        (20, Some((2, true))),
        (25, Some((2, true))),
        (30, Some((3, true))),
        (39, Some((3, true))),
        (40, Some((4, false))),
        (41, Some((4, false))),
    ];
    for (budget, want) in cases {
        let result = fx
            .store
            .scan(b"b/", None, ScanLimits::bytes(budget).unwrap());
        match want {
            None => assert!(
                matches!(result, Err(StoreError::RecordTooLarge { size: 10, limit, .. }) if limit == budget),
                "budget {budget}: expected RecordTooLarge, got {result:?}"
            ),
            Some((count, more)) => {
                let page = result.unwrap();
                assert_eq!(page.records.len(), count, "budget {budget}");
                assert_eq!(page.more, more, "budget {budget}: more flag");
                assert_eq!(page.bytes(), count * 10);
            }
        }
    }

    // Sizes 4, 10, 3 under a 12-byte budget: the page stops before the 10-byte record and
    // does not skip ahead to the 3-byte one that would still fit.
    put_all(
        &fx.store,
        &[
            (b"m/a".to_vec(), b"1".to_vec()),
            (b"m/b".to_vec(), b"1234567".to_vec()),
            (b"m/c".to_vec(), b"".to_vec()),
        ],
    );
    let page = scan(&fx.store, b"m/", None, ScanLimits::bytes(12).unwrap());
    assert_eq!(keys(&page), bkeys(&[b"m/a"]));
    assert!(page.more);
    let page = scan(
        &fx.store,
        b"m/",
        Some(b"m/a"),
        ScanLimits::bytes(12).unwrap(),
    );
    assert_eq!(keys(&page), bkeys(&[b"m/b"]));
    assert!(page.more);
    let page = scan(
        &fx.store,
        b"m/",
        Some(b"m/b"),
        ScanLimits::bytes(12).unwrap(),
    );
    assert_eq!(keys(&page), bkeys(&[b"m/c"]));
    assert_eq!(page.records[0].value, b"");
    assert!(!page.more);
    // Both limits at once: whichever is hit first wins.
    let page = scan(&fx.store, b"b/", None, limits(2, 35));
    assert_eq!(page.records.len(), 2);
    assert!(page.more);
    let page = scan(&fx.store, b"b/", None, limits(3, 25));
    assert_eq!(page.records.len(), 2);
    assert!(page.more);
}

/// A first record larger than the budget alone is `RecordTooLarge` (naming its key and
/// size), not an empty page; the same record scans with a budget that fits it.
pub fn oversize_first_record_rejected<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    put_all(
        &fx.store,
        &[
            (b"o/a".to_vec(), vec![7u8; 20]),
            (b"o/b".to_vec(), b"1".to_vec()),
        ],
    );
    let result = fx.store.scan(b"o/", None, ScanLimits::bytes(22).unwrap());
    match result {
        Err(StoreError::RecordTooLarge { key, size, limit }) => {
            assert_eq!(key, b"o/a");
            assert_eq!(size, 23);
            assert_eq!(limit, 22);
        }
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    // With the record limit at 1 the error is the same: size is checked first.
    assert!(matches!(
        fx.store.scan(b"o/", None, limits(1, 22)),
        Err(StoreError::RecordTooLarge { .. })
    ));
    // The error wrote nothing and the records are intact.
    assert_eq!(fx.store.get(b"o/a").unwrap(), Some(vec![7u8; 20]));
    let page = scan(&fx.store, b"o/", None, ScanLimits::bytes(23).unwrap());
    assert_eq!(keys(&page), bkeys(&[b"o/a"]));
    assert!(page.more);
    // Skipping past it with the cursor works.
    let page = scan(
        &fx.store,
        b"o/",
        Some(b"o/a"),
        ScanLimits::bytes(22).unwrap(),
    );
    assert_eq!(keys(&page), bkeys(&[b"o/b"]));
    assert!(!page.more);
}

/// An oversize record that is not first ends the page before it (`more` set); the next
/// page, starting at it, reports `RecordTooLarge`.
pub fn oversize_later_record_ends_page<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    put_all(
        &fx.store,
        &[
            (b"o/a".to_vec(), b"12".to_vec()),
            (b"o/b".to_vec(), vec![1u8; 100]),
            (b"o/c".to_vec(), b"34".to_vec()),
        ],
    );
    let budget = ScanLimits::bytes(50).unwrap();
    let page = scan(&fx.store, b"o/", None, budget);
    assert_eq!(keys(&page), bkeys(&[b"o/a"]));
    assert!(page.more, "the page ended early: more must be set");
    match fx.store.scan(b"o/", page.cursor(), budget) {
        Err(StoreError::RecordTooLarge { key, size, limit }) => {
            assert_eq!(key, b"o/b");
            assert_eq!(size, 103);
            assert_eq!(limit, 50);
        }
        other => panic!("expected RecordTooLarge for o/b, got {other:?}"),
    }
    let page = scan(&fx.store, b"o/", Some(b"o/b"), budget);
    assert_eq!(keys(&page), bkeys(&[b"o/c"]));
    assert!(!page.more);
}

/// `scan_visit` hands over exactly the records `scan` returns (same order, limits,
/// `more`, `RecordTooLarge`), and `Visit::Stop` ends the page after the record it saw.
pub fn scan_visit_matches_scan<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let records = mixed_table();
    put_all(&fx.store, &records);
    put_all(
        &fx.store,
        &[
            (b"p".to_vec(), b"x".to_vec()),
            (b"q/".to_vec(), b"x".to_vec()),
            (b"p/big".to_vec(), vec![9u8; 300]),
        ],
    );
    let visit_page = |after: Option<&[u8]>, lim: ScanLimits| {
        let mut got = Vec::new();
        let end = fx
            .store
            .scan_visit(b"p/", after, lim, &mut |key: &[u8], value: &[u8]| {
                got.push(Record {
                    key: key.to_vec(),
                    value: value.to_vec(),
                });
                crate::Visit::Continue
            });
        end.map(|end| (got, end))
    };
    let all = scan(&fx.store, b"p/", None, unbounded());
    let mut cursors: Vec<Option<Vec<u8>>> = vec![None];
    cursors.extend(all.records.iter().map(|r| Some(r.key.clone())));
    for after in &cursors {
        for lim in [
            unbounded(),
            limits(1, usize::MAX),
            limits(3, usize::MAX),
            limits(usize::MAX, 40),
            limits(2, 120),
            limits(usize::MAX, 200),
        ] {
            let want = fx.store.scan(b"p/", after.as_deref(), lim);
            let got = visit_page(after.as_deref(), lim);
            match (want, got) {
                (Ok(page), Ok((records, end))) => {
                    assert_eq!(records, page.records, "after {after:?}, {lim:?}");
                    assert_eq!(end.records, page.records.len());
                    assert_eq!(end.more, page.more, "more, after {after:?}, {lim:?}");
                }
                (
                    Err(StoreError::RecordTooLarge { key, size, limit }),
                    Err(StoreError::RecordTooLarge {
                        key: k2,
                        size: s2,
                        limit: l2,
                    }),
                ) => assert_eq!((key, size, limit), (k2, s2, l2)),
                (want, got) => panic!("after {after:?}, {lim:?}: scan {want:?}, visit {got:?}"),
            }
        }
    }
    // Stop after the second record: two taken, more set.
    let mut seen = 0;
    let end = fx
        .store
        .scan_visit(b"p/", None, unbounded(), &mut |_: &[u8], _: &[u8]| {
            seen += 1;
            if seen == 2 {
                crate::Visit::Stop
            } else {
                crate::Visit::Continue
            }
        })
        .unwrap();
    assert_eq!((seen, end.records, end.more), (2, 2, true));
}

// ---------------------------------------------------------------------------------------
// Point reads
// ---------------------------------------------------------------------------------------

/// `prefix_exists` is true exactly when some key starts with the prefix.
pub fn prefix_exists<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let s = &fx.store;
    assert!(!s.prefix_exists(b"").unwrap(), "empty store has no keys");
    assert!(!s.prefix_exists(b"a").unwrap());
    put(s, b"ab", b"");
    put(s, b"\xff", b"v");
    for (prefix, want) in [
        (&b""[..], true),
        (b"a", true),
        (b"ab", true),
        (b"ab\x00", false),
        (b"abc", false),
        (b"aa", false),
        (b"a\xff", false),
        (b"b", false),
        (b"\xff", true),
        (b"\xff\x00", false),
        (b"\xff\xff", false),
    ] {
        assert_eq!(
            s.prefix_exists(prefix).unwrap(),
            want,
            "prefix_exists({})",
            crate::escape_key(prefix)
        );
    }
    s.apply(Batch::new().delete(b"ab".to_vec())).unwrap();
    assert!(!s.prefix_exists(b"a").unwrap(), "deleted key still counted");
    assert!(s.prefix_exists(b"").unwrap());
}

/// `get` returns the current value; an empty value is present, not absent.
pub fn get<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let s = &fx.store;
    assert_eq!(s.get(b"g/a").unwrap(), None);
    put(s, b"g/a", b"1");
    assert_eq!(s.get(b"g/a").unwrap(), Some(b"1".to_vec()));
    put(s, b"g/a", b"2");
    assert_eq!(s.get(b"g/a").unwrap(), Some(b"2".to_vec()), "overwrite");
    put(s, b"g/empty", b"");
    assert_eq!(s.get(b"g/empty").unwrap(), Some(Vec::new()));
    let binary_key = b"g/\x00\xff\x00".to_vec();
    let binary_value: Vec<u8> = (0..=255u8).collect();
    put(s, &binary_key, &binary_value);
    assert_eq!(s.get(&binary_key).unwrap(), Some(binary_value));
    assert_eq!(
        s.get(b"g/\x00\xff").unwrap(),
        None,
        "a prefix of a key is not the key"
    );
    assert_eq!(s.get(b"g/\x00\xff\x00\x00").unwrap(), None);
    let big = vec![0xabu8; 256 * 1024];
    put(s, b"g/big", &big);
    assert_eq!(s.get(b"g/big").unwrap(), Some(big));
    s.apply(Batch::new().delete(b"g/a".to_vec())).unwrap();
    assert_eq!(s.get(b"g/a").unwrap(), None);
}

// ---------------------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------------------

/// A batch of sets and deletes is applied as a whole (plain and with preconditions).
pub fn atomic_batch<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put_all(
            w,
            &[(k(ns, b"a"), b"1".to_vec()), (k(ns, b"b"), b"2".to_vec())],
        );
        w.apply(
            Batch::new()
                .set(k(ns, b"a"), b"10".to_vec())
                .delete(k(ns, b"b"))
                .set(k(ns, b"c"), b"3".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&k(ns, b"a")).unwrap(), Some(b"10".to_vec()));
        assert_eq!(r.get(&k(ns, b"b")).unwrap(), None);
        assert_eq!(r.get(&k(ns, b"c")).unwrap(), Some(b"3".to_vec()));
        // The same through the conditional path.
        w.apply(
            Batch::new()
                .require_eq(k(ns, b"a"), b"10".to_vec())
                .delete(k(ns, b"a"))
                .set(k(ns, b"d"), b"4".to_vec())
                .set(k(ns, b"c"), b"30".to_vec()),
        )
        .unwrap();
        let page = scan(r, ns, None, unbounded());
        assert_eq!(keys(&page), vec![k(ns, b"c"), k(ns, b"d")]);
        assert_eq!(page.records[0].value, b"30");
        assert_eq!(page.records[1].value, b"4");
        // An empty batch is a no-op.
        w.apply(Batch::new()).unwrap();
        assert_eq!(scan(r, ns, None, unbounded()), page);
    });
}

/// `require_eq` passes when the key holds exactly the value; fails with `Changed` when it
/// holds another and `Missing` when it is absent.
pub fn precondition_equals<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let key = k(ns, b"cas");
        put(w, &key, b"v1");
        // Compare-and-swap succeeds.
        w.apply(
            Batch::new()
                .require_eq(key.clone(), b"v1".to_vec())
                .set(key.clone(), b"v2".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
        // A stale compare-and-swap fails and writes nothing.
        expect_conflict(
            w.apply(
                Batch::new()
                    .require_eq(key.clone(), b"v1".to_vec())
                    .set(key.clone(), b"v3".to_vec()),
            ),
            &key,
            ConflictReason::Changed,
        );
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
        // A value that is a prefix of the current one is not equal.
        expect_conflict(
            w.apply(Batch::new().require_eq(key.clone(), b"v".to_vec())),
            &key,
            ConflictReason::Changed,
        );
        // An empty expected value does not match an absent key.
        let missing = k(ns, b"missing");
        expect_conflict(
            w.apply(
                Batch::new()
                    .require_eq(missing.clone(), Vec::new())
                    .set(missing.clone(), b"x".to_vec()),
            ),
            &missing,
            ConflictReason::Missing,
        );
        assert_eq!(r.get(&missing).unwrap(), None);
        // ... but does match a present empty value.
        put(w, &missing, b"");
        w.apply(
            Batch::new()
                .require(missing.clone(), Some(Vec::new()))
                .set(missing.clone(), b"x".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&missing).unwrap(), Some(b"x".to_vec()));
        // A precondition on one key guarding writes to others (optimistic locking).
        let other = k(ns, b"other");
        w.apply(
            Batch::new()
                .require_eq(key.clone(), b"v2".to_vec())
                .set(other.clone(), b"guarded".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&other).unwrap(), Some(b"guarded".to_vec()));
        assert_eq!(r.get(&key).unwrap(), Some(b"v2".to_vec()));
    });
}

/// `require_absent` passes when the key is absent and fails with `Present` otherwise
/// (also when it holds an empty value).
pub fn precondition_absent<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let key = k(ns, b"claim");
        w.apply(
            Batch::new()
                .require_absent(key.clone())
                .set(key.clone(), b"first".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"first".to_vec()));
        expect_conflict(
            w.apply(
                Batch::new()
                    .require(key.clone(), None)
                    .set(key.clone(), b"second".to_vec()),
            ),
            &key,
            ConflictReason::Present,
        );
        assert_eq!(r.get(&key).unwrap(), Some(b"first".to_vec()));
        let empty = k(ns, b"empty");
        put(w, &empty, b"");
        expect_conflict(
            w.apply(Batch::new().require_absent(empty.clone())),
            &empty,
            ConflictReason::Present,
        );
        // After a delete the key is absent again.
        w.apply(Batch::new().delete(key.clone())).unwrap();
        w.apply(
            Batch::new()
                .require_absent(key.clone())
                .set(key.clone(), b"again".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&key).unwrap(), Some(b"again".to_vec()));
        // A precondition-only batch that holds writes nothing and succeeds.
        w.apply(Batch::new().require_absent(k(ns, b"nobody")))
            .unwrap();
        assert_eq!(r.get(&k(ns, b"nobody")).unwrap(), None);
    });
}

/// A batch whose precondition fails writes nothing at all — not the mutations added
/// before the precondition, not those after — and names the failing key and reason.
pub fn failed_precondition_writes_nothing<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put_all(
            w,
            &[
                (k(ns, b"a"), b"1".to_vec()),
                (k(ns, b"b"), b"2".to_vec()),
                (k(ns, b"guard"), b"g1".to_vec()),
            ],
        );
        let before = dump(r);
        let mut batch = Batch::new()
            .set(k(ns, b"a"), b"changed".to_vec())
            .delete(k(ns, b"b"))
            .set(k(ns, b"new"), b"n".to_vec());
        // The first precondition holds, the second does not.
        batch.push_precondition(crate::Precondition::Absent {
            key: k(ns, b"free"),
        });
        batch.push_precondition(crate::Precondition::Equals {
            key: k(ns, b"guard"),
            value: b"g0".to_vec(),
        });
        let batch = batch.set(k(ns, b"later"), b"l".to_vec());
        expect_conflict(w.apply(batch), &k(ns, b"guard"), ConflictReason::Changed);
        assert_eq!(dump(r), before, "a failed batch changed the store");

        // The first failing precondition (in order) is the one reported.
        let result = w.apply(
            Batch::new()
                .require_absent(k(ns, b"a"))
                .require_absent(k(ns, b"b"))
                .set(k(ns, b"x"), b"x".to_vec()),
        );
        expect_conflict(result, &k(ns, b"a"), ConflictReason::Present);
        assert_eq!(dump(r), before);
    });
}

/// A batch that writes one key twice is refused with `DuplicateKey` and writes nothing.
pub fn duplicate_key_rejected<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        put(w, &k(ns, b"d"), b"0");
        let before = dump(r);
        let dup = k(ns, b"d");
        let batches = [
            Batch::new()
                .set(k(ns, b"first"), b"1".to_vec())
                .set(dup.clone(), b"1".to_vec())
                .set(dup.clone(), b"2".to_vec()),
            Batch::new()
                .set(dup.clone(), b"1".to_vec())
                .delete(dup.clone())
                .set(k(ns, b"last"), b"1".to_vec()),
            Batch::new().delete(dup.clone()).delete(dup.clone()),
            // Through the conditional path too (with a precondition that holds).
            Batch::new()
                .require_eq(dup.clone(), b"0".to_vec())
                .set(k(ns, b"first"), b"1".to_vec())
                .set(dup.clone(), b"1".to_vec())
                .delete(dup.clone()),
        ];
        for batch in batches {
            match w.apply(batch) {
                Err(StoreError::DuplicateKey { key }) => assert_eq!(key, dup),
                other => panic!("expected DuplicateKey, got {other:?}"),
            }
            assert_eq!(dump(r), before, "a refused batch changed the store");
        }
        // A precondition and a mutation on the same key are not duplicates.
        w.apply(
            Batch::new()
                .require_eq(dup.clone(), b"0".to_vec())
                .set(dup.clone(), b"1".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&dup).unwrap(), Some(b"1".to_vec()));
    });
}

/// Deleting an absent key is not an error (plain and conditional batches).
pub fn delete_absent_ok<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        w.apply(Batch::new().delete(k(ns, b"never"))).unwrap();
        w.apply(
            Batch::new()
                .require_absent(k(ns, b"never"))
                .delete(k(ns, b"never"))
                .set(k(ns, b"x"), b"1".to_vec()),
        )
        .unwrap();
        assert_eq!(r.get(&k(ns, b"never")).unwrap(), None);
        assert_eq!(r.get(&k(ns, b"x")).unwrap(), Some(b"1".to_vec()));
        assert!(!r.prefix_exists(&k(ns, b"never")).unwrap());
    });
}

/// `flush` succeeds on an empty store, after writes, and through a lease; data stays.
pub fn flush<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    fx.store.flush().unwrap();
    each_write_path(&fx.store, |w, r, ns| {
        put(w, &k(ns, b"f"), b"durable");
        w.flush().unwrap();
        w.flush().unwrap();
        assert_eq!(r.get(&k(ns, b"f")).unwrap(), Some(b"durable".to_vec()));
    });
}

// ---------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------

const THREADS: usize = 4;

/// Threads racing to claim one key with `require_absent`: exactly one wins, every other
/// gets a `Present` conflict.
pub fn concurrent_claim_has_one_winner<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let store = fx.store.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                store.apply(
                    Batch::new()
                        .require_absent(b"claim".to_vec())
                        .set(b"claim".to_vec(), vec![i as u8])
                        .set(k(b"claimed-by/", &[i as u8]), b"1".to_vec()),
                )
            })
        })
        .collect();
    let results: Vec<Result<()>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<usize> = (0..THREADS).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one claim must win: {results:?}");
    for (i, result) in results.into_iter().enumerate() {
        if i != winners[0] {
            expect_conflict(result, b"claim", ConflictReason::Present);
        }
    }
    assert_eq!(
        fx.store.get(b"claim").unwrap(),
        Some(vec![winners[0] as u8])
    );
    let page = scan(&fx.store, b"claimed-by/", None, unbounded());
    assert_eq!(keys(&page), vec![k(b"claimed-by/", &[winners[0] as u8])]);
}

/// Compare-and-swap increments from several threads lose no update.
pub fn cas_increments_are_not_lost<F: Fn(&Path) -> Store>(factory: F) {
    const PER_THREAD: u64 = 25;
    let fx = fixture(&factory);
    put(&fx.store, b"counter", &0u64.to_be_bytes());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = fx.store.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let mut conflicts = 0u64;
                for _ in 0..PER_THREAD {
                    loop {
                        let current = store.get(b"counter").unwrap().unwrap();
                        let n = u64::from_be_bytes(current.as_slice().try_into().unwrap());
                        let result = store.apply(
                            Batch::new()
                                .require_eq(b"counter".to_vec(), current)
                                .set(b"counter".to_vec(), (n + 1).to_be_bytes().to_vec()),
                        );
                        match result {
                            Ok(()) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(other) => panic!("unexpected error: {other}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = fx.store.get(b"counter").unwrap().unwrap();
    assert_eq!(
        u64::from_be_bytes(total.as_slice().try_into().unwrap()),
        THREADS as u64 * PER_THREAD,
        "lost updates"
    );
}

// ---------------------------------------------------------------------------------------
// The write lease
// ---------------------------------------------------------------------------------------

/// Starts a writer thread that applies `set key=value` through `store` and reports the
/// result on the returned channel. Returns after the writer has signalled it started and
/// is parked at the write gate (fails if it completes instead).
fn start_blocked_writer(
    store: &Store,
    key: &[u8],
    value: &[u8],
) -> (Receiver<Result<()>>, thread::JoinHandle<()>) {
    let writer = store.clone();
    let (started_tx, started_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let batch = Batch::new().set(key.to_vec(), value.to_vec());
    let before = store.waiting_writers();
    let handle = thread::spawn(move || {
        started_tx.send(()).unwrap();
        let result = writer.apply(batch);
        // The receiver may be gone if the test already failed.
        let _ = done_tx.send(result);
    });
    started_rx.recv().unwrap();
    while store.waiting_writers() == before {
        match done_rx.try_recv() {
            Ok(result) => panic!("the writer was not blocked by the lease: {result:?}"),
            Err(TryRecvError::Disconnected) => panic!("the writer thread died"),
            Err(TryRecvError::Empty) => thread::yield_now(),
        }
    }
    (done_rx, handle)
}

/// A writer on a clone blocks while the lease is held and proceeds once it is dropped.
pub fn lease_blocks_writer_on_clone<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let store = &fx.store;
    assert_eq!(store.waiting_writers(), 0);
    let lease = store.lease();
    assert!(store.is_leased());
    let (done, handle) = start_blocked_writer(store, b"w/blocked", b"1");
    assert_eq!(store.waiting_writers(), 1);
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));
    assert_eq!(
        store.get(b"w/blocked").unwrap(),
        None,
        "blocked write landed"
    );
    // The holder still writes meanwhile.
    lease
        .apply(Batch::new().set(b"w/holder".to_vec(), b"h".to_vec()))
        .unwrap();
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));

    drop(lease);
    done.recv().unwrap().unwrap();
    handle.join().unwrap();
    assert!(!store.is_leased());
    assert_eq!(store.waiting_writers(), 0);
    assert_eq!(store.get(b"w/blocked").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get(b"w/holder").unwrap(), Some(b"h".to_vec()));
}

/// Reads through a clone on another thread proceed while the lease is held (even with a
/// writer parked behind it).
pub fn lease_does_not_block_reads<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    put(&fx.store, b"r/a", b"1");
    let lease = fx.store.lease();
    let (done, writer) = start_blocked_writer(&fx.store, b"r/b", b"2");

    let reader = fx.store.clone();
    let read = thread::spawn(move || {
        let value = reader.get(b"r/a").unwrap();
        let page = reader.scan(b"r/", None, unbounded()).unwrap();
        let exists = reader.prefix_exists(b"r/").unwrap();
        let leased = reader.is_leased();
        (value, page, exists, leased)
    });
    let (value, page, exists, leased) = read.join().unwrap();
    assert_eq!(value, Some(b"1".to_vec()));
    assert_eq!(
        keys(&page),
        bkeys(&[b"r/a"]),
        "the parked write must not be visible"
    );
    assert!(exists);
    assert!(leased);
    assert!(matches!(done.try_recv(), Err(TryRecvError::Empty)));

    drop(lease);
    done.recv().unwrap().unwrap();
    writer.join().unwrap();
    assert_eq!(fx.store.get(b"r/b").unwrap(), Some(b"2".to_vec()));
}

/// The holder's writes go through: via the [`WriteLease`](crate::WriteLease), via its
/// [`store`](crate::WriteLease::store), and via any clone of the [`Store`] from the
/// holder's thread. Conditional batches keep their meaning under the lease.
pub fn lease_holder_writes_pass<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let clone = fx.store.clone();
    let lease = fx.store.lease();
    lease
        .apply(Batch::new().set(b"h/lease".to_vec(), b"1".to_vec()))
        .unwrap();
    lease
        .store()
        .apply(Batch::new().set(b"h/lease-store".to_vec(), b"2".to_vec()))
        .unwrap();
    fx.store
        .apply(Batch::new().set(b"h/store".to_vec(), b"3".to_vec()))
        .unwrap();
    clone
        .apply(Batch::new().set(b"h/clone".to_vec(), b"4".to_vec()))
        .unwrap();
    expect_conflict(
        lease.apply(
            Batch::new()
                .require_absent(b"h/lease".to_vec())
                .set(b"h/never".to_vec(), b"x".to_vec()),
        ),
        b"h/lease",
        ConflictReason::Present,
    );
    lease.flush().unwrap();
    assert_eq!(lease.get(b"h/never").unwrap(), None);
    let page = lease.scan(b"h/", None, unbounded()).unwrap();
    assert_eq!(
        keys(&page),
        bkeys(&[b"h/clone", b"h/lease", b"h/lease-store", b"h/store"])
    );
    assert!(lease.prefix_exists(b"h/").unwrap());
    assert!(fx.store.is_leased());
    drop(lease);
    assert!(!fx.store.is_leased());
    assert_eq!(clone.get(b"h/store").unwrap(), Some(b"3".to_vec()));
}

/// `try_lease` fails while another lease is held (from any thread) and succeeds after it
/// is dropped; a failed attempt leaves ordinary writes unblocked.
pub fn try_lease_fails_while_leased<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let lease = fx.store.try_lease().expect("a free store can be leased");
    assert!(
        fx.store.try_lease().is_none(),
        "second lease on the same thread"
    );
    let other = fx.store.clone();
    let from_other_thread = thread::spawn(move || other.try_lease().is_none())
        .join()
        .unwrap();
    assert!(from_other_thread, "second lease from another thread");
    drop(lease);
    let again = fx.store.try_lease().expect("lease is free after drop");
    drop(again);
    // Failed attempts must not leave the gate closed to ordinary writers.
    let writer = fx.store.clone();
    thread::spawn(move || writer.apply(Batch::new().set(b"t/ok".to_vec(), b"1".to_vec())))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(fx.store.get(b"t/ok").unwrap(), Some(b"1".to_vec()));
    assert_eq!(fx.store.waiting_writers(), 0);
}

/// A backend wrapper whose `apply` signals when it starts and then waits for permission,
/// to hold a write "in flight" deterministically.
#[derive(Debug)]
struct PausingBackend {
    inner: Arc<dyn Backend>,
    entered: Mutex<Sender<()>>,
    resume: Mutex<Receiver<()>>,
}

impl KvRead for PausingBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        self.inner.scan(prefix, after, limits)
    }
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        self.inner.prefix_exists(prefix)
    }
}

impl KvWrite for PausingBackend {
    fn apply(&self, batch: Batch) -> Result<()> {
        self.entered.lock().unwrap().send(()).unwrap();
        self.resume.lock().unwrap().recv().unwrap();
        self.inner.apply(batch)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

impl Backend for PausingBackend {
    fn name(&self) -> &'static str {
        "pausing"
    }
}

/// `try_lease` fails while an ordinary write is in flight and succeeds once it finished.
pub fn try_lease_fails_while_write_in_flight<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let paused = Store::from_arc(Arc::new(PausingBackend {
        inner: fx.store.unguarded_backend(),
        entered: Mutex::new(entered_tx),
        resume: Mutex::new(resume_rx),
    }));
    let writer = paused.clone();
    let handle = thread::spawn(move || {
        writer.apply(Batch::new().set(b"f/inflight".to_vec(), b"1".to_vec()))
    });
    entered_rx.recv().unwrap(); // the write is inside the gate now
    assert!(
        paused.try_lease().is_none(),
        "leased over an in-flight write"
    );
    assert!(!paused.is_leased());
    resume_tx.send(()).unwrap();
    handle.join().unwrap().unwrap();
    assert_eq!(fx.store.get(b"f/inflight").unwrap(), Some(b"1".to_vec()));

    // The failed attempt left the gate open: another write passes (permission granted in
    // advance), and then the lease can be taken.
    resume_tx.send(()).unwrap();
    paused
        .apply(Batch::new().set(b"f/after".to_vec(), b"2".to_vec()))
        .unwrap();
    entered_rx.recv().unwrap();
    let lease = paused.try_lease().expect("no write in flight any more");
    assert!(paused.is_leased());
    drop(lease);
    assert_eq!(fx.store.get(b"f/after").unwrap(), Some(b"2".to_vec()));
}
