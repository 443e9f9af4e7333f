//! Writing LEGACY (v0) sync data: the layout a Numax release without schema headers
//! wrote. For fixtures and the demo only — `strata status` refuses such a store until
//! `strata migrate` certifies it.

use crate::{SyncError, SyncManager, SyncOptions};
use strata::numax::wire::{Op, OpKind};
use strata_store::{KvRead, KvWrite, ScanLimits, Store};

/// Applies `ops` to `store` through the v0 layout: state, materialized, seen-ops and
/// op-log records exactly as the current layout, but WITHOUT any schema header. Refuses a
/// store that has any schema header (it is not legacy). Returns how many ops were new.
///
/// ```
/// use strata_store::{MemoryStore, Store};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::new(MemoryStore::new());
/// strata_sync::legacy::write_legacy_fixture(&store, &strata_sync::legacy::fixture_ops())?;
/// let err = strata_sync::SyncManager::open(store).unwrap_err();
/// assert!(err.is_migration_required());
/// # Ok(()) }
/// ```
pub fn write_legacy_fixture(store: &Store, ops: &[Op]) -> Result<usize, SyncError> {
    let headers = store.scan(
        strata::layout::keys::SCHEMA_PREFIX,
        None,
        ScanLimits::new(1, usize::MAX)?,
    )?;
    if let Some(r) = headers.records.first() {
        return Err(SyncError::Refused {
            reason: format!(
                "store has schema header `{}`, it is not a legacy store; write the legacy fixture into an empty or legacy store",
                strata_store::escape_key(&r.key)
            ),
        });
    }
    let manager = SyncManager::unvalidated(store.clone(), SyncOptions::default())?;
    let applied = manager.apply_batch(ops)?;
    // The v0 layout has no sequence record.
    store.apply(strata_store::Batch::new().delete(crate::SEQUENCES_KEY.as_bytes().to_vec()))?;
    store.flush()?;
    Ok(applied
        .iter()
        .filter(|a| matches!(a, crate::Applied::Applied { .. }))
        .count())
}

fn op(id: &str, kind: OpKind) -> Op {
    Op::new(id, "fixture-node", kind)
}

/// A small op set touching every family. Applied to an empty store it yields: gcounter
/// `visits` = 12, pncounter `stock` = 6, register `status` = `online`, map `settings` =
/// `{"region": "eu"}` (field `theme` tombstoned), set `tags` = `["blue"]`, sequence `doc` =
/// `["hello"]`; op ids `fixture-op-1` … `fixture-op-16`.
pub fn fixture_ops() -> Vec<Op> {
    let s = |v: &str| v.to_string();
    let kinds = vec![
        OpKind::GCounterIncrement {
            key: s("visits"),
            increment: 5,
        },
        OpKind::GCounterIncrement {
            key: s("visits"),
            increment: 7,
        },
        OpKind::PNCounterIncrement {
            key: s("stock"),
            increment: 10,
        },
        OpKind::PNCounterDecrement {
            key: s("stock"),
            decrement: 4,
        },
        OpKind::LwwRegisterSet {
            key: s("status"),
            value: b"offline".to_vec(),
            timestamp_ms: 1,
        },
        OpKind::LwwRegisterSet {
            key: s("status"),
            value: b"online".to_vec(),
            timestamp_ms: 2,
        },
        OpKind::LwwMapSet {
            key: s("settings"),
            field: s("region"),
            value: b"eu".to_vec(),
            timestamp_ms: 1,
        },
        OpKind::LwwMapSet {
            key: s("settings"),
            field: s("theme"),
            value: b"dark".to_vec(),
            timestamp_ms: 1,
        },
        OpKind::LwwMapRemove {
            key: s("settings"),
            field: s("theme"),
            timestamp_ms: 2,
        },
        OpKind::ORSetAdd {
            key: s("tags"),
            element: s("blue"),
            tag: s("tag-1"),
        },
        OpKind::ORSetAdd {
            key: s("tags"),
            element: s("red"),
            tag: s("tag-2"),
        },
        OpKind::ORSetRemove {
            key: s("tags"),
            element: s("red"),
            observed_tags: vec![s("tag-2")],
        },
        OpKind::RgaInsert {
            key: s("doc"),
            id: s("el-1"),
            parent: None,
            value: b"hello".to_vec(),
        },
        OpKind::RgaInsert {
            key: s("doc"),
            id: s("el-2"),
            parent: Some(s("el-1")),
            value: b"world".to_vec(),
        },
        OpKind::RgaDelete {
            key: s("doc"),
            id: s("el-2"),
        },
        OpKind::GCounterIncrement {
            key: s("visits"),
            increment: 0,
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| op(&format!("fixture-op-{}", i + 1), k))
        .collect()
}
