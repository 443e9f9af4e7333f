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
//! use strata::collection::CollectionOptions;
//! use strata::database::Database;
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
//! use strata::collection::CollectionOptions;
//! use strata::database::Database;
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

use crate::catalog::{Catalog, TableDef};
use crate::collection::layout::{self, CATALOG_PREFIX, CATALOG_SEQ_KEY, FIRST_COLLECTION_ID};
use crate::collection::{
    Collection, CollectionError, CollectionInner, CollectionOptions, WriteGuard,
};
use crate::payload::chain::{UpcastChain, Upcaster};
use crate::policy::{
    baseline_key, DeclareOutcome, Fence, FenceDoc, Policy, PolicyConfig, PolicyError, PolicyLink,
    SchemaDeclaration, Verdict,
};
use crate::seal::{Credential, Keyring, LiveSealer, SealError, Sealer};
use crate::validate::{validate_and_init, ValidationError};
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

/// How a [`Database`] is opened, built with chained calls from [`Database::builder`].
#[derive(Debug)]
pub struct DatabaseBuilder {
    store: Store,
    policy: Option<PolicyConfig>,
    guards: Vec<Arc<dyn WriteGuard>>,
    key: Option<Credential>,
}

impl DatabaseBuilder {
    /// Opens the database with a key: the passphrase or raw key bytes of the database
    /// keyring (`__nx/keys/database`), unlocked at [`DatabaseBuilder::open`] before any
    /// record is read — a wrong one fails there with
    /// [`SealError::WrongKey`] and nothing is written.
    /// When the store has no keyring yet, one is created with a fresh random data key
    /// wrapped by this credential (entry label `primary`). Collections declared
    /// [`CollectionOptions::sealed`] then store their documents encrypted.
    pub fn key(mut self, credential: Credential) -> Self {
        self.key = Some(credential);
        self
    }

    /// Opens the handle as a policy client now (presence record, heartbeat) with
    /// `config`. Without it, the handle still obeys the stored fence, and becomes a
    /// policy client with the default configuration the first time it declares a schema,
    /// writes a collection under policy or runs a cutover.
    pub fn policy(mut self, config: PolicyConfig) -> Self {
        self.policy = Some(config);
        self
    }

    /// Adds a write guard applied to every collection (after the policy's own check).
    pub fn write_guard(mut self, guard: Arc<dyn WriteGuard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Opens the database: reads every collection recorded under `__nx/catalog/` and
    /// validates each one's schema header with [`crate::validate::validate_and_init`]
    /// (nothing is written unless all pass), reads the schema generation the handle runs
    /// at, and registers the policy client when configured.
    pub fn open(self) -> Result<Database, CollectionError> {
        let sealer = match &self.key {
            None => None,
            Some(cred) => Some(LiveSealer::new(open_keyring(&self.store, cred)?)),
        };
        let catalog = read_catalog(&self.store)?;
        validate_and_init(&self.store, &catalog).map_err(validation)?;
        let policy = PolicyLink::open(self.store.clone(), self.policy)
            .map_err(|e| CollectionError::policy("", e))?;
        Ok(Database {
            inner: Arc::new(DbInner {
                store: self.store,
                guards: self.guards,
                catalog: Mutex::new(catalog),
                sweeping: Arc::new(Mutex::new(HashSet::new())),
                ahead_warned: Arc::new(Mutex::new(HashSet::new())),
                policy: Arc::new(policy),
                sealer,
            }),
        })
    }
}

/// Unlocks the database keyring with `cred`, creating it when the store has none.
fn open_keyring(store: &Store, cred: &Credential) -> Result<Sealer, CollectionError> {
    let ring = Keyring::database();
    let seal = |source| CollectionError::Seal {
        collection: String::new(),
        source,
    };
    match ring.unlock(store, cred) {
        Err(SealError::NoKeyring { .. }) => match ring.create(store, cred, "primary") {
            // Another process created it meanwhile: unlock that one.
            Err(SealError::KeyringExists { .. }) => ring.unlock(store, cred).map_err(seal),
            other => other.map_err(seal),
        },
        other => other.map_err(seal),
    }
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
        }
    }

    /// The current snapshot of the unlocked data keys when the database was opened with
    /// a key.
    pub fn sealer(&self) -> Option<Sealer> {
        self.inner.sealer.as_ref().map(LiveSealer::current)
    }

    /// The store.
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
        let parts = options.into_parts();
        let chain = UpcastChain::new(name, parts.steps)?;
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
        let upcaster = Upcaster::new(chain, parts.protected, parts.version_field);
        let (schema, strategies) = parts.schema.into_parts();
        let persist = schema.is_some();
        if let Some(schema) = schema {
            let froms: Vec<i32> = upcaster.chain().steps().iter().map(|s| s.from()).collect();
            let mut decl = SchemaDeclaration::new(name, schema)
                .payload(upcaster.chain().current_version(), froms)
                .strategies(strategies);
            decl.upcaster = Some(upcaster.clone());
            self.declare(decl)?;
        }
        let governed = persist || self.has_baseline(name)?;
        // A collection whose documents are sealed stays sealed on a handle with the key
        // that did not declare it so: its writes are sealed too, never in clear.
        let holds_sealed = self.holds_sealed_documents(name)?;
        let sealed = parts.sealed || (self.inner.sealer.is_some() && holds_sealed);
        // Without the key such a handle may still read headers and delete, but every set
        // is refused: a new document would otherwise land in clear beside sealed ones.
        let sealed_without_key = self.inner.sealer.is_none() && holds_sealed;
        let sealer = if sealed {
            match &self.inner.sealer {
                Some(s) => Some(s.clone()),
                None => {
                    return Err(CollectionError::NoKey {
                        collection: name.to_string(),
                    })
                }
            }
        } else {
            None
        };
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
            hints: crate::collection::hint::Hints::new(self.inner.store.remote_reads()),
        }))
    }

    /// True when the first stored document of collection `name` is sealed (its clear
    /// envelope header says so; the body is not read). A collection is sealed or clear as
    /// a whole, so the first row tells.
    fn holds_sealed_documents(&self, name: &str) -> Result<bool, CollectionError> {
        let limits = ScanLimits::new(1, 1 << 31).map_err(|e| CollectionError::store(name, e))?;
        let mut sealed = false;
        self.inner
            .store
            .scan_visit(&layout::doc_prefix(name), None, limits, &mut |_, value| {
                sealed = crate::seal::peek(value).is_some_and(|(_, s)| s);
                strata_store::Visit::Stop
            })
            .map_err(|e| CollectionError::store(name, e))?;
        Ok(sealed)
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
                reason: e.to_string(),
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
