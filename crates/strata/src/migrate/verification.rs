//! The read-only full certification scan (`strata verify`): every record of every table
//! decoded by the bulk pass run read-only.

use super::MigrateError;
use crate::catalog::Catalog;
use crate::pass::{Pass, PassError, PassLimits, Progress, RawCheckpoint, RecordError, RecordRef};
use serde::Serialize;
use std::time::Instant;
use strata_store::{KvRead, Mutation};

/// Per-table result of [`verify`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifiedTable {
    /// The table.
    pub table: String,
    /// Records that decoded.
    pub records: u64,
    /// Bytes scanned.
    pub bytes: u64,
}

/// What a successful [`verify`] found: every table with its decoded record and byte counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreVerification {
    /// Every table of the catalog, in order.
    pub tables: Vec<VerifiedTable>,
    /// Wall time.
    pub seconds: f64,
}

/// The read-only full certification scan (`strata verify`): decodes every record of every
/// table of `catalog` (current tables too) with the bulk pass run read-only
/// ([`Pass::run_read_only`], the same loop as a dry run) in pages bounded by `limits`, and
/// stops at the first record that does not decode with [`MigrateError::VerifyFailed`]
/// (naming table, key and reason). Writes nothing, takes no lease.
/// A record larger than the page budget is read on its own (a read-only pass commits
/// nothing, so verification never refuses a record for its size).
pub fn verify<S: KvRead + ?Sized>(
    store: &S,
    catalog: &Catalog,
    limits: PassLimits,
    mut on_progress: impl FnMut(&Progress<'_>),
) -> Result<StoreVerification, MigrateError> {
    let started = Instant::now();
    let mut out = Vec::with_capacity(catalog.tables().len());
    for t in catalog.tables() {
        // Never written: a read-only pass reads its checkpoint key once and finds nothing.
        let codec = RawCheckpoint::new([b"__nx/verify/", t.name().as_bytes()].concat());
        let processor = |r: &RecordRef<'_>, _: &mut Vec<Mutation>| -> Result<(), RecordError> {
            t.decode(r.key, r.value)
        };
        let report = Pass::new(t.name(), t.prefix().to_vec(), &codec)
            .limits(limits)
            .on_progress(|p: &Progress<'_>| on_progress(p))
            .run_read_only(store, processor)
            .map_err(|e| match e {
                PassError::InvalidRecord {
                    table, key, reason, ..
                } => MigrateError::VerifyFailed { table, key, reason },
                PassError::Store { source, .. } => MigrateError::VerifyStore {
                    table: t.name().to_string(),
                    source,
                },
                other => MigrateError::Pass(other),
            })?;
        out.push(VerifiedTable {
            table: t.name().to_string(),
            records: report.records,
            bytes: report.bytes,
        });
    }
    Ok(StoreVerification {
        tables: out,
        seconds: started.elapsed().as_secs_f64(),
    })
}
