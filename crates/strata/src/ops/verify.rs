//! Checking the sealed records of a store: with the key every sealed record is
//! authenticated (opened); without it only its clear envelope is checked (the header
//! decodes, the body is long enough to hold a key id, a nonce and a tag) — and the report
//! says which of the two was done. Either way a record stored in clear in a sealed
//! collection (one carrying its sealed mark or the database's, or holding a sealed
//! record) is a failure.

use crate::payload::envelope::ENVELOPE_HEADER_LEN;
use crate::seal::{mark, open_document, peek, SealError, Sealer, SEAL_OVERHEAD};
use serde::Serialize;
use strata_store::{KvRead, Pages, ScanLimits, Store};

/// How many failures a report lists (the counts are always complete).
pub const MAX_LISTED_FAILURES: usize = 100;

/// Per collection: what [`verify_sealed`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SealedCollection {
    /// The collection.
    pub collection: String,
    /// Records with a sealed body (envelope format 2).
    pub sealed: u64,
    /// Records in clear (envelope format 1, or no envelope: `strata verify` certifies those).
    /// In a sealed collection (one carrying its sealed mark or the database's, or holding
    /// a sealed record) each of them also counts in `failed`.
    pub clear: u64,
    /// Sealed records that authenticated (0 without the key).
    pub authenticated: u64,
    /// Sealed records that failed (authentication with the key; the envelope check
    /// without), plus the records stored in clear in a sealed collection.
    pub failed: u64,
}

/// One sealed record that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SealedFailure {
    /// The collection.
    pub collection: String,
    /// The record's store key, escaped.
    pub key: String,
    /// Why.
    pub reason: String,
}

/// What [`verify_sealed`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SealedReport {
    /// True when the records were authenticated with the key; false: envelopes only.
    pub authenticated_with_key: bool,
    /// Per collection, in catalog order.
    pub collections: Vec<SealedCollection>,
    /// The first [`MAX_LISTED_FAILURES`] failures.
    pub failures: Vec<SealedFailure>,
}

impl SealedReport {
    /// Sealed records in the store.
    pub fn sealed(&self) -> u64 {
        self.collections.iter().map(|c| c.sealed).sum()
    }
    /// Sealed records that authenticated.
    pub fn authenticated(&self) -> u64 {
        self.collections.iter().map(|c| c.authenticated).sum()
    }
    /// Sealed records that failed.
    pub fn failed(&self) -> u64 {
        self.collections.iter().map(|c| c.failed).sum()
    }
}

/// Checks every record of every collection of `catalog`: with `sealer`, every sealed
/// record is authenticated; without, its envelope only. Read-only.
pub fn verify_sealed(
    store: &Store,
    catalog: &crate::catalog::Catalog,
    sealer: Option<&Sealer>,
) -> Result<SealedReport, SealError> {
    let mut report = SealedReport {
        authenticated_with_key: sealer.is_some(),
        ..SealedReport::default()
    };
    let limits = ScanLimits::new(512, 64 << 20)?;
    let db_marked = mark::database_is_marked(store)?;
    for def in catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= crate::collection::layout::FIRST_COLLECTION_ID)
    {
        let mut row = SealedCollection {
            collection: def.name().to_string(),
            ..SealedCollection::default()
        };
        let prefix = crate::collection::layout::doc_prefix(def.name());
        // A sealed collection (marked, or holding a sealed record) is sealed as a whole:
        // a record in clear in it is a failure, with or without the key.
        let marked = db_marked || mark::collection_is_marked(store, def.name())?;
        let mut clear_keys = Vec::new();
        for rec in Pages::new(store, &prefix, limits).records() {
            let rec = rec?;
            if !matches!(peek(&rec.value), Some((_, true))) {
                row.clear += 1;
                if clear_keys.len() < MAX_LISTED_FAILURES {
                    clear_keys.push(rec.key);
                }
                continue;
            }
            row.sealed += 1;
            let outcome = match sealer {
                Some(s) => open_document(s, &rec.key, def.id(), &rec.value)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None if rec.value.len() < ENVELOPE_HEADER_LEN + SEAL_OVERHEAD => {
                    Err("sealed body is shorter than its key id, nonce and tag".to_string())
                }
                None => Ok(()),
            };
            match outcome {
                Ok(()) if sealer.is_some() => row.authenticated += 1,
                Ok(()) => {}
                Err(reason) => {
                    row.failed += 1;
                    if report.failures.len() < MAX_LISTED_FAILURES {
                        report.failures.push(SealedFailure {
                            collection: def.name().to_string(),
                            key: strata_store::escape_key(&rec.key),
                            reason,
                        });
                    }
                }
            }
        }
        if row.clear > 0 && (marked || row.sealed > 0) {
            row.failed += row.clear;
            for key in clear_keys {
                if report.failures.len() < MAX_LISTED_FAILURES {
                    report.failures.push(SealedFailure {
                        collection: def.name().to_string(),
                        key: strata_store::escape_key(&key),
                        reason: format!(
                            "record `{}` of sealed collection `{}` is stored in clear: it was written behind strata's back or by a build that did not seal it, and a sealed handle refuses to read it; delete it or restore it from a backup",
                            strata_store::escape_key(&key),
                            def.name()
                        ),
                    });
                }
            }
        }
        report.collections.push(row);
    }
    Ok(report)
}

/// True when the store holds a database keyring.
pub fn has_keyring<S: KvRead + ?Sized>(store: &S) -> Result<bool, SealError> {
    Ok(store.get(crate::seal::DATABASE_KEYRING_KEY)?.is_some())
}
