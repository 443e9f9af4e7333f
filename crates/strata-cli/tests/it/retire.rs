//! `strata retire` and `strata fixture capture`: a retirement refused while rows need the
//! old steps, recorded once they don't; rows that appear below it afterwards are reported
//! by `collections`, `status` and `verify` (exit 1); a capture writes nothing.

use crate::support::*;
use serde_json::json;
use std::path::Path;
use strata::layout;
use strata::layout::envelope::{encode, Envelope};
use strata::{CollectionOptions, Database, Mode};
use strata_store::{Batch, KvWrite};

fn v2() -> CollectionOptions {
    CollectionOptions::new().upcast(1, Mode::Eager, |o| {
        o.insert("n".into(), json!(1));
        Ok(())
    })
}

/// A redb store with collection `c`: `v1` rows at v1, `v2` rows at v2.
fn seed(path: &Path, v1: usize, v2_rows: usize) {
    let store = strata_redb::RedbStore::create_store(path).unwrap();
    Database::builder(store.clone())
        .open()
        .unwrap()
        .collection::<serde_json::Value>("c", v2())
        .unwrap();
    let mut b = Batch::new();
    for i in 0..v1 {
        b = b.set(
            layout::keys::doc_key("c", &format!("old{i}")),
            encode(Envelope::new(1, 1), b"{}"),
        );
    }
    for i in 0..v2_rows {
        b = b.set(
            layout::keys::doc_key("c", &format!("new{i}")),
            encode(Envelope::new(2, 1), br#"{"n":2}"#),
        );
    }
    store.apply(b).unwrap();
}

fn bytes_and_mtime(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        std::fs::read(path).unwrap(),
        std::fs::metadata(path).unwrap().modified().unwrap(),
    )
}

#[test]
fn a_refused_retirement_changes_nothing_and_names_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    seed(&db, 2, 3);
    let before = bytes_and_mtime(&db);
    let out = strata_db(&db, &["retire", "c", "--below", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("2 row(s) are still stored below it") && err.contains("old0"),
        "{err}"
    );
    assert_eq!(
        bytes_and_mtime(&db),
        before,
        "a refusal never opens the store for writing"
    );
    // Capturing is read-only too.
    let fixture = dir.path().join("c.jsonl");
    let out = strata_db(
        &db,
        &[
            "fixture",
            "capture",
            "--collection",
            "c",
            "--out",
            fixture.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["rows"], 5);
    assert_eq!(bytes_and_mtime(&db), before);
}

#[test]
fn rows_below_a_retirement_are_reported_by_collections_status_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    seed(&db, 0, 3);
    let out = strata_db(&db, &["retire", "c", "--below", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(
        (
            doc["format"].clone(),
            doc["recorded"].clone(),
            doc["rows"].clone()
        ),
        (json!(1), json!(true), json!(3))
    );
    // Healthy: nothing reported.
    let verify = strata_db(&db, &["verify", "--json"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    // A v1 row restored from a backup.
    {
        let store = strata_redb::RedbStore::open_existing(&db)
            .unwrap()
            .into_store();
        store
            .apply(Batch::new().set(
                layout::keys::doc_key("c", "restored"),
                encode(Envelope::new(1, 4), b"{}"),
            ))
            .unwrap();
    }
    let collections = json_of(&strata_db(&db, &["collections", "--json"]));
    let c = &collections["collections"][0];
    assert_eq!(
        (c["retired_below"].clone(), c["rows_retired"].clone()),
        (json!(2), json!(1))
    );
    let status = strata_db(&db, &["status", "--json"]);
    assert_eq!(json_of(&status)["retired_rows"][0]["rows"], 1);
    let text = stdout(&strata_db(&db, &["status"]));
    assert!(text.contains("1 row(s) stored below v2"), "{text}");
    let verify = strata_db(&db, &["verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
    assert!(
        stderr(&verify).contains("`restored`"),
        "{}",
        stderr(&verify)
    );
    let doc = json_of(&strata_db(&db, &["verify", "--json"]));
    assert_eq!(doc["verdict"], "failed");
    assert_eq!(doc["retired_rows"][0]["first"], "restored");
}

/// `fixture capture --out` into a directory that does not exist (or a path under a file)
/// is refused before the store is read, in one line naming the directory and what to do
/// (not the temporary file's name), and writes nothing.
#[test]
fn a_capture_into_a_missing_directory_names_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    seed(&db, 1, 1);
    let note = dir.path().join("note.txt");
    std::fs::write(&note, b"mine").unwrap();
    let before = bytes_and_mtime(&db);
    for parent in [dir.path().join("missing"), note.clone()] {
        let out_file = parent.join("c.jsonl");
        let out = strata_db(
            &db,
            &[
                "fixture",
                "capture",
                "--collection",
                "c",
                "--out",
                out_file.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!(
                "the directory `{}` of `--out {}` does not exist or is not a directory; create it or choose another path",
                parent.display(),
                out_file.display()
            )),
            "{err}"
        );
        // Not tempfile's own text, which names its temporary file in the directory.
        assert!(!err.contains("at path"), "{err}");
        assert!(!parent.join("c.jsonl").exists());
    }
    assert_eq!(std::fs::read(&note).unwrap(), b"mine");
    assert!(!dir.path().join("missing").exists());
    assert_eq!(bytes_and_mtime(&db), before);
}

/// `retire` of a Numax sync table names it as a sync table (not as an unrecorded
/// collection) and changes nothing.
#[test]
fn retire_of_a_sync_table_says_it_is_a_sync_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    seed(&db, 0, 1);
    let before = bytes_and_mtime(&db);
    for flags in [&["--below", "2"][..], &["--below", "2", "--dry-run"][..]] {
        let mut args = vec!["retire", "op-log"];
        args.extend_from_slice(flags);
        let out = strata_db(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("`op-log` is a Numax sync table")
                && err.contains("retire applies to")
                && !err.contains("not recorded"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(bytes_and_mtime(&db) == before, "retire changed the store");
}
