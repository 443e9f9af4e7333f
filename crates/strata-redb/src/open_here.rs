//! The redb files this process has open, so that a second open of one is told apart from
//! a file another process holds (redb reports both as "already open").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static OPEN: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

pub(crate) fn register(path: &Path) {
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    *open.entry(canonical(path)).or_default() += 1;
}

pub(crate) fn unregister(path: &Path) {
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let key = canonical(path);
    if let Some(n) = open.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            open.remove(&key);
        }
    }
}

pub(crate) fn contains(path: &Path) -> bool {
    OPEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&canonical(path))
}
