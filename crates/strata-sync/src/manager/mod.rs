//! [`SyncManager`]: validated opening, hydration, atomic op application, reads.
//!
//! Every apply is a read-modify-write against the STORED records, committed in one atomic
//! batch whose preconditions pin everything it read: the sequence record, each touched
//! state record (and the materialized record of an early-layout counter), and the absence
//! of each new op's seen-op record. A batch that lost a race to another handle or process
//! writes nothing and is recomputed from the store, so any number of handles and processes
//! applying ops converge to exactly the state of applying every op once.
mod apply;
mod hydrate;
mod options;
mod read;
mod sequences;
mod verify;

pub use options::SyncOptions;
pub use read::OpLogReader;
pub use verify::ConsistencyReport;

use hydrate::{hydrate, refresh_index};
use sequences::{SeqIndex, Sequences};
use verify::verify_store;

use crate::SyncError;
use std::sync::{Mutex, MutexGuard};
use strata::numax::decode::DecodeError;
use strata_store::{Batch, KvRead, Mutation, Pages, Precondition, ScanLimits, Store};

/// Numax's default `op_log_limit`: op-log records kept (the newest by sequence).
pub const DEFAULT_OP_LOG_LIMIT: usize = 10_000;
/// Numax's default `seen_ops_limit`: seen-op records kept (the newest by sequence).
pub const DEFAULT_SEEN_OPS_LIMIT: usize = 100_000;
/// The node credited with an early-layout counter's value unless
/// [`SyncOptions::node_id`] names another.
pub const DEFAULT_NODE_ID: &str = "strata-local";
/// The largest record (key + value bytes) a sync write may store: the default byte budget
/// of every reader of the store (hydration scans, `strata migrate` batches). A write whose
/// record would not fit is refused with [`SyncError::RecordTooLarge`].
pub const MAX_RECORD_BYTES: usize = strata::pass::DEFAULT_MAX_BYTES;
/// The sequence record: the next seen-ops and op-log sequences, shared by every handle and
/// process writing the store (docs/format.md, "Sync sequences").
pub const SEQUENCES_KEY: &str = "__nx/sync/sequences";
/// How often one chunk is recomputed after losing a race before giving up.
const MAX_ATTEMPTS: usize = 100_000;

/// What applying one op did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The op was new: state, materialized view, seen-ops and op log were written.
    Applied {
        /// Its seen-ops sequence.
        seen_sequence: u64,
        /// Its op-log sequence.
        log_sequence: u64,
    },
    /// The op id was already seen: nothing changed.
    Duplicate,
}

#[derive(Debug, Default)]
struct Inner {
    seen: SeqIndex,
    log: SeqIndex,
    /// The sequences this handle last read or committed.
    last: Sequences,
}

/// The Numax-compatible CRDT sync store over one [`Store`].
///
/// Any number of managers — in one process or in many, over one shared store (PostgreSQL)
/// — may apply ops at once: each apply reads the stored records it changes and commits
/// under preconditions on them (see the module docs), so no op is lost or applied twice.
/// Methods take `&self` and are safe to call from several threads.
#[derive(Debug)]
pub struct SyncManager {
    store: Store,
    options: SyncOptions,
    inner: Mutex<Inner>,
}

/// The key suffix as UTF-8, or a decode error naming the table and key.
fn suffix_str<'a>(table: &'static str, suffix: &'a [u8]) -> Result<&'a str, SyncError> {
    std::str::from_utf8(suffix).map_err(|e| {
        SyncError::from(
            DecodeError::Invalid {
                table,
                key_suffix: None,
                reason: format!("key suffix is not UTF-8 ({e})"),
            }
            .with_key(suffix),
        )
    })
}

fn with_key(e: SyncError, suffix: &[u8]) -> SyncError {
    match e {
        SyncError::Decode { source } => SyncError::Decode {
            source: source.with_key(suffix),
        },
        other => other,
    }
}

/// Scans every record under `prefix` in pages bounded by `limits`, calling `f(suffix,
/// value)` for each.
fn scan_all(
    store: &impl KvRead,
    prefix: &str,
    limits: ScanLimits,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), SyncError>,
) -> Result<(), SyncError> {
    let prefix = prefix.as_bytes();
    for page in Pages::new(store, prefix, limits) {
        for r in &page?.records {
            f(&r.key[prefix.len()..], &r.value)?;
        }
    }
    Ok(())
}

/// Adds a set to `batch`, refusing a record no reader could read back.
pub(super) fn push_set(
    batch: &mut Batch,
    table: &'static str,
    key: Vec<u8>,
    value: Vec<u8>,
    limit: usize,
) -> Result<(), SyncError> {
    let size = key.len() + value.len();
    if size > limit {
        return Err(SyncError::RecordTooLarge {
            table,
            key: strata_store::escape_key(&key),
            size,
            limit,
        });
    }
    batch.push(Mutation::Set { key, value });
    Ok(())
}

pub(super) fn require(batch: &mut Batch, key: Vec<u8>, value: Option<Vec<u8>>) {
    batch.push_precondition(match value {
        Some(value) => Precondition::Equals { key, value },
        None => Precondition::Absent { key },
    });
}

impl SyncManager {
    /// Opens the sync store with default options; see [`SyncManager::open_with`].
    pub fn open(store: Store) -> Result<Self, SyncError> {
        Self::open_with(store, SyncOptions::default())
    }

    /// Validates every managed table (initializing the headers of an empty store in one
    /// atomic batch), then hydrates with bounded scans: every state record is the truth,
    /// and a missing or stale materialized record is rewritten from it; the seen-ops and
    /// op-log records beyond the limits (a store written with larger limits) are evicted,
    /// oldest sequence first; the sequence record is created or brought up to date. A
    /// legacy, older, future or corrupt store is refused with [`SyncError::Schema`] before
    /// anything is read or written. Never migrates.
    pub fn open_with(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        strata::validate::validate_and_init(&store, &strata::numax::catalog())?;
        let inner = hydrate(&store, &options, true)?;
        tracing::debug!(
            seen = inner.seen.by_seq.len(),
            logged = inner.log.by_seq.len(),
            "sync manager hydrated"
        );
        Ok(SyncManager {
            store,
            options,
            inner: Mutex::new(inner),
        })
    }

    /// A manager that skips validation (writes no header): only for writing legacy
    /// fixtures.
    pub(crate) fn unvalidated(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        let inner = hydrate(&store, &options, false)?;
        Ok(SyncManager {
            store,
            options,
            inner: Mutex::new(inner),
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The options.
    pub fn options(&self) -> &SyncOptions {
        &self.options
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The index is only changed after a successful store write, in a few
        // non-panicking steps; a poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
