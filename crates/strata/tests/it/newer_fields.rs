//! Newer fields kept outside a deploy window (issue #26 item 3): an older build updating
//! a row a newer build wrote keeps the properties it does not know — and the row's
//! version — when the store's schema history proves the newer build's change additive
//! (new optional properties only); under a non-additive history it is refused as before.

use super::policy_util::mem;
use super::window_shared::{open, stored};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::clock::ManualClock;
use strata::policy::{additive_only, covered_by_upcasts, Refusal, SchemaOptions, Verdict};
use strata::{CollectionError, CollectionOptions};
use strata::{Mode, StepError};
use strata_store::KvRead;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Acct {
    id: String,
    owner: String,
    balance: i64,
}

/// Build 2, additive: a new optional `nickname` and `address`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct AcctV2 {
    id: String,
    owner: String,
    balance: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nickname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<Value>,
}

/// Build 2, non-additive: `owner` renamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct AcctRenamed {
    id: String,
    owner_name: String,
    balance: i64,
}

fn build1() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .schema(SchemaOptions::of::<Acct>().strategy(additive_only()))
}

fn additive_build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |_| Ok::<(), StepError>(()))
        .schema(SchemaOptions::of::<AcctV2>().strategy(additive_only()))
}

fn renaming_build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            let v = o
                .remove("owner")
                .ok_or_else(|| StepError::new("no owner"))?;
            o.insert("owner_name".into(), v);
            Ok(())
        })
        .schema(SchemaOptions::of::<AcctRenamed>().strategy(covered_by_upcasts()))
}

#[test]
fn an_old_build_keeps_the_fields_of_an_additive_newer_build() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    c1.put(
        "a",
        &Acct {
            id: "a".into(),
            owner: "ann".into(),
            balance: 1,
        },
    )
    .unwrap();
    drop(c1);
    drop(db1);
    // Build 2 adds optional properties and writes a row at v2 with them.
    let db2 = open(&store, &clock);
    let c2 = db2
        .collection::<AcctV2>("accts", additive_build2())
        .unwrap();
    assert!(matches!(db2.verdict("accts"), Some(Verdict::Allowed)));
    let x = AcctV2 {
        id: "x".into(),
        owner: "xi".into(),
        balance: 5,
        nickname: Some("X".into()),
        address: Some(json!({"city": "Oslo", "zip": "0150"})),
    };
    c2.put("x", &x).unwrap();
    assert_eq!(stored(&store, "x").0.payload_version, 2);

    // Build 1 deployed again (a rollback, or an instance not yet upgraded).
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    assert!(
        matches!(db1.verdict("accts"), Some(Verdict::BehindAdditive { stored: 2, build: 1, ref added }) if added == &["address", "nickname"]),
        "{:?}",
        db1.verdict("accts")
    );
    let d = c1.get_document("x").unwrap().unwrap();
    assert_eq!(d.stored_version, 2);
    assert_eq!(d.value.owner, "xi");
    c1.update(
        "x",
        &Acct {
            balance: 6,
            ..d.value.clone()
        },
        d.lock_version,
    )
    .unwrap();
    let (env, doc) = stored(&store, "x");
    assert_eq!(env.payload_version, 2, "the row keeps its version");
    assert_eq!(env.lock_version, d.lock_version + 1);
    assert_eq!(doc["nickname"], json!("X"), "{doc}");
    assert_eq!(doc["address"], json!({"city": "Oslo", "zip": "0150"}));
    assert_eq!(doc["balance"], json!(6));
    // A put over it keeps them too; a new row is written at v1.
    c1.put(
        "x",
        &Acct {
            id: "x".into(),
            owner: "xavier".into(),
            balance: 7,
        },
    )
    .unwrap();
    c1.put(
        "n",
        &Acct {
            id: "n".into(),
            owner: "new".into(),
            balance: 0,
        },
    )
    .unwrap();
    assert_eq!(stored(&store, "n").0.payload_version, 1);
    // Build 2 reads build 1's changes and its own fields.
    assert_eq!(
        c2.get("x").unwrap().unwrap(),
        AcctV2 {
            owner: "xavier".into(),
            balance: 7,
            ..x.clone()
        }
    );
    assert_eq!(c2.get("n").unwrap().unwrap().nickname, None);

    // The rule is per collection: off, the ahead guard refuses as before.
    let db3 = open(&store, &clock);
    let strict = db3
        .collection::<Acct>("accts", build1().keep_newer_fields(false))
        .unwrap();
    let d = strict.get_document("x").unwrap().unwrap();
    let err = strict.update("x", &d.value, d.lock_version).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::AheadOfBuild {
                stored: 2,
                current: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(stored(&store, "x").1["nickname"], json!("X"));
}

#[test]
fn an_old_build_is_refused_on_rows_of_a_non_additive_newer_build() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let db1 = open(&store, &clock);
        db1.collection::<Acct>("accts", build1()).unwrap();
    }
    let db2 = open(&store, &clock);
    let c2 = db2
        .collection::<AcctRenamed>("accts", renaming_build2())
        .unwrap();
    c2.put(
        "x",
        &AcctRenamed {
            id: "x".into(),
            owner_name: "xi".into(),
            balance: 5,
        },
    )
    .unwrap();
    let before = store.get(b"__nx/doc/accts/x").unwrap();
    // With its schema declared: told it is behind, every write refused.
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    let err = c1
        .put(
            "x",
            &Acct {
                id: "x".into(),
                owner: "o".into(),
                balance: 1,
            },
        )
        .unwrap_err();
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
    // Without a declaration there is no proof: the ahead guard refuses.
    let db0 = open(&store, &clock);
    let bare = db0
        .collection::<Acct>("accts", CollectionOptions::new().identity_fields(["id"]))
        .unwrap();
    let err = bare
        .put(
            "x",
            &Acct {
                id: "x".into(),
                owner: "o".into(),
                balance: 1,
            },
        )
        .unwrap_err();
    assert!(matches!(err, CollectionError::AheadOfBuild { .. }), "{err}");
    assert_eq!(store.get(b"__nx/doc/accts/x").unwrap(), before);
}

/// The rolling deploy order: build-1 instances are running when build 2 (additive) is
/// deployed and writes rows at v2. A running instance's updates of those rows — one at a
/// time, and in a write set, on redb — keep build 2's properties. (They read the schema
/// history only when they opened, and refused such rows as written by a newer build.)
#[test]
fn old_instances_running_before_the_newer_build_keep_its_fields() {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_redb::RedbStore::create_store(dir.path().join("s.redb")).unwrap();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    let db1w = open(&store, &clock);
    let c1w = db1w.collection::<Acct>("accts", build1()).unwrap();
    let db2 = open(&store, &clock);
    let c2 = db2
        .collection::<AcctV2>("accts", additive_build2())
        .unwrap();
    for id in ["x", "y"] {
        c2.put(
            id,
            &AcctV2 {
                id: id.into(),
                owner: "xi".into(),
                balance: 5,
                nickname: Some(format!("nick-{id}")),
                address: None,
            },
        )
        .unwrap();
        assert_eq!(stored(&store, id).0.payload_version, 2);
    }
    let d = c1.get_document("x").unwrap().unwrap();
    let bumped = Acct {
        balance: 6,
        ..d.value.clone()
    };
    c1.update("x", &bumped, d.lock_version).unwrap();
    let (env, doc) = stored(&store, "x");
    assert_eq!(env.payload_version, 2);
    assert_eq!(doc["balance"], json!(6));
    assert_eq!(doc["nickname"], json!("nick-x"), "{doc}");
    // The other instance, through a write set.
    let d = c1w.get_document("y").unwrap().unwrap();
    let bumped = Acct {
        balance: 7,
        ..d.value.clone()
    };
    db1w.write(|w| c1w.update_in(w, "y", &bumped, d.lock_version))
        .unwrap();
    let (env, doc) = stored(&store, "y");
    assert_eq!(env.payload_version, 2);
    assert_eq!(doc["balance"], json!(7));
    assert_eq!(doc["nickname"], json!("nick-y"), "{doc}");
    assert_eq!(
        c2.get("y").unwrap().unwrap().nickname.as_deref(),
        Some("nick-y")
    );
}
