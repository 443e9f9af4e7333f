//! [`Database`]: a store, the catalog of its collections and the policy side of the
//! handle. [`Database::builder`] is the one way to open one; the shape policy is an
//! option of the builder ([`DatabaseBuilder::policy`]) and of each collection
//! ([`CollectionOptions::schema`]). Whatever the options, every write of every collection
//! obeys the stored fence (a pending cutover fences it, a generation bump makes the
//! handle reopen), and a handle writing a collection under policy registers its presence
//! so the drain barrier waits for it.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use strata::CollectionOptions;
//! use strata::Database;
//! use strata_store::{MemoryStore, Store};
//!
//! #[derive(Debug, Serialize, Deserialize, PartialEq)]
//! struct Account { id: String, balance_cents: i64 }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let db = Database::builder(Store::new(MemoryStore::new())).open()?;
//! let accounts = db.collection::<Account>("accounts", CollectionOptions::new().identity_fields(["id"]))?;
//! let lock = accounts.insert("a1", &Account { id: "a1".into(), balance_cents: 500 })?;
//! assert_eq!(lock, 1);
//! assert_eq!(accounts.get("a1")?.map(|a| a.balance_cents), Some(500));
//! assert!(accounts.update("a1", &Account { id: "a1".into(), balance_cents: 0 }, 7).is_err());
//! # Ok(()) }
//! ```
//!
//! With the shape policy (the seed's `persistJsonSchema` / `schemaUpdate`):
//!
//! ```
//! use std::sync::Arc;
//! use serde::{Deserialize, Serialize};
//! use strata::clock::ManualClock;
//! use strata::CollectionOptions;
//! use strata::Database;
//! use strata::policy::{additive_only, PolicyConfig, SchemaOptions};
//! use strata_store::{MemoryStore, Store};
//!
//! #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! struct Invoice { id: String, amount: f64 }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::new(MemoryStore::new());
//! let config = PolicyConfig::new().clock(Arc::new(ManualClock::new(0))).heartbeat(None);
//! let db = Database::builder(store).policy(config).open()?;
//! let invoices = db.collection::<Invoice>(
//!     "invoices",
//!     CollectionOptions::new()
//!         .schema(SchemaOptions::of::<Invoice>().strategy(additive_only())),
//! )?;
//! invoices.put("i1", &Invoice { id: "i1".into(), amount: 10.0 })?;
//! assert_eq!(db.fence_state()?.generation, 0);
//! # Ok(()) }
//! ```

mod builder;

use crate::catalog::{Catalog, TableDef};
use crate::collection::layout::{self, FIRST_COLLECTION_ID};
use crate::collection::{
    Collection, CollectionError, CollectionInner, CollectionOptions, WriteGuard, WriteSet,
    WriteSetError, Written,
};
use crate::keys::{CATALOG_PREFIX, CATALOG_SEQ_KEY};
use crate::payload::chain::UpcastChain;
use crate::payload::upcaster::Upcaster;
use crate::policy::{
    baseline_key, DeclareOutcome, Fence, FenceDoc, Policy, PolicyError, PolicyLink,
    SchemaDeclaration, Verdict,
};
use crate::seal::{mark, LiveSealer, SealError, Sealer};
use crate::validate::{validate_and_init, ValidationError};
pub use builder::DatabaseBuilder;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use strata_store::{Batch, KvRead, KvWrite, Pages, ScanLimits, Store};

/// How many times collection registration retries after losing a race.
const MAX_REGISTER_ATTEMPTS: usize = 32;

/// One recorded collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionInfo {
    /// The name.
    pub name: String,
    /// The stable table id.
    pub table_id: u16,
}

#[derive(Debug)]
pub(crate) struct DbInner {
    pub(crate) store: Store,
    guards: Vec<Arc<dyn WriteGuard>>,
    catalog: Mutex<Catalog>,
    sweeping: Arc<Mutex<HashSet<String>>>,
    /// Collections whose ahead-guard refusal was logged (once per collection).
    ahead_warned: Arc<Mutex<HashSet<String>>>,
    pub(crate) policy: Arc<PolicyLink>,
    /// The unlocked database keyring (opened with a key), refreshed when it changes.
    pub(crate) sealer: Option<LiveSealer>,
}

/// A seal-layer error of collection `name` (empty: the database) as a [`CollectionError`].
fn seal_err(name: &str) -> impl Fn(SealError) -> CollectionError + '_ {
    move |source| CollectionError::Seal {
        collection: name.to_string(),
        source,
    }
}

/// Whether the first stored document of collection `name` is sealed
/// ([`mark::first_document`]): `None` when the collection holds no document.
fn first_document_sealed(store: &Store, name: &str) -> Result<Option<bool>, CollectionError> {
    mark::first_document(store, name.as_bytes())
        .map(|first| first.map(|(_, sealed)| sealed))
        .map_err(|e| CollectionError::store(name, e))
}

/// What [`Database::seal_state`] decided for one collection.
struct SealState {
    /// The collection is sealed: writes seal (with the key) or are refused (without).
    sealed: bool,
    /// The collection's sealed mark is to be written.
    mark: bool,
    /// Its first stored document is sealed (found without a mark).
    holds_sealed: bool,
}

/// A store plus the catalog of its collections (read from `__nx/catalog/`) and the
/// policy side of the handle. Cheap to clone; clones share the catalog, the in-process
/// sweep registry and the policy client.
#[derive(Debug, Clone)]
pub struct Database {
    pub(crate) inner: Arc<DbInner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn validation(e: ValidationError) -> CollectionError {
    match e {
        ValidationError::Store(source) => CollectionError::Store {
            collection: String::new(),
            source,
        },
        other => {
            let collection = match &other {
                ValidationError::Legacy { table }
                | ValidationError::MigrationRequired { table, .. }
                | ValidationError::Unsupported { table, .. }
                | ValidationError::Corrupted { table, .. } => table.clone(),
                _ => String::new(),
            };
            CollectionError::Validation {
                collection,
                source: other,
            }
        }
    }
}

impl Database {
    /// Starts opening a database over `store` (see [`DatabaseBuilder`]): a [`Store`] or a
    /// backend that converts into one (`SledStore`, `RedbStore`), e.g.
    /// `Database::builder(SledStore::open(path)?)`.
    pub fn builder(store: impl Into<Store>) -> DatabaseBuilder {
        DatabaseBuilder {
            store: store.into(),
            policy: None,
            guards: Vec::new(),
            key: None,
            sealed: false,
        }
    }

    /// The current snapshot of the unlocked data keys when the database was opened with
    /// a key.
    pub fn sealer(&self) -> Option<Sealer> {
        self.inner.sealer.as_ref().map(LiveSealer::current)
    }

    /// Writes several documents, of any collections of this database, atomically: `f`
    /// adds them to the set with the collections' `put_in`, `insert_in`, `update_in`,
    /// `delete_in` and `delete_if_in`, and the set is committed as ONE call of the store's
    /// write primitive (one backend transaction) when `f` returns `Ok` — every document
    /// checked exactly as its single write would be (schema gate, fence, write guards,
    /// sealing, lock version, ahead guard), all or nothing: the first document that
    /// refuses refuses the set with a [`WriteSetError::Document`] naming it. Nothing is
    /// written when `f` returns an error. Returns `f`'s value and what each document
    /// returned, in the order added. See [`WriteSet`] for the limits
    /// per backend.
    ///
    /// This replaces hand-encoded raw batches on [`Database::store`], which bypass every
    /// one of those checks.
    pub fn write<R>(
        &self,
        f: impl FnOnce(&mut WriteSet) -> Result<R, WriteSetError>,
    ) -> Result<(R, Vec<Written>), WriteSetError> {
        let mut set = WriteSet::new(self.inner.store.clone());
        let value = f(&mut set)?;
        let written = set.commit()?;
        Ok((value, written))
    }

    /// The raw store under this database.
    ///
    /// **Raw writes through it bypass every check strata makes**: the schema gate and the
    /// fence, the write guards, sealing (a document written through it is stored in
    /// clear), the lock version and the ahead guard — and a hand-encoded value skips the
    /// envelope's rules. Use it to read, or for keys outside strata's `__nx/` prefix; to
    /// write several documents atomically use [`Database::write`].
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The managed-table catalog of the collections known to this handle.
    pub fn catalog(&self) -> Catalog {
        lock(&self.inner.catalog).clone()
    }

    /// The collections recorded in the store (re-read), in name order.
    pub fn collections(&self) -> Result<Vec<CollectionInfo>, CollectionError> {
        let catalog = read_catalog(&self.inner.store)?;
        Ok(catalog
            .tables()
            .iter()
            .map(|t| CollectionInfo {
                name: t.name().to_string(),
                table_id: t.id(),
            })
            .collect())
    }

    /// True while a sweep of `collection` runs through this database (any clone) in this
    /// process. Says nothing about other processes or other databases; the sweep's lease
    /// covers those.
    pub fn is_sweeping(&self, collection: &str) -> bool {
        lock(&self.inner.sweeping).contains(collection)
    }

    /// Opens the collection `name` with `options`, creating and recording it (stable table
    /// id, schema header) the first time. Validates the upcast chain (gap, duplicate,
    /// step from below 1) and the collection's header. With a persisted schema
    /// ([`SchemaOptions::of`](crate::policy::SchemaOptions::of)), declares it to the
    /// policy with the collection's payload version, upcast steps and protected fields;
    /// never fails because of a rejected change — the next write does.
    pub fn collection<T: Serialize + DeserializeOwned>(
        &self,
        name: &str,
        options: CollectionOptions,
    ) -> Result<Collection<T>, CollectionError> {
        layout::check_name(name)?;
        // A coordinated cutover is a payload step: its transform sits on top of the
        // declared chain (see `CollectionOptions::chain_steps`).
        let (steps, cutover_step) = options.chain_steps(name)?;
        let parts = options.into_parts();
        let start = parts
            .retired_below
            .unwrap_or(crate::payload::INITIAL_PAYLOAD_VERSION);
        let (schema, strategies) = parts.schema.into_parts();
        let chain =
            UpcastChain::starting_at(name, start, steps)?.with_downcasts(name, parts.downs)?;
        let retired = layout::retired_below(&self.inner.store, name)?;
        if chain.start_version() > crate::payload::INITIAL_PAYLOAD_VERSION
            && retired.is_none_or(|below| below < chain.start_version())
        {
            return Err(CollectionError::RetirementMissing {
                collection: name.to_string(),
                start: chain.start_version(),
                recorded: retired,
            });
        }
        // Sealed or clear, decided before anything is written.
        let seal = self.seal_state(name, parts.sealed)?;
        let table_id = self.register(name)?;
        let def = layout::table_def(name, table_id);
        let single =
            Catalog::new()
                .with(def.clone())
                .map_err(|e| CollectionError::InvalidName {
                    collection: name.to_string(),
                    reason: e.to_string(),
                })?;
        validate_and_init(&self.inner.store, &single).map_err(validation)?;
        {
            let mut catalog = lock(&self.inner.catalog);
            if catalog.get(name).is_none() {
                catalog.add(def).map_err(|e| CollectionError::InvalidName {
                    collection: name.to_string(),
                    reason: e.to_string(),
                })?;
            }
        }
        let mut guards = self.inner.guards.clone();
        guards.extend(parts.guards);
        let upcaster =
            Upcaster::new(chain, parts.protected, parts.version_field).with_retired_below(retired);
        let persist = schema.is_some();
        let mut declaration = None;
        if let Some(schema) = schema {
            let froms: Vec<i32> = upcaster.chain().steps().iter().map(|s| s.from()).collect();
            let mut decl = SchemaDeclaration::new(name, schema)
                .payload(upcaster.chain().current_version(), froms)
                .strategies(strategies);
            decl.upcaster = Some(upcaster.clone());
            decl.cutover_step = cutover_step;
            // Inside a deploy window the stored schema stays the operational build's
            // until the window completes: this build's declaration waits for it.
            match enter_window(&self.inner.store, name, &upcaster)? {
                Some(operational) => {
                    tracing::info!(collection = name, operational, current = upcaster.chain().current_version(), "deploy window open: this build writes at the operational version through its downcasts");
                    self.inner
                        .policy
                        .ensure()
                        .map_err(|e| CollectionError::policy(name, e))?;
                    declaration = Some(decl);
                }
                None => {
                    self.declare(decl.clone())?;
                    declaration = Some(decl);
                }
            }
        }
        // Rows of newer builds whose change the schema history proves additive: this
        // build writes them keeping what it does not know.
        let keep_newer = parts.keep_newer && declaration.is_some();
        let newer_fields = match (&declaration, parts.keep_newer) {
            (Some(decl), true) => crate::collection::newer_additive(
                &self.inner.store,
                name,
                decl.schema_value(),
                upcaster.chain().current_version(),
            )?,
            _ => Default::default(),
        };
        let governed = persist || self.has_baseline(name)?;
        // The payload version this build knows, for the window's `complete` barrier.
        if governed {
            if let Some(p) = self.inner.policy.get() {
                let registered = crate::payload::window::register_build(
                    &self.inner.store,
                    name,
                    p.gate().client_id(),
                    upcaster.chain().current_version(),
                );
                if let Err(e) = registered {
                    // A read-only store, say: no window can complete through it anyway.
                    tracing::debug!(collection = name, error = %e, "build version not recorded");
                }
            }
        }
        let window_key = (governed
            || upcaster.lowest_writable() < upcaster.chain().current_version())
        .then(|| crate::payload::window::window_key(name));
        if seal.mark {
            let marked = crate::seal::mark::mark_collection(&self.inner.store, name);
            match marked {
                Ok(()) => {}
                // Already sealed documents keep the collection sealed without the mark (a
                // store sealed before marks existed, opened read-only): go on.
                Err(e) if seal.holds_sealed => {
                    tracing::debug!(collection = name, error = %e, "sealed mark not written");
                }
                Err(source) => {
                    return Err(CollectionError::Seal {
                        collection: name.to_string(),
                        source,
                    })
                }
            }
        }
        let sealer = if seal.sealed {
            self.inner.sealer.clone()
        } else {
            None
        };
        let sealed_without_key = seal.sealed && sealer.is_none();
        Ok(Collection::from_inner(CollectionInner {
            name: name.to_string(),
            table_id,
            prefix: layout::doc_prefix(name),
            store: self.inner.store.clone(),
            upcaster,
            read_repair: parts.read_repair,
            guards,
            policy: Arc::clone(&self.inner.policy),
            governed,
            ahead_warned: Arc::clone(&self.inner.ahead_warned),
            sweeping: Arc::clone(&self.inner.sweeping),
            sealer,
            sealed_without_key,
            window_key,
            declaration,
            newer_fields: std::sync::RwLock::new(Arc::new(newer_fields)),
            keep_newer,
        }))
    }

    /// Whether collection `name` is sealed for this handle (`declared`: opened
    /// [`CollectionOptions::sealed`]). It is when declared, when the database or the
    /// collection carries its sealed mark, or (stores sealed before marks existed) when its
    /// first document is sealed. Declared sealed without the key: [`CollectionError::NoKey`];
    /// declared sealed (or the database sealed) over documents in clear:
    /// [`CollectionError::HoldsClearDocuments`]. Nothing is written here.
    fn seal_state(&self, name: &str, declared: bool) -> Result<SealState, CollectionError> {
        let store = &self.inner.store;
        let db_marked = crate::seal::mark::database_is_marked(store).map_err(seal_err(name))?;
        let marked = db_marked
            || crate::seal::mark::collection_is_marked(store, name).map_err(seal_err(name))?;
        let first = if marked {
            None
        } else {
            first_document_sealed(store, name)?
        };
        let holds_sealed = first == Some(true);
        if declared && self.inner.sealer.is_none() {
            return Err(CollectionError::NoKey {
                collection: name.to_string(),
            });
        }
        if declared && first == Some(false) {
            return Err(CollectionError::HoldsClearDocuments {
                collection: name.to_string(),
            });
        }
        let sealed = declared || marked || holds_sealed;
        Ok(SealState {
            sealed,
            // Marked once, by the first handle that seals it (or finds it sealed).
            mark: sealed && !marked,
            holds_sealed,
        })
    }

    /// True when a JSON Schema baseline is persisted for `name` (the collection is under
    /// policy, whoever declared it).
    fn has_baseline(&self, name: &str) -> Result<bool, CollectionError> {
        let key = baseline_key(name);
        self.inner
            .store
            .get(&key)
            .map(|v| v.is_some())
            .map_err(|e| CollectionError::store(name, e))
    }

    /// Declares a raw schema for a collection (for callers that derive it themselves):
    /// persisted on first registration, otherwise compared with the baseline and run
    /// through the strategies. Opens the policy client if needed; that is the only way it
    /// fails.
    pub fn declare(&self, decl: SchemaDeclaration) -> Result<DeclareOutcome, CollectionError> {
        let name = decl.collection().to_string();
        let policy = self
            .inner
            .policy
            .ensure()
            .map_err(|e| CollectionError::policy(&name, e))?;
        Ok(policy.declare(decl))
    }

    /// The verdict recorded for `collection` by this handle (`None`: not declared here).
    pub fn verdict(&self, collection: &str) -> Option<Verdict> {
        self.inner
            .policy
            .get()
            .and_then(|p| p.gate().verdict(collection))
    }

    /// The policy client of this handle, once it is open (at open with
    /// [`DatabaseBuilder::policy`], otherwise at the first declaration, write under policy
    /// or cutover).
    pub fn policy(&self) -> Option<&Policy> {
        self.inner.policy.get()
    }

    /// One manual heartbeat of this handle's policy client (acknowledges a draining
    /// fence); does nothing when the handle is no policy client.
    pub fn heartbeat(&self) -> Result<(), PolicyError> {
        match self.inner.policy.get() {
            Some(p) => p.heartbeat(),
            None => Ok(()),
        }
    }

    /// The fence, read from the store (uncached).
    pub fn fence_state(&self) -> Result<FenceDoc, PolicyError> {
        Fence::read(&self.inner.store)
    }

    /// Resets the fence to normal without bumping the generation.
    pub fn abort_schema_cutover(&self) -> Result<FenceDoc, PolicyError> {
        Fence::abort(&self.inner.store)
    }

    /// Reads the collection's table id, allocating and recording one the first time (the
    /// first creator wins by `require_absent`; ids come from a compare-and-swap counter).
    fn register(&self, name: &str) -> Result<u16, CollectionError> {
        let store = &self.inner.store;
        let key = layout::catalog_key(name);
        let st = |e| CollectionError::store(name, e);
        for _ in 0..MAX_REGISTER_ATTEMPTS {
            if let Some(bytes) = store.get(&key).map_err(st)? {
                return layout::decode_catalog_record(name, &bytes);
            }
            let seq = store.get(CATALOG_SEQ_KEY).map_err(st)?;
            let next = match &seq {
                None => FIRST_COLLECTION_ID,
                Some(b) => layout::decode_seq(b)?
                    .max(FIRST_COLLECTION_ID - 1)
                    .checked_add(1)
                    .ok_or_else(|| CollectionError::IdsExhausted {
                        collection: name.to_string(),
                    })?,
            };
            let batch = Batch::new()
                .require(CATALOG_SEQ_KEY.to_vec(), seq)
                .set(CATALOG_SEQ_KEY.to_vec(), next.to_be_bytes().to_vec())
                .require_absent(key.clone())
                .set(key.clone(), layout::encode_catalog_record(next).to_vec());
            match store.apply(batch) {
                Ok(()) => {
                    tracing::info!(
                        collection = name,
                        table_id = next,
                        "recorded new collection"
                    );
                    return Ok(next);
                }
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(st(e)),
            }
        }
        Err(CollectionError::Store {
            collection: name.to_string(),
            source: strata_store::StoreError::InvalidArgument(
                "collection registration kept losing races".into(),
            ),
        })
    }
}

/// Reads every collection recorded under `__nx/catalog/` into a catalog of managed
/// tables (what `strata status` and `strata verify` walk).
pub fn read_catalog(store: &impl KvRead) -> Result<Catalog, CollectionError> {
    let st = |e| CollectionError::store("", e);
    let limits = ScanLimits::new(1024, 1 << 20).map_err(st)?;
    let mut catalog = Catalog::new();
    let mut highest: Option<(String, u16)> = None;
    for rec in Pages::new(store, CATALOG_PREFIX, limits).records() {
        let rec = rec.map_err(st)?;
        let (name, id) = layout::decode_catalog_entry(&rec.key, &rec.value)?;
        let def: TableDef = layout::table_def(&name, id);
        catalog
            .add(def)
            .map_err(|e| CollectionError::CorruptCatalog {
                collection: name.clone(),
                key: rec.key.clone(),
                reason: crate::pass::RecordError::from_error(e),
            })?;
        if highest.as_ref().is_none_or(|(_, h)| id > *h) {
            highest = Some((name, id));
        }
    }
    let seq = store.get(CATALOG_SEQ_KEY).map_err(st)?;
    layout::check_seq(
        seq.as_deref(),
        highest.as_ref().map(|(n, id)| (n.as_str(), *id)),
    )?;
    Ok(catalog)
}

/// Called when a build opens `collection` under policy: the operational version this
/// build writes at when it takes part in a deploy window (opening one when the stored
/// baseline records an older payload version its downcasts reach, see
/// [`crate::ops::window`]), `None` when it writes at its own version.
fn enter_window(
    store: &Store,
    collection: &str,
    upcaster: &Upcaster,
) -> Result<Option<i32>, CollectionError> {
    let current = upcaster.chain().current_version();
    let lowest = upcaster.lowest_writable();
    if lowest >= current {
        return Ok(None);
    }
    let reach = |v: i32| v < current && v >= lowest;
    for _ in 0..8 {
        if let Some(op) = layout::window_operational(store, collection)? {
            return Ok(reach(op).then_some(op));
        }
        let baseline = store
            .get(&baseline_key(collection))
            .map_err(|e| CollectionError::store(collection, e))?
            .and_then(|b| crate::policy::Baseline::decode(collection, &b).ok());
        let Some(stored) = baseline
            .and_then(|b| b.payload_version)
            .filter(|v| reach(*v))
        else {
            return Ok(None);
        };
        match crate::payload::window::create(store, collection, stored) {
            Ok(true) => {
                tracing::info!(
                    collection,
                    operational = stored,
                    current,
                    "deploy window opened"
                );
                return Ok(Some(stored));
            }
            Ok(false) => continue,
            // A store opened read-only (an admin's `schema check`, say) opens no window;
            // the declaration then fails the same way and blocks nothing.
            Err(e) => {
                tracing::warn!(collection, error = %e, "could not open the deploy window");
                return Ok(None);
            }
        }
    }
    Ok(layout::window_operational(store, collection)?.filter(|op| reach(*op)))
}
