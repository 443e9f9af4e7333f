//! Writes under the fence: a write that passed the gate cannot land after the fence changed,
//! plain handles are fenced too, and a handle sees a fence changed through another path.

use super::*;

#[test]
fn a_write_that_passed_the_gate_cannot_land_after_the_fence_changed() {
    use crate::policy_util::Faulty;
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
