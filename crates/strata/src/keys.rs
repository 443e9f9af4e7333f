//! Every key prefix the engine reserves, in one place (the key-space map of
//! docs/format.md). Everything strata writes lives under [`RESERVED_PREFIX`]; application
//! keys must not start with it.
//!
//! | prefix / key | what lives there | written by |
//! |---|---|---|
//! | `__nx/schema/<table>` | 8-byte schema header | validation, migrator |
//! | `__nx/migration/<table>` | migration checkpoint (`NXMG`) | migrator |
//! | `__nx/catalog/<collection>` | collection table id | [`crate::Database`] |
//! | `__nx/catalog-seq` | last allocated collection table id | [`crate::Database`] |
//! | `__nx/doc/<collection>/<key>` | document envelope + JSON | collections, sweep, cutover |
//! | `__nx/sweep/<collection>` | sweep marker (JSON) | eager sweep |
//! | `__nx/fence` | the store's fence (JSON) | policy, cutover |
//! | `__nx/clients/<client-id>` | client presence (JSON) | policy clients |
//! | `__nx/jsonschema/<collection>` | persisted JSON Schema baseline | policy |
//! | `__nx/jsonschema-log/<collection>/<version>` | schema history | policy |
//! | `__nx/cutover/<collection>` | cutover checkpoint (`NXCU`) | cutover |
//! | `__nx/keys/database` | the database keyring | `seal` |
//! | `__nx/keys/collection/<collection>` | sealed-collection keyring | `seal` |
//! | `__nx/rotate/<collection>` | data-key rotation checkpoint (`NXRT`) | `seal` rotation |
//! | `__nx/sealed/database`, `__nx/sealed/collection/<collection>` | sealed marks (`NXSM`) | [`crate::Database`] |
//! | `__nx/manifest/<op>/<scope>` | bulk-operation manifest (JSON: count + digest) | migrate, sweep, cutover |
//! | `__nx/copy/…` | copy progress and manifest (JSON) | `strata copy` |
//! | `__nx/retired/<collection>` | retirement record (`NXRV`) | [`crate::ops::retire`] |
//! | `__nx/window/<collection>` | deploy window: the operational version (`NXWN`) | [`crate::ops::window`] |
//! | `__nx/revert/<collection>` | unfinished revert: target version and cursor (`NXRB`) | [`crate::ops::revert`] |
//! | `__nx/builds/<client-id>/<collection>` | the payload version a client's build knows (`NXBV`) | [`crate::Database`] |
//! | `__nx/crdt/…` | the 14 Numax sync tables | `strata-sync` (see [`crate::numax`]) |

/// Every engine key starts with this.
pub const RESERVED_PREFIX: &[u8] = b"__nx/";
/// Schema headers: `__nx/schema/<table>`.
pub const SCHEMA_PREFIX: &[u8] = b"__nx/schema/";
/// Migration checkpoints: `__nx/migration/<table>`.
pub const MIGRATION_PREFIX: &[u8] = b"__nx/migration/";
/// Collection catalog records: `__nx/catalog/<collection>`.
pub const CATALOG_PREFIX: &[u8] = b"__nx/catalog/";
/// The collection table-id counter.
pub const CATALOG_SEQ_KEY: &[u8] = b"__nx/catalog-seq";
/// Documents: `__nx/doc/<collection>/<key>`.
pub const DOC_PREFIX: &[u8] = b"__nx/doc/";
/// Sweep markers: `__nx/sweep/<collection>`.
pub const SWEEP_PREFIX: &[u8] = b"__nx/sweep/";
/// The fence record.
pub const FENCE_KEY: &[u8] = b"__nx/fence";
/// Client presence records: `__nx/clients/<client-id>`.
pub const CLIENTS_PREFIX: &[u8] = b"__nx/clients/";
/// Persisted JSON Schema baselines: `__nx/jsonschema/<collection>`.
pub const JSONSCHEMA_PREFIX: &[u8] = b"__nx/jsonschema/";
/// The schema history, every version a collection's schema had:
/// `__nx/jsonschema-log/<collection>/<version>`.
pub const HISTORY_PREFIX: &[u8] = b"__nx/jsonschema-log/";
/// Cutover checkpoints: `__nx/cutover/<collection>`.
pub const CUTOVER_PREFIX: &[u8] = b"__nx/cutover/";
/// Sealed-collection keyrings: `__nx/keys/collection/<collection>`.
pub const COLLECTION_KEYRING_PREFIX: &[u8] = b"__nx/keys/collection/";
/// The database keyring.
pub const DATABASE_KEYRING_KEY: &[u8] = b"__nx/keys/database";
/// Data-key rotation checkpoints: `__nx/rotate/<collection>`.
pub const ROTATION_PREFIX: &[u8] = b"__nx/rotate/";
/// Sealed marks: `__nx/sealed/database`, `__nx/sealed/collection/<collection>`.
pub const SEALED_PREFIX: &[u8] = b"__nx/sealed/";
/// Retirement records: `__nx/retired/<collection>` (see [`crate::layout::retired`]).
pub const RETIRED_PREFIX: &[u8] = b"__nx/retired/";
/// Deploy windows: `__nx/window/<collection>` (see [`crate::layout::window`]).
pub const WINDOW_PREFIX: &[u8] = b"__nx/window/";
/// Unfinished reverts: `__nx/revert/<collection>` (see [`crate::ops::revert`]).
pub const REVERT_PREFIX: &[u8] = b"__nx/revert/";
/// The payload version each client's build knows, per collection:
/// `__nx/builds/<client-id>/<collection>` (see [`crate::layout::window`]).
pub const BUILDS_PREFIX: &[u8] = b"__nx/builds/";
/// The Numax sync tables live under this prefix.
pub const CRDT_PREFIX: &[u8] = b"__nx/crdt/";

/// Bulk-operation manifests: `__nx/manifest/<operation>/<scope>` (see
/// [`strata_store::manifest`]).
pub const MANIFEST_PREFIX: &[u8] = b"__nx/manifest/";
/// `strata copy`'s progress record and manifest: `__nx/copy/progress`, `__nx/copy/manifest`.
pub const COPY_PREFIX: &[u8] = b"__nx/copy/";

/// Every reserved prefix or key above (except [`RESERVED_PREFIX`] itself), for checks
/// that they never overlap.
pub const ALL: &[&[u8]] = &[
    SCHEMA_PREFIX,
    MIGRATION_PREFIX,
    CATALOG_PREFIX,
    CATALOG_SEQ_KEY,
    DOC_PREFIX,
    SWEEP_PREFIX,
    FENCE_KEY,
    CLIENTS_PREFIX,
    JSONSCHEMA_PREFIX,
    HISTORY_PREFIX,
    CUTOVER_PREFIX,
    WINDOW_PREFIX,
    REVERT_PREFIX,
    BUILDS_PREFIX,
    COLLECTION_KEYRING_PREFIX,
    DATABASE_KEYRING_KEY,
    ROTATION_PREFIX,
    SEALED_PREFIX,
    RETIRED_PREFIX,
    CRDT_PREFIX,
    MANIFEST_PREFIX,
    COPY_PREFIX,
];

/// The catalog key of a collection: `__nx/catalog/<collection>`.
pub fn catalog_key(collection: &str) -> Vec<u8> {
    [CATALOG_PREFIX, collection.as_bytes()].concat()
}

/// The document prefix of a collection: `__nx/doc/<collection>/`.
pub fn doc_prefix(collection: &str) -> Vec<u8> {
    [DOC_PREFIX, collection.as_bytes(), b"/"].concat()
}

/// The key of one document: `__nx/doc/<collection>/<id>`.
pub fn doc_key(collection: &str, id: &str) -> Vec<u8> {
    [DOC_PREFIX, collection.as_bytes(), b"/", id.as_bytes()].concat()
}

/// The sweep marker key of a collection: `__nx/sweep/<collection>`.
pub fn sweep_key(collection: &str) -> Vec<u8> {
    [SWEEP_PREFIX, collection.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No reserved prefix is a prefix of another: a scan of one kind of record can never
    /// see another kind.
    #[test]
    fn reserved_prefixes_are_disjoint_and_reserved() {
        for (i, a) in ALL.iter().enumerate() {
            assert!(a.starts_with(RESERVED_PREFIX));
            for (j, b) in ALL.iter().enumerate() {
                if i != j {
                    assert!(
                        !b.starts_with(a),
                        "{} overlaps {}",
                        String::from_utf8_lossy(a),
                        String::from_utf8_lossy(b)
                    );
                }
            }
        }
        assert_eq!(crate::header::SCHEMA_PREFIX, SCHEMA_PREFIX);
        assert_eq!(strata_store::manifest::MANIFEST_PREFIX, MANIFEST_PREFIX);
        assert_eq!(
            crate::seal::COLLECTION_KEYRING_PREFIX,
            COLLECTION_KEYRING_PREFIX
        );
        assert_eq!(crate::seal::DATABASE_KEYRING_KEY, DATABASE_KEYRING_KEY);
        assert_eq!(
            crate::ops::rotate::ROTATION_CHECKPOINT_PREFIX,
            ROTATION_PREFIX
        );
        for (_, name, _) in crate::numax::NUMAX_TABLES {
            let def = crate::numax::catalog();
            let t = def
                .get(name)
                .map(|t| t.prefix().to_vec())
                .unwrap_or_default();
            assert!(t.starts_with(CRDT_PREFIX), "{name}");
        }
    }
}
