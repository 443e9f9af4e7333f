//! Ordering, prefixes, cursors, paging, the record limit and the byte budget of `scan`.

use super::{bkeys, dump, fixture, k, keys, limits, page_through, put, put_all, scan, unbounded};
use crate::{KvRead, Record, ScanLimits, Store, StoreError};
use std::path::Path;

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
