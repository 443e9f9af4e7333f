//! Shared helpers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use strata_store::{
    Backend, Batch, KvRead, KvWrite, MemoryStore, Record, ScanLimits, Store, StoreError,
};
use strata_sync::{Op, OpKind, SyncManager};

pub fn memory() -> Store {
    Store::new(MemoryStore::new())
}

pub fn manager() -> SyncManager {
    SyncManager::open(memory()).unwrap()
}

/// Every record of the store (bounded pages).
pub fn dump(store: &impl KvRead) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        let page = store
            .scan(
                b"",
                cursor.as_deref(),
                ScanLimits::new(1000, 64 << 20).unwrap(),
            )
            .unwrap();
        out.extend(page.records.iter().cloned());
        if !page.more {
            return out;
        }
        cursor = page.cursor().map(<[u8]>::to_vec);
    }
}

/// A deterministic op for index `i`, cycling through every kind over a few keys.
pub fn op_for(i: u64) -> Op {
    let key = format!("k{}", i % 3);
    let node = format!("node-{}", i % 4);
    let s = |v: String| v;
    let kind = match i % 10 {
        0 => OpKind::GCounterIncrement {
            key,
            increment: i % 7 + 1,
        },
        1 => OpKind::PNCounterIncrement {
            key,
            increment: i % 5 + 1,
        },
        2 => OpKind::PNCounterDecrement {
            key,
            decrement: i % 3 + 1,
        },
        3 => OpKind::LwwRegisterSet {
            key,
            value: i.to_le_bytes().to_vec(),
            timestamp_ms: i / 3,
        },
        4 => OpKind::LwwMapSet {
            key,
            field: format!("f{}", i % 5),
            value: vec![(i % 251) as u8],
            timestamp_ms: i / 2,
        },
        5 => OpKind::LwwMapRemove {
            key,
            field: format!("f{}", (i / 10) % 5),
            timestamp_ms: i / 2,
        },
        6 => OpKind::ORSetAdd {
            key,
            element: format!("e{}", i % 6),
            tag: format!("t{i}"),
        },
        7 => OpKind::ORSetRemove {
            key,
            element: format!("e{}", (i / 10) % 6),
            observed_tags: vec![format!("t{}", i.saturating_sub(1))],
        },
        8 => OpKind::RgaInsert {
            key,
            id: format!("el-{i:08}"),
            parent: i.checked_sub(10).map(|p| format!("el-{p:08}")),
            value: vec![(i % 256) as u8],
        },
        _ => OpKind::RgaDelete {
            key,
            id: format!("el-{:08}", i.saturating_sub(21)),
        },
    };
    Op::new(s(format!("op-{i:08}")), node, kind)
}

/// A memory backend whose writes fail while the flag is set.
#[derive(Debug)]
pub struct FailingStore {
    inner: MemoryStore,
    fail: Arc<AtomicBool>,
}

impl KvRead for FailingStore {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for FailingStore {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::backend("memory", "injected write failure"));
        }
        self.inner.read_modify_write(reads, decide)
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}

impl Backend for FailingStore {
    fn name(&self) -> &'static str {
        "failing"
    }
}

pub fn failing() -> (Store, Arc<AtomicBool>) {
    let fail = Arc::new(AtomicBool::new(false));
    (
        Store::new(FailingStore {
            inner: MemoryStore::new(),
            fail: fail.clone(),
        }),
        fail,
    )
}

/// What a [`Recording`] backend saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Per applied batch: (op-log sets, op-log deletes, seen-op sets, seen-op deletes).
    pub batches: Vec<(usize, usize, usize, usize)>,
    /// Op-log records returned by scans.
    pub op_log_scanned: usize,
}

/// A memory backend that records its batches and scans.
#[derive(Debug)]
pub struct Recording {
    inner: MemoryStore,
    pub seen: Arc<std::sync::Mutex<Seen>>,
}

impl KvRead for Recording {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        let mut n = 0;
        // Records a scan returns (a page's visitor takes every record); a probe that stops
        // at the first one (`prefix_exists`) returns none.
        let end = self.inner.scan_visit(prefix, after, limits, &mut |k, v| {
            let next = visit(k, v);
            if next == strata_store::Visit::Continue && k.starts_with(b"__nx/crdt/op-log/") {
                n += 1;
            }
            next
        })?;
        self.seen.lock().unwrap().op_log_scanned += n;
        Ok(end)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for Recording {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let mut counts = (0, 0, 0, 0);
        let written = self.inner.read_modify_write(reads, &mut |values| {
            let batch = decide(values)?;
            counts = count(&batch);
            Some(batch)
        })?;
        if written {
            self.seen.lock().unwrap().batches.push(counts);
        }
        Ok(written)
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}

/// (op-log sets, op-log deletes, seen-op sets, seen-op deletes) of a batch.
fn count(batch: &Batch) -> (usize, usize, usize, usize) {
    {
        let mut counts = (0, 0, 0, 0);
        for m in batch.mutations() {
            let set = matches!(m, strata_store::Mutation::Set { .. });
            if m.key().starts_with(b"__nx/crdt/op-log/") {
                if set {
                    counts.0 += 1
                } else {
                    counts.1 += 1
                }
            } else if m.key().starts_with(b"__nx/crdt/seen-op/") {
                if set {
                    counts.2 += 1
                } else {
                    counts.3 += 1
                }
            }
        }
        counts
    }
}

impl Backend for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
}

pub fn recording() -> (Store, Arc<std::sync::Mutex<Seen>>) {
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    (
        Store::new(Recording {
            inner: MemoryStore::new(),
            seen: seen.clone(),
        }),
        seen,
    )
}

/// A grow-only increment of `key` by 1 from `node`.
pub fn plus_one(id: &str, node: &str, key: &str) -> Op {
    Op::new(
        id,
        node,
        OpKind::GCounterIncrement {
            key: key.to_string(),
            increment: 1,
        },
    )
}

/// (sequence, op id) of every op-log record, by sequence.
pub fn op_log_by_seq(sync: &SyncManager) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = sync
        .op_log()
        .map(|e| {
            let e = e.unwrap();
            (e.sequence, e.op.id)
        })
        .collect();
    v.sort();
    v
}

/// (sequence, op id) of every seen-op record, by sequence.
pub fn seen_by_seq(sync: &SyncManager) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = sync
        .seen_ops()
        .unwrap()
        .into_iter()
        .map(|(id, s)| (s, id))
        .collect();
    v.sort();
    v
}
