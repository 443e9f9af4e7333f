//! Multi-document atomic writes (`Database::write`) on a PostgreSQL store shared by
//! independent handles (as several processes hold them): all or nothing when one document
//! is fenced, ahead of this build, stale-locked or sealed without the key; and transfers
//! racing from two handles lose no update and never land half.

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::layout::envelope::{self, Envelope};
use strata::policy::{Fence, Refusal};
use strata::seal::{Credential, KdfParams, SealError};
use strata::{Collection, CollectionError, CollectionOptions, Database};
use strata::{WriteSetError, Written};
use strata_store::{Batch, KvRead, KvWrite, Store};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Account {
    id: String,
    cents: i64,
}

fn account(id: &str, cents: i64) -> Account {
    Account {
        id: id.into(),
        cents,
    }
}

fn open(store: &Store) -> (Database, Collection<Account>, Collection<Value>) {
    let db = Database::builder(store.clone()).open().unwrap();
    let accounts = db
        .collection::<Account>("accounts", CollectionOptions::new())
        .unwrap();
    let ledger = db
        .collection::<Value>("ledger", CollectionOptions::new())
        .unwrap();
    (db, accounts, ledger)
}

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

fn unchanged(accounts: &Collection<Account>, ledger: &Collection<Value>) {
    let a = accounts.get_document("alice").unwrap().unwrap();
    let b = accounts.get_document("bob").unwrap().unwrap();
    assert_eq!((a.value, a.lock_version), (account("alice", 100), 1));
    assert_eq!((b.value, b.lock_version), (account("bob", 0), 1));
    assert_eq!(ledger.get("t1").unwrap(), None);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_refusing_document_refuses_the_whole_set_on_postgres() {
    let url = require_pg!();
    let table = scratch_table();
    let store = Store::new(owner(&url, &table));
    let (db, accounts, ledger) = open(&store);
    accounts.put("alice", &account("alice", 100)).unwrap();
    accounts.put("bob", &account("bob", 0)).unwrap();

    // Stale lock version.
    let err = db
        .write(|w| {
            accounts.update_in(w, "alice", &account("alice", 70), 1)?;
            ledger.insert_in(w, "t1", &json!({"cents": 30}))?;
            accounts.update_in(w, "bob", &account("bob", 30), 9)
        })
        .unwrap_err();
    let (c, k, source) = refused(err);
    assert_eq!((c.as_str(), k.as_str()), ("accounts", "bob"));
    assert!(
        matches!(source, CollectionError::Conflict { found: Some(1), .. }),
        "{source}"
    );
    unchanged(&accounts, &ledger);

    // A row written by a newer build.
    store
        .apply(Batch::new().set(
            ledger.key_of("t0"),
            envelope::encode(Envelope::new(9, 1), br#"{"newer":true}"#),
        ))
        .unwrap();
    let err = db
        .write(|w| {
            accounts.put_in(w, "alice", &account("alice", 70))?;
            ledger.put_in(w, "t1", &json!({"cents": 30}))?;
            ledger.put_in(w, "t0", &json!({"cents": 1}))
        })
        .unwrap_err();
    let (c, k, source) = refused(err);
    assert_eq!((c.as_str(), k.as_str()), ("ledger", "t0"));
    assert!(source.is_ahead(), "{source}");
    unchanged(&accounts, &ledger);

    // Sealed without the key (another handle sealed the collection).
    let other = Store::new(peer(&url, &table));
    let sealed = Database::builder(other.clone())
        .key(Credential::passphrase("pg vault").with_kdf(KdfParams::insecure_fast()))
        .open()
        .unwrap();
    sealed
        .collection::<Value>("vault", CollectionOptions::new().sealed())
        .unwrap()
        .put("s1", &json!({"secret": 1}))
        .unwrap();
    let vault = db
        .collection::<Value>("vault", CollectionOptions::new())
        .unwrap();
    let err = db
        .write(|w| {
            accounts.put_in(w, "alice", &account("alice", 70))?;
            vault.put_in(w, "s2", &json!({"secret": "clear"}))
        })
        .unwrap_err();
    let (c, k, source) = refused(err);
    assert_eq!((c.as_str(), k.as_str()), ("vault", "s2"));
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

    // Fenced by another handle.
    Fence::add_pending(&other, "ledger", "target-hash").unwrap();
    let err = db
        .write(|w| {
            accounts.put_in(w, "alice", &account("alice", 70))?;
            accounts.put_in(w, "bob", &account("bob", 30))?;
            ledger.insert_in(w, "t1", &json!({"cents": 30}))
        })
        .unwrap_err();
    let (c, k, source) = refused(err);
    assert_eq!((c.as_str(), k.as_str()), ("ledger", "t1"));
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
}

/// Two handles (as two processes) move money between two accounts and record each move
/// in a ledger, each move one write set over a read of both accounts: no update is lost,
/// no move lands half, and the ledger holds exactly the moves that committed.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn transfers_from_two_handles_lose_nothing_and_never_land_half() {
    const MOVES: usize = 40;
    let url = require_pg!();
    let table = scratch_table();
    let first = Store::new(owner(&url, &table));
    {
        let (_db, accounts, _) = open(&first);
        accounts.put("alice", &account("alice", 1000)).unwrap();
        accounts.put("bob", &account("bob", 1000)).unwrap();
    }
    let second = Store::new(peer(&url, &table));
    std::thread::scope(|s| {
        for (n, store) in [(0, &first), (1, &second)] {
            s.spawn(move || {
                let (db, accounts, ledger) = open(store);
                let (from, to) = if n == 0 {
                    ("alice", "bob")
                } else {
                    ("bob", "alice")
                };
                let mut done = 0;
                while done < MOVES {
                    let a = accounts.get_document(from).unwrap().unwrap();
                    let b = accounts.get_document(to).unwrap().unwrap();
                    let result = db.write(|w| {
                        accounts.update_in(
                            w,
                            from,
                            &account(from, a.value.cents - 1),
                            a.lock_version,
                        )?;
                        accounts.update_in(
                            w,
                            to,
                            &account(to, b.value.cents + 1),
                            b.lock_version,
                        )?;
                        ledger.insert_in(
                            w,
                            &format!("m{n}-{done}"),
                            &json!({"from": from, "to": to}),
                        )
                    });
                    match result {
                        Ok(((), written)) => {
                            assert_eq!(written.len(), 3);
                            assert_eq!(written[2], Written::Set(1));
                            done += 1;
                        }
                        Err(e) if e.document_error().is_some_and(CollectionError::is_conflict) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let (_db, accounts, ledger) = open(&first);
    let a = accounts.get("alice").unwrap().unwrap().cents;
    let b = accounts.get("bob").unwrap().unwrap().cents;
    assert_eq!(a + b, 2000, "a transfer landed half");
    assert_eq!((a, b), (1000, 1000), "an update was lost");
    let entries = ledger.iter().map(Result::unwrap).count();
    assert_eq!(
        entries,
        2 * MOVES,
        "the ledger holds exactly the committed moves"
    );
}
