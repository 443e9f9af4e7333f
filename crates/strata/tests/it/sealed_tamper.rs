//! A tampered sealed row among stale ones (issue 15 audit): with an eager upcast and
//! read-repair on, `get`, `iter` and the sweep each fail that row only with an
//! authentication error and never rewrite or delete it; the other rows are upcast and
//! stay sealed; an `update` over it fails the same way and changes nothing.

use serde::{Deserialize, Serialize};
use strata::ops::sweep::SweepOptions;
use strata::seal::{Credential, KdfParams, SealError};
use strata::CollectionOptions;
use strata::{CollectionError, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Acct {
    id: String,
    #[serde(default)]
    tier: String,
}

fn pass() -> Credential {
    Credential::passphrase("audit15 tamper").with_kdf(KdfParams::insecure_fast())
}

fn v2() -> CollectionOptions {
    CollectionOptions::new()
        .sealed()
        .upcast(1, Mode::Eager, |obj| {
            obj.insert("tier".into(), serde_json::json!("basic"));
            Ok::<(), StepError>(())
        })
}

fn is_auth(e: &CollectionError) -> bool {
    matches!(e, CollectionError::Seal { source, .. } if source.is_authentication())
        || matches!(
            std::error::Error::source(e).and_then(|s| s.downcast_ref::<SealError>()),
            Some(s) if s.is_authentication()
        )
}

#[test]
fn a_tampered_stale_row_fails_every_path_alone_and_is_never_rewritten() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone()).key(pass()).open().unwrap();
        let c = db
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..4 {
            c.put(
                &format!("a{i}"),
                &Acct {
                    id: format!("a{i}"),
                    tier: String::new(),
                },
            )
            .unwrap();
        }
    }
    let bad = b"__nx/doc/accounts/a1".to_vec();
    let mut v = store.get(&bad).unwrap().unwrap();
    let at = v.len() - 5;
    v[at] ^= 0x01;
    store
        .apply(Batch::new().set(bad.clone(), v.clone()))
        .unwrap();

    let db = Database::builder(store.clone()).key(pass()).open().unwrap();
    let c = db.collection::<Acct>("accounts", v2()).unwrap();

    let e = c.get("a1").unwrap_err();
    assert!(is_auth(&e), "{e:?}");
    assert_eq!(store.get(&bad).unwrap().unwrap(), v);
    assert_eq!(c.get("a2").unwrap().unwrap().tier, "basic");

    let results: Vec<_> = c.iter().collect();
    assert_eq!(results.len(), 4, "{results:?}");
    let failed: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert_eq!(failed.len(), 1, "{results:?}");
    assert!(is_auth(failed[0].as_ref().unwrap_err()));
    assert_eq!(store.get(&bad).unwrap().unwrap(), v);

    let report = c.sweep(SweepOptions::new()).unwrap();
    assert_eq!(report.counters.failed, 1, "{:?}", report.counters);
    assert_eq!(store.get(&bad).unwrap().unwrap(), v, "the sweep rewrote it");
    for id in ["a0", "a2", "a3"] {
        let raw = store.get(&c.key_of(id)).unwrap().unwrap();
        let (env, sealed) = strata::seal::peek(&raw).unwrap();
        assert!(sealed, "{id}");
        assert_eq!(env.payload_version, 2, "{id}");
    }
}

/// `update(key, value, expected_lock)` over a tampered row: the lock version it compares
/// is the row's clear header, which only authenticates together with the body; the
/// update authenticates the stored row (and fails like a read) before replacing it,
/// instead of overwriting the tampered record — the evidence the error message tells the
/// user to restore from a backup. An intact row updates as usual.
#[test]
fn update_over_a_tampered_row_fails_and_changes_nothing() {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).key(pass()).open().unwrap();
    let c = db.collection::<Acct>("accounts", v2()).unwrap();
    c.put(
        "a1",
        &Acct {
            id: "a1".into(),
            tier: "basic".into(),
        },
    )
    .unwrap();
    let key = c.key_of("a1");
    let mut v = store.get(&key).unwrap().unwrap();
    let at = v.len() - 5;
    v[at] ^= 0x01;
    store
        .apply(Batch::new().set(key.clone(), v.clone()))
        .unwrap();
    let e = c
        .update(
            "a1",
            &Acct {
                id: "a1".into(),
                tier: "gold".into(),
            },
            1,
        )
        .unwrap_err();
    assert!(is_auth(&e), "{e:?}");
    assert_eq!(store.get(&key).unwrap().unwrap(), v);
    // Restored, the same update goes through.
    v[at] ^= 0x01;
    store
        .apply(Batch::new().set(key.clone(), v.clone()))
        .unwrap();
    let gold = Acct {
        id: "a1".into(),
        tier: "gold".into(),
    };
    assert_eq!(c.update("a1", &gold, 1).unwrap(), 2);
    assert_eq!(c.get("a1").unwrap().unwrap(), gold);
}
