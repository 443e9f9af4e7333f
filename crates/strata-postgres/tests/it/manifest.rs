//! Bulk-operation manifests on a store shared by several processes.

use crate::{owner, peer, require_pg, scratch_table};
use strata_store::manifest::manifest_key;
use strata_store::{manifest::Manifest, Batch, KvRead, KvWrite, Store};

/// A long-lived handle that loaded its manifest list before another process certified a
/// scope still retires that manifest with its first write to the scope, so `verify` does
/// not take a legitimate change for a loss.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_manifest_recorded_by_another_process_is_retired_by_a_long_lived_handle() {
    let url = require_pg!();
    let table = scratch_table();
    let a = Store::new(owner(&url, &table));
    // A's first write: its handle has looked at the (empty) manifest list.
    a.apply(Batch::new().set(b"t/1".to_vec(), b"x".to_vec()))
        .unwrap();
    // Another process certifies `t/`.
    let b = Store::new(peer(&url, &table));
    let mut batch = Batch::new();
    let m = Manifest::record(&b, "sweep", "t", b"t/", &mut batch).unwrap();
    b.apply(batch).unwrap();
    assert_eq!(m.records, 1);
    let key = manifest_key("sweep", "t");
    assert!(a.get(&key).unwrap().is_some());
    // A write outside the scope leaves it; the first write under it retires it.
    a.apply(Batch::new().set(b"u/1".to_vec(), b"y".to_vec()))
        .unwrap();
    assert!(a.get(&key).unwrap().is_some());
    a.apply(Batch::new().set(b"t/2".to_vec(), b"y".to_vec()))
        .unwrap();
    assert_eq!(a.get(&key).unwrap(), None);
}
