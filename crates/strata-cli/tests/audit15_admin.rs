//! The embedded admin's `sweep`, `sweep --dry-run`, `schema plan` and `cutover` over a
//! sealed collection (issue 15 audit): a wrong key, an unset passphrase variable or no key
//! at all is refused before the datastore is opened for writing, so the redb file stays
//! byte-for-byte as it was (opening it for writing rewrites its header).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use strata::collection::CollectionOptions;
use strata::payload::{Mode, StepError};
use strata::seal::Credential;
use strata::Database;
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

#[test]
fn a_refused_key_leaves_the_redb_file_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    {
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
    }
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
