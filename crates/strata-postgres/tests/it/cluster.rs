//! The private-cluster helper ([`strata_postgres::testing::PrivateCluster`]) itself: it
//! starts, serves a store, survives a restart (the store reconnects) and is gone when
//! dropped. Skipped, visibly, where there are no server binaries (not under `CI=true`).

use strata_postgres::testing::PrivateCluster;
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, KvRead, KvWrite};

#[test]
fn a_private_cluster_starts_restarts_and_is_removed() {
    let Some(cluster) = PrivateCluster::start_for_test(
        "a_private_cluster_starts_restarts_and_is_removed",
        &[("max_connections", "40")],
    )
    .unwrap() else {
        return;
    };
    let store = PgStore::connect_with(&cluster.url(), PgOptions::new().table("t")).unwrap();
    store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    cluster.restart().unwrap();
    // The pool's connections died with the restart; a later call reconnects (one failed
    // call at most).
    let got = store.get(b"k").or_else(|_| store.get(b"k")).unwrap();
    assert_eq!(got, Some(b"v".to_vec()));
    let dir = cluster.dir().to_path_buf();
    assert!(dir.join("data").is_dir());
    drop(store);
    drop(cluster);
    assert!(!dir.exists(), "the cluster directory is removed");
}
