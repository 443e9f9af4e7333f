//! The in-memory backend.

use crate::scan::{Offer, PageBuilder};
use crate::{Backend, Batch, KvRead, KvWrite, Mutation, Result, ScanLimits, ScanPage};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

/// An ordered in-memory backend (a `BTreeMap` behind a lock). Clones share the data.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    map: Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys (all prefixes).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// A copy of every record, for tests and fixtures.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.read().clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl KvRead for MemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.read().get(key).cloned())
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        let map = self.read();
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_vec()),
            _ => Bound::Included(prefix.to_vec()),
        };
        let mut page = PageBuilder::new(limits);
        for (k, v) in map.range((start, Bound::Unbounded)) {
            if !k.starts_with(prefix) {
                break;
            }
            match page.offer(k, v.len())? {
                Offer::Take => page.push(k.clone(), v.clone()),
                Offer::Stop => break,
            }
        }
        Ok(page.finish())
    }

    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        let map = self.read();
        Ok(map
            .range(prefix.to_vec()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(prefix)))
    }
}

impl KvWrite for MemoryStore {
    fn apply(&self, batch: Batch) -> Result<()> {
        batch.validate()?;
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        for p in batch.preconditions() {
            p.check(map.get(p.key()).map(Vec::as_slice))?;
        }
        let (mutations, _) = batch.into_parts();
        for m in mutations {
            match m {
                Mutation::Set { key, value } => {
                    map.insert(key, value);
                }
                Mutation::Delete { key } => {
                    map.remove(&key);
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

impl Backend for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }
}
