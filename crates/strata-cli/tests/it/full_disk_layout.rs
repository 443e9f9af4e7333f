//! A redb file of layout 1 (every key in the byte table `strata`, as builds before issue
//! #24 wrote it) on a file system without room to move it to layout 2: the writable open
//! succeeds in layout 1 (nothing moved, every record there), writes work and last, and a
//! writable open with room moves it. A real full disk: the small tmpfs of `full_disk` (its
//! helper and skip rules: without root the test says "skipped" and checks nothing, except
//! under `CI=true`, where it fails).

use crate::full_disk::{copy_store, Tmpfs};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use strata_redb::{RedbStore, CURRENT_LAYOUT};
use strata_store::{Batch, KvRead, KvWrite};

/// Layout 1's one table.
const LEGACY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("strata");

type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// About 3.4 MB of documents and metadata keys, in key order.
fn records() -> Records {
    let mut records: Records = (0..8000u32)
        .map(|i| {
            let key = if i % 10 == 0 {
                format!("__nx/schema/t{i:05}")
            } else {
                format!("__nx/doc/c/{i:05}")
            };
            (key.into_bytes(), vec![(i % 251) as u8; 400])
        })
        .collect();
    records.sort();
    records
}

/// A compacted layout-1 file at `path` holding `records`, written by raw redb (no free
/// pages inside it: the move has to grow the file).
fn layout_1_file(path: &Path, records: &Records) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(LEGACY).unwrap();
        for (k, v) in records {
            table.insert(k.as_slice(), v.as_slice()).unwrap();
        }
    }
    txn.commit().unwrap();
    drop(db);
    assert!(redb::Database::open(path).unwrap().compact().is_ok());
}

/// Every record of layout 1's table of the file at `path`, by raw redb (`None`: the file
/// has no such table, it was moved).
fn layout_1_records(path: &Path) -> Option<Records> {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(LEGACY).ok()?;
    Some(
        table
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect(),
    )
}

fn assert_holds(store: &RedbStore, records: &Records) {
    for (k, v) in records {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{k:?}");
    }
}

#[test]
fn a_layout_1_redb_file_without_room_to_move_opens_writable_in_layout_1_and_moves_with_room() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("old.redb");
    let mut records = records();
    layout_1_file(&pristine, &records);
    let Some(fs) = Tmpfs::mount_or_skip(&dir.path().join("mnt"), "32m") else {
        return;
    };
    // The room the move takes, measured on a copy with all the room it wants.
    let probe = fs.0.join("probe.redb");
    copy_store(&pristine, &probe);
    let before = fs.available();
    let store = RedbStore::open_existing(&probe).unwrap();
    assert_eq!(store.layout_version(), CURRENT_LAYOUT);
    let moved = before.saturating_sub(fs.available());
    drop(store);
    println!(
        "the move of a {} byte layout-1 file took {moved} bytes of free space",
        std::fs::metadata(&pristine).unwrap().len()
    );
    std::fs::remove_file(&probe).unwrap();

    // Room for writes, not for the move.
    let path = fs.0.join("old.redb");
    copy_store(&pristine, &path);
    fs.leave_free(moved / 2);
    let store = RedbStore::open_existing(&path).unwrap();
    assert_eq!(store.layout_version(), 1);
    assert!(!store.is_read_only());
    let why = store.layout_upgrade_postponed().unwrap().to_string();
    println!("{why}");
    for part in ["old.redb", "layout 1", "free about"] {
        assert!(why.contains(part), "{why}");
    }
    assert_holds(&store, &records);
    let new = [
        (b"__nx/doc/c/new".to_vec(), b"written in layout 1".to_vec()),
        (b"__nx/window/c".to_vec(), b"a metadata key".to_vec()),
    ];
    for (k, v) in &new {
        store.apply(Batch::new().set(k.clone(), v.clone())).unwrap();
    }
    drop(store);
    records.extend(new);
    records.sort();
    // On disk: still layout 1, every old record byte for byte, and the new ones.
    assert_eq!(layout_1_records(&path).as_ref(), Some(&records));

    // With room, the next writable open moves it, the new records with the old.
    fs.make_room();
    let store = RedbStore::open_existing(&path).unwrap();
    assert_eq!(store.layout_version(), CURRENT_LAYOUT);
    assert_eq!(store.layout_upgrade_postponed(), None);
    assert_holds(&store, &records);
    drop(store);
    assert_eq!(layout_1_records(&path), None, "moved: no byte table left");
}
