//! The one conformance suite every backend must pass (feature `conformance`).
//!
//! Each check is a function generic over a *factory*: a closure that, given an empty
//! scratch directory that lives until the check ends, returns a fresh, empty [`Store`].
//! In-memory backends ignore the directory; on-disk backends open their datastore inside
//! it. Each check panics (test style) when the backend breaks the contract.
//!
//! A backend's conformance tests (`tests/it/conformance.rs`) turn every check into one `#[test]` with the
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
//! compare-and-swap, single-key writes ([`KvWrite::compare_and_swap`]), the one write
//! primitive ([`KvWrite::read_modify_write`]: decisions on values read under the write,
//! refusals and failed guards that write nothing, atomic multi-key transfers) and the
//! in-process write lease.
// A test suite: assertions panic by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::{
    Batch, ConflictReason, KvRead, KvWrite, Record, Result, ScanLimits, ScanPage, Store, StoreError,
};
use std::path::Path;

mod batch;
mod concurrency;
mod key;
mod lease;
mod point;
mod rmw;
mod scan;

pub use batch::{
    atomic_batch, delete_absent_ok, duplicate_key_rejected, failed_precondition_writes_nothing,
    flush, key_length_limit, precondition_absent, precondition_equals,
};
pub use concurrency::{cas_increments_are_not_lost, concurrent_claim_has_one_winner};
pub use key::{
    key_write_compares_and_swaps, key_write_guards_are_checked, key_write_increments_are_not_lost,
};
pub use lease::{
    lease_blocks_writer_on_clone, lease_does_not_block_reads, lease_holder_writes_pass,
    try_lease_fails_while_leased, try_lease_fails_while_write_in_flight,
};
pub use point::{get, prefix_exists};
pub use rmw::{
    rmw_decides_again_on_current_values, rmw_decides_on_current_values,
    rmw_decides_once_when_it_says_so, rmw_refusal_and_failed_guards_write_nothing,
    rmw_transfers_are_atomic,
};
pub use scan::{
    all_ff_prefix, byte_budget, byte_order, cursor_is_exclusive, cursor_not_in_store,
    cursor_outside_prefix, oversize_first_record_rejected, oversize_later_record_ends_page,
    paging_reaches_every_record_once, prefix_boundaries, record_limit, scan_visit_matches_scan,
};

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
            key_length_limit,
            delete_absent_ok,
            flush,
            concurrent_claim_has_one_winner,
            cas_increments_are_not_lost,
            key_write_compares_and_swaps,
            key_write_guards_are_checked,
            key_write_increments_are_not_lost,
            rmw_decides_on_current_values,
            rmw_decides_again_on_current_values,
            rmw_decides_once_when_it_says_so,
            rmw_refusal_and_failed_guards_write_nothing,
            rmw_transfers_are_atomic,
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
