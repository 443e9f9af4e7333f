//! Hydration at open: the retained sequences, pruning beyond the limits, and repair of
//! stale materialized records.

use super::{
    push_set, require, scan_all, suffix_str, with_key, Inner, Sequences, SyncOptions, MAX_ATTEMPTS,
    SEQUENCES_KEY,
};
use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use strata::numax::decode::DecodeError;
use strata::numax::wire::{self};
use strata_store::{Batch, KvRead, KvWrite, Mutation, ScanLimits, Store};

/// Deletes per batch when hydration prunes entries beyond the limits.
const PRUNE_BATCH: usize = 1024;

/// `(sequence, op id)` of retained records, sorted by sequence.
type Retained = Vec<(u64, String)>;

/// Scans the retained seen-ops and op-log records: `(sequence, op id)` of each.
pub(super) fn scan_retained(
    store: &Store,
    limits: ScanLimits,
) -> Result<(Retained, Retained), SyncError> {
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
pub(super) fn refresh_index(
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
pub(super) fn prune(
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
pub(super) fn repair_materialized(
    store: &Store,
    options: &SyncOptions,
) -> Result<usize, SyncError> {
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
pub(super) fn hydrate(
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
