//! Multi-document atomic writes: [`WriteSet`] (its docs say what is checked and the
//! limits per backend).

use super::write::{DocWrite, Refusal};
use super::{Collection, CollectionError, CollectionInner, Expect};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::Arc;
use strata_store::{Batch, KvRead, KvWrite, Store};

/// How often a set is decided again after a guard (the fence, a keyring) changed.
const MAX_SET_ATTEMPTS: usize = 64;

/// The most documents [`Collection::put_many`] commits in one set.
pub const PUT_MANY_DOCUMENTS: usize = 1000;

/// The most encoded bytes (keys and JSON) [`Collection::put_many`] commits in one set:
/// the bulk pass's default batch budget ([`crate::pass::DEFAULT_MAX_BYTES`], 4 MiB).
pub const PUT_MANY_BYTES: usize = crate::pass::DEFAULT_MAX_BYTES;

/// Why a [`WriteSet`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteSetError {
    /// A document refused (its write would have been refused on its own): nothing of the
    /// set was written.
    #[error("the write set was not written: document `{key}` of collection `{collection}` refused ({source}); nothing of the set was written, fix that document's write and commit the set again")]
    Document {
        /// The collection of the document that refused.
        collection: String,
        /// Its key.
        key: String,
        /// Why, exactly as a single write of it would have failed.
        #[source]
        source: Box<CollectionError>,
    },
    /// The set itself is invalid (a document written twice, a collection of another
    /// database); nothing was written.
    #[error("the write set is invalid: {reason}; nothing was written")]
    Invalid {
        /// What is wrong.
        reason: String,
    },
    /// The store failed (or the guards kept changing); nothing of the set was written.
    #[error("the write set was not written: {0}")]
    Store(#[source] Box<CollectionError>),
}

impl WriteSetError {
    /// The error a single write of the document that refused would have returned (for a
    /// [`WriteSetError::Document`]).
    pub fn document_error(&self) -> Option<&CollectionError> {
        match self {
            WriteSetError::Document { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }

    fn document(collection: &str, key: &str, source: CollectionError) -> Self {
        WriteSetError::Document {
            collection: collection.to_string(),
            key: key.to_string(),
            source: Box::new(source),
        }
    }

    fn store(e: CollectionError) -> Self {
        WriteSetError::Store(Box::new(e))
    }
}

/// The hasher of a set's key hashes: they are SipHash values already (keyed by the set's
/// `RandomState`), so the table uses them as they are instead of hashing them again.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys (`write_u64`); any bytes still hash.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One document of a set.
struct Pending {
    /// Its collection: an index into [`WriteSet::collections`].
    of: usize,
    /// The document's full store key: the collection's prefix, then its key.
    full: Vec<u8>,
    expect: Expect,
    /// A set's JSON behind room for the envelope header (`None`: a delete).
    json: Option<Vec<u8>>,
}

/// The key inside its collection of the document whose full store key is `full`.
fn short_key<'a>(inner: &CollectionInner, full: &'a [u8]) -> &'a str {
    full.get(inner.prefix.len()..)
        .and_then(|k| std::str::from_utf8(k).ok())
        .unwrap_or_default()
}

/// What one document of a committed set returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A set: the document's new lock version.
    Set(u64),
    /// A delete: the lock version the deleted document had (`None`: it did not exist).
    Deleted(Option<u64>),
}

/// Multi-document atomic writes: a [`WriteSet`] gathers puts, inserts, updates and deletes
/// of documents of any collections of one database and commits them as ONE call of the
/// store's write primitive — one redb write transaction, one sled critical section, one
/// PostgreSQL statement — all or nothing.
///
/// Each document is checked exactly as a single write is (the same decision,
/// `CollectionInner::decide`): the schema gate and the fence (the policy's verdict, and
/// the fence record's bytes as read in the same transaction — checked by the decision on
/// a backend that decides once, as a precondition elsewhere), the write guards, a sealed collection's
/// rules (no write from a handle without the key into a sealed collection, an update of
/// a sealed document must authenticate, the keyring snapshot as a precondition), the
/// expected lock version and the ahead guard. The first document that refuses refuses
/// the whole set — nothing of it is written — with a [`WriteSetError::Document`] naming
/// it.
///
/// ```
/// use strata::Database;
/// use strata_store::{MemoryStore, Store};
/// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// # struct Account { balance: i64 }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let db = Database::builder(Store::new(MemoryStore::new())).open()?;
/// let accounts = db.collection::<Account>("accounts", Default::default())?;
/// accounts.put("alice", &Account { balance: 10 })?;
/// accounts.put("bob", &Account { balance: 0 })?;
/// let (a, b) = (accounts.get_document("alice")?.unwrap(), accounts.get_document("bob")?.unwrap());
/// db.write(|w| {
///     accounts.update_in(w, "alice", &Account { balance: 5 }, a.lock_version)?;
///     accounts.update_in(w, "bob", &Account { balance: 5 }, b.lock_version)?;
///     Ok(())
/// })?;
/// assert_eq!(accounts.get("bob")?, Some(Account { balance: 5 }));
/// # Ok(()) }
/// ```
///
/// **Limits.** A set is one backend write, held in memory whole: keep it to what one
/// transaction should carry. Per backend: memory and redb have no limit of their own
/// beyond memory (redb: one write transaction; other writers wait for it); sled writes
/// the set as one `sled::Batch` under its writer lock (other writers wait for it);
/// PostgreSQL sends it as one statement whose arrays carry every key and value, takes one
/// advisory lock per key up to 48 keys and the table-wide write lock beyond (so large
/// sets serialize with every other writer of the table); when a decision refuses on the
/// value the handle expected (an update of a document it has no write hint for), the
/// documents not known are read, all in one statement, and the set decided again. For
/// bulk loads use
/// [`Collection::put_many`](super::Collection::put_many), which commits in bounded sets
/// ([`PUT_MANY_DOCUMENTS`] documents, [`PUT_MANY_BYTES`] bytes).
///
/// Built inside [`Database::write`](crate::Database::write) with the collections' `*_in`
/// methods.
pub struct WriteSet {
    store: Store,
    /// The collections of the set's documents, each once.
    collections: Vec<Arc<CollectionInner>>,
    docs: Vec<Pending>,
    /// The hashes of the documents' full keys: a key added twice is found without
    /// comparing it with every document of the set (a bulk load adds a thousand).
    hashes: HashSet<u64, BuildHasherDefault<PassThrough>>,
    hasher: RandomState,
}

impl std::fmt::Debug for WriteSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteSet")
            .field("documents", &self.docs.len())
            .finish_non_exhaustive()
    }
}

impl WriteSet {
    /// An empty set over `store` (the database's).
    pub(crate) fn new(store: Store) -> Self {
        Self::with_capacity(store, 0)
    }

    /// An empty set over `store` with room for `documents` documents.
    fn with_capacity(store: Store, documents: usize) -> Self {
        WriteSet {
            store,
            collections: Vec::new(),
            docs: Vec::with_capacity(documents),
            hashes: HashSet::default(),
            hasher: RandomState::new(),
        }
    }

    /// Documents in the set so far.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when the set holds no document.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    fn add(
        &mut self,
        inner: &Arc<CollectionInner>,
        key: &str,
        expect: Expect,
        json: Option<Vec<u8>>,
    ) -> Result<(), WriteSetError> {
        if !inner.store.same_store(&self.store) {
            return Err(WriteSetError::Invalid {
                reason: format!(
                    "collection `{}` belongs to another store than the database that opened the set; write each database's documents in its own set",
                    inner.name
                ),
            });
        }
        let full = inner.key_of(key);
        // While every key added is greater than the one before (a bulk load's usual
        // order), a new greater key cannot repeat one: one comparison, no hash. The
        // first key out of order hashes every key so far, and every later key is hashed.
        let ascending = self.hashes.is_empty() && self.docs.last().is_none_or(|d| d.full < full);
        if !ascending && self.hashes.is_empty() {
            self.hashes
                .reserve(self.docs.capacity().max(self.docs.len() + 1));
            for d in &self.docs {
                self.hashes.insert(self.hasher.hash_one(&d.full));
            }
        }
        // A hash seen before: compared with the documents (usually a true repeat).
        if !ascending
            && !self.hashes.insert(self.hasher.hash_one(&full))
            && self.docs.iter().any(|d| d.full == full)
        {
            return Err(WriteSetError::Invalid {
                reason: format!(
                    "document `{key}` of collection `{}` is written twice in one set; write it once",
                    inner.name
                ),
            });
        }
        let of = match self.collections.iter().rposition(|c| Arc::ptr_eq(c, inner)) {
            Some(of) => of,
            None => {
                self.collections.push(Arc::clone(inner));
                self.collections.len() - 1
            }
        };
        self.docs.push(Pending {
            of,
            full,
            expect,
            json,
        });
        Ok(())
    }

    /// Commits the set: one call of the store's write primitive. Returns what each
    /// document returned, in the order they were added.
    ///
    /// On a backend that decides once (redb, memory: the values handed to the decision
    /// are current until it commits), when no collection of the set is sealed, the
    /// decision takes each document's JSON instead of copying it: the guards (the fence,
    /// the write guards) are then read with the documents and checked by the decision
    /// itself, before any document is decided, so the batch carries no precondition and
    /// nothing after the decision can send the set round again — a refusal ends the set.
    /// Elsewhere each decision copies the JSON and the guards commit as preconditions.
    pub(crate) fn commit(self) -> Result<Vec<Written>, WriteSetError> {
        let WriteSet {
            store,
            collections,
            mut docs,
            ..
        } = self;
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        // The documents' JSON, apart from their keys (which the reads borrow): taken by a
        // decision that decides once, copied by the others.
        let mut jsons: Vec<Option<Vec<u8>>> = docs.iter_mut().map(|d| d.json.take()).collect();
        let take_json =
            store.capabilities().decides_once && collections.iter().all(|c| c.sealer.is_none());
        // There the reads borrow copies of the documents' keys, all in one buffer, and each
        // decision moves its document's own key into its mutation (`owned`); elsewhere the
        // reads borrow the documents' keys and each decision copies them.
        let mut arena: Vec<u8> = Vec::new();
        let mut owned: Vec<Option<Vec<u8>>> = Vec::new();
        if take_json {
            arena.reserve_exact(docs.iter().map(|d| d.full.len()).sum());
            for d in &docs {
                arena.extend_from_slice(&d.full);
            }
            owned = docs
                .iter_mut()
                .map(|d| Some(std::mem::take(&mut d.full)))
                .collect();
        }
        let docs = docs;
        let collections = &collections;
        let mut base: Vec<&[u8]> = Vec::with_capacity(docs.len() + collections.len() + 2);
        if take_json {
            let mut at = 0;
            for o in &owned {
                let n = o.as_ref().map_or(0, Vec::len);
                base.push(arena.get(at..at + n).unwrap_or_default());
                at += n;
            }
        } else {
            base.extend(docs.iter().map(|d| d.full.as_slice()));
        }
        // Each collection's deploy-window record, read once in the same transaction: the
        // index of its read, per collection.
        let windows: Vec<Option<usize>> = collections
            .iter()
            .map(|c| {
                c.window_key.as_ref().map(|w| {
                    base.push(w.as_slice());
                    base.len() - 1
                })
            })
            .collect();
        let base_reads = base.len();
        // Document `i`'s full key is `base[i]`.
        let base = base;
        let key_of = |i: usize| short_key(&collections[docs[i].of], base[i]);
        let document =
            |i: usize, e| WriteSetError::document(&collections[docs[i].of].name, key_of(i), e);
        let mut found: Vec<Option<u64>> = vec![None; docs.len()];
        for _ in 0..MAX_SET_ATTEMPTS {
            // Per collection: its guards (fence, write guards) and key snapshot, checked
            // once per attempt.
            let mut checked: Vec<(super::Guards, Option<crate::seal::Sealer>)> =
                Vec::with_capacity(collections.len());
            for (of, inner) in collections.iter().enumerate() {
                let guards = inner
                    .check_guards_seen()
                    .map_err(|e| document(docs.iter().position(|d| d.of == of).unwrap_or(0), e))?;
                checked.push((guards, inner.sealer_now()));
            }
            let mut reads = base.clone();
            if take_json {
                // The guards' records, read with the documents: checked by the decision.
                reads.extend(checked.iter().flat_map(|(g, _)| g.keys()));
            }
            let mut outcome: Result<Vec<Written>, (usize, Refusal)> = Ok(Vec::new());
            let mut guard_changed = false;
            let mut decided = false;
            let written = store.read_modify_write(&reads, &mut |values| {
                if take_json && std::mem::replace(&mut decided, true) {
                    // The JSON went with the first decision: a backend that says it
                    // decides once must not decide again (nothing is written).
                    outcome = Err((0, Refusal::DecideAgain));
                    return None;
                }
                let mut batch = Batch::with_capacity(docs.len());
                // Before any document takes its JSON: a guard that changed sends the set
                // round again with every JSON still in place.
                let mut current = values.get(base_reads..).unwrap_or_default();
                for (guards, _) in &checked {
                    let (these, rest) = current.split_at(guards.len().min(current.len()));
                    if !guards.check_or_carry(take_json, these, &mut batch) {
                        guard_changed = true;
                        return None;
                    }
                    current = rest;
                }
                // Also before any JSON is taken: a set over a row a newer build wrote, at a
                // version this handle does not know to be additive, reads the schema
                // history again and comes round (or refuses).
                for (i, d) in docs.iter().enumerate() {
                    let inner = &collections[d.of];
                    let stored = values[i]
                        .filter(|_| jsons[i].is_some())
                        .and_then(crate::seal::peek)
                        .map(|(env, _)| env.payload_version);
                    if let Some(v) = stored.and_then(|v| inner.unknown_newer(v)) {
                        outcome = Err((i, Refusal::LearnNewer(v)));
                        return None;
                    }
                }
                let mut results = Vec::with_capacity(docs.len());
                for (i, d) in docs.iter().enumerate() {
                    let inner = &collections[d.of];
                    let is_set = jsons[i].is_some();
                    let encoded = if take_json { jsons[i].take() } else { None };
                    let json = &jsons[i];
                    // (Never called after the JSON was taken: that decision is the last.)
                    let reencode = || -> Result<Vec<u8>, CollectionError> {
                        json.clone().ok_or_else(|| {
                            inner.store_error(strata_store::StoreError::InvalidArgument(
                                "a write set's document was decided twice after its JSON was taken (a bug in the backend or a wrapper); nothing was written".into(),
                            ))
                        })
                    };
                    let mut doc = DocWrite {
                        key: key_of(i),
                        full: base[i],
                        expect: d.expect,
                        encoded,
                        reencode: is_set.then_some(&reencode as super::write::Reencode<'_>),
                        found: None,
                        owned_key: owned.get_mut(i).and_then(Option::take),
                    };
                    let sealer = checked[d.of].1.as_ref();
                    let window = windows[d.of].and_then(|at| values.get(at).copied().flatten());
                    let decided = inner.decide(&mut doc, values[i], window, sealer, &mut batch);
                    found[i] = doc.found;
                    match decided {
                        Ok(lock) if is_set => results.push(Written::Set(lock.unwrap_or(0))),
                        Ok(lock) => results.push(Written::Deleted(lock)),
                        Err(refusal) => {
                            outcome = Err((i, refusal));
                            return None;
                        }
                    }
                }
                outcome = Ok(results);
                Some(batch)
            });
            match written {
                Ok(_) if guard_changed => {
                    // A guard changed (the fence): read it again.
                    for inner in collections {
                        inner.policy.forget_fence();
                    }
                }
                Ok(_) => match outcome {
                    Ok(results) => return Ok(results),
                    Err((i, Refusal::Error(e))) => return Err(document(i, e)),
                    Err((i, Refusal::RefreshKeys)) => {
                        collections[docs[i].of]
                            .refresh_sealer()
                            .map_err(|e| document(i, e))?;
                    }
                    Err((i, Refusal::LearnNewer(v))) => {
                        let inner = &collections[docs[i].of];
                        if !inner.learn_newer(v).map_err(|e| document(i, e))? {
                            return Err(document(i, inner.ahead(key_of(i), v)));
                        }
                    }
                    // A second decision after the first took the JSON.
                    Err((_, Refusal::DecideAgain)) => {
                        let inner = &collections[docs[0].of];
                        return Err(WriteSetError::store(inner.store_error(
                            strata_store::StoreError::InvalidArgument(
                                "the store decided a write set twice although it says it decides once (a bug in the backend or a wrapper); nothing was written".into(),
                            ),
                        )));
                    }
                },
                Err(e) if e.is_conflict() => {
                    // A guard changed (the fence, a keyring): read them again.
                    for inner in collections {
                        inner.policy.forget_fence();
                        inner.refresh_sealer().map_err(WriteSetError::store)?;
                    }
                }
                Err(e) => {
                    let inner = &collections[docs[0].of];
                    return Err(WriteSetError::store(inner.store_error(e)));
                }
            }
        }
        Err(WriteSetError::store(CollectionError::Conflict {
            collection: collections[docs[0].of].name.clone(),
            key: key_of(0).to_string(),
            expected: docs[0].expect,
            found: found[0],
        }))
    }
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Adds an unconditional write of `value` (last writer wins) to the set `w`.
    pub fn put_in(&self, w: &mut WriteSet, key: &str, value: &T) -> Result<(), WriteSetError> {
        self.add_set(w, key, value, Expect::Any)
    }

    /// Adds the creation of a document that must not exist yet to the set `w`.
    pub fn insert_in(&self, w: &mut WriteSet, key: &str, value: &T) -> Result<(), WriteSetError> {
        self.add_set(w, key, value, Expect::Absent)
    }

    /// Adds a replacement of a document that must still have `expected_lock` to the set
    /// `w` (otherwise the set refuses with this document's
    /// [`CollectionError::Conflict`]).
    pub fn update_in(
        &self,
        w: &mut WriteSet,
        key: &str,
        value: &T,
        expected_lock: u64,
    ) -> Result<(), WriteSetError> {
        self.add_set(w, key, value, Expect::Lock(expected_lock))
    }

    /// Adds the deletion of a document (absent: nothing to delete) to the set `w`.
    pub fn delete_in(&self, w: &mut WriteSet, key: &str) -> Result<(), WriteSetError> {
        self.check_key(key)
            .map_err(|e| WriteSetError::document(self.name(), key, e))?;
        w.add(&self.inner, key, Expect::Any, None)
    }

    /// Adds the deletion of a document that must still have `expected_lock` to the set.
    pub fn delete_if_in(
        &self,
        w: &mut WriteSet,
        key: &str,
        expected_lock: u64,
    ) -> Result<(), WriteSetError> {
        self.check_key(key)
            .map_err(|e| WriteSetError::document(self.name(), key, e))?;
        w.add(&self.inner, key, Expect::Lock(expected_lock), None)
    }

    fn add_set(
        &self,
        w: &mut WriteSet,
        key: &str,
        value: &T,
        expect: Expect,
    ) -> Result<(), WriteSetError> {
        let refuse = |e| WriteSetError::document(self.name(), key, e);
        self.check_key(key).map_err(refuse)?;
        if self.inner.sealed_without_key {
            return Err(refuse(self.inner.needs_key(&self.inner.key_of(key))));
        }
        let json = self.encode_json(key, value).map_err(refuse)?;
        w.add(&self.inner, key, expect, Some(json))
    }

    /// Writes every `(key, value)` unconditionally (last writer wins), in bounded atomic
    /// sets: each set of at most [`PUT_MANY_DOCUMENTS`] documents and [`PUT_MANY_BYTES`]
    /// encoded bytes is committed whole or not at all, in order, each document checked
    /// as a [`Collection::put`] is. On an error, the sets before the failing one are
    /// written (whole), the failing one and everything after are not. Returns the number
    /// of documents written.
    pub fn put_many<'v, K, I>(&self, items: I) -> Result<usize, WriteSetError>
    where
        K: AsRef<str>,
        T: 'v,
        I: IntoIterator<Item = (K, &'v T)>,
    {
        let items = items.into_iter();
        // Room for a whole set when that many documents are coming.
        let room = items.size_hint().0.min(PUT_MANY_DOCUMENTS);
        let mut written = 0;
        let mut set = WriteSet::with_capacity(self.inner.store.clone(), room);
        let mut bytes = 0usize;
        for (key, value) in items {
            let key = key.as_ref();
            let before = set.len();
            self.put_in(&mut set, key, value)?;
            if let Some(d) = set.docs.get(before) {
                bytes = bytes
                    .saturating_add(d.full.len())
                    .saturating_add(d.json.as_ref().map_or(0, Vec::len));
            }
            if set.len() >= PUT_MANY_DOCUMENTS || bytes >= PUT_MANY_BYTES {
                let next = WriteSet::with_capacity(self.inner.store.clone(), room);
                let full = std::mem::replace(&mut set, next);
                written += full.commit()?.len();
                bytes = 0;
            }
        }
        written += set.commit()?.len();
        Ok(written)
    }
}
