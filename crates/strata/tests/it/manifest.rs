//! Bulk-operation manifests: migrate, the eager sweep and the cutover each certify what
//! their final batch leaves; a record removed behind strata's back shows, a write through
//! strata retires the manifest instead of raising a false alarm.

use crate::collection_util::mem_db;
use serde::{Deserialize, Serialize};
use serde_json::json;
use strata::clock::ManualClock;
use strata::layout;
use strata::migrate::{Migrator, Registry};
use strata::ops::cutover::CutoverOptions;
use strata::ops::sweep::SweepOptions;
use strata::policy::{coordinated_cutover, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata::Mode;
use strata_store::manifest::{manifest_key, read_manifests, tally_scope};
use strata_store::{manifest::Manifest, Batch, KvRead, KvWrite, MemoryStore, Store};

/// The live manifest at `key`, and whether the scope still matches it.
fn check(store: &Store, key: &[u8]) -> Option<(Manifest, bool, u64)> {
    let m = Manifest::decode(&store.get(key).unwrap()?).unwrap();
    let now = tally_scope(store, &m.prefix_bytes(), None).unwrap();
    let intact = now.records == m.records && now.digest() == m.digest;
    Some((m, intact, now.records))
}

/// Deletes `key` straight in the backend, as a lost log tail or another tool would.
fn lose(store: &Store, key: Vec<u8>) {
    store
        .unguarded_backend()
        .apply(Batch::new().delete(key))
        .unwrap();
}

/// A table strata owns (a collection's id and prefix), without its header.
fn own_catalog() -> strata::Catalog {
    strata::Catalog::new()
        .with(strata::TableDef::new(
            "own",
            1024,
            b"__nx/doc/own/".to_vec(),
            1,
        ))
        .unwrap()
}

#[test]
fn migrate_certifies_each_table_strata_owns() {
    let store = Store::new(MemoryStore::new());
    let mut b = Batch::new();
    for i in 0..30u64 {
        b = b.set(
            format!("__nx/doc/own/c{i:02}").into_bytes(),
            i.to_le_bytes().to_vec(),
        );
    }
    store.apply(b).unwrap();
    Migrator::new(Registry::certification(&own_catalog()))
        .unwrap()
        .run(&store)
        .unwrap();
    let all = read_manifests(&store).unwrap();
    let (key, m) = all
        .iter()
        .find_map(|(k, m)| m.as_ref().ok().filter(|m| m.records > 0).map(|m| (k, m)))
        .unwrap();
    assert_eq!(m.operation, "migrate");
    assert_eq!(m.records, 30);
    assert_eq!(key, &manifest_key("migrate", &m.scope));
    let (_, intact, _) = check(&store, key).unwrap();
    assert!(intact);
    // Lost behind strata's back: the count shows it.
    lose(&store, b"__nx/doc/own/c07".to_vec());
    let (m, intact, now) = check(&store, key).unwrap();
    assert!(!intact);
    assert_eq!((m.records, now), (30, 29));
}

/// Numax keeps writing its 14 sync tables after strata migrated them: a migration
/// certifies none of them (no manifest), so the store is byte for byte what Numax's own
/// migration leaves — the records plus the 14 v1 headers. (Before #23 this test asserted
/// a manifest on `gcounter-materialized`.)
#[test]
fn migrate_certifies_no_numax_table_and_leaves_numaxs_bytes() {
    let store = Store::new(MemoryStore::new());
    let mut b = Batch::new();
    for i in 0..30u64 {
        b = b.set(
            format!("__nx/crdt/gcounter/c{i:02}").into_bytes(),
            i.to_le_bytes().to_vec(),
        );
    }
    store.apply(b).unwrap();
    let limits = strata_store::ScanLimits::new(10_000, 1 << 24).unwrap();
    let before = store.scan(b"", None, limits).unwrap().records;
    Migrator::new(Registry::numax())
        .unwrap()
        .run(&store)
        .unwrap();
    assert!(read_manifests(&store).unwrap().is_empty());
    let after = store.scan(b"", None, limits).unwrap().records;
    let mut expected: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        before.into_iter().map(|r| (r.key, r.value)).collect();
    for (id, name, _) in strata::numax::NUMAX_TABLES {
        expected.insert(
            format!("__nx/schema/{name}").into_bytes(),
            [&b"NXDB"[..], &1u16.to_be_bytes(), &id.to_be_bytes()].concat(),
        );
    }
    let after: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        after.into_iter().map(|r| (r.key, r.value)).collect();
    assert_eq!(after, expected);
}

#[test]
fn a_write_through_strata_after_migrate_retires_the_manifest() {
    let store = Store::new(MemoryStore::new());
    store
        .apply(Batch::new().set(b"__nx/doc/own/a".to_vec(), 1u64.to_le_bytes().to_vec()))
        .unwrap();
    Migrator::new(Registry::certification(&own_catalog()))
        .unwrap()
        .run(&store)
        .unwrap();
    let key = read_manifests(&store)
        .unwrap()
        .into_iter()
        .find(|(_, m)| m.as_ref().is_ok_and(|m| m.records == 1))
        .unwrap()
        .0;
    // A legitimate delete through the store: the manifest goes with it, atomically.
    store
        .apply(Batch::new().delete(b"__nx/doc/own/a".to_vec()))
        .unwrap();
    assert_eq!(store.get(&key).unwrap(), None);
}

#[derive(Debug, Serialize, Deserialize)]
struct Acc {
    id: String,
    #[serde(default)]
    tier: String,
}

fn sweep_options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| {
            o.insert("tier".into(), json!("basic"));
            Ok(())
        })
}

fn seed_v1(store: &Store, n: usize) {
    let mut b = Batch::new();
    for i in 0..n {
        let id = format!("r{i:03}");
        b = b.set(
            layout::keys::doc_key("acc", &id),
            strata::layout::envelope::encode(
                strata::layout::envelope::Envelope::new(1, 1),
                format!(r#"{{"id":"{id}"}}"#).as_bytes(),
            ),
        );
    }
    store.apply(b).unwrap();
}

#[test]
fn the_sweep_certifies_the_collection_and_a_later_put_retires_it() {
    let (store, db) = mem_db();
    let c = db.collection::<Acc>("acc", sweep_options()).unwrap();
    seed_v1(&store, 25);
    let opts = SweepOptions::new().limits(strata::pass::PassLimits::new(7, 4 << 20).unwrap());
    c.sweep(opts).unwrap();
    let key = manifest_key("sweep", "acc");
    let (m, intact, _) = check(&store, &key).unwrap();
    assert!(intact);
    assert_eq!((m.operation.as_str(), m.records), ("sweep", 25));
    lose(&store, layout::keys::doc_key("acc", "r011"));
    let (_, intact, now) = check(&store, &key).unwrap();
    assert!(!intact);
    assert_eq!(now, 24);
    // A legitimate write: no stale manifest is left to raise a false alarm.
    c.delete("r012").unwrap();
    assert_eq!(store.get(&key).unwrap(), None);
}

/// With nothing else writing, the sweep certifies from the tally it took while rewriting
/// (no second scan of the collection); a write anywhere in the store meanwhile (here
/// straight into the backend, outside the collection) makes it recount instead. Both
/// manifests match a recount.
#[test]
fn the_sweep_certifies_from_its_own_tally_unless_something_else_wrote() {
    use crate::collection_util::Spy;
    let run = |noise: bool| {
        let (spy, store) = Spy::new();
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db.collection::<Acc>("acc", sweep_options()).unwrap();
        seed_v1(&store, 25);
        if noise {
            let mut fired = false;
            spy.before_apply(move |batch, backend| {
                let rows = batch
                    .mutations()
                    .iter()
                    .any(|m| m.key().starts_with(b"__nx/doc/"));
                if rows && !fired {
                    fired = true;
                    backend
                        .apply(Batch::new().set(b"elsewhere".to_vec(), b"x".to_vec()))
                        .unwrap();
                }
            });
        }
        spy.reset_counts();
        let opts = SweepOptions::new().limits(strata::pass::PassLimits::new(7, 4 << 20).unwrap());
        let r = c.sweep(opts).unwrap();
        spy.clear_hook();
        assert_eq!(r.rewritten(), 25);
        let scans = spy.scans.load(std::sync::atomic::Ordering::SeqCst);
        let (m, intact, _) = check(&store, &manifest_key("sweep", "acc")).unwrap();
        assert!(intact, "noise: {noise}");
        assert_eq!(m.records, 25);
        scans
    };
    let (quiet, noisy) = (run(false), run(true));
    // The recount is one more scan (25 rows fit one page of it).
    assert_eq!(noisy, quiet + 1);
}

#[test]
fn a_sweep_beside_a_writer_that_touches_the_collection_records_no_manifest() {
    let (store, db) = mem_db();
    let c = db.collection::<Acc>("acc", sweep_options()).unwrap();
    seed_v1(&store, 5);
    let armed = store.arm_manifest_scope(&layout::keys::doc_prefix("acc"));
    // A writer lands while the (simulated) final count is armed.
    store
        .apply(Batch::new().delete(layout::keys::doc_key("acc", "r000")))
        .unwrap();
    assert!(armed.touched());
    drop(armed);
    c.sweep(SweepOptions::new()).unwrap();
    // Untouched during its own final batch: recorded.
    assert!(check(&store, &manifest_key("sweep", "acc")).unwrap().1);
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    gross: f64,
}

#[test]
fn the_cutover_certifies_each_migrated_collection() {
    let store = Store::new(MemoryStore::new());
    cutover_certifies(&store);
}

/// As the sweep: with nothing else writing, the cutover certifies from the tally its
/// rewrite took; a write elsewhere in the store during the rewrite sends it back to a
/// recount. Both manifests match a recount.
#[test]
fn the_cutover_certifies_from_its_own_tally_unless_something_else_wrote() {
    use crate::collection_util::Spy;
    let run = |noise: bool| {
        let (spy, store) = Spy::new();
        if noise {
            let mut fired = false;
            spy.before_apply(move |batch, backend| {
                let fence = batch
                    .mutations()
                    .iter()
                    .any(|m| m.key() == strata::layout::keys::FENCE_KEY);
                let rows = batch
                    .mutations()
                    .iter()
                    .any(|m| m.key().starts_with(b"__nx/doc/"));
                if fence && rows && !fired {
                    fired = true;
                    backend
                        .apply(Batch::new().set(b"elsewhere".to_vec(), b"x".to_vec()))
                        .unwrap();
                }
            });
        }
        let scans = cutover_certifies_counting(&store, &spy);
        spy.clear_hook();
        scans
    };
    let (quiet, noisy) = (run(false), run(true));
    assert_eq!(noisy, quiet + 1, "the recount is one more scan");
}

fn cutover_certifies(store: &Store) {
    cutover_run(store, || {});
}

fn cutover_certifies_counting(store: &Store, spy: &crate::collection_util::Spy) -> usize {
    cutover_run(store, || spy.reset_counts());
    spy.scans.load(std::sync::atomic::Ordering::SeqCst)
}

/// Seeds 12 invoices at the old shape, runs the cutover (`before` just before it) and
/// checks the manifest it recorded.
fn cutover_run(store: &Store, before: impl FnOnce()) {
    let store = store.clone();
    let clock = ManualClock::new(1_000);
    {
        let db = Database::builder(store.clone())
            .policy(crate::policy_util::config(&clock))
            .open()
            .unwrap();
        let inv = db
            .collection::<InvOld>(
                "invoices",
                CollectionOptions::new().schema(SchemaOptions::of::<InvOld>()),
            )
            .unwrap();
        for i in 0..12 {
            let id = format!("i{i:02}");
            inv.put(
                &id,
                &InvOld {
                    id: id.clone(),
                    total: i as f64,
                },
            )
            .unwrap();
        }
    }
    let db = Database::builder(store.clone())
        .policy(crate::policy_util::config(&clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(SchemaOptions::of::<InvNew>().strategy(
                coordinated_cutover(|d| Ok(json!({"id": d["id"], "gross": d["total"]}))),
            )),
        )
        .unwrap();
    before();
    db.run_schema_cutover(CutoverOptions::new()).unwrap();
    let key = manifest_key("cutover", "invoices");
    let (m, intact, _) = check(&store, &key).unwrap();
    assert!(intact);
    assert_eq!(m.records, 12);
    lose(&store, layout::keys::doc_key("invoices", "i03"));
    assert_eq!(check(&store, &key).unwrap().2, 11);
    inv.put(
        "i99",
        &InvNew {
            id: "i99".into(),
            gross: 1.0,
        },
    )
    .unwrap();
    assert_eq!(store.get(&key).unwrap(), None);
}
