//! Proven retirement of old payload versions: [`retire`] records, in the store, that no
//! row of a collection is stored below a version K, so the application may drop its
//! upcast steps below K ([`CollectionOptions::retired_below`](crate::CollectionOptions::retired_below)).
//!
//! The proof, taken under the store's exclusive session (this process's writers and, on
//! PostgreSQL, every other process's wait until it is recorded):
//!
//! 1. the collection is recorded in the store's catalog;
//! 2. no sweep of it is in progress (its sweep marker), no cutover of it is pending (the
//!    fence), no deploy window holds it below K (nor a revert takes it there) and no
//!    `strata copy` into the store is unfinished (`__nx/copy/progress`): each could still
//!    hold or bring rows below K;
//! 3. every row's envelope header (clear, or the clear header of a sealed row: no key is
//!    needed) is read: no row is stored below K, and none is unreadable;
//! 4. the record `__nx/retired/<collection>` ([`crate::layout::retired`]) is written in one
//!    atomic batch whose preconditions are the records step 2 read (sweep marker, fence,
//!    window, copy progress): if any of them changed since, nothing is written.
//!
//! A row below K that appears later (restored from a backup, copied in, written by an old
//! build) is refused by every reader with
//! [`CollectionError::Retired`], and `strata
//! collections`/`status`/`verify` report it.

use crate::collection::CollectionError;
use crate::keys::{COPY_PREFIX, FENCE_KEY};
use crate::payload::envelope;
use crate::payload::retired;
use crate::payload::INITIAL_PAYLOAD_VERSION;
use std::collections::BTreeMap;
use strata_store::{
    escape_key, lease_holder, Batch, ExclusiveSession, KvRead, KvWrite, Pages, ScanLimits, Store,
    StoreError,
};

/// What [`retire`] proved and recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RetireReport {
    /// The collection.
    pub collection: String,
    /// Versions below this one are now retired.
    pub below: i32,
    /// The retirement recorded before (`None`: none).
    pub previous: Option<i32>,
    /// Rows checked.
    pub rows: u64,
    /// Rows per stored payload version.
    pub versions: BTreeMap<i32, u64>,
    /// False for a dry run (nothing written) or when the store already retired as much.
    pub recorded: bool,
}

/// Why [`retire`] refused; nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetireError {
    /// Retiring below v1 or v0 retires nothing.
    #[error("cannot retire the versions of collection `{collection}` below v{below}: payload versions start at 1, so the version must be 2 or more")]
    NothingToRetire {
        /// The collection.
        collection: String,
        /// The version given.
        below: i32,
    },
    /// The collection is not recorded in the store.
    #[error("collection `{collection}` is not recorded in this store; check the name (`strata collections` lists them)")]
    UnknownCollection {
        /// The collection.
        collection: String,
    },
    /// Rows are still stored below the version.
    #[error("cannot retire the versions of collection `{collection}` below v{below}: {rows} row(s) are still stored below it (first: `{example}`; versions {versions}); bring them up (the eager sweep `sweep {collection}`, or a rewrite of each row through the collection), then retire again")]
    RowsBelow {
        /// The collection.
        collection: String,
        /// The version to retire below.
        below: i32,
        /// How many rows are below it.
        rows: u64,
        /// The first such row's document key.
        example: String,
        /// The versions found below it, as `v1: 3, v2: 1`.
        versions: String,
    },
    /// Rows whose envelope cannot be read: nothing can be proven about them.
    #[error("cannot retire the versions of collection `{collection}`: {rows} row(s) have an unreadable envelope (first: `{example}`), so their version cannot be proven; `strata verify` names them")]
    Unreadable {
        /// The collection.
        collection: String,
        /// How many rows.
        rows: u64,
        /// The first one's document key.
        example: String,
    },
    /// A sweep of the collection is in progress.
    #[error("cannot retire the versions of collection `{collection}` while a sweep of it to v{target} is in progress or interrupted; let it finish (or resume it: `sweep {collection}`), then retire")]
    SweepRunning {
        /// The collection.
        collection: String,
        /// The sweep's target.
        target: i32,
    },
    /// A cutover of the collection is pending.
    #[error("cannot retire the versions of collection `{collection}` while a cutover of it is pending; finish it (`cutover`) or abort it (`strata fence abort`), then retire")]
    CutoverPending {
        /// The collection.
        collection: String,
    },
    /// A copy into the store is unfinished.
    #[error("cannot retire the versions of collection `{collection}`: a `strata copy` into this store is unfinished (`__nx/copy/progress`) and may still bring older rows; resume the copy, then retire")]
    CopyUnfinished {
        /// The collection.
        collection: String,
    },
    /// A deploy window holds the collection below the version (or a revert takes it
    /// there): its writes land below it.
    #[error("cannot retire the versions of collection `{collection}` below v{below}: a deploy window holds it at v{operational} (or a revert is taking it there), so builds write its rows at v{operational}; complete the window (`window {collection} complete`) or finish the revert first, then retire")]
    WindowBelow {
        /// The collection.
        collection: String,
        /// The version asked for.
        below: i32,
        /// The window's operational version (or the unfinished revert's target).
        operational: i32,
    },
    /// The store already retires more.
    #[error("collection `{collection}` already retires the versions below v{recorded}; a retirement is never lowered (the steps below v{recorded} may already be gone from the application)")]
    WouldLower {
        /// The collection.
        collection: String,
        /// The version recorded.
        recorded: i32,
        /// The version asked for.
        below: i32,
    },
    /// A record the proof depends on changed while it was taken.
    #[error("the retirement of collection `{collection}` below v{below} was not recorded: the sweep marker, the fence or a copy's progress changed while the proof was taken; run it again")]
    Changed {
        /// The collection.
        collection: String,
        /// The version asked for.
        below: i32,
    },
    /// A collection-level error (catalog, corrupted records).
    #[error(transparent)]
    Collection(#[from] CollectionError),
}

/// Retires the payload versions of `collection` below `below` after proving that no row
/// needs them (see the module docs); `dry_run` proves without writing. Running it again
/// with the same version is a no-op that succeeds.
///
/// ```
/// use serde_json::json;
/// use strata::{CollectionOptions, Database, Mode};
/// use strata::ops::retire::{retire, RetireError};
/// use strata_store::{MemoryStore, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::new(MemoryStore::new());
/// let db = Database::builder(store.clone()).open()?;
/// let v2 = CollectionOptions::new().upcast(1, Mode::Eager, |o| {
///     o.insert("n".into(), json!(0));
///     Ok(())
/// });
/// let c = db.collection::<serde_json::Value>("c", v2)?;
/// c.put("a", &json!({"n": 1}))?; // stored at v2
/// retire(&store, "c", 2, false)?;
/// // The step 1 -> 2 may now go: the chain starts at v2.
/// let c = db.collection::<serde_json::Value>("c", CollectionOptions::new().retired_below(2))?;
/// assert_eq!(c.current_version(), 2);
/// assert_eq!(c.get("a")?, Some(json!({"n": 1})));
/// # Ok(()) }
/// ```
pub fn retire(
    store: &Store,
    collection: &str,
    below: i32,
    dry_run: bool,
) -> Result<RetireReport, RetireError> {
    if below <= INITIAL_PAYLOAD_VERSION {
        return Err(RetireError::NothingToRetire {
            collection: collection.to_string(),
            below,
        });
    }
    if dry_run {
        return prove(store, collection, below).map(|(report, _)| report);
    }
    let session = ExclusiveSession::acquire(store, &lease_holder("strata retire"), None)
        .map_err(|e| CollectionError::store(collection, e))?;
    let (mut report, read) = prove(&session, collection, below)?;
    if report.previous.is_some_and(|p| p >= below) {
        return Ok(report);
    }
    let mut batch = Batch::new().set(
        retired::retired_key(collection),
        retired::encode(below).to_vec(),
    );
    batch = batch.require(retired::retired_key(collection), read.retired);
    batch = batch.require(crate::keys::sweep_key(collection), read.sweep);
    batch = batch.require(FENCE_KEY.to_vec(), read.fence);
    batch = batch.require(copy_progress_key(), None);
    batch = batch.require(crate::payload::window::window_key(collection), read.window);
    match session.apply(batch) {
        Ok(()) => {}
        Err(e) if e.is_conflict() => {
            return Err(RetireError::Changed {
                collection: collection.to_string(),
                below,
            })
        }
        Err(e) => return Err(CollectionError::store(collection, e).into()),
    }
    session
        .flush()
        .map_err(|e| CollectionError::store(collection, e))?;
    report.recorded = true;
    tracing::info!(
        collection,
        below,
        rows = report.rows,
        "payload versions retired"
    );
    Ok(report)
}

/// The records the proof read, which the recording batch requires unchanged.
struct Read {
    retired: Option<Vec<u8>>,
    sweep: Option<Vec<u8>>,
    fence: Option<Vec<u8>>,
    window: Option<Vec<u8>>,
}

fn copy_progress_key() -> Vec<u8> {
    [COPY_PREFIX, b"progress"].concat()
}

/// Steps 1–3 of the proof (see the module docs).
fn prove<S: KvRead>(
    store: &S,
    collection: &str,
    below: i32,
) -> Result<(RetireReport, Read), RetireError> {
    let st = |e: StoreError| RetireError::from(CollectionError::store(collection, e));
    let catalog = crate::database::read_catalog(store)?;
    let Some(table) = catalog.get(collection) else {
        return Err(RetireError::UnknownCollection {
            collection: collection.to_string(),
        });
    };
    let retired_bytes = store.get(&retired::retired_key(collection)).map_err(st)?;
    let previous = match &retired_bytes {
        None => None,
        Some(b) => Some(crate::collection::layout::decode_retired(collection, b)?),
    };
    if let Some(recorded) = previous {
        if recorded > below {
            return Err(RetireError::WouldLower {
                collection: collection.to_string(),
                recorded,
                below,
            });
        }
    }
    let sweep = store.get(&crate::keys::sweep_key(collection)).map_err(st)?;
    if let Some(bytes) = &sweep {
        let marker = crate::ops::sweep::SweepMarker::decode(collection, bytes)?;
        if let Some(target) = marker.in_progress {
            return Err(RetireError::SweepRunning {
                collection: collection.to_string(),
                target,
            });
        }
    }
    let fence = store.get(FENCE_KEY).map_err(st)?;
    if fence.is_some() {
        let doc = crate::policy::Fence::read(store)
            .map_err(|e| CollectionError::policy(collection, e))?;
        if doc.is_pending(collection) {
            return Err(RetireError::CutoverPending {
                collection: collection.to_string(),
            });
        }
    }
    let window = store
        .get(&crate::payload::window::window_key(collection))
        .map_err(st)?;
    let reverting = crate::ops::revert::unfinished(store, collection)?;
    let held = crate::collection::layout::window_operational(store, collection)?
        .into_iter()
        .chain(reverting)
        .min();
    if let Some(operational) = held.filter(|v| *v < below) {
        return Err(RetireError::WindowBelow {
            collection: collection.to_string(),
            below,
            operational,
        });
    }
    if store.get(&copy_progress_key()).map_err(st)?.is_some() {
        return Err(RetireError::CopyUnfinished {
            collection: collection.to_string(),
        });
    }
    let prefix = table.prefix().to_vec();
    let limits = ScanLimits::new(1024, 64 << 20).map_err(st)?;
    let mut versions: BTreeMap<i32, u64> = BTreeMap::new();
    let mut rows = 0u64;
    let mut below_example: Option<String> = None;
    let mut unreadable: (u64, Option<String>) = (0, None);
    for rec in Pages::new(store, &prefix, limits).records() {
        let rec = rec.map_err(st)?;
        rows += 1;
        let doc_key = || match rec.key.strip_prefix(prefix.as_slice()) {
            Some(k) => escape_key(k),
            None => escape_key(&rec.key),
        };
        let version = match envelope::decode(&rec.value) {
            Ok((env, _)) => Some(env.payload_version),
            Err(_) => crate::seal::peek(&rec.value)
                .filter(|(_, sealed)| *sealed)
                .map(|(env, _)| env.payload_version),
        };
        match version {
            Some(v) => {
                *versions.entry(v).or_insert(0) += 1;
                if v < below && below_example.is_none() {
                    below_example = Some(doc_key());
                }
            }
            None => {
                unreadable.0 += 1;
                if unreadable.1.is_none() {
                    unreadable.1 = Some(doc_key());
                }
            }
        }
    }
    if let Some(example) = below_example {
        let under: Vec<String> = versions
            .range(..below)
            .map(|(v, n)| format!("v{v}: {n}"))
            .collect();
        return Err(RetireError::RowsBelow {
            collection: collection.to_string(),
            below,
            rows: versions.range(..below).map(|(_, n)| n).sum(),
            example,
            versions: under.join(", "),
        });
    }
    if let (n, Some(example)) = unreadable {
        return Err(RetireError::Unreadable {
            collection: collection.to_string(),
            rows: n,
            example,
        });
    }
    Ok((
        RetireReport {
            collection: collection.to_string(),
            below,
            previous,
            rows,
            versions,
            recorded: false,
        },
        Read {
            retired: retired_bytes,
            sweep,
            fence,
            window,
        },
    ))
}

/// The version below which `collection`'s rows are retired in `store` (`None`: none).
pub use crate::collection::layout::retired_below;
