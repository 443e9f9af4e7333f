//! Migrations: the migration boundary, per-table registries, legacy v0→v1 certification,
//! checkpoints, interruption and resume, the write lease, and the legacy fixture.
//!
//! One file per concept; the helpers shared by them (and by [`crate::pass`]) stay here.

mod certify;
mod checkpoint;
mod fixture;
mod resume;
mod steps;
mod verify;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata::migrate::{
    verify, MigrateError, MigrationCheckpoint, MigrationEvent, Migrator, RecordStep, Registry,
    TableMigrations, TableOutcome,
};
use strata::numax::{self, wire};
use strata::pass::testing::FaultyStore;
use strata::pass::{MutationRule, PassError, PassLimits, RecordRef};
use strata::validate::validate_and_init;
use strata::validate::ValidationError;
use strata::{Catalog, TableDef};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Mutation, Store};

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

pub(crate) fn mem() -> (Store, MemoryStore) {
    let m = MemoryStore::new();
    (Store::new(m.clone()), m)
}

pub(crate) fn put(store: &impl KvWrite, key: &[u8], value: &[u8]) {
    store
        .apply(Batch::new().set(key.to_vec(), value.to_vec()))
        .unwrap();
}

fn limits(records: usize, bytes: usize) -> PassLimits {
    PassLimits::new(records, bytes).unwrap()
}

fn accept_all() -> strata::RecordDecoder {
    Arc::new(|_, _| Ok(()))
}

/// A custom table `name` at `__nx/<name>/` with an accept-all decoder.
fn table(name: &str, id: u16, current: u16) -> TableDef {
    TableDef::new(name, id, format!("__nx/{name}/").into_bytes(), current)
        .with_decoder(accept_all())
}

fn key(t: &str, suffix: &str) -> Vec<u8> {
    format!("__nx/{t}/{suffix}").into_bytes()
}

fn header(store: &impl KvRead, t: &str) -> Option<SchemaHeader> {
    store
        .get(&header_key(t))
        .unwrap()
        .map(|b| SchemaHeader::decode(&b).unwrap())
}

fn checkpoint(store: &impl KvRead, t: &str) -> Option<MigrationCheckpoint> {
    store
        .get(&checkpoint_key(t))
        .unwrap()
        .map(|b| MigrationCheckpoint::decode(&b).unwrap())
}

fn gkey(suffix: &str) -> Vec<u8> {
    wire::key(wire::GCOUNTER_PREFIX, suffix)
}

fn numax_migrator<'a>() -> Migrator<'a> {
    Migrator::new(Registry::numax()).unwrap()
}

/// Every record outside the engine's `__nx/schema/` and `__nx/migration/` spaces.
fn payload(m: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter(|(k, _)| {
            !k.starts_with(b"__nx/schema/")
                && !k.starts_with(b"__nx/migration/")
                && !k.starts_with(strata_store::manifest::MANIFEST_PREFIX)
        })
        .collect()
}

/// Records in `m` outside the bulk-operation manifests (`__nx/manifest/`).
fn len_without_manifests(m: &MemoryStore) -> usize {
    m.snapshot()
        .keys()
        .filter(|k| !k.starts_with(strata_store::manifest::MANIFEST_PREFIX))
        .count()
}
