//! What `docs/getting-started.md` tells a new user, checked: a database on redb (the
//! default backend), a handle cloned into threads (`Database` and `Collection` are
//! `Send + Sync + Clone`), documents that must be JSON objects (a `collection::<String>`
//! opens but every write fails), and a sweep that does nothing while every step is
//! `Mode::Lazy`.

use serde::{Deserialize, Serialize};
use strata::ops::sweep::SweepNote;
use strata::ops::sweep::SweepOptions;
use strata::Database;
use strata::Mode;
use strata::{Collection, CollectionOptions};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Account {
    id: String,
    balance_cents: i64,
}

fn send_sync_clone<T: Send + Sync + Clone>() {}

#[test]
fn a_redb_database_is_shared_by_cloning_its_handles_into_threads() {
    send_sync_clone::<Database>();
    send_sync_clone::<Collection<Account>>();
    let dir = tempfile::tempdir().unwrap();
    let store = strata_redb::RedbStore::create_store(dir.path().join("app.redb")).unwrap();
    let db = Database::builder(store).open().unwrap();
    let accounts = db
        .collection::<Account>("accounts", CollectionOptions::new())
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let accounts = accounts.clone();
            std::thread::spawn(move || {
                let id = format!("a{i}");
                accounts
                    .put(
                        &id,
                        &Account {
                            id: id.clone(),
                            balance_cents: i,
                        },
                    )
                    .unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(accounts.iter().count(), 4);
    assert_eq!(
        accounts.get("a2").unwrap(),
        Some(Account {
            id: "a2".into(),
            balance_cents: 2,
        })
    );
}

#[test]
fn a_document_that_is_not_a_json_object_is_refused_on_write() {
    let db = Database::builder(strata_store::Store::new(strata_store::MemoryStore::new()))
        .open()
        .unwrap();
    let names = db
        .collection::<String>("names", CollectionOptions::new())
        .unwrap();
    let err = names.put("n1", &"alice".to_string()).unwrap_err();
    assert!(
        err.to_string()
            .contains("documents must serialize to a JSON object"),
        "{err}"
    );
    assert_eq!(names.get("n1").unwrap(), None);
}

#[test]
fn a_sweep_does_nothing_while_every_step_is_lazy() {
    let store = strata_store::Store::new(strata_store::MemoryStore::new());
    {
        let db = Database::builder(store.clone()).open().unwrap();
        let v1 = db
            .collection::<serde_json::Value>("accounts", CollectionOptions::new())
            .unwrap();
        v1.put("a1", &serde_json::json!({"id": "a1", "balance": 12}))
            .unwrap();
    }
    let db = Database::builder(store).open().unwrap();
    let lazy = |mode| {
        CollectionOptions::new().upcast(1, mode, |obj| {
            let dollars = obj.remove("balance").and_then(|b| b.as_i64()).unwrap_or(0);
            obj.insert("balance_cents".into(), (dollars * 100).into());
            Ok(())
        })
    };
    let accounts = db
        .collection::<Account>("accounts", lazy(Mode::Lazy))
        .unwrap();
    let report = accounts.sweep(SweepOptions::new()).unwrap();
    assert_eq!(report.note, SweepNote::NoEagerStep, "{report:?}");
    // Read in the new shape, still stored at v1.
    let doc = accounts.get_document("a1").unwrap().unwrap();
    assert_eq!(doc.value.balance_cents, 1200);
    assert_eq!(doc.stored_version, 1);
    assert!(doc.upcast);
}
