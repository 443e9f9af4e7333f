//! Deploy windows (issue #26 items 1–3): two builds on one store at once, downcast
//! steps, newer fields kept, complete and rollback.

use super::policy_util::{config, mem};
use super::window_shared::{build1, build2, open, stored, Acct, AcctV2};
use serde_json::json;
use strata::clock::ManualClock;
use strata::ops::window::{operational, WindowOptions};
use strata::policy::Refusal;
use strata::{Collection, Database};
use strata::{CollectionError, CollectionOptions};
use strata::{Mode, KEPT_FIELD};
use strata_store::{KvRead, KvWrite, Store};

fn acct(id: &str, owner: &str, balance: i64) -> Acct {
    Acct {
        id: id.into(),
        owner: owner.into(),
        balance,
    }
}

/// Build 1 with two accounts, then build 2 opened beside it: the window opens at v1.
fn two_builds() -> (
    Store,
    ManualClock,
    Database,
    Collection<Acct>,
    Database,
    Collection<AcctV2>,
) {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    c1.put("a1", &acct("a1", "ann", 10)).unwrap();
    c1.put("a2", &acct("a2", "al", 20)).unwrap();
    assert_eq!(operational(&store, "accts").unwrap(), None);
    let db2 = open(&store, &clock);
    let c2 = db2.collection::<AcctV2>("accts", build2()).unwrap();
    assert_eq!(c2.current_version(), 2);
    assert_eq!(
        operational(&store, "accts").unwrap(),
        Some(1),
        "build 2 opened the window at the stored baseline's version"
    );
    (store, clock, db1, c1, db2, c2)
}

#[test]
fn two_builds_read_and_write_every_document_during_a_window() {
    let (store, _clock, _db1, c1, _db2, c2) = two_builds();
    // Build 2 writes a new document: stored at v1, its tags kept.
    c2.put(
        "b1",
        &AcctV2 {
            id: "b1".into(),
            owner_name: "bob".into(),
            balance: 5,
            tags: vec!["vip".into()],
        },
    )
    .unwrap();
    let (env, doc) = stored(&store, "b1");
    assert_eq!(env.payload_version, 1);
    assert_eq!(doc["owner"], json!("bob"));
    assert_eq!(doc[KEPT_FIELD], json!({"tags": ["vip"], "__strata_at": 2}));
    assert!(doc.get("owner_name").is_none() && doc.get("tags").is_none());
    // Build 1 reads it and updates it: no "newer build" refusal, the tags survive.
    let read = c1.get_document("b1").unwrap().unwrap();
    assert_eq!(read.value, acct("b1", "bob", 5));
    c1.update("b1", &acct("b1", "bob", 6), read.lock_version)
        .unwrap();
    let (env, doc) = stored(&store, "b1");
    assert_eq!(env.payload_version, 1);
    assert_eq!(doc["balance"], json!(6));
    assert_eq!(
        doc[KEPT_FIELD],
        json!({"tags": ["vip"], "__strata_at": 2}),
        "build 1 kept build 2's field"
    );
    // Build 2 sees build 1's change and its own tags.
    assert_eq!(
        c2.get("b1").unwrap().unwrap(),
        AcctV2 {
            id: "b1".into(),
            owner_name: "bob".into(),
            balance: 6,
            tags: vec!["vip".into()],
        }
    );
    // Build 2 updates a row build 1 wrote: still at v1, build 1 reads it.
    let d = c2.get_document("a1").unwrap().unwrap();
    assert_eq!(d.value.owner_name, "ann");
    c2.update(
        "a1",
        &AcctV2 {
            balance: 11,
            ..d.value.clone()
        },
        d.lock_version,
    )
    .unwrap();
    assert_eq!(stored(&store, "a1").0.payload_version, 1);
    assert_eq!(c1.get("a1").unwrap().unwrap(), acct("a1", "ann", 11));
    // No KEPT_FIELD where nothing was dropped (empty tags round-trip).
    assert!(stored(&store, "a1").1.get(KEPT_FIELD).is_none());
    // The sweep does not move rows during the window.
    let report = c2.sweep(strata::ops::sweep::SweepOptions::new()).unwrap();
    assert_eq!(report.note, strata::ops::sweep::SweepNote::WindowOpen(1));
    assert_eq!(stored(&store, "a2").0.payload_version, 1);
}

#[test]
fn complete_waits_for_the_old_build_then_moves_every_row_forward() {
    let (store, clock, db1, c1, _db2, c2) = two_builds();
    c2.put(
        "b1",
        &AcctV2 {
            id: "b1".into(),
            owner_name: "bob".into(),
            balance: 5,
            tags: vec!["vip".into()],
        },
    )
    .unwrap();
    // Build 1 is live: complete waits, then times out naming it; nothing changes.
    let ticker = clock.clone();
    let err = c2
        .complete_window(
            WindowOptions::new()
                .timeout_ms(500)
                .poll(move || ticker.advance(100)),
        )
        .unwrap_err();
    assert!(
        matches!(err, CollectionError::WindowHoldouts { ref holdouts, .. } if holdouts.len() == 1 && holdouts[0].contains("at v1")),
        "{err}"
    );
    assert!(err.to_string().contains("still live"), "{err}");
    assert_eq!(operational(&store, "accts").unwrap(), Some(1));
    assert_eq!(stored(&store, "b1").0.payload_version, 1);
    // Build 1 leaves.
    drop(c1);
    drop(db1);
    let report = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!((report.from, report.to), (Some(1), 2));
    assert_eq!(report.swept, 3, "{report:?}");
    assert_eq!(operational(&store, "accts").unwrap(), None);
    for id in ["a1", "a2", "b1"] {
        let (env, doc) = stored(&store, id);
        assert_eq!(env.payload_version, 2, "{id}");
        assert!(doc.get(KEPT_FIELD).is_none(), "{id}: {doc}");
    }
    assert_eq!(stored(&store, "b1").1["tags"], json!(["vip"]));
    // Build 2 now writes at v2.
    c2.put(
        "b2",
        &AcctV2 {
            id: "b2".into(),
            owner_name: "bo".into(),
            balance: 1,
            tags: vec![],
        },
    )
    .unwrap();
    assert_eq!(stored(&store, "b2").0.payload_version, 2);
    // A build-1 instance started afterwards is told to upgrade.
    let late = open(&store, &clock);
    let c1 = late.collection::<Acct>("accts", build1()).unwrap();
    let err = c1.put("x", &acct("x", "x", 0)).unwrap_err();
    assert!(
        matches!(
            err.refusal(),
            Some(Refusal::BuildBehind {
                stored: 2,
                build: 1
            })
        ),
        "{err}"
    );
}

#[test]
fn rollback_before_complete_leaves_rows_build_one_reads_as_it_wrote_them() {
    let (store, _clock, db1, c1, db2, c2) = two_builds();
    let a2_before = store.get(b"__nx/doc/accts/a2").unwrap();
    c2.put(
        "b1",
        &AcctV2 {
            id: "b1".into(),
            owner_name: "bob".into(),
            balance: 5,
            tags: vec!["t".into()],
        },
    )
    .unwrap();
    let report = c2.rollback_window().unwrap();
    assert_eq!(report.operational, Some(1));
    assert_eq!((report.rows, report.above), (3, 0));
    drop(c2);
    drop(db2);
    // Build 1 reads every row; the row it wrote and nobody touched is byte-identical.
    assert_eq!(store.get(b"__nx/doc/accts/a2").unwrap(), a2_before);
    assert_eq!(c1.get("b1").unwrap().unwrap(), acct("b1", "bob", 5));
    assert_eq!(c1.iter().count(), 3);
    drop(c1);
    drop(db1);
}

#[test]
fn a_downcast_that_fails_writes_nothing_and_names_the_document() {
    let (store, _clock, _db1, _c1, _db2, c2) = two_builds();
    let err = c2
        .put(
            "r",
            &AcctV2 {
                id: "r".into(),
                owner_name: "refuse-me".into(),
                balance: 0,
                tags: vec![],
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, CollectionError::Downcast { from: 2, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`r`") && msg.contains("this owner cannot be written at v1"),
        "{msg}"
    );
    assert_eq!(store.get(b"__nx/doc/accts/r").unwrap(), None);
}

#[test]
fn a_downcast_needs_the_upcast_it_reverses() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db = open(&store, &clock);
    let err = db
        .collection::<Acct>("accts", CollectionOptions::new().downcast(2, |_| Ok(())))
        .unwrap_err();
    assert!(err.is_chain_error(), "{err}");
    assert!(
        err.to_string().contains("no upcast step from v1 to v2"),
        "{err}"
    );
    let dup = CollectionOptions::new()
        .upcast(1, Mode::Lazy, |_| Ok(()))
        .downcast(2, |_| Ok(()))
        .downcast(2, |_| Ok(()));
    let err = db.collection::<Acct>("accts2", dup).unwrap_err();
    assert!(err.to_string().contains("two downcasts from v2"), "{err}");
}

/// Without an older build's baseline (a fresh store) no window opens: the new build
/// writes at its own version.
#[test]
fn a_fresh_store_opens_no_window() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db = open(&store, &clock);
    let c2 = db.collection::<AcctV2>("accts", build2()).unwrap();
    c2.put(
        "n",
        &AcctV2 {
            id: "n".into(),
            owner_name: "n".into(),
            balance: 0,
            tags: vec![],
        },
    )
    .unwrap();
    assert_eq!(operational(&store, "accts").unwrap(), None);
    assert_eq!(stored(&store, "n").0.payload_version, 2);
}

/// A sealed collection in a window: build 2 writes sealed rows at v1 with their kept
/// fields inside the sealed body (no plaintext stored), build 1 carries them over.
#[test]
fn a_sealed_collection_takes_part_in_a_window() {
    use strata::seal::{Credential, KdfParams};
    let store = mem();
    let clock = ManualClock::new(1_000);
    let key = || Credential::passphrase("open sesame").with_kdf(KdfParams::insecure_fast());
    let open_sealed = || {
        Database::builder(store.clone())
            .policy(config(&clock))
            .key(key())
            .open()
            .unwrap()
    };
    let db1 = open_sealed();
    let c1 = db1.collection::<Acct>("accts", build1().sealed()).unwrap();
    c1.put("a1", &acct("a1", "ann", 1)).unwrap();
    let db2 = open_sealed();
    let c2 = db2
        .collection::<AcctV2>("accts", build2().sealed())
        .unwrap();
    assert_eq!(operational(&store, "accts").unwrap(), Some(1));
    let d = c2.get_document("a1").unwrap().unwrap();
    c2.update(
        "a1",
        &AcctV2 {
            tags: vec!["SECRET-TAG".into()],
            ..d.value
        },
        d.lock_version,
    )
    .unwrap();
    let raw = store.get(b"__nx/doc/accts/a1").unwrap().unwrap();
    assert!(
        !raw.windows(10).any(|w| w == b"SECRET-TAG"),
        "the kept field is sealed with the row"
    );
    let d1 = c1.get_document("a1").unwrap().unwrap();
    assert_eq!(d1.stored_version, 1);
    c1.update("a1", &acct("a1", "ann", 2), d1.lock_version)
        .unwrap();
    let back = c2.get("a1").unwrap().unwrap();
    assert_eq!(
        (back.balance, back.tags),
        (2, vec!["SECRET-TAG".to_string()])
    );
}

/// Build 2 with its step 1 → 2 lazy (the default mode): completing the window leaves the
/// rows at v1, with what build 2 kept.
fn build2_lazy() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            let owner = o.remove("owner").unwrap_or_default();
            o.insert("owner_name".into(), owner);
            o.entry("tags").or_insert_with(|| json!([]));
            Ok(())
        })
        .downcast(2, |o| {
            let owner = o.remove("owner_name").unwrap_or_default();
            o.insert("owner".into(), owner);
            o.remove("tags");
            Ok(())
        })
        .schema(
            strata::policy::SchemaOptions::of::<AcctV2>()
                .strategy(strata::policy::covered_by_upcasts()),
        )
}

/// Content build 2 kept with a v1 row has build 2's shape: a later build whose step
/// 2 → 3 renames `tags` to `labels` reads it as `labels`. (The kept content used to be
/// merged after the last step: build 3 read `labels: []` and a stray `tags`.) On sled
/// and redb, a window completed without an eager step.
#[test]
fn kept_content_is_merged_at_the_version_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let stores = [
        strata_redb::RedbStore::create_store(dir.path().join("s.redb")).unwrap(),
        strata_sled::SledStore::open_store(dir.path().join("sled")).unwrap(),
    ];
    for store in stores {
        let clock = ManualClock::new(1_000);
        let db1 = open(&store, &clock);
        let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
        c1.put("a1", &acct("a1", "ann", 1)).unwrap();
        let db2 = open(&store, &clock);
        let c2 = db2.collection::<AcctV2>("accts", build2_lazy()).unwrap();
        let vip = AcctV2 {
            id: "b1".into(),
            owner_name: "bob".into(),
            balance: 5,
            tags: vec!["vip".into()],
        };
        c2.put("b1", &vip).unwrap();
        drop(c1);
        drop(db1);
        let report = c2.complete_window(WindowOptions::new()).unwrap();
        assert_eq!(report.swept, 0, "a lazy step: rows stay at v1");
        assert_eq!(stored(&store, "b1").0.payload_version, 1);
        assert_eq!(c2.get("b1").unwrap().unwrap(), vip);
        drop(c2);
        drop(db2);
        // Build 3: `tags` renamed `labels`.
        let build3 = build2_lazy().upcast(2, Mode::Lazy, |o| {
            let tags = o.remove("tags").unwrap_or(json!([]));
            o.insert("labels".into(), tags);
            Ok(())
        });
        let db3 = Database::builder(store.clone()).open().unwrap();
        let c3 = db3
            .collection::<serde_json::Value>("accts", build3)
            .unwrap();
        assert_eq!(
            c3.get("b1").unwrap().unwrap(),
            json!({"id": "b1", "owner_name": "bob", "balance": 5, "labels": ["vip"]})
        );
        assert_eq!(
            c3.get("a1").unwrap().unwrap(),
            json!({"id": "a1", "owner_name": "ann", "balance": 1, "labels": []})
        );
    }
}

/// Build 1 updating a row one of whose values is the text `__strata_kept` (a value, not
/// the kept member) still carries build 2's kept fields over: the check
/// for a kept member already in build 1's JSON looked for the bytes anywhere, so such a
/// document lost build 2's tags on every write of build 1.
#[test]
fn a_value_that_spells_the_kept_member_does_not_drop_the_kept_fields() {
    let (store, _clock, _db1, c1, _db2, c2) = two_builds();
    // A value equal to the member's name: its JSON is `"owner":"__strata_kept"`.
    let owner = KEPT_FIELD;
    c2.put(
        "b1",
        &AcctV2 {
            id: "b1".into(),
            owner_name: owner.into(),
            balance: 5,
            tags: vec!["vip".into()],
        },
    )
    .unwrap();
    let read = c1.get_document("b1").unwrap().unwrap();
    assert_eq!(read.value.owner, owner);
    c1.update("b1", &acct("b1", owner, 6), read.lock_version)
        .unwrap();
    let (_, doc) = stored(&store, "b1");
    assert_eq!(doc["owner"], json!(owner));
    assert_eq!(
        doc[KEPT_FIELD],
        json!({"tags": ["vip"], "__strata_at": 2}),
        "build 1 dropped build 2's field"
    );
    assert_eq!(c2.get("b1").unwrap().unwrap().tags, vec!["vip".to_string()]);
}

/// The payload version the stored schema baseline of `accts` records.
fn baseline_version(store: &Store) -> Option<i32> {
    strata::policy::Baseline::load(store, "accts")
        .unwrap()
        .and_then(|b| b.payload_version)
}

/// `complete_window` without an open window used to answer "already at v2" without
/// looking: here the window record is gone (as `strata repair` removes a damaged one)
/// while the store still records build 1's schema and every row is at v1. It must not
/// claim v2: it refuses, naming the collection, the version the store records and what
/// to do, and changes nothing.
#[test]
fn complete_without_a_window_does_not_claim_the_collection_is_at_this_build() {
    let (store, _clock, db1, c1, _db2, c2) = two_builds();
    drop(c1);
    drop(db1);
    store
        .apply(strata_store::Batch::new().delete(b"__nx/window/accts".to_vec()))
        .unwrap();
    assert_eq!(baseline_version(&store), Some(1));
    let err = c2.complete_window(WindowOptions::new()).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::NoWindow {
                recorded: Some(1),
                build: 2,
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`accts`") && msg.contains("v1") && msg.contains("nothing was changed"),
        "{msg}"
    );
    assert_eq!(baseline_version(&store), Some(1), "nothing declared");
    assert_eq!(operational(&store, "accts").unwrap(), None);
    for id in ["a1", "a2"] {
        assert_eq!(stored(&store, id).0.payload_version, 1, "{id}");
    }
}

/// A second `complete` after the window completed reports what the store says: with an
/// eager step the marker records the sweep to v2 (`AlreadyAt(2)`); with a lazy one no
/// sweep exists and rows stay at v1 (`NoEagerStep`, never "already at v2").
#[test]
fn complete_again_reports_the_sweep_the_store_records() {
    let (store, _clock, db1, c1, _db2, c2) = two_builds();
    drop(c1);
    drop(db1);
    let first = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(first.from, Some(1));
    let again = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(again.from, None);
    assert_eq!(again.to, 2);
    assert_eq!(again.swept, 0);
    assert_eq!(again.sweep, strata::ops::sweep::SweepNote::AlreadyAt(2));

    let store2 = mem();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store2, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    c1.put("a1", &acct("a1", "ann", 1)).unwrap();
    let db2 = open(&store2, &clock);
    let c2 = db2.collection::<AcctV2>("accts", build2_lazy()).unwrap();
    drop(c1);
    drop(db1);
    c2.complete_window(WindowOptions::new()).unwrap();
    let again = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(again.from, None);
    assert_eq!(
        again.sweep,
        strata::ops::sweep::SweepNote::NoEagerStep,
        "no sweep ever ran: rows are at v1, not v2"
    );
    assert_eq!(stored(&store2, "a1").0.payload_version, 1);
    drop(store);
}

/// After `complete` a rollback is no longer free: `rollback_window` used to return Ok
/// with 0 rows. It refuses, naming the collection and pointing at `revert`.
#[test]
fn rollback_after_complete_is_refused_and_points_at_revert() {
    let (store, _clock, db1, c1, _db2, c2) = two_builds();
    drop(c1);
    drop(db1);
    c2.complete_window(WindowOptions::new()).unwrap();
    let before = stored(&store, "a1");
    let err = c2.rollback_window().unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::NoWindowToRollBack {
                recorded: Some(2),
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`accts`") && msg.contains("revert") && msg.contains("--to"),
        "{msg}"
    );
    assert_eq!(stored(&store, "a1"), before, "nothing changed");
    assert_eq!(operational(&store, "accts").unwrap(), None);
}

/// Build 2 of a three-build chain: v1 `{id, owner}`, v2 adds `dollars`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
struct Priced {
    id: String,
    owner: String,
    #[serde(default)]
    dollars: i64,
}

/// Build 3 of the chain: v3 stores `cents` instead of `dollars` (whole dollars at v2:
/// the cents below a dollar are what v2 and v1 cannot express).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
struct PricedV3 {
    id: String,
    owner: String,
    cents: i64,
}

fn chain_to_2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            o.entry("dollars").or_insert_with(|| json!(0));
            Ok(())
        })
        .downcast(2, |o| {
            o.remove("dollars");
            Ok(())
        })
}

fn chain_to_3() -> CollectionOptions {
    chain_to_2()
        .upcast(2, Mode::Lazy, |o| {
            let dollars = o.remove("dollars").and_then(|d| d.as_i64()).unwrap_or(0);
            o.insert("cents".into(), json!(dollars * 100));
            Ok(())
        })
        .downcast(3, |o| {
            let cents = o.remove("cents").and_then(|c| c.as_i64()).unwrap_or(0);
            o.insert("dollars".into(), json!(cents / 100));
            Ok(())
        })
}

/// Content build 3 kept (at v3) with a v1 row, read and written by build 2 (older than
/// build 3, newer than the row) inside a window at v1: build 3 must get back exactly the
/// `cents` it kept. It used to be merged after build 2's last step (v3 content in a v2
/// object), then dropped by build 2's typed write, or — when build 2 wrote the merged
/// tree — relabelled v2 and merged at v2, where step 2 → 3 overwrote it with `dollars × 100`.
#[test]
fn a_newer_builds_kept_content_survives_an_older_builds_read_and_write() {
    let store = mem();
    strata::ops::window::open(&store, "prices", 1).unwrap();
    let db3 = Database::builder(store.clone()).open().unwrap();
    let c3 = db3.collection::<PricedV3>("prices", chain_to_3()).unwrap();
    let db2 = Database::builder(store.clone()).open().unwrap();
    let c2 = db2.collection::<Priced>("prices", chain_to_2()).unwrap();
    let c2raw = db2
        .collection::<serde_json::Value>("prices", chain_to_2())
        .unwrap();
    for id in ["p1", "p2"] {
        c3.put(
            id,
            &PricedV3 {
                id: id.into(),
                owner: "ann".into(),
                cents: 150,
            },
        )
        .unwrap();
        let raw = store
            .get(format!("__nx/doc/prices/{id}").as_bytes())
            .unwrap()
            .unwrap();
        let (env, json) = strata::layout::envelope::decode(&raw).unwrap();
        assert_eq!(env.payload_version, 1);
        let doc: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(doc[KEPT_FIELD], json!({"cents": 150, "__strata_at": 3}));
    }
    // Build 2 (typed) reads p1 at v2 shape and updates it.
    let d = c2.get_document("p1").unwrap().unwrap();
    assert_eq!(d.value.dollars, 0, "v1 rows have no dollars");
    c2.update(
        "p1",
        &Priced {
            owner: "bob".into(),
            ..d.value
        },
        d.lock_version,
    )
    .unwrap();
    // Build 2 (untyped) writes back exactly the tree it read for p2.
    let d = c2raw.get_document("p2").unwrap().unwrap();
    assert!(
        d.value.get("cents").is_none(),
        "v3 content must not appear as a v2 member: {}",
        d.value
    );
    let mut v = d.value.clone();
    v["owner"] = json!("bob");
    c2raw.update("p2", &v, d.lock_version).unwrap();
    for id in ["p1", "p2"] {
        assert_eq!(
            c3.get(id).unwrap().unwrap(),
            PricedV3 {
                id: id.into(),
                owner: "bob".into(),
                cents: 150,
            },
            "{id}: build 3 gets back the cents it kept, with build 2's change"
        );
    }
}

/// Read-repair stays off inside a window, for the newer build too (a decision, see
/// `Collection` read-repair's docs): build 2 rewriting a v1 row at v2 would put it above
/// the operational version, and build 1 — still live, and the reason the window exists —
/// could no longer read it nor write it. So build 2's read leaves the row byte-identical
/// and build 1 keeps reading and updating it; once the window completes, build 2's reads
/// repair again.
#[test]
fn read_repair_waits_for_the_window_to_complete() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    c1.put("a1", &acct("a1", "ann", 1)).unwrap();
    let db2 = open(&store, &clock);
    let c2 = db2
        .collection::<AcctV2>("accts", build2_lazy().read_repair(true))
        .unwrap();
    assert_eq!(operational(&store, "accts").unwrap(), Some(1));
    let before = store.get(b"__nx/doc/accts/a1").unwrap();
    let d = c2.get_document("a1").unwrap().unwrap();
    assert!(d.upcast);
    assert_eq!(d.value.owner_name, "ann");
    assert_eq!(
        store.get(b"__nx/doc/accts/a1").unwrap(),
        before,
        "no read-repair inside the window"
    );
    // Build 1 still reads and writes the row.
    let d1 = c1.get_document("a1").unwrap().unwrap();
    assert_eq!(d1.value, acct("a1", "ann", 1));
    c1.update("a1", &acct("a1", "ann", 2), d1.lock_version)
        .unwrap();
    drop(c1);
    drop(db1);
    let report = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(report.swept, 0, "a lazy step: rows stay at v1");
    assert_eq!(stored(&store, "a1").0.payload_version, 1);
    assert_eq!(c2.get("a1").unwrap().unwrap().balance, 2);
    let (env, doc) = stored(&store, "a1");
    assert_eq!(
        env.payload_version, 2,
        "read-repaired after complete: {doc}"
    );
    assert_eq!(doc["owner_name"], json!("ann"));
}
