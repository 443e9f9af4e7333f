//! The write path's view of the live manifests ([`ManifestWatch`]): every ordinary batch
//! through a [`Store`](crate::Store) retires the manifests of the scopes it writes, and
//! marks the scopes armed for certification (see the parent module).

use super::{read_manifests, Manifest, MANIFEST_EPOCH_KEY, MANIFEST_PREFIX};
use crate::{Backend, Batch, Decide, Mutation, Precondition, Result, StoreError};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How often one write is retried after another process changed the manifests.
const EPOCH_ATTEMPTS: usize = 8;

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
    /// True for a store several processes write (its backend has a cross-process lease):
    /// writes then carry the manifest epoch.
    shared: bool,
    /// `None` until loaded at the first write (and, on a shared store, after another
    /// process changed the manifests).
    live: RwLock<Option<Loaded>>,
    armed: Mutex<Vec<Armed>>,
    /// `armed.len()`, changed only under the `armed` mutex: a write that reads 0 skips
    /// the mutex (see [`ManifestWatch::prepare`] for why that loses nothing).
    armed_count: AtomicUsize,
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
        self.watch.armed_count.store(armed.len(), Ordering::Release);
    }
}

fn is_manifest_mutation(m: &Mutation) -> bool {
    m.key().starts_with(MANIFEST_PREFIX)
}

/// `batch` also requiring the manifest epoch `loaded` (pushed after its own
/// preconditions, so that an observation the batch declared still covers exactly those),
/// and replacing it with `next`.
pub(super) fn with_epoch(
    mut batch: Batch,
    loaded: Option<Vec<u8>>,
    next: Option<Vec<u8>>,
) -> Batch {
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
pub(super) fn new_epoch() -> Vec<u8> {
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
    /// The view of a store handle; `shared`: several processes write the store (its
    /// backend has a [cross-process lease](crate::Capabilities::cross_process_lease), a
    /// property of the backend that never changes).
    pub(crate) fn new(shared: bool) -> Self {
        ManifestWatch {
            shared,
            ..ManifestWatch::default()
        }
    }

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

    /// The loaded list, read-locked (loaded first if it is not). One-process stores only
    /// (there the list, once loaded, is never dropped).
    fn loaded(&self, backend: &dyn Backend) -> Result<RwLockReadGuard<'_, Option<Loaded>>> {
        let g = self.read();
        if g.is_some() {
            return Ok(g);
        }
        drop(g);
        self.load(backend, false)?;
        Ok(self.read())
    }

    /// Drops the loaded list: the next write loads it again.
    fn forget(&self) {
        *self.write() = None;
    }

    /// Arms `prefix` (see [`ArmedScope`]).
    pub(crate) fn arm(self: &Arc<Self>, prefix: &[u8]) -> ArmedScope {
        let touched = Arc::new(AtomicBool::new(false));
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        armed.push(Armed {
            prefix: prefix.to_vec(),
            touched: Arc::clone(&touched),
        });
        self.armed_count.store(armed.len(), Ordering::Release);
        drop(armed);
        ArmedScope {
            watch: Arc::clone(self),
            touched,
        }
    }

    /// The write primitive ([`crate::KvWrite::read_modify_write`]) through `backend`,
    /// keeping the manifests honest (module docs): the batch the decision returns also
    /// deletes the live manifests whose scope it writes, and marks the armed scopes it
    /// touches, inside the same backend write.
    ///
    /// On a store shared by several processes (a backend with a cross-process lease) the
    /// batch also requires the manifest epoch its handle loaded (and a batch that changes
    /// manifests replaces it): when another process recorded or dropped manifests since,
    /// that precondition fails, the handle reloads the list and the write is made again,
    /// now deleting the manifests its writes retire. One-process stores (sled, redb,
    /// memory) load the list once and never need the epoch.
    pub(crate) fn read_modify_write(
        &self,
        backend: &dyn Backend,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
    ) -> Result<bool> {
        if !self.shared {
            let mut stash = None;
            let written = {
                // An ordinary write on a one-process store: one read lock of the list for
                // its decision and its commit.
                let g = self.loaded(backend)?;
                let live = g.as_ref().map(|l| l.live.as_slice()).unwrap_or_default();
                let mut hits = Vec::new();
                let written = backend.read_modify_write(reads, &mut |values| {
                    let mut batch = decide(values)?;
                    if batch.mutations().iter().any(is_manifest_mutation) {
                        // Records or drops manifests: alone (below).
                        stash = Some(batch);
                        return None;
                    }
                    hits = self.prepare(live, &mut batch);
                    Some(batch)
                })?;
                drop(g);
                if stash.is_none() {
                    if written {
                        self.retire(&hits);
                    }
                    return Ok(written);
                }
                written
            };
            debug_assert!(!written);
            // A decision that read nothing is not made again (it is called once).
            let stash = stash.filter(|_| reads.is_empty());
            return self.write_exclusive(backend, reads, decide, stash, false);
        }
        // The batch decided on no reads, kept for a retry after the epoch moved.
        let mut memo: Option<Batch> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.load(backend, true)?;
            let last = attempt >= EPOCH_ATTEMPTS;
            match self.write_shared_once(backend, reads, decide, &mut memo) {
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

    /// One attempt of [`Self::read_modify_write`] on a shared store, with the list as loaded.
    fn write_shared_once(
        &self,
        backend: &dyn Backend,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
        memo: &mut Option<Batch>,
    ) -> Result<bool> {
        let mut exclusive = false;
        {
            let g = self.read();
            let loaded = g.as_ref();
            let live = loaded.map(|l| l.live.as_slice()).unwrap_or_default();
            let epoch = loaded.and_then(|l| l.epoch.clone());
            let mut hits = Vec::new();
            let written = backend.read_modify_write(reads, &mut |values| {
                let mut batch = decided(reads, values, decide, memo)?;
                if batch.mutations().iter().any(is_manifest_mutation) {
                    exclusive = true;
                    return None;
                }
                hits = self.prepare(live, &mut batch);
                Some(with_epoch(batch, epoch.clone(), None))
            })?;
            drop(g);
            if !exclusive {
                if written {
                    self.retire(&hits);
                }
                return Ok(written);
            }
        }
        let stash = if reads.is_empty() { memo.clone() } else { None };
        self.write_exclusive(backend, reads, decide, stash, true)
    }

    /// A write whose batch records or drops manifests: alone (the list write-locked), so
    /// no ordinary write can slip between its checks and its commit. `stash`: the batch
    /// already decided, for a write that reads nothing (its decision is made once).
    fn write_exclusive(
        &self,
        backend: &dyn Backend,
        reads: &[&[u8]],
        decide: &mut Decide<'_>,
        mut stash: Option<Batch>,
        shared: bool,
    ) -> Result<bool> {
        let mut g = self.write();
        let loaded = g.get_or_insert_with(Loaded::default);
        let next_epoch = shared.then(new_epoch);
        let mut hits = Vec::new();
        let mut changes = Vec::new();
        let written = {
            let live = &loaded.live;
            let epoch = &loaded.epoch;
            backend.read_modify_write(reads, &mut |values| {
                let mut batch = match stash.take() {
                    Some(b) => b,
                    None => decide(values)?,
                };
                hits = self.prepare(live, &mut batch);
                // Drop a manifest whose armed scope an ordinary write touched meanwhile.
                let (mut mutations, preconditions) = batch.into_parts();
                {
                    let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
                    mutations.retain(|m| match m {
                        Mutation::Set { key, value } if key.starts_with(MANIFEST_PREFIX) => {
                            let prefix = Manifest::decode(value).ok().map(|m| m.prefix_bytes());
                            let touched = armed.iter().any(|a| {
                                Some(&a.prefix) == prefix.as_ref()
                                    && a.touched.load(Ordering::SeqCst)
                            });
                            if touched {
                                tracing::warn!(key = %crate::escape_key(key), "a write touched the scope while it was being certified; its manifest is not recorded");
                            }
                            !touched
                        }
                        _ => true,
                    });
                }
                changes = mutations
                    .iter()
                    .filter(|m| is_manifest_mutation(m))
                    .cloned()
                    .collect();
                let batch = Batch::from_parts(mutations, preconditions);
                Some(if shared {
                    with_epoch(batch, epoch.clone(), next_epoch.clone())
                } else {
                    batch
                })
            })?
        };
        if !written {
            return Ok(false);
        }
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
        Ok(true)
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
        // No scope armed (the common case): the mutex is not taken. This loses nothing:
        // `armed_count` changes only under the mutex, with the list. A write that reads 0
        // reads a value from before the increment of any `arm` whose registration it
        // would otherwise have met, so it behaves exactly as if it had taken the mutex
        // before that `arm` did — which the mutex allowed as well (an armed scope is only
        // promised the writes that check after it was armed; a write that checks before
        // is ordered before the arming, exactly as when its mutex section came first). A
        // stale non-zero count only takes the mutex and finds nothing.
        if self.armed_count.load(Ordering::Acquire) != 0
            && !batch.mutations().iter().any(is_manifest_mutation)
        {
            self.mark_armed(|prefix| batch.mutations().iter().any(|m| scoped(prefix, m)));
        }
        hits
    }

    /// Marks the armed scopes an ordinary write touches (`writes(prefix)`: it writes a key
    /// under `prefix`).
    #[cold]
    #[inline(never)]
    fn mark_armed(&self, writes: impl Fn(&[u8]) -> bool) {
        let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        for a in armed.iter() {
            if writes(&a.prefix) {
                a.touched.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// The batch of a decision on a shared store: decided again on fresh values, or — for a
/// write that reads nothing, whose decision is made once — the one decided first.
fn decided(
    reads: &[&[u8]],
    values: &[Option<&[u8]>],
    decide: &mut Decide<'_>,
    memo: &mut Option<Batch>,
) -> Option<Batch> {
    if !reads.is_empty() {
        return decide(values);
    }
    if let Some(b) = memo {
        return Some(b.clone());
    }
    let b = decide(values)?;
    *memo = Some(b.clone());
    Some(b)
}
