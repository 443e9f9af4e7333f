//! A corrupted database keyring gets the same verdict from `status`, `verify` and
//! `repair`: unsupported (exit 4) from the first two, and `repair` lists it with what to
//! do (restore it from a backup; repair never rewrites it).

use crate::support::{json_of, stderr, stdout, strata_db};
use strata_store::{Batch, KvWrite, Store};

#[test]
fn a_corrupted_keyring_is_unsupported_for_status_and_verify_and_listed_by_repair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    {
        let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
        store
            .apply(Batch::new().set(b"__nx/keys/database".to_vec(), b"NXKR\x01\0\0".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    let corrupt = "keyring `__nx/keys/database` is corrupted";
    for args in [&["status"][..], &["verify"]] {
        let out = strata_db(&path, args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains(corrupt), "{args:?}: {}", stdout(&out));
    }
    let out = strata_db(&path, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let doc = json_of(&out);
    assert_eq!(doc["verdict"], "unsupported", "{doc}");
    assert!(
        doc["problems"][0].as_str().unwrap().contains(corrupt),
        "{doc}"
    );

    let out = strata_db(&path, &["repair", "--json"]);
    let doc = json_of(&out);
    let findings = doc["findings"].as_array().unwrap();
    let keyring = findings
        .iter()
        .find(|f| f["key"] == "__nx/keys/database")
        .unwrap_or_else(|| panic!("repair does not list the keyring: {doc}"));
    assert_eq!(keyring["action"], "manual", "{doc}");
    assert!(keyring["why"].as_str().unwrap().contains("backup"), "{doc}");
    let out = strata_db(&path, &["repair"]);
    assert!(
        stdout(&out).contains("__nx/keys/database"),
        "{}",
        stdout(&out)
    );
}
