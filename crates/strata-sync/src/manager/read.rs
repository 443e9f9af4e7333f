//! Reads of the materialized tables, the sync bookkeeping and the op log.

use super::{
    refresh_index, scan_all, suffix_str, verify_store, with_key, ConsistencyReport, Inner,
    Sequences, SyncManager, SEQUENCES_KEY,
};
use crate::crdt::{CrdtState, Family};
use crate::SyncError;
use std::collections::BTreeMap;
use strata::numax::decode::DecodeError;
use strata::numax::wire::{self, OpLogEntry};
use strata_store::{KvRead, Pages, Store};

impl SyncManager {
    // ----- reads of the materialized tables (what an application reads) -----

    pub(super) fn get(&self, prefix: &str, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        Ok(self.store.get(&wire::key(prefix, key))?)
    }

    pub(super) fn read<T>(
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
            pages: self
                .options
                .limits()
                .ok()
                .map(|limits| Pages::new(&self.store, wire::OP_LOG_PREFIX.as_bytes(), limits)),
            page: Vec::new().into_iter(),
            done: false,
        }
    }

    // ----- stored state -----

    /// The stored CRDT state of `key` in `family` — for a counter in the early layout
    /// (materialized value, no state record), the state its value stands for (credited to
    /// [`SyncOptions::node_id`](crate::SyncOptions::node_id)).
    pub fn state(&self, family: Family, key: &str) -> Result<Option<CrdtState>, SyncError> {
        let t = self.read_touched(family, key)?;
        Ok((t.stored.is_some() || t.early.is_some()).then_some(t.state))
    }

    /// Every CRDT key with its state, ordered (bounded scans; holds them all in memory,
    /// for tests and small stores): every stored state record, and every counter stored
    /// in the early layout — a materialized value and no state record — with the state
    /// Numax hydrates for it (the value credited to this handle's node), as
    /// [`SyncManager::state`] serves it.
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
        for family in [Family::GCounter, Family::PNCounter] {
            let local = self.options.node_id.clone();
            scan_all(
                &self.store,
                family.materialized_prefix(),
                limits,
                |suffix, value| {
                    let key = suffix_str(family.materialized_table(), suffix)?;
                    if out.contains_key(&(family, key.to_string())) {
                        return Ok(());
                    }
                    if let Some(state) = CrdtState::from_early_layout(family, &local, value)
                        .map_err(|e| with_key(e, suffix))?
                    {
                        out.insert((family, key.to_string()), state);
                    }
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
    pub fn verify(&self) -> Result<ConsistencyReport, SyncError> {
        verify_store(&self.store, &self.options)
    }
}

/// Iterator over the durable op log (see [`SyncManager::op_log`]).
#[derive(Debug)]
pub struct OpLogReader<'a> {
    /// `None` when the options' scan limits are invalid (reported by the first `next`).
    pages: Option<Pages<'a, Store>>,
    page: std::vec::IntoIter<OpLogEntry>,
    done: bool,
}

impl OpLogReader<'_> {
    /// Decodes the next page into `self.page`; `false` when there is none.
    pub(super) fn fill(&mut self) -> Result<bool, SyncError> {
        let Some(pages) = self.pages.as_mut() else {
            return Err(SyncError::Refused {
                reason: "invalid scan limits for the op log; use limits of at least 1".into(),
            });
        };
        let Some(page) = pages.next() else {
            return Ok(false);
        };
        let page = page?;
        let prefix = wire::OP_LOG_PREFIX.as_bytes();
        let mut entries = Vec::with_capacity(page.records.len());
        for r in &page.records {
            let suffix = &r.key[prefix.len()..];
            let id = suffix_str("op-log", suffix)?;
            entries.push(wire::decode_op_log_record(id, &r.value).map_err(|e| e.with_key(suffix))?);
        }
        self.page = entries.into_iter();
        Ok(true)
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
            match self.fill() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
