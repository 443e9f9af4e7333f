//! The embedded admin's `sweep`, `sweep --dry-run`, `schema plan` and `cutover` over a
//! sealed collection (issue 15 audit): a wrong key, an unset passphrase variable or no key
//! at all is refused before the datastore is opened for writing, so the redb file stays
//! byte-for-byte as it was (opening it for writing rewrites its header).

use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use strata::seal::Credential;
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};
use strata_cli::Admin;
use strata_store::Store;

const KEY: [u8; 32] = [5u8; 32];

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
    tier: Option<String>,
}

fn options() -> CollectionOptions {
    CollectionOptions::new()
        .sealed()
        .upcast(1, Mode::Eager, |obj| {
            obj.insert("tier".into(), serde_json::json!("basic"));
            Ok::<(), StepError>(())
        })
}

fn admin(path: &std::path::Path) -> Admin {
    Admin::new()
        .name("bank-admin")
        .database(path)
        .collection::<Acct>("accounts", options())
}

/// A redb file `bank.redb` in `dir` with three sealed accounts at payload v1.
fn sealed_bank(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("bank.redb");
    let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
    let db = Database::builder(store)
        .key(Credential::raw_key(&KEY).unwrap())
        .open()
        .unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for i in 0..3 {
        c.put(
            &format!("a{i}"),
            &Acct {
                id: format!("a{i}"),
                tier: None,
            },
        )
        .unwrap();
    }
    path
}

#[test]
fn a_refused_key_leaves_the_redb_file_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = sealed_bank(dir.path());
    let wrong = dir.path().join("wrong.key");
    std::fs::write(&wrong, hex::encode([9u8; 32])).unwrap();
    let wrong = wrong.to_str().unwrap();
    let before = std::fs::read(&path).unwrap();
    for command in [
        vec!["sweep", "accounts"],
        vec!["sweep", "accounts", "--dry-run"],
        vec!["schema", "plan", "accounts"],
        vec!["cutover"],
    ] {
        for key in [
            vec!["--key-file", wrong],
            vec!["--passphrase-env", "STRATA_AUDIT15_UNSET_VARIABLE"],
            vec![],
        ] {
            if command == ["cutover"] && key.is_empty() {
                // No collection with a persisted schema: nothing is pending, nothing sealed
                // is read.
                continue;
            }
            let mut args = vec!["bank-admin"];
            args.extend(&command);
            args.extend(&key);
            let code = admin(&path).run_from(args.clone());
            assert_ne!(code, ExitCode::SUCCESS, "{args:?}");
            assert!(
                std::fs::read(&path).unwrap() == before,
                "{args:?} changed the file"
            );
        }
    }
}

/// With the right key, `sweep --dry-run` and `schema plan` only read: the redb file stays
/// byte-for-byte as it was (they open it read-only), and they still report the sealed
/// rows behind.
#[test]
fn dry_run_and_plan_with_the_key_leave_the_redb_file_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = sealed_bank(dir.path());
    let right = dir.path().join("right.key");
    std::fs::write(&right, hex::encode(KEY)).unwrap();
    let right = right.to_str().unwrap();
    let before = std::fs::read(&path).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    for command in [
        vec!["sweep", "accounts", "--dry-run"],
        vec!["schema", "plan", "accounts"],
    ] {
        let mut args = vec!["bank-admin"];
        args.extend(&command);
        args.extend(["--key-file", right]);
        let code = admin(&path).run_from(args.clone());
        assert_eq!(code, ExitCode::SUCCESS, "{args:?}");
        assert!(
            std::fs::read(&path).unwrap() == before,
            "{args:?} changed the file"
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified,
            "{args:?}"
        );
    }
    // The real sweep still writes (and seals).
    let code = admin(&path).run_from(["bank-admin", "sweep", "accounts", "--key-file", right]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(std::fs::read(&path).unwrap() != before);
}
