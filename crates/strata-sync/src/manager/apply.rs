//! Applying ops: read-modify-write of the stored records under preconditions, retried
//! when another handle or process won the race.

use super::{
    push_set, refresh_index, require, scan_all, suffix_str, with_key, Applied, Inner, Sequences,
    SyncManager, MAX_ATTEMPTS, SEQUENCES_KEY,
};
use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use std::collections::{BTreeMap, HashSet};
use strata::numax::wire::{self, Op};
use strata_store::{Batch, KvRead, KvWrite, Mutation};

/// One CRDT key touched by a chunk: its state as read (and updated), what the store held.
pub(super) struct Touched {
    pub(super) state: CrdtState,
    pub(super) stored: Option<Vec<u8>>,
    /// The materialized record an early-layout counter was seeded from.
    pub(super) early: Option<Vec<u8>>,
}

impl SyncManager {
    /// Applies one op: a no-op when its id was seen; otherwise the CRDT state, its
    /// materialized view, the seen-ops record and the op-log record (and any evictions)
    /// are written in ONE atomic batch.
    pub fn apply(&self, op: &Op) -> Result<Applied, SyncError> {
        let mut out = self.apply_batch(std::slice::from_ref(op))?;
        Ok(out.pop().unwrap_or(Applied::Duplicate))
    }

    /// Applies ops in order, grouping them into atomic store batches of at most
    /// [`SyncOptions::max_ops_per_batch`](crate::SyncOptions::max_ops_per_batch) ops (every op is all-or-nothing; on an error the
    /// batches before it stay applied). Duplicates — already seen, or repeated in `ops` —
    /// are no-ops. Returns one [`Applied`] per op.
    ///
    /// A batch that would store a record larger than [`SyncOptions::max_record_bytes`](crate::SyncOptions::max_record_bytes) is
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

    pub(super) fn apply_chunk(
        &self,
        inner: &mut Inner,
        ops: &[Op],
    ) -> Result<Vec<Applied>, SyncError> {
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
    pub(super) fn try_chunk(
        &self,
        inner: &mut Inner,
        ops: &[Op],
    ) -> Result<Option<Vec<Applied>>, SyncError> {
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
    pub(super) fn read_touched(&self, family: Family, key: &str) -> Result<Touched, SyncError> {
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
}
