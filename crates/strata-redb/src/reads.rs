//! Reading the keys a write decides on, inside its write transaction.
//!
//! The write primitive reads every key a write decides on before the decision runs: one
//! key for a single write, a thousand for a bulk load's write set. One `get` per key
//! descends the B-tree once per key. When a write reads many keys of one table, they are
//! read in key order with one cursor instead: a load of new documents (an empty range,
//! or keys appended after the table's last) costs one descent for the whole set, and keys
//! that sit next to each other share their leaf. A cursor that steps over more than
//! [`MAX_STEPS`] stored keys without reaching the next key sought is moved to it by a new
//! descent, so a set scattered over a large table costs at most a few steps more per key
//! than the lookups it replaces. The values read are exactly those `get` returns (test
//! `tests::ordered_reads_equal_lookups`).

use crate::tables::WriteTables;
use redb::ReadableTable;
use smallvec::SmallVec;
use std::path::Path;
use strata_store::Result;

/// What [`read_all`] read, one slot per key: a one-document write (its document, maybe a
/// deploy-window record) reads without allocating.
pub(crate) type Slots<'a> = SmallVec<[Slot<'a>; 2]>;

/// A value read in a write transaction, borrowed from its table.
pub(crate) type Guard<'a> = redb::AccessGuard<'a, &'static [u8]>;

/// What a write read for one of its keys: the value, or `None` when the key is absent.
pub(crate) type Slot<'a> = Option<Guard<'a>>;

/// At least this many keys of one table are read with one ordered cursor.
const CURSOR_MIN: usize = 8;

/// A cursor that steps over more stored keys than this without reaching the next key
/// sought is moved to that key by a new descent.
const MAX_STEPS: usize = 16;

/// Reads every key of `reads`, in order, from the tables [`WriteTables::open_for`] opened
/// for them.
pub(crate) fn read_all<'a>(
    path: &Path,
    tables: &'a WriteTables<'_>,
    reads: &[&[u8]],
) -> Result<Slots<'a>> {
    let fail = |e: redb::StorageError| crate::map_error(path, e.into());
    if reads.len() < CURSOR_MIN {
        // Too few keys for a cursor: one lookup each (no bookkeeping).
        let mut slots = Slots::with_capacity(reads.len());
        for key in reads {
            slots.push(tables.opened(key)?.get(*key).map_err(fail)?);
        }
        return Ok(slots);
    }
    let mut slots: Vec<Option<Slot<'a>>> = Vec::with_capacity(reads.len());
    // The keys to read, by table (documents, the others).
    let mut groups: [Vec<(usize, &[u8])>; 2] = [Vec::new(), Vec::new()];
    for (i, key) in reads.iter().enumerate() {
        slots.push(None);
        groups[usize::from(!tables.is_document_table(key))].push((i, key));
    }
    for group in &mut groups {
        if group.len() >= CURSOR_MIN {
            let table = tables.opened(group[0].1)?;
            merge(table, group, &mut slots).map_err(fail)?;
        }
    }
    // The keys read on their own: those of small groups, a key read twice, the rest of a
    // group whose cursor failed to start.
    for (key, slot) in reads.iter().zip(slots.iter_mut()) {
        if slot.is_none() {
            *slot = Some(tables.opened(key)?.get(*key).map_err(fail)?);
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

/// Reads the keys of `keys` (indices into `slots`) from `table` with one ordered cursor,
/// filling their slots. A key sought twice is filled once (its other slots stay empty).
fn merge<'a>(
    table: &'a crate::tables::ByteTable<'_>,
    keys: &mut [(usize, &[u8])],
    slots: &mut [Option<Slot<'a>>],
) -> std::result::Result<(), redb::StorageError> {
    keys.sort_unstable_by(|a, b| a.1.cmp(b.1));
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let mut cursor = table.range::<&[u8]>(first.1..)?;
    let mut at = 0;
    let mut steps = 0;
    while at < keys.len() {
        let Some(entry) = cursor.next() else {
            // The table ends: every key still sought is absent.
            for (i, _) in &keys[at..] {
                slots[*i] = Some(None);
            }
            return Ok(());
        };
        let (stored, value) = entry?;
        let stored = stored.value();
        // Every key sought below the stored key the cursor reached is absent: the cursor
        // has visited every stored key since it was placed at or below them.
        while at < keys.len() && keys[at].1 < stored {
            slots[keys[at].0] = Some(None);
            at += 1;
            steps = 0;
        }
        let Some(&(i, sought)) = keys.get(at) else {
            break;
        };
        if sought == stored {
            slots[i] = Some(Some(value));
            at += 1;
            // The same key read again is looked up on its own.
            while keys.get(at).is_some_and(|k| k.1 == stored) {
                at += 1;
            }
            steps = 0;
        } else {
            steps += 1;
            if steps > MAX_STEPS {
                cursor = table.range::<&[u8]>(sought..)?;
                steps = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::tables::{Layout, DOCS, META};

    /// A small deterministic generator (no dependency for one test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % below
        }
    }

    fn doc_key(n: u64) -> Vec<u8> {
        format!("__nx/doc/c/{n:06}").into_bytes()
    }

    /// Every shape of read set (sizes around the cursor threshold, keys present and
    /// absent, sought twice, clustered and scattered over a table far larger than the
    /// set, before and after every stored key, mixed with keys of the other table) reads
    /// exactly what one `get` per key reads.
    #[test]
    fn ordered_reads_equal_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("r.redb")).unwrap();
        let mut rng = Lcg(7);
        {
            let txn = db.begin_write().unwrap();
            {
                let mut docs = txn.open_table(DOCS).unwrap();
                let mut meta = txn.open_table(META).unwrap();
                for n in (100..5_000).step_by(3) {
                    let v = format!("v{n}");
                    docs.insert(doc_key(n).as_slice(), v.as_bytes()).unwrap();
                }
                for n in 0..50u64 {
                    let k = format!("__nx/schema/{n:03}");
                    meta.insert(k.as_bytes(), b"s".as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let path = dir.path();
        for round in 0..300 {
            let size = [1, 7, 8, 9, 20, 200][round % 6];
            let spread = [10, 300, 6_000][round % 3];
            let base = rng.next(5_200);
            let mut keys: Vec<Vec<u8>> = (0..size)
                .map(|_| match rng.next(10) {
                    0 => format!("__nx/schema/{:03}", rng.next(70)).into_bytes(),
                    1 => b"__nx/zz-after-everything".to_vec(),
                    _ => doc_key(base + rng.next(spread)),
                })
                .collect();
            if size > 1 && round % 4 == 0 {
                let again = keys[0].clone();
                keys.push(again);
            }
            let reads: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let txn = db.begin_write().unwrap();
            let mut tables = WriteTables::new(&txn, path, Layout::Split);
            for k in &reads {
                tables.open_for(k).unwrap();
            }
            let slots = read_all(path, &tables, &reads).unwrap();
            assert_eq!(slots.len(), reads.len());
            for (key, slot) in reads.iter().zip(&slots) {
                let expected = tables
                    .opened(key)
                    .unwrap()
                    .get(*key)
                    .unwrap()
                    .map(|g| g.value().to_vec());
                let got = slot.as_ref().map(|g| g.value().to_vec());
                assert_eq!(got, expected, "round {round}: {key:?}");
            }
            drop(slots);
            drop(tables);
            txn.abort().unwrap();
        }
    }
}
