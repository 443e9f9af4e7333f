//! Proven retirement of old payload versions: refused while a row or a sweep still needs
//! the old steps; afterwards the chain may start at K, and a row below K is refused by
//! every reader with one clear error.

use crate::collection_util::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata::layout;
use strata::ops::retire::{retire, retired_below, RetireError};
use strata::ops::sweep::SweepOptions;
use strata::pass::PassLimits;
use strata::Mode;
use strata::{CollectionError, CollectionOptions, Database};
use strata_store::{KvRead, Store};

/// v1 `{n}` → v2 adds `m` → v3 renames `m` to `k` (both eager: the sweep's target is v3).
fn v3() -> CollectionOptions {
    CollectionOptions::new()
        .upcast(1, Mode::Eager, |o| {
            o.insert("m".into(), json!(0));
            Ok(())
        })
        .upcast(2, Mode::Eager, |o| {
            let m = o.remove("m").unwrap_or(json!(0));
            o.insert("k".into(), m);
            Ok(())
        })
}

fn seed_v1(store: &Store, n: usize) {
    for i in 0..n {
        raw_put(
            store,
            "c",
            &format!("r{i:03}"),
            1,
            1,
            &format!(r#"{{"n":{i}}}"#),
        );
    }
}

fn record(store: &Store) -> Option<Vec<u8>> {
    store
        .get(&strata::layout::retired::retired_key("c"))
        .unwrap()
}

#[test]
fn refused_while_one_row_is_stored_below_and_nothing_is_written() {
    let (store, db) = mem_db();
    let c = db.collection::<Value>("c", v3()).unwrap();
    seed_v1(&store, 3);
    c.sweep(SweepOptions::new()).unwrap();
    // One row written afterwards by an old build at v1.
    raw_put(&store, "c", "late", 1, 1, r#"{"n":9}"#);
    let err = retire(&store, "c", 3, false).unwrap_err();
    match &err {
        RetireError::RowsBelow {
            rows,
            example,
            below,
            ..
        } => {
            assert_eq!((*rows, example.as_str(), *below), (1, "late", 3));
        }
        other => panic!("expected RowsBelow, got {other:?}"),
    }
    assert!(err.to_string().contains("sweep c"), "{err}");
    assert_eq!(record(&store), None, "a refusal writes nothing");
    // The sweep already completed (its marker says so): the late row is rewritten by a
    // write through the collection. A dry run then proves without writing.
    let late = c.get("late").unwrap().unwrap();
    c.put("late", &late).unwrap();
    let dry = retire(&store, "c", 3, true).unwrap();
    assert!(!dry.recorded);
    assert_eq!(dry.versions.get(&3), Some(&4));
    assert_eq!(record(&store), None);
}

#[test]
fn refused_while_a_sweep_is_in_progress() {
    let (store, db) = mem_db();
    let c = db.collection::<Value>("c", v3()).unwrap();
    seed_v1(&store, 10);
    // Abort after the first batch of 2 rows: the sweep is interrupted, resumable.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = Arc::clone(&polls);
    let report = c
        .sweep(
            SweepOptions::new()
                .limits(PassLimits::new(2, 1 << 20).unwrap())
                .abort_when(move || p.fetch_add(1, Ordering::SeqCst) >= 1),
        )
        .unwrap();
    assert_eq!(report.note, strata::ops::sweep::SweepNote::Aborted);
    // Rows below v2 remain too, but the sweep is what is named first.
    let err = retire(&store, "c", 2, false).unwrap_err();
    assert!(
        matches!(err, RetireError::SweepRunning { target: 3, .. }),
        "{err:?}"
    );
    assert_eq!(record(&store), None);
}

#[test]
fn after_retirement_the_chain_starts_at_k_and_older_rows_are_refused_everywhere() {
    let (store, db) = mem_db();
    let c = db.collection::<Value>("c", v3()).unwrap();
    seed_v1(&store, 4);
    assert_eq!(c.sweep(SweepOptions::new()).unwrap().rewritten(), 4);
    let report = retire(&store, "c", 3, false).unwrap();
    assert!(report.recorded);
    assert_eq!((report.rows, report.previous), (4, None));
    assert_eq!(record(&store), Some(b"NXRV\x01\x00\x00\x00\x03".to_vec()));
    assert_eq!(retired_below(&store, "c").unwrap(), Some(3));
    // Again: a no-op that succeeds; lowering it is refused.
    assert!(!retire(&store, "c", 3, false).unwrap().recorded);
    assert!(matches!(
        retire(&store, "c", 2, false),
        Err(RetireError::WouldLower { recorded: 3, .. })
    ));

    // The new build drops both steps: its chain starts at v3.
    let db = Database::builder(store.clone()).open().unwrap();
    let retired = db
        .collection::<Value>("c", CollectionOptions::new().retired_below(3))
        .unwrap();
    assert_eq!(retired.current_version(), 3);
    assert_eq!(retired.get("r001").unwrap(), Some(json!({"n": 1, "k": 0})));

    // A v1 row copied in afterwards (a restore, a copy, an old build).
    raw_put(&store, "c", "r000", 1, 7, r#"{"n":0}"#);
    let e = retired.get("r000").unwrap_err();
    assert!(e.is_retired(), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("`r000`") && text.contains("v1") && text.contains("retired"),
        "{text}"
    );
    // iter: that row is one error, the others read.
    let items: Vec<_> = retired.iter().collect();
    assert_eq!(items.len(), 4);
    assert_eq!(items.iter().filter(|r| r.is_err()).count(), 1);
    // A handle that still declares every step refuses it too (the store retired v1).
    let full = db.collection::<Value>("c", v3()).unwrap();
    assert!(full.get("r000").unwrap_err().is_retired());
    // The next build's sweep (v3 -> v4) counts it as failed and leaves it as stored.
    let v4 = db
        .collection::<Value>(
            "c",
            CollectionOptions::new()
                .retired_below(3)
                .upcast(3, Mode::Eager, |o| {
                    o.insert("z".into(), json!(true));
                    Ok(())
                }),
        )
        .unwrap();
    let before = raw_get(&store, "c", "r000");
    let swept = v4.sweep(SweepOptions::new()).unwrap();
    assert_eq!((swept.failed(), swept.rewritten()), (1, 3), "{swept:?}");
    assert_eq!(raw_get(&store, "c", "r000"), before);
}

#[test]
fn a_chain_starting_above_v1_needs_the_stores_retirement() {
    let (store, db) = mem_db();
    db.collection::<Value>("c", v3()).unwrap();
    let e = db
        .collection::<Value>(
            "c",
            CollectionOptions::new()
                .retired_below(3)
                .upcast(3, Mode::Lazy, |_| Ok(())),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            CollectionError::RetirementMissing {
                start: 3,
                recorded: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("retire c --below 3"), "{e}");
    // Steps from v3 without the declaration: the gap error says how to declare it.
    let gap = db
        .collection::<Value>(
            "c",
            CollectionOptions::new().upcast(3, Mode::Lazy, |_| Ok(())),
        )
        .unwrap_err();
    assert!(gap.to_string().contains("retired_below(3)"), "{gap}");
    // A step below the declared start is refused.
    let below = db
        .collection::<Value>(
            "c",
            CollectionOptions::new()
                .retired_below(3)
                .upcast(2, Mode::Lazy, |_| Ok(())),
        )
        .unwrap_err();
    assert!(
        matches!(
            below,
            CollectionError::ChainBelowStart {
                from: 2,
                start: 3,
                ..
            }
        ),
        "{below:?}"
    );
    // Retiring below v1 retires nothing; an unknown collection is named.
    assert!(matches!(
        retire(&store, "c", 1, false),
        Err(RetireError::NothingToRetire { .. })
    ));
    assert!(matches!(
        retire(&store, "nope", 2, false),
        Err(RetireError::UnknownCollection { .. })
    ));
    let _ = layout::keys::doc_prefix("c");
}

/// [`v3`] with the downcasts back to v1.
fn v3_reversible() -> CollectionOptions {
    v3().downcast(2, |o| {
        o.remove("m");
        Ok(())
    })
    .downcast(3, |o| {
        let k = o.remove("k").unwrap_or(json!(0));
        o.insert("m".into(), k);
        Ok(())
    })
}

fn everything(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    strata_store::Pages::new(
        store,
        b"",
        strata_store::ScanLimits::new(1000, 64 << 20).unwrap(),
    )
    .records()
    .map(|r| {
        let r = r.unwrap();
        (r.key.to_vec(), r.value.to_vec())
    })
    .collect()
}

/// A revert below the store's retirement (recorded after the reverting handle opened,
/// and before) is refused before it changes a byte, naming the retirement; the build
/// still writes at its own version afterwards. (It used to open a deploy window at the
/// retired version, fail every row, and leave every write of the build failing.)
#[test]
fn a_revert_below_the_retired_versions_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_redb::RedbStore::create_store(dir.path().join("s.redb")).unwrap();
    let db = Database::builder(store.clone()).open().unwrap();
    let early = db.collection::<Value>("c", v3_reversible()).unwrap();
    early.put("a", &json!({"n": 1, "k": 2})).unwrap();
    retire(&store, "c", 3, false).unwrap();
    let late = db.collection::<Value>("c", v3_reversible()).unwrap();
    let before = everything(&store);
    for c in [&early, &late] {
        for dry in [false, true] {
            let err = c
                .revert(2, strata::ops::revert::RevertOptions::new().dry_run(dry))
                .unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(err, CollectionError::Revert { to: 2, .. })
                    && text.contains("below v3 are retired")
                    && text.contains("__nx/retired/c")
                    && text.contains("revert to v3 or above"),
                "{text}"
            );
            assert!(c.check_revert(1).is_err());
        }
    }
    assert!(everything(&store) == before, "a refused revert wrote");
    assert_eq!(strata::ops::window::operational(&store, "c").unwrap(), None);
    late.put("b", &json!({"n": 2, "k": 3})).unwrap();
    assert_eq!(late.get("b").unwrap(), Some(json!({"n": 2, "k": 3})));
    assert_eq!(late.get("a").unwrap(), Some(json!({"n": 1, "k": 2})));
}

/// A deploy window below the version (or an unfinished revert to below it) blocks a
/// retirement: the builds in the window write rows there.
#[test]
fn retirement_is_refused_while_a_window_holds_the_collection_below_it() {
    let (store, db) = mem_db();
    let c = db.collection::<Value>("c", v3_reversible()).unwrap();
    strata::ops::window::open(&store, "c", 2).unwrap();
    // An empty collection: no row is below v3, but the window writes at v2.
    let err = retire(&store, "c", 3, false).unwrap_err();
    assert!(
        matches!(
            err,
            RetireError::WindowBelow {
                operational: 2,
                below: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("window c complete"), "{err}");
    assert_eq!(record(&store), None);
    c.put("a", &json!({"n": 1, "k": 2})).unwrap();
    assert_eq!(c.get("a").unwrap(), Some(json!({"n": 1, "k": 2})));
    // At or below the window's version a retirement is fine.
    assert!(retire(&store, "c", 2, true).is_ok());
    // And once retired, no window opens below it.
    let (store, db) = mem_db();
    let c = db.collection::<Value>("c", v3_reversible()).unwrap();
    c.put("a", &json!({"n": 1, "k": 2})).unwrap();
    retire(&store, "c", 3, false).unwrap();
    let err = strata::ops::window::open(&store, "c", 2).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::WindowBelowRetired {
                operational: 2,
                below: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("__nx/retired/c"), "{err}");
    assert_eq!(strata::ops::window::operational(&store, "c").unwrap(), None);
    strata::ops::window::open(&store, "c", 3).unwrap();
}
