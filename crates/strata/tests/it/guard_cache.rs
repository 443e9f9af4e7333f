//! The embedded backends' exact guard caches (redb's in-process cache of guard keys,
//! sled's guard cache): a fence raised, then lifted, through the store after a
//! collection's writes — which cached the fence record — is obeyed by the collection's
//! very next write, on every backend.

use serde_json::{json, Value};
use strata::policy::{Fence, Refusal};
use strata::Database;
use strata::{CollectionError, CollectionOptions};
use strata_store::{MemoryStore, Store};

fn backends(dir: &std::path::Path) -> Vec<(&'static str, Store)> {
    vec![
        ("memory", Store::new(MemoryStore::new())),
        (
            "redb",
            strata_redb::RedbStore::create_store(dir.join("s.redb")).unwrap(),
        ),
        (
            "sled",
            Store::new(strata_sled::SledStore::open(dir.join("sled")).unwrap()),
        ),
    ]
}

#[test]
fn a_fence_raised_and_lifted_between_puts_is_obeyed_by_the_next_put() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in backends(dir.path()) {
        let db = Database::builder(store.clone()).open().unwrap();
        let notes = db
            .collection::<Value>("notes", CollectionOptions::new())
            .unwrap();
        // Two writes: the fence record (absent) is read, then served from the cache.
        assert_eq!(notes.put("a", &json!({"n": 1})).unwrap(), 1, "{name}");
        assert_eq!(notes.put("a", &json!({"n": 2})).unwrap(), 2, "{name}");
        // Raised through the store, not through this handle.
        Fence::add_pending(&store, "notes", "target-hash").unwrap();
        for attempt in [
            notes.put("a", &json!({"n": 3})),
            notes.insert("b", &json!({})),
        ] {
            let err = attempt.unwrap_err();
            assert!(
                matches!(
                    err,
                    CollectionError::Refused {
                        reason: Refusal::Fenced { .. },
                        ..
                    }
                ),
                "{name}: {err}"
            );
        }
        assert_eq!(notes.get("a").unwrap(), Some(json!({"n": 2})), "{name}");
        assert_eq!(notes.get("b").unwrap(), None, "{name}");
        // Lifted through the store: the next put goes through, over the same document.
        Fence::update(&store, |cur| {
            let mut next = cur.clone();
            next.pending.clear();
            Ok(Some(next))
        })
        .unwrap();
        assert_eq!(notes.put("a", &json!({"n": 4})).unwrap(), 3, "{name}");
        assert_eq!(notes.get("a").unwrap(), Some(json!({"n": 4})), "{name}");
    }
}
