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
mod iter;
pub mod layout;
mod options;
mod read;
pub(crate) mod rewrite;
mod write;
pub mod write_set;

pub(crate) use error::with_causes;
pub use error::{CollectionError, Expect, GuardError};
pub use iter::{Iter, ITER_PAGE_BYTES};
pub use options::{CollectionOptions, WriteGuard};
pub use write_set::{WriteSet, WriteSetError, Written, PUT_MANY_BYTES, PUT_MANY_DOCUMENTS};

use crate::payload::chain::{JsonObject, UpcastChain};
use crate::payload::envelope::{self, Envelope};
use crate::payload::upcaster::Upcaster;
use crate::record_error::RecordError;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use strata_store::{KvRead, Precondition, Store};

/// The largest document record (full store key + encoded value, sealed or clear) a write
/// stores: half the default byte budget of the bulk pass ([`crate::pass::DEFAULT_MAX_BYTES`],
/// 4 MiB, used by `strata migrate`, sweeps and cutovers). A sweep or cutover reads a
/// document and writes its replacement in one batch, so a document of at most half the
/// budget can be read back and rewritten by every reader under its default budget (a step
/// or transform that grows it may need a larger one). A larger write is refused with
/// [`CollectionError::DocumentTooLarge`] and writes nothing.
pub const MAX_DOCUMENT_BYTES: usize = crate::pass::DEFAULT_MAX_BYTES / 2;

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
    pub(crate) sealer: Option<crate::seal::LiveSealer>,
    /// True when the collection holds sealed documents and this handle has no key: it
    /// refuses every set (a new document would be written in clear beside sealed ones).
    pub(crate) sealed_without_key: bool,
    /// The collection's deploy-window record key, read inside every write (`None`: the
    /// collection can take no part in a window — not under policy and no downcast from
    /// its current version — and writes at its current version).
    pub(crate) window_key: Option<Vec<u8>>,
    /// This build's schema declaration (`None`: no persisted schema): declared at open,
    /// or deferred while a deploy window is open; declared (again) when a window
    /// completes — after a revert too, which put the baseline back to the older build's.
    pub(crate) declaration: Option<crate::policy::SchemaDeclaration>,
    /// Payload versions above this build's whose rows it may write, with the properties
    /// the newer build added (kept as stored on such a write): the schema history proves
    /// the change additive (see [`CollectionOptions::keep_newer_fields`]). Read from the
    /// store at open, and again when a write meets a row of a newer version it does not
    /// list (a newer build deployed while this handle was open: the rolling deploy).
    pub(crate) newer_fields: std::sync::RwLock<Arc<NewerFields>>,
    /// [`CollectionOptions::keep_newer_fields`], for a collection with a declaration.
    pub(crate) keep_newer: bool,
}

/// Payload versions above a build's, with the properties the newer build added.
pub(crate) type NewerFields = std::collections::BTreeMap<i32, Vec<String>>;

impl CollectionInner {
    /// The newer versions this handle knows it may write (see
    /// [`CollectionInner::newer_fields`]).
    pub(crate) fn newer_fields(&self) -> Arc<NewerFields> {
        Arc::clone(
            &self
                .newer_fields
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// A stored row at payload version `stored`, ahead of this build and not (yet) known
    /// to be writable: `Some(stored)` when the store's schema history should be read
    /// again ([`CollectionInner::learn_newer`]) before the write is refused.
    pub(crate) fn unknown_newer(&self, stored: i32) -> Option<i32> {
        (self.keep_newer
            && self.upcaster.is_ahead(stored)
            && !self.newer_fields().contains_key(&stored))
        .then_some(stored)
    }

    /// Reads the schema history again: true when it now proves the change of the build
    /// at `stored` additive (this handle then writes such rows keeping the newer
    /// properties).
    pub(crate) fn learn_newer(&self, stored: i32) -> Result<bool, CollectionError> {
        let Some(decl) = self.declaration.as_ref().filter(|_| self.keep_newer) else {
            return Ok(false);
        };
        let map = newer_additive(
            &self.store,
            &self.name,
            decl.schema_value(),
            self.upcaster.chain().current_version(),
        )?;
        let known = map.contains_key(&stored);
        *self
            .newer_fields
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(map);
        Ok(known)
    }
}

// The errors of the read and write paths, built out of their line and shared by every
// document type (not generic).
impl CollectionInner {
    #[cold]
    #[inline(never)]
    pub(crate) fn store_error(&self, e: strata_store::StoreError) -> CollectionError {
        CollectionError::store(&self.name, e)
    }

    #[cold]
    #[inline(never)]
    fn policy_error(&self, e: crate::policy::PolicyError) -> CollectionError {
        CollectionError::policy(&self.name, e)
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn too_large(&self, key: &str, size: usize) -> CollectionError {
        CollectionError::DocumentTooLarge {
            collection: self.name.clone(),
            key: key.to_string(),
            size,
            limit: MAX_DOCUMENT_BYTES,
        }
    }

    #[cold]
    #[inline(never)]
    fn empty_key(&self) -> CollectionError {
        CollectionError::InvalidKey {
            collection: self.name.clone(),
            key: String::new(),
            reason: "a document key must not be empty".into(),
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn encode_error(&self, key: &str, reason: String) -> CollectionError {
        CollectionError::Encode {
            collection: self.name.clone(),
            key: key.to_string(),
            reason,
        }
    }
}

// The parts of the write path that do not depend on the document type: one copy for
// every `Collection<T>` (its methods of the same names delegate here).
impl CollectionInner {
    /// The payload version this build writes (1 + the number of steps).
    pub(crate) fn current_version(&self) -> i32 {
        self.upcaster.chain().current_version()
    }

    /// The full store key of a document.
    pub(crate) fn key_of(&self, key: &str) -> Vec<u8> {
        // `layout::doc_key` of the collection, from its prefix (`doc_prefix`): two copies.
        let prefix = self.prefix.as_slice();
        let mut full = Vec::with_capacity(prefix.len() + key.len());
        full.extend_from_slice(prefix);
        full.extend_from_slice(key.as_bytes());
        full
    }

    /// The clear envelope header of a stored value (clear or sealed: readable without the
    /// key).
    pub(crate) fn header_of(&self, key: &str, bytes: &[u8]) -> Result<Envelope, CollectionError> {
        match crate::seal::peek(bytes) {
            Some((env, _)) => Ok(env),
            None => envelope::decode(bytes)
                .map(|(env, _)| env)
                .map_err(|e| self.corrupted(key, RecordError::from_error(e))),
        }
    }

    /// The current snapshot of the collection's keys (`None`: a clear collection). A
    /// sealed write seals with one snapshot and carries its keyring precondition.
    pub(crate) fn sealer_now(&self) -> Option<crate::seal::Sealer> {
        self.sealer.as_ref().map(crate::seal::LiveSealer::current)
    }

    /// Re-reads the keyring after a conflict (see [`crate::seal::LiveSealer::refresh`]).
    pub(crate) fn refresh_sealer(&self) -> Result<Option<crate::seal::Sealer>, CollectionError> {
        match &self.sealer {
            None => Ok(None),
            Some(live) => {
                live.refresh(&self.store)
                    .map(Some)
                    .map_err(|source| CollectionError::Seal {
                        collection: self.name.clone(),
                        source,
                    })
            }
        }
    }

    /// Encodes a document value at `env`: sealed for a sealed collection.
    pub(crate) fn encode_value(
        &self,
        full_key: &[u8],
        env: Envelope,
        json: &[u8],
        sealer: Option<&crate::seal::Sealer>,
    ) -> Result<Vec<u8>, CollectionError> {
        match sealer {
            None => Ok(envelope::encode(env, json)),
            Some(s) => crate::seal::seal_document(s, full_key, self.table_id, env, json).map_err(
                |source| CollectionError::Seal {
                    collection: self.name.clone(),
                    source,
                },
            ),
        }
    }

    /// Refuses a document record the default read budgets could not read back
    /// ([`MAX_DOCUMENT_BYTES`]).
    pub(crate) fn check_size(
        &self,
        key: &str,
        full_key: &[u8],
        value: &[u8],
    ) -> Result<(), CollectionError> {
        let size = full_key.len().saturating_add(value.len());
        if size > MAX_DOCUMENT_BYTES {
            return Err(self.too_large(key, size));
        }
        Ok(())
    }

    /// Refuses a document whose full store key is longer than
    /// [`strata_store::MAX_KEY_BYTES`] before the write is attempted, naming the collection
    /// (the store layer refuses the same key the same way on every backend).
    pub(crate) fn check_key_length(&self, key: &str) -> Result<(), CollectionError> {
        if self.prefix.len().saturating_add(key.len()) > strata_store::MAX_KEY_BYTES {
            return Err(self.store_error(strata_store::StoreError::KeyTooLong {
                key: self.key_of(key),
                len: self.prefix.len().saturating_add(key.len()),
                limit: strata_store::MAX_KEY_BYTES,
            }));
        }
        Ok(())
    }

    pub(crate) fn check_key(&self, key: &str) -> Result<(), CollectionError> {
        if key.is_empty() {
            return Err(self.empty_key());
        }
        Ok(())
    }

    /// Runs the policy's check (fence, generation, strategy verdict) and every write
    /// guard; returns the preconditions the write's batch must carry so
    /// that the guards' verdicts still hold when it commits.
    pub(crate) fn check_guards(&self) -> Result<Vec<Precondition>, CollectionError> {
        let fence = self
            .policy
            .guard_write(&self.name, self.governed)
            .map_err(|e| CollectionError::policy(&self.name, e))?;
        self.with_guards(fence)
    }

    /// [`Collection::check_guards`] for the write path: the fence check uses the fence
    /// record this handle last read (exact all the same: the write requires its bytes; on
    /// a conflict the caller drops it with `policy.forget_fence()` and checks again).
    pub(crate) fn check_guards_seen(&self) -> Result<Guards, CollectionError> {
        let fence = self
            .policy
            .guard_write_seen(&self.name, self.governed)
            .map_err(|e| self.policy_error(e))?;
        let others = if self.guards.is_empty() {
            Vec::new()
        } else {
            self.write_guards(Vec::new())?
        };
        Ok(Guards { fence, others })
    }

    /// The fence precondition plus every write guard's.
    fn with_guards(&self, fence: Precondition) -> Result<Vec<Precondition>, CollectionError> {
        // Room for a sealed write's keyring precondition (the document's own goes with its
        // key: `KeyWrite`; read-repair's batch adds it too).
        let mut preconditions = Vec::with_capacity(3 + self.guards.len());
        preconditions.push(fence);
        self.write_guards(preconditions)
    }

    /// Every write guard's preconditions, after `preconditions`.
    fn write_guards(
        &self,
        mut preconditions: Vec<Precondition>,
    ) -> Result<Vec<Precondition>, CollectionError> {
        for g in &self.guards {
            preconditions.extend(
                g.guard_write(&self.name)
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
                    collection: self.name.clone(),
                    error: Box::new(other),
                },
            },
            Err(error) => CollectionError::Guard {
                collection: self.name.clone(),
                error,
            },
        }
    }

    pub(crate) fn get_raw(&self, full_key: &[u8]) -> Result<Option<Vec<u8>>, CollectionError> {
        self.store.get(full_key).map_err(|e| self.store_error(e))
    }

    pub(crate) fn corrupted(&self, key: &str, reason: RecordError) -> CollectionError {
        CollectionError::Corrupted {
            collection: self.name.clone(),
            key: key.to_string(),
            reason,
        }
    }

    pub(crate) fn warn_ahead(&self, key: &str, stored: i32) {
        let first = self
            .ahead_warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.name.clone());
        if first {
            tracing::warn!(
                collection = %self.name,
                key = %strata_store::escape_key(key.as_bytes()),
                stored,
                current = self.current_version(),
                "refusing to overwrite a document written by a newer build; this instance is read-only for such documents until it is upgraded (logged once per collection)"
            );
        }
    }
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

    /// The raw store under this collection.
    ///
    /// **Raw writes through it bypass every check strata makes**: the schema gate and the
    /// fence, the write guards, sealing (a value written through it is stored in clear),
    /// the lock version and the ahead guard — and a hand-encoded envelope skips the
    /// payload rules. Read through it, or write keys outside strata's `__nx/` prefix; to
    /// write several documents atomically use `Database::write` and the `*_in` methods
    /// ([`WriteSet`]).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The payload version this build writes (1 + the number of steps).
    pub fn current_version(&self) -> i32 {
        self.inner.current_version()
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
        self.inner.key_of(key)
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

    pub(crate) fn header_of(&self, key: &str, bytes: &[u8]) -> Result<Envelope, CollectionError> {
        self.inner.header_of(key, bytes)
    }

    /// The clear form (envelope format 1) of a stored value: a sealed one authenticated
    /// and decrypted with the collection's keys.
    pub(crate) fn unseal<'b>(
        &self,
        full_key: &[u8],
        bytes: &'b [u8],
    ) -> Result<std::borrow::Cow<'b, [u8]>, CollectionError> {
        let open = |sealer: Option<&crate::seal::Sealer>| {
            crate::seal::unseal_row(sealer, true, full_key, self.inner.table_id, bytes)
                .map(|(clear, _)| clear)
        };
        let first = match &self.inner.sealer {
            Some(live) => live.with_current(|s| open(Some(s))),
            None => open(None),
        };
        let result = match first {
            // Sealed under a key this handle's snapshot lacks (a rotation started
            // elsewhere): refresh the keys once and retry.
            Err(crate::seal::SealError::UnknownDataKey { .. }) => {
                let fresh = self.refresh_sealer()?;
                open(fresh.as_ref())
            }
            other => other,
        };
        result.map_err(|source| CollectionError::Seal {
            collection: self.inner.name.clone(),
            source,
        })
    }

    /// The read path's fast form of [`Collection::unseal`] for a row the store handed
    /// over: a sealed row at or above the current version is authenticated and decrypted
    /// in place, in `bytes` itself (no second buffer, no copy, no key snapshot clone),
    /// which then holds the clear envelope: `Ok(true)`. `Ok(false)`, `bytes` untouched,
    /// for everything else (a clear collection or row, a value that is no envelope, a
    /// stale row whose stored bytes read-repair compares against): use `unseal`.
    pub(crate) fn unseal_current_in_place(
        &self,
        full_key: &[u8],
        bytes: &mut Vec<u8>,
    ) -> Result<bool, CollectionError> {
        let Some(live) = &self.inner.sealer else {
            return Ok(false);
        };
        match crate::seal::peek(bytes) {
            Some((env, true)) if !self.inner.upcaster.is_behind(env.payload_version) => {}
            _ => return Ok(false),
        }
        let id = self.inner.table_id;
        let result = match live
            .with_current(|s| crate::seal::unseal_in_place(s, full_key, id, bytes))
        {
            // A key this snapshot lacks (`bytes` untouched): refresh once and retry.
            Err(crate::seal::SealError::UnknownDataKey { .. }) => match self.refresh_sealer()? {
                Some(fresh) => crate::seal::unseal_in_place(&fresh, full_key, id, bytes),
                None => return Ok(false),
            },
            other => other,
        };
        result
            .map(|()| true)
            .map_err(|source| CollectionError::Seal {
                collection: self.inner.name.clone(),
                source,
            })
    }

    pub(crate) fn sealer_now(&self) -> Option<crate::seal::Sealer> {
        self.inner.sealer_now()
    }

    pub(crate) fn refresh_sealer(&self) -> Result<Option<crate::seal::Sealer>, CollectionError> {
        self.inner.refresh_sealer()
    }

    pub(crate) fn check_size(
        &self,
        key: &str,
        full_key: &[u8],
        value: &[u8],
    ) -> Result<(), CollectionError> {
        self.inner.check_size(key, full_key, value)
    }

    pub(crate) fn check_key(&self, key: &str) -> Result<(), CollectionError> {
        self.inner.check_key(key)
    }

    pub(crate) fn check_guards(&self) -> Result<Vec<Precondition>, CollectionError> {
        self.inner.check_guards()
    }

    pub(crate) fn guard_refusal(&self, error: GuardError) -> CollectionError {
        self.inner.guard_refusal(error)
    }

    pub(crate) fn get_raw(&self, full_key: &[u8]) -> Result<Option<Vec<u8>>, CollectionError> {
        self.inner.get_raw(full_key)
    }

    pub(crate) fn corrupted(&self, key: &str, reason: RecordError) -> CollectionError {
        self.inner.corrupted(key, reason)
    }

    /// The one row rewrite of this collection (see [`rewrite`]).
    /// `sealer`: the snapshot of [`Collection::sealer_now`] whose keyring precondition
    /// the rewritten row's batch carries.
    pub(crate) fn rewriter<'a>(
        &'a self,
        transform: Option<&'a crate::policy::Transform>,
        sealer: Option<&'a crate::seal::Sealer>,
    ) -> rewrite::RowRewriter<'a> {
        rewrite::RowRewriter {
            collection: &self.inner.name,
            upcaster: &self.inner.upcaster,
            transform,
            bump_lock: transform.is_some(),
            seal: sealer.map(|sealer| rewrite::RowSeal {
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
            Err(f) => Err(CollectionError::upcast_failure(
                &self.inner.name,
                key,
                stored,
                f,
            )),
        }
    }
}

/// What a write must still find when it commits for its guards' verdicts to hold: the
/// fence record it was checked against and every write guard's preconditions
/// ([`CollectionInner::check_guards_seen`]).
///
/// On a backend that decides once (its decision's values are current until it commits:
/// redb, memory) the guards' keys are read with the document and the decision checks
/// them — nothing copied per write; elsewhere the batch carries them as preconditions
/// ([`Guards::check_or_carry`]).
#[derive(Debug)]
pub(crate) struct Guards {
    fence: crate::policy::SeenGuard,
    others: Vec<Precondition>,
}

impl Guards {
    /// How many keys the guards are on.
    pub(crate) fn len(&self) -> usize {
        1 + self.others.len()
    }

    /// The keys the guards are on, the fence record's first.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(self.fence.key()).chain(self.others.iter().map(Precondition::key))
    }

    /// Makes the guards hold for the write being decided into `batch`: with `read` (a
    /// backend that decides once read [`Guards::keys`] in the write's own transaction;
    /// `current` are their values, in order) they are checked now — `false` when one no
    /// longer holds (nothing may be written; read the fence again); otherwise the batch
    /// carries them as preconditions (copies) and `current` is not looked at.
    pub(crate) fn check_or_carry(
        &self,
        read: bool,
        current: &[Option<&[u8]>],
        batch: &mut strata_store::Batch,
    ) -> bool {
        if !read {
            batch.push_precondition(self.fence.precondition());
            for p in &self.others {
                batch.push_precondition(p.clone());
            }
            return true;
        }
        let Some((fence, others)) = current.split_first() else {
            return false;
        };
        others.len() == self.others.len()
            && self.fence.holds(*fence)
            && self
                .others
                .iter()
                .zip(others)
                .all(|(p, v)| p.check(*v).is_ok())
    }
}

/// For each payload version above `build` that the store's schema history records, the
/// properties it added to `schema` (this build's) when every schema recorded at that
/// version is an additive change of it (new optional top-level properties only); versions
/// without that proof are absent. Empty when the baseline is not above `build`.
pub(crate) fn newer_additive(
    store: &strata_store::Store,
    collection: &str,
    schema: &serde_json::Value,
    build: i32,
) -> Result<std::collections::BTreeMap<i32, Vec<String>>, CollectionError> {
    use std::collections::BTreeMap;
    let policy = |e| CollectionError::policy(collection, e);
    let above = crate::policy::Baseline::load(store, collection)
        .ok()
        .flatten()
        .and_then(|b| b.payload_version)
        .is_some_and(|v| v > build);
    if !above {
        return Ok(BTreeMap::new());
    }
    let mut proven: BTreeMap<i32, Option<Vec<String>>> = BTreeMap::new();
    for entry in crate::policy::read_history(store, collection).map_err(policy)? {
        let Some(v) = entry.baseline.payload_version.filter(|v| *v > build) else {
            continue;
        };
        let added = strata_schema::diff(collection, schema, &entry.baseline.schema)
            .ok()
            .filter(|d| d.kind == strata_schema::DeltaKind::Additive)
            .map(|d| d.added);
        let slot = proven.entry(v).or_insert_with(|| Some(Vec::new()));
        match (slot.as_mut(), added) {
            (Some(names), Some(more)) => {
                for n in more {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
            _ => *slot = None,
        }
    }
    Ok(proven
        .into_iter()
        .filter_map(|(v, names)| names.map(|n| (v, n)))
        .collect())
}
