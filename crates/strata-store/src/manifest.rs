//! Bulk-operation manifests: how `strata verify` tells a store that lost records from a
//! healthy one.
//!
//! A bulk operation (migrate, the eager sweep, the cutover) that has just certified a
//! **scope** (a table or a collection: every key under one prefix) records, in its final
//! atomic batch, a [`Manifest`] under `__nx/manifest/<operation>/<scope>`: the record
//! count, the byte count and an order-independent digest of every key and value in the
//! scope as that batch leaves it ([`Tally`]). `strata verify` recounts each scope that has
//! a manifest and compares.
//!
//! **A manifest is authoritative only until the next write to its scope.** The [`Store`]
//! handle enforces this without a hot key: it keeps the live manifests' prefixes in
//! memory (one scan of `__nx/manifest/` at the first write of the handle), and the first
//! ordinary batch that writes under a live manifest's prefix also deletes that manifest,
//! in the same atomic batch. Later writes find no live manifest and cost one read-locked
//! check. On a store several processes write (PostgreSQL), another process may record a
//! manifest after a handle loaded its list: there every manifest batch replaces the
//! [`MANIFEST_EPOCH_KEY`] and every write requires the epoch its handle loaded, so a stale
//! handle's write fails that precondition, reloads the list and is applied again. So a live manifest always describes the scope exactly as the operation left it
//! — unless something wrote behind strata's back (another tool, a damaged file, a lost
//! log tail), which is exactly what `verify` reports.
//!
//! A scope is certified while application writers run (the eager sweep): the operation
//! [arms](crate::Store::arm_manifest_scope) the scope before its final count, and a manifest
//! whose scope an ordinary write touched meanwhile is dropped from the final batch
//! (the operation still completes, uncertified) rather than recorded wrong.
//!
//! [`Store`]: crate::Store

mod watch;

pub use watch::ArmedScope;
pub(crate) use watch::ManifestWatch;

use crate::{Batch, KvRead, Mutation, Result, ScanLimits, Visit};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Every manifest lives under this prefix: `__nx/manifest/<operation>/<scope>`.
pub const MANIFEST_PREFIX: &[u8] = b"__nx/manifest/";

/// On a store shared by several processes: the manifest **epoch**, an opaque value that
/// every batch recording or dropping manifests replaces, and that every write requires
/// to be the value its handle loaded its manifest list with. A handle whose list is stale
/// therefore fails that one precondition (in the same round trip as the write itself),
/// reloads the list and writes again — instead of rescanning `__nx/manifest/` before
/// every write.
pub const MANIFEST_EPOCH_KEY: &[u8] = b"__nx/manifest-epoch";

/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// The key of the manifest `operation` records for `scope`.
pub fn manifest_key(operation: &str, scope: &str) -> Vec<u8> {
    [
        MANIFEST_PREFIX,
        operation.as_bytes(),
        b"/",
        scope.as_bytes(),
    ]
    .concat()
}

/// Count, bytes and an order-independent digest of a set of records.
///
/// Each record hashes as SHA-256 over key length (u64 LE), key, value length (u64 LE),
/// value; the digest is the sum of those hashes taken as four little-endian u64 lanes
/// (each lane wrapping). Order-independent, so a tally can be merged from pieces (the
/// committed part of a scope plus the final batch that is not committed yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Records.
    pub records: u64,
    /// Key plus value bytes.
    pub bytes: u64,
    lanes: [u64; 4],
}

impl Tally {
    /// Adds one record.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let mut h = Sha256::new();
        h.update((key.len() as u64).to_le_bytes());
        h.update(key);
        h.update((value.len() as u64).to_le_bytes());
        h.update(value);
        let out = h.finalize();
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&out[i * 8..i * 8 + 8]);
            *lane = lane.wrapping_add(u64::from_le_bytes(b));
        }
        self.records += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }

    /// The digest as `sum256:<64 hex digits>`.
    pub fn digest(&self) -> String {
        let mut s = String::from("sum256:");
        for lane in self.lanes {
            for b in lane.to_le_bytes() {
                s.push_str(&format!("{b:02x}"));
            }
        }
        s
    }
}

/// Tallies every record under `prefix` as `store` holds it, overlaid with the mutations of
/// `pending` (a batch about to commit): a key the batch sets counts with its new value, a
/// key it deletes does not count. Reads in pages of 1,000 records / 4 MiB (a larger record
/// is read alone).
pub fn tally_scope<S: KvRead + ?Sized>(
    store: &S,
    prefix: &[u8],
    pending: Option<&Batch>,
) -> Result<Tally> {
    use std::collections::BTreeMap;
    // Last mutation per key wins, as in the batch.
    let mut overlay: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
    for m in pending.map(Batch::mutations).unwrap_or_default() {
        if !m.key().starts_with(prefix) {
            continue;
        }
        match m {
            Mutation::Set { key, value } => overlay.insert(key, Some(value)),
            Mutation::Delete { key } => overlay.insert(key, None),
        };
    }
    let mut tally = Tally::default();
    crate::Pages::new(store, prefix, ScanLimits::new(1_000, 4 << 20)?)
        .oversize(crate::Oversize::ReadAlone)
        .visit(|k, v| {
            if !overlay.contains_key(k) {
                tally.add(k, v);
            }
            Visit::Continue
        })?;
    for (k, v) in overlay {
        if let Some(v) = v {
            tally.add(k, v);
        }
    }
    Ok(tally)
}

/// What a bulk operation certified about one scope (JSON, format 1), stored under
/// [`manifest_key`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The operation that certified the scope (`migrate`, `sweep`, `cutover`).
    pub operation: String,
    /// The table or collection.
    pub scope: String,
    /// The scope's key prefix, hex.
    pub prefix: String,
    /// When the operation finished, Unix milliseconds (wall clock of the writer).
    pub at_ms: u64,
    /// Records under the prefix.
    pub records: u64,
    /// Their key plus value bytes.
    pub bytes: u64,
    /// Their [`Tally::digest`].
    pub digest: String,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Manifest {
    /// The manifest of `tally` for `scope` (its key prefix `prefix`), stamped now.
    pub fn new(operation: &str, scope: &str, prefix: &[u8], tally: &Tally) -> Self {
        Manifest {
            format: MANIFEST_FORMAT,
            operation: operation.to_string(),
            scope: scope.to_string(),
            prefix: crate::to_hex(prefix),
            at_ms: now_ms(),
            records: tally.records,
            bytes: tally.bytes,
            digest: tally.digest(),
        }
    }

    /// Tallies `prefix` in `store` overlaid with `pending` ([`tally_scope`]) and pushes the
    /// manifest into `pending`, so it commits with it.
    pub fn record<S: KvRead + ?Sized>(
        store: &S,
        operation: &str,
        scope: &str,
        prefix: &[u8],
        pending: &mut Batch,
    ) -> Result<Manifest> {
        let tally = tally_scope(store, prefix, Some(pending))?;
        let m = Manifest::new(operation, scope, prefix, &tally);
        pending.push(Mutation::Set {
            key: m.key(),
            value: m.encode(),
        });
        Ok(m)
    }

    /// Where it is stored.
    pub fn key(&self) -> Vec<u8> {
        manifest_key(&self.operation, &self.scope)
    }

    /// The stored bytes (JSON).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes stored bytes.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if m.format != MANIFEST_FORMAT {
            return Err(format!(
                "manifest format {} is not supported (this build reads format {MANIFEST_FORMAT})",
                m.format
            ));
        }
        if crate::from_hex(&m.prefix).is_none() {
            return Err("its prefix is not hex".into());
        }
        Ok(m)
    }

    /// The scope's key prefix.
    pub fn prefix_bytes(&self) -> Vec<u8> {
        crate::from_hex(&self.prefix).unwrap_or_default()
    }
}

/// One stored manifest: its key, and the manifest or why it does not decode.
pub type StoredManifest = (Vec<u8>, std::result::Result<Manifest, String>);

/// Every manifest stored in `store`.
pub fn read_manifests<S: KvRead + ?Sized>(store: &S) -> Result<Vec<StoredManifest>> {
    crate::Pages::new(store, MANIFEST_PREFIX, ScanLimits::new(256, 4 << 20)?)
        .records()
        .map(|r| r.map(|r| (r.key, Manifest::decode(&r.value))))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::watch::{new_epoch, with_epoch};
    use super::*;
    use crate::{KvWrite, MemoryStore, Store};

    fn store_with(n: u8) -> Store {
        let store = Store::new(MemoryStore::new());
        let mut b = Batch::new();
        for i in 0..n {
            b = b.set(vec![b't', b'/', i], vec![i; 3]);
        }
        b = b.set(b"u/x".to_vec(), b"other".to_vec());
        store.apply(b).unwrap();
        store
    }

    fn certify(store: &Store) -> Manifest {
        let mut b = Batch::new();
        let m = Manifest::record(store, "migrate", "t", b"t/", &mut b).unwrap();
        store.apply(b).unwrap();
        m
    }

    #[test]
    fn the_tally_is_order_independent_and_overlays_the_pending_batch() {
        let mut a = Tally::default();
        a.add(b"k1", b"v1");
        a.add(b"k2", b"v2");
        let mut b = Tally::default();
        b.add(b"k2", b"v2");
        b.add(b"k1", b"v1");
        assert_eq!(a, b);
        assert_ne!(a.digest(), Tally::default().digest());
        let store = store_with(4);
        let pending = Batch::new()
            .delete(vec![b't', b'/', 0])
            .set(vec![b't', b'/', 9], b"new".to_vec())
            .set(b"u/y".to_vec(), b"out of scope".to_vec());
        let overlaid = tally_scope(&store, b"t/", Some(&pending)).unwrap();
        store.apply(pending).unwrap();
        assert_eq!(overlaid, tally_scope(&store, b"t/", None).unwrap());
        assert_eq!(overlaid.records, 4);
    }

    #[test]
    fn the_first_write_to_a_scope_retires_its_manifest_and_others_do_not() {
        let store = store_with(5);
        let m = certify(&store);
        assert_eq!(m.records, 5);
        let key = manifest_key("migrate", "t");
        assert!(store.get(&key).unwrap().is_some());
        // Outside the scope: the manifest stays.
        store
            .apply(Batch::new().set(b"u/z".to_vec(), b"1".to_vec()))
            .unwrap();
        assert!(store.get(&key).unwrap().is_some());
        // A fresh handle on the same backend loads it from disk and retires it on the
        // first write under `t/`.
        let other = Store::from_arc(store.unguarded_backend());
        other
            .apply(Batch::new().delete(vec![b't', b'/', 1]))
            .unwrap();
        assert_eq!(other.get(&key).unwrap(), None);
        // Re-certified through the first handle, whose cache still held it as live.
        certify(&store);
        assert!(store.get(&key).unwrap().is_some());
        store
            .apply(Batch::new().set(vec![b't', b'/', 7], b"x".to_vec()))
            .unwrap();
        assert_eq!(store.get(&key).unwrap(), None);
    }

    #[test]
    fn a_one_process_store_needs_no_manifest_epoch() {
        let store = store_with(3);
        certify(&store);
        store
            .apply(Batch::new().set(vec![b't', b'/', 9], b"x".to_vec()))
            .unwrap();
        assert_eq!(store.get(MANIFEST_EPOCH_KEY).unwrap(), None);
        assert_eq!(store.get(&manifest_key("migrate", "t")).unwrap(), None);
    }

    #[test]
    fn the_epoch_batch_requires_the_loaded_epoch_and_sets_the_next() {
        let b = Batch::new()
            .require_absent(b"a".to_vec())
            .set(b"a".to_vec(), b"1".to_vec());
        let b = with_epoch(b, Some(b"e1".to_vec()), Some(b"e2".to_vec()));
        assert_eq!(
            b.preconditions()[1],
            crate::Precondition::Equals {
                key: MANIFEST_EPOCH_KEY.to_vec(),
                value: b"e1".to_vec()
            }
        );
        assert_eq!(b.preconditions().len(), 2);
        assert_eq!(b.mutations().last().unwrap().key(), MANIFEST_EPOCH_KEY);
        assert_ne!(new_epoch(), new_epoch());
    }

    #[test]
    fn a_write_behind_the_stores_back_leaves_the_manifest_stale() {
        let store = store_with(5);
        let m = certify(&store);
        // Behind strata's back: straight to the backend.
        store
            .unguarded_backend()
            .apply(Batch::new().delete(vec![b't', b'/', 2]))
            .unwrap();
        let (_, stored) = read_manifests(&store).unwrap().pop().unwrap();
        let stored = stored.unwrap();
        assert_eq!(stored, m);
        let now = tally_scope(&store, &stored.prefix_bytes(), None).unwrap();
        assert_eq!(now.records, 4);
        assert_ne!(now.digest(), stored.digest);
    }

    #[test]
    fn a_scope_touched_while_armed_is_not_certified() {
        let store = store_with(3);
        let armed = store.arm_manifest_scope(b"t/");
        let mut b = Batch::new();
        Manifest::record(&store, "sweep", "t", b"t/", &mut b).unwrap();
        store
            .apply(Batch::new().delete(vec![b't', b'/', 0]))
            .unwrap();
        assert!(armed.touched());
        store.apply(b).unwrap();
        assert_eq!(store.get(&manifest_key("sweep", "t")).unwrap(), None);
        drop(armed);
        // Untouched: recorded.
        let armed = store.arm_manifest_scope(b"t/");
        let mut b = Batch::new();
        Manifest::record(&store, "sweep", "t", b"t/", &mut b).unwrap();
        store.apply(b).unwrap();
        assert!(!armed.touched());
        assert!(store.get(&manifest_key("sweep", "t")).unwrap().is_some());
    }

    #[test]
    fn a_single_key_write_retires_manifests_and_touches_armed_scopes_like_a_batch() {
        use crate::KeyWrite;
        let store = store_with(3);
        certify(&store);
        let key = manifest_key("migrate", "t");
        // Outside the scope: the manifest stays.
        store
            .compare_and_swap(KeyWrite::set(b"u/k".to_vec(), None, b"1".to_vec()))
            .unwrap();
        assert!(store.get(&key).unwrap().is_some());
        // A refused write in the scope retires nothing.
        let stale = KeyWrite::set(vec![b't', b'/', 0], None, b"x".to_vec());
        assert!(store.compare_and_swap(stale).unwrap_err().is_conflict());
        assert!(store.get(&key).unwrap().is_some());
        // In the scope: retired in the same write.
        store
            .compare_and_swap(KeyWrite::set(
                vec![b't', b'/', 0],
                Some(vec![0; 3]),
                b"x".to_vec(),
            ))
            .unwrap();
        assert_eq!(store.get(&key).unwrap(), None);
        assert_eq!(store.get(&[b't', b'/', 0]).unwrap(), Some(b"x".to_vec()));
        // An armed scope is touched by a single-key write under its prefix only.
        let armed = store.arm_manifest_scope(b"t/");
        store
            .compare_and_swap(KeyWrite::set(
                b"u/k".to_vec(),
                Some(b"1".to_vec()),
                b"2".to_vec(),
            ))
            .unwrap();
        assert!(!armed.touched());
        store
            .compare_and_swap(KeyWrite::delete(vec![b't', b'/', 1], vec![1; 3]))
            .unwrap();
        assert!(armed.touched());
        drop(armed);
        // A decided write (`read_modify_write`) in a certified scope retires its manifest
        // too, and touches an armed scope; a refused one retires nothing.
        certify(&store);
        assert!(store.get(&key).unwrap().is_some());
        let doc = vec![b't', b'/', 2];
        assert!(!store.read_modify_write(&[&doc], &mut |_| None).unwrap());
        assert!(store.get(&key).unwrap().is_some());
        store
            .read_modify_write(&[&doc], &mut |_| {
                Some(Batch::new().set(doc.clone(), b"d".to_vec()))
            })
            .unwrap();
        assert_eq!(store.get(&key).unwrap(), None);
        assert_eq!(store.get(&[b't', b'/', 2]).unwrap(), Some(b"d".to_vec()));
        let armed = store.arm_manifest_scope(b"t/");
        store
            .read_modify_write(&[&doc], &mut |_| Some(Batch::new().delete(doc.clone())))
            .unwrap();
        assert!(armed.touched());
        drop(armed);
        // Disarmed: a write no longer touches a later armed scope's flag.
        let again = store.arm_manifest_scope(b"v/");
        store
            .compare_and_swap(KeyWrite::set(b"t/new".to_vec(), None, b"1".to_vec()))
            .unwrap();
        assert!(!again.touched());
    }

    #[test]
    fn undecodable_manifests_are_reported_not_trusted() {
        let store = Store::new(MemoryStore::new());
        store
            .apply(Batch::new().set(manifest_key("migrate", "x"), b"{".to_vec()))
            .unwrap();
        let all = read_manifests(&store).unwrap();
        assert_eq!(all.len(), 1);
        assert!(all[0].1.is_err());
        let future = br#"{"format":9,"operation":"a","scope":"b","prefix":"","at_ms":0,"records":0,"bytes":0,"digest":""}"#;
        assert!(Manifest::decode(future).unwrap_err().contains("format 9"));
    }
}
