//! A sealed collection stays sealed, whichever handle opens it: a handle that forgets
//! `CollectionOptions::sealed()` (another binary, an older build, an admin tool) must
//! never write a document in clear into a collection whose documents are encrypted.

use serde::{Deserialize, Serialize};
use strata::seal::{Credential, KdfParams};
use strata::Database;
use strata::{CollectionError, CollectionOptions};
use strata_store::{KvRead, MemoryStore, Store};

const MARKER: &str = "PLAINTEXT-MARKER-91c3";

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
    note: String,
}

fn key() -> Credential {
    Credential::passphrase("audit passphrase").with_kdf(KdfParams::insecure_fast())
}

fn acct(id: &str) -> Acct {
    Acct {
        id: id.into(),
        note: format!("{MARKER} {id}"),
    }
}

fn has_plaintext(store: &Store) -> bool {
    store
        .scan(
            b"",
            None,
            strata_store::ScanLimits::new(usize::MAX, 1 << 30).unwrap(),
        )
        .unwrap()
        .records
        .iter()
        .any(|r| {
            r.value
                .windows(MARKER.len())
                .any(|w| w == MARKER.as_bytes())
        })
}

fn sealed_store() -> Store {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).key(key()).open().unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    c.put("a1", &acct("a1")).unwrap();
    assert!(!has_plaintext(&store));
    store
}

/// With the key, a handle that forgot `sealed()` still seals: its new documents and its
/// overwrites are encrypted, and it reads the sealed ones.
#[test]
fn a_sealed_collection_opened_with_the_key_but_without_sealed_stays_sealed() {
    let store = sealed_store();
    let db = Database::builder(store.clone()).key(key()).open().unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new())
        .unwrap();
    assert_eq!(c.get("a1").unwrap().unwrap().note, format!("{MARKER} a1"));
    c.put("a2", &acct("a2")).unwrap();
    c.put("a1", &acct("a1")).unwrap();
    assert!(!has_plaintext(&store), "a document was written in clear");
    let raw = store.get(b"__nx/doc/accounts/a2").unwrap().unwrap();
    assert_eq!(
        strata::seal::peek(&raw).map(|(_, sealed)| sealed),
        Some(true)
    );
    // A clear collection stays clear.
    let notes = db
        .collection::<Acct>("notes", CollectionOptions::new())
        .unwrap();
    notes.put("n1", &acct("n1")).unwrap();
    assert!(has_plaintext(&store));
}

/// Without the key, a handle on a sealed collection cannot write a new document in clear
/// beside the sealed ones (it already cannot overwrite a sealed one, nor read one).
#[test]
fn a_sealed_collection_without_the_key_refuses_a_new_document_in_clear() {
    let store = sealed_store();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new())
        .unwrap();
    let err = c.put("a2", &acct("a2")).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::Seal { .. } | CollectionError::NoKey { .. }
        ),
        "{err:?}"
    );
    assert!(!has_plaintext(&store), "a document was written in clear");
}

/// A wrong passphrase at open is one error whose message names the keyring, with no empty
/// collection name in front of it.
#[test]
fn a_wrong_passphrase_at_open_names_no_empty_collection() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone()).key(key()).open().unwrap();
        db.collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap()
            .put("a1", &acct("a1"))
            .unwrap();
    }
    let err = Database::builder(store)
        .key(Credential::passphrase("not it").with_kdf(KdfParams::insecure_fast()))
        .open()
        .map(|_| ())
        .unwrap_err();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    assert!(!text.contains("``"), "{text}");
    assert!(text.contains("wrong key for the database"), "{text}");
    assert!(!text.contains("not it"), "the passphrase leaked: {text}");
}
