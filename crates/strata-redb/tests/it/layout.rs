//! The physical layout (documents in `strata_doc`, every other key in `strata`): scans
//! spanning both tables see exactly one ordered key space (checked against the in-memory
//! store and against a layout-1 file), a layout-1 file (every key in `strata`, written by
//! raw redb the way older builds wrote it) is moved on a writable open and read as it is
//! on a read-only one, without changing a byte.

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::path::Path;
use strata_redb::{RedbStore, CURRENT_LAYOUT, DOCUMENT_PREFIX, LAYOUT_KEY};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Record, ScanLimits, Visit};

/// Layout 1's one table (every key).
const LEGACY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata");
/// Layout 2: the keys that are not documents.
const META: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata_meta");
const DOCS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata_doc");
/// Layout 2's marker, under layout 1's table name with another type.
const LAYOUTS: TableDefinition<&str, u64> = TableDefinition::new("strata");

/// Keys on both sides of every table boundary: application keys, metadata sorting before
/// and after `__nx/doc/`, keys that look like the document prefix but are not, documents of
/// several collections, bytes above 0x7f.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [
        &b"a/1"[..],
        b"zz",
        b"\xff\xfe",
        b"_",
        b"__nx/",
        b"__nx/catalog/acc",
        b"__nx/catalog-seq",
        b"__nx/d",
        b"__nx/doc",
        b"__nx/doc.",
        b"__nx/doc/",
        b"__nx/doc0",
        b"__nx/doc/\xff",
        b"__nx/fence",
        b"__nx/manifest/migrate/acc",
        b"__nx/schema/acc",
        b"__nx/window/acc",
        b"__nx/crdt/x",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    for c in ["acc", "b", "zeta"] {
        for i in 0..40 {
            keys.push(format!("__nx/doc/{c}/{i:04}").into_bytes());
        }
    }
    keys
}

fn value(key: &[u8]) -> Vec<u8> {
    let mut v = b"value of ".to_vec();
    v.extend_from_slice(key);
    v.resize(v.len() + key.len() % 7 * 10, b'.');
    v
}

/// The prefixes the tests scan: spanning both tables, one, or the other.
const PREFIXES: [&[u8]; 11] = [
    b"",
    b"_",
    b"__nx/",
    b"__nx/d",
    b"__nx/doc",
    b"__nx/doc/",
    b"__nx/doc/b/",
    b"__nx/s",
    b"__nx/w",
    b"a",
    b"\xff",
];

/// The pages of a paged scan (records, `more`), the keys a visiting scan saw, and whether
/// it said there was more.
type Scanned = (Vec<(Vec<Record>, bool)>, Vec<Vec<u8>>, bool);

/// Every page of a scan of `prefix` with `limits`, each resumed after the last key of the
/// page before (the cursor callers use), and the records of a visiting scan that stops
/// after `stop` records.
fn pages(store: &dyn KvRead, prefix: &[u8], limits: ScanLimits, stop: usize) -> Scanned {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store.scan(prefix, after.as_deref(), limits).unwrap();
        let more = page.more;
        after = page.records.last().map(|r| r.key.clone()).or(after);
        out.push((page.records, more));
        if !more {
            break;
        }
    }
    let mut seen = Vec::new();
    let end = store
        .scan_visit(prefix, None, limits, &mut |k, _| {
            seen.push(k.to_vec());
            if seen.len() == stop {
                Visit::Stop
            } else {
                Visit::Continue
            }
        })
        .unwrap();
    (out, seen, end.more)
}

/// Every paged scan of every prefix, for several page limits and resume points.
fn all_scans(store: &dyn KvRead) -> Vec<Scanned> {
    let mut out = Vec::new();
    for prefix in PREFIXES {
        for (records, bytes) in [(1, 1 << 20), (2, 1 << 20), (7, 1 << 20), (1000, 300)] {
            let limits = ScanLimits::new(records, bytes).unwrap();
            out.push(pages(store, prefix, limits, 3));
        }
        // Resuming after keys of either table (and keys not in the store).
        for after in [
            &b"__nx/catalog-seq"[..],
            b"__nx/doc/acc/0039",
            b"__nx/doc",
            b"__nx/e",
        ] {
            let page = store
                .scan(prefix, Some(after), ScanLimits::new(5, 1 << 20).unwrap())
                .unwrap();
            out.push((vec![(page.records, page.more)], Vec::new(), false));
        }
    }
    out
}

fn fill(store: &dyn KvWrite, keys: &[Vec<u8>]) {
    // One batch spanning both tables, then single writes and deletes of either table.
    let mut batch = Batch::new();
    for k in &keys[..keys.len() / 2] {
        batch = batch.set(k.clone(), value(k));
    }
    store.apply(batch).unwrap();
    for k in &keys[keys.len() / 2..] {
        store.apply(Batch::new().set(k.clone(), value(k))).unwrap();
    }
    store
        .apply(
            Batch::new()
                .require_eq(b"__nx/fence".to_vec(), value(b"__nx/fence"))
                .require_eq(b"__nx/doc/acc/0001".to_vec(), value(b"__nx/doc/acc/0001"))
                .delete(b"__nx/doc/b/0003".to_vec())
                .delete(b"__nx/d".to_vec())
                .set(b"__nx/doc/b/0003x".to_vec(), b"new".to_vec()),
        )
        .unwrap();
}

#[test]
fn scans_spanning_documents_and_metadata_match_one_ordered_key_space() {
    let dir = tempfile::tempdir().unwrap();
    let redb = RedbStore::create(dir.path().join("s.redb")).unwrap();
    assert_eq!(redb.layout_version(), CURRENT_LAYOUT);
    let memory = MemoryStore::new();
    let keys = keys();
    fill(&redb, &keys);
    fill(&memory, &keys);
    let expected = all_scans(&memory);
    assert_eq!(all_scans(&redb), expected);
    // The scans saw records of both tables, merged: the whole store, in order.
    let everything = &expected[0].0;
    assert!(everything.len() > 100, "one record per page at limit 1");
    let all: Vec<Vec<u8>> = everything
        .iter()
        .flat_map(|p| &p.0)
        .map(|r| r.key.clone())
        .collect();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    assert!(all.iter().any(|k| k.starts_with(DOCUMENT_PREFIX)));
    assert!(all.iter().any(|k| k.as_slice() > b"__nx/doc0".as_slice()));
    // Every key is read from its table.
    for k in &keys {
        assert_eq!(redb.get(k).unwrap(), memory.get(k).unwrap(), "{k:?}");
    }
    // And the documents are in the document table, the rest in the other one.
    drop(redb);
    let db = redb::Database::open(dir.path().join("s.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    let docs = txn.open_table(DOCS).unwrap();
    let main = txn.open_table(META).unwrap();
    assert!(docs
        .iter()
        .unwrap()
        .all(|e| e.unwrap().0.value().starts_with(DOCUMENT_PREFIX)));
    assert!(main
        .iter()
        .unwrap()
        .all(|e| !e.unwrap().0.value().starts_with(DOCUMENT_PREFIX)));
    assert_eq!(
        docs.len().unwrap() + main.len().unwrap(),
        memory.len() as u64
    );
}

/// A layout-1 file: every key in the one table `strata`, written by raw redb.
fn old_file(path: &Path, keys: &[Vec<u8>]) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(LEGACY).unwrap();
        for k in keys {
            table.insert(k.as_slice(), value(k).as_slice()).unwrap();
        }
    }
    txn.commit().unwrap();
}

#[test]
fn a_read_only_open_reads_an_old_file_as_it_is_and_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.redb");
    let keys = keys();
    old_file(&path, &keys);
    let before = std::fs::read(&path).unwrap();
    let memory = MemoryStore::new();
    for k in &keys {
        memory.apply(Batch::new().set(k.clone(), value(k))).unwrap();
    }
    let store = RedbStore::open_read_only(&path).unwrap();
    assert_eq!(store.layout_version(), 1);
    for k in &keys {
        assert_eq!(store.get(k).unwrap(), Some(value(k)), "{k:?}");
    }
    assert_eq!(all_scans(&store), all_scans(&memory));
    assert!(store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .is_err());
    drop(store);
    assert!(
        std::fs::read(&path).unwrap() == before,
        "a read-only open wrote"
    );
    // The file is still layout 1: no table was added.
    let db = redb::Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert!(txn.open_table(LAYOUTS).is_err());
    assert!(txn.open_table(DOCS).is_err());
}

#[test]
fn a_writable_open_moves_an_old_file_to_the_current_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.redb");
    let keys = keys();
    old_file(&path, &keys);
    let before = {
        let store = RedbStore::open_read_only(&path).unwrap();
        all_scans(&store)
    };
    let store = RedbStore::open_existing(&path).unwrap();
    assert_eq!(store.layout_version(), CURRENT_LAYOUT);
    for k in &keys {
        assert_eq!(store.get(k).unwrap(), Some(value(k)), "{k:?}");
    }
    assert_eq!(all_scans(&store), before);
    // Writes go on in the new layout; a second open moves nothing and changes nothing.
    store
        .apply(Batch::new().set(b"__nx/doc/acc/9999".to_vec(), b"late".to_vec()))
        .unwrap();
    drop(store);
    let db = redb::Database::open(&path).unwrap();
    {
        let txn = db.begin_read().unwrap();
        let docs = txn.open_table(DOCS).unwrap();
        let main = txn.open_table(META).unwrap();
        let doc_keys = keys
            .iter()
            .filter(|k| k.starts_with(DOCUMENT_PREFIX))
            .count() as u64;
        assert_eq!(docs.len().unwrap(), doc_keys + 1);
        assert_eq!(main.len().unwrap(), keys.len() as u64 - doc_keys);
        assert!(main
            .iter()
            .unwrap()
            .all(|e| !e.unwrap().0.value().starts_with(DOCUMENT_PREFIX)));
        let layouts = txn.open_table(LAYOUTS).unwrap();
        assert_eq!(
            layouts.get(LAYOUT_KEY).unwrap().unwrap().value(),
            CURRENT_LAYOUT
        );
    }
    drop(db);
    let store = RedbStore::open_read_only(&path).unwrap();
    assert_eq!(store.layout_version(), CURRENT_LAYOUT);
    assert_eq!(
        store.get(b"__nx/doc/acc/9999").unwrap(),
        Some(b"late".to_vec())
    );
    assert_eq!(
        store.get(b"__nx/doc/acc/0007").unwrap(),
        Some(value(b"__nx/doc/acc/0007"))
    );
}

#[test]
fn a_file_of_a_newer_layout_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.redb");
    drop(RedbStore::create(&path).unwrap());
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(LAYOUTS)
            .unwrap()
            .insert(LAYOUT_KEY, 3)
            .unwrap();
        txn.commit().unwrap();
    }
    for err in [
        RedbStore::open_existing(&path).unwrap_err(),
        RedbStore::open_read_only(&path).unwrap_err(),
    ] {
        let text = err.to_string();
        assert!(
            text.contains("layout 3") && text.contains("new.redb"),
            "{text}"
        );
        assert!(text.contains("newer strata"), "{text}");
    }
}

/// A small deterministic pseudo-random sequence.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Random keys made of pieces around the table boundary, random batches of sets and
/// deletes on both tables at once, then random prefixes, resume points and page limits:
/// every page equals the in-memory store's.
#[test]
fn random_writes_and_scans_match_the_memory_store() {
    const PIECES: [&[u8]; 9] = [
        b"__nx/doc/",
        b"__nx/d",
        b"__nx/",
        b"a/",
        b"x",
        b"/",
        b"0",
        b"\xff",
        b"__nx/doc",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let key = |seed: &mut u64| {
        let mut k = Vec::new();
        for _ in 0..1 + next(seed) % 3 {
            k.extend_from_slice(PIECES[(next(seed) % PIECES.len() as u64) as usize]);
        }
        k
    };
    let dir = tempfile::tempdir().unwrap();
    let redb = RedbStore::create(dir.path().join("r.redb")).unwrap();
    let memory = MemoryStore::new();
    for round in 0..200u64 {
        let mut batch = Batch::new();
        let mut used = std::collections::BTreeSet::new();
        for _ in 0..1 + next(&mut seed) % 6 {
            let k = key(&mut seed);
            if !used.insert(k.clone()) {
                continue;
            }
            batch = if next(&mut seed).is_multiple_of(4) {
                batch.delete(k)
            } else {
                batch.set(k, round.to_string().into_bytes())
            };
        }
        redb.apply(batch.clone()).unwrap();
        memory.apply(batch).unwrap();
    }
    assert!(memory.len() > 20, "{}", memory.len());
    for _ in 0..300 {
        let prefix = if next(&mut seed).is_multiple_of(5) {
            Vec::new()
        } else {
            let k = key(&mut seed);
            k[..(next(&mut seed) as usize % (k.len() + 1))].to_vec()
        };
        let after = (next(&mut seed).is_multiple_of(2)).then(|| key(&mut seed));
        let limits = ScanLimits::new(1 + next(&mut seed) as usize % 8, 1 << 20).unwrap();
        let got = redb.scan(&prefix, after.as_deref(), limits).unwrap();
        let want = memory.scan(&prefix, after.as_deref(), limits).unwrap();
        assert_eq!(got, want, "prefix {prefix:?} after {after:?}");
    }
}
