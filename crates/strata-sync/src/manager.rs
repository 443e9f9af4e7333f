//! [`SyncManager`]: validated opening, hydration, atomic op application, reads.

use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use strata::numax::decode::DecodeError;
use strata::numax::wire::{self, Op, OpLogEntry};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

/// Tuning of a [`SyncManager`].
///
/// ```
/// let opts = strata_sync::SyncOptions::default().scan_limits(256, 1 << 20).max_ops_per_batch(64);
/// assert_eq!(opts.scan_records(), 256);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOptions {
    scan_records: usize,
    scan_bytes: usize,
    max_ops_per_batch: usize,
    flush_on_apply: bool,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            scan_records: 512,
            scan_bytes: 4 << 20,
            max_ops_per_batch: 512,
            flush_on_apply: false,
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
    /// [`SyncManager::apply_batch`] (at least one).
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

    /// The scan record limit.
    pub fn scan_records(&self) -> usize {
        self.scan_records
    }

    fn limits(&self) -> Result<ScanLimits, SyncError> {
        Ok(ScanLimits::new(self.scan_records, self.scan_bytes)?)
    }
}

/// What applying one op did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The op was new: state, materialized view, seen-ops and op log were written.
    Applied {
        /// Its seen-ops sequence.
        seen_sequence: u64,
        /// Its op-log sequence.
        log_sequence: u64,
    },
    /// The op id was already seen: nothing changed.
    Duplicate,
}

/// The outcome of [`SyncManager::verify`]: every inconsistency found (empty when sound).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// CRDT keys checked.
    pub keys: usize,
    /// Op-log records checked.
    pub ops: usize,
    /// One line per problem.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty()
    }
}

#[derive(Debug, Default)]
struct Inner {
    states: HashMap<(Family, String), CrdtState>,
    seen: HashMap<String, u64>,
    next_seen: u64,
    next_log: u64,
}

/// The Numax-compatible CRDT sync store over one [`Store`].
///
/// One manager owns a store: it keeps the CRDT states and seen op ids in memory and is the
/// only writer of the sync tables (open one manager per datastore). Methods take `&self`
/// and are safe to call from several threads.
#[derive(Debug)]
pub struct SyncManager {
    store: Store,
    options: SyncOptions,
    inner: Mutex<Inner>,
}

/// The key suffix as UTF-8, or a decode error naming the table and key.
fn suffix_str<'a>(table: &'static str, suffix: &'a [u8]) -> Result<&'a str, SyncError> {
    std::str::from_utf8(suffix).map_err(|e| {
        SyncError::from(
            DecodeError::Invalid {
                table,
                key_suffix: None,
                reason: format!("key suffix is not UTF-8 ({e})"),
            }
            .with_key(suffix),
        )
    })
}

fn with_key(e: SyncError, suffix: &[u8]) -> SyncError {
    match e {
        SyncError::Decode { source } => SyncError::Decode {
            source: source.with_key(suffix),
        },
        other => other,
    }
}

/// Scans every record under `prefix` in pages bounded by `limits`, calling `f(suffix,
/// value)` for each.
fn scan_all(
    store: &impl KvRead,
    prefix: &str,
    limits: ScanLimits,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), SyncError>,
) -> Result<(), SyncError> {
    let prefix = prefix.as_bytes();
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        let page = store.scan(prefix, cursor.as_deref(), limits)?;
        for r in &page.records {
            f(&r.key[prefix.len()..], &r.value)?;
        }
        match (page.more, page.records.last()) {
            (true, Some(last)) => cursor = Some(last.key.clone()),
            _ => return Ok(()),
        }
    }
}

impl SyncManager {
    /// Opens the sync store with default options; see [`SyncManager::open_with`].
    pub fn open(store: Store) -> Result<Self, SyncError> {
        Self::open_with(store, SyncOptions::default())
    }

    /// Validates every managed table (initializing the headers of an empty store in one
    /// atomic batch), then hydrates the CRDT states, seen ops and sequences with bounded
    /// scans. A legacy, older, future or corrupt store is refused with
    /// [`SyncError::Schema`] before anything is read or written. Never migrates.
    pub fn open_with(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        strata::validate::validate_and_init(&store, &strata::numax::catalog())?;
        let inner = hydrate(&store, &options)?;
        tracing::debug!(
            keys = inner.states.len(),
            seen = inner.seen.len(),
            "sync manager hydrated"
        );
        Ok(SyncManager {
            store,
            options,
            inner: Mutex::new(inner),
        })
    }

    /// A manager that skips validation (writes no header): only for writing legacy
    /// fixtures.
    pub(crate) fn unvalidated(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        let inner = hydrate(&store, &options)?;
        Ok(SyncManager {
            store,
            options,
            inner: Mutex::new(inner),
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // In-memory state is only replaced after a successful store write, in a few
        // non-panicking steps; a poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one op: a no-op when its id was seen; otherwise the CRDT state, its
    /// materialized view, the seen-ops record and the op-log record are written in ONE
    /// atomic batch.
    pub fn apply(&self, op: &Op) -> Result<Applied, SyncError> {
        let mut out = self.apply_batch(std::slice::from_ref(op))?;
        Ok(out.pop().unwrap_or(Applied::Duplicate))
    }

    /// Applies ops in order, grouping them into atomic store batches of at most
    /// [`SyncOptions::max_ops_per_batch`] ops (every op is all-or-nothing; on an error the
    /// batches before it stay applied). Duplicates — already seen, or repeated in `ops` —
    /// are no-ops. Returns one [`Applied`] per op.
    pub fn apply_batch(&self, ops: &[Op]) -> Result<Vec<Applied>, SyncError> {
        for op in ops {
            if op.id.is_empty() {
                return Err(SyncError::InvalidOp {
                    op_id: String::new(),
                    reason: "the op id is empty".into(),
                });
            }
        }
        let mut inner = self.lock();
        let mut results = Vec::with_capacity(ops.len());
        for chunk in ops.chunks(self.options.max_ops_per_batch) {
            self.apply_chunk(&mut inner, chunk, &mut results)?;
        }
        Ok(results)
    }

    fn apply_chunk(
        &self,
        inner: &mut Inner,
        ops: &[Op],
        results: &mut Vec<Applied>,
    ) -> Result<(), SyncError> {
        let mut overlay: BTreeMap<(Family, String), CrdtState> = BTreeMap::new();
        let mut new_ids: Vec<(&str, u64)> = Vec::new();
        let mut in_chunk: HashSet<&str> = HashSet::new();
        let mut batch = Batch::new();
        let (mut seen_seq, mut log_seq) = (inner.next_seen, inner.next_log);
        let mut chunk_results = Vec::with_capacity(ops.len());
        for op in ops {
            if inner.seen.contains_key(&op.id) || !in_chunk.insert(op.id.as_str()) {
                chunk_results.push(Applied::Duplicate);
                continue;
            }
            let family = Family::of(&op.kind);
            let k = (family, op.kind.key().to_string());
            let state = match overlay.entry(k) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let current = inner
                        .states
                        .get(e.key())
                        .cloned()
                        .unwrap_or_else(|| CrdtState::empty(family));
                    e.insert(current)
                }
            };
            state.apply(&op.origin, &op.kind);
            batch.push(strata_store::Mutation::Set {
                key: wire::key(wire::SEEN_OP_PREFIX, &op.id),
                value: wire::encode_seen_op(seen_seq),
            });
            batch.push(strata_store::Mutation::Set {
                key: wire::key(wire::OP_LOG_PREFIX, &op.id),
                value: wire::encode_op_log(log_seq, op)?,
            });
            new_ids.push((op.id.as_str(), seen_seq));
            chunk_results.push(Applied::Applied {
                seen_sequence: seen_seq,
                log_sequence: log_seq,
            });
            seen_seq += 1;
            log_seq += 1;
        }
        for ((family, key), state) in &overlay {
            batch.push(strata_store::Mutation::Set {
                key: wire::key(family.state_prefix(), key),
                value: state.encode_state()?,
            });
            batch.push(strata_store::Mutation::Set {
                key: wire::key(family.materialized_prefix(), key),
                value: state.encode_value()?,
            });
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
            if self.options.flush_on_apply {
                self.store.flush()?;
            }
        }
        // The batch is durable in the store: now (and only now) advance memory.
        inner.states.extend(overlay);
        for (id, seq) in new_ids {
            inner.seen.insert(id.to_string(), seq);
        }
        inner.next_seen = seen_seq;
        inner.next_log = log_seq;
        results.extend(chunk_results);
        Ok(())
    }

    /// Flushes the store (every applied op is on disk afterwards).
    pub fn flush(&self) -> Result<(), SyncError> {
        Ok(self.store.flush()?)
    }

    /// Replays every op of `source`'s op log into this manager (in bounded pages; CRDT ops
    /// commute, so key order is as good as sequence order). Returns how many ops were new.
    pub fn replay_from(&self, source: &impl KvRead) -> Result<usize, SyncError> {
        let limits = self.options.limits()?;
        let mut page_ops = Vec::new();
        let mut applied = 0;
        let mut flush = |ops: &mut Vec<Op>| -> Result<(), SyncError> {
            let res = self.apply_batch(ops)?;
            applied += res
                .iter()
                .filter(|a| matches!(a, Applied::Applied { .. }))
                .count();
            ops.clear();
            Ok(())
        };
        scan_all(source, wire::OP_LOG_PREFIX, limits, |suffix, value| {
            let id = suffix_str("op-log", suffix)?;
            page_ops.push(
                wire::decode_op_log_record(id, value)
                    .map_err(|e| e.with_key(suffix))?
                    .op,
            );
            if page_ops.len() >= self.options.max_ops_per_batch {
                flush(&mut page_ops)?;
            }
            Ok(())
        })?;
        flush(&mut page_ops)?;
        Ok(applied)
    }

    // ----- reads of the materialized tables (what an application reads) -----

    fn get(&self, prefix: &str, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        Ok(self.store.get(&wire::key(prefix, key))?)
    }

    fn read<T>(
        &self,
        family: Family,
        key: &str,
        decode: impl FnOnce(&[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, SyncError> {
        match self.get(family.materialized_prefix(), key)? {
            Some(bytes) => Ok(Some(
                decode(&bytes).map_err(|e| e.with_key(key.as_bytes()))?,
            )),
            None => Ok(None),
        }
    }

    /// The grow-only counter `key` (materialized value).
    pub fn gcounter(&self, key: &str) -> Result<Option<u64>, SyncError> {
        self.read(Family::GCounter, key, wire::decode_gcounter_materialized)
    }

    /// The PN counter `key`.
    pub fn pncounter(&self, key: &str) -> Result<Option<i64>, SyncError> {
        self.read(Family::PNCounter, key, wire::decode_pncounter_materialized)
    }

    /// The LWW register `key`.
    pub fn register(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        self.read(Family::LwwRegister, key, |b| Ok(b.to_vec()))
    }

    /// The visible fields of LWW map `key` (tombstoned fields are absent).
    pub fn map(&self, key: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, SyncError> {
        self.read(Family::LwwMap, key, |b| {
            wire::decode_lww_map_materialized(b).map(|v| v.into_iter().collect())
        })
    }

    /// The visible elements of OR-set `key`, sorted.
    pub fn set(&self, key: &str) -> Result<Option<Vec<String>>, SyncError> {
        self.read(Family::ORSet, key, wire::decode_orset_materialized)
    }

    /// The visible values of RGA sequence `key`, in order.
    pub fn sequence(&self, key: &str) -> Result<Option<Vec<Vec<u8>>>, SyncError> {
        self.read(Family::Rga, key, wire::decode_rga_materialized)
    }

    /// The seen-ops sequence of `op_id`, if it was seen.
    pub fn seen_op_sequence(&self, op_id: &str) -> Result<Option<u64>, SyncError> {
        match self.get(wire::SEEN_OP_PREFIX, op_id)? {
            Some(b) => Ok(Some(
                wire::decode_seen_op(&b).map_err(|e| e.with_key(op_id.as_bytes()))?,
            )),
            None => Ok(None),
        }
    }

    /// The op-log record of `op_id`, if logged.
    pub fn op_log_entry(&self, op_id: &str) -> Result<Option<OpLogEntry>, SyncError> {
        match self.get(wire::OP_LOG_PREFIX, op_id)? {
            Some(b) => Ok(Some(
                wire::decode_op_log_record(op_id, &b).map_err(|e| e.with_key(op_id.as_bytes()))?,
            )),
            None => Ok(None),
        }
    }

    /// Iterates the durable op log in key (op id) order, one bounded page at a time.
    pub fn op_log(&self) -> OpLogReader<'_> {
        OpLogReader {
            store: &self.store,
            limits: self.options.limits(),
            cursor: None,
            page: Vec::new().into_iter(),
            done: false,
        }
    }

    // ----- in-memory state -----

    /// The in-memory CRDT state of `key` in `family`.
    pub fn state(&self, family: Family, key: &str) -> Option<CrdtState> {
        self.lock().states.get(&(family, key.to_string())).cloned()
    }

    /// A copy of every in-memory CRDT state, ordered.
    pub fn states(&self) -> BTreeMap<(Family, String), CrdtState> {
        self.lock()
            .states
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// A copy of the seen op ids with their sequences, ordered.
    pub fn seen_ops(&self) -> BTreeMap<String, u64> {
        self.lock()
            .seen
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The next seen-ops and op-log sequences.
    pub fn next_sequences(&self) -> (u64, u64) {
        let g = self.lock();
        (g.next_seen, g.next_log)
    }

    /// Checks the store against itself with bounded scans: every state record decodes and
    /// its materialized record equals the value the state materializes to (and no
    /// materialized record lacks a state); every op-log record decodes with an id equal to
    /// its key; seen-ops and the op log hold the same op ids. Read-only.
    pub fn verify(&self) -> Result<VerifyReport, SyncError> {
        verify_store(&self.store, &self.options)
    }
}

/// Loads states, seen ops and next sequences with bounded scans.
fn hydrate(store: &Store, options: &SyncOptions) -> Result<Inner, SyncError> {
    let limits = options.limits()?;
    let mut inner = Inner::default();
    for family in Family::ALL {
        scan_all(store, family.state_prefix(), limits, |suffix, value| {
            let key = suffix_str(family.state_table(), suffix)?;
            let state = CrdtState::decode(family, value).map_err(|e| with_key(e, suffix))?;
            inner.states.insert((family, key.to_string()), state);
            Ok(())
        })?;
    }
    let mut next_seen = 0u64;
    scan_all(store, wire::SEEN_OP_PREFIX, limits, |suffix, value| {
        let id = suffix_str("seen-ops", suffix)?;
        let seq = wire::decode_seen_op(value).map_err(|e| e.with_key(suffix))?;
        next_seen = next_seen.max(seq.saturating_add(1));
        inner.seen.insert(id.to_string(), seq);
        Ok(())
    })?;
    let mut next_log = 0u64;
    scan_all(store, wire::OP_LOG_PREFIX, limits, |suffix, value| {
        suffix_str("op-log", suffix)?;
        let seq = value
            .first_chunk::<8>()
            .map(|b| u64::from_be_bytes(*b))
            .ok_or_else(|| {
                SyncError::from(DecodeError::Invalid {
                    table: "op-log",
                    key_suffix: Some(suffix.to_vec()),
                    reason: format!(
                        "expected at least 8 bytes (sequence) before the op JSON, found {}",
                        value.len()
                    ),
                })
            })?;
        next_log = next_log.max(seq.saturating_add(1));
        Ok(())
    })?;
    inner.next_seen = next_seen;
    inner.next_log = next_log;
    Ok(inner)
}

fn verify_store(store: &Store, options: &SyncOptions) -> Result<VerifyReport, SyncError> {
    let limits = options.limits()?;
    let mut report = VerifyReport::default();
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
        scan_all(store, family.materialized_prefix(), limits, |suffix, _| {
            let key = String::from_utf8_lossy(suffix).into_owned();
            if !keys.contains(&key) {
                report.problems.push(format!(
                    "materialized `{}{key}` has no state record",
                    family.materialized_prefix()
                ));
            }
            Ok(())
        })?;
    }
    let mut logged = HashSet::new();
    let mut log_seqs = HashSet::new();
    scan_all(store, wire::OP_LOG_PREFIX, limits, |suffix, value| {
        report.ops += 1;
        let id = String::from_utf8_lossy(suffix).into_owned();
        match wire::decode_op_log_record(&id, value) {
            Ok(entry) => {
                if !log_seqs.insert(entry.sequence) {
                    report
                        .problems
                        .push(format!("op-log sequence {} is used twice", entry.sequence));
                }
            }
            Err(e) => report.problems.push(e.with_key(suffix).to_string()),
        }
        logged.insert(id);
        Ok(())
    })?;
    let mut seen = 0usize;
    scan_all(store, wire::SEEN_OP_PREFIX, limits, |suffix, value| {
        seen += 1;
        let id = String::from_utf8_lossy(suffix).into_owned();
        if let Err(e) = wire::decode_seen_op(value) {
            report.problems.push(e.with_key(suffix).to_string());
        }
        if !logged.contains(&id) {
            report
                .problems
                .push(format!("seen op `{id}` is missing from the op log"));
        }
        Ok(())
    })?;
    if seen != logged.len() {
        report.problems.push(format!(
            "{} ops are logged but {seen} are marked seen",
            logged.len()
        ));
    }
    Ok(report)
}

/// Iterator over the durable op log (see [`SyncManager::op_log`]).
#[derive(Debug)]
pub struct OpLogReader<'a> {
    store: &'a Store,
    limits: Result<ScanLimits, SyncError>,
    cursor: Option<Vec<u8>>,
    page: std::vec::IntoIter<OpLogEntry>,
    done: bool,
}

impl OpLogReader<'_> {
    fn fill(&mut self) -> Result<(), SyncError> {
        let limits = match &self.limits {
            Ok(l) => *l,
            Err(_) => {
                return Err(SyncError::Refused {
                    reason: "invalid scan limits for the op log; use limits of at least 1".into(),
                })
            }
        };
        let prefix = wire::OP_LOG_PREFIX.as_bytes();
        let page = self.store.scan(prefix, self.cursor.as_deref(), limits)?;
        self.done = !page.more;
        self.cursor = page.records.last().map(|r| r.key.clone());
        let mut entries = Vec::with_capacity(page.records.len());
        for r in &page.records {
            let suffix = &r.key[prefix.len()..];
            let id = suffix_str("op-log", suffix)?;
            entries.push(wire::decode_op_log_record(id, &r.value).map_err(|e| e.with_key(suffix))?);
        }
        self.page = entries.into_iter();
        Ok(())
    }
}

impl Iterator for OpLogReader<'_> {
    type Item = Result<OpLogEntry, SyncError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.page.next() {
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
