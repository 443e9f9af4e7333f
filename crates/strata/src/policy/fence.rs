//! The per-store fence record at `__nx/fence`: the schema generation, the cutover state,
//! the collections whose cutover is pending, and the coordinator holding the cutover lease.
//!
//! ```text
//! key:   __nx/fence
//! value: canonical JSON (keys sorted, no whitespace), for example
//!        {"coordinator":null,"format":1,"generation":0,"lease_until_ms":0,
//!         "pending":[{"collection":"invoices","target_hash":"…"}],"state":"normal"}
//! ```
//!
//! An absent record reads as generation 0, state normal, nothing pending. Every
//! transition is a compare-and-swap on the exact bytes read ([`Fence::update`]).

use super::state::FenceState;
use super::PolicyError;
use serde::{Deserialize, Serialize};
use strata_store::{Batch, KvRead, KvWrite};

/// Key of the fence record.
pub const FENCE_KEY: &[u8] = crate::keys::FENCE_KEY;
/// Format version of the fence record.
pub const FENCE_FORMAT: u32 = 1;
/// How many times a compare-and-swap is retried against concurrent writers.
pub(crate) const CAS_ATTEMPTS: u32 = 64;

/// One collection whose coordinated cutover is pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCutover {
    /// The collection.
    pub collection: String,
    /// Hash of the schema the cutover migrates to (becomes the baseline when it completes).
    pub target_hash: String,
}

/// The decoded fence record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FenceDoc {
    /// Client id of the coordinator running the cutover (`None` when normal).
    pub coordinator: Option<String>,
    /// Record format ([`FENCE_FORMAT`]).
    pub format: u32,
    /// The store's schema generation (bumped once per completed cutover).
    pub generation: u64,
    /// Clock milliseconds until which the coordinator's lease holds.
    pub lease_until_ms: u64,
    /// Collections whose cutover is pending, sorted by name.
    pub pending: Vec<PendingCutover>,
    /// The cutover state.
    pub state: FenceState,
}

impl Default for FenceDoc {
    fn default() -> Self {
        FenceDoc {
            coordinator: None,
            format: FENCE_FORMAT,
            generation: 0,
            lease_until_ms: 0,
            pending: Vec::new(),
            state: FenceState::Normal,
        }
    }
}

impl FenceDoc {
    /// The record bytes (canonical JSON: fields in sorted order, no whitespace).
    pub fn encode(&self) -> Vec<u8> {
        // Field order of the struct is alphabetical, so serde's output is canonical.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes record bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, PolicyError> {
        let doc: FenceDoc = serde_json::from_slice(bytes).map_err(|e| {
            PolicyError::corrupted(
                FENCE_KEY,
                crate::pass::RecordError::with_cause(format!("invalid fence JSON: {e}"), e),
            )
        })?;
        if doc.format != FENCE_FORMAT {
            return Err(PolicyError::corrupted(
                FENCE_KEY,
                format!(
                    "unsupported fence format {} (this build reads {FENCE_FORMAT})",
                    doc.format
                ),
            ));
        }
        Ok(doc)
    }

    /// True when a cutover of `collection` is pending.
    pub fn is_pending(&self, collection: &str) -> bool {
        self.pending.iter().any(|p| p.collection == collection)
    }

    /// The pending entry of `collection`.
    pub fn pending_for(&self, collection: &str) -> Option<&PendingCutover> {
        self.pending.iter().find(|p| p.collection == collection)
    }
}

/// Reads and transitions the fence record of one store.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fence;

impl Fence {
    /// Reads the fence (uncached): the decoded record and its raw bytes (`None` when the
    /// record is absent, which reads as the default fence).
    pub fn read_raw<S: KvRead + ?Sized>(
        store: &S,
    ) -> Result<(FenceDoc, Option<Vec<u8>>), PolicyError> {
        let raw = store
            .get(FENCE_KEY)
            .map_err(|e| PolicyError::store(FENCE_KEY, e))?;
        let doc = match &raw {
            None => FenceDoc::default(),
            Some(bytes) => FenceDoc::decode(bytes)?,
        };
        Ok((doc, raw))
    }

    /// Reads the fence (uncached).
    pub fn read<S: KvRead + ?Sized>(store: &S) -> Result<FenceDoc, PolicyError> {
        Ok(Self::read_raw(store)?.0)
    }

    /// Read-modify-write by compare-and-swap: `f` gets the current fence and returns the
    /// new one (or `None` to leave it unchanged, or an error to stop). Retries when a
    /// concurrent writer changed the record in between. Returns the fence as written (or
    /// as read, when unchanged).
    pub fn update<S, F>(store: &S, mut f: F) -> Result<FenceDoc, PolicyError>
    where
        S: KvRead + KvWrite + ?Sized,
        F: FnMut(&FenceDoc) -> Result<Option<FenceDoc>, PolicyError>,
    {
        for _ in 0..CAS_ATTEMPTS {
            let (current, raw) = Self::read_raw(store)?;
            let Some(next) = f(&current)? else {
                return Ok(current);
            };
            let batch = Batch::new()
                .require(FENCE_KEY.to_vec(), raw)
                .set(FENCE_KEY.to_vec(), next.encode());
            match store.apply(batch) {
                Ok(()) => return Ok(next),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(PolicyError::store(FENCE_KEY, e)),
            }
        }
        Err(PolicyError::Contended {
            key: FENCE_KEY.to_vec(),
            attempts: CAS_ATTEMPTS,
        })
    }

    /// Adds a pending cutover for `collection` (idempotent; a different target replaces
    /// the previous one while no cutover is running).
    pub fn add_pending<S: KvRead + KvWrite + ?Sized>(
        store: &S,
        collection: &str,
        target_hash: &str,
    ) -> Result<FenceDoc, PolicyError> {
        Self::update(store, |cur| {
            if let Some(p) = cur.pending_for(collection) {
                if p.target_hash == target_hash || cur.state != FenceState::Normal {
                    return Ok(None);
                }
            }
            let mut next = cur.clone();
            next.pending.retain(|p| p.collection != collection);
            next.pending.push(PendingCutover {
                collection: collection.to_string(),
                target_hash: target_hash.to_string(),
            });
            next.pending.sort_by(|a, b| a.collection.cmp(&b.collection));
            Ok(Some(next))
        })
    }

    /// Resets the fence to normal without bumping the generation: clears the coordinator
    /// and its lease. Pending cutovers stay pending (their collections stay fenced, and a
    /// later run resumes from their checkpoints).
    pub fn abort<S: KvRead + KvWrite + ?Sized>(store: &S) -> Result<FenceDoc, PolicyError> {
        Self::update(store, |cur| {
            if cur.state == FenceState::Normal && cur.coordinator.is_none() {
                return Ok(None);
            }
            let mut next = cur.clone();
            next.state = FenceState::Normal;
            next.coordinator = None;
            next.lease_until_ms = 0;
            Ok(Some(next))
        })
    }

    /// Rewrites a corrupted (undecodable) fence as a normal fence at `generation`.
    /// Dangerous: only for recovery from a damaged record.
    pub fn dangerous_reset<S: KvWrite + ?Sized>(
        store: &S,
        generation: u64,
    ) -> Result<FenceDoc, PolicyError> {
        let doc = FenceDoc {
            generation,
            ..FenceDoc::default()
        };
        store
            .apply(Batch::new().set(FENCE_KEY.to_vec(), doc.encode()))
            .map_err(|e| PolicyError::store(FENCE_KEY, e))?;
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_store::{MemoryStore, Store};

    #[test]
    fn fence_bytes_are_canonical_json() {
        let doc = FenceDoc {
            coordinator: Some("c1".into()),
            generation: 3,
            lease_until_ms: 99,
            pending: vec![PendingCutover {
                collection: "invoices".into(),
                target_hash: "ab".into(),
            }],
            state: FenceState::Draining,
            ..FenceDoc::default()
        };
        assert_eq!(
            doc.encode(),
            br#"{"coordinator":"c1","format":1,"generation":3,"lease_until_ms":99,"pending":[{"collection":"invoices","target_hash":"ab"}],"state":"draining"}"#.to_vec()
        );
        assert_eq!(FenceDoc::decode(&doc.encode()).unwrap(), doc);
    }

    #[test]
    fn corrupt_and_future_fences_are_refused() {
        assert!(matches!(
            FenceDoc::decode(b"{nope"),
            Err(PolicyError::Corrupted { .. })
        ));
        let mut v: serde_json::Value =
            serde_json::from_slice(&FenceDoc::default().encode()).unwrap();
        v["format"] = 2.into();
        let err = FenceDoc::decode(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("unsupported fence format 2"),
            "{err}"
        );
    }

    #[test]
    fn absent_fence_reads_as_normal_generation_zero() {
        let store = Store::new(MemoryStore::new());
        assert_eq!(Fence::read(&store).unwrap(), FenceDoc::default());
    }

    #[test]
    fn add_pending_is_idempotent_and_sorted() {
        let store = Store::new(MemoryStore::new());
        Fence::add_pending(&store, "b", "h1").unwrap();
        Fence::add_pending(&store, "a", "h2").unwrap();
        Fence::add_pending(&store, "b", "h1").unwrap();
        let f = Fence::read(&store).unwrap();
        let names: Vec<_> = f.pending.iter().map(|p| p.collection.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }
}
