//! [`SyncManager`]: validated opening, hydration, atomic op application, reads.
//!
//! Every apply is a read-modify-write against the STORED records, committed in one atomic
//! batch whose preconditions pin everything it read: the sequence record, each touched
//! state record (and the materialized record of an early-layout counter), and the absence
//! of each new op's seen-op record. A batch that lost a race to another handle or process
//! writes nothing and is recomputed from the store, so any number of handles and processes
//! applying ops converge to exactly the state of applying every op once.

use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use strata::numax::decode::DecodeError;
use strata::numax::wire::{self, Op, OpLogEntry};
use strata_store::{Batch, KvRead, KvWrite, Mutation, Precondition, ScanLimits, Store};

/// Numax's default `op_log_limit`: op-log records kept (the newest by sequence).
pub const DEFAULT_OP_LOG_LIMIT: usize = 10_000;
/// Numax's default `seen_ops_limit`: seen-op records kept (the newest by sequence).
pub const DEFAULT_SEEN_OPS_LIMIT: usize = 100_000;
/// The node credited with an early-layout counter's value unless
/// [`SyncOptions::node_id`] names another.
pub const DEFAULT_NODE_ID: &str = "strata-local";
/// The largest record (key + value bytes) a sync write may store: the default byte budget
/// of every reader of the store (hydration scans, `strata migrate` batches). A write whose
/// record would not fit is refused with [`SyncError::RecordTooLarge`].
pub const MAX_RECORD_BYTES: usize = strata::pass::DEFAULT_MAX_BYTES;
/// The sequence record: the next seen-ops and op-log sequences, shared by every handle and
/// process writing the store (docs/format.md, "Sync sequences").
pub const SEQUENCES_KEY: &str = "__nx/sync/sequences";
const SEQUENCES_MAGIC: &[u8; 4] = b"NXSQ";
const SEQUENCES_FORMAT: u16 = 1;
const SEQUENCES_LEN: usize = 24;
/// How often one chunk is recomputed after losing a race before giving up.
const MAX_ATTEMPTS: usize = 100_000;
/// Deletes per batch when hydration prunes entries beyond the limits.
const PRUNE_BATCH: usize = 1024;

/// Tuning of a [`SyncManager`].
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
    scan_records: usize,
    scan_bytes: usize,
    max_ops_per_batch: usize,
    flush_on_apply: bool,
    op_log_limit: usize,
    seen_ops_limit: usize,
    node_id: String,
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

/// The decoded sequence record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Sequences {
    next_seen: u64,
    next_log: u64,
}

impl Sequences {
    fn encode(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SEQUENCES_LEN);
        out.extend_from_slice(SEQUENCES_MAGIC);
        out.extend_from_slice(&SEQUENCES_FORMAT.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.next_seen.to_be_bytes());
        out.extend_from_slice(&self.next_log.to_be_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, SyncError> {
        let bad = |reason: String| {
            SyncError::Refused {
            reason: format!(
                "sequence record `{SEQUENCES_KEY}` is corrupt: {reason}; delete it (the next open rebuilds it from the seen-ops and op-log records)"
            ),
        }
        };
        if bytes.len() != SEQUENCES_LEN {
            return Err(bad(format!(
                "expected {SEQUENCES_LEN} bytes, found {}",
                bytes.len()
            )));
        }
        if &bytes[..4] != SEQUENCES_MAGIC {
            return Err(bad("wrong magic (expected `NXSQ`)".into()));
        }
        let format = u16::from_be_bytes([bytes[4], bytes[5]]);
        if format != SEQUENCES_FORMAT {
            return Err(bad(format!(
                "format {format} (this build reads {SEQUENCES_FORMAT})"
            )));
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_be_bytes(b)
        };
        Ok(Sequences {
            next_seen: u64_at(8),
            next_log: u64_at(16),
        })
    }
}

/// What one handle knows of a bounded table (seen-ops or op-log): sequence → op id of the
/// records it has seen, complete for every sequence below `known_until`.
#[derive(Debug, Default)]
struct SeqIndex {
    by_seq: BTreeMap<u64, String>,
    by_id: HashMap<String, u64>,
    known_until: u64,
}

impl SeqIndex {
    fn insert(&mut self, seq: u64, id: &str) {
        if let Some(old) = self.by_id.insert(id.to_string(), seq) {
            self.by_seq.remove(&old);
        }
        self.by_seq.insert(seq, id.to_string());
    }

    /// The entries with a sequence below `cut`.
    fn below(&self, cut: u64) -> Vec<String> {
        self.by_seq.range(..cut).map(|(_, id)| id.clone()).collect()
    }

    fn drop_below(&mut self, cut: u64) {
        let keep = self.by_seq.split_off(&cut);
        for id in std::mem::replace(&mut self.by_seq, keep).into_values() {
            self.by_id.remove(&id);
        }
    }

    fn max_next(&self) -> u64 {
        self.by_seq
            .last_key_value()
            .map(|(s, _)| s.saturating_add(1))
            .unwrap_or(0)
    }
}

#[derive(Debug, Default)]
struct Inner {
    seen: SeqIndex,
    log: SeqIndex,
    /// The sequences this handle last read or committed.
    last: Sequences,
}

/// The Numax-compatible CRDT sync store over one [`Store`].
///
/// Any number of managers — in one process or in many, over one shared store (PostgreSQL)
/// — may apply ops at once: each apply reads the stored records it changes and commits
/// under preconditions on them (see the module docs), so no op is lost or applied twice.
/// Methods take `&self` and are safe to call from several threads.
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

/// Adds a set to `batch`, refusing a record no reader could read back.
fn push_set(
    batch: &mut Batch,
    table: &'static str,
    key: Vec<u8>,
    value: Vec<u8>,
    limit: usize,
) -> Result<(), SyncError> {
    let size = key.len() + value.len();
    if size > limit {
        return Err(SyncError::RecordTooLarge {
            table,
            key: strata_store::escape_key(&key),
            size,
            limit,
        });
    }
    batch.push(Mutation::Set { key, value });
    Ok(())
}

fn require(batch: &mut Batch, key: Vec<u8>, value: Option<Vec<u8>>) {
    batch.push_precondition(match value {
        Some(value) => Precondition::Equals { key, value },
        None => Precondition::Absent { key },
    });
}

/// One CRDT key touched by a chunk: its state as read (and updated), what the store held.
struct Touched {
    state: CrdtState,
    stored: Option<Vec<u8>>,
    /// The materialized record an early-layout counter was seeded from.
    early: Option<Vec<u8>>,
}

impl SyncManager {
    /// Opens the sync store with default options; see [`SyncManager::open_with`].
    pub fn open(store: Store) -> Result<Self, SyncError> {
        Self::open_with(store, SyncOptions::default())
    }

    /// Validates every managed table (initializing the headers of an empty store in one
    /// atomic batch), then hydrates with bounded scans: every state record is the truth,
    /// and a missing or stale materialized record is rewritten from it; the seen-ops and
    /// op-log records beyond the limits (a store written with larger limits) are evicted,
    /// oldest sequence first; the sequence record is created or brought up to date. A
    /// legacy, older, future or corrupt store is refused with [`SyncError::Schema`] before
    /// anything is read or written. Never migrates.
    pub fn open_with(store: Store, options: SyncOptions) -> Result<Self, SyncError> {
        strata::validate::validate_and_init(&store, &strata::numax::catalog())?;
        let inner = hydrate(&store, &options, true)?;
        tracing::debug!(
            seen = inner.seen.by_seq.len(),
            logged = inner.log.by_seq.len(),
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
        let inner = hydrate(&store, &options, false)?;
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

    /// The options.
    pub fn options(&self) -> &SyncOptions {
        &self.options
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The index is only changed after a successful store write, in a few
        // non-panicking steps; a poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one op: a no-op when its id was seen; otherwise the CRDT state, its
    /// materialized view, the seen-ops record and the op-log record (and any evictions)
    /// are written in ONE atomic batch.
    pub fn apply(&self, op: &Op) -> Result<Applied, SyncError> {
        let mut out = self.apply_batch(std::slice::from_ref(op))?;
        Ok(out.pop().unwrap_or(Applied::Duplicate))
    }

    /// Applies ops in order, grouping them into atomic store batches of at most
    /// [`SyncOptions::max_ops_per_batch`] ops (every op is all-or-nothing; on an error the
    /// batches before it stay applied). Duplicates — already seen, or repeated in `ops` —
    /// are no-ops. Returns one [`Applied`] per op.
    ///
    /// A batch that would store a record larger than [`SyncOptions::max_record_bytes`] is
    /// refused with [`SyncError::RecordTooLarge`] and writes nothing.
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
            results.extend(self.apply_chunk(&mut inner, chunk)?);
        }
        Ok(results)
    }

    fn apply_chunk(&self, inner: &mut Inner, ops: &[Op]) -> Result<Vec<Applied>, SyncError> {
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(results) = self.try_chunk(inner, ops)? {
                if self.options.flush_on_apply {
                    self.store.flush()?;
                }
                return Ok(results);
            }
            tracing::trace!(
                attempt,
                "sync batch lost a race; recomputing from the store"
            );
            std::thread::yield_now();
        }
        Err(SyncError::Refused {
            reason: format!(
                "a batch of {} ops lost {MAX_ATTEMPTS} races in a row against other writers of the sync tables; nothing of it was written, apply it again",
                ops.len()
            ),
        })
    }

    /// One attempt: read, compute, commit under preconditions. `None` when a precondition
    /// failed (another writer got in between; nothing was written).
    fn try_chunk(&self, inner: &mut Inner, ops: &[Op]) -> Result<Option<Vec<Applied>>, SyncError> {
        let limit = self.options.max_record_bytes();
        let seq_key = SEQUENCES_KEY.as_bytes().to_vec();
        let seq_bytes = self.store.get(&seq_key)?;
        let seqs = match &seq_bytes {
            Some(b) => Sequences::decode(b)?,
            None => {
                // No writer has committed through the sequence record yet: derive it.
                refresh_index(&self.store, &self.options, inner, None)?
            }
        };

        inner.last = seqs;
        let mut results = vec![Applied::Duplicate; ops.len()];
        let mut in_chunk: HashSet<&str> = HashSet::new();
        let mut fresh: Vec<usize> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if !in_chunk.insert(op.id.as_str()) {
                continue;
            }
            if self
                .store
                .get(&wire::key(wire::SEEN_OP_PREFIX, &op.id))?
                .is_some()
            {
                continue;
            }
            fresh.push(i);
        }
        if fresh.is_empty() {
            return Ok(Some(results));
        }

        let mut touched: BTreeMap<(Family, String), Touched> = BTreeMap::new();
        for &i in &fresh {
            let op = &ops[i];
            let family = Family::of(&op.kind);
            let k = (family, op.kind.key().to_string());
            if !touched.contains_key(&k) {
                let t = self.read_touched(family, &k.1)?;
                touched.insert(k.clone(), t);
            }
            if let Some(t) = touched.get_mut(&k) {
                t.state.apply(&op.origin, &op.kind);
            }
        }

        let n = fresh.len() as u64;
        let next = Sequences {
            next_seen: seqs.next_seen.saturating_add(n),
            next_log: seqs.next_log.saturating_add(n),
        };
        let seen_cut = next
            .next_seen
            .saturating_sub(self.options.seen_ops_limit as u64);
        let log_cut = next
            .next_log
            .saturating_sub(self.options.op_log_limit as u64);
        if seen_cut > inner.seen.known_until || log_cut > inner.log.known_until {
            // Records below the cut were written by another writer this handle has not
            // seen: learn them (a bounded scan of what is retained) before evicting.
            refresh_index(&self.store, &self.options, inner, Some(seqs))?;
        }

        let mut batch = Batch::new();
        require(&mut batch, seq_key.clone(), seq_bytes.clone());
        let mut set_seen: HashSet<&str> = HashSet::new();
        let mut set_log: HashSet<&str> = HashSet::new();
        for (j, &i) in fresh.iter().enumerate() {
            let op = &ops[i];
            let seen_seq = seqs.next_seen.saturating_add(j as u64);
            let log_seq = seqs.next_log.saturating_add(j as u64);
            let seen_key = wire::key(wire::SEEN_OP_PREFIX, &op.id);
            require(&mut batch, seen_key.clone(), None);
            if seen_seq >= seen_cut {
                push_set(
                    &mut batch,
                    "seen-ops",
                    seen_key,
                    wire::encode_seen_op(seen_seq),
                    limit,
                )?;
                set_seen.insert(op.id.as_str());
            }
            if log_seq >= log_cut {
                push_set(
                    &mut batch,
                    "op-log",
                    wire::key(wire::OP_LOG_PREFIX, &op.id),
                    wire::encode_op_log(log_seq, op)?,
                    limit,
                )?;
                set_log.insert(op.id.as_str());
            }
            results[i] = Applied::Applied {
                seen_sequence: seen_seq,
                log_sequence: log_seq,
            };
        }
        for id in inner.seen.below(seen_cut) {
            if !set_seen.contains(id.as_str()) {
                batch.push(Mutation::Delete {
                    key: wire::key(wire::SEEN_OP_PREFIX, &id),
                });
            }
        }
        for id in inner.log.below(log_cut) {
            if !set_log.contains(id.as_str()) {
                batch.push(Mutation::Delete {
                    key: wire::key(wire::OP_LOG_PREFIX, &id),
                });
            }
        }
        for ((family, key), t) in &touched {
            let state_key = wire::key(family.state_prefix(), key);
            let mat_key = wire::key(family.materialized_prefix(), key);
            require(&mut batch, state_key.clone(), t.stored.clone());
            if let Some(m) = &t.early {
                require(&mut batch, mat_key.clone(), Some(m.clone()));
            }
            push_set(
                &mut batch,
                family.state_table(),
                state_key,
                t.state.encode_state()?,
                limit,
            )?;
            push_set(
                &mut batch,
                family.materialized_table(),
                mat_key,
                t.state.encode_value()?,
                limit,
            )?;
        }
        batch.push(Mutation::Set {
            key: seq_key,
            value: next.encode(),
        });

        match self.store.apply(batch) {
            Ok(()) => {}
            Err(e) if e.is_conflict() => return Ok(None),
            Err(e) => return Err(e.into()),
        }

        // Committed: now (and only now) advance what this handle knows.
        for (j, &i) in fresh.iter().enumerate() {
            let id = ops[i].id.as_str();
            if set_seen.contains(id) {
                inner
                    .seen
                    .insert(seqs.next_seen.saturating_add(j as u64), id);
            }
            if set_log.contains(id) {
                inner.log.insert(seqs.next_log.saturating_add(j as u64), id);
            }
        }
        inner.seen.drop_below(seen_cut);
        inner.log.drop_below(log_cut);
        if inner.seen.known_until == seqs.next_seen {
            inner.seen.known_until = next.next_seen;
        }
        if inner.log.known_until == seqs.next_log {
            inner.log.known_until = next.next_log;
        }
        inner.last = next;
        Ok(Some(results))
    }

    /// The stored state of a key (or, for a counter in the early layout, the state its
    /// materialized value stands for), with what the store held.
    fn read_touched(&self, family: Family, key: &str) -> Result<Touched, SyncError> {
        let stored = self.store.get(&wire::key(family.state_prefix(), key))?;
        if let Some(bytes) = &stored {
            let state =
                CrdtState::decode(family, bytes).map_err(|e| with_key(e, key.as_bytes()))?;
            return Ok(Touched {
                state,
                stored,
                early: None,
            });
        }
        if matches!(family, Family::GCounter | Family::PNCounter) {
            if let Some(m) = self
                .store
                .get(&wire::key(family.materialized_prefix(), key))?
            {
                if let Some(state) = CrdtState::from_early_layout(family, &self.options.node_id, &m)
                    .map_err(|e| with_key(e, key.as_bytes()))?
                {
                    return Ok(Touched {
                        state,
                        stored: None,
                        early: Some(m),
                    });
                }
            }
        }
        Ok(Touched {
            state: CrdtState::empty(family),
            stored: None,
            early: None,
        })
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

    // ----- stored state -----

    /// The stored CRDT state of `key` in `family` — for a counter in the early layout
    /// (materialized value, no state record), the state its value stands for (credited to
    /// [`SyncOptions::node_id`]).
    pub fn state(&self, family: Family, key: &str) -> Result<Option<CrdtState>, SyncError> {
        let t = self.read_touched(family, key)?;
        Ok((t.stored.is_some() || t.early.is_some()).then_some(t.state))
    }

    /// Every stored CRDT state record, ordered (bounded scans; holds them all in memory,
    /// for tests and small stores).
    pub fn states(&self) -> Result<BTreeMap<(Family, String), CrdtState>, SyncError> {
        let limits = self.options.limits()?;
        let mut out = BTreeMap::new();
        for family in Family::ALL {
            scan_all(
                &self.store,
                family.state_prefix(),
                limits,
                |suffix, value| {
                    let key = suffix_str(family.state_table(), suffix)?;
                    let state =
                        CrdtState::decode(family, value).map_err(|e| with_key(e, suffix))?;
                    out.insert((family, key.to_string()), state);
                    Ok(())
                },
            )?;
        }
        Ok(out)
    }

    /// The retained seen op ids with their sequences, ordered by id.
    pub fn seen_ops(&self) -> Result<BTreeMap<String, u64>, SyncError> {
        let limits = self.options.limits()?;
        let mut out = BTreeMap::new();
        scan_all(
            &self.store,
            wire::SEEN_OP_PREFIX,
            limits,
            |suffix, value| {
                let id = suffix_str("seen-ops", suffix)?;
                let seq = wire::decode_seen_op(value).map_err(|e| e.with_key(suffix))?;
                out.insert(id.to_string(), seq);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The next seen-ops and op-log sequences as this handle last read or wrote them
    /// (other handles may have moved on since; [`SyncManager::stored_sequences`] reads the
    /// store).
    pub fn next_sequences(&self) -> (u64, u64) {
        let g = self.lock();
        (g.last.next_seen, g.last.next_log)
    }

    /// The next seen-ops and op-log sequences, read from the stored sequence record (or
    /// derived from the retained records when there is none).
    pub fn stored_sequences(&self) -> Result<(u64, u64), SyncError> {
        match self.store.get(SEQUENCES_KEY.as_bytes())? {
            Some(b) => {
                let s = Sequences::decode(&b)?;
                Ok((s.next_seen, s.next_log))
            }
            None => {
                let mut inner = Inner::default();
                let s = refresh_index(&self.store, &self.options, &mut inner, None)?;
                Ok((s.next_seen, s.next_log))
            }
        }
    }

    /// Checks the store against itself with bounded scans: every state record decodes and
    /// its materialized record equals the value the state materializes to; no
    /// materialized record lacks a state, except a counter in the early layout; every
    /// op-log record decodes with an id equal to its key; no two op-log (or seen-op)
    /// records share a sequence; the sequence record, when present, is above every
    /// retained sequence. Read-only.
    pub fn verify(&self) -> Result<VerifyReport, SyncError> {
        verify_store(&self.store, &self.options)
    }
}

/// `(sequence, op id)` of retained records, sorted by sequence.
type Retained = Vec<(u64, String)>;

/// Scans the retained seen-ops and op-log records: `(sequence, op id)` of each.
fn scan_retained(store: &Store, limits: ScanLimits) -> Result<(Retained, Retained), SyncError> {
    let mut seen = Vec::new();
    scan_all(store, wire::SEEN_OP_PREFIX, limits, |suffix, value| {
        let id = suffix_str("seen-ops", suffix)?;
        let seq = wire::decode_seen_op(value).map_err(|e| e.with_key(suffix))?;
        seen.push((seq, id.to_string()));
        Ok(())
    })?;
    let mut log = Vec::new();
    scan_all(store, wire::OP_LOG_PREFIX, limits, |suffix, value| {
        let id = suffix_str("op-log", suffix)?;
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
        log.push((seq, id.to_string()));
        Ok(())
    })?;
    seen.sort();
    log.sort();
    Ok((seen, log))
}

/// Rebuilds `inner` from a scan of the retained records. `current` is the sequence record
/// read BEFORE the scan (every record below it was committed before, so the scan has it);
/// `None` when there is none. Returns the sequences to continue from.
fn refresh_index(
    store: &Store,
    options: &SyncOptions,
    inner: &mut Inner,
    current: Option<Sequences>,
) -> Result<Sequences, SyncError> {
    let (seen, log) = scan_retained(store, options.limits()?)?;
    let mut fresh = Inner::default();
    for (seq, id) in &seen {
        fresh.seen.insert(*seq, id);
    }
    for (seq, id) in &log {
        fresh.log.insert(*seq, id);
    }
    let derived = Sequences {
        next_seen: fresh.seen.max_next(),
        next_log: fresh.log.max_next(),
    };
    let seqs = match current {
        Some(c) => Sequences {
            next_seen: c.next_seen.max(derived.next_seen),
            next_log: c.next_log.max(derived.next_log),
        },
        None => derived,
    };
    fresh.seen.known_until = current.map_or(derived.next_seen, |c| c.next_seen);
    fresh.log.known_until = current.map_or(derived.next_log, |c| c.next_log);
    fresh.last = seqs;
    *inner = fresh;
    Ok(seqs)
}

/// Deletes the oldest entries of `entries` (sorted by sequence) beyond `limit`, in
/// bounded batches. Returns the retained ones.
fn prune(
    store: &Store,
    prefix: &str,
    mut entries: Vec<(u64, String)>,
    limit: usize,
) -> Result<Vec<(u64, String)>, SyncError> {
    let excess = entries.len().saturating_sub(limit);
    if excess == 0 {
        return Ok(entries);
    }
    let retained = entries.split_off(excess);
    for chunk in entries.chunks(PRUNE_BATCH) {
        let mut batch = Batch::new();
        for (_, id) in chunk {
            batch.push(Mutation::Delete {
                key: wire::key(prefix, id),
            });
        }
        store.apply(batch)?;
    }
    tracing::info!(
        table = prefix,
        evicted = excess,
        limit,
        "evicted records beyond the limit"
    );
    Ok(retained)
}

/// Rewrites the materialized record of every state record whose materialized record is
/// missing or stale, each under preconditions on both records (a concurrent writer that
/// changed either wins: it writes both).
fn repair_materialized(store: &Store, options: &SyncOptions) -> Result<usize, SyncError> {
    let limits = options.limits()?;
    let mut repaired = 0;
    for family in Family::ALL {
        scan_all(store, family.state_prefix(), limits, |suffix, value| {
            let state = CrdtState::decode(family, value).map_err(|e| with_key(e, suffix))?;
            let expected = state.encode_value()?;
            let key = suffix_str(family.state_table(), suffix)?;
            let mat_key = wire::key(family.materialized_prefix(), key);
            let found = store.get(&mat_key)?;
            if found.as_deref() == Some(expected.as_slice()) {
                return Ok(());
            }
            let mut batch = Batch::new();
            require(
                &mut batch,
                wire::key(family.state_prefix(), key),
                Some(value.to_vec()),
            );
            require(&mut batch, mat_key.clone(), found);
            push_set(
                &mut batch,
                family.materialized_table(),
                mat_key,
                expected,
                options.max_record_bytes(),
            )?;
            match store.apply(batch) {
                Ok(()) => repaired += 1,
                Err(e) if e.is_conflict() => {}
                Err(e) => return Err(e.into()),
            }
            Ok(())
        })?;
    }
    Ok(repaired)
}

/// Hydration: repair materialized records, prune beyond the limits, index what is retained
/// and bring the sequence record up to date (when `write_sequences`).
fn hydrate(
    store: &Store,
    options: &SyncOptions,
    write_sequences: bool,
) -> Result<Inner, SyncError> {
    let repaired = repair_materialized(store, options)?;
    if repaired > 0 {
        tracing::info!(repaired, "materialized records rewritten from their state");
    }
    let seq_key = SEQUENCES_KEY.as_bytes().to_vec();
    let mut current_bytes = store.get(&seq_key)?;
    let current = current_bytes
        .as_deref()
        .map(Sequences::decode)
        .transpose()?;
    let (seen, log) = scan_retained(store, options.limits()?)?;
    let seen = prune(store, wire::SEEN_OP_PREFIX, seen, options.seen_ops_limit)?;
    let log = prune(store, wire::OP_LOG_PREFIX, log, options.op_log_limit)?;
    let mut inner = Inner::default();
    for (seq, id) in &seen {
        inner.seen.insert(*seq, id);
    }
    for (seq, id) in &log {
        inner.log.insert(*seq, id);
    }
    let derived = Sequences {
        next_seen: inner.seen.max_next(),
        next_log: inner.log.max_next(),
    };
    // Without a sequence record, this handle cannot know what a concurrent first writer
    // committed: it learns the retained records again before its first eviction.
    inner.seen.known_until = current.map_or(0, |c| c.next_seen);
    inner.log.known_until = current.map_or(0, |c| c.next_log);
    inner.last = match current {
        Some(c) => Sequences {
            next_seen: c.next_seen.max(derived.next_seen),
            next_log: c.next_log.max(derived.next_log),
        },
        None => derived,
    };
    if !write_sequences {
        return Ok(inner);
    }
    let mut base = current;
    for _ in 0..MAX_ATTEMPTS {
        let want = match base {
            Some(c) => Sequences {
                next_seen: c.next_seen.max(derived.next_seen),
                next_log: c.next_log.max(derived.next_log),
            },
            None => derived,
        };
        inner.last = want;
        if base == Some(want) {
            return Ok(inner);
        }
        let mut batch = Batch::new();
        require(&mut batch, seq_key.clone(), current_bytes.clone());
        batch.push(Mutation::Set {
            key: seq_key.clone(),
            value: want.encode(),
        });
        match store.apply(batch) {
            Ok(()) => return Ok(inner),
            Err(e) if e.is_conflict() => {
                current_bytes = store.get(&seq_key)?;
                base = current_bytes
                    .as_deref()
                    .map(Sequences::decode)
                    .transpose()?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(SyncError::Refused {
        reason: format!(
            "could not bring `{SEQUENCES_KEY}` up to date against concurrent writers; open the store again"
        ),
    })
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
