//! What a batch with per-row conditions keeps so that, refused because rows changed since
//! they were read, it can be narrowed and retried without processing any row again: each
//! conditioned row's key and the bytes read, and every mutation of the batch.
//!
//! The batch handed to the store owns its mutations and preconditions (the store consumes
//! it, also when it refuses it), so the retry needs its own copy. It is kept in ONE byte
//! buffer per pass, cleared after every batch and reused (its capacity stays), plus two
//! index vectors: no allocation per row once the first batch has grown them. The retry
//! (rare: a concurrent writer changed rows of this very batch) rebuilds owned mutations
//! and preconditions from it.

use std::ops::Range;
use strata_store::{Mutation, Precondition};

/// The retry copy of one batch (see the module docs).
#[derive(Default)]
pub(super) struct Kept {
    /// Every kept key and value, back to back.
    bytes: Vec<u8>,
    /// The batch's mutations, in order.
    mutations: Vec<KeptMutation>,
    /// The conditioned rows, in order.
    rows: Vec<KeptRow>,
}

/// One kept mutation: ranges into [`Kept::bytes`].
struct KeptMutation {
    key: Range<usize>,
    /// `None`: a delete.
    value: Option<Range<usize>>,
}

/// One conditioned row: its key and the bytes read (ranges into [`Kept::bytes`]), and the
/// range of its mutations in [`Kept::mutations`].
struct KeptRow {
    key: Range<usize>,
    old: Range<usize>,
    mutations: Range<usize>,
}

impl Kept {
    fn push_bytes(&mut self, b: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        start..self.bytes.len()
    }

    /// Keeps a copy of `m` (the next mutation of the batch).
    pub(super) fn push_mutation(&mut self, m: &Mutation) {
        let kept = match m {
            Mutation::Set { key, value } => KeptMutation {
                key: self.push_bytes(key),
                value: Some(self.push_bytes(value)),
            },
            Mutation::Delete { key } => KeptMutation {
                key: self.push_bytes(key),
                value: None,
            },
        };
        self.mutations.push(kept);
    }

    /// The number of mutations kept so far (where the next row's mutations start).
    pub(super) fn mutation_count(&self) -> usize {
        self.mutations.len()
    }

    /// Keeps a conditioned row: `key` read as `old`, its mutations from `first` on
    /// (pushed before this call).
    pub(super) fn push_row(&mut self, key: &[u8], old: &[u8], first: usize) {
        let key = self.push_bytes(key);
        let old = self.push_bytes(old);
        self.rows.push(KeptRow {
            key,
            old,
            mutations: first..self.mutations.len(),
        });
    }

    /// True when no row is conditioned.
    pub(super) fn has_rows(&self) -> bool {
        !self.rows.is_empty()
    }

    /// Forgets the batch, keeping the capacity for the next one.
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.mutations.clear();
        self.rows.clear();
    }

    /// The conditioned rows' keys and the bytes read, in order.
    pub(super) fn rows(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.rows
            .iter()
            .map(|r| (&self.bytes[r.key.clone()], &self.bytes[r.old.clone()]))
    }

    /// One precondition per conditioned row: it still holds the bytes read.
    pub(super) fn preconditions(&self, slack: usize) -> Vec<Precondition> {
        let mut out = Vec::with_capacity(self.rows.len().saturating_add(slack));
        for (key, old) in self.rows() {
            out.push(Precondition::Equals {
                key: key.to_vec(),
                value: old.to_vec(),
            });
        }
        out
    }

    /// The kept mutations, owned again (for a retry).
    pub(super) fn mutations(&self, slack: usize) -> Vec<Mutation> {
        let mut out = Vec::with_capacity(self.mutations.len().saturating_add(slack));
        for m in &self.mutations {
            let key = self.bytes[m.key.clone()].to_vec();
            out.push(match &m.value {
                Some(v) => Mutation::Set {
                    key,
                    value: self.bytes[v.clone()].to_vec(),
                },
                None => Mutation::Delete { key },
            });
        }
        out
    }

    /// Drops the rows at `changed` (indexes into [`Kept::rows`], ascending) and their
    /// mutations; returns the dropped rows' keys. The bytes stay in the buffer (unused)
    /// until [`Kept::clear`].
    pub(super) fn drop_rows(&mut self, changed: &[usize]) -> Vec<Vec<u8>> {
        let dropped = changed
            .iter()
            .map(|&i| self.bytes[self.rows[i].key.clone()].to_vec())
            .collect();
        let mut keep = vec![true; self.mutations.len()];
        for &i in changed {
            for j in self.rows[i].mutations.clone() {
                keep[j] = false;
            }
        }
        // Where each remaining mutation moves to.
        let mut new_index = Vec::with_capacity(keep.len() + 1);
        let mut next = 0;
        for k in &keep {
            new_index.push(next);
            if *k {
                next += 1;
            }
        }
        new_index.push(next);
        let mut idx = 0;
        self.mutations.retain(|_| {
            let k = keep[idx];
            idx += 1;
            k
        });
        let mut i = 0;
        self.rows.retain(|_| {
            let k = changed.binary_search(&i).is_err();
            i += 1;
            k
        });
        for r in &mut self.rows {
            r.mutations = new_index[r.mutations.start]..new_index[r.mutations.end];
        }
        dropped
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn set(k: &str, v: &str) -> Mutation {
        Mutation::Set {
            key: k.as_bytes().to_vec(),
            value: v.as_bytes().to_vec(),
        }
    }

    /// Fills `kept` with rows `r0..r{n}` whose values differ in length, each with its own
    /// set and (every other row) a delete of another key.
    fn fill(kept: &mut Kept, n: usize, tag: &str) -> Vec<Mutation> {
        let mut all = Vec::new();
        for i in 0..n {
            let first = kept.mutation_count();
            let key = format!("t/r{i}");
            let mut ms = vec![set(&key, &format!("{tag}-new-{}", "x".repeat(i * 7)))];
            if i % 2 == 0 {
                ms.push(Mutation::Delete {
                    key: format!("o/{tag}{i}").into_bytes(),
                });
            }
            for m in &ms {
                kept.push_mutation(m);
            }
            kept.push_row(key.as_bytes(), format!("{tag}-old-{i}").as_bytes(), first);
            all.extend(ms);
        }
        all
    }

    #[test]
    fn a_reused_buffer_gives_back_exactly_this_batch() {
        let mut kept = Kept::default();
        // A larger batch first, then a smaller one in the same (cleared) buffer: nothing
        // of the first may show in the second.
        fill(&mut kept, 9, "first");
        kept.clear();
        let expected = fill(&mut kept, 4, "second");
        assert_eq!(kept.mutations(0), expected);
        let pre = kept.preconditions(0);
        assert_eq!(pre.len(), 4);
        for (i, p) in pre.iter().enumerate() {
            assert_eq!(
                *p,
                Precondition::Equals {
                    key: format!("t/r{i}").into_bytes(),
                    value: format!("second-old-{i}").into_bytes(),
                }
            );
        }
    }

    #[test]
    fn dropping_rows_drops_exactly_their_mutations() {
        let mut kept = Kept::default();
        let all = fill(&mut kept, 5, "b");
        // Rows 1 and 2 changed: row 1 has one mutation, row 2 two.
        let dropped = kept.drop_rows(&[1, 2]);
        assert_eq!(dropped, [b"t/r1".to_vec(), b"t/r2".to_vec()]);
        let gone: Vec<&[u8]> = vec![b"t/r1", b"t/r2", b"o/b2"];
        let left: Vec<Mutation> = all
            .into_iter()
            .filter(|m| !gone.contains(&m.key()))
            .collect();
        assert_eq!(kept.mutations(0), left);
        let keys: Vec<&[u8]> = kept.rows().map(|(k, _)| k).collect();
        assert_eq!(keys, [&b"t/r0"[..], b"t/r3", b"t/r4"]);
        // A second narrowing of the narrowed batch: the ranges were re-indexed.
        let dropped = kept.drop_rows(&[0]);
        assert_eq!(dropped, [b"t/r0".to_vec()]);
        let ms = kept.mutations(0);
        let keys: Vec<&[u8]> = ms.iter().map(Mutation::key).collect();
        assert_eq!(keys, [&b"t/r3"[..], b"t/r4", b"o/b4"]);
        assert_eq!(
            kept.preconditions(0)[1],
            Precondition::Equals {
                key: b"t/r4".to_vec(),
                value: b"b-old-4".to_vec()
            }
        );
    }
}
