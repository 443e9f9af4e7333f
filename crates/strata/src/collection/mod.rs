//! Typed JSON document collections over the store.
//!
//! A [`Collection<T>`] keeps serde values of one type under a name. It is a managed table
//! (schema header at `__nx/schema/<name>`, a stable table id recorded at
//! `__nx/catalog/<name>`, documents under `__nx/doc/<name>/`), and every document value is
//! an envelope ([`crate::payload::envelope`]): payload version + lock version + JSON.
//!
//! Every path that returns documents goes through the payload read path: a document at the
//! current payload version binds straight from its bytes; an older one is upcast by the
//! collection's chain first. Every write checks the write guards, the optimistic lock
//! (when asked) and the ahead guard.

mod error;
pub mod layout;
mod options;
pub(crate) mod rewrite;

pub use error::{CollectionError, Expect, GuardError};
pub use options::{CollectionOptions, WriteGuard};

use crate::payload::chain::{JsonObject, UpcastChain, UpcastFailure, Upcaster};
use crate::payload::envelope::{self, Envelope};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use strata_store::{
    Batch, KvRead, KvWrite, Pages, Precondition, Record, Records, ScanLimits, Store,
};

/// How many times a write re-reads and retries after losing a compare-and-swap race.
const MAX_WRITE_ATTEMPTS: usize = 64;
/// Records per page of an iteration.
const ITER_PAGE_RECORDS: usize = 256;
/// Byte budget per page of an iteration.
const ITER_PAGE_BYTES: usize = 64 << 20;

/// One document as read: the key, the bound value and its envelope data.
#[derive(Debug, Clone, PartialEq)]
pub struct Document<T> {
    /// The document key (inside the collection).
    pub key: String,
    /// The value, at this build's current payload version.
    pub value: T,
    /// The optimistic-lock version (pass it to [`Collection::update`]).
    pub lock_version: u64,
    /// The payload version stored (may be below the current version when upcast on read,
    /// or above it when a newer build wrote the document).
    pub stored_version: i32,
    /// True when upcast steps ran for this read.
    pub upcast: bool,
}

pub(crate) struct CollectionInner {
    pub(crate) name: String,
    pub(crate) table_id: u16,
    pub(crate) prefix: Vec<u8>,
    pub(crate) store: Store,
    pub(crate) upcaster: Upcaster,
    pub(crate) read_repair: bool,
    pub(crate) guards: Vec<Arc<dyn WriteGuard>>,
    /// The database handle's policy link: every write obeys the stored fence through it.
    pub(crate) policy: Arc<crate::policy::PolicyLink>,
    /// True when the collection is under policy (a persisted schema): writers register
    /// their presence before writing it.
    pub(crate) governed: bool,
    /// Collections (of this database) whose ahead-guard refusal was already logged.
    pub(crate) ahead_warned: Arc<Mutex<HashSet<String>>>,
    pub(crate) sweeping: Arc<Mutex<HashSet<String>>>,
    /// The data keys of a sealed collection (`None`: documents in clear).
    pub(crate) sealer: Option<crate::seal::Sealer>,
}

/// A typed collection handle. Cheap to clone; clones share the declaration.
pub struct Collection<T> {
    pub(crate) inner: Arc<CollectionInner>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection {
            inner: Arc::clone(&self.inner),
            _type: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("name", &self.inner.name)
            .field("table_id", &self.inner.table_id)
            .field("current_version", &self.current_version())
            .finish_non_exhaustive()
    }
}

impl<T> Collection<T> {
    pub(crate) fn from_inner(inner: CollectionInner) -> Self {
        Collection {
            inner: Arc::new(inner),
            _type: PhantomData,
        }
    }

    /// The collection name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The stable table id recorded for this collection.
    pub fn table_id(&self) -> u16 {
        self.inner.table_id
    }

    /// The store under this collection.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The payload version this build writes (1 + the number of steps).
    pub fn current_version(&self) -> i32 {
        self.inner.upcaster.chain().current_version()
    }

    /// True when the collection declares at least one upcast step.
    pub fn has_chain(&self) -> bool {
        self.inner.upcaster.chain().has_chain()
    }

    /// The version an eager sweep brings documents to (`None`: no eager step).
    pub fn eager_target_version(&self) -> Option<i32> {
        self.inner.upcaster.chain().eager_target_version()
    }

    /// An immutable snapshot of the upcast chain.
    pub fn chain(&self) -> UpcastChain {
        self.inner.upcaster.chain().clone()
    }

    /// The upcaster (chain + protected fields) of this collection.
    pub fn upcaster(&self) -> &Upcaster {
        &self.inner.upcaster
    }

    /// The full store key of a document.
    pub fn key_of(&self, key: &str) -> Vec<u8> {
        layout::doc_key(&self.inner.name, key)
    }

    /// The envelope of a stored document — payload and lock version — read without
    /// parsing its JSON.
    pub fn envelope(&self, key: &str) -> Result<Option<Envelope>, CollectionError> {
        self.check_key(key)?;
        let Some(bytes) = self.get_raw(&self.key_of(key))? else {
            return Ok(None);
        };
        self.header_of(key, &bytes).map(Some)
    }

    /// The clear envelope header of a stored value (clear or sealed: readable without the
    /// key).
    pub(crate) fn header_of(&self, key: &str, bytes: &[u8]) -> Result<Envelope, CollectionError> {
        match crate::seal::peek(bytes) {
            Some((env, _)) => Ok(env),
            None => envelope::decode(bytes)
                .map(|(env, _)| env)
                .map_err(|e| self.corrupted(key, e.to_string())),
        }
    }

    /// The clear form (envelope format 1) of a stored value: a sealed one authenticated
    /// and decrypted with the collection's keys.
    pub(crate) fn unseal<'b>(
        &self,
        full_key: &[u8],
        bytes: &'b [u8],
    ) -> Result<std::borrow::Cow<'b, [u8]>, CollectionError> {
        crate::seal::unseal_row(
            self.inner.sealer.as_ref(),
            true,
            full_key,
            self.inner.table_id,
            bytes,
        )
        .map(|(clear, _)| clear)
        .map_err(|source| CollectionError::Seal {
            collection: self.inner.name.clone(),
            source,
        })
    }

    /// Encodes a document value at `env`: sealed for a sealed collection.
    pub(crate) fn encode_value(
        &self,
        full_key: &[u8],
        env: Envelope,
        json: &[u8],
    ) -> Result<Vec<u8>, CollectionError> {
        match &self.inner.sealer {
            None => Ok(envelope::encode(env, json)),
            Some(s) => crate::seal::seal_document(s, full_key, self.inner.table_id, env, json)
                .map_err(|source| CollectionError::Seal {
                    collection: self.inner.name.clone(),
                    source,
                }),
        }
    }

    pub(crate) fn check_key(&self, key: &str) -> Result<(), CollectionError> {
        if key.is_empty() {
            return Err(CollectionError::InvalidKey {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                reason: "a document key must not be empty".into(),
            });
        }
        Ok(())
    }

    /// Runs the policy's check (fence, generation, strategy verdict) and every write
    /// guard; returns the preconditions the write's batch must carry so
    /// that the guards' verdicts still hold when it commits.
    pub(crate) fn check_guards(&self) -> Result<Vec<Precondition>, CollectionError> {
        let fence = self
            .inner
            .policy
            .guard_write(&self.inner.name, self.inner.governed)
            .map_err(|e| CollectionError::policy(&self.inner.name, e))?;
        self.with_guards(fence)
    }

    /// [`Collection::check_guards`] for the write path: the fence check uses the fence
    /// record this handle last read (exact all the same: the batch requires its bytes; on a
    /// conflict the caller drops it with `policy.forget_fence()` and checks again).
    fn check_guards_seen(&self) -> Result<Vec<Precondition>, CollectionError> {
        let fence = self
            .inner
            .policy
            .guard_write_seen(&self.inner.name, self.inner.governed)
            .map_err(|e| CollectionError::policy(&self.inner.name, e))?;
        self.with_guards(fence)
    }

    /// The fence precondition plus every write guard's.
    fn with_guards(&self, fence: Precondition) -> Result<Vec<Precondition>, CollectionError> {
        let mut preconditions = Vec::with_capacity(1 + self.inner.guards.len());
        preconditions.push(fence);
        for g in &self.inner.guards {
            preconditions.extend(
                g.guard_write(&self.inner.name)
                    .map_err(|error| self.guard_refusal(error))?,
            );
        }
        Ok(preconditions)
    }

    /// A guard's error as a collection error: a policy refusal stays typed.
    pub(crate) fn guard_refusal(&self, error: GuardError) -> CollectionError {
        match error.downcast::<crate::policy::PolicyError>() {
            Ok(e) => match *e {
                crate::policy::PolicyError::Refused { collection, reason } => {
                    CollectionError::Refused { collection, reason }
                }
                other => CollectionError::Guard {
                    collection: self.inner.name.clone(),
                    error: Box::new(other),
                },
            },
            Err(error) => CollectionError::Guard {
                collection: self.inner.name.clone(),
                error,
            },
        }
    }

    pub(crate) fn get_raw(&self, full_key: &[u8]) -> Result<Option<Vec<u8>>, CollectionError> {
        self.inner
            .store
            .get(full_key)
            .map_err(|e| CollectionError::store(&self.inner.name, e))
    }

    pub(crate) fn corrupted(&self, key: &str, reason: String) -> CollectionError {
        CollectionError::Corrupted {
            collection: self.inner.name.clone(),
            key: key.to_string(),
            reason,
        }
    }

    pub(crate) fn warn_ahead(&self, key: &str, stored: i32) {
        let first = self
            .inner
            .ahead_warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.inner.name.clone());
        if first {
            tracing::warn!(
                collection = %self.inner.name,
                key = %strata_store::escape_key(key.as_bytes()),
                stored,
                current = self.current_version(),
                "refusing to overwrite a document written by a newer build; this instance is read-only for such documents until it is upgraded (logged once per collection)"
            );
        }
    }

    /// The one row rewrite of this collection (see [`rewrite`]).
    pub(crate) fn rewriter<'a>(
        &'a self,
        transform: Option<&'a crate::policy::Transform>,
    ) -> rewrite::RowRewriter<'a> {
        rewrite::RowRewriter {
            collection: &self.inner.name,
            upcaster: &self.inner.upcaster,
            transform,
            seal: self.inner.sealer.as_ref().map(|sealer| rewrite::RowSeal {
                sealer,
                table_id: self.inner.table_id,
                strict: true,
            }),
        }
    }

    /// Runs the chain on the JSON of a stale document. Returns the upcast object and the
    /// version reached. Errors name collection, key, versions and cause.
    pub(crate) fn upcast_json(
        &self,
        key: &str,
        stored: i32,
        json: &[u8],
    ) -> Result<(JsonObject, i32), CollectionError> {
        let mut obj: JsonObject =
            serde_json::from_slice(json).map_err(|e| CollectionError::Bind {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                stored,
                version: stored,
                source: e,
            })?;
        match self.inner.upcaster.upcast(&mut obj, stored) {
            Ok(v) => Ok((obj, v)),
            Err(UpcastFailure::InvalidVersion { found }) => {
                Err(CollectionError::InvalidPayloadVersion {
                    collection: self.inner.name.clone(),
                    key: key.to_string(),
                    found,
                })
            }
            Err(UpcastFailure::Step { from, source }) => Err(CollectionError::Upcast {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                stored,
                from,
                to: from.saturating_add(1),
                source,
            }),
        }
    }
}

/// What decoding one stored row produced, before binding (shared with the sweep).
pub(crate) enum Decoded {
    /// At or above the current version: bind from the JSON bytes directly.
    Direct(Envelope),
    /// Behind: the upcast tree, its version and the re-encoded value.
    Upcast {
        env: Envelope,
        obj: JsonObject,
        version: i32,
    },
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Classifies and (when stale) upcasts a stored row.
    pub(crate) fn decode_stored(
        &self,
        key: &str,
        bytes: &[u8],
    ) -> Result<Decoded, CollectionError> {
        let (env, json) =
            envelope::decode(bytes).map_err(|e| self.corrupted(key, e.to_string()))?;
        if env.payload_version < crate::payload::INITIAL_PAYLOAD_VERSION {
            return Err(CollectionError::InvalidPayloadVersion {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                found: env.payload_version,
            });
        }
        if !self.inner.upcaster.is_behind(env.payload_version) {
            return Ok(Decoded::Direct(env));
        }
        let (obj, version) = self.upcast_json(key, env.payload_version, json)?;
        Ok(Decoded::Upcast { env, obj, version })
    }

    /// Binds an upcast tree to `T`.
    pub(crate) fn bind_tree(
        &self,
        key: &str,
        stored: i32,
        version: i32,
        obj: JsonObject,
    ) -> Result<T, CollectionError> {
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| CollectionError::Bind {
            collection: self.inner.name.clone(),
            key: key.to_string(),
            stored,
            version,
            source: e,
        })
    }

    /// The read path: every method returning documents goes through here. Returns the
    /// bound value, the stored envelope and whether steps ran.
    fn read_row(
        &self,
        key: &str,
        full_key: &[u8],
        stored: &[u8],
    ) -> Result<(T, Envelope, bool), CollectionError> {
        let clear = self.unseal(full_key, stored)?;
        let bytes: &[u8] = &clear;
        match self.decode_stored(key, bytes)? {
            Decoded::Direct(env) => {
                // At or above the current version: bind straight from the bytes.
                let json = &bytes[envelope::ENVELOPE_HEADER_LEN..];
                let value = serde_json::from_slice::<T>(json).map_err(|e| {
                    if self.inner.upcaster.is_ahead(env.payload_version) {
                        CollectionError::NewerBuild {
                            collection: self.inner.name.clone(),
                            key: key.to_string(),
                            stored: env.payload_version,
                            current: self.current_version(),
                            source: e,
                        }
                    } else {
                        CollectionError::Bind {
                            collection: self.inner.name.clone(),
                            key: key.to_string(),
                            stored: env.payload_version,
                            version: env.payload_version,
                            source: e,
                        }
                    }
                })?;
                Ok((value, env, false))
            }
            Decoded::Upcast { env, obj, version } => {
                if !self.inner.read_repair {
                    let value = self.bind_tree(key, env.payload_version, version, obj)?;
                    return Ok((value, env, true));
                }
                let tree = serde_json::Value::Object(obj);
                let value = T::deserialize(&tree).map_err(|e| CollectionError::Bind {
                    collection: self.inner.name.clone(),
                    key: key.to_string(),
                    stored: env.payload_version,
                    version,
                    source: e,
                })?;
                if let serde_json::Value::Object(obj) = tree {
                    // The tree already binds: the rewrite only encodes it.
                    match self
                        .rewriter(None)
                        .finish(key, env, version, obj, |_| Ok(()))
                    {
                        Ok(new) => self.repair(key, full_key, stored, new),
                        Err(e) => {
                            tracing::debug!(collection = %self.inner.name, error = %e, "read-repair skipped");
                        }
                    }
                }
                Ok((value, env, true))
            }
        }
    }

    fn read_document(
        &self,
        key: String,
        full_key: &[u8],
        bytes: &[u8],
    ) -> Result<Document<T>, CollectionError> {
        let (value, env, upcast) = self.read_row(&key, full_key, bytes)?;
        Ok(Document {
            key,
            value,
            lock_version: env.lock_version,
            stored_version: env.payload_version,
            upcast,
        })
    }

    /// Read-repair: compare-and-swap the upcast form over exactly the bytes that were
    /// read. Never fails the read.
    fn repair(&self, key: &str, full_key: &[u8], old: &[u8], new: Vec<u8>) {
        let guarded = match self.check_guards() {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(collection = %self.inner.name, error = %e, "read-repair skipped: write guard refused");
                return;
            }
        };
        let mut batch = Batch::new()
            .require_eq(full_key.to_vec(), old.to_vec())
            .set(full_key.to_vec(), new);
        for p in guarded {
            batch.push_precondition(p);
        }
        match self.inner.store.apply(batch) {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                tracing::debug!(collection = %self.inner.name, key = %strata_store::escape_key(key.as_bytes()), "read-repair lost a race; left to the concurrent write");
            }
            Err(e) => {
                tracing::warn!(collection = %self.inner.name, key = %strata_store::escape_key(key.as_bytes()), error = %e, "read-repair failed; the document stays at its stored version");
            }
        }
    }

    /// Reads one document's value.
    pub fn get(&self, key: &str) -> Result<Option<T>, CollectionError> {
        self.check_key(key)?;
        let full = self.key_of(key);
        match self.get_raw(&full)? {
            Some(bytes) => self.read_row(key, &full, &bytes).map(|(v, _, _)| Some(v)),
            None => Ok(None),
        }
    }

    /// Reads one document with its lock and stored payload version.
    pub fn get_document(&self, key: &str) -> Result<Option<Document<T>>, CollectionError> {
        self.check_key(key)?;
        let full = self.key_of(key);
        match self.get_raw(&full)? {
            Some(bytes) => self.read_document(key.to_string(), &full, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Reads several documents; each read succeeds or fails on its own.
    pub fn get_many<'k, I>(&self, keys: I) -> Vec<Result<Option<Document<T>>, CollectionError>>
    where
        I: IntoIterator<Item = &'k str>,
    {
        keys.into_iter().map(|k| self.get_document(k)).collect()
    }

    /// Iterates every document in key order.
    pub fn iter(&self) -> Iter<'_, T> {
        self.range(Bound::Unbounded, Bound::Unbounded)
    }

    /// Iterates the documents whose key lies within the bounds, in key order.
    pub fn range(&self, start: Bound<&str>, end: Bound<&str>) -> Iter<'_, T> {
        let prefix = self.inner.prefix.clone();
        let (after, first) = match start {
            Bound::Unbounded => (None, None),
            Bound::Excluded(s) => (Some(self.key_of(s)), None),
            Bound::Included(s) => (Some(self.key_of(s)), Some(self.key_of(s))),
        };
        let end = match end {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(e) => Bound::Included(self.key_of(e)),
            Bound::Excluded(e) => Bound::Excluded(self.key_of(e)),
        };
        Iter::new(self, &prefix, after, first, end)
    }

    /// Iterates the documents whose key starts with `key_prefix`, in key order.
    pub fn scan_prefix(&self, key_prefix: &str) -> Iter<'_, T> {
        Iter::new(self, &self.key_of(key_prefix), None, None, Bound::Unbounded)
    }

    /// Writes a document unconditionally (last writer wins); returns its new lock
    /// version. Refused when the stored document was written by a newer build.
    pub fn put(&self, key: &str, value: &T) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Any)
            .map(|v| v.unwrap_or(0))
    }

    /// Creates a document that must not exist yet; returns its lock version (1).
    pub fn insert(&self, key: &str, value: &T) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Absent)
            .map(|v| v.unwrap_or(0))
    }

    /// Replaces a document only if it still has `expected_lock`; otherwise fails with
    /// [`CollectionError::Conflict`] and writes nothing. Returns the new lock version.
    pub fn update(&self, key: &str, value: &T, expected_lock: u64) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Lock(expected_lock))
            .map(|v| v.unwrap_or(0))
    }

    /// Deletes a document; returns whether it existed.
    pub fn delete(&self, key: &str) -> Result<bool, CollectionError> {
        self.write(key, None, Expect::Any).map(|v| v.is_some())
    }

    /// Deletes a document only if it still has `expected_lock`.
    pub fn delete_if(&self, key: &str, expected_lock: u64) -> Result<(), CollectionError> {
        self.write(key, None, Expect::Lock(expected_lock))
            .map(|_| ())
    }

    /// The one write path. Returns the new lock version of a set, or (for a delete) the
    /// lock version the deleted document had (`None`: nothing to delete).
    fn write(
        &self,
        key: &str,
        value: Option<&T>,
        expect: Expect,
    ) -> Result<Option<u64>, CollectionError> {
        self.check_key(key)?;
        // The JSON is encoded behind room for the envelope header, so a clear document is
        // written without another copy (a retry after a conflict encodes it again).
        let mut encoded = match value {
            Some(v) => Some(self.encode_json(key, v)?),
            None => None,
        };
        let full = self.key_of(key);
        let mut found = None;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            // Re-checked on every attempt: a conflict may mean the guard's state changed.
            let guarded = self.check_guards_seen()?;
            let old = self.get_raw(&full)?;
            let old_env = match &old {
                Some(b) if value.is_some() => {
                    if self.inner.sealer.is_none() && crate::seal::peek(b).is_some_and(|(_, s)| s) {
                        // A clear handle never overwrites a sealed document in clear.
                        return Err(CollectionError::Seal {
                            collection: self.inner.name.clone(),
                            source: crate::seal::SealError::NeedsKey { key: full.clone() },
                        });
                    }
                    Some(self.header_of(key, b)?)
                }
                Some(b) => crate::seal::peek(b).map(|(e, _)| e),
                None => None,
            };
            found = old_env.map(|e| e.lock_version);
            let conflict = match expect {
                Expect::Any => false,
                Expect::Absent => old.is_some(),
                Expect::Lock(n) => found != Some(n),
            };
            if conflict {
                return Err(CollectionError::Conflict {
                    collection: self.inner.name.clone(),
                    key: key.to_string(),
                    expected: expect,
                    found,
                });
            }
            let (batch, result) = match value {
                Some(v) => {
                    if let Some(e) = old_env {
                        if self.inner.upcaster.is_ahead(e.payload_version) {
                            self.warn_ahead(key, e.payload_version);
                            return Err(CollectionError::AheadOfBuild {
                                collection: self.inner.name.clone(),
                                key: key.to_string(),
                                stored: e.payload_version,
                                current: self.current_version(),
                            });
                        }
                    }
                    let lock = found.map_or(1, |l| l.saturating_add(1));
                    let env = Envelope::new(self.current_version(), lock);
                    let mut buf = match encoded.take() {
                        Some(buf) => buf,
                        None => self.encode_json(key, v)?,
                    };
                    let bytes = match &self.inner.sealer {
                        None => {
                            buf[..envelope::ENVELOPE_HEADER_LEN]
                                .copy_from_slice(&env.header_bytes());
                            buf
                        }
                        Some(_) => {
                            self.encode_value(&full, env, &buf[envelope::ENVELOPE_HEADER_LEN..])?
                        }
                    };
                    (
                        Batch::new()
                            .require(full.clone(), old)
                            .set(full.clone(), bytes),
                        Some(lock),
                    )
                }
                None => {
                    let Some(old) = old else {
                        return Ok(None);
                    };
                    (
                        Batch::new()
                            .require_eq(full.clone(), old)
                            .delete(full.clone()),
                        Some(found.unwrap_or(0)),
                    )
                }
            };
            let mut batch = batch;
            for p in guarded {
                batch.push_precondition(p);
            }
            match self.inner.store.apply(batch) {
                Ok(()) => return Ok(result),
                Err(e) if e.is_conflict() => {
                    self.inner.policy.forget_fence();
                    continue;
                }
                Err(e) => return Err(CollectionError::store(&self.inner.name, e)),
            }
        }
        Err(CollectionError::Conflict {
            collection: self.inner.name.clone(),
            key: key.to_string(),
            expected: expect,
            found,
        })
    }

    /// The JSON of `value` behind [`envelope::ENVELOPE_HEADER_LEN`] zero bytes (room for
    /// the header).
    fn encode_json(&self, key: &str, value: &T) -> Result<Vec<u8>, CollectionError> {
        let mut json = Vec::with_capacity(128);
        json.resize(envelope::ENVELOPE_HEADER_LEN, 0);
        serde_json::to_writer(&mut json, value).map_err(|e| CollectionError::Encode {
            collection: self.inner.name.clone(),
            key: key.to_string(),
            reason: e.to_string(),
        })?;
        if json.get(envelope::ENVELOPE_HEADER_LEN) != Some(&b'{') {
            return Err(CollectionError::Encode {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                reason: "the value does not serialize to a JSON object".into(),
            });
        }
        Ok(json)
    }

    fn suffix_of(&self, full_key: &[u8]) -> Result<String, CollectionError> {
        let suffix = full_key
            .strip_prefix(self.inner.prefix.as_slice())
            .unwrap_or(full_key);
        String::from_utf8(suffix.to_vec()).map_err(|_| {
            self.corrupted(
                &strata_store::escape_key(suffix),
                "the document key is not UTF-8".into(),
            )
        })
    }
}

/// An iterator over documents in key order, reading the store page by page (through the
/// store's one page iterator, [`strata_store::Pages`]). Every item goes through the
/// payload read path; a document that fails to read yields an `Err` item and iteration
/// continues with the next one; a failed scan yields one `Err` and ends it.
pub struct Iter<'a, T> {
    coll: &'a Collection<T>,
    first: Option<Vec<u8>>,
    records: Option<Records<'a, Store>>,
    failed: Option<CollectionError>,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl<T> std::fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("collection", &self.coll.inner.name)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'a, T> Iter<'a, T> {
    fn new(
        coll: &'a Collection<T>,
        scan_prefix: &[u8],
        after: Option<Vec<u8>>,
        first: Option<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Self {
        let (records, failed) = match ScanLimits::new(ITER_PAGE_RECORDS, ITER_PAGE_BYTES) {
            Ok(limits) => (
                Some(
                    Pages::new(&coll.inner.store, scan_prefix, limits)
                        .after(after.as_deref())
                        .records(),
                ),
                None,
            ),
            Err(e) => (None, Some(CollectionError::store(&coll.inner.name, e))),
        };
        Iter {
            coll,
            first,
            records,
            failed,
            end,
            done: false,
        }
    }

    fn stop(&mut self, e: CollectionError) -> Option<Result<Document<T>, CollectionError>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<T: Serialize + DeserializeOwned> Iterator for Iter<'_, T> {
    type Item = Result<Document<T>, CollectionError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            return self.stop(e);
        }
        let rec = match self.first.take() {
            Some(first) => match self.coll.get_raw(&first) {
                Ok(Some(value)) => Some(Record { key: first, value }),
                Ok(None) => None,
                Err(e) => return self.stop(e),
            },
            None => None,
        };
        let rec = match rec {
            Some(r) => r,
            None => match self.records.as_mut().and_then(Iterator::next) {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => {
                    let e = CollectionError::store(&self.coll.inner.name, e);
                    return self.stop(e);
                }
                Some(Ok(r)) => r,
            },
        };
        let past_end = match &self.end {
            Bound::Unbounded => false,
            Bound::Included(e) => rec.key > *e,
            Bound::Excluded(e) => rec.key >= *e,
        };
        if past_end {
            self.done = true;
            return None;
        }
        let key = match self.coll.suffix_of(&rec.key) {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        Some(self.coll.read_document(key, &rec.key, &rec.value))
    }
}
