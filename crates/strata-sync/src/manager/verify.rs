//! [`SyncManager::verify`](crate::SyncManager::verify): the read-only consistency check of a sync store.

use super::{scan_all, with_key, Sequences, SyncOptions, SEQUENCES_KEY};
use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use std::collections::HashSet;
use strata::numax::wire::{self};
use strata_store::{KvRead, Store};

/// The outcome of [`SyncManager::verify`](crate::SyncManager::verify): every inconsistency found (empty when sound).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsistencyReport {
    /// CRDT keys checked.
    pub keys: usize,
    /// Op-log records checked.
    pub ops: usize,
    /// One line per problem.
    pub problems: Vec<String>,
}

impl ConsistencyReport {
    /// True when no problem was found.
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(super) fn verify_store(
    store: &Store,
    options: &SyncOptions,
) -> Result<ConsistencyReport, SyncError> {
    let limits = options.limits()?;
    let mut report = ConsistencyReport::default();
    for family in Family::ALL {
        let mut keys = HashSet::new();
        scan_all(store, family.state_prefix(), limits, |suffix, value| {
            report.keys += 1;
            let key = String::from_utf8_lossy(suffix).into_owned();
            let expected = CrdtState::decode(family, value)
                .map_err(|e| with_key(e, suffix))
                .and_then(|s| s.encode_value());
            match expected {
                Err(e) => report.problems.push(e.to_string()),
                Ok(expected) => {
                    let found = store.get(&wire::key(family.materialized_prefix(), &key))?;
                    if found.as_deref() != Some(expected.as_slice()) {
                        report.problems.push(format!(
                            "materialized `{}{key}` does not match its state",
                            family.materialized_prefix()
                        ));
                    }
                }
            }
            keys.insert(key);
            Ok(())
        })?;
        let early_layout_ok = matches!(family, Family::GCounter | Family::PNCounter);
        scan_all(store, family.materialized_prefix(), limits, |suffix, _| {
            let key = String::from_utf8_lossy(suffix).into_owned();
            if !keys.contains(&key) && !early_layout_ok {
                report.problems.push(format!(
                    "materialized `{}{key}` has no state record",
                    family.materialized_prefix()
                ));
            }
            Ok(())
        })?;
    }
    let mut log_seqs = HashSet::new();
    let mut max_log = None;
    scan_all(store, wire::OP_LOG_PREFIX, limits, |suffix, value| {
        report.ops += 1;
        let id = String::from_utf8_lossy(suffix).into_owned();
        match wire::decode_op_log_record(&id, value) {
            Ok(entry) => {
                max_log = max_log.max(Some(entry.sequence));
                if !log_seqs.insert(entry.sequence) {
                    report
                        .problems
                        .push(format!("op-log sequence {} is used twice", entry.sequence));
                }
            }
            Err(e) => report.problems.push(e.with_key(suffix).to_string()),
        }
        Ok(())
    })?;
    let mut seen_seqs = HashSet::new();
    let mut max_seen = None;
    scan_all(store, wire::SEEN_OP_PREFIX, limits, |suffix, value| {
        match wire::decode_seen_op(value) {
            Ok(seq) => {
                max_seen = max_seen.max(Some(seq));
                if !seen_seqs.insert(seq) {
                    report
                        .problems
                        .push(format!("seen-ops sequence {seq} is used twice"));
                }
            }
            Err(e) => report.problems.push(e.with_key(suffix).to_string()),
        }
        Ok(())
    })?;
    if let Some(bytes) = store.get(SEQUENCES_KEY.as_bytes())? {
        match Sequences::decode(&bytes) {
            Err(e) => report.problems.push(e.to_string()),
            Ok(s) => {
                if max_seen.is_some_and(|m| m >= s.next_seen)
                    || max_log.is_some_and(|m| m >= s.next_log)
                {
                    report.problems.push(format!(
                        "`{SEQUENCES_KEY}` (next seen {}, next log {}) is not above every retained sequence",
                        s.next_seen, s.next_log
                    ));
                }
            }
        }
    }
    Ok(report)
}
