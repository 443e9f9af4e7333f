//! [`DatabaseBuilder`]: how a [`Database`] is opened — with a key (the database keyring is
//! unlocked, or created, before any record is read), sealed, under a shape policy, with
//! write guards — and [`DatabaseBuilder::open`], which validates every table's schema
//! header and registers the policy client.

use super::{first_document_sealed, read_catalog, seal_err, validation, Database, DbInner};
use crate::collection::{CollectionError, WriteGuard};
use crate::policy::{PolicyConfig, PolicyLink};
use crate::seal::{mark, Credential, Keyring, LiveSealer, SealError, Sealer};
use crate::validate::validate_and_init;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use strata_store::Store;

/// How a [`Database`] is opened, built with chained calls from [`Database::builder`].
#[derive(Debug)]
pub struct DatabaseBuilder {
    pub(super) store: Store,
    pub(super) policy: Option<PolicyConfig>,
    pub(super) guards: Vec<Arc<dyn WriteGuard>>,
    pub(super) key: Option<Credential>,
    pub(super) sealed: bool,
}

impl DatabaseBuilder {
    /// Opens the database with a key: the passphrase or raw key bytes of the database
    /// keyring (`__nx/keys/database`), unlocked at [`DatabaseBuilder::open`] before any
    /// record is read — a wrong one fails there with
    /// [`SealError::WrongKey`] and nothing is written.
    /// When the store has no keyring yet, one is created with a fresh random data key
    /// wrapped by this credential (entry label `primary`). Collections declared
    /// [`CollectionOptions::sealed`](crate::CollectionOptions::sealed) then store their
    /// documents encrypted.
    pub fn key(mut self, credential: Credential) -> Self {
        self.key = Some(credential);
        self
    }

    /// Seals **every** collection of the database, now and later: [`DatabaseBuilder::open`]
    /// persists the database-wide mark `__nx/sealed/database` (see [`crate::seal::mark`]),
    /// so every collection opened by any handle — declared
    /// [`CollectionOptions::sealed`](crate::CollectionOptions::sealed) or not — stores its
    /// documents encrypted; a handle without the key reads headers but cannot write
    /// documents. Needs
    /// [`DatabaseBuilder::key`]. Refused, writing nothing, while a collection already holds
    /// documents in clear ([`CollectionError::HoldsClearDocuments`]).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata::seal::{Credential, KdfParams};
    /// use strata::{CollectionOptions, Database};
    /// use strata_store::{KvRead, MemoryStore, Store};
    ///
    /// let store = Store::new(MemoryStore::new());
    /// let key = Credential::passphrase("correct horse").with_kdf(KdfParams::insecure_fast());
    /// let db = Database::builder(store.clone()).key(key).sealed().open()?;
    /// let notes = db.collection::<serde_json::Value>("notes", CollectionOptions::new())?;
    /// notes.put("n1", &serde_json::json!({"text": "sealed without asking"}))?;
    /// let raw = store.get(b"__nx/doc/notes/n1")?.unwrap_or_default();
    /// assert_eq!(strata::seal::peek(&raw).map(|(_, sealed)| sealed), Some(true));
    /// # Ok(())
    /// # }
    /// ```
    pub fn sealed(mut self) -> Self {
        self.sealed = true;
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
        // The key first: a wrong one fails here, before any record is read.
        let unlocked = match &self.key {
            None => None,
            Some(cred) => Some(unlock_keyring(&self.store, cred)?),
        };
        if self.sealed && self.key.is_none() {
            return Err(CollectionError::SealedWithoutKey);
        }
        let catalog = read_catalog(&self.store)?;
        validate_and_init(&self.store, &catalog).map_err(validation)?;
        if self.sealed && !mark::database_is_marked(&self.store).map_err(seal_err(""))? {
            // Nothing is written while a collection holds documents in clear.
            for table in catalog.tables() {
                let name = table.name();
                if !mark::collection_is_marked(&self.store, name).map_err(seal_err(name))?
                    && first_document_sealed(&self.store, name)? == Some(false)
                {
                    return Err(CollectionError::HoldsClearDocuments {
                        collection: name.to_string(),
                    });
                }
            }
        }
        let sealer = match (&self.key, unlocked) {
            (Some(cred), Some(None)) => Some(create_keyring(&self.store, cred)?),
            (_, Some(Some(sealer))) => Some(sealer),
            _ => None,
        };
        if self.sealed {
            mark::mark_database(&self.store).map_err(seal_err(""))?;
        }
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
                sealer: sealer.map(LiveSealer::new),
            }),
        })
    }
}

/// Unlocks the database keyring with `cred`; `None` when the store has none yet.
fn unlock_keyring(store: &Store, cred: &Credential) -> Result<Option<Sealer>, CollectionError> {
    match Keyring::database().unlock(store, cred) {
        Err(SealError::NoKeyring { .. }) => Ok(None),
        other => other.map(Some).map_err(seal_err("")),
    }
}

/// Creates the database keyring for `cred` (another process may have created it since
/// [`unlock_keyring`]: then that one is unlocked).
fn create_keyring(store: &Store, cred: &Credential) -> Result<Sealer, CollectionError> {
    let ring = Keyring::database();
    match ring.create(store, cred, "primary") {
        Err(SealError::KeyringExists { .. }) => ring.unlock(store, cred).map_err(seal_err("")),
        other => other.map_err(seal_err("")),
    }
}
