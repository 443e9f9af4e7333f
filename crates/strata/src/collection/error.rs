//! The one error type of the collections and payload layer.

use crate::payload::chain::StepError;
use crate::policy::Refusal;
use crate::validate::ValidationError;
use std::fmt;
use strata_store::{escape_key, StoreError};

/// The boxed error a [`WriteGuard`](crate::collection::WriteGuard) returns to refuse a write.
pub type GuardError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a conditional write expected to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expect {
    /// No condition: last writer wins (the ahead guard still applies).
    Any,
    /// The document must not exist.
    Absent,
    /// The document must exist with exactly this lock version.
    Lock(u64),
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Any => f.write_str("any"),
            Expect::Absent => f.write_str("absent"),
            Expect::Lock(v) => write!(f, "lock version {v}"),
        }
    }
}

pub(crate) struct FoundLock(pub(crate) Option<u64>);

impl fmt::Display for FoundLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "lock version {v}"),
            None => f.write_str("no document"),
        }
    }
}

/// The message of [`CollectionError::NoWindow`]: what the store records and what to do.
fn no_window_message(collection: &str, recorded: Option<i32>, build: i32) -> String {
    let head = format!("cannot complete the deploy window of `{collection}`: no window is open");
    match recorded {
        Some(v) if v < build => format!(
            "{head}, and the store records it at payload v{v} (its stored schema), not this build's v{build}: nothing was changed. Open the collection again with this build (a build that declares the downcasts down to v{v} opens a window at v{v}), or open one with `strata::ops::window::open`, then complete it"
        ),
        Some(v) => format!(
            "{head}, and the store records it at payload v{v}, above this build's v{build}: nothing was changed; run `complete` from a build at v{v} or newer"
        ),
        None => format!(
            "{head}, and the store records no payload version for it (no persisted schema), so nothing shows that it is at this build's v{build}: nothing was changed. Open a window with `strata::ops::window::open` first, or move the rows with `Collection::sweep`"
        ),
    }
}

/// "records no retirement" / "records only a retirement below vN".
fn recorded_retirement(recorded: Option<i32>) -> String {
    match recorded {
        None => "records no retirement of its older versions".to_string(),
        Some(v) => format!("records only a retirement below v{v}"),
    }
}

pub(crate) fn esc(key: &str) -> String {
    strata_store::shown_key(key.as_bytes())
}

/// Errors of collections, the payload read path, the ahead guard and the sweep.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectionError {
    /// A collection name that cannot be used.
    #[error("invalid collection name `{}`: {reason}; use 1-200 characters from `A-Z a-z 0-9 _ - .`", esc(.collection))]
    InvalidName {
        /// The name.
        collection: String,
        /// Why.
        reason: String,
    },
    /// A document key that cannot be used.
    #[error("invalid document key `{}` in collection `{collection}`: {reason}", esc(.key))]
    InvalidKey {
        /// The collection.
        collection: String,
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The upcast chain skips a version.
    #[error("upcast chain of collection `{collection}` has a gap: expected a step from v{expected}, found one from v{found}; declare every step from 1 up without holes (or, when the steps below v{found} were retired with `retire --below {found}`, declare `retired_below({found})`)")]
    ChainGap {
        /// The collection.
        collection: String,
        /// The `from` version the chain needed next.
        expected: i32,
        /// The `from` version found instead.
        found: i32,
    },
    /// Two steps upcast from the same version.
    #[error("upcast chain of collection `{collection}` declares two steps from v{from}; declare each step once")]
    ChainDuplicate {
        /// The collection.
        collection: String,
        /// The duplicated `from` version.
        from: i32,
    },
    /// An invalid downcast declaration (one without the upcast it reverses, or two
    /// from one version): the chain's error says which.
    #[error("{0}")]
    ChainDowncast(crate::payload::chain::ChainError),
    /// A downcast step failed (or none is declared down to the version the write needed):
    /// nothing was written.
    #[error("downcast of `{}` in collection `{collection}` from v{from} to v{} failed{}; nothing was written, fix the downcast (or complete the deploy window) and write again", esc(.key), .from.saturating_sub(1), .source.as_ref().map_or_else(|| " (no downcast declared from that version)".to_string(), |e| format!(": {e}")))]
    Downcast {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The failing downcast's `from` version.
        from: i32,
        /// The step's error (`None`: no downcast declared from `from`).
        source: Option<StepError>,
    },
    /// `complete_window` by a build that is not newer than the window's operational
    /// version.
    #[error("the deploy window of `{collection}` holds it at payload v{operational}, and this build knows v{build}: only a newer build completes it; run `complete` from the new build")]
    WindowNotAbove {
        /// The collection.
        collection: String,
        /// The window's operational version.
        operational: i32,
        /// This build's version.
        build: i32,
    },
    /// A deploy window asked below the store's retirement
    /// ([`crate::ops::window::open`]): every reader refuses rows written there.
    #[error("a deploy window of `{collection}` cannot hold it at payload v{operational}: the versions below v{below} are retired in this store (`__nx/retired/{collection}`), so every reader would refuse the rows written there; open it at v{below} or above (nothing was changed)")]
    WindowBelowRetired {
        /// The collection.
        collection: String,
        /// The operational version asked for.
        operational: i32,
        /// Versions below this one are retired.
        below: i32,
    },
    /// `complete_window` timed out: clients of older builds are still live.
    #[error("the deploy window of `{collection}` (v{operational} → v{build}) cannot complete: after {waited_ms} ms these clients of older builds are still live: {}; stop or upgrade them, then complete again (nothing was changed)", .holdouts.join(", "))]
    WindowHoldouts {
        /// The collection.
        collection: String,
        /// The window's operational version.
        operational: i32,
        /// This build's version.
        build: i32,
        /// How long it waited (policy-clock milliseconds).
        waited_ms: u64,
        /// The live clients of older builds (client id, pid, version).
        holdouts: Vec<String>,
    },
    /// A revert ([`Collection::revert`](crate::Collection::revert)) cannot run as asked.
    #[error("cannot revert `{collection}` to payload v{to}: {reason}")]
    Revert {
        /// The collection.
        collection: String,
        /// The version asked for.
        to: i32,
        /// Why, and what to do (and, as the [`source`](std::error::Error::source), the
        /// error behind it when a row's downcast failed).
        #[source]
        reason: crate::pass::RecordError,
    },
    /// A revert's bulk pass stopped (a store failure, a record over the budget, …); what
    /// it committed stays and a rerun resumes from its cursor.
    #[error("cannot revert `{collection}` to payload v{to}: the bulk pass stopped; run the revert again to resume")]
    RevertPass {
        /// The collection.
        collection: String,
        /// The version asked for.
        to: i32,
        /// Why the pass stopped.
        #[source]
        source: Box<crate::pass::PassError>,
    },
    /// `complete_window` found no deploy window open and the store does not record the
    /// collection at the completing build's version: nothing can be completed (and
    /// nothing was changed).
    #[error("{}", no_window_message(.collection, *.recorded, *.build))]
    NoWindow {
        /// The collection.
        collection: String,
        /// The payload version the stored schema baseline records (`None`: no persisted
        /// schema, or one without a payload version).
        recorded: Option<i32>,
        /// This build's version.
        build: i32,
    },
    /// `rollback_window` found no deploy window open: a rollback is free only before
    /// `complete`; afterwards a revert takes the rows back down (nothing was changed).
    #[error("cannot roll back the deploy window of `{collection}`: no window is open{}; a rollback is free only while a window is open (before `complete`). To take the collection back to an older version after its window completed, revert it: `Collection::revert(N, ..)` (or the application's `revert {collection} --to N`) sweeps the rows down through this build's downcasts and reopens a window at vN (nothing was changed)", .recorded.map_or_else(String::new, |v| format!(" (the store records it at payload v{v})")))]
    NoWindowToRollBack {
        /// The collection.
        collection: String,
        /// The payload version the stored schema baseline records (`None`: no persisted
        /// schema, or one without a payload version).
        recorded: Option<i32>,
    },
    /// The window record changed while an operation on it ran.
    #[error("the deploy window of `{collection}` changed while this operation ran (another instance completed or opened it); look at `strata collections` and run it again")]
    WindowChanged {
        /// The collection.
        collection: String,
    },
    /// A step from below the initial payload version 1.
    #[error("upcast chain of collection `{collection}` declares a step from v{from}, below the initial payload version 1; steps start at 1")]
    ChainBelowInitial {
        /// The collection.
        collection: String,
        /// The offending `from` version.
        from: i32,
    },
    /// A step from below the version the chain declares it starts at.
    #[error("upcast chain of collection `{collection}` starts at v{start} (the steps below it are retired) but declares a step from v{from}; drop that step or lower `retired_below`")]
    ChainBelowStart {
        /// The collection.
        collection: String,
        /// The offending `from` version.
        from: i32,
        /// The version the chain starts at.
        start: i32,
    },
    /// The chain starts above v1 (`retired_below`) but the store does not record that
    /// retirement: rows below it may still be stored.
    #[error("collection `{collection}` declares its upcast chain from v{start} (steps below it retired), but the store {}; run `retire {collection} --below {start}` (it checks that no row is stored below v{start}) before dropping the steps, or declare them again", recorded_retirement(*.recorded))]
    RetirementMissing {
        /// The collection.
        collection: String,
        /// The version the chain starts at.
        start: i32,
        /// The store's retirement (`None`: none recorded).
        recorded: Option<i32>,
    },
    /// A row stored below the collection's retired versions.
    #[error("document `{}` in collection `{collection}` is stored at payload v{stored}, but versions below v{below} were retired (`__nx/retired/{collection}`: no step reads them any more); it was restored from a backup, copied in or written by an old build — delete it or rewrite it at v{below} or newer", esc(.key))]
    Retired {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// Versions below this one are retired.
        below: i32,
    },
    /// A row stored below the version this build's chain starts at.
    #[error("document `{}` in collection `{collection}` is stored at payload v{stored}, below v{start} where this build's upcast chain starts (its steps below v{start} were dropped); declare them again, or delete or rewrite the row", esc(.key))]
    BelowChain {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// The version the chain starts at.
        start: i32,
    },
    /// The collection's catalog record or sequence counter is unreadable.
    #[error("corrupted catalog record `{}`{}: {reason}; restore it from a backup", escape_key(.key), of_collection(.collection))]
    CorruptCatalog {
        /// The collection (empty for the sequence counter).
        collection: String,
        /// The record's key.
        key: Vec<u8>,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// No table id is left for a new collection.
    #[error("cannot create collection `{collection}`: every collection table id (1024-65535) is taken; drop unused collections")]
    IdsExhausted {
        /// The collection.
        collection: String,
    },
    /// The collection's table header did not pass startup validation.
    #[error("collection `{collection}` failed schema validation")]
    Validation {
        /// The collection.
        collection: String,
        /// The validation error.
        #[source]
        source: ValidationError,
    },
    /// An optimistic-lock condition did not hold; nothing was written.
    #[error("write conflict on `{}` in collection `{collection}`: expected {expected}, found {}; re-read the document and retry", esc(.key), FoundLock(*.found))]
    Conflict {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// What the write expected.
        expected: Expect,
        /// The lock version found (`None`: no document).
        found: Option<u64>,
    },
    /// A write would replace a document written by a newer build.
    #[error("refusing to overwrite `{}` in collection `{collection}`: it was written at payload v{stored}, newer than this build's v{current}; upgrade this instance (the stored document is unchanged and stays readable)", esc(.key))]
    AheadOfBuild {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// This build's current payload version.
        current: i32,
    },
    /// A stored payload version below 1.
    #[error("document `{}` in collection `{collection}` carries payload version {found}, below the initial version 1; it names no known shape and is refused rather than guessed, rewrite it with a valid version", esc(.key))]
    InvalidPayloadVersion {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The version found.
        found: i32,
    },
    /// A stored value or record is not what the layout requires.
    #[error("corrupted document `{}` in collection `{collection}`: {reason}; restore it from a backup or delete it", esc(.key))]
    Corrupted {
        /// The collection.
        collection: String,
        /// The document key (escaped when not UTF-8).
        key: String,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the decode error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// An upcast step failed; the stored document is unchanged.
    #[error("upcast of `{}` in collection `{collection}` from v{stored} failed in step v{from}->v{to}; the stored document is unchanged, fix the step and read again", esc(.key))]
    Upcast {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// The failing step's `from` version.
        from: i32,
        /// Its `to` version.
        to: i32,
        /// The step's error.
        #[source]
        source: StepError,
    },
    /// A document written by a newer build (above this build's payload version) does not
    /// bind to this build's type: no upcast step can fix it, this instance must be
    /// upgraded.
    #[error("document `{}` in collection `{collection}` was written by a newer build (payload v{stored}, this build knows v{current}); upgrade this instance (the stored document is unchanged)", esc(.key))]
    NewerBuild {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// This build's current payload version.
        current: i32,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The (upcast) JSON does not bind to the Rust type.
    #[error("document `{}` in collection `{collection}` at payload v{stored} (read as v{version}) does not bind to the collection's type; the stored document is unchanged, add or fix an upcast step", esc(.key))]
    Bind {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The payload version stored.
        stored: i32,
        /// The payload version the tree had when binding.
        version: i32,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A cutover transform failed on one document; nothing of its batch was written.
    #[error("cutover transform of `{}` in collection `{collection}` failed: {reason}; fix the transform or the document and rerun the cutover", esc(.key))]
    Transform {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// The transform's reason.
        reason: String,
    },
    /// A value could not be serialized to a JSON object.
    #[error("cannot store `{}` in collection `{collection}`: {reason}; documents must serialize to a JSON object", esc(.key))]
    Encode {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The shape policy refused the write (a rejected schema change, a pending cutover's
    /// fence, a moved schema generation); nothing was written. The message is the
    /// refusal's.
    #[error("{}", .reason.message(.collection))]
    Refused {
        /// The collection.
        collection: String,
        /// Why.
        reason: Refusal,
    },
    /// A user write guard refused the write; nothing was written.
    #[error("write to collection `{collection}` refused by a write guard: {error}")]
    Guard {
        /// The collection.
        collection: String,
        /// The guard's error (printed in the message, so not returned as the source).
        error: GuardError,
    },
    /// The sweep marker is unreadable.
    #[error("corrupted sweep marker `__nx/sweep/{collection}`: {reason}; delete it to make the next sweep rescan the collection")]
    CorruptMarker {
        /// The collection.
        collection: String,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// The sweep's bulk pass failed.
    #[error("sweep of collection `{collection}` stopped: {reason}; rerun the sweep to resume")]
    Sweep {
        /// The collection.
        collection: String,
        /// Why.
        reason: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The policy layer failed while checking or declaring the collection (a store error
    /// on a policy record, a corrupted fence); nothing was written.
    #[error("policy check of collection `{collection}` failed")]
    Policy {
        /// The collection (empty when none applies).
        collection: String,
        /// The policy error.
        #[source]
        source: Box<crate::policy::PolicyError>,
    },
    /// Sealing or opening a sealed document failed: a record that does not authenticate
    /// (that read fails, nothing changes), a sealed record read without the key, or a
    /// wrong key at open.
    #[error("{}: {}", seal_context(.collection), .source)]
    Seal {
        /// The collection (empty when none applies).
        collection: String,
        /// The seal error.
        #[source]
        source: crate::seal::SealError,
    },
    /// A collection declared sealed on a database opened without a key.
    #[error("collection `{collection}` is declared sealed but the database was opened without a key; nothing was written; open it with `Database::builder(..).key(..)`")]
    NoKey {
        /// The collection.
        collection: String,
    },
    /// A database opened [`DatabaseBuilder::sealed`](crate::database::DatabaseBuilder::sealed)
    /// without [`DatabaseBuilder::key`](crate::database::DatabaseBuilder::key).
    #[error("the database is to be sealed but no key was given; nothing was written; add `.key(..)` to `Database::builder(..)`")]
    SealedWithoutKey,
    /// A collection declared sealed (or a database sealed as a whole) already holds
    /// documents in clear: they would not open as sealed ones.
    #[error("collection `{collection}` holds documents in clear and cannot be sealed in place; nothing was written; keep it clear, or copy its documents into a new sealed collection")]
    HoldsClearDocuments {
        /// The collection.
        collection: String,
    },
    /// A stored document record (key + value) is larger than the iteration's read budget
    /// (written by an older build or another tool): the iteration skipped it, reported it
    /// with this item, and continues with the next document.
    #[error("document `{}` in collection `{collection}` is {size} bytes (key + value), more than the iteration read budget of {limit} bytes; it was skipped and iteration continues, read it alone with `Collection::get` and store it smaller (at most {} bytes)", esc(.key), crate::collection::MAX_DOCUMENT_BYTES)]
    OversizeDocument {
        /// The collection.
        collection: String,
        /// The document key (non-UTF-8 bytes replaced).
        key: String,
        /// Key length plus value length.
        size: usize,
        /// The read budget it exceeded.
        limit: usize,
    },
    /// A write would store a document record (key + value) larger than
    /// [`MAX_DOCUMENT_BYTES`](crate::collection::MAX_DOCUMENT_BYTES), which a sweep or
    /// cutover could not read and rewrite under its default budget; nothing was written.
    #[error("cannot store `{}` in collection `{collection}`: the record would be {size} bytes (key + value), more than the document limit of {limit} bytes (a sweep or cutover reads a document and writes its replacement within one 4 MiB batch); nothing was written, store a smaller document or split it", esc(.key))]
    DocumentTooLarge {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// Key length plus encoded value length.
        size: usize,
        /// The limit ([`MAX_DOCUMENT_BYTES`](crate::collection::MAX_DOCUMENT_BYTES)).
        limit: usize,
    },
    /// The store failed. The message says what kind of failure it was and what to do;
    /// the store's own error (key, backend cause) is the [`source`](std::error::Error::source),
    /// not repeated in the message.
    #[error("store error in {}: {}", in_collection(.collection), store_failure(.source))]
    Store {
        /// The collection (empty when none applies).
        collection: String,
        /// The store error.
        #[source]
        source: StoreError,
    },
}

impl From<crate::payload::chain::ChainError> for CollectionError {
    fn from(e: crate::payload::chain::ChainError) -> Self {
        use crate::payload::chain::ChainError;
        match e {
            ChainError::Gap {
                collection,
                expected,
                found,
            } => CollectionError::ChainGap {
                collection,
                expected,
                found,
            },
            ChainError::Duplicate { collection, from } => {
                CollectionError::ChainDuplicate { collection, from }
            }
            ChainError::BelowInitial { collection, from } => {
                CollectionError::ChainBelowInitial { collection, from }
            }
            ChainError::BelowStart {
                collection,
                from,
                start,
            } => CollectionError::ChainBelowStart {
                collection,
                from,
                start,
            },
            e @ (ChainError::DowncastWithoutUpcast { .. }
            | ChainError::DuplicateDowncast { .. }) => CollectionError::ChainDowncast(e),
        }
    }
}

impl CollectionError {
    /// The error of an upcast of document `key` of `collection`, stored at `stored`, that
    /// failed with `failure`.
    pub(crate) fn upcast_failure(
        collection: &str,
        key: &str,
        stored: i32,
        failure: crate::payload::upcaster::UpcastFailure,
    ) -> Self {
        use crate::payload::upcaster::UpcastFailure;
        match failure {
            UpcastFailure::InvalidVersion { found } => CollectionError::InvalidPayloadVersion {
                collection: collection.to_string(),
                key: key.to_string(),
                found,
            },
            UpcastFailure::Retired { found, below } => CollectionError::Retired {
                collection: collection.to_string(),
                key: key.to_string(),
                stored: found,
                below,
            },
            UpcastFailure::Unreachable { found, start } => CollectionError::BelowChain {
                collection: collection.to_string(),
                key: key.to_string(),
                stored: found,
                start,
            },
            UpcastFailure::Step { from, source } => CollectionError::Upcast {
                collection: collection.to_string(),
                key: key.to_string(),
                stored,
                from,
                to: from.saturating_add(1),
                source,
            },
            UpcastFailure::Downcast { from, source } => CollectionError::Downcast {
                collection: collection.to_string(),
                key: key.to_string(),
                from,
                source,
            },
        }
    }

    /// True for a row refused because its version was retired (or is below the chain).
    pub fn is_retired(&self) -> bool {
        matches!(
            self,
            CollectionError::Retired { .. } | CollectionError::BelowChain { .. }
        )
    }

    /// True for an optimistic-lock conflict (re-read and retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self, CollectionError::Conflict { .. })
    }

    /// True when a newer build wrote the document this write would replace.
    pub fn is_ahead(&self) -> bool {
        matches!(self, CollectionError::AheadOfBuild { .. })
    }

    /// The policy refusal, when the write was refused by the shape policy.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            CollectionError::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// True for a write refused by a pending cutover's fence.
    pub fn is_fenced(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_fenced)
    }

    /// True for a write refused because the schema generation moved (reopen needed).
    pub fn is_migration_required(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_migration_required)
    }

    /// True for a write refused by a schema-update strategy.
    pub fn is_rejection(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_rejection)
    }

    /// True for an invalid upcast chain declaration.
    pub fn is_chain_error(&self) -> bool {
        matches!(
            self,
            CollectionError::ChainGap { .. }
                | CollectionError::ChainDuplicate { .. }
                | CollectionError::ChainBelowInitial { .. }
                | CollectionError::ChainBelowStart { .. }
                | CollectionError::ChainDowncast(_)
                | CollectionError::RetirementMissing { .. }
        )
    }

    /// A policy error met by a write or an open of `collection`: a refusal stays typed.
    pub(crate) fn policy(collection: &str, e: crate::policy::PolicyError) -> Self {
        match e {
            crate::policy::PolicyError::Refused { collection, reason } => {
                CollectionError::Refused { collection, reason }
            }
            other => CollectionError::Policy {
                collection: collection.to_string(),
                source: Box::new(other),
            },
        }
    }

    pub(crate) fn store(collection: &str, source: StoreError) -> Self {
        CollectionError::Store {
            collection: collection.to_string(),
            source,
        }
    }
}

/// "collection `name`", or the catalog for the table-id counter (no collection).
fn in_collection(collection: &str) -> String {
    if collection.is_empty() {
        "the collection catalog".to_string()
    } else {
        format!("collection `{collection}`")
    }
}

/// The context of a [`CollectionError::Seal`]: the collection, or the database keyring
/// when none applies (a wrong key at open).
fn seal_context(collection: &str) -> String {
    if collection.is_empty() {
        "unlocking the keyring of the database's sealed collections failed".into()
    } else {
        format!("sealed collection `{collection}`")
    }
}

/// What kind of store failure `e` is and its remedy, without `e`'s own message (which
/// follows as the source in an error chain).
fn store_failure(e: &StoreError) -> String {
    match e {
        StoreError::Conflict { .. } => {
            "a precondition of the write no longer held (a concurrent change); nothing was written, retry".into()
        }
        StoreError::RecordTooLarge { size, limit, .. } => format!(
            "a record of {size} bytes is over the {limit}-byte read budget; raise the budget"
        ),
        StoreError::InUse { .. }
        | StoreError::NotFound { .. }
        | StoreError::Damaged { .. }
        | StoreError::CannotOpen { .. } => {
            "the datastore cannot be used; see the cause".into()
        }
        StoreError::DuplicateKey { .. } | StoreError::InvalidArgument(_) => {
            "the store refused the request as malformed; nothing was written".into()
        }
        StoreError::KeyTooLong { .. } => {
            "the document key is longer than any strata store takes; nothing was written".into()
        }
        StoreError::Backend { backend, .. } => {
            format!("the {backend} backend failed; see the cause")
        }
        _ => "the store failed; see the cause".into(),
    }
}

/// " of collection `name`", or nothing for the table-id counter (no collection).
fn of_collection(collection: &str) -> String {
    if collection.is_empty() {
        String::new()
    } else {
        format!(" of collection `{collection}`")
    }
}

/// `e`'s message followed by each of its sources' (`a: b: c`), skipping a source whose
/// text the message already holds: for a log line or a reason string that must keep the
/// cause ("failed authentication", "wrong key") that `Display` leaves to the chain.
pub(crate) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A store error says what kind of failure it was and keeps the store's error as its
    /// source, whose text it does not repeat (a chain prints each part once).
    #[test]
    fn store_error_says_what_failed_once() {
        let cases = [
            (
                StoreError::Conflict {
                    key: b"__nx/doc/orders/o1".to_vec(),
                    reason: strata_store::ConflictReason::Changed,
                },
                "precondition of the write no longer held",
            ),
            (
                StoreError::backend("sled", std::io::Error::other("disk full")),
                "the sled backend failed",
            ),
            (
                StoreError::RecordTooLarge {
                    key: b"k".to_vec(),
                    size: 10,
                    limit: 5,
                },
                "10 bytes is over the 5-byte read budget",
            ),
        ];
        for (source, expect) in cases {
            let inner = source.to_string();
            let e = CollectionError::store("orders", source);
            let msg = e.to_string();
            assert!(
                msg.starts_with("store error in collection `orders`: "),
                "{msg}"
            );
            assert!(msg.contains(expect), "{msg}");
            assert!(!msg.contains(&inner), "the source is repeated: {msg}");
            assert!(!msg.contains("disk full"), "{msg}");
            let src = e.source().unwrap();
            assert_eq!(src.to_string(), inner);
            assert!(src.downcast_ref::<StoreError>().is_some());
        }
        let e = CollectionError::store("", StoreError::InvalidArgument("x".into()));
        assert!(e
            .to_string()
            .starts_with("store error in the collection catalog: "));
    }

    /// "retry" only where a retry can succeed: a conflict says it; a malformed request, an
    /// oversize key, a damaged or locked store and a backend failure do not.
    #[test]
    fn only_a_conflict_advises_a_retry() {
        let conflict = CollectionError::store(
            "orders",
            StoreError::Conflict {
                key: b"k".to_vec(),
                reason: strata_store::ConflictReason::Changed,
            },
        );
        assert!(conflict.to_string().contains("retry"), "{conflict}");
        let never = [
            StoreError::InvalidArgument("x".into()),
            StoreError::DuplicateKey { key: b"k".to_vec() },
            StoreError::KeyTooLong {
                key: vec![b'k'; 3000],
                len: 3000,
                limit: strata_store::MAX_KEY_BYTES,
            },
            StoreError::Damaged {
                path: "/x".into(),
                reason: "bad".into(),
            },
            StoreError::InUse { path: "/x".into() },
            StoreError::backend("redb", std::io::Error::other("x")),
        ];
        for source in never {
            let msg = CollectionError::store("orders", source).to_string();
            assert!(!msg.contains("retry"), "{msg}");
            assert!(!msg.contains("try again"), "{msg}");
        }
    }
}
