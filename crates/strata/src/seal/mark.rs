//! The persisted "sealed" marks: which collections are sealed, stored apart from their
//! documents so that it holds before the first document is written.
//!
//! * `__nx/sealed/database` — every collection of the database is sealed (written by
//!   [`DatabaseBuilder::sealed`](crate::database::DatabaseBuilder::sealed));
//! * `__nx/sealed/collection/<name>` — collection `<name>` is sealed (written when a
//!   collection is first opened [`sealed`](crate::collection::CollectionOptions::sealed)).
//!
//! The value is the 5 bytes `NXSM 01`; a reader checks presence only, so a damaged value
//! still reads as sealed (the safe side: nothing is ever written in clear because a mark
//! was damaged). A mark is never removed by strata. Without a mark (stores sealed before
//! marks existed) a collection whose first stored document is sealed counts as sealed.
//!
//! What a mark changes: a handle **with** the key seals every write of a marked collection
//! even when it did not declare it sealed; a handle **without** the key reads headers and
//! deletes, but every set is refused ([`SealError::NeedsKey`]),
//! so no document lands in clear in a sealed collection — also while it is still empty.

use super::header::peek;
use super::SealError;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, StoreError};

/// Prefix of every sealed mark.
pub const SEALED_MARK_PREFIX: &[u8] = b"__nx/sealed/";
/// The mark of a database whose every collection is sealed.
pub const SEALED_DATABASE_KEY: &[u8] = b"__nx/sealed/database";
/// Prefix of per-collection marks (followed by the collection name).
pub const SEALED_COLLECTION_PREFIX: &[u8] = b"__nx/sealed/collection/";
/// The value of a mark: magic `NXSM`, format 1.
pub const SEALED_MARK_VALUE: &[u8; 5] = b"NXSM\x01";

/// The store key of collection `name`'s mark.
pub fn collection_mark_key(name: &str) -> Vec<u8> {
    let mut k = SEALED_COLLECTION_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// True when the database carries the database-wide mark.
pub fn database_is_marked<S: KvRead + ?Sized>(store: &S) -> Result<bool, SealError> {
    Ok(store.get(SEALED_DATABASE_KEY)?.is_some())
}

/// True when collection `name` carries its own mark (the database-wide mark is checked
/// by [`database_is_marked`]).
pub fn collection_is_marked<S: KvRead + ?Sized>(store: &S, name: &str) -> Result<bool, SealError> {
    Ok(store.get(&collection_mark_key(name))?.is_some())
}

/// Writes the mark at `key` unless one is there (one batch guarded by its absence; a
/// concurrent writer of the same mark is fine).
fn mark<S: KvRead + KvWrite + ?Sized>(store: &S, key: Vec<u8>) -> Result<(), SealError> {
    if store.get(&key)?.is_some() {
        return Ok(());
    }
    let batch = Batch::new()
        .require_absent(key.clone())
        .set(key.clone(), SEALED_MARK_VALUE.to_vec());
    match store.apply(batch) {
        Ok(()) => {
            tracing::info!(mark = %strata_store::escape_key(&key), "sealed mark written");
            Ok(())
        }
        // Written by another handle meanwhile: the mark is there either way.
        Err(e) if e.is_conflict() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Marks collection `name` sealed.
pub fn mark_collection<S: KvRead + KvWrite + ?Sized>(
    store: &S,
    name: &str,
) -> Result<(), SealError> {
    mark(store, collection_mark_key(name))
}

/// Marks every collection of the database sealed.
pub fn mark_database<S: KvRead + KvWrite + ?Sized>(store: &S) -> Result<(), SealError> {
    mark(store, SEALED_DATABASE_KEY.to_vec())
}

/// The first stored document of collection `name` (in key order): its store key and
/// whether it is sealed (envelope format 2); `None` when the collection holds none. One
/// read, the body untouched.
pub fn first_document<S: KvRead + ?Sized>(
    store: &S,
    name: &[u8],
) -> Result<Option<(Vec<u8>, bool)>, StoreError> {
    let prefix = [crate::keys::DOC_PREFIX, name, b"/"].concat();
    let mut first = None;
    store.scan_visit(
        &prefix,
        None,
        ScanLimits::new(1, 1 << 31)?,
        &mut |key, value| {
            first = Some((key.to_vec(), matches!(peek(value), Some((_, true)))));
            strata_store::Visit::Stop
        },
    )?;
    Ok(first)
}

/// True when collection `name` is sealed in the store: the database or the collection
/// carries its mark, or (a store sealed before marks existed) its first document is
/// sealed.
pub fn is_sealed_collection<S: KvRead + ?Sized>(store: &S, name: &str) -> Result<bool, SealError> {
    Ok(database_is_marked(store)?
        || collection_is_marked(store, name)?
        || first_document(store, name.as_bytes())?.is_some_and(|(_, sealed)| sealed))
}

/// The store key of a sealed document value (envelope format 2) of collection
/// `collection`, or of any collection of the catalog (`None`), if there is one. A
/// collection is sealed or clear as a whole, so its first document (in key order) tells:
/// this reads one document per collection, however many the store holds.
pub fn first_sealed_document<S: KvRead + ?Sized>(
    store: &S,
    collection: Option<&str>,
) -> Result<Option<Vec<u8>>, StoreError> {
    let first_of = |name: &[u8]| -> Result<Option<Vec<u8>>, StoreError> {
        Ok(first_document(store, name)?.and_then(|(key, sealed)| sealed.then_some(key)))
    };
    if let Some(name) = collection {
        return first_of(name.as_bytes());
    }
    let limits = ScanLimits::new(512, 1 << 20)?;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store.scan(crate::keys::CATALOG_PREFIX, after.as_deref(), limits)?;
        for r in &page.records {
            if let Some(found) = first_of(&r.key[crate::keys::CATALOG_PREFIX.len()..])? {
                return Ok(Some(found));
            }
        }
        match (page.more, page.records.last()) {
            (true, Some(last)) => after = Some(last.key.clone()),
            _ => return Ok(None),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use strata_store::{MemoryStore, Store};

    #[test]
    fn marks_are_written_once_and_read_by_presence() {
        let store = Store::new(MemoryStore::new());
        assert!(!collection_is_marked(&store, "a").unwrap());
        assert!(!database_is_marked(&store).unwrap());
        mark_collection(&store, "a").unwrap();
        mark_collection(&store, "a").unwrap();
        assert!(collection_is_marked(&store, "a").unwrap());
        assert!(!collection_is_marked(&store, "b").unwrap());
        assert_eq!(
            store.get(b"__nx/sealed/collection/a").unwrap().unwrap(),
            b"NXSM\x01"
        );
        mark_database(&store).unwrap();
        assert!(database_is_marked(&store).unwrap());
        // A damaged value still reads as sealed.
        store
            .apply(Batch::new().set(collection_mark_key("b"), b"junk".to_vec()))
            .unwrap();
        assert!(collection_is_marked(&store, "b").unwrap());
    }

    /// A sealed document is found by each collection's first document: among clear
    /// collections, for one collection, and not at all in a clear store.
    #[test]
    fn first_sealed_document_reads_one_document_per_collection() {
        use crate::seal::{Credential, KdfParams};
        use crate::{CollectionOptions, Database};
        let store = Store::new(MemoryStore::new());
        let key = Credential::passphrase("p").with_kdf(KdfParams::insecure_fast());
        let db = Database::builder(store.clone()).key(key).open().unwrap();
        let doc = serde_json::json!({"n": 1});
        for name in ["a", "c"] {
            let c = db
                .collection::<serde_json::Value>(name, CollectionOptions::new())
                .unwrap();
            c.put("x", &doc).unwrap();
            c.put("y", &doc).unwrap();
        }
        assert_eq!(first_sealed_document(&store, None).unwrap(), None);
        let b = db
            .collection::<serde_json::Value>("b", CollectionOptions::new().sealed())
            .unwrap();
        b.put("k", &doc).unwrap();
        assert_eq!(
            first_sealed_document(&store, None).unwrap(),
            Some(b"__nx/doc/b/k".to_vec())
        );
        assert_eq!(
            first_sealed_document(&store, Some("b")).unwrap(),
            Some(b"__nx/doc/b/k".to_vec())
        );
        assert_eq!(first_sealed_document(&store, Some("a")).unwrap(), None);
        assert_eq!(first_sealed_document(&store, Some("nope")).unwrap(), None);
    }
}
