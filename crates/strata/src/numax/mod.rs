//! The Numax-compatible sync layout: the 14 managed tables, their wire types and decoders.

use crate::catalog::{Catalog, TableDef};
use crate::header::{checkpoint_key, header_key};
use crate::record_error::RecordError;
use strata_store::{KvRead, StoreError};

pub mod decode;
mod error;
pub mod wire;

/// The version of every Numax table this build reads and writes.
pub const NUMAX_CURRENT_VERSION: u16 = 1;

/// `(id, table name, data prefix)` of the 14 Numax sync tables (DESIGN.md §2).
pub const NUMAX_TABLES: [(u16, &str, &str); 14] = [
    (1, "gcounter-materialized", "__nx/crdt/gcounter/"),
    (2, "gcounter-state", "__nx/crdt/state/gcounter/"),
    (3, "pncounter-materialized", "__nx/crdt/pncounter/"),
    (4, "pncounter-state", "__nx/crdt/state/pncounter/"),
    (5, "lww-register-materialized", "__nx/crdt/lww-register/"),
    (6, "lww-register-state", "__nx/crdt/state/lww-register/"),
    (7, "lww-map-materialized", "__nx/crdt/lww-map/"),
    (8, "lww-map-state", "__nx/crdt/state/lww-map/"),
    (9, "orset-materialized", "__nx/crdt/orset/"),
    (10, "orset-state", "__nx/crdt/state/orset/"),
    (11, "rga-materialized", "__nx/crdt/rga/"),
    (12, "rga-state", "__nx/crdt/state/rga/"),
    (13, "seen-ops", "__nx/crdt/seen-op/"),
    (14, "op-log", "__nx/crdt/op-log/"),
];

/// The 14 Numax tables as table definitions (with their record decoders).
pub fn tables() -> Vec<TableDef> {
    NUMAX_TABLES
        .iter()
        .map(|&(id, name, prefix)| {
            let t = TableDef::new(name, id, prefix.as_bytes().to_vec(), NUMAX_CURRENT_VERSION);
            match decode::decoder_for_id(id) {
                Some(d) => {
                    t.with_decoder(std::sync::Arc::new(move |suffix: &[u8], value: &[u8]| {
                        d(suffix, value).map_err(|e| RecordError::with_cause(e.reason(), e))
                    }))
                }
                None => t,
            }
        })
        .collect()
}

/// A catalog holding exactly the 14 Numax tables.
pub fn catalog() -> Catalog {
    let mut c = Catalog::new();
    for t in tables() {
        // The fixed table list is statically disjoint (checked by a unit test).
        if let Err(e) = c.add(t) {
            tracing::error!(error = %e, "numax table list is inconsistent");
        }
    }
    c
}

/// True when `store` uses the sync layout: any of the 14 tables has a schema header, a
/// migration checkpoint or data. A store holding only collections does not, and its tools
/// leave the sync tables alone (no headers are written for it); the sync runtime
/// initializes them when it first opens the store.
pub fn in_use(store: &impl KvRead) -> Result<bool, StoreError> {
    for &(_, name, prefix) in &NUMAX_TABLES {
        if store.get(&header_key(name))?.is_some()
            || store.get(&checkpoint_key(name))?.is_some()
            || store.prefix_exists(prefix.as_bytes())?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The 14 Numax tables when `store` uses them ([`in_use`]), otherwise an empty catalog:
/// what the tools manage in a store they did not create.
pub fn catalog_in_use(store: &impl KvRead) -> Result<Catalog, StoreError> {
    Ok(if in_use(store)? {
        catalog()
    } else {
        Catalog::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_tables_form_a_valid_catalog() {
        let mut c = Catalog::new();
        for t in tables() {
            c.add(t).unwrap();
        }
        assert_eq!(catalog().tables().len(), 14);
        assert_eq!(c.get("op-log").map(TableDef::id), Some(14));
    }

    #[test]
    fn sync_tables_are_in_use_only_with_a_header_a_checkpoint_or_data() {
        use strata_store::{Batch, KvWrite, MemoryStore};
        let store = MemoryStore::new();
        store
            .apply(Batch::new().set(b"__nx/doc/users/a".to_vec(), b"x".to_vec()))
            .unwrap();
        assert!(!in_use(&store).unwrap());
        assert!(catalog_in_use(&store).unwrap().tables().is_empty());
        for key in [
            header_key("rga-state"),
            checkpoint_key("op-log"),
            b"__nx/crdt/orset/k".to_vec(),
        ] {
            let s = MemoryStore::new();
            s.apply(Batch::new().set(key.clone(), b"x".to_vec()))
                .unwrap();
            assert!(in_use(&s).unwrap(), "{key:?}");
            assert_eq!(catalog_in_use(&s).unwrap().tables().len(), 14);
        }
    }
}
