//! The sweep marker at `__nx/sweep/<collection>` ([`SweepMarker`]) and the counters it
//! carries ([`SweepCounters`]).

use crate::collection::CollectionError;
use crate::pass::RowCounters;
use serde::{Deserialize, Serialize};

/// Row counters of a sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepCounters {
    /// Rows read.
    pub scanned: u64,
    /// Stale rows rewritten at the current version.
    pub rewritten: u64,
    /// Rows a concurrent write beat the sweep to: changed or deleted between the sweep's
    /// read and its write, and left as that write made them (each counted once).
    pub conflicted: u64,
    /// Rows written by a newer build, left alone.
    pub skipped_ahead: u64,
    /// Rows that could not be read (invalid version, failing step, no bind); they block
    /// completion.
    pub failed: u64,
}

impl SweepCounters {
    /// The sweep's view of the pass's per-row counters.
    pub(super) fn from_rows(c: &RowCounters) -> Self {
        SweepCounters {
            scanned: c.scanned,
            rewritten: c.rewritten,
            conflicted: c.conflicted,
            skipped_ahead: c.skipped_ahead,
            failed: c.failed,
        }
    }

    pub(super) fn add(&mut self, o: &SweepCounters) {
        self.scanned += o.scanned;
        self.rewritten += o.rewritten;
        self.conflicted += o.conflicted;
        self.skipped_ahead += o.skipped_ahead;
        self.failed += o.failed;
    }
}

/// The sweep marker stored (as JSON) at `__nx/sweep/<collection>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepMarker {
    /// Marker format (1).
    pub format: u8,
    /// The highest target version a sweep completed (0: none).
    pub completed: i32,
    /// The target version of the sweep in progress, if any.
    pub in_progress: Option<i32>,
    /// The runner holding (or last holding) the in-progress lease.
    pub runner: Option<String>,
    /// When the lease expires, in clock milliseconds (0: released).
    pub lease_expires_ms: u64,
    /// The last processed full key of the in-progress sweep, hex-encoded.
    pub cursor_hex: Option<String>,
    /// Counters of the in-progress sweep (cumulative over its resumed runs), or of the
    /// last finished one.
    pub counters: SweepCounters,
    /// The fencing token of the cross-process lease the runner claimed the marker under
    /// (absent on stores one process opens at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

impl SweepMarker {
    /// The JSON bytes stored.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes stored bytes.
    pub fn decode(collection: &str, bytes: &[u8]) -> Result<Self, CollectionError> {
        let m: SweepMarker =
            serde_json::from_slice(bytes).map_err(|e| CollectionError::CorruptMarker {
                collection: collection.to_string(),
                reason: crate::pass::RecordError::from_error(e),
            })?;
        if m.format != 1 {
            return Err(CollectionError::CorruptMarker {
                collection: collection.to_string(),
                reason: format!("unknown marker format {}", m.format).into(),
            });
        }
        if let Some(c) = &m.cursor_hex {
            if strata_store::from_hex(c).is_none() {
                return Err(CollectionError::CorruptMarker {
                    collection: collection.to_string(),
                    reason: "the cursor is not valid hex".into(),
                });
            }
        }
        Ok(m)
    }

    /// The cursor (last processed full key) of the in-progress sweep.
    pub fn cursor(&self) -> Option<Vec<u8>> {
        self.cursor_hex.as_deref().and_then(strata_store::from_hex)
    }

    /// True when another runner holds a lease that has not expired at `now_ms`.
    pub fn held_by_other(&self, runner: &str, now_ms: u64) -> bool {
        self.in_progress.is_some()
            && self.lease_expires_ms > now_ms
            && self.runner.as_deref() != Some(runner)
    }
}
