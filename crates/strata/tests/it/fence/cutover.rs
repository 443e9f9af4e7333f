//! The coordinated cutover: the seed walkthrough, pending cutovers blocking their collection,
//! one generation bump for two collections, reopening after a bump, a sweep refused by the
//! fence, and resuming a cutover stopped by `abort_when`.

use super::*;

#[test]
fn the_seed_walkthrough_fences_migrates_and_clears() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed(&store, &clock, 1);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    assert!(matches!(
        db.verdict("invoices"),
        Some(Verdict::CutoverPending { .. })
    ));
    let before = store.get(&baseline_key("invoices")).unwrap();
    let new_doc = InvNew {
        id: "i2".into(),
        amount: Amount { gross: 5.0 },
    };
    let e = guard_err(inv.put("i2", &new_doc).unwrap_err());
    assert!(e.is_fenced(), "{e}");
    assert_eq!(store.get(&baseline_key("invoices")).unwrap(), before);

    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(report.migrated, 1);
    assert_eq!(report.records, 1);
    assert_eq!(report.generation, 1);
    assert_eq!(inv.get("i000").unwrap().unwrap().amount.gross, 0.0);
    inv.put("i2", &new_doc).unwrap();
    let f = db.fence_state().unwrap();
    assert_eq!(
        (f.state, f.generation, f.pending.len()),
        (FenceState::Normal, 1, 0)
    );
    // The cutover's target became the baseline: reopening is unchanged.
    assert_ne!(store.get(&baseline_key("invoices")).unwrap(), before);
    let again = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    again
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    assert!(matches!(
        again.verdict("invoices"),
        Some(Verdict::Unchanged)
    ));
}

#[test]
fn a_pending_cutover_blocks_its_collection_only_for_every_client() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 2);
    // An old client opened before the change.
    let old = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let old_inv = old
        .collection::<InvOld>(
            "invoices",
            CollectionOptions::new().schema(plain::<InvOld>()),
        )
        .unwrap();
    let old_notes = old
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    // The new client registers the cutover.
    let new = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let new_inv = new
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let new_notes = new
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();

    let e = guard_err(
        old_inv
            .put(
                "x",
                &InvOld {
                    id: "x".into(),
                    total: 1.0,
                },
            )
            .unwrap_err(),
    );
    assert!(
        matches!(e, PolicyError::Refused { ref collection, reason: Refusal::Fenced { .. } } if collection == "invoices"),
        "{e}"
    );
    assert!(guard_err(old_inv.delete("i000").unwrap_err()).is_fenced());
    assert!(guard_err(new_inv.delete("i000").unwrap_err()).is_fenced());
    // Other collections stay writable.
    old_notes
        .put(
            "n",
            &NoteOld {
                id: "n".into(),
                text: "a".into(),
            },
        )
        .unwrap();
    new_notes
        .put(
            "m",
            &NoteOld {
                id: "m".into(),
                text: "b".into(),
            },
        )
        .unwrap();
    assert_eq!(old_inv.get("x").unwrap().map(|d| d.id), None);
}

#[test]
fn two_pending_collections_are_migrated_with_one_generation_bump() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 5);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let notes = db
        .collection::<NoteNew>(
            "notes",
            CollectionOptions::new().schema(note_opts::<NoteNew>()),
        )
        .unwrap();
    assert_eq!(db.fence_state().unwrap().pending.len(), 2);
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(report.migrated, 2);
    assert_eq!(report.records, 10);
    assert_eq!(report.generation, 1);
    assert_eq!(db.fence_state().unwrap().generation, 1);
    assert_eq!(notes.get("i004").unwrap().unwrap().body, "t4");
    assert_eq!(inv.get("i004").unwrap().unwrap().amount.gross, 4.0);
    // Lock versions were bumped by the rewrite.
    assert_eq!(inv.get_document("i004").unwrap().unwrap().lock_version, 2);
    // Nothing pending: a second run is a no-op without a bump.
    let again = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!((again.migrated, again.generation), (0, 1));
}

#[test]
fn a_client_opened_before_the_bump_gets_migration_required_and_must_reopen() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 1);
    let stale = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let stale_notes = stale
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    db.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let stale_policy = stale.policy().unwrap();
    db.run_schema_cutover(CutoverOptions::new().poll(|| {
        stale_policy.heartbeat().unwrap();
    }))
    .unwrap();
    // Even a collection that was never fenced: the handle is behind the generation.
    let e = guard_err(
        stale_notes
            .put(
                "n",
                &NoteOld {
                    id: "n".into(),
                    text: "x".into(),
                },
            )
            .unwrap_err(),
    );
    assert!(
        matches!(
            e,
            PolicyError::Refused {
                reason: Refusal::MigrationRequired {
                    opened: 0,
                    current: 1,
                },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("reopen"));
    drop(stale_notes);
    drop(stale);
    let reopened = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let notes = reopened
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    notes
        .put(
            "n",
            &NoteOld {
                id: "n".into(),
                text: "x".into(),
            },
        )
        .unwrap();
}

/// Issue 9 test: a sweep never writes into a fenced collection.
#[test]
fn a_sweep_refuses_a_fenced_collection() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed(&store, &clock, 3);
    // Rows at v1 with an eager step to v2 pending…
    let sweeper = Database::builder(store.clone()).open().unwrap();
    let inv = sweeper
        .collection::<InvOld>(
            "invoices",
            CollectionOptions::new().upcast(1, strata::Mode::Eager, |_| Ok(())),
        )
        .unwrap();
    // …while a cutover of the collection is pending.
    let coord = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    coord
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let before = store.get(&order_key("unused")).unwrap();
    let raw_before: Vec<_> = (0..3)
        .map(|i| {
            store
                .get(&strata::layout::keys::doc_key(
                    "invoices",
                    &format!("i{i:03}"),
                ))
                .unwrap()
        })
        .collect();
    let err = inv
        .sweep(strata::ops::sweep::SweepOptions::new())
        .unwrap_err();
    assert!(err.is_fenced(), "{err}");
    assert!(before.is_none());
    for (i, b) in raw_before.iter().enumerate() {
        assert_eq!(
            &store
                .get(&strata::layout::keys::doc_key(
                    "invoices",
                    &format!("i{i:03}"),
                ))
                .unwrap(),
            b
        );
    }
}

/// Issue 9: the cutover takes the same `PassLimits` + `abort_when` as the migrator and the
/// sweep; an abort leaves the fence migrating with its checkpoint, and a rerun resumes.
#[test]
fn a_cutover_stopped_by_abort_when_resumes_from_its_checkpoint() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed(&store, &clock, 10);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let limits = strata::pass::PassLimits::new(3, 1 << 20).unwrap();
    let mut polls = 0;
    let err = db
        .run_schema_cutover(CutoverOptions::new().limits(limits).abort_when(|| {
            polls += 1;
            polls > 2
        }))
        .unwrap_err();
    assert!(
        matches!(
            err,
            PolicyError::Aborted {
                state: FenceState::Migrating
            }
        ),
        "{err}"
    );
    let f = db.fence_state().unwrap();
    assert_eq!((f.state, f.generation), (FenceState::Migrating, 0));
    assert!(store
        .get(&strata::ops::cutover::cutover_key("invoices"))
        .unwrap()
        .is_some());
    let report = db
        .run_schema_cutover(CutoverOptions::new().limits(limits))
        .unwrap();
    assert_eq!(report.generation, 1);
    let c = &report.collections[0];
    assert!(c.resumed_from.is_some(), "{c:?}");
    assert!(c.records < 10, "{c:?}");
    for i in 0..10 {
        let doc = inv.get(&format!("i{i:03}")).unwrap().unwrap();
        assert_eq!(doc.amount.gross, i as f64);
    }
}
