//! Revert after complete (issue #26 item 4): the downcast sweep back to an older version,
//! its dry run, rows newer than the chain, failing downcasts and refusals. The SIGKILL
//! scenario is `tests/it/crash/revert.rs`.

use super::policy_util::{config, mem};
use super::window_shared::{build1, build2, open, stored, Acct, AcctV2};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use strata::clock::ManualClock;
use strata::layout::envelope::{self, Envelope};
use strata::ops::revert::{unfinished, RevertOptions};
use strata::ops::window::{operational, WindowOptions};
use strata::policy::Baseline;
use strata::CollectionError;
use strata::KEPT_FIELD;
use strata::{Collection, Database};
use strata_store::{Batch, KvRead, KvWrite, Pages, ScanLimits, Store};

/// Every record of the store, byte for byte.
fn everything(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    Pages::new(store, b"", ScanLimits::new(1000, 64 << 20).unwrap())
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r.key.to_vec(), r.value.to_vec())
        })
        .collect()
}

fn v2(id: &str, owner: &str, balance: i64, tags: &[&str]) -> AcctV2 {
    AcctV2 {
        id: id.into(),
        owner_name: owner.into(),
        balance,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

const N: usize = 40;

/// Build 1 writes N accounts; build 2 opens beside it (window at v1) and writes `b1`
/// with tags; build 1 leaves; the window completes (every row swept to v2). Returns the
/// rows as build 1 left them before the sweep (the copy a revert must restore).
fn completed() -> (
    Store,
    ManualClock,
    Database,
    Collection<AcctV2>,
    BTreeMap<String, Value>,
) {
    let store = mem();
    let clock = ManualClock::new(1_000);
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    for i in 0..N {
        let id = format!("a{i:03}");
        c1.put(
            &id,
            &Acct {
                id: id.clone(),
                owner: format!("o{i}"),
                balance: i as i64,
            },
        )
        .unwrap();
    }
    let db2 = open(&store, &clock);
    let c2 = db2.collection::<AcctV2>("accts", build2()).unwrap();
    c2.put("b1", &v2("b1", "bob", 5, &["vip"])).unwrap();
    let mut before = BTreeMap::new();
    for i in 0..N {
        let id = format!("a{i:03}");
        let (env, doc) = stored(&store, &id);
        assert_eq!(env.payload_version, 1);
        before.insert(id, doc);
    }
    before.insert("b1".into(), stored(&store, "b1").1);
    drop(c1);
    drop(db1);
    let r = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(r.swept, N as u64 + 1);
    for id in before.keys() {
        assert_eq!(stored(&store, id).0.payload_version, 2, "{id}");
    }
    (store, clock, db2, c2, before)
}

#[test]
fn revert_after_complete_restores_every_row_as_build_one_wrote_it() {
    let (store, clock, _db2, c2, before) = completed();
    // Build 2 gives a000 content v1 cannot express.
    let d = c2.get_document("a000").unwrap().unwrap();
    c2.update("a000", &v2("a000", "o0", 0, &["new"]), d.lock_version)
        .unwrap();
    let locks: BTreeMap<String, u64> = before
        .keys()
        .map(|id| (id.clone(), stored(&store, id).0.lock_version))
        .collect();

    // The dry run names what the downcast drops and writes nothing.
    let snapshot = everything(&store);
    let dry = c2.revert(1, RevertOptions::new().dry_run(true)).unwrap();
    assert!(everything(&store) == snapshot, "a dry run wrote");
    assert!(dry.dry_run && dry.finished);
    assert_eq!((dry.scanned, dry.reverted), (N as u64 + 1, N as u64 + 1));
    assert_eq!(dry.newer_content, 2, "{dry:?}");
    let named: Vec<(&str, &str)> = dry
        .newer_rows
        .iter()
        .map(|r| (r.key.as_str(), r.detail.as_str()))
        .collect();
    assert_eq!(named, [("a000", "tags"), ("b1", "tags")]);
    assert_eq!(operational(&store, "accts").unwrap(), None);

    // The revert.
    let r = c2.revert(1, RevertOptions::new()).unwrap();
    assert!(r.is_complete(), "{r:?}");
    assert!(!r.resumed);
    assert_eq!((r.reverted, r.failed, r.ahead), (N as u64 + 1, 0, 0));
    assert_eq!(operational(&store, "accts").unwrap(), Some(1));
    assert_eq!(unfinished(&store, "accts").unwrap(), None);
    assert_eq!(
        Baseline::load(&store, "accts")
            .unwrap()
            .unwrap()
            .payload_version,
        Some(1),
        "build 1's schema baseline is back"
    );
    for (id, doc) in &before {
        let (env, now) = stored(&store, id);
        assert_eq!(env.payload_version, 1, "{id}");
        assert_eq!(
            env.lock_version, locks[id],
            "{id}: a revert keeps lock versions"
        );
        if id == "a000" {
            let mut expected = doc.clone();
            expected[KEPT_FIELD] = json!({"tags": ["new"], "__strata_at": 2});
            assert_eq!(&now, &expected, "{id}");
        } else {
            assert_eq!(&now, doc, "{id}: not what build 1 wrote before the sweep");
        }
    }

    // Build 1 deployed again: opens without being told it is behind, reads and writes
    // every row; its write keeps build 2's field.
    let db1 = open(&store, &clock);
    let c1 = db1.collection::<Acct>("accts", build1()).unwrap();
    assert_eq!(c1.iter().count(), N + 1);
    let d = c1.get_document("a000").unwrap().unwrap();
    c1.update(
        "a000",
        &Acct {
            balance: 100,
            ..d.value
        },
        d.lock_version,
    )
    .unwrap();
    c1.put(
        "c1",
        &Acct {
            id: "c1".into(),
            owner: "cy".into(),
            balance: 1,
        },
    )
    .unwrap();
    // Build 2 still running writes at v1 (the window), and reads the kept field back.
    assert_eq!(
        c2.get("a000").unwrap().unwrap(),
        v2("a000", "o0", 100, &["new"])
    );
    c2.put("b2", &v2("b2", "bo", 2, &[])).unwrap();
    assert_eq!(stored(&store, "b2").0.payload_version, 1);
    drop(c1);
    drop(db1);

    // Completing the window again moves every row forward again (the sweep runs).
    let again = c2.complete_window(WindowOptions::new()).unwrap();
    assert_eq!(again.swept, N as u64 + 3, "{again:?}");
    assert_eq!(
        stored(&store, "a000").1["tags"],
        json!(["new"]),
        "the kept field came back"
    );
    assert_eq!(
        Baseline::load(&store, "accts")
            .unwrap()
            .unwrap()
            .payload_version,
        Some(2)
    );
}

#[test]
fn dropping_newer_fields_leaves_exactly_build_one_rows() {
    let (store, _clock, _db2, c2, before) = completed();
    let r = c2
        .revert(1, RevertOptions::new().drop_newer_fields(true))
        .unwrap();
    assert!(r.is_complete());
    assert_eq!(r.newer_content, 1, "b1's tags are dropped");
    let mut b1 = before["b1"].clone();
    b1.as_object_mut().unwrap().remove(KEPT_FIELD);
    assert_eq!(stored(&store, "b1").1, b1);
    assert!(c2.get("b1").unwrap().unwrap().tags.is_empty());
}

#[test]
fn revert_never_touches_newer_rows_and_reports_a_failing_downcast() {
    let (store, _clock, _db2, c2, _before) = completed();
    // A row written by a build newer than this one (v3), and one v1 cannot hold.
    let v3 = envelope::encode(
        Envelope::new(3, 7),
        br#"{"id":"z","owner_name":"zed","balance":1,"tags":[],"extra":1}"#,
    );
    store
        .apply(Batch::new().set(b"__nx/doc/accts/z".to_vec(), v3.clone()))
        .unwrap();
    c2.put("r1", &v2("r1", "refuse-me", 1, &[])).unwrap();
    let r1_before = store.get(b"__nx/doc/accts/r1").unwrap();
    let r = c2.revert(1, RevertOptions::new()).unwrap();
    assert!(r.finished && !r.is_complete(), "{r:?}");
    assert_eq!((r.ahead, r.failed), (1, 1));
    assert_eq!(r.reverted, N as u64 + 1);
    assert_eq!(r.failures.len(), 1);
    assert_eq!(r.failures[0].key, "r1");
    assert!(
        r.failures[0].detail.contains("cannot be written at v1"),
        "{:?}",
        r.failures[0]
    );
    assert_eq!(
        store.get(b"__nx/doc/accts/z").unwrap(),
        Some(v3),
        "newer row touched"
    );
    assert_eq!(
        store.get(b"__nx/doc/accts/r1").unwrap(),
        r1_before,
        "failed row touched"
    );
    assert_eq!(stored(&store, "a001").0.payload_version, 1);
}

#[test]
fn a_revert_is_refused_when_it_cannot_run_and_changes_nothing() {
    let (store, clock, _db2, c2, _before) = completed();
    let err = c2.revert(2, RevertOptions::new()).unwrap_err();
    assert!(
        matches!(err, CollectionError::Revert { to: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("lower version"), "{err}");
    // A build without downcasts cannot revert.
    let db3 = open(&store, &clock);
    let plain = db3
        .collection::<AcctV2>(
            "accts",
            strata::CollectionOptions::new()
                .identity_fields(["id"])
                .upcast(1, strata::Mode::Eager, |o| {
                    let v = o.remove("owner").unwrap_or_default();
                    o.insert("owner_name".into(), v);
                    Ok(())
                }),
        )
        .unwrap();
    let snapshot = everything(&store);
    let err = plain.revert(1, RevertOptions::new()).unwrap_err();
    assert!(err.to_string().contains("downcast"), "{err}");
    // An unfinished revert to another version blocks a new one.
    store
        .apply(Batch::new().set(
            b"__nx/revert/accts".to_vec(),
            [&b"NXRB\x01"[..], &0i32.to_be_bytes()[..]].concat(),
        ))
        .unwrap();
    let err = c2.revert(1, RevertOptions::new()).unwrap_err();
    assert!(err.to_string().contains("unfinished"), "{err}");
    store
        .apply(Batch::new().delete(b"__nx/revert/accts".to_vec()))
        .unwrap();
    assert!(
        everything(&store) == snapshot,
        "a refused revert changed the store"
    );
}

#[test]
fn an_aborted_revert_resumes_after_its_cursor() {
    let (store, _clock, _db2, c2, before) = completed();
    let batches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = batches.clone();
    let r = c2
        .revert(
            1,
            RevertOptions::new()
                .limits(strata::pass::PassLimits::new(10, 1 << 20).unwrap())
                .abort_when(move || seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1),
        )
        .unwrap();
    assert!(!r.finished, "{r:?}");
    assert_eq!(unfinished(&store, "accts").unwrap(), Some(1));
    let moved = before
        .keys()
        .filter(|id| stored(&store, id).0.payload_version == 1)
        .count();
    assert!(moved > 0 && moved < before.len(), "{moved}");
    // The window it reopened cannot complete under it.
    let err = c2.complete_window(WindowOptions::new()).unwrap_err();
    assert!(
        matches!(err, CollectionError::Revert { to: 1, .. })
            && err.to_string().contains("unfinished"),
        "{err}"
    );
    assert_eq!(operational(&store, "accts").unwrap(), Some(1));
    let r = c2.revert(1, RevertOptions::new()).unwrap();
    assert!(r.resumed && r.is_complete(), "{r:?}");
    assert_eq!(r.reverted as usize, before.len() - moved);
    for (id, doc) in &before {
        assert_eq!(&stored(&store, id).1, doc, "{id}");
    }
}

#[test]
fn a_sealed_collection_reverts_sealed_and_a_fence_refuses_a_revert() {
    use strata::seal::{Credential, KdfParams};
    let store = mem();
    let clock = ManualClock::new(1_000);
    let open_sealed = || {
        Database::builder(store.clone())
            .policy(config(&clock))
            .key(Credential::passphrase("open sesame").with_kdf(KdfParams::insecure_fast()))
            .open()
            .unwrap()
    };
    {
        let db1 = open_sealed();
        let c1 = db1.collection::<Acct>("accts", build1().sealed()).unwrap();
        c1.put(
            "a",
            &Acct {
                id: "a".into(),
                owner: "ann".into(),
                balance: 1,
            },
        )
        .unwrap();
    }
    let db2 = open_sealed();
    let c2 = db2
        .collection::<AcctV2>("accts", build2().sealed())
        .unwrap();
    c2.complete_window(WindowOptions::new()).unwrap();
    let d = c2.get_document("a").unwrap().unwrap();
    c2.update("a", &v2("a", "ann", 1, &["SECRET-TAG"]), d.lock_version)
        .unwrap();
    assert_eq!(d.stored_version, 2);
    let raw = store.get(b"__nx/doc/accts/a").unwrap().unwrap();
    // A pending cutover fences the collection: the revert is refused like a write and
    // changes nothing.
    strata::policy::Fence::add_pending(&store, "accts", "0123").unwrap();
    let before = everything(&store);
    let err = c2.revert(1, RevertOptions::new()).unwrap_err();
    assert!(
        matches!(err.refusal(), Some(strata::policy::Refusal::Fenced { .. })),
        "{err}"
    );
    assert!(everything(&store) == before, "a fenced revert wrote");
    strata::policy::Fence::update(&store, |cur| {
        let mut next = cur.clone();
        next.pending.clear();
        Ok(Some(next))
    })
    .unwrap();
    let r = c2.revert(1, RevertOptions::new()).unwrap();
    assert!(r.is_complete(), "{r:?}");
    let after = store.get(b"__nx/doc/accts/a").unwrap().unwrap();
    assert_ne!(after, raw);
    assert!(
        strata::seal::peek(&after).is_some_and(|(env, sealed)| sealed && env.payload_version == 1),
        "the reverted row is sealed at v1"
    );
    assert!(
        !after.windows(10).any(|w| w == b"SECRET-TAG"),
        "kept field sealed with the row"
    );
    let db1 = open_sealed();
    let c1 = db1.collection::<Acct>("accts", build1().sealed()).unwrap();
    assert_eq!(c1.get("a").unwrap().unwrap().owner, "ann");
    assert_eq!(c2.get("a").unwrap().unwrap().tags, ["SECRET-TAG"]);
}
