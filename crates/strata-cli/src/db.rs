//! Opening the datastore named by `--db`.

use std::path::Path;
use strata_store::{Store, StoreError};

/// Opens an existing sled datastore; a missing path is an error and is not created.
pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
    strata_sled::SledStore::open_existing(path).map(Store::new)
}

/// The catalog of managed tables of a store: the 14 Numax sync tables plus every
/// collection recorded in the store under `__nx/catalog/`.
pub fn catalog(store: &Store) -> Result<strata::Catalog, Box<dyn std::error::Error + Send + Sync>> {
    let mut catalog = strata::numax::catalog();
    for table in strata::database::read_catalog(store)?.tables() {
        catalog.add(table.clone())?;
    }
    Ok(catalog)
}
