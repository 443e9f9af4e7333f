//! Multi-document atomic writes (`Database::write`, `Collection::put_many`) on memory,
//! redb and sled: each document checked exactly as a single write, all or nothing, a
//! typed error naming the document that refused.

use super::collection_util::{account, raw_put, Account};
use serde_json::{json, Value};
use strata::policy::{Fence, Refusal};
use strata::seal::{Credential, KdfParams, SealError};
use strata::Database;
use strata::{CollectionError, CollectionOptions, WriteSetError, Written};
use strata_store::{KvRead, KvWrite, MemoryStore, Store};

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

/// The document named by a refused set, and the error its single write would give.
fn refused(err: WriteSetError) -> (String, String, CollectionError) {
    match err {
        WriteSetError::Document {
            collection,
            key,
            source,
        } => (collection, key, *source),
        other => panic!("expected a document refusal, got {other}"),
    }
}

fn open(
    store: &Store,
) -> (
    Database,
    strata::Collection<Account>,
    strata::Collection<Value>,
) {
    let db = Database::builder(store.clone()).open().unwrap();
    let accounts = db
        .collection::<Account>("accounts", CollectionOptions::new())
        .unwrap();
    let ledger = db
        .collection::<Value>("ledger", CollectionOptions::new())
        .unwrap();
    (db, accounts, ledger)
}

/// The accounts and ledger as they were: nothing of a refused set was written.
fn unchanged(accounts: &strata::Collection<Account>, ledger: &strata::Collection<Value>) {
    let a = accounts.get_document("alice").unwrap().unwrap();
    let b = accounts.get_document("bob").unwrap().unwrap();
    assert_eq!((a.value, a.lock_version), (account("alice", 100), 1));
    assert_eq!((b.value, b.lock_version), (account("bob", 0), 1));
    assert_eq!(ledger.get("t1").unwrap(), None);
}

/// Alice pays bob 30 cents, with its ledger entry `t1`: one set.
fn pay_bob(
    db: &Database,
    accounts: &strata::Collection<Account>,
    ledger: &strata::Collection<Value>,
) -> Result<((), Vec<Written>), WriteSetError> {
    db.write(|w| {
        accounts.put_in(w, "alice", &account("alice", 70))?;
        accounts.put_in(w, "bob", &account("bob", 30))?;
        ledger.insert_in(w, "t1", &json!({"cents": 30}))
    })
}

fn each_backend(body: impl Fn(&str, &Store)) {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in backends(dir.path()) {
        body(name, &store);
    }
}

#[test]
fn a_transfer_commits_both_documents_and_the_ledger_entry_at_once() {
    each_backend(|name, store| {
        let (db, accounts, ledger) = open(store);
        accounts.put("alice", &account("alice", 100)).unwrap();
        accounts.put("bob", &account("bob", 0)).unwrap();
        let a = accounts.get_document("alice").unwrap().unwrap();
        let b = accounts.get_document("bob").unwrap().unwrap();
        let ((), written) = db
            .write(|w| {
                accounts.update_in(w, "alice", &account("alice", 70), a.lock_version)?;
                accounts.update_in(w, "bob", &account("bob", 30), b.lock_version)?;
                ledger.insert_in(w, "t1", &json!({"from": "alice", "to": "bob", "cents": 30}))?;
                Ok(())
            })
            .unwrap();
        assert_eq!(
            written,
            [Written::Set(2), Written::Set(2), Written::Set(1)],
            "{name}"
        );
        assert_eq!(accounts.get("alice").unwrap(), Some(account("alice", 70)));
        assert_eq!(accounts.get("bob").unwrap(), Some(account("bob", 30)));
        assert_eq!(ledger.get("t1").unwrap().unwrap()["cents"], 30);
        // Deletes in a set; a document twice is refused before anything is written.
        let ((), written) = db
            .write(|w| {
                ledger.delete_in(w, "t1")?;
                ledger.delete_in(w, "never")?;
                Ok(())
            })
            .unwrap();
        assert_eq!(written, [Written::Deleted(Some(1)), Written::Deleted(None)]);
        let err = db
            .write(|w| {
                accounts.put_in(w, "alice", &account("alice", 1))?;
                accounts.put_in(w, "alice", &account("alice", 2))
            })
            .unwrap_err();
        assert!(matches!(err, WriteSetError::Invalid { .. }), "{err}");
        assert_eq!(accounts.get("alice").unwrap(), Some(account("alice", 70)));
    });
}

/// A document added twice is refused wherever the repeat falls: after keys in ascending
/// order (the order a bulk load adds them in, checked without hashing), after keys out of
/// order, among two collections, and in a `put_many` set; nothing is written.
#[test]
fn a_document_added_twice_is_refused_in_any_key_order() {
    each_backend(|name, store| {
        let (db, accounts, ledger) = seeded(store);
        let orders: [&[&str]; 5] = [
            &["a", "b", "c", "b"],
            &["a", "b", "c", "c"],
            &["c", "a", "b", "a"],
            &["c", "a", "d", "e", "f", "g", "c"],
            &["a", "b", "c", "d", "e", "a"],
        ];
        for keys in orders {
            let err = db
                .write(|w| {
                    for k in keys {
                        accounts.put_in(w, k, &account(k, 1))?;
                    }
                    ledger.put_in(w, "zz", &json!({"n": 1}))
                })
                .unwrap_err();
            assert!(
                matches!(err, WriteSetError::Invalid { .. }),
                "{name} {keys:?}: {err}"
            );
            for k in keys {
                assert_eq!(accounts.get(k).unwrap(), None, "{name} {keys:?}");
            }
            assert_eq!(ledger.get("zz").unwrap(), None, "{name} {keys:?}");
        }
        // Distinct keys in any order are accepted.
        let ((), written) = db
            .write(|w| {
                for k in ["m", "n", "k", "o", "l"] {
                    accounts.put_in(w, k, &account(k, 1))?;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(written.len(), 5, "{name}");
        let err = accounts
            .put_many([
                ("p", &account("p", 1)),
                ("q", &account("q", 1)),
                ("p", &account("p", 2)),
            ])
            .unwrap_err();
        assert!(
            matches!(err, WriteSetError::Invalid { .. }),
            "{name}: {err}"
        );
        assert_eq!(accounts.get("p").unwrap(), None, "{name}");
    });
}

fn seeded(
    store: &Store,
) -> (
    Database,
    strata::Collection<Account>,
    strata::Collection<Value>,
) {
    let (db, accounts, ledger) = open(store);
    accounts.put("alice", &account("alice", 100)).unwrap();
    accounts.put("bob", &account("bob", 0)).unwrap();
    (db, accounts, ledger)
}

#[test]
fn a_stale_lock_version_refuses_the_whole_set() {
    each_backend(|name, store| {
        let (db, accounts, ledger) = seeded(store);
        let err = db
            .write(|w| {
                accounts.update_in(w, "alice", &account("alice", 70), 1)?;
                ledger.insert_in(w, "t1", &json!({"cents": 30}))?;
                accounts.update_in(w, "bob", &account("bob", 30), 7)
            })
            .unwrap_err();
        let (collection, key, source) = refused(err);
        assert_eq!(
            (collection.as_str(), key.as_str()),
            ("accounts", "bob"),
            "{name}"
        );
        assert!(
            matches!(source, CollectionError::Conflict { found: Some(1), .. }),
            "{source}"
        );
        unchanged(&accounts, &ledger);
    });
}

#[test]
fn a_document_written_by_a_newer_build_refuses_the_whole_set() {
    each_backend(|name, store| {
        let (db, accounts, ledger) = seeded(store);
        raw_put(store, "ledger", "t0", 9, 1, r#"{"from":"a newer build"}"#);
        let err = db
            .write(|w| {
                accounts.put_in(w, "alice", &account("alice", 70))?;
                ledger.put_in(w, "t1", &json!({"cents": 30}))?;
                ledger.put_in(w, "t0", &json!({"cents": 1}))
            })
            .unwrap_err();
        let (collection, key, source) = refused(err);
        assert_eq!(
            (collection.as_str(), key.as_str()),
            ("ledger", "t0"),
            "{name}"
        );
        assert!(source.is_ahead(), "{source}");
        unchanged(&accounts, &ledger);
    });
}

#[test]
fn a_fenced_collection_refuses_the_whole_set() {
    each_backend(|name, store| {
        let (db, accounts, ledger) = seeded(store);
        // Seen by the handle before the fence moves (its next write sees the change).
        ledger.put("t9", &json!({"cents": 0})).unwrap();
        Fence::add_pending(store, "ledger", "target-hash").unwrap();
        let err = pay_bob(&db, &accounts, &ledger).unwrap_err();
        let (collection, key, source) = refused(err);
        assert_eq!(
            (collection.as_str(), key.as_str()),
            ("ledger", "t1"),
            "{name}"
        );
        assert!(
            matches!(
                source,
                CollectionError::Refused {
                    reason: Refusal::Fenced { .. },
                    ..
                }
            ),
            "{source}"
        );
        unchanged(&accounts, &ledger);
    });
}

#[test]
fn a_sealed_collection_without_the_key_refuses_the_whole_set() {
    each_backend(|name, store| {
        let sealed = Database::builder(store.clone())
            .key(Credential::passphrase("vault key").with_kdf(KdfParams::insecure_fast()))
            .open()
            .unwrap();
        sealed
            .collection::<Value>("vault", CollectionOptions::new().sealed())
            .unwrap()
            .put("s1", &json!({"secret": 1}))
            .unwrap();
        let (db, accounts, ledger) = seeded(store);
        let vault = db
            .collection::<Value>("vault", CollectionOptions::new())
            .unwrap();
        let err = db
            .write(|w| {
                accounts.put_in(w, "alice", &account("alice", 70))?;
                ledger.put_in(w, "t1", &json!({"cents": 30}))?;
                vault.put_in(w, "s2", &json!({"secret": "in clear?"}))
            })
            .unwrap_err();
        let (collection, key, source) = refused(err);
        assert_eq!(
            (collection.as_str(), key.as_str()),
            ("vault", "s2"),
            "{name}"
        );
        assert!(
            matches!(
                source,
                CollectionError::Seal {
                    source: SealError::NeedsKey { .. },
                    ..
                }
            ),
            "{source}"
        );
        unchanged(&accounts, &ledger);
        assert_eq!(store.get(&vault.key_of("s2")).unwrap(), None);
        // A handle with the key writes sealed documents in a set.
        let with_key = sealed
            .collection::<Value>("vault", CollectionOptions::new().sealed())
            .unwrap();
        let s1 = with_key.get_document("s1").unwrap().unwrap();
        sealed
            .write(|w| {
                with_key.update_in(w, "s1", &json!({"secret": 2}), s1.lock_version)?;
                with_key.insert_in(w, "s2", &json!({"secret": 3}))
            })
            .unwrap();
        assert_eq!(with_key.get("s2").unwrap(), Some(json!({"secret": 3})));
        let raw = store.get(&with_key.key_of("s2")).unwrap().unwrap();
        assert_eq!(&raw[..5], b"NXDV\x02", "{name}: sealed in the set");
    });
}

#[test]
fn put_many_commits_whole_bounded_sets() {
    each_backend(|name, store| {
        let (_db, accounts, _) = open(store);
        let docs: Vec<(String, Account)> = (0..2500)
            .map(|i| (format!("k{i:05}"), account(&format!("k{i:05}"), i)))
            .collect();
        let n = accounts
            .put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
            .unwrap();
        assert_eq!(n, 2500, "{name}");
        assert_eq!(
            accounts.get("k02499").unwrap(),
            Some(account("k02499", 2499))
        );
        // A document that refuses stops the load at its set: earlier sets whole, the
        // refusing set and later ones not at all.
        raw_put(store, "accounts", "z01500", 9, 1, r#"{"id":"z"}"#);
        let more: Vec<(String, Account)> = (0..2500)
            .map(|i| (format!("z{i:05}"), account("z", i)))
            .collect();
        let err = accounts
            .put_many(more.iter().map(|(k, v)| (k.as_str(), v)))
            .unwrap_err();
        let (_, key, source) = refused(err);
        assert_eq!(key, "z01500");
        assert!(source.is_ahead());
        assert!(accounts.get("z00999").unwrap().is_some());
        assert!(accounts.get("z01000").unwrap().is_none());
        assert!(accounts.get("z01499").unwrap().is_none());
        assert!(accounts.get("z02000").unwrap().is_none());
    });
}

/// A load killed at its second set (every write from then on fails, as after a crash)
/// leaves the first set whole and nothing of the others.
#[test]
fn a_kill_during_a_bulk_load_leaves_whole_sets_only() {
    let inner = Store::new(MemoryStore::new());
    {
        let (_db, _, _) = open(&inner);
    }
    let writes_before = {
        // Count the writes opening takes, so the crash lands on the load's second set.
        let probe = strata::pass::testing::FaultyStore::crash_at_write(
            inner.unguarded_backend(),
            usize::MAX,
        );
        let store = Store::new(probe.clone());
        let (_db, accounts, _) = open(&store);
        let _ = accounts;
        probe.writes()
    };
    let faulty = strata::pass::testing::FaultyStore::crash_at_write(
        inner.unguarded_backend(),
        writes_before + 2,
    );
    let store = Store::new(faulty);
    let (_db, accounts, _) = open(&store);
    let docs: Vec<(String, Account)> = (0..2500)
        .map(|i| (format!("k{i:05}"), account("k", i)))
        .collect();
    let err = accounts
        .put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
        .unwrap_err();
    assert!(matches!(err, WriteSetError::Store(_)), "{err}");
    let (_db, after, _) = open(&Store::from_arc(inner.unguarded_backend()));
    let present = (0..2500)
        .filter(|i| after.get(&format!("k{i:05}")).unwrap().is_some())
        .count();
    assert_eq!(present, 1000, "exactly the first set, whole");
    let _ = inner.flush();
}

/// On a backend that decides once, the set's decision takes each document's JSON instead
/// of copying it. A wrapper that says so but decides again (it validates optimistically:
/// a document changed between the decision and the commit) gets a typed error naming the
/// fault, and nothing of the set is written — never a document without its JSON.
#[test]
fn a_store_that_decides_a_set_twice_against_its_word_writes_nothing() {
    use super::collection_util::Spy;
    let (spy, store) = Spy::new();
    assert!(store.capabilities().decides_once);
    let (db, accounts, ledger) = seeded(&store);
    // Once, between the set's decision and its commit: another writer's put of bob.
    let key = strata::layout::keys::doc_key("accounts", "bob");
    let other = strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(1, 7),
        br#"{"id":"bob","cents":1}"#,
    );
    let once = std::sync::Mutex::new(Some(other));
    let decided = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = decided.clone();
    spy.before_apply(move |_, inner| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(v) = once.lock().unwrap().take() {
            inner
                .apply(strata_store::Batch::new().set(key.clone(), v))
                .unwrap();
        }
    });
    let err = pay_bob(&db, &accounts, &ledger).unwrap_err();
    spy.clear_hook();
    assert_eq!(decided.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(matches!(err, WriteSetError::Store(_)), "{err:?}");
    let mut chain = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        chain.push_str(&format!(": {c}"));
        cause = c.source();
    }
    assert!(chain.contains("decided a write set twice"), "{chain}");
    // Nothing of the set: alice as seeded, bob as the other writer left him, no entry.
    let a = accounts.get_document("alice").unwrap().unwrap();
    assert_eq!((a.value, a.lock_version), (account("alice", 100), 1));
    assert_eq!(
        accounts.get_document("bob").unwrap().unwrap().lock_version,
        7
    );
    assert_eq!(ledger.get("t1").unwrap(), None);
    // The same set on the unchanged documents commits.
    let (_, written) = db
        .write(|w| {
            accounts.put_in(w, "alice", &account("alice", 70))?;
            ledger.insert_in(w, "t1", &json!({"cents": 30}))
        })
        .unwrap();
    assert_eq!(written, vec![Written::Set(2), Written::Set(1)]);
}
