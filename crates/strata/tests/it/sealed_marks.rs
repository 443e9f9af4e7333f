//! Which collections are sealed is persisted (`__nx/sealed/…`), so it holds before the
//! first document: an empty sealed collection cannot get a document in clear from a
//! handle without the key, nor from one that forgot `sealed()`; a database sealed as a
//! whole seals every collection, also those created later; sealing over documents in
//! clear is refused and writes nothing.

use serde::{Deserialize, Serialize};
use strata::seal::{self, Credential, KdfParams, SealError};
use strata::Database;
use strata::{CollectionError, CollectionOptions};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, ScanLimits, Store};

const MARKER: &str = "PLAINTEXT-MARKER-5e07";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Note {
    id: String,
    text: String,
}

fn key() -> Credential {
    Credential::passphrase("marks passphrase").with_kdf(KdfParams::insecure_fast())
}

fn note(id: &str) -> Note {
    Note {
        id: id.into(),
        text: format!("{MARKER} {id}"),
    }
}

fn snapshot(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

fn has_plaintext(store: &Store) -> bool {
    snapshot(store)
        .iter()
        .any(|(_, v)| v.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()))
}

fn is_sealed(store: &Store, key: &[u8]) -> bool {
    let raw = store.get(key).unwrap().unwrap();
    seal::peek(&raw).map(|(_, sealed)| sealed) == Some(true)
}

/// The refusal of a set without the key: the record is sealed, open with the key.
fn needs_key(err: &CollectionError, name: &str) -> bool {
    matches!(err, CollectionError::Seal { collection, source: SealError::NeedsKey { .. } } if collection == name)
}

fn opts() -> CollectionOptions {
    CollectionOptions::new()
}

/// A collection opened `sealed()` once is sealed for good, while still empty: a keyless
/// handle cannot put into it (nothing written), a keyed handle that forgot `sealed()`
/// seals.
#[test]
fn an_empty_sealed_collection_never_gets_a_clear_document() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone()).key(key()).open().unwrap();
        db.collection::<Note>("notes", opts().sealed()).unwrap();
    }
    assert_eq!(
        store.get(b"__nx/sealed/collection/notes").unwrap(),
        Some(b"NXSM\x01".to_vec())
    );
    // Without the key: reads of the (empty) collection work, every set is refused.
    let keyless = Database::builder(store.clone()).open().unwrap();
    let c = keyless.collection::<Note>("notes", opts()).unwrap();
    assert!(c.get("n1").unwrap().is_none());
    let before = snapshot(&store);
    for result in [c.put("n1", &note("n1")), c.insert("n1", &note("n1"))] {
        let err = result.unwrap_err();
        assert!(needs_key(&err, "notes"), "{err:?}");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            source.is_some_and(|s| s.contains("open the database with its key")),
            "{err}"
        );
    }
    assert_eq!(snapshot(&store), before, "nothing written");
    // With the key but without `sealed()`: sealed.
    let db = Database::builder(store.clone()).key(key()).open().unwrap();
    let c = db.collection::<Note>("notes", opts()).unwrap();
    c.put("n1", &note("n1")).unwrap();
    assert!(is_sealed(&store, b"__nx/doc/notes/n1"));
    assert_eq!(c.get("n1").unwrap().unwrap(), note("n1"));
    assert!(!has_plaintext(&store));
    // Declaring sealed without the key is refused before anything is written.
    let before = snapshot(&store);
    let err = keyless
        .collection::<Note>("other", opts().sealed())
        .unwrap_err();
    assert!(matches!(err, CollectionError::NoKey { .. }), "{err:?}");
    assert_eq!(snapshot(&store), before, "no catalog record, no mark");
}

/// `DatabaseBuilder::sealed()` seals every collection, declared or not, existing or
/// created later, for every handle; without the key no collection takes a document.
#[test]
fn a_sealed_database_seals_every_collection() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone())
            .key(key())
            .sealed()
            .open()
            .unwrap();
        let a = db.collection::<Note>("a", opts()).unwrap();
        a.put("x", &note("x")).unwrap();
    }
    assert!(store.get(b"__nx/sealed/database").unwrap().is_some());
    // Another keyed handle, without `sealed()` anywhere: a new collection is sealed too.
    let db = Database::builder(store.clone()).key(key()).open().unwrap();
    let b = db.collection::<Note>("b", opts()).unwrap();
    b.put("y", &note("y")).unwrap();
    assert!(is_sealed(&store, b"__nx/doc/a/x"));
    assert!(is_sealed(&store, b"__nx/doc/b/y"));
    assert_eq!(b.get("y").unwrap().unwrap(), note("y"));
    assert!(!has_plaintext(&store));
    // Without the key: headers are readable, no collection (old or new) takes a set.
    let keyless = Database::builder(store.clone()).open().unwrap();
    let before = snapshot(&store);
    for name in ["a", "b", "brand-new"] {
        let c = keyless.collection::<Note>(name, opts()).unwrap();
        let err = c.put("z", &note("z")).unwrap_err();
        assert!(needs_key(&err, name), "{name}: {err:?}");
    }
    let a = keyless.collection::<Note>("a", opts()).unwrap();
    assert_eq!(a.envelope("x").unwrap().unwrap().payload_version, 1);
    let after: Vec<_> = snapshot(&store)
        .into_iter()
        .filter(|(k, _)| !k.starts_with(b"__nx/catalog") && !k.starts_with(b"__nx/schema/"))
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|(k, _)| !k.starts_with(b"__nx/catalog") && !k.starts_with(b"__nx/schema/"))
        .collect();
    assert_eq!(after, before, "no document written without the key");
    assert!(!has_plaintext(&store));
}

/// Sealing without a key, or over documents in clear, is refused and writes nothing (not
/// even the keyring a first keyed open would create).
#[test]
fn sealing_over_clear_documents_or_without_a_key_is_refused_and_writes_nothing() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db.collection::<Note>("plain", opts()).unwrap();
        c.put("p1", &note("p1")).unwrap();
    }
    let before = snapshot(&store);
    let err = Database::builder(store.clone())
        .sealed()
        .open()
        .unwrap_err();
    assert!(matches!(err, CollectionError::SealedWithoutKey), "{err:?}");
    assert!(err.to_string().contains(".key(..)"), "{err}");
    // A database with a clear collection cannot be sealed as a whole.
    let err = Database::builder(store.clone())
        .key(key())
        .sealed()
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, CollectionError::HoldsClearDocuments { collection } if collection == "plain"),
        "{err:?}"
    );
    assert!(err.to_string().contains("`plain`"), "{err}");
    assert_eq!(snapshot(&store), before, "no keyring, no mark");
    // Nor that collection declared sealed.
    let db = Database::builder(store.clone()).key(key()).open().unwrap();
    let before = snapshot(&store);
    let err = db.collection::<Note>("plain", opts().sealed()).unwrap_err();
    assert!(
        matches!(err, CollectionError::HoldsClearDocuments { .. }),
        "{err:?}"
    );
    assert_eq!(snapshot(&store), before, "no mark");
    // It stays usable in clear.
    let c = db.collection::<Note>("plain", opts()).unwrap();
    assert_eq!(c.get("p1").unwrap().unwrap(), note("p1"));
    // A wrong key is still the first error, before the clear documents are looked at.
    let wrong = Credential::passphrase("not it").with_kdf(KdfParams::insecure_fast());
    let err = Database::builder(store.clone())
        .key(wrong)
        .sealed()
        .open()
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::Seal {
                source: SealError::WrongKey { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

/// A store sealed before marks existed (sealed documents, no mark) is still recognised by
/// its first document, and the mark is written then.
#[test]
fn a_sealed_collection_without_its_mark_is_recognised_and_marked() {
    let store = Store::new(MemoryStore::new());
    {
        let db = Database::builder(store.clone()).key(key()).open().unwrap();
        let c = db.collection::<Note>("old", opts().sealed()).unwrap();
        c.put("o1", &note("o1")).unwrap();
    }
    store
        .apply(Batch::new().delete(b"__nx/sealed/collection/old".to_vec()))
        .unwrap();
    let keyless = Database::builder(store.clone()).open().unwrap();
    let c = keyless.collection::<Note>("old", opts()).unwrap();
    let err = c.put("o2", &note("o2")).unwrap_err();
    assert!(needs_key(&err, "old"), "{err:?}");
    assert!(store.get(b"__nx/sealed/collection/old").unwrap().is_some());
    assert!(store.get(b"__nx/doc/old/o2").unwrap().is_none());
    assert!(!has_plaintext(&store));
}
