//! The schema registry's history: every baseline a collection ever had, numbered from 1,
//! written in the same batch as the baseline change.
//!
//! ```text
//! key:   __nx/jsonschema-log/<collection>/<version u32 BE>
//! value: the baseline record bytes of that version (see `baseline`)
//! ```
//!
//! A store written before the history existed has a baseline and no history: its first
//! change records the previous baseline as version 1 and the new one as version 2.

use super::baseline::{baseline_key, Baseline};
use super::PolicyError;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits};

/// Prefix of every history record.
pub const HISTORY_PREFIX: &[u8] = crate::keys::HISTORY_PREFIX;

/// The history prefix of `collection`: `__nx/jsonschema-log/<collection>/`.
pub fn history_prefix(collection: &str) -> Vec<u8> {
    [HISTORY_PREFIX, collection.as_bytes(), b"/"].concat()
}

/// The key of version `version` of `collection`'s schema.
pub fn history_key(collection: &str, version: u32) -> Vec<u8> {
    [history_prefix(collection), version.to_be_bytes().to_vec()].concat()
}

/// A baseline change and its history entry are one batch, so the method lives with the
/// history (the baseline record's own code does not depend on it).
impl Baseline {
    /// Writes this baseline for `collection` if the record still holds `expected`
    /// (`None`: absent), and records it as the next numbered version of the collection's
    /// schema history in the same batch. Returns false when a concurrent writer changed
    /// it first (then nothing is written).
    pub fn compare_and_swap<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        collection: &str,
        expected: Option<Vec<u8>>,
    ) -> Result<bool, PolicyError> {
        let key = baseline_key(collection);
        let bytes = self.encode();
        let batch = Batch::new()
            .require(key.clone(), expected.clone())
            .set(key.clone(), bytes.clone());
        let batch = append(store, batch, collection, expected.as_deref(), bytes)?;
        match store.apply(batch) {
            Ok(()) => Ok(true),
            Err(e) if e.is_conflict() => Ok(false),
            Err(e) => Err(PolicyError::store(&key, e)),
        }
    }
}

/// One numbered version of a collection's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaVersion {
    /// The version number (1 = the first recorded baseline).
    pub version: u32,
    /// The baseline recorded as this version.
    pub baseline: Baseline,
}

/// The raw history of `collection`: `(version, record bytes)` in version order.
fn read_raw<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Vec<(u32, Vec<u8>)>, PolicyError> {
    let prefix = history_prefix(collection);
    let limits = ScanLimits::new(256, 16 << 20).map_err(|e| PolicyError::store(&prefix, e))?;
    let mut out = Vec::new();
    for r in strata_store::Pages::new(store, &prefix, limits).records() {
        let r = r.map_err(|e| PolicyError::store(&prefix, e))?;
        let suffix: [u8; 4] = r.key[prefix.len()..].try_into().map_err(|_| {
            PolicyError::corrupted(&r.key, "a schema history key must end in a 4-byte version")
        })?;
        out.push((u32::from_be_bytes(suffix), r.value));
    }
    Ok(out)
}

/// Every recorded version of `collection`'s schema, oldest first (empty: no history).
pub fn read_history<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Vec<SchemaVersion>, PolicyError> {
    read_raw(store, collection)?
        .into_iter()
        .map(|(version, bytes)| {
            Baseline::decode(collection, &bytes).map(|baseline| SchemaVersion { version, baseline })
        })
        .collect()
}

/// Adds to `batch` the history record(s) of a baseline change of `collection` from
/// `previous` (the record bytes replaced, `None`: first baseline) to `new`.
pub(crate) fn append<S: KvRead + ?Sized>(
    store: &S,
    mut batch: Batch,
    collection: &str,
    previous: Option<&[u8]>,
    new: Vec<u8>,
) -> Result<Batch, PolicyError> {
    let history = read_raw(store, collection)?;
    let mut next = match history.last() {
        Some((v, _)) => v.saturating_add(1),
        None => 1,
    };
    if history.is_empty() {
        if let Some(prev) = previous {
            let key = history_key(collection, next);
            batch = batch.require_absent(key.clone()).set(key, prev.to_vec());
            next += 1;
        }
    }
    let key = history_key(collection, next);
    Ok(batch.require_absent(key.clone()).set(key, new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strata_store::{KvWrite, MemoryStore};

    #[test]
    fn every_baseline_change_is_numbered_and_a_pre_history_baseline_becomes_version_1() {
        let store = MemoryStore::new();
        let a = Baseline::new(&json!({"type": "object"}), Some(1));
        // A baseline written before the history existed.
        store
            .apply(Batch::new().set(super::super::baseline_key("c"), a.encode()))
            .unwrap();
        assert!(read_history(&store, "c").unwrap().is_empty());
        let b = Baseline::new(&json!({"type": "object", "properties": {"x": {}}}), Some(2));
        assert!(b.compare_and_swap(&store, "c", Some(a.encode())).unwrap());
        let c = Baseline::new(&json!({"type": "object", "properties": {"y": {}}}), Some(3));
        assert!(c.compare_and_swap(&store, "c", Some(b.encode())).unwrap());
        let h = read_history(&store, "c").unwrap();
        let got: Vec<(u32, String)> = h
            .iter()
            .map(|v| (v.version, v.baseline.hash.clone()))
            .collect();
        assert_eq!(got, vec![(1, a.hash.clone()), (2, b.hash), (3, c.hash)]);
        // A lost compare-and-swap records nothing.
        assert!(!a.compare_and_swap(&store, "c", None).unwrap());
        assert_eq!(read_history(&store, "c").unwrap().len(), 3);
        assert!(read_history(&store, "other").unwrap().is_empty());
    }
}
