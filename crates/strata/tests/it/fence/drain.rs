//! Client presence and the drain barrier: stale and foreign clients, holdouts and abort,
//! handles completing a cutover together, the coordinator lease, and the heartbeat thread.

use super::*;

/// Writes a foreign client's presence record (an older build that heartbeats but never
/// acknowledges).
fn foreign_client(store: &Store, id: &str, heartbeat_ms: u64) {
    let rec = ClientRecord {
        acked_generation: None,
        client: id.into(),
        format: CLIENT_FORMAT,
        heartbeat_ms,
        opened_generation: 0,
        pid: 1,
        started_ms: 0,
    };
    store
        .apply(Batch::new().set(client_key(id), rec.encode()))
        .unwrap();
}

#[test]
fn a_client_silent_past_the_stale_window_is_not_waited_for() {
    let store = mem();
    let clock = ManualClock::new(10_000);
    seed(&store, &clock, 1);
    foreign_client(&store, "silent", 10_000);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    db.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let polls = Cell::new(0);
    let report = db
        .run_schema_cutover(CutoverOptions::new().quiesce_timeout_ms(60_000).poll(|| {
            polls.set(polls.get() + 1);
            clock.advance(400); // the stale window is 1000 ms
        }))
        .unwrap();
    assert_eq!(report.migrated, 1);
    // It was waited for while live (3 polls: 400, 800, 1200 ms), then skipped.
    assert_eq!(polls.get(), 3);
}

#[test]
fn a_holdout_times_out_and_the_fence_stays_draining_until_abort() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 3);
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
    foreign_client(&store, "holdout", 0);
    let err = db
        .run_schema_cutover(CutoverOptions::new().quiesce_timeout_ms(2_000).poll(|| {
            clock.advance(500);
            foreign_client(&store, "holdout", strata::clock::Clock::now_ms(&clock));
            // heartbeats, never acks
        }))
        .unwrap_err();
    match &err {
        PolicyError::QuiesceTimeout {
            holdouts,
            waited_ms,
        } => {
            assert_eq!(holdouts, &["holdout".to_string()]);
            assert_eq!(*waited_ms, 2_000);
        }
        other => panic!("{other}"),
    }
    let f = db.fence_state().unwrap();
    assert_eq!((f.state, f.generation), (FenceState::Draining, 0));
    // Still fenced, nothing migrated.
    assert!(guard_err(inv.delete("i000").unwrap_err()).is_fenced());
    // abort: back to normal, no bump; the cutover stays pending.
    let f = db.abort_schema_cutover().unwrap();
    assert_eq!(
        (f.state, f.generation, f.coordinator.clone()),
        (FenceState::Normal, 0, None)
    );
    assert_eq!(f.pending.len(), 1);
    assert_eq!(Fence::read(&store).unwrap(), f);
    // Once the holdout is gone, a rerun completes.
    strata::policy::remove_client(&store, "holdout").unwrap();
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(
        (report.migrated, report.records, report.generation),
        (1, 3, 1)
    );
}

#[test]
fn abort_resets_without_a_bump() {
    let store = mem();
    let clock = ManualClock::new(0);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    Fence::update(&store, |f| {
        let mut n = f.clone();
        n.generation = 4;
        n.state = FenceState::Migrating;
        n.coordinator = Some("dead".into());
        n.lease_until_ms = 99;
        Ok(Some(n))
    })
    .unwrap();
    let f = db.abort_schema_cutover().unwrap();
    assert_eq!(f.state, FenceState::Normal);
    assert_eq!(f.generation, 4);
    assert_eq!(f.coordinator, None);
    assert_eq!(db.fence_state().unwrap(), f);
}

#[test]
fn two_handles_on_one_store_complete_a_cutover_together() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 4);
    let a = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let a_inv = a
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let b = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let b_inv = b
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
        .unwrap();
    let a_policy = a.policy().unwrap();
    let seen_draining = Cell::new(false);
    let report = b
        .run_schema_cutover(CutoverOptions::new().poll(|| {
            // A sees the draining fence on its heartbeat and acknowledges.
            seen_draining.set(a_policy.fence_state().unwrap().state == FenceState::Draining);
            a_policy.heartbeat().unwrap();
        }))
        .unwrap();
    assert!(seen_draining.get());
    assert_eq!((report.migrated, report.records), (1, 4));
    let clients = list_clients(&store).unwrap();
    let a_rec = clients
        .iter()
        .find(|c| c.client == a.policy().unwrap().client_id())
        .unwrap();
    assert_eq!(a_rec.acked_generation, Some(1));
    // B ran the cutover and moved on; A must reopen.
    b_inv
        .put(
            "x",
            &InvNew {
                id: "x".into(),
                amount: Amount { gross: 1.0 },
            },
        )
        .unwrap();
    assert!(guard_err(a_inv.delete("x").unwrap_err()).is_migration_required());
    assert_eq!(a_inv.get("i003").unwrap().unwrap().amount.gross, 3.0);
}

#[test]
fn a_live_coordinator_cannot_be_overtaken_but_an_expired_lease_is_resumed() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 3);
    let a = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    a.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let b = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    b.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    // A starts, and times out waiting for B (which never ticks while live).
    let err = a
        .run_schema_cutover(
            CutoverOptions::new()
                .quiesce_timeout_ms(500)
                .poll(|| clock.advance(250)),
        )
        .unwrap_err();
    assert!(matches!(err, PolicyError::QuiesceTimeout { .. }), "{err}");
    // B cannot take over while A's lease (5 s) holds.
    let err = b.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    assert!(
        matches!(err, PolicyError::CutoverInProgress { .. }),
        "{err}"
    );
    // After A's lease expires, B takes over (A is stale by then).
    clock.advance(6_000);
    let report = b.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(
        (report.migrated, report.records, report.generation),
        (1, 3, 1)
    );
}

#[test]
fn a_runner_without_the_transform_is_refused_and_changes_nothing() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 1);
    let a = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    a.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let old = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let before = old.fence_state().unwrap();
    let err = old.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    assert!(
        matches!(err, PolicyError::NoTransform { ref collection } if collection == "invoices"),
        "{err}"
    );
    assert_eq!(old.fence_state().unwrap(), before);
}

#[test]
fn the_heartbeat_thread_acknowledges_a_drain_on_its_own() {
    use std::time::Duration;
    // The barrier gives up after this many polls: each poll advances the manual clock by
    // 1 ms, so a heartbeat thread that never acknowledges ends in a quiesce timeout
    // instead of a hang. The stale window is longer, so the silent handle is never
    // skipped as stale: only its acknowledgement can let the cutover through.
    const MAX_POLLS: u64 = 500_000;
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 2);
    let config = |clock: &ManualClock| config(clock).stale_after_ms(2 * MAX_POLLS);
    // A real heartbeat thread (1 ms interval) on the other handle.
    let other = Database::builder(store.clone())
        .policy(config(&clock).heartbeat(Some(Duration::from_millis(1))))
        .open()
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
    let polls = Cell::new(0u64);
    let result = db.run_schema_cutover(CutoverOptions::new().quiesce_timeout_ms(MAX_POLLS).poll(
        || {
            polls.set(polls.get() + 1);
            clock.advance(1);
            std::thread::yield_now();
        },
    ));
    let report = match result {
        Ok(report) => report,
        Err(e @ PolicyError::QuiesceTimeout { .. }) => {
            panic!("the heartbeat thread never acknowledged the drain: {e}")
        }
        Err(e) => panic!("{e}"),
    };
    assert!(polls.get() < MAX_POLLS, "{} polls", polls.get());
    assert_eq!(report.migrated, 1);
    let rec = list_clients(&store)
        .unwrap()
        .into_iter()
        .find(|c| c.client == other.policy().unwrap().client_id())
        .unwrap();
    assert_eq!(rec.acked_generation, Some(1));
    // Dropping the handle stops the thread and removes its presence record.
    let id = other.policy().unwrap().client_id().to_string();
    drop(other);
    assert!(list_clients(&store).unwrap().iter().all(|c| c.client != id));
}

#[test]
fn a_stale_handle_cannot_coordinate_a_cutover() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 1);
    let stale = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    stale
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(cutover_opts::<InvNew>()),
        )
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
    let sp = stale.policy().unwrap();
    db.run_schema_cutover(CutoverOptions::new().poll(|| sp.heartbeat().unwrap()))
        .unwrap();
    // A new pending cutover appears; the stale handle may not run it.
    db.collection::<NoteNew>(
        "notes",
        CollectionOptions::new().schema(note_opts::<NoteNew>()),
    )
    .unwrap();
    let err = stale.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    assert!(err.is_migration_required(), "{err}");
    assert_eq!(db.fence_state().unwrap().state, FenceState::Normal);
}

/// A cutover run through a clone of a handle's gate after the handle itself was dropped
/// is still a live coordinator: another handle of the same process (a store one process
/// opens at a time, where a recorded coordinator that is no live handle here is taken
/// over at once) is refused while it runs, and the run completes.
#[test]
fn a_cutover_run_through_a_gate_clone_is_not_taken_over_while_it_runs() {
    let store = mem();
    let clock = ManualClock::new(0);
    seed(&store, &clock, 3);
    let a = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    a.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let gate = a.policy().unwrap().gate().clone();
    drop(a);
    let b = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    b.collection::<InvNew>(
        "invoices",
        CollectionOptions::new().schema(cutover_opts::<InvNew>()),
    )
    .unwrap();
    let attempt = std::cell::RefCell::new(None);
    let report = gate
        .run_schema_cutover(CutoverOptions::new().poll(|| {
            if attempt.borrow().is_none() {
                let r = b.run_schema_cutover(CutoverOptions::new());
                *attempt.borrow_mut() = Some(r.map(|r| r.migrated));
            }
            // B acknowledges the drain, as its heartbeat would.
            b.policy().unwrap().heartbeat().unwrap();
            clock.advance(100);
        }))
        .unwrap();
    assert_eq!((report.migrated, report.records), (1, 3));
    let attempt = attempt.into_inner().expect("the drain polled");
    assert!(
        matches!(attempt, Err(PolicyError::CutoverInProgress { .. })),
        "a second coordinator ran while the first was live: {attempt:?}"
    );
}
