//! SyncManager behaviour over the memory store.

use crate::common::{dump, failing, manager, memory, op_for};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use strata_store::{Batch, KvRead, KvWrite};
use strata_sync::{legacy, Applied, Family, Op, OpKind, SyncError, SyncManager, SyncOptions};

fn inc(id: &str, key: &str, n: u64) -> Op {
    Op::new(
        id,
        "node-a",
        OpKind::GCounterIncrement {
            key: key.into(),
            increment: n,
        },
    )
}

#[test]
fn open_initializes_all_headers_of_an_empty_store_atomically() {
    let store = memory();
    let _m = SyncManager::open(store.clone()).unwrap();
    let headers: Vec<_> = dump(&store)
        .into_iter()
        .filter(|r| r.key.starts_with(b"__nx/schema/"))
        .collect();
    assert_eq!(headers.len(), 14);
    // Reopening a current store changes nothing.
    let before = dump(&store);
    SyncManager::open(store.clone()).unwrap();
    assert_eq!(dump(&store), before);
}

#[test]
fn an_op_applied_twice_changes_nothing() {
    let m = manager();
    let op = inc("op-1", "visits", 3);
    assert_eq!(
        m.apply(&op).unwrap(),
        Applied::Applied {
            seen_sequence: 0,
            log_sequence: 0
        }
    );
    let before = dump(m.store());
    assert_eq!(m.apply(&op).unwrap(), Applied::Duplicate);
    assert_eq!(
        m.apply_batch(&[op.clone(), op.clone()]).unwrap(),
        vec![Applied::Duplicate; 2]
    );
    assert_eq!(dump(m.store()), before);
    assert_eq!(m.gcounter("visits").unwrap(), Some(3));
    assert_eq!(m.next_sequences(), (1, 1));
}

#[test]
fn one_apply_writes_state_materialized_seen_and_log() {
    let m = manager();
    let op = Op::new(
        "op-9",
        "n1",
        OpKind::LwwMapSet {
            key: "cfg".into(),
            field: "region".into(),
            value: b"eu".to_vec(),
            timestamp_ms: 5,
        },
    );
    m.apply(&op).unwrap();
    let s = m.store();
    assert_eq!(
        s.get(b"__nx/crdt/lww-map/cfg").unwrap().unwrap(),
        br#"[["region",[101,117]]]"#
    );
    assert_eq!(
        s.get(b"__nx/crdt/state/lww-map/cfg").unwrap().unwrap(),
        br#"{"entries":{"region":{"value":[101,117],"timestamp_ms":5,"writer":"n1"}}}"#
    );
    assert_eq!(
        s.get(b"__nx/crdt/seen-op/op-9").unwrap().unwrap(),
        0u64.to_be_bytes()
    );
    let log = s.get(b"__nx/crdt/op-log/op-9").unwrap().unwrap();
    assert_eq!(&log[..8], &0u64.to_be_bytes());
    assert_eq!(strata::numax::wire::decode_op(&log[8..]).unwrap(), op);
}

#[test]
fn a_batch_with_many_ops_on_one_key_is_grouped() {
    let m = SyncManager::open_with(memory(), SyncOptions::default().max_ops_per_batch(7)).unwrap();
    let ops: Vec<Op> = (0..50)
        .map(|i| inc(&format!("op-{i:02}"), "hot", 2))
        .collect();
    let res = m.apply_batch(&ops).unwrap();
    assert!(res.iter().all(|r| matches!(r, Applied::Applied { .. })));
    assert_eq!(m.gcounter("hot").unwrap(), Some(100));
    assert_eq!(m.op_log().count(), 50);
    let seqs: Vec<u64> = m.op_log().map(|e| e.unwrap().sequence).collect();
    assert_eq!(seqs, (0..50).collect::<Vec<_>>());
}

#[test]
fn an_invalid_op_refuses_the_whole_call_before_writing() {
    let m = manager();
    m.apply(&inc("op-1", "c", 1)).unwrap();
    let before = dump(m.store());
    let err = m
        .apply_batch(&[inc("op-2", "c", 1), inc("", "c", 1)])
        .unwrap_err();
    assert!(matches!(err, SyncError::InvalidOp { .. }), "{err}");
    assert_eq!(dump(m.store()), before);
    assert_eq!(m.gcounter("c").unwrap(), Some(1));
    assert_eq!(m.next_sequences(), (1, 1));
}

#[test]
fn a_failed_store_write_leaves_memory_and_store_unchanged() {
    let (store, fail) = failing();
    let m = SyncManager::open(store.clone()).unwrap();
    m.apply(&inc("op-1", "c", 1)).unwrap();
    let (before, states) = (dump(&store), m.states().unwrap());
    fail.store(true, Ordering::SeqCst);
    let err = m.apply(&inc("op-2", "c", 5)).unwrap_err();
    assert!(matches!(err, SyncError::Store { .. }), "{err}");
    assert_eq!(dump(&store), before);
    assert_eq!(m.states().unwrap(), states);
    assert_eq!(m.next_sequences(), (1, 1));
    fail.store(false, Ordering::SeqCst);
    // The op was not applied, so it is not a duplicate now.
    assert_eq!(
        m.apply(&inc("op-2", "c", 5)).unwrap(),
        Applied::Applied {
            seen_sequence: 1,
            log_sequence: 1
        }
    );
    assert_eq!(m.gcounter("c").unwrap(), Some(6));
}

#[test]
fn every_family_reads_back_through_the_getters() {
    let store = memory();
    let m = SyncManager::open(store).unwrap();
    m.apply_batch(&legacy::fixture_ops()).unwrap();
    assert_eq!(m.gcounter("visits").unwrap(), Some(12));
    assert_eq!(m.pncounter("stock").unwrap(), Some(6));
    assert_eq!(m.register("status").unwrap(), Some(b"online".to_vec()));
    let map = m.map("settings").unwrap().unwrap();
    assert_eq!(
        map,
        BTreeMap::from([("region".to_string(), b"eu".to_vec())])
    );
    assert_eq!(m.set("tags").unwrap(), Some(vec!["blue".to_string()]));
    assert_eq!(m.sequence("doc").unwrap(), Some(vec![b"hello".to_vec()]));
    assert_eq!(m.seen_op_sequence("fixture-op-1").unwrap(), Some(0));
    let entry = m.op_log_entry("fixture-op-16").unwrap().unwrap();
    assert_eq!(entry.sequence, 15);
    assert_eq!(entry.op.id, "fixture-op-16");
    assert_eq!(m.gcounter("absent").unwrap(), None);
    assert!(m.verify().unwrap().is_consistent());
}

#[test]
fn rga_orders_siblings_by_id_and_keeps_children_of_deleted_elements() {
    let m = manager();
    let ins = |id: &str, parent: Option<&str>, v: &str| {
        Op::new(
            format!("op-{id}"),
            "n",
            OpKind::RgaInsert {
                key: "doc".into(),
                id: id.into(),
                parent: parent.map(Into::into),
                value: v.as_bytes().to_vec(),
            },
        )
    };
    m.apply_batch(&[
        ins("root", None, "r"),
        ins("c", Some("root"), "c"),
        ins("b", Some("root"), "b"),
        ins("d", Some("b"), "d"),
    ])
    .unwrap();
    let seq = |m: &SyncManager| m.sequence("doc").unwrap().unwrap().concat();
    assert_eq!(seq(&m), b"rbdc");
    m.apply(&Op::new(
        "del-b",
        "n",
        OpKind::RgaDelete {
            key: "doc".into(),
            id: "b".into(),
        },
    ))
    .unwrap();
    assert_eq!(seq(&m), b"rdc");
    // An element whose parent is unknown sits at the head until the parent arrives.
    m.apply(&ins("z", Some("missing"), "z")).unwrap();
    assert_eq!(seq(&m), b"rdcz");
    m.apply(&ins("missing", None, "m")).unwrap();
    assert_eq!(seq(&m), b"mzrdc");
}

#[test]
fn a_long_rga_chain_does_not_overflow_the_stack() {
    let mut rga = strata_sync::RgaState::default();
    for i in 0..200_000u32 {
        let id = format!("{i:08}");
        let parent = i.checked_sub(1).map(|p| format!("{p:08}"));
        rga.elements.insert(
            id.clone(),
            strata_sync::RgaElement {
                id,
                parent,
                value: vec![1],
            },
        );
    }
    assert_eq!(strata_sync::rga_order(&rga).len(), 200_000);
}

#[test]
fn lww_map_tombstone_hides_a_field_and_a_later_set_resurrects_it() {
    let m = manager();
    let set = |id: &str, ts: u64, writer: &str, v: &str| {
        Op::new(
            id,
            writer,
            OpKind::LwwMapSet {
                key: "m".into(),
                field: "f".into(),
                value: v.as_bytes().to_vec(),
                timestamp_ms: ts,
            },
        )
    };
    let rm = |id: &str, ts: u64| {
        Op::new(
            id,
            "w",
            OpKind::LwwMapRemove {
                key: "m".into(),
                field: "f".into(),
                timestamp_ms: ts,
            },
        )
    };
    m.apply_batch(&[
        set("1", 10, "a", "x"),
        rm("2", 20),
        set("3", 15, "z", "old"),
    ])
    .unwrap();
    assert_eq!(m.map("m").unwrap(), Some(BTreeMap::new()));
    m.apply(&set("4", 20, "x", "tie")).unwrap(); // same timestamp, writer "x" > "w": wins
    assert_eq!(
        m.map("m").unwrap().unwrap().get("f"),
        Some(&b"tie".to_vec())
    );
}

#[test]
fn hydration_after_reopen_reproduces_the_exact_state() {
    let store = memory();
    let m = SyncManager::open_with(
        store.clone(),
        SyncOptions::default().scan_limits(3, 1 << 20),
    )
    .unwrap();
    let ops: Vec<Op> = (0..300).map(op_for).collect();
    m.apply_batch(&ops).unwrap();
    let (states, seen, next) = (
        m.states().unwrap(),
        m.seen_ops().unwrap(),
        m.next_sequences(),
    );
    drop(m);
    let again =
        SyncManager::open_with(store, SyncOptions::default().scan_limits(2, 1 << 16)).unwrap();
    assert_eq!(again.states().unwrap(), states);
    assert_eq!(again.seen_ops().unwrap(), seen);
    assert_eq!(again.next_sequences(), next);
    assert_eq!(again.next_sequences(), (300, 300));
    // Sequences continue after a restart.
    let r = again.apply(&op_for(300)).unwrap();
    assert_eq!(
        r,
        Applied::Applied {
            seen_sequence: 300,
            log_sequence: 300
        }
    );
}

#[test]
fn replaying_the_op_log_into_a_fresh_manager_reproduces_the_materialized_values() {
    let m = manager();
    m.apply_batch(&(0..400).map(op_for).collect::<Vec<_>>())
        .unwrap();
    let fresh = manager();
    assert_eq!(fresh.replay_from(m.store()).unwrap(), 400);
    assert_eq!(fresh.states().unwrap(), m.states().unwrap());
    for family in Family::ALL {
        for k in ["k0", "k1", "k2"] {
            let key = format!("{}{k}", family.materialized_prefix());
            assert_eq!(
                fresh.store().get(key.as_bytes()).unwrap(),
                m.store().get(key.as_bytes()).unwrap(),
                "{key}"
            );
        }
    }
    // Replaying again is a no-op.
    assert_eq!(fresh.replay_from(m.store()).unwrap(), 0);
}

#[test]
fn open_refuses_a_legacy_store_and_writes_nothing() {
    let store = memory();
    legacy::write_legacy_fixture(&store, &legacy::fixture_ops()).unwrap();
    let before = dump(&store);
    assert!(before.iter().all(|r| !r.key.starts_with(b"__nx/schema/")));
    let err = SyncManager::open(store.clone()).unwrap_err();
    assert!(err.is_migration_required(), "{err}");
    assert!(
        err.to_string()
            .starts_with("legacy unversioned data found in "),
        "{err}"
    );
    assert_eq!(dump(&store), before);
}

#[test]
fn write_legacy_fixture_refuses_a_versioned_store() {
    let store = memory();
    SyncManager::open(store.clone()).unwrap();
    let before = dump(&store);
    let err = legacy::write_legacy_fixture(&store, &legacy::fixture_ops()).unwrap_err();
    assert!(err.to_string().contains("__nx/schema/"), "{err}");
    assert_eq!(dump(&store), before);
}

#[test]
fn a_corrupt_state_record_fails_open_with_its_table_and_key() {
    let store = memory();
    SyncManager::open(store.clone()).unwrap();
    store
        .apply(Batch::new().set(b"__nx/crdt/state/gcounter/bad".to_vec(), b"{nope".to_vec()))
        .unwrap();
    let err = SyncManager::open(store).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SyncError::Decode { .. }), "{text}");
    assert!(
        text.contains("`gcounter-state`") && text.contains("`bad`"),
        "{text}"
    );
}

#[test]
fn verify_reports_a_materialized_value_that_disagrees_with_its_state() {
    let m = manager();
    m.apply(&inc("op-1", "c", 4)).unwrap();
    assert!(m.verify().unwrap().is_consistent());
    m.store()
        .apply(Batch::new().set(
            b"__nx/crdt/gcounter/c".to_vec(),
            5u64.to_le_bytes().to_vec(),
        ))
        .unwrap();
    let report = m.verify().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    // Hydration takes the state record as the truth and rewrites the stale value.
    let again = SyncManager::open(m.store().clone()).unwrap();
    assert_eq!(again.gcounter("c").unwrap(), Some(4));
    assert!(again.verify().unwrap().is_consistent());
}
