//! The policy layer's one error type.

use super::state::FenceState;
use std::fmt;
use strata_store::{escape_key, StoreError};

/// Renders a list of names as `[a, b]` (the seed's delta notation).
pub(crate) fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// Errors of the shape-policy layer: strategy rejections, the write fence, the drain
/// barrier and the cutover.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A write refused by the policy: a strategy rejected the collection's schema change,
    /// a coordinated cutover fences it, or the schema generation moved since this handle
    /// opened. The message is the refusal's (the seed's text where it has one).
    #[error("{}", .reason.message(.collection))]
    Refused {
        /// The collection the write was for.
        collection: String,
        /// Why it was refused.
        reason: Refusal,
    },
    /// Live clients did not acknowledge the drain in time.
    #[error("schema cutover timed out after {waited_ms} ms waiting for clients {} to quiesce; the fence stays draining: close or upgrade them and rerun, or abort the cutover (abort_schema_cutover())", list(.holdouts))]
    QuiesceTimeout {
        /// How long the barrier waited.
        waited_ms: u64,
        /// The live clients that never acknowledged.
        holdouts: Vec<String>,
    },
    /// Another coordinator holds the cutover lease.
    #[error("a schema cutover is already run by client `{coordinator}` (fence {state}, lease until {lease_until_ms} ms); wait for it, or rerun after its lease expires")]
    CutoverInProgress {
        /// The coordinator's client id.
        coordinator: String,
        /// The fence state.
        state: String,
        /// When the coordinator's lease expires (clock milliseconds).
        lease_until_ms: u64,
    },
    /// This handle lost the coordinator lease while running the cutover.
    #[error("lost the cutover lease to client `{coordinator}`; the other coordinator continues, nothing more is done here")]
    LeaseLost {
        /// The client now holding the lease (empty when none).
        coordinator: String,
    },
    /// A collection's cutover is pending but this handle has no transform for it.
    #[error("the cutover of `{collection}` is pending but this handle registered no coordinated_cutover() transform for it; open the collection with its coordinated_cutover() strategy and rerun")]
    NoTransform {
        /// The collection.
        collection: String,
    },
    /// A cutover transform failed on one record.
    #[error("cutover transform of `{collection}` failed on record `{}`: {reason}; nothing of its batch was written, fix the transform or the record and rerun", escape_key(.key))]
    Transform {
        /// The collection.
        collection: String,
        /// The record's full key.
        key: Vec<u8>,
        /// The transform's verdict: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// A policy record could not be decoded.
    #[error("corrupted policy record `{}`: {reason}; {}", escape_key(.key), corrupted_remedy(.key))]
    Corrupted {
        /// The record's key.
        key: Vec<u8>,
        /// What is wrong: its reason (in the message) and, as the
        /// [`source`](std::error::Error::source), the decode error behind it.
        #[source]
        reason: crate::pass::RecordError,
    },
    /// The cutover's abort check stopped the run.
    #[error("schema cutover stopped by its abort check; the fence stays {state} (every committed batch is checkpointed): rerun run_schema_cutover() to resume, or abort_schema_cutover()")]
    Aborted {
        /// The fence state left behind.
        state: FenceState,
    },
    /// A compare-and-swap kept losing against concurrent writers.
    #[error("record `{}` kept changing under concurrent writers after {attempts} attempts; retry", escape_key(.key))]
    Contended {
        /// The record's key.
        key: Vec<u8>,
        /// Attempts made.
        attempts: u32,
    },
    /// Invalid options or arguments.
    #[error("invalid policy argument: {reason}")]
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// The bulk pass under the cutover failed.
    #[error("cutover pass over `{collection}` failed; the fence stays migrating, rerun run_schema_cutover() to resume from the checkpoint")]
    Pass {
        /// The collection.
        collection: String,
        /// The pass error.
        #[source]
        source: Box<crate::pass::PassError>,
    },
    /// The store failed.
    #[error("store error in the policy layer at `{}`: {}", escape_key(.key), store_remedy(.source))]
    Store {
        /// The key being read or written.
        key: Vec<u8>,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl PolicyError {
    /// Wraps a store error for `key`.
    pub(crate) fn store(key: &[u8], source: StoreError) -> Self {
        PolicyError::Store {
            key: key.to_vec(),
            source,
        }
    }

    /// A corrupted-record error.
    pub(crate) fn corrupted(key: &[u8], reason: impl Into<crate::pass::RecordError>) -> Self {
        PolicyError::Corrupted {
            key: key.to_vec(),
            reason: reason.into(),
        }
    }

    /// The refusal, when this is a refused write.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            PolicyError::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// True for a write refused by the fence (pending cutover).
    pub fn is_fenced(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_fenced)
    }

    /// True for a write refused because the generation moved (reopen needed).
    pub fn is_migration_required(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_migration_required)
    }

    /// True for a write refused by a strategy (non-additive, locked, user rejection).
    pub fn is_rejection(&self) -> bool {
        self.refusal().is_some_and(Refusal::is_rejection)
    }
}

/// What to do about a store failure, by kind: "retry" only where a retry can succeed.
fn store_remedy(e: &StoreError) -> &'static str {
    match e {
        StoreError::Conflict { .. } => "a concurrent change; nothing was written, retry",
        StoreError::RecordTooLarge { .. } => "a record is over the read budget; raise it",
        StoreError::KeyTooLong { .. }
        | StoreError::DuplicateKey { .. }
        | StoreError::InvalidArgument(_) => {
            "the request was refused as malformed; nothing was written and a retry cannot succeed"
        }
        StoreError::InUse { .. }
        | StoreError::NotFound { .. }
        | StoreError::Damaged { .. }
        | StoreError::CannotOpen { .. } => "the datastore cannot be used; see the cause",
        _ => {
            // An I/O failure of an embedded store's files: advice by its kind (a full disk
            // is not fixed by retrying).
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
            while let Some(c) = cause {
                if let Some(io) = c.downcast_ref::<std::io::Error>() {
                    return strata_store::io_remedy(io);
                }
                cause = c.source();
            }
            "the store failed; see the cause (a transient failure, such as a lost connection, can be retried)"
        }
    }
}

/// What to do about a corrupted policy record, by kind of record.
fn corrupted_remedy(key: &[u8]) -> &'static str {
    if key == crate::keys::FENCE_KEY {
        "restore it from a backup, or reset the fence to normal at a chosen generation (`Fence::dangerous_reset`)"
    } else if key.starts_with(crate::keys::JSONSCHEMA_PREFIX) {
        "restore it from a backup, or delete it so the next declaration registers the current schema as the baseline"
    } else {
        "restore it from a backup, or delete it (a live client rewrites its presence record on its next heartbeat)"
    }
}

/// Why the policy refused a write. Typed, so callers can tell a fence from a rejection
/// from a stale handle without parsing messages; [`Refusal::message`] renders it for a
/// collection (the seed's text for the non-additive and locked cases).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// `additive_only()` refused a non-additive schema change.
    NonAdditive {
        /// New top-level properties.
        added: Vec<String>,
        /// Removed top-level properties.
        removed: Vec<String>,
        /// Changed top-level properties.
        changed: Vec<String>,
    },
    /// `lock_schema()` refused a schema change.
    Locked,
    /// A user strategy refused a schema change.
    Rejected {
        /// The strategy's name.
        strategy: String,
        /// The strategy's reason (lowercase, says what to do).
        reason: String,
    },
    /// A coordinated cutover of the collection is pending: its writes are fenced.
    Fenced {
        /// The fence state when the write was refused.
        state: FenceState,
        /// The schema generation.
        generation: u64,
    },
    /// The schema generation moved since this handle opened: reopen it.
    MigrationRequired {
        /// The generation this handle opened at.
        opened: u64,
        /// The store's current generation.
        current: u64,
    },
    /// A newer build moved the collection's schema and payload version past this build's
    /// (a coordinated cutover, or a change covered by upcast steps): upgrade this
    /// instance.
    BuildBehind {
        /// The payload version the store records for the collection.
        stored: i32,
        /// The payload version this build knows.
        build: i32,
    },
}

impl Refusal {
    /// True for [`Refusal::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Refusal::Fenced { .. })
    }

    /// True for [`Refusal::MigrationRequired`].
    pub fn is_migration_required(&self) -> bool {
        matches!(self, Refusal::MigrationRequired { .. })
    }

    /// True for a strategy's rejection (non-additive, locked, user rejection).
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            Refusal::NonAdditive { .. } | Refusal::Locked | Refusal::Rejected { .. }
        )
    }

    /// The message of this refusal for a write to `collection`.
    pub fn message<'a>(&'a self, collection: &'a str) -> RefusalMessage<'a> {
        RefusalMessage {
            collection,
            refusal: self,
        }
    }
}

/// The rendered message of a [`Refusal`] (see [`Refusal::message`]).
#[derive(Debug, Clone, Copy)]
pub struct RefusalMessage<'a> {
    collection: &'a str,
    refusal: &'a Refusal,
}

impl fmt::Display for RefusalMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.collection;
        match self.refusal {
            Refusal::NonAdditive {
                added,
                removed,
                changed,
            } => write!(
                f,
                "Non-additive schema change to \"{c}\" (added: {}, removed: {}, changed: {}). Register a coordinated_cutover() strategy to migrate, or revert the change.",
                list(added),
                list(removed),
                list(changed)
            ),
            Refusal::Locked => write!(f, "Schema for \"{c}\" is locked; the change was refused."),
            Refusal::Rejected { strategy, reason } => write!(
                f,
                "schema change to `{c}` refused by strategy `{strategy}`: {reason}; revert the change or adjust the strategy"
            ),
            // The stored fence is still normal: it is this build's schema change that
            // waits for a cutover nobody has started (not a running cutover).
            Refusal::Fenced {
                state: FenceState::Normal,
                generation,
            } => write!(
                f,
                "writes to `{c}` are fenced: a schema cutover is pending for this build's change of `{c}` and has not started (the stored fence is still normal, generation {generation}); run the cutover (run_schema_cutover()), or write with a build of the stored schema"
            ),
            Refusal::Fenced { state, generation } => write!(
                f,
                "writes to `{c}` are fenced: a schema cutover is pending (fence {state}, generation {generation}); run the cutover (run_schema_cutover()) or abort it, then write again"
            ),
            Refusal::BuildBehind { stored, build } => write!(
                f,
                "this build is older than the store: a newer build moved `{c}` to payload version {stored} with a new schema, and this build knows payload versions up to {build} (write refused); upgrade this instance to the newer build"
            ),
            Refusal::MigrationRequired { opened, current } => write!(
                f,
                "migration required: the schema generation of this store moved from {opened} to {current} since this handle opened (write to `{c}` refused); reopen the database to pick up the new schema"
            ),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    #[test]
    fn an_io_failure_under_a_store_error_gets_advice_by_its_kind() {
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device");
        let e = PolicyError::store(b"__nx/fence", StoreError::backend("redb", full));
        let text = e.to_string();
        assert!(text.contains("free space"), "{text}");
        assert!(!text.contains("retried"), "{text}");
        let lost = PolicyError::store(
            b"__nx/fence",
            StoreError::backend("postgres", std::fmt::Error),
        );
        assert!(lost.to_string().contains("can be retried"), "{lost}");
    }

    use super::*;
    use crate::collection::CollectionError;

    /// A store error in the policy layer says "retry" only when a retry can succeed.
    #[test]
    fn store_errors_say_retry_only_when_a_retry_can_help() {
        let too_long = PolicyError::store(
            b"__nx/fence",
            StoreError::KeyTooLong {
                key: vec![b'k'; 3000],
                len: 3000,
                limit: 2048,
            },
        );
        let msg = too_long.to_string();
        assert!(msg.contains("a retry cannot succeed"), "{msg}");
        assert!(!msg.ends_with("retry"), "{msg}");
        let damaged = PolicyError::store(
            b"__nx/fence",
            StoreError::Damaged {
                path: "/x".into(),
                reason: "cut".into(),
            },
        );
        assert!(!damaged.to_string().contains("retry"), "{damaged}");
        let conflict = PolicyError::store(
            b"__nx/fence",
            StoreError::InvalidArgument("zero limit".into()),
        );
        assert!(
            conflict.to_string().contains("cannot succeed"),
            "{conflict}"
        );
    }

    /// Every refusal, as a collection write error and as a policy error, displays its
    /// reason (not only "refused"), names the collection, no CLI flag, and has no source
    /// to print twice.
    #[test]
    fn every_refusal_displays_its_reason() {
        let cases = [
            (
                Refusal::NonAdditive {
                    added: vec![],
                    removed: vec!["amount".into()],
                    changed: vec![],
                },
                "Non-additive schema change to \"orders\" (added: [], removed: [amount], changed: []). Register a coordinated_cutover() strategy to migrate, or revert the change.",
            ),
            (
                Refusal::Locked,
                "Schema for \"orders\" is locked; the change was refused.",
            ),
            (
                Refusal::Rejected {
                    strategy: "no-drops".into(),
                    reason: "drops are forbidden".into(),
                },
                "refused by strategy `no-drops`: drops are forbidden",
            ),
            (
                Refusal::Fenced {
                    state: FenceState::Draining,
                    generation: 4,
                },
                "writes to `orders` are fenced: a schema cutover is pending (fence draining, generation 4)",
            ),
            (
                Refusal::Fenced {
                    state: FenceState::Normal,
                    generation: 0,
                },
                "has not started (the stored fence is still normal, generation 0)",
            ),
            (
                Refusal::MigrationRequired {
                    opened: 1,
                    current: 2,
                },
                "generation of this store moved from 1 to 2",
            ),
            (
                Refusal::BuildBehind {
                    stored: 3,
                    build: 2,
                },
                "moved `orders` to payload version 3 with a new schema, and this build knows payload versions up to 2 (write refused); upgrade this instance",
            ),
        ];
        for (reason, text) in cases {
            let c = CollectionError::Refused {
                collection: "orders".into(),
                reason: reason.clone(),
            };
            let p = PolicyError::Refused {
                collection: "orders".into(),
                reason: reason.clone(),
            };
            for msg in [c.to_string(), p.to_string()] {
                assert!(msg.contains(text), "{msg}");
                assert!(msg.contains("orders"), "{msg}");
                assert!(!msg.contains("strata "), "{msg}");
                assert!(!msg.contains("--"), "{msg}");
            }
            assert!(std::error::Error::source(&c).is_none());
            assert_eq!(c.refusal(), Some(&reason));
            assert_eq!(p.refusal(), Some(&reason));
            assert_eq!(c.is_fenced(), reason.is_fenced());
            assert_eq!(p.is_migration_required(), reason.is_migration_required());
            assert_eq!(c.is_rejection(), reason.is_rejection());
        }
    }
}
