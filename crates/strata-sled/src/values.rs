//! The exact write-through cache of recently written values.
//!
//! Every write of a [`SledStore`](crate::SledStore) goes through its `apply` (one process
//! holds the datastore: sled's file lock and the in-process `InUse` check), so the bytes a
//! key was last written with can be served to `get` without a tree traversal — provided
//! the cache and sled never disagree about a cached key. The rule that keeps them equal:
//!
//! * the keys are spread over *stripes*, each a mutex around its part of the cache;
//! * a write locks the stripes of every key it writes (in ascending stripe order, so two
//!   writes never wait for each other in a cycle), writes sled, then records the written
//!   values (a delete drops the key's entry; a failed or unknown outcome drops every
//!   written key's entry) and only then unlocks;
//! * a read locks its key's stripe only to look the key up; on a miss it reads sled
//!   without the lock and fills nothing.
//!
//! So for a cached key, the entry and sled's value only change together, under the
//! stripe's lock: a reader holding the lock sees the value of the last write that
//! completed, exactly what sled returns at that moment. A value is only ever entered from
//! a write that sled accepted, or from the current value sled reported to a failed
//! compare-and-swap (made with the key's stripe locked, so no write of the key landed
//! between sled's comparison and the record). A write that panics inside sled poisons the stripe; the next
//! lock of a poisoned stripe empties it.
//!
//! Bounded by entries and by bytes (key + value + [`ENTRY_OVERHEAD`] per entry), both split
//! evenly over the stripes; a value above a quarter of a stripe's byte bound is never
//! cached (its write drops the key's entry). When a stripe is full, an arbitrary entry of it
//! is dropped (not LRU: the cache only saves a read, it never changes a result).

use sled::IVec;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};

/// Bytes counted per entry on top of its key and value (hash-table slot, allocations).
pub(crate) const ENTRY_OVERHEAD: usize = 64;

/// Stripes at most (a power of two).
const MAX_STRIPES: usize = 64;

/// Entries per stripe below which fewer stripes are used (so small bounds stay useful).
const MIN_STRIPE_ENTRIES: usize = 32;

/// A multiplicative hash over 8-byte words, seeded per cache: far cheaper than SipHash on
/// the short keys of a write, and a stripe's bounded size (128 entries by default) caps
/// what colliding keys could cost.
fn hash_words(seed: u64, key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(K);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    // murmur3's finalizer: every output bit depends on every input bit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The [`BuildHasher`] of a stripe's table ([`hash_words`] with the cache's seed).
#[derive(Debug, Clone, Copy, Default)]
struct WordHash(u64);

/// Hashes the byte keys of a stripe; keys are hashed whole, through `write`.
#[derive(Debug, Default)]
struct WordHasher {
    seed: u64,
    h: u64,
}

impl BuildHasher for WordHash {
    type Hasher = WordHasher;
    fn build_hasher(&self) -> WordHasher {
        WordHasher { seed: self.0, h: 0 }
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.h ^= hash_words(self.seed, bytes);
    }
    fn write_usize(&mut self, n: usize) {
        // `Vec<u8>`/`[u8]` hash their length first; the word hash already mixes it in.
        let _ = n;
    }
    fn finish(&self) -> u64 {
        self.h
    }
}

/// One stripe: its entries and the bytes they count.
#[derive(Debug, Default)]
pub(crate) struct Stripe {
    map: HashMap<Vec<u8>, IVec, WordHash>,
    bytes: usize,
}

/// The bounds of one stripe.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    entries: usize,
    bytes: usize,
    value: usize,
}

fn cost(key: &[u8], value: &IVec) -> usize {
    key.len() + value.len() + ENTRY_OVERHEAD
}

impl Stripe {
    fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    fn forget(&mut self, key: &[u8]) {
        if let Some((k, v)) = self.map.remove_entry(key) {
            self.bytes -= cost(&k, &v);
        }
    }

    /// Records that `key` now holds `value` in sled.
    fn record(&mut self, bounds: Bounds, key: Vec<u8>, value: IVec) {
        let new = cost(&key, &value);
        if value.len() > bounds.value || new > bounds.bytes || bounds.entries == 0 {
            self.forget(&key);
            return;
        }
        if let Some(slot) = self.map.get_mut(key.as_slice()) {
            // The common case (a key written again): one lookup, the entry's key kept.
            self.bytes = self.bytes - cost(&key, slot) + new;
            *slot = value;
            if self.bytes > bounds.bytes {
                // (The entry count did not change.)
                self.shrink(bounds, &key, 0);
            }
        } else {
            if self.map.len() >= bounds.entries || self.bytes + new > bounds.bytes {
                self.shrink(bounds, &key, new);
            }
            self.bytes += new;
            self.map.insert(key, value);
        }
    }

    /// Drops arbitrary entries other than `keep` until `adding` more bytes (and, when
    /// adding, one more entry) fit the bounds. Clones a key per dropped entry: only under
    /// pressure. The entry being recorded alone always fits (checked by the caller).
    #[cold]
    #[inline(never)]
    fn shrink(&mut self, bounds: Bounds, keep: &[u8], adding: usize) {
        let extra = usize::from(adding > 0);
        while self.map.len() + extra > bounds.entries || self.bytes + adding > bounds.bytes {
            let victim = self.map.keys().find(|k| k.as_slice() != keep).cloned();
            match victim {
                Some(victim) => self.forget(&victim),
                None => break,
            }
        }
    }
}

/// The stripes of one store's value cache (shared by every clone).
#[derive(Debug)]
pub(crate) struct ValueCache {
    /// Empty when the cache is disabled.
    stripes: Box<[Mutex<Stripe>]>,
    bounds: Bounds,
    /// The seed of the key hash (random per cache).
    seed: u64,
}

impl ValueCache {
    /// A cache of at most `entries` entries and `bytes` bytes (0 for either: disabled).
    pub(crate) fn new(entries: usize, bytes: usize) -> Self {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5354_5241_5441u64);
        if entries == 0 || bytes == 0 {
            return ValueCache {
                stripes: Box::new([]),
                bounds: Bounds {
                    entries: 0,
                    bytes: 0,
                    value: 0,
                },
                seed,
            };
        }
        let count = (entries / MIN_STRIPE_ENTRIES).clamp(1, MAX_STRIPES);
        // The largest power of two not above `count`.
        let count = 1usize << (usize::BITS - 1 - count.leading_zeros());
        let stripe_bytes = bytes / count;
        ValueCache {
            stripes: (0..count)
                .map(|_| {
                    Mutex::new(Stripe {
                        map: HashMap::with_hasher(WordHash(seed)),
                        bytes: 0,
                    })
                })
                .collect(),
            bounds: Bounds {
                entries: entries / count,
                bytes: stripe_bytes,
                value: stripe_bytes / 4,
            },
            seed,
        }
    }

    /// True when the cache holds anything at all (its bounds are not zero).
    pub(crate) fn enabled(&self) -> bool {
        !self.stripes.is_empty()
    }

    /// The stripe of `key`. Call only when enabled.
    fn stripe_of(&self, key: &[u8]) -> usize {
        // The top bits (the table uses the low ones): the mask keeps the index below the
        // power-of-two stripe count.
        (hash_words(self.seed, key) >> 48) as usize & (self.stripes.len() - 1)
    }

    fn lock(&self, stripe: usize) -> Option<MutexGuard<'_, Stripe>> {
        let m = self.stripes.get(stripe)?;
        Some(m.lock().unwrap_or_else(|poisoned| {
            // A write panicked between sled and the cache: the entries may be stale.
            let mut g = poisoned.into_inner();
            g.clear();
            m.clear_poison();
            g
        }))
    }

    /// The cached value of `key`: exactly sled's current value (see the module docs).
    pub(crate) fn get(&self, key: &[u8]) -> Option<IVec> {
        if !self.enabled() {
            return None;
        }
        self.lock(self.stripe_of(key))?.get(key)
    }

    /// [`ValueCache::get`] as a copy, made under the stripe's lock (no reference count
    /// taken and dropped on the shared buffer).
    pub(crate) fn get_copy(&self, key: &[u8]) -> Option<Vec<u8>> {
        if !self.enabled() {
            return None;
        }
        self.lock(self.stripe_of(key))?
            .map
            .get(key)
            .map(|v| v.to_vec())
    }

    /// Locks the stripes of `keys` for a write (none when the cache is disabled).
    pub(crate) fn lock_keys<'a, 'k>(
        &'a self,
        keys: impl Iterator<Item = &'k [u8]>,
    ) -> WriteLock<'a> {
        if !self.enabled() {
            return WriteLock {
                cache: self,
                held: Held::None,
            };
        }
        let mut stripes: Vec<usize> = keys.map(|k| self.stripe_of(k)).collect();
        let held = if let [one] = stripes.as_slice() {
            match self.lock(*one) {
                Some(g) => Held::One(*one, (0, 0), g),
                None => Held::None,
            }
        } else {
            stripes.sort_unstable();
            stripes.dedup();
            Held::Many(
                stripes
                    .into_iter()
                    .filter_map(|s| self.lock(s).map(|g| (s, g)))
                    .collect(),
            )
        };
        WriteLock { cache: self, held }
    }

    /// Locks the stripe of one key for a write.
    pub(crate) fn lock_key(&self, key: &[u8]) -> WriteLock<'_> {
        let held = if self.enabled() {
            let s = self.stripe_of(key);
            match self.lock(s) {
                Some(g) => Held::One(s, (key.as_ptr() as usize, key.len()), g),
                None => Held::None,
            }
        } else {
            Held::None
        };
        WriteLock { cache: self, held }
    }

    /// How many entries and bytes the cache holds (tests).
    #[cfg(test)]
    pub(crate) fn usage(&self) -> (usize, usize) {
        (0..self.stripes.len())
            .filter_map(|s| self.lock(s))
            .fold((0, 0), |(n, b), g| (n + g.map.len(), b + g.bytes))
    }

    /// Every cached entry (tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..self.stripes.len())
            .filter_map(|s| self.lock(s))
            .flat_map(|g| {
                g.map
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Stripe {
    fn get(&self, key: &[u8]) -> Option<IVec> {
        self.map.get(key).cloned()
    }
}

enum Held<'a> {
    None,
    /// One stripe: its index, the address and length of the key it was locked for.
    One(usize, (usize, usize), MutexGuard<'a, Stripe>),
    Many(Vec<(usize, MutexGuard<'a, Stripe>)>),
}

/// The stripes a write holds from before its sled call until it has recorded the outcome
/// (dropping it unlocks them).
pub(crate) struct WriteLock<'a> {
    cache: &'a ValueCache,
    held: Held<'a>,
}

impl WriteLock<'_> {
    fn stripe(&mut self, key: &[u8]) -> Option<&mut Stripe> {
        match &mut self.held {
            Held::None => None,
            Held::One(s, (ptr, len), g) => {
                // The very bytes the lock was taken for (the key's buffer, moved along
                // with it) are known to be in this stripe; other keys are hashed again.
                let same = *ptr == key.as_ptr() as usize && *len == key.len();
                (same || *s == self.cache.stripe_of(key)).then_some(&mut **g)
            }
            Held::Many(all) => {
                let s = self.cache.stripe_of(key);
                all.iter_mut().find(|(i, _)| *i == s).map(|(_, g)| &mut **g)
            }
        }
    }

    /// `key` now holds `value` in sled (`None`: absent, or unknown after a failed write).
    pub(crate) fn record(&mut self, key: Vec<u8>, value: Option<IVec>) {
        let bounds = self.cache.bounds;
        if let Some(stripe) = self.stripe(&key) {
            match value {
                Some(v) => stripe.record(bounds, key, v),
                None => stripe.forget(&key),
            }
        }
    }

    /// The outcome for `key` is unknown (or it was deleted): drop its entry.
    pub(crate) fn forget(&mut self, key: &[u8]) {
        if let Some(stripe) = self.stripe(key) {
            stripe.forget(key);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn put(c: &ValueCache, key: &[u8], value: &[u8]) {
        c.lock_key(key)
            .record(key.to_vec(), Some(IVec::from(value)));
    }

    #[test]
    fn stripes_and_bounds_follow_the_configured_totals() {
        let c = ValueCache::new(8192, 8 << 20);
        assert_eq!(c.stripes.len(), 64);
        assert_eq!(c.bounds.entries, 128);
        assert_eq!(c.bounds.bytes, 128 << 10);
        assert_eq!(c.bounds.value, 32 << 10);
        let small = ValueCache::new(10, 10_000);
        assert_eq!(small.stripes.len(), 1);
        assert_eq!(small.bounds.entries, 10);
        let odd = ValueCache::new(100, 1 << 20);
        assert_eq!(odd.stripes.len(), 2);
        assert!(odd.stripes.len() * odd.bounds.entries <= 100);
        assert!(!ValueCache::new(0, 1 << 20).enabled());
        assert!(!ValueCache::new(100, 0).enabled());
        let off = ValueCache::new(0, 0);
        put(&off, b"k", b"v");
        assert_eq!(off.get(b"k"), None);
    }

    #[test]
    fn the_entry_bound_holds() {
        let c = ValueCache::new(8, 1 << 20);
        for i in 0..100u32 {
            put(&c, &i.to_be_bytes(), b"value");
            let (n, bytes) = c.usage();
            assert!(n <= 8, "{n} entries");
            assert_eq!(bytes, n * (4 + 5 + ENTRY_OVERHEAD));
        }
        // The last write is always kept.
        assert_eq!(c.get(&99u32.to_be_bytes()).unwrap(), b"value");
    }

    #[test]
    fn the_byte_bound_holds_and_large_values_are_not_cached() {
        let per = 4 + 100 + ENTRY_OVERHEAD;
        let c = ValueCache::new(20, per * 5);
        assert_eq!(c.stripes.len(), 1);
        for i in 0..50u32 {
            put(&c, &i.to_be_bytes(), &[7; 100]);
            let (n, bytes) = c.usage();
            assert!(n <= 5 && bytes <= per * 5, "{n} entries, {bytes} bytes");
        }
        // A value above a quarter of the stripe's bytes is not cached, and writing one
        // drops the key's older entry.
        put(&c, b"big", b"small");
        assert!(c.get(b"big").is_some());
        put(&c, b"big", &vec![1; per * 5 / 4 + 1]);
        assert_eq!(c.get(b"big"), None);
        // Rewriting a key keeps one entry with the new size.
        put(&c, b"k", b"1");
        put(&c, b"k", b"22");
        assert_eq!(c.get(b"k").unwrap(), b"22");
        let (n, bytes) = c.usage();
        let listed: usize = c
            .entries()
            .iter()
            .map(|(k, v)| k.len() + v.len() + ENTRY_OVERHEAD)
            .sum();
        assert_eq!(bytes, listed);
        assert_eq!(n, c.entries().len());
    }

    #[test]
    fn a_poisoned_stripe_is_emptied() {
        let c = ValueCache::new(8, 1 << 20);
        put(&c, b"k", b"v");
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = c.lock_key(b"k");
                    panic!("a write panicked while holding its stripe");
                })
                .join();
        });
        assert_eq!(c.get(b"k"), None);
        put(&c, b"k", b"w");
        assert_eq!(c.get(b"k").unwrap(), b"w");
    }

    #[test]
    fn a_write_lock_over_many_keys_takes_each_stripe_once() {
        let c = ValueCache::new(8192, 8 << 20);
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut lock = c.lock_keys(keys.iter().map(Vec::as_slice));
        for k in &keys {
            lock.record(k.clone(), Some(IVec::from(k.as_slice())));
        }
        lock.forget(&keys[0]);
        drop(lock);
        assert_eq!(c.usage().0, 199);
        assert_eq!(c.get(&keys[1]).unwrap(), keys[1].as_slice());
        assert_eq!(c.get(&keys[0]), None);
    }
}
