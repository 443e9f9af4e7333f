//! Interop with frozen stores written by Numax v0.1.3 code (tests/fixtures/numax-v0.1.3,
//! see its README): strata reads Numax's records value by value, applies the same ops to
//! the same input and compares with Numax's result bytes. Where strata deliberately keeps
//! a convergent rule (docs/format.md, "Sync store: where strata and Numax differ"), the
//! test states both behaviours.

use crate::common::{dump, memory};
use std::collections::BTreeMap;
use std::path::PathBuf;
use strata::numax::wire;
use strata_store::{Batch, KvWrite, Store};
use strata_sync::{Family, GCounterState, Op, PNCounterState, SyncManager, SyncOptions};

type Records = BTreeMap<Vec<u8>, Vec<u8>>;

struct Fixture {
    input: Records,
    ops: Vec<Op>,
    result: Records,
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length in fixture");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn load(case: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/numax-v0.1.3")
        .join(format!("{case}.hex"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("source-tag v0.1.3"),
        "{case}: not pinned to v0.1.3"
    );
    let mut f = Fixture {
        input: Records::new(),
        ops: Vec::new(),
        result: Records::new(),
    };
    let mut section = "";
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        match section {
            "[input]" | "[result]" => {
                let (k, v) = line.split_once('\t').unwrap();
                let target = if section == "[input]" {
                    &mut f.input
                } else {
                    &mut f.result
                };
                target.insert(unhex(k), unhex(v));
            }
            "[ops]" => f.ops.push(wire::decode_op(&unhex(line)).unwrap()),
            other => panic!("{case}: unknown section {other}"),
        }
    }
    assert_eq!(
        f.result
            .keys()
            .filter(|k| k.starts_with(b"__nx/schema/"))
            .count(),
        14,
        "{case}: Numax writes the 14 schema headers"
    );
    f
}

fn store_with(records: &Records) -> Store {
    let store = memory();
    let mut batch = Batch::new();
    for (k, v) in records {
        batch = batch.set(k.clone(), v.clone());
    }
    store.apply(batch).unwrap();
    store
}

/// The `__nx/crdt/` records of a store.
fn crdt(store: &Store) -> Records {
    dump(store)
        .into_iter()
        .filter(|r| r.key.starts_with(b"__nx/crdt/"))
        .map(|r| (r.key, r.value))
        .collect()
}

fn numax_crdt(records: &Records) -> Records {
    records
        .iter()
        .filter(|(k, _)| k.starts_with(b"__nx/crdt/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// strata hydrates Numax's input store as the Numax node `numax-local` and applies the ops.
fn run_strata(f: &Fixture) -> (SyncManager, Records) {
    let store = store_with(&f.input);
    let sync = SyncManager::open_with(store.clone(), SyncOptions::default().node_id("numax-local"))
        .unwrap();
    sync.apply_batch(&f.ops).unwrap();
    let records = crdt(&store);
    (sync, records)
}

/// Equal record by record; counter state JSON compared decoded (Numax's node order is a
/// `HashMap`'s).
fn assert_same(case: &str, strata: &Records, numax: &Records) {
    assert_eq!(
        strata.keys().collect::<Vec<_>>(),
        numax.keys().collect::<Vec<_>>(),
        "{case}: key sets differ"
    );
    for (k, v) in numax {
        let ours = &strata[k];
        if k.starts_with(wire::GCOUNTER_STATE_PREFIX.as_bytes()) {
            assert_eq!(
                GCounterState::from_json(ours).unwrap(),
                GCounterState::from_json(v).unwrap(),
                "{case}: {}",
                String::from_utf8_lossy(k)
            );
        } else if k.starts_with(wire::PNCOUNTER_STATE_PREFIX.as_bytes()) {
            assert_eq!(
                PNCounterState::from_json(ours).unwrap(),
                PNCounterState::from_json(v).unwrap(),
                "{case}: {}",
                String::from_utf8_lossy(k)
            );
        } else {
            assert_eq!(ours, v, "{case}: {}", String::from_utf8_lossy(k));
        }
    }
}

#[test]
fn ordinary_ops_give_numax_records() {
    let f = load("ordinary");
    let (sync, ours) = run_strata(&f);
    assert_same("ordinary", &ours, &numax_crdt(&f.result));
    assert!(sync.verify().unwrap().is_consistent());
}

#[test]
fn a_numax_store_is_read_value_by_value() {
    let f = load("ordinary");
    let store = store_with(&f.result);
    let sync = SyncManager::open(store.clone()).unwrap();
    // Opening changed nothing Numax wrote.
    assert_same("ordinary (read)", &crdt(&store), &numax_crdt(&f.result));
    let mat = |prefix: &str, key: &str| f.result[&wire::key(prefix, key)].clone();
    assert_eq!(
        sync.gcounter("visits").unwrap(),
        Some(wire::decode_gcounter_materialized(&mat(wire::GCOUNTER_PREFIX, "visits")).unwrap())
    );
    assert_eq!(sync.gcounter("visits").unwrap(), Some(12));
    assert_eq!(
        sync.pncounter("stock").unwrap(),
        Some(wire::decode_pncounter_materialized(&mat(wire::PNCOUNTER_PREFIX, "stock")).unwrap())
    );
    assert_eq!(
        sync.register("status").unwrap(),
        Some(mat(wire::LWW_REGISTER_PREFIX, "status"))
    );
    let map: BTreeMap<String, Vec<u8>> =
        wire::decode_lww_map_materialized(&mat(wire::LWW_MAP_PREFIX, "settings"))
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(sync.map("settings").unwrap(), Some(map));
    assert_eq!(
        sync.set("tags").unwrap(),
        Some(wire::decode_orset_materialized(&mat(wire::ORSET_PREFIX, "tags")).unwrap())
    );
    assert_eq!(
        sync.sequence("doc").unwrap(),
        Some(wire::decode_rga_materialized(&mat(wire::RGA_PREFIX, "doc")).unwrap())
    );
    assert_eq!(
        sync.sequence("doc").unwrap(),
        Some(vec![b"hello".to_vec(), b"big".to_vec()])
    );
    // Every state decodes to what Numax materialized, and the sequences continue.
    assert!(sync.verify().unwrap().is_consistent());
    assert_eq!(sync.next_sequences(), (16, 16));
    for op in &f.ops {
        let entry = sync.op_log_entry(&op.id).unwrap().unwrap();
        assert_eq!(&entry.op, op);
    }
}

#[test]
fn lww_map_tie_tombstone_wins_like_numax_in_either_order() {
    for case in ["lww-map-tie-set-first", "lww-map-tie-remove-first"] {
        let f = load(case);
        let (sync, ours) = run_strata(&f);
        assert_same(case, &ours, &numax_crdt(&f.result));
        assert_eq!(sync.map("m").unwrap(), Some(BTreeMap::new()), "{case}");
        assert_eq!(
            f.result[&wire::key(wire::LWW_MAP_PREFIX, "m")],
            b"[]".to_vec(),
            "{case}: Numax removes the field"
        );
    }
}

#[test]
fn lww_register_tie_numax_keeps_the_first_write_strata_the_larger_value() {
    for (case, numax_value) in [
        ("lww-register-tie-a-first", b"a"),
        ("lww-register-tie-b-first", b"b"),
    ] {
        let f = load(case);
        // Numax: order-dependent — the first write stays.
        assert_eq!(
            f.result[&wire::key(wire::LWW_REGISTER_PREFIX, "r")],
            numax_value.to_vec(),
            "{case}"
        );
        // strata: the larger value, whatever the order, so replicas converge.
        let (sync, ours) = run_strata(&f);
        assert_eq!(sync.register("r").unwrap(), Some(b"b".to_vec()), "{case}");
        // Everything else (seen-ops, op log) is byte-identical.
        let mut a = ours.clone();
        let mut b = numax_crdt(&f.result);
        for m in [&mut a, &mut b] {
            m.retain(|k, _| {
                !k.starts_with(b"__nx/crdt/lww-register/")
                    && !k.starts_with(b"__nx/crdt/state/lww-register/")
            });
        }
        assert_same(case, &a, &b);
    }
}

#[test]
fn rga_same_element_id_numax_keeps_the_first_strata_the_smaller() {
    for (case, numax_value) in [("rga-same-id-1-first", 1u8), ("rga-same-id-2-first", 2u8)] {
        let f = load(case);
        assert_eq!(
            wire::decode_rga_materialized(&f.result[&wire::key(wire::RGA_PREFIX, "doc")]).unwrap(),
            vec![vec![numax_value]],
            "{case}: Numax keeps the first insert"
        );
        let (sync, _) = run_strata(&f);
        assert_eq!(
            sync.sequence("doc").unwrap(),
            Some(vec![vec![1u8]]),
            "{case}"
        );
    }
}

#[test]
fn counter_overflow_numax_wraps_strata_saturates() {
    let f = load("counter-overflow");
    let numax = numax_crdt(&f.result);
    assert_eq!(
        wire::decode_gcounter_materialized(&numax[&wire::key(wire::GCOUNTER_PREFIX, "big")])
            .unwrap(),
        1,
        "Numax wraps u64::MAX + 2"
    );
    assert_eq!(
        wire::decode_pncounter_materialized(&numax[&wire::key(wire::PNCOUNTER_PREFIX, "pn")])
            .unwrap(),
        1,
        "Numax wraps the positive total"
    );
    let (sync, ours) = run_strata(&f);
    assert_eq!(sync.gcounter("big").unwrap(), Some(u64::MAX));
    assert_eq!(sync.pncounter("pn").unwrap(), Some(i64::MAX));
    // The per-node state is the same on both sides (both saturate each node's count).
    for prefix in [wire::GCOUNTER_STATE_PREFIX, wire::PNCOUNTER_STATE_PREFIX] {
        let key = wire::key(
            prefix,
            if prefix == wire::GCOUNTER_STATE_PREFIX {
                "big"
            } else {
                "pn"
            },
        );
        let mut a = Records::new();
        let mut b = Records::new();
        a.insert(key.clone(), ours[&key].clone());
        b.insert(key.clone(), numax[&key].clone());
        assert_same("counter-overflow state", &a, &b);
    }
}

#[test]
fn early_layout_counters_are_credited_to_the_local_node_like_numax() {
    let f = load("early-layout-counters");
    let (sync, ours) = run_strata(&f);
    assert_same("early-layout-counters", &ours, &numax_crdt(&f.result));
    assert_eq!(sync.gcounter("visits").unwrap(), Some(13));
    assert_eq!(sync.pncounter("stock").unwrap(), Some(-5));
    let state = sync.state(Family::GCounter, "visits").unwrap().unwrap();
    let strata_sync::CrdtState::GCounter(g) = state else {
        panic!("gcounter state expected")
    };
    assert_eq!(g.counts.get("numax-local"), Some(&12));
    assert_eq!(g.counts.get("node-b"), Some(&1));
}

#[test]
fn a_state_without_materialized_record_is_hydrated_like_numax() {
    let f = load("state-without-materialized");
    assert!(f.ops.is_empty());
    let (sync, ours) = run_strata(&f);
    assert_same("state-without-materialized", &ours, &numax_crdt(&f.result));
    assert_eq!(sync.gcounter("hits").unwrap(), Some(7));
    assert_eq!(
        sync.set("colors").unwrap(),
        Some(vec!["blue".to_string(), "red".to_string()])
    );
    assert!(sync.verify().unwrap().is_consistent());
}

/// Listing a Numax store's CRDT keys includes the counters stored in the early layout (a
/// materialized value, no state record), with the state Numax hydrates for them — as
/// Numax's hydration lists and serves them — from `SyncManager::states()` and through
/// the runtime. Before #23 they were missing from the listing.
#[test]
fn early_layout_counters_are_listed_like_numax_hydrates_them() {
    let f = load("early-layout-counters");
    let store = store_with(&f.input);
    let options = SyncOptions::default().node_id("numax-local");
    let sync = SyncManager::open_with(store.clone(), options.clone()).unwrap();
    let rt = strata_sync::Runtime::with_store(store, options).unwrap();
    for (what, states) in [
        ("manager", sync.states().unwrap()),
        ("runtime", rt.sync().states().unwrap()),
    ] {
        let mut g = GCounterState::default();
        g.counts.insert("numax-local".into(), 12);
        assert_eq!(
            states.get(&(Family::GCounter, "visits".to_string())),
            Some(&strata_sync::CrdtState::GCounter(g)),
            "{what}: {states:?}"
        );
        let mut pn = PNCounterState::default();
        pn.negative.counts.insert("numax-local".into(), 6);
        assert_eq!(
            states.get(&(Family::PNCounter, "stock".to_string())),
            Some(&strata_sync::CrdtState::PNCounter(pn)),
            "{what}: {states:?}"
        );
        // Every listed key is served with the same state.
        for ((family, key), state) in &states {
            assert_eq!(
                sync.state(*family, key).unwrap().as_ref(),
                Some(state),
                "{what}: {key}"
            );
        }
    }
}
