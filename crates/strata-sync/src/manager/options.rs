//! [`SyncOptions`]: scan limits, batch size, retention limits, node id.

use super::{DEFAULT_NODE_ID, DEFAULT_OP_LOG_LIMIT, DEFAULT_SEEN_OPS_LIMIT, MAX_RECORD_BYTES};
use crate::SyncError;
use strata_store::ScanLimits;

/// Tuning of a [`SyncManager`](crate::SyncManager).
///
/// ```
/// let opts = strata_sync::SyncOptions::default()
///     .scan_limits(256, 1 << 20)
///     .max_ops_per_batch(64)
///     .op_log_limit(1_000)
///     .seen_ops_limit(0); // raised to the minimum, 1
/// assert_eq!(opts.scan_records(), 256);
/// assert_eq!((opts.op_log_limit_value(), opts.seen_ops_limit_value()), (1_000, 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOptions {
    pub(super) scan_records: usize,
    pub(super) scan_bytes: usize,
    pub(super) max_ops_per_batch: usize,
    pub(super) flush_on_apply: bool,
    pub(super) op_log_limit: usize,
    pub(super) seen_ops_limit: usize,
    pub(super) node_id: String,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            scan_records: 512,
            scan_bytes: 4 << 20,
            max_ops_per_batch: 512,
            flush_on_apply: false,
            op_log_limit: DEFAULT_OP_LOG_LIMIT,
            seen_ops_limit: DEFAULT_SEEN_OPS_LIMIT,
            node_id: DEFAULT_NODE_ID.to_string(),
        }
    }
}

impl SyncOptions {
    /// Page bounds of every scan (hydration, op-log reads, verification). Zero is raised
    /// to one.
    pub fn scan_limits(mut self, max_records: usize, max_bytes: usize) -> Self {
        self.scan_records = max_records.max(1);
        self.scan_bytes = max_bytes.max(1);
        self
    }

    /// At most this many ops go into one atomic store batch of
    /// [`SyncManager::apply_batch`](crate::SyncManager::apply_batch) (at least one).
    pub fn max_ops_per_batch(mut self, n: usize) -> Self {
        self.max_ops_per_batch = n.max(1);
        self
    }

    /// When true, every apply flushes the store before returning (each applied op is then
    /// on disk when the call returns). Default false: sled flushes in the background, and
    /// a crash may lose the last few batches — each one entirely.
    pub fn flush_on_apply(mut self, yes: bool) -> Self {
        self.flush_on_apply = yes;
        self
    }

    /// Numax's `op_log_limit` (default [`DEFAULT_OP_LOG_LIMIT`], at least 1): the batch
    /// that gives an op log sequence `n` also deletes every op-log record whose sequence
    /// is below `n + 1 - limit`.
    pub fn op_log_limit(mut self, n: usize) -> Self {
        self.op_log_limit = n.max(1);
        self
    }

    /// Numax's `seen_ops_limit` (default [`DEFAULT_SEEN_OPS_LIMIT`], at least 1): as
    /// [`SyncOptions::op_log_limit`], for seen-op records. An op whose seen-op record was
    /// evicted is applied again if it is delivered again (as in Numax).
    pub fn seen_ops_limit(mut self, n: usize) -> Self {
        self.seen_ops_limit = n.max(1);
        self
    }

    /// The local node id (default [`DEFAULT_NODE_ID`]): a counter stored in the early
    /// layout (materialized value, no state record) is this node's contribution.
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node_id = id.into();
        self
    }

    /// The scan record limit.
    pub fn scan_records(&self) -> usize {
        self.scan_records
    }

    /// The most ops per store batch.
    pub fn max_ops_per_batch_value(&self) -> usize {
        self.max_ops_per_batch
    }

    /// The op-log limit.
    pub fn op_log_limit_value(&self) -> usize {
        self.op_log_limit
    }

    /// The seen-ops limit.
    pub fn seen_ops_limit_value(&self) -> usize {
        self.seen_ops_limit
    }

    /// The local node id.
    pub fn node_id_value(&self) -> &str {
        &self.node_id
    }

    /// The largest record a write may store: [`MAX_RECORD_BYTES`], or the scan byte
    /// budget when that is smaller (this manager could not hydrate a larger record).
    pub fn max_record_bytes(&self) -> usize {
        self.scan_bytes.min(MAX_RECORD_BYTES)
    }

    pub(super) fn limits(&self) -> Result<ScanLimits, SyncError> {
        Ok(ScanLimits::new(self.scan_records, self.scan_bytes)?)
    }
}
