//! Property test: `MemoryStore` behind a `Store` handle against a `BTreeMap` model, over
//! random conditional batches, point reads and paged scans with random limits.

use proptest::prelude::*;
use std::collections::{BTreeMap, HashSet};
use strata_store::{
    Batch, ConflictReason, KvRead, KvWrite, MemoryStore, ScanLimits, Store, StoreError,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys from a tiny alphabet rich in boundary bytes, so prefixes, cursors and keys collide.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![0x00u8, 0x01, b'a', b'b', 0xfe, 0xff]),
        1..4,
    )
}

fn prefix() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0x00u8, b'a', 0xff]), 0..3)
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..12)
}

#[derive(Debug, Clone)]
enum Expect {
    /// Whatever the key holds when the batch is applied (so most of these pass).
    Current,
    Absent,
    Equals(Vec<u8>),
}

#[derive(Debug, Clone)]
enum Op {
    Apply {
        mutations: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        preconditions: Vec<(Vec<u8>, Expect)>,
    },
    Get(Vec<u8>),
    PrefixExists(Vec<u8>),
    /// Page through `prefix` from `after`, page i using `limits[i % len]`.
    Scan {
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limits: Vec<(usize, usize)>,
    },
}

fn expect() -> impl Strategy<Value = Expect> {
    prop_oneof![
        3 => Just(Expect::Current),
        1 => Just(Expect::Absent),
        1 => value().prop_map(Expect::Equals),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            prop::collection::vec((key(), prop::option::weighted(0.75, value())), 0..6),
            prop::collection::vec((key(), expect()), 0..3),
        )
            .prop_map(|(mutations, preconditions)| Op::Apply { mutations, preconditions }),
        1 => key().prop_map(Op::Get),
        1 => prefix().prop_map(Op::PrefixExists),
        2 => (
            prefix(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..4)),
            prop::collection::vec((1usize..5, 1usize..40), 1..4),
        )
            .prop_map(|(prefix, after, limits)| Op::Scan { prefix, after, limits }),
    ]
}

/// What the model says `apply` must do; applies the batch to the model on success.
fn model_apply(
    model: &mut Model,
    mutations: &[(Vec<u8>, Option<Vec<u8>>)],
    preconditions: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Result<(), (Vec<u8>, Option<ConflictReason>)> {
    let mut seen = HashSet::new();
    for (k, _) in mutations {
        if !seen.insert(k.clone()) {
            return Err((k.clone(), None));
        }
    }
    for (k, want) in preconditions {
        let reason = match (want, model.get(k)) {
            (None, None) => continue,
            (Some(w), Some(cur)) if w == cur => continue,
            (None, Some(_)) => ConflictReason::Present,
            (Some(_), None) => ConflictReason::Missing,
            (Some(_), Some(_)) => ConflictReason::Changed,
        };
        return Err((k.clone(), Some(reason)));
    }
    for (k, v) in mutations {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = Store::new(MemoryStore::new());
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Apply {
                mutations,
                preconditions,
            } => {
                let resolved: Vec<(Vec<u8>, Option<Vec<u8>>)> = preconditions
                    .into_iter()
                    .map(|(k, e)| {
                        let want = match e {
                            Expect::Current => model.get(&k).cloned(),
                            Expect::Absent => None,
                            Expect::Equals(v) => Some(v),
                        };
                        (k, want)
                    })
                    .collect();
                let mut batch = Batch::new();
                for (k, v) in &mutations {
                    batch = match v {
                        Some(v) => batch.set(k.clone(), v.clone()),
                        None => batch.delete(k.clone()),
                    };
                }
                for (k, want) in &resolved {
                    batch = batch.require(k.clone(), want.clone());
                }
                let got = store.apply(batch);
                match (model_apply(&mut model, &mutations, &resolved), got) {
                    (Ok(()), Ok(())) => {}
                    (Err((k, None)), Err(StoreError::DuplicateKey { key })) => {
                        prop_assert_eq!(key, k);
                    }
                    (Err((k, Some(r))), Err(StoreError::Conflict { key, reason })) => {
                        prop_assert_eq!(key, k);
                        prop_assert_eq!(reason, r);
                    }
                    (want, got) => {
                        return Err(TestCaseError::fail(format!(
                            "apply: model says {want:?}, store says {got:?}"
                        )))
                    }
                }
            }
            Op::Get(k) => prop_assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned()),
            Op::PrefixExists(p) => prop_assert_eq!(
                store.prefix_exists(&p).unwrap(),
                model.keys().any(|k| k.starts_with(&p))
            ),
            Op::Scan {
                prefix,
                after,
                limits,
            } => check_paging(&store, &model, &prefix, after, &limits)?,
        }
        // The whole store equals the model after every step.
        let mut all = Vec::new();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let page = store
                .scan(b"", cursor.as_deref(), ScanLimits::new(7, 1 << 20).unwrap())
                .unwrap();
            cursor = page.cursor().map(<[u8]>::to_vec);
            let more = page.more;
            all.extend(page.records.into_iter().map(|r| (r.key, r.value)));
            if !more {
                break;
            }
        }
        prop_assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
    }
    Ok(())
}

/// Pages through the prefix with the given limits and checks that the pages reconstruct
/// exactly the model's range (or stop with `RecordTooLarge` at the first record larger
/// than its page's budget), with every page within its limits.
fn check_paging(
    store: &Store,
    model: &Model,
    prefix: &[u8],
    after: Option<Vec<u8>>,
    limits: &[(usize, usize)],
) -> Result<(), TestCaseError> {
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix) && after.as_ref().is_none_or(|a| *k > a))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut cursor = after;
    for i in 0.. {
        let (max_records, max_bytes) = limits[i % limits.len()];
        let l = ScanLimits::new(max_records, max_bytes).unwrap();
        let next = expected.get(got.len());
        match store.scan(prefix, cursor.as_deref(), l) {
            Err(StoreError::RecordTooLarge { key, size, limit }) => {
                let (k, v) = next.expect("RecordTooLarge with no record left");
                prop_assert_eq!(&key, k);
                prop_assert_eq!(size, k.len() + v.len());
                prop_assert_eq!(limit, max_bytes);
                prop_assert!(size > max_bytes);
                // Everything before the oversize record came through in order.
                prop_assert_eq!(&got[..], &expected[..got.len()]);
                return Ok(());
            }
            Err(other) => return Err(TestCaseError::fail(format!("scan failed: {other}"))),
            Ok(page) => {
                prop_assert!(page.records.len() <= max_records);
                prop_assert!(page.bytes() <= max_bytes);
                // Greedy: the page stops only at a limit, and exactly before the record
                // that would break it.
                let start = got.len();
                let end = start + page.records.len();
                prop_assert_eq!(page.more, end < expected.len());
                if let Some((k, v)) = expected.get(end) {
                    let would_be = page.bytes() + k.len() + v.len();
                    prop_assert!(
                        page.records.len() == max_records || would_be > max_bytes,
                        "page stopped early"
                    );
                }
                got.extend(page.records.into_iter().map(|r| (r.key, r.value)));
                if !page.more {
                    break;
                }
                prop_assert!(end > start, "a page with `more` must not be empty");
                cursor = got.last().map(|(k, _)| k.clone());
            }
        }
    }
    prop_assert_eq!(got, expected);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn memory_store_matches_btreemap_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
