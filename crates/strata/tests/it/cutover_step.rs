//! A coordinated cutover is a payload step (issue #26 item 0): the cutover moves every row
//! to the next payload version with its transform registered as the step N → N+1, so a
//! row written later at N reads in the new shape, and an older build is told to upgrade
//! instead of writing old shapes under the new schema.

use super::policy_util::{config, mem};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::clock::ManualClock;
use strata::layout::envelope::{self, Envelope};
use strata::ops::cutover::CutoverOptions;
use strata::policy::{
    additive_only, baseline_key, coordinated_cutover, Baseline, Refusal, SchemaOptions, Verdict,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, Store};

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct InvNew {
    id: String,
    amount: Amount,
}

fn reshape(d: Value) -> Result<Value, String> {
    let total = d
        .get("total")
        .cloned()
        .ok_or_else(|| "no `total` to reshape".to_string())?;
    Ok(json!({"id": d["id"], "amount": {"gross": total}}))
}

fn new_build() -> CollectionOptions {
    CollectionOptions::new().schema(
        SchemaOptions::of::<InvNew>()
            .strategy(coordinated_cutover(reshape))
            .strategy(additive_only()),
    )
}

fn old_build_with_schema() -> CollectionOptions {
    CollectionOptions::new().schema(SchemaOptions::of::<InvOld>().strategy(additive_only()))
}

fn open(store: &Store, clock: &ManualClock) -> Database {
    Database::builder(store.clone())
        .policy(config(clock))
        .open()
        .unwrap()
}

/// The stored envelope of `invoices/<id>`.
fn stored(store: &Store, id: &str) -> (Envelope, Value) {
    let raw = store
        .get(format!("__nx/doc/invoices/{id}").as_bytes())
        .unwrap()
        .unwrap();
    let (env, json) = envelope::decode(&raw).unwrap();
    (env, serde_json::from_slice(json).unwrap())
}

/// Generation 0 in the old shape (payload v1), then the new build's cutover.
fn seeded_and_cut_over(n: usize) -> (Store, ManualClock) {
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let db = open(&store, &clock);
        let inv = db
            .collection::<InvOld>("invoices", old_build_with_schema())
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
        }
        assert_eq!(stored(&store, "i000").0.payload_version, 1);
    }
    let db = open(&store, &clock);
    let inv = db.collection::<InvNew>("invoices", new_build()).unwrap();
    assert_eq!(inv.current_version(), 2, "the transform is the step 1 → 2");
    assert!(matches!(
        db.verdict("invoices"),
        Some(Verdict::CutoverPending { .. })
    ));
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(report.records, n as u64);
    (store, clock)
}

#[test]
fn a_cutover_moves_every_row_to_the_next_payload_version() {
    let (store, clock) = seeded_and_cut_over(5);
    for i in 0..5 {
        let id = format!("i{i:03}");
        let (env, doc) = stored(&store, &id);
        assert_eq!(env.payload_version, 2, "{id} moved to v2 by the cutover");
        assert_eq!(
            env.lock_version, 2,
            "a cutover is a write: lock bumped once"
        );
        assert_eq!(doc, json!({"id": id, "amount": {"gross": i as f64}}));
    }
    // The baseline records the new schema at the new payload version.
    let raw = store.get(&baseline_key("invoices")).unwrap().unwrap();
    let baseline = Baseline::decode("invoices", &raw).unwrap();
    assert_eq!(baseline.payload_version, Some(2));
    // The new build reopened: unchanged, reads and writes.
    let db = open(&store, &clock);
    let inv = db.collection::<InvNew>("invoices", new_build()).unwrap();
    assert!(matches!(db.verdict("invoices"), Some(Verdict::Unchanged)));
    assert_eq!(
        inv.get("i003").unwrap().unwrap(),
        InvNew {
            id: "i003".into(),
            amount: Amount { gross: 3.0 }
        }
    );
    inv.put(
        "n1",
        &InvNew {
            id: "n1".into(),
            amount: Amount { gross: 9.0 },
        },
    )
    .unwrap();
    assert_eq!(stored(&store, "n1").0.payload_version, 2);
}

/// The issue's reproduction: a build restarted from the old code without a schema
/// declaration. Its write of an existing (moved) row is refused with the upgrade advice;
/// its new row is stored at v1 and read back by the new build in the new shape — never
/// accepted and unreadable.
#[test]
fn an_old_build_without_a_schema_is_refused_on_moved_rows_and_its_new_rows_read_in_the_new_shape() {
    let (store, clock) = seeded_and_cut_over(3);
    let old_db = open(&store, &clock);
    let old = old_db
        .collection::<InvOld>("invoices", CollectionOptions::new())
        .unwrap();
    let before = store.get(b"__nx/doc/invoices/i001").unwrap();
    let err = old
        .put(
            "i001",
            &InvOld {
                id: "i001".into(),
                total: 42.0,
            },
        )
        .unwrap_err();
    assert!(err.is_ahead(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("upgrade this instance"), "{msg}");
    assert!(!msg.contains("coordinated_cutover"), "{msg}");
    assert_eq!(store.get(b"__nx/doc/invoices/i001").unwrap(), before);
    let read = old.get("i001").unwrap_err();
    assert!(
        read.is_ahead() || read.to_string().contains("newer build"),
        "{read}"
    );
    // A new row from the old build: stored at v1…
    old.put(
        "late",
        &InvOld {
            id: "late".into(),
            total: 7.5,
        },
    )
    .unwrap();
    assert_eq!(stored(&store, "late").0.payload_version, 1);
    drop(old);
    drop(old_db);
    // …and upcast by the cutover's transform when the new build reads it.
    let db = open(&store, &clock);
    let inv = db.collection::<InvNew>("invoices", new_build()).unwrap();
    assert_eq!(
        inv.get("late").unwrap().unwrap(),
        InvNew {
            id: "late".into(),
            amount: Amount { gross: 7.5 }
        }
    );
    // The sweep brings it to v2 like any stale row (the cutover step is eager).
    let report = inv.sweep(strata::ops::sweep::SweepOptions::new()).unwrap();
    assert_eq!(report.counters.rewritten, 1, "{report:?}");
    assert_eq!(stored(&store, "late").0.payload_version, 2);
}

/// An old build that declares its (old) schema is told to upgrade — not to "register a
/// coordinated_cutover()" — and its writes change nothing; the baseline is not moved back.
#[test]
fn an_old_build_with_its_schema_is_told_to_upgrade() {
    let (store, clock) = seeded_and_cut_over(2);
    let baseline_before = store.get(&baseline_key("invoices")).unwrap();
    let db = open(&store, &clock);
    let old = db
        .collection::<InvOld>("invoices", old_build_with_schema())
        .unwrap();
    assert!(
        matches!(
            db.verdict("invoices"),
            Some(Verdict::Behind {
                stored: 2,
                build: 1
            })
        ),
        "{:?}",
        db.verdict("invoices")
    );
    let err = old
        .put(
            "fresh",
            &InvOld {
                id: "fresh".into(),
                total: 1.0,
            },
        )
        .unwrap_err();
    assert_eq!(
        err.refusal(),
        Some(&Refusal::BuildBehind {
            stored: 2,
            build: 1
        })
    );
    let msg = err.to_string();
    assert!(msg.contains("upgrade this instance"), "{msg}");
    assert!(!msg.contains("coordinated_cutover"), "{msg}");
    assert_eq!(store.get(b"__nx/doc/invoices/fresh").unwrap(), None);
    assert_eq!(
        store.get(&baseline_key("invoices")).unwrap(),
        baseline_before
    );
}

/// A row at the old version written after the cutover by another program (a sync peer,
/// an import) reads in the new shape, and a row already at the new version is never
/// transformed again by a rerun (the transform would fail on its own output here).
#[test]
fn a_v1_row_written_after_the_cutover_reads_in_the_new_shape() {
    let (store, clock) = seeded_and_cut_over(1);
    let v1 = envelope::encode(Envelope::new(1, 1), br#"{"id":"peer","total":3.25}"#);
    store
        .apply(Batch::new().set(b"__nx/doc/invoices/peer".to_vec(), v1))
        .unwrap();
    let db = open(&store, &clock);
    let inv = db.collection::<InvNew>("invoices", new_build()).unwrap();
    assert_eq!(
        inv.get("peer").unwrap().unwrap(),
        InvNew {
            id: "peer".into(),
            amount: Amount { gross: 3.25 }
        }
    );
    // Rows at v2 are current: nothing for the transform to do, never applied twice.
    assert_eq!(
        inv.get("i000").unwrap().unwrap(),
        InvNew {
            id: "i000".into(),
            amount: Amount { gross: 0.0 }
        }
    );
}

/// A later release declares the earlier cutover's transform as an upcast step and adds a
/// new cutover on top: both steps run in order, and a row still at v1 reaches v3.
#[test]
fn an_earlier_cutover_kept_as_a_step_under_a_new_one() {
    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
    struct InvNewer {
        id: String,
        gross_cents: i64,
    }
    let (store, clock) = seeded_and_cut_over(2);
    let v1 = envelope::encode(Envelope::new(1, 1), br#"{"id":"old","total":2.5}"#);
    store
        .apply(Batch::new().set(b"__nx/doc/invoices/old".to_vec(), v1))
        .unwrap();
    let db = open(&store, &clock);
    let options = CollectionOptions::new()
        .step(strata::policy::Transform::new(reshape).into_step(1))
        .schema(
            SchemaOptions::of::<InvNewer>()
                .strategy(coordinated_cutover(|d| {
                    let gross = d["amount"]["gross"]
                        .as_f64()
                        .ok_or_else(|| "no amount.gross".to_string())?;
                    Ok(json!({"id": d["id"], "gross_cents": (gross * 100.0) as i64}))
                }))
                .strategy(additive_only()),
        );
    let inv = db.collection::<InvNewer>("invoices", options).unwrap();
    assert_eq!(inv.current_version(), 3);
    db.run_schema_cutover(CutoverOptions::new()).unwrap();
    for (id, cents) in [("i000", 0), ("i001", 100), ("old", 250)] {
        let (env, _) = stored(&store, id);
        assert_eq!(env.payload_version, 3, "{id}");
        assert_eq!(
            inv.get(id).unwrap().unwrap(),
            InvNewer {
                id: id.into(),
                gross_cents: cents
            }
        );
    }
}

/// A transform that fails leaves the row untouched and the cutover names it.
#[test]
fn a_failing_cutover_step_names_the_row_and_changes_nothing() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let db = open(&store, &clock);
        let inv = db
            .collection::<InvOld>("invoices", old_build_with_schema())
            .unwrap();
        inv.put(
            "a",
            &InvOld {
                id: "a".into(),
                total: 1.0,
            },
        )
        .unwrap();
    }
    let bad = envelope::encode(Envelope::new(1, 1), br#"{"id":"b"}"#);
    store
        .apply(Batch::new().set(b"__nx/doc/invoices/b".to_vec(), bad.clone()))
        .unwrap();
    let db = open(&store, &clock);
    let _inv = db.collection::<InvNew>("invoices", new_build()).unwrap();
    let err = db.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no `total` to reshape"), "{msg}");
    assert!(msg.contains('b'), "{msg}");
    assert_eq!(store.get(b"__nx/doc/invoices/b").unwrap(), Some(bad));
}
