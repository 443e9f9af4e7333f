//! The Numax-compatible sync layout: the 14 managed tables, their wire types and decoders.

use crate::catalog::{Catalog, TableDef};

pub mod decode;
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
                        d(suffix, value).map_err(|e| e.reason())
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
}
