//! Size limits that match (issue 13): a sync write refuses a record no reader could read
//! back under the default byte budget, with a typed error naming the limit, and writes
//! nothing; what it accepts, a restart reads back.

use crate::common::dump;
use strata_sync::{Op, OpKind, Runtime, SyncError, MAX_RECORD_BYTES};

fn set(id: &str, len: usize) -> Op {
    Op::new(
        id,
        "node-a",
        OpKind::LwwRegisterSet {
            key: "blob".into(),
            value: vec![200u8; len],
            timestamp_ms: 1,
        },
    )
}

#[test]
fn an_unreadable_record_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let rt = Runtime::new(&path).unwrap();
        rt.sync().apply(&set("small", 10)).unwrap();
        let before = dump(rt.sync().store());
        // 1.2 MB of bytes is ~4.8 MB of state JSON: over the 4 MiB read budget.
        let err = rt.sync().apply(&set("big", 1_200_000)).unwrap_err();
        let text = err.to_string();
        match &err {
            SyncError::RecordTooLarge { size, limit, .. } => {
                assert_eq!(*limit, MAX_RECORD_BYTES);
                assert!(*size > *limit);
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
        assert!(text.contains("4194304"), "{text}");
        assert!(text.contains("blob") || text.contains("big"), "{text}");
        assert_eq!(dump(rt.sync().store()), before, "nothing was written");
        assert_eq!(rt.sync().seen_op_sequence("big").unwrap(), None);
    }
    // The store still opens (the failure: the next Runtime::new refused it).
    let rt = Runtime::new(&path).unwrap();
    assert_eq!(rt.sync().register("blob").unwrap(), Some(vec![200u8; 10]));
}

#[test]
fn an_accepted_large_record_is_read_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // ~600 KB of bytes: ~2.4 MB of JSON, inside the budget.
    Runtime::new(&path)
        .unwrap()
        .sync()
        .apply(&set("mid", 600_000))
        .unwrap();
    let rt = Runtime::new(&path).unwrap();
    assert_eq!(
        rt.sync().register("blob").unwrap(),
        Some(vec![200u8; 600_000])
    );
    assert!(rt.sync().verify().unwrap().is_consistent());
}
