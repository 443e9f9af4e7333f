//! Key arithmetic: prefix ranges and advisory-lock ids.

/// The smallest byte string greater than every string starting with `prefix`, or `None`
/// when there is none (`prefix` is empty or made only of `0xFF` bytes): the exclusive
/// upper bound of a prefix range.
pub(crate) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last != 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// 64-bit FNV-1a: a hash that is the same in every process and every build (the advisory
/// lock ids derived from it must agree across all processes sharing a table).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate the parts so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The advisory-lock ids of one table: the table-wide lock (one `bigint` key) and the
/// class of its per-key locks (the first `int4` of the two-`int4` key space, which does
/// not overlap the `bigint` one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockIds {
    pub(crate) table: i64,
    pub(crate) class: i32,
    /// The store lease: held exclusively (session-level) by the lease holder, shared
    /// (transaction-level) by every other batch.
    pub(crate) lease: i64,
}

/// The lock that serializes creating the lease table (one per database).
pub(crate) const LEASE_TABLE_LOCK: i64 = 0x7374_7261_7461_4c54; // "strataLT"

impl LockIds {
    pub(crate) fn new(table: &str) -> Self {
        let h = fnv1a(&[b"strata-postgres", table.as_bytes()]);
        LockIds {
            // Reinterpret the bits: any value is a valid lock id.
            table: h as i64,
            class: (fnv1a(&[b"class", &h.to_be_bytes()]) >> 32) as u32 as i32,
            lease: fnv1a(&[b"strata-postgres-lease", table.as_bytes()]) as i64,
        }
    }

    /// The per-key lock ids of `keys`, sorted and deduplicated (every transaction takes
    /// its locks in this one global order, so they cannot deadlock each other).
    pub(crate) fn key_locks<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) -> Vec<i32> {
        let mut ids: Vec<i32> = keys
            .map(|k| {
                let h = fnv1a(&[k]);
                // Fold the 64-bit hash into the 32-bit object id.
                ((h >> 32) as u32 ^ h as u32) as i32
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_increments_the_last_non_ff_byte() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"a\xfe\xff\xff"), Some(b"a\xff".to_vec()));
        assert_eq!(successor(b"\x00"), Some(b"\x01".to_vec()));
    }

    #[test]
    fn all_ff_and_empty_prefixes_have_no_successor() {
        assert_eq!(successor(b""), None);
        assert_eq!(successor(b"\xff"), None);
        assert_eq!(successor(b"\xff\xff\xff"), None);
    }

    #[test]
    fn successor_bounds_exactly_the_prefix_range() {
        let prefix = b"t/\xff";
        let upper = successor(prefix).unwrap();
        for inside in [&b"t/\xff"[..], b"t/\xff\x00", b"t/\xff\xff\xff"] {
            assert!(inside.starts_with(prefix) && inside < upper.as_slice());
        }
        for outside in [&b"t0"[..], b"u"] {
            assert!(outside >= upper.as_slice());
        }
    }

    #[test]
    fn lock_ids_are_stable_sorted_and_deduplicated() {
        // Pinned: other processes (other builds) must derive the same ids.
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        let ids = LockIds::new("strata_kv");
        assert_eq!(ids.table, LockIds::new("strata_kv").table);
        assert_ne!(ids.table, LockIds::new("strata_kv2").table);
        let keys: Vec<&[u8]> = vec![b"b", b"a", b"b", b"c"];
        let locks = ids.key_locks(keys.into_iter());
        assert_eq!(locks.len(), 3);
        assert!(locks.windows(2).all(|w| w[0] < w[1]));
    }
}
