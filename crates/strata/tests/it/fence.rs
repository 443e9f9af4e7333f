//! The fence, client presence, the drain barrier and the coordinated cutover.

use super::policy_util::{config, guard_err, mem};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::cell::Cell;
use strata::clock::ManualClock;
use strata::ops::cutover::CutoverOptions;
use strata::policy::{
    additive_only, baseline_key, client_key, coordinated_cutover, list_clients, ClientRecord,
    Fence, FenceState, PolicyError, Refusal, SchemaOptions, Verdict, CLIENT_FORMAT,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, Store};

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    amount: Amount,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct NoteOld {
    id: String,
    text: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct NoteNew {
    id: String,
    body: String,
}

fn reshape(d: Value) -> Result<Value, String> {
    Ok(json!({"id": d["id"], "amount": {"gross": d["total"]}}))
}

fn cutover_opts<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>()
        .strategy(coordinated_cutover(reshape))
        .strategy(additive_only())
}

fn note_opts<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>().strategy(coordinated_cutover(|d| {
        Ok(json!({"id": d["id"], "body": d["text"]}))
    }))
}

fn plain<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>()
}

/// Generation 0: `invoices` (and `notes`) in the old shape with `n` records each.
fn seed(store: &Store, clock: &ManualClock, n: usize) {
    let db = Database::builder(store.clone())
        .policy(config(clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvOld>(
            "invoices",
            CollectionOptions::new().schema(plain::<InvOld>()),
        )
        .unwrap();
    let notes = db
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    for i in 0..n {
        let id = format!("i{i:03}");
        inv.put(
            &id,
            &InvOld {
                id: id.clone(),
                total: i as f64,
            },
        )
        .unwrap();
        notes
            .put(
                &id,
                &NoteOld {
                    id: id.clone(),
                    text: format!("t{i}"),
                },
            )
            .unwrap();
    }
}

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

#[test]
fn a_write_that_passed_the_gate_cannot_land_after_the_fence_changed() {
    use super::policy_util::Faulty;
    use strata::layout::keys::FENCE_KEY;
    let faulty = Faulty::new();
    let store = Store::from_arc(faulty.clone());
    let clock = ManualClock::new(0);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvOld>(
            "invoices",
            CollectionOptions::new().schema(plain::<InvOld>()),
        )
        .unwrap();
    let notes = db
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    // Between the gate's check of the next document write and its commit, a coordinator
    // marks a cutover of `invoices` pending.
    let scratch = mem();
    let pending = Fence::add_pending(&scratch, "invoices", "target-hash").unwrap();
    assert!(pending.is_pending("invoices"));
    *faulty.before_apply.lock().unwrap() = Some((
        b"__nx/doc/invoices/".to_vec(),
        Batch::new().set(FENCE_KEY.to_vec(), pending.encode()),
    ));
    let err = inv
        .put(
            "late",
            &InvOld {
                id: "late".into(),
                total: 1.0,
            },
        )
        .unwrap_err();
    assert!(guard_err(err).is_fenced());
    assert!(
        inv.get("late").unwrap().is_none(),
        "the write landed behind the fence"
    );
    assert!(Fence::read(&store).unwrap().is_pending("invoices"));
    // Another collection stays writable under the new fence.
    notes
        .put(
            "n1",
            &NoteOld {
                id: "n1".into(),
                text: "still writable".into(),
            },
        )
        .unwrap();
}

/// Issue 9: a handle opened without any policy configuration obeys the stored fence, joins
/// the drain barrier once it writes a collection under policy, and must reopen after a
/// generation bump.
#[test]
fn a_plain_handle_is_fenced_joins_the_drain_and_must_reopen_after_a_bump() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed(&store, &clock, 2);
    let plain_db = Database::builder(store.clone()).open().unwrap();
    assert!(plain_db.policy().is_none());
    let plain_inv = plain_db
        .collection::<InvOld>("invoices", CollectionOptions::new())
        .unwrap();
    let plain_notes = plain_db
        .collection::<NoteOld>("notes", CollectionOptions::new())
        .unwrap();
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
    // Pending cutover: the plain handle's write is refused with the fence, typed.
    let before = store
        .get(&strata::layout::keys::doc_key("invoices", "i000"))
        .unwrap();
    let err = plain_inv
        .put(
            "i000",
            &InvOld {
                id: "i000".into(),
                total: 9.0,
            },
        )
        .unwrap_err();
    assert!(err.is_fenced(), "{err}");
    assert!(err.to_string().contains("are fenced"), "{err}");
    assert!(plain_inv.delete("i001").unwrap_err().is_fenced());
    assert_eq!(
        store
            .get(&strata::layout::keys::doc_key("invoices", "i000"))
            .unwrap(),
        before
    );
    // Writing a collection under policy made the plain handle a client of the store.
    plain_notes
        .put(
            "n",
            &NoteOld {
                id: "n".into(),
                text: "x".into(),
            },
        )
        .unwrap();
    let me = plain_db.policy().unwrap().client_id().to_string();
    let listed = list_clients(&store).unwrap();
    let rec = listed.iter().find(|c| c.client == me).unwrap();
    assert_eq!((rec.opened_generation, rec.acked_generation), (0, None));
    // The drain waits for its acknowledgement (given by its heartbeat here).
    let report = coord
        .run_schema_cutover(CutoverOptions::new().poll(|| plain_db.heartbeat().unwrap()))
        .unwrap();
    assert_eq!(report.generation, 1);
    let rec = list_clients(&store)
        .unwrap()
        .into_iter()
        .find(|c| c.client == me)
        .unwrap();
    assert_eq!(rec.acked_generation, Some(1));
    // After the bump every write of the plain handle needs a reopen.
    for err in [
        plain_notes
            .put(
                "n",
                &NoteOld {
                    id: "n".into(),
                    text: "y".into(),
                },
            )
            .unwrap_err(),
        plain_inv.delete("i001").unwrap_err(),
    ] {
        assert!(
            matches!(
                err.refusal(),
                Some(Refusal::MigrationRequired {
                    opened: 0,
                    current: 1
                })
            ),
            "{err}"
        );
    }
    // A handle without policy that never wrote under policy is refused the same way.
    let misc = Database::builder(store.clone()).open().unwrap();
    drop(misc);
    let reopened = Database::builder(store.clone()).open().unwrap();
    reopened
        .collection::<NoteOld>("notes", CollectionOptions::new())
        .unwrap()
        .put(
            "n2",
            &NoteOld {
                id: "n2".into(),
                text: "z".into(),
            },
        )
        .unwrap();
}

/// A plain handle opened before the bump is refused even on a collection nobody declared.
#[test]
fn a_plain_handle_on_an_undeclared_collection_must_reopen_after_a_bump() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed(&store, &clock, 1);
    let plain_db = Database::builder(store.clone()).open().unwrap();
    let misc = plain_db
        .collection::<NoteOld>("misc", CollectionOptions::new())
        .unwrap();
    let note = NoteOld {
        id: "m".into(),
        text: "x".into(),
    };
    misc.put("m", &note).unwrap();
    assert!(
        plain_db.policy().is_none(),
        "no presence for ungoverned writes"
    );
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
    coord.run_schema_cutover(CutoverOptions::new()).unwrap();
    let err = misc.put("m", &note).unwrap_err();
    assert!(err.is_migration_required(), "{err}");
    assert!(misc.get("m").unwrap().is_some(), "reads stay open");
}

// ---- issue 9: the cutover rewrites rows through the collection's one row rewrite ----

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct OrdV3 {
    id: String,
    qty: i64,
    price_cents: i64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Money {
    cents: i64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct OrdNew {
    id: String,
    qty: i64,
    price: Money,
}

/// The v3 chain of `orders`: v1 `{id, price}` (dollars) → v2 adds `qty` → v3 stores
/// `price_cents`. Each step also tries to re-key the document (a protected field).
fn orders_chain() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, strata::Mode::Lazy, |o| {
            o.insert("qty".into(), json!(1));
            o.insert("id".into(), json!("step-rekeyed"));
            Ok(())
        })
        .upcast(2, strata::Mode::Lazy, |o| {
            let dollars = o.remove("price").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("price_cents".into(), json!(dollars * 100));
            Ok(())
        })
}

fn order_key(id: &str) -> Vec<u8> {
    strata::layout::keys::doc_key("orders", id)
}

fn raw_order(store: &Store, id: &str, version: i32, lock: u64, json: &str) {
    let value = strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(version, lock),
        json.as_bytes(),
    );
    store.apply(Batch::new().set(order_key(id), value)).unwrap();
}

/// Issue 9 test: a cutover over v1 rows with a v3 chain hands the transform each row at
/// v3 (upcast, protected fields kept) exactly once; a row written by a newer build (v5) is
/// left byte-identical and reported by key.
#[test]
fn cutover_upcasts_old_rows_keeps_protected_fields_and_reports_newer_rows() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let gen0 = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        gen0.collection::<OrdV3>(
            "orders",
            orders_chain().schema(SchemaOptions::of::<OrdV3>()),
        )
        .unwrap();
    }
    for i in 0..5 {
        raw_order(
            &store,
            &format!("o{i}"),
            1,
            7,
            &format!(r#"{{"id":"o{i}","price":{i}}}"#),
        );
    }
    raw_order(
        &store,
        "o2-current",
        3,
        2,
        r#"{"id":"o2-current","qty":4,"price_cents":50}"#,
    );
    raw_order(
        &store,
        "o9-newer",
        5,
        3,
        r#"{"id":"o9-newer","qty":2,"price_v5":{"cents":1}}"#,
    );
    let newer_before = store.get(&order_key("o9-newer")).unwrap();

    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (seen_t, calls_t) = (Arc::clone(&seen), Arc::clone(&calls));
    let transform = move |d: Value| {
        calls_t.fetch_add(1, Ordering::SeqCst);
        seen_t.lock().unwrap().push(d.clone());
        Ok(json!({
            "id": "transform-rekeyed",
            "qty": d["qty"],
            "price": {"cents": d["price_cents"]},
        }))
    };
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let orders = db
        .collection::<OrdNew>(
            "orders",
            orders_chain()
                .schema(SchemaOptions::of::<OrdNew>().strategy(coordinated_cutover(transform))),
        )
        .unwrap();
    assert!(matches!(
        db.verdict("orders"),
        Some(Verdict::CutoverPending { .. })
    ));
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();

    // The transform saw every old and current row once, each at v3 and with its own id.
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    for d in seen.lock().unwrap().iter() {
        let id = d["id"].as_str().unwrap();
        assert!(id.starts_with('o') && id != "step-rekeyed", "{d}");
        assert!(
            d.get("price").is_none(),
            "v1 field reached the transform: {d}"
        );
        assert!(d["qty"].is_i64() && d["price_cents"].is_i64(), "{d}");
    }
    for i in 0..5 {
        let id = format!("o{i}");
        let doc = orders.get_document(&id).unwrap().unwrap();
        assert_eq!(
            doc.value.id, id,
            "protected id restored after the transform"
        );
        assert_eq!(doc.value.qty, 1);
        assert_eq!(doc.value.price.cents, i * 100);
        // A cutover is a payload step (#26): the transform is the step 3 → 4, so the
        // rows move to v4; the lock version is bumped once (a cutover is a write).
        assert_eq!((doc.stored_version, doc.lock_version), (4, 8));
    }
    // The newer row: byte-identical, counted and named in the report, never transformed.
    assert_eq!(store.get(&order_key("o9-newer")).unwrap(), newer_before);
    assert_eq!(report.skipped_ahead, 1);
    let c = &report.collections[0];
    assert_eq!(c.skipped_ahead, 1);
    assert_eq!(c.ahead_keys, ["o9-newer".to_string()]);
    assert!(orders.get("o9-newer").is_err(), "this build cannot bind it");
}

/// A cutover over more newer-build rows than a report lists: all are counted and left
/// byte-identical, the first `MAX_LISTED_AHEAD` are named in key order.
#[test]
fn cutover_report_counts_every_newer_row_and_lists_the_first_ones() {
    use strata::ops::cutover::MAX_LISTED_AHEAD;
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let gen0 = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        gen0.collection::<OrdV3>(
            "orders",
            orders_chain().schema(SchemaOptions::of::<OrdV3>()),
        )
        .unwrap();
    }
    let n = MAX_LISTED_AHEAD + 7;
    let ids: Vec<String> = (0..n).map(|i| format!("n{i:04}")).collect();
    for id in &ids {
        raw_order(&store, id, 5, 1, &format!(r#"{{"id":"{id}","v5":true}}"#));
    }
    raw_order(&store, "a-old", 1, 1, r#"{"id":"a-old","price":1}"#);
    let before: Vec<_> = ids
        .iter()
        .map(|id| store.get(&order_key(id)).unwrap())
        .collect();
    let transform = |d: Value| {
        Ok(json!({"id": d["id"], "qty": d["qty"], "price": {"cents": d["price_cents"]}}))
    };
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let _orders = db
        .collection::<OrdNew>(
            "orders",
            orders_chain()
                .schema(SchemaOptions::of::<OrdNew>().strategy(coordinated_cutover(transform))),
        )
        .unwrap();
    // Small batches: rows are met across many batches.
    let report = db
        .run_schema_cutover(
            CutoverOptions::new().limits(strata::pass::PassLimits::new(10, 1 << 20).unwrap()),
        )
        .unwrap();
    let c = &report.collections[0];
    assert_eq!(c.skipped_ahead, n as u64);
    assert_eq!(report.skipped_ahead, n as u64);
    assert_eq!(c.ahead_keys, ids[..MAX_LISTED_AHEAD].to_vec());
    let after: Vec<_> = ids
        .iter()
        .map(|id| store.get(&order_key(id)).unwrap())
        .collect();
    assert_eq!(after, before, "newer rows are left byte-identical");
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

/// A handle's writes check the fence it last read (its batch requires those bytes): a
/// fence changed through another path is seen by the very next write, on every backend.
#[test]
fn a_write_sees_a_fence_changed_since_the_handle_last_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let sled = Store::new(strata_sled::SledStore::open(dir.path().join("db")).unwrap());
    for store in [mem(), sled] {
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db
            .collection::<Value>("invoices", CollectionOptions::new())
            .unwrap();
        c.put("k", &json!({ "n": 1 })).unwrap();
        c.put("k", &json!({ "n": 2 })).unwrap();
        Fence::add_pending(&store, "invoices", "target-hash").unwrap();
        let err = c.put("k", &json!({ "n": 3 })).unwrap_err();
        assert!(
            matches!(
                err,
                strata::CollectionError::Refused {
                    reason: Refusal::Fenced { .. },
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(c.get("k").unwrap(), Some(json!({ "n": 2 })));
        // Cleared elsewhere: the next write goes through (a refusal is never cached).
        Fence::update(&store, |f| {
            let mut n = f.clone();
            n.pending.clear();
            Ok(Some(n))
        })
        .unwrap();
        c.put("k", &json!({ "n": 4 })).unwrap();
        // A generation bump elsewhere: migration required at once.
        Fence::update(&store, |f| {
            let mut n = f.clone();
            n.generation += 1;
            Ok(Some(n))
        })
        .unwrap();
        let err = c.put("k", &json!({ "n": 5 })).unwrap_err();
        assert!(
            matches!(
                err,
                strata::CollectionError::Refused {
                    reason: Refusal::MigrationRequired { .. },
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(c.get("k").unwrap(), Some(json!({ "n": 4 })));
    }
}
