//! The sequence record (`__nx/sync/sequences`) and the in-memory sequence indexes.

use super::SEQUENCES_KEY;
use crate::SyncError;
use std::collections::{BTreeMap, HashMap};

const SEQUENCES_MAGIC: &[u8; 4] = b"NXSQ";
const SEQUENCES_FORMAT: u16 = 1;
const SEQUENCES_LEN: usize = 24;

/// The decoded sequence record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Sequences {
    pub(super) next_seen: u64,
    pub(super) next_log: u64,
}

impl Sequences {
    pub(super) fn encode(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SEQUENCES_LEN);
        out.extend_from_slice(SEQUENCES_MAGIC);
        out.extend_from_slice(&SEQUENCES_FORMAT.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.next_seen.to_be_bytes());
        out.extend_from_slice(&self.next_log.to_be_bytes());
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, SyncError> {
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
pub(super) struct SeqIndex {
    pub(super) by_seq: BTreeMap<u64, String>,
    pub(super) by_id: HashMap<String, u64>,
    pub(super) known_until: u64,
}

impl SeqIndex {
    pub(super) fn insert(&mut self, seq: u64, id: &str) {
        if let Some(old) = self.by_id.insert(id.to_string(), seq) {
            self.by_seq.remove(&old);
        }
        self.by_seq.insert(seq, id.to_string());
    }

    /// The entries with a sequence below `cut`.
    pub(super) fn below(&self, cut: u64) -> Vec<String> {
        self.by_seq.range(..cut).map(|(_, id)| id.clone()).collect()
    }

    pub(super) fn drop_below(&mut self, cut: u64) {
        let keep = self.by_seq.split_off(&cut);
        for id in std::mem::replace(&mut self.by_seq, keep).into_values() {
            self.by_id.remove(&id);
        }
    }

    pub(super) fn max_next(&self) -> u64 {
        self.by_seq
            .last_key_value()
            .map(|(s, _)| s.saturating_add(1))
            .unwrap_or(0)
    }
}
