//! Opening the datastore named by `--db`.

use std::path::Path;
use strata_store::{Store, StoreError};

/// Opens an existing sled datastore; a missing path is an error and is not created.
pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
    strata_sled::SledStore::open_existing(path).map(Store::new)
}

/// Opens (creating if needed) a sled datastore.
#[allow(dead_code)]
pub fn open_or_create(path: &Path) -> Result<Store, StoreError> {
    strata_sled::SledStore::open(path).map(Store::new)
}

/// The catalog of managed tables of a store: the 14 Numax sync tables (collections
/// recorded in the store join it once they exist).
pub fn catalog(_store: &Store) -> Result<strata::Catalog, StoreError> {
    Ok(strata::numax::catalog())
}
