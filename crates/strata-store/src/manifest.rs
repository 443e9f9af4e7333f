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
//! [arms](Store::arm_manifest_scope) the scope before its final count, and a manifest
//! whose scope an ordinary write touched meanwhile is dropped from the final batch
//! (the operation still completes, uncertified) rather than recorded wrong.
//!
//! [`Store`]: crate::Store

use crate::{
    Backend, Batch, KvRead, Mutation, Precondition, Result, ScanLimits, StoreError, Visit,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Every manifest lives under this prefix: `__nx/manifest/<operation>/<scope>`.
pub const MANIFEST_PREFIX: &[u8] = b"__nx/manifest/";

/// On a store shared by several processes: the manifest **epoch**, an opaque value that
/// every batch recording or dropping manifests replaces, and that every write requires
/// to be the value its handle loaded its manifest list with. A handle whose list is stale
/// therefore fails that one precondition (in the same round trip as the write itself),
/// reloads the list and writes again — instead of rescanning `__nx/manifest/` before
/// every write.
pub const MANIFEST_EPOCH_KEY: &[u8] = b"__nx/manifest-epoch";

/// How often one write is retried after another process changed the manifests.
const EPOCH_ATTEMPTS: usize = 8;

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
    let mut cursor: Option<Vec<u8>> = None;
    let limits = ScanLimits::new(1_000, 4 << 20)?;
    loop {
        let mut last = None;
        let mut too_large = None;
        let end = store.scan_visit(prefix, cursor.as_deref(), limits, &mut |k, v| {
            if !overlay.contains_key(k) {
                tally.add(k, v);
            }
            last = Some(k.to_vec());
            Visit::Continue
        });
        let end = match end {
            Ok(end) => end,
            Err(StoreError::RecordTooLarge { key, .. }) => {
                too_large = Some(key);
                crate::VisitEnd {
                    records: 0,
                    more: true,
                }
            }
            Err(e) => return Err(e),
        };
        if let Some(key) = too_large {
            // One record over the page budget: read it on its own.
            if !overlay.contains_key(key.as_slice()) {
                if let Some(v) = store.get(&key)? {
                    tally.add(&key, &v);
                }
            }
            cursor = Some(key);
            continue;
        }
        match last {
            Some(k) if end.more => cursor = Some(k),
            _ => break,
        }
    }
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
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
            prefix: hex(prefix),
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
        if unhex(&m.prefix).is_none() {
            return Err("its prefix is not hex".into());
        }
        Ok(m)
    }

    /// The scope's key prefix.
    pub fn prefix_bytes(&self) -> Vec<u8> {
        unhex(&self.prefix).unwrap_or_default()
    }
}

/// One stored manifest: its key, and the manifest or why it does not decode.
pub type StoredManifest = (Vec<u8>, std::result::Result<Manifest, String>);

/// Every manifest stored in `store`.
pub fn read_manifests<S: KvRead + ?Sized>(store: &S) -> Result<Vec<StoredManifest>> {
    let mut out = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    let limits = ScanLimits::new(256, 4 << 20)?;
    loop {
        let page = store.scan(MANIFEST_PREFIX, cursor.as_deref(), limits)?;
        let next = page.cursor().map(<[u8]>::to_vec);
        let more = page.more;
        for r in page.records {
            let m = Manifest::decode(&r.value);
            out.push((r.key, m));
        }
        match next {
            Some(k) if more => cursor = Some(k),
            _ => break,
        }
    }
    Ok(out)
}

/// A live manifest as the write path sees it.
#[derive(Debug)]
struct Live {
    id: u64,
    key: Vec<u8>,
    prefix: Vec<u8>,
}

/// The live manifests as loaded, and the epoch they were loaded at (shared stores).
#[derive(Debug, Default)]
struct Loaded {
    live: Vec<Live>,
    /// The value of [`MANIFEST_EPOCH_KEY`] read before the list (`None`: absent).
    epoch: Option<Vec<u8>>,
}

/// A scope armed for certification (see [`ArmedScope`]).
#[derive(Debug)]
struct Armed {
    prefix: Vec<u8>,
    touched: Arc<AtomicBool>,
}

/// The write path's view of the live manifests of one store handle (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct ManifestWatch {
    /// `None` until loaded at the first write (and, on a shared store, after another
    /// process changed the manifests).
    live: RwLock<Option<Loaded>>,
    armed: Mutex<Vec<Armed>>,
    next_id: AtomicU64,
}

/// A scope armed for certification: while it lives, an ordinary write under its prefix
/// marks it touched, and a manifest for that prefix is then dropped from the batch that
/// would record it. Dropping the guard disarms it.
#[derive(Debug)]
pub struct ArmedScope {
    watch: Arc<ManifestWatch>,
    touched: Arc<AtomicBool>,
}

impl ArmedScope {
    /// True when an ordinary write touched the scope since it was armed.
    pub fn touched(&self) -> bool {
        self.touched.load(Ordering::SeqCst)
    }
}

impl Drop for ArmedScope {
    fn drop(&mut self) {
        let mut armed = self.watch.armed.lock().unwrap_or_else(|e| e.into_inner());
        armed.retain(|a| !Arc::ptr_eq(&a.touched, &self.touched));
    }
}

fn is_manifest_mutation(m: &Mutation) -> bool {
    m.key().starts_with(MANIFEST_PREFIX)
}

/// `batch` also requiring the manifest epoch `loaded` (pushed after its own
/// preconditions, so that an observation the batch declared still covers exactly those),
/// and replacing it with `next`.
fn with_epoch(mut batch: Batch, loaded: Option<Vec<u8>>, next: Option<Vec<u8>>) -> Batch {
    batch.push_precondition(match loaded {
        Some(value) => Precondition::Equals {
            key: MANIFEST_EPOCH_KEY.to_vec(),
            value,
        },
        None => Precondition::Absent {
            key: MANIFEST_EPOCH_KEY.to_vec(),
        },
    });
    if let Some(next) = next {
        batch.push(Mutation::Set {
            key: MANIFEST_EPOCH_KEY.to_vec(),
            value: next,
        });
    }
    batch
}

/// A new epoch value: unique across processes and time (pid, clock, a counter, hashed).
fn new_epoch() -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(std::process::id().to_le_bytes());
    h.update(nanos.to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.finalize()[..16].to_vec()
}

impl ManifestWatch {
    fn read(&self) -> RwLockReadGuard<'_, Option<Loaded>> {
        self.live.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<Loaded>> {
        self.live.write().unwrap_or_else(|e| e.into_inner())
    }

    fn live_entry(&self, key: Vec<u8>, value: &[u8]) -> Option<Live> {
        let m = Manifest::decode(value).ok()?;
        Some(Live {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            key,
            prefix: m.prefix_bytes(),
        })
    }

    /// Loads the live manifests once per handle (again after [`Self::forget`]). On a
    /// store shared by several processes the epoch is read first, then the list: a list
    /// at least as new as its epoch.
    fn load(&self, backend: &dyn Backend, shared: bool) -> Result<()> {
        if self.read().is_some() {
            return Ok(());
        }
        let mut g = self.write();
        if g.is_none() {
            let epoch = if shared {
                backend.get(MANIFEST_EPOCH_KEY)?
            } else {
                None
            };
            let mut live = Vec::new();
            for (key, m) in read_manifests(backend)? {
                // A manifest that does not decode guards nothing (verify reports it).
                if let Ok(m) = m {
                    live.push(Live {
                        id: self.next_id.fetch_add(1, Ordering::Relaxed),
                        key,
                        prefix: m.prefix_bytes(),
                    });
                }
            }
            *g = Some(Loaded { live, epoch });
        }
        Ok(())
    }

    /// Drops the loaded list: the next write loads it again.
    fn forget(&self) {
        *self.write() = None;
    }

    /// Arms `prefix` (see [`ArmedScope`]).
    pub(crate) fn arm(self: &Arc<Self>, prefix: &[u8]) -> ArmedScope {
        let touched = Arc::new(AtomicBool::new(false));
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Armed {
                prefix: prefix.to_vec(),
                touched: Arc::clone(&touched),
            });
        ArmedScope {
            watch: Arc::clone(self),
            touched,
        }
    }

    /// Applies `batch` to `backend`, keeping the manifests honest (module docs).
    ///
    /// On a store shared by several processes (a backend with a cross-process lease) the
    /// batch also requires the manifest epoch its handle loaded (and a batch that changes
    /// manifests replaces it): when another process recorded or dropped manifests since,
    /// that precondition fails, the handle reloads the list and the batch is applied
    /// again, now deleting the manifests its writes retire. One-process stores (sled,
    /// redb, memory) load the list once and never need the epoch.
    pub(crate) fn apply(&self, backend: &dyn Backend, batch: Batch) -> Result<()> {
        let shared = backend.cross_process_lease().is_some();
        if !shared {
            self.load(backend, false)?;
            return self.apply_once(backend, batch, false);
        }
        let mut batch = batch;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.load(backend, true)?;
            let last = attempt >= EPOCH_ATTEMPTS;
            // A copy is kept for a retry (the backend consumes the batch).
            let this = if last {
                std::mem::take(&mut batch)
            } else {
                batch.clone()
            };
            match self.apply_once(backend, this, true) {
                Err(StoreError::Conflict { key, .. }) if key == MANIFEST_EPOCH_KEY && !last => {
                    tracing::debug!(
                        attempt,
                        "another process changed the manifests; reloading them"
                    );
                    self.forget();
                }
                other => return other,
            }
        }
    }

    /// [`Self::apply`] handing a batch refused by a failed precondition back
    /// ([`crate::KvWrite::apply_or_return`]). An ordinary batch on a one-process store
    /// goes to the backend's own `apply_or_return` (the deletions of the manifests it
    /// retires, added here, are taken off the batch handed back); the other paths (a
    /// store shared by several processes, a batch that records or drops manifests)
    /// rebuild or retry the batch and keep a copy.
    pub(crate) fn apply_or_return(
        &self,
        backend: &dyn Backend,
        batch: Batch,
    ) -> std::result::Result<(), crate::Refused> {
        use crate::Refused;
        if backend.cross_process_lease().is_some()
            || batch.mutations().iter().any(is_manifest_mutation)
        {
            let copy = (!batch.preconditions().is_empty()).then(|| batch.clone());
            return self
                .apply(backend, batch)
                .map_err(|error| Refused::new(error, copy));
        }
        self.load(backend, false)
            .map_err(|error| Refused::new(error, None))?;
        let mut batch = batch;
        let given = batch.mutations().len();
        let g = self.read();
        let hits = self.prepare(
            g.as_ref().map(|l| l.live.as_slice()).unwrap_or_default(),
            &mut batch,
        );
        if let Err(mut refused) = backend.apply_or_return(batch) {
            if let Some(b) = refused.batch.as_mut() {
                b.truncate_mutations(given);
            }
            return Err(refused);
        }
        drop(g);
        self.retire(&hits);
        Ok(())
    }

    /// Forgets the live manifests a committed ordinary batch deleted.
    fn retire(&self, hits: &[u64]) {
        if !hits.is_empty() {
            let mut g = self.write();
            if let Some(loaded) = g.as_mut() {
                loaded.live.retain(|l| !hits.contains(&l.id));
            }
        }
    }

    /// One attempt of [`Self::apply`] with the list as loaded (`shared`: with the epoch).
    fn apply_once(&self, backend: &dyn Backend, mut batch: Batch, shared: bool) -> Result<()> {
        let writes_manifests = batch.mutations().iter().any(is_manifest_mutation);
        if !writes_manifests {
            // An ordinary batch: shared with other ordinary batches.
            let g = self.read();
            let loaded = g.as_ref();
            let hits = self.prepare(
                loaded.map(|l| l.live.as_slice()).unwrap_or_default(),
                &mut batch,
            );
            if shared {
                batch = with_epoch(batch, loaded.and_then(|l| l.epoch.clone()), None);
            }
            backend.apply(batch)?;
            drop(g);
            self.retire(&hits);
            return Ok(());
        }
        // A batch that records or drops manifests: alone, so no ordinary batch can slip
        // between its checks and its commit.
        let mut g = self.write();
        let loaded = g.get_or_insert_with(Loaded::default);
        let hits = self.prepare(&loaded.live, &mut batch);
        // Drop a manifest whose armed scope an ordinary write touched meanwhile.
        let (mut mutations, preconditions) = batch.into_parts();
        {
            let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
            mutations.retain(|m| match m {
                Mutation::Set { key, value } if key.starts_with(MANIFEST_PREFIX) => {
                    let prefix = Manifest::decode(value).ok().map(|m| m.prefix_bytes());
                    let touched = armed.iter().any(|a| {
                        Some(&a.prefix) == prefix.as_ref() && a.touched.load(Ordering::SeqCst)
                    });
                    if touched {
                        tracing::warn!(key = %crate::escape_key(key), "a write touched the scope while it was being certified; its manifest is not recorded");
                    }
                    !touched
                }
                _ => true,
            });
        }
        let mut batch = Batch::new();
        for p in preconditions {
            batch.push_precondition(p);
        }
        let mut changes = Vec::new();
        for m in mutations {
            if is_manifest_mutation(&m) {
                changes.push(m.clone());
            }
            batch.push(m);
        }
        let next_epoch = shared.then(new_epoch);
        if shared {
            batch = with_epoch(batch, loaded.epoch.clone(), next_epoch.clone());
        }
        backend.apply(batch)?;
        if shared {
            loaded.epoch = next_epoch;
        }
        let live = &mut loaded.live;
        live.retain(|l| !hits.contains(&l.id));
        for m in changes {
            live.retain(|l| l.key != m.key());
            if let Mutation::Set { key, value } = m {
                if let Some(entry) = self.live_entry(key, &value) {
                    live.push(entry);
                }
            }
        }
        Ok(())
    }

    /// Adds to `batch` the deletion of every live manifest whose scope it writes (unless
    /// the batch itself records that manifest) and marks armed scopes it touches. Returns
    /// the ids of the manifests it deletes.
    fn prepare(&self, live: &[Live], batch: &mut Batch) -> Vec<u64> {
        let mut hits = Vec::new();
        let scoped =
            |prefix: &[u8], m: &Mutation| !is_manifest_mutation(m) && m.key().starts_with(prefix);
        for l in live {
            let sets_it = batch.mutations().iter().any(|m| m.key() == l.key);
            if !sets_it && batch.mutations().iter().any(|m| scoped(&l.prefix, m)) {
                hits.push(l.id);
            }
        }
        for l in live.iter().filter(|l| hits.contains(&l.id)) {
            batch.push(Mutation::Delete { key: l.key.clone() });
        }
        let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        if !armed.is_empty() && !batch.mutations().iter().any(is_manifest_mutation) {
            for a in armed.iter() {
                if batch.mutations().iter().any(|m| scoped(&a.prefix, m)) {
                    a.touched.store(true, Ordering::SeqCst);
                }
            }
        }
        hits
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
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
