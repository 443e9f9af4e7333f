//! Property tests: merge is a join (commutative, associative, idempotent) for every family,
//! and applying one op set in any order, with duplicates, converges.

use crate::common::{dump, manager};
use proptest::prelude::*;
use std::collections::BTreeMap;
use strata_store::KvRead;
use strata_sync::{
    Crdt, GCounterState, LwwMapEntry, LwwMapState, LwwRegisterState, ORSetState, Op, OpKind,
    PNCounterState, RgaElement, RgaState,
};

fn name() -> impl Strategy<Value = String> {
    "[abc]{1,2}"
}
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..4, 0..3)
}
fn counts() -> impl Strategy<Value = GCounterState> {
    prop::collection::btree_map(name(), 0u64..50, 0..4).prop_map(|counts| GCounterState { counts })
}
fn pn() -> impl Strategy<Value = PNCounterState> {
    (counts(), counts()).prop_map(|(positive, negative)| PNCounterState { positive, negative })
}
fn register() -> impl Strategy<Value = LwwRegisterState> {
    // Small domains so equal timestamps and equal writers collide often.
    (bytes(), 0u64..3, name()).prop_map(|(value, timestamp_ms, writer)| LwwRegisterState {
        value,
        timestamp_ms,
        writer,
    })
}
fn lww_map() -> impl Strategy<Value = LwwMapState> {
    prop::collection::btree_map(name(), (prop::option::of(bytes()), 0u64..3, name()), 0..4)
        .prop_map(|m| LwwMapState {
            entries: m
                .into_iter()
                .map(|(f, (value, timestamp_ms, writer))| {
                    (
                        f,
                        LwwMapEntry {
                            value,
                            timestamp_ms,
                            writer,
                        },
                    )
                })
                .collect(),
        })
}
fn orset() -> impl Strategy<Value = ORSetState> {
    let tags =
        || prop::collection::btree_map(name(), prop::collection::btree_set("t[0-4]", 0..3), 0..3);
    (tags(), tags()).prop_map(|(adds, removes)| ORSetState { adds, removes })
}
fn rga() -> impl Strategy<Value = RgaState> {
    (
        prop::collection::vec((name(), prop::option::of(name()), bytes()), 0..5),
        prop::collection::btree_set(name(), 0..3),
    )
        .prop_map(|(els, tombstones)| {
            let mut elements = BTreeMap::new();
            for (id, parent, value) in els {
                elements.insert(id.clone(), RgaElement { id, parent, value });
            }
            RgaState {
                elements,
                tombstones,
            }
        })
}

fn merged<T: Crdt>(a: &T, b: &T) -> T {
    let mut x = a.clone();
    x.merge(b);
    x
}

fn check_join<T: Crdt>(a: T, b: T, c: T) -> Result<(), TestCaseError> {
    prop_assert_eq!(merged(&a, &b), merged(&b, &a), "commutative");
    prop_assert_eq!(
        merged(&merged(&a, &b), &c),
        merged(&a, &merged(&b, &c)),
        "associative"
    );
    prop_assert_eq!(merged(&a, &a), a.clone(), "idempotent");
    // Merging never loses what either side had.
    prop_assert_eq!(merged(&merged(&a, &b), &b), merged(&a, &b), "absorbs");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn gcounter_merge_is_a_join(a in counts(), b in counts(), c in counts()) { check_join(a, b, c)?; }
    #[test]
    fn pncounter_merge_is_a_join(a in pn(), b in pn(), c in pn()) { check_join(a, b, c)?; }
    #[test]
    fn lww_register_merge_is_a_join(a in register(), b in register(), c in register()) { check_join(a, b, c)?; }
    #[test]
    fn lww_map_merge_is_a_join(a in lww_map(), b in lww_map(), c in lww_map()) { check_join(a, b, c)?; }
    #[test]
    fn orset_merge_is_a_join(a in orset(), b in orset(), c in orset()) { check_join(a, b, c)?; }
    #[test]
    fn rga_merge_is_a_join(a in rga(), b in rga(), c in rga()) { check_join(a, b, c)?; }

    #[test]
    fn gcounter_merge_keeps_the_larger_total(a in counts(), b in counts()) {
        let m = merged(&a, &b);
        prop_assert!(m.value() >= a.value().max(b.value()));
    }
}

fn kind() -> impl Strategy<Value = OpKind> {
    let key = || "[xy]";
    prop_oneof![
        (key(), 0u64..10).prop_map(|(key, increment)| OpKind::GCounterIncrement {
            key: key.to_string(),
            increment
        }),
        (key(), 0u64..10).prop_map(|(key, increment)| OpKind::PNCounterIncrement {
            key: key.to_string(),
            increment
        }),
        (key(), 0u64..10).prop_map(|(key, decrement)| OpKind::PNCounterDecrement {
            key: key.to_string(),
            decrement
        }),
        (key(), bytes(), 0u64..3).prop_map(|(key, value, timestamp_ms)| OpKind::LwwRegisterSet {
            key: key.to_string(),
            value,
            timestamp_ms
        }),
        (key(), name(), bytes(), 0u64..3).prop_map(|(key, field, value, timestamp_ms)| {
            OpKind::LwwMapSet {
                key: key.to_string(),
                field,
                value,
                timestamp_ms,
            }
        }),
        (key(), name(), 0u64..3).prop_map(|(key, field, timestamp_ms)| OpKind::LwwMapRemove {
            key: key.to_string(),
            field,
            timestamp_ms
        }),
        (key(), name(), "t[0-5]").prop_map(|(key, element, tag)| OpKind::ORSetAdd {
            key: key.to_string(),
            element,
            tag
        }),
        (key(), name(), prop::collection::vec("t[0-5]", 0..3)).prop_map(
            |(key, element, observed_tags)| OpKind::ORSetRemove {
                key: key.to_string(),
                element,
                observed_tags
            }
        ),
        (key(), "e[0-5]", prop::option::of("e[0-5]"), bytes()).prop_map(
            |(key, id, parent, value)| OpKind::RgaInsert {
                key: key.to_string(),
                id,
                parent,
                value
            }
        ),
        (key(), "e[0-5]").prop_map(|(key, id)| OpKind::RgaDelete {
            key: key.to_string(),
            id
        }),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec((kind(), "n[0-2]"), 1..25).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (k, origin))| Op::new(format!("op-{i}"), origin, k))
            .collect()
    })
}

/// The materialized and state tables (everything but seen-ops and op-log, whose
/// sequences depend on arrival order).
fn crdt_records(store: &impl KvRead) -> Vec<(Vec<u8>, Vec<u8>)> {
    dump(store)
        .into_iter()
        .filter(|r| {
            r.key.starts_with(b"__nx/crdt/")
                && !r.key.starts_with(b"__nx/crdt/seen-op/")
                && !r.key.starts_with(b"__nx/crdt/op-log/")
        })
        .map(|r| (r.key, r.value))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_order_with_duplicates_converges(
        (ops, shuffled) in ops().prop_flat_map(|ops| (Just(ops.clone()), Just(ops).prop_shuffle())),
        dups in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        batch in 1usize..6,
    ) {
        let a = manager();
        for op in &ops {
            a.apply(op).unwrap();
        }
        // Same ops shuffled, with duplicates sprinkled in, applied in groups.
        let mut stream = shuffled.clone();
        for d in &dups {
            stream.push(d.get(&ops).clone());
            stream.insert(d.index(stream.len()), d.get(&shuffled).clone());
        }
        let b = manager();
        for group in stream.chunks(batch) {
            b.apply_batch(group).unwrap();
        }
        prop_assert_eq!(a.states().unwrap(), b.states().unwrap());
        prop_assert_eq!(crdt_records(a.store()), crdt_records(b.store()));
        let ids_a: Vec<String> = a.seen_ops().unwrap().into_keys().collect();
        let ids_b: Vec<String> = b.seen_ops().unwrap().into_keys().collect();
        prop_assert_eq!(ids_a, ids_b);
        prop_assert_eq!(b.op_log().count(), ops.len());
        prop_assert!(b.verify().unwrap().is_consistent());
    }
}
