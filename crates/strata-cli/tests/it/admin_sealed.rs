//! The embedded admin over sealed collections: `sweep`, `cutover` and `schema plan` take
//! the key flags of `verify` (`--passphrase-env VAR`, `--key-file PATH`), so an
//! application whose collections are sealed can run its sweep; the rewritten rows stay
//! sealed. Without the key the command fails in one line and writes nothing.

use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use strata::seal::Credential;
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};
use strata_cli::Admin;
use strata_store::{KvRead, ScanLimits, Store};

const MARKER: &str = "ADMIN-SEALED-MARKER-5d1e";
const KEY: [u8; 32] = [7u8; 32];

#[derive(Debug, Serialize, Deserialize)]
struct AcctV1 {
    id: String,
    note: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct AcctV2 {
    id: String,
    note: String,
    tier: String,
}

fn options_v2() -> CollectionOptions {
    CollectionOptions::new()
        .sealed()
        .upcast(1, Mode::Eager, |obj| {
            obj.insert("tier".into(), serde_json::json!("basic"));
            Ok::<(), StepError>(())
        })
}

fn rows(path: &std::path::Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let store = Store::new(strata_redb::RedbStore::open_existing(path).unwrap());
    store
        .scan(
            b"__nx/doc/accounts/",
            None,
            ScanLimits::new(usize::MAX, 1 << 30).unwrap(),
        )
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

fn admin(path: &std::path::Path) -> Admin {
    Admin::new()
        .name("bank-admin")
        .database(path)
        .collection::<AcctV2>("accounts", options_v2())
}

#[test]
fn sweep_of_a_sealed_collection_takes_the_key_and_keeps_rows_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    {
        let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
        let db = Database::builder(store)
            .key(Credential::raw_key(&KEY).unwrap())
            .open()
            .unwrap();
        let c = db
            .collection::<AcctV1>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..5 {
            c.put(
                &format!("a{i}"),
                &AcctV1 {
                    id: format!("a{i}"),
                    note: format!("{MARKER} {i}"),
                },
            )
            .unwrap();
        }
    }
    let key_file = dir.path().join("bank.key");
    std::fs::write(&key_file, hex::encode(KEY)).unwrap();
    let before = rows(&path);

    // Without the key: a failure, nothing written.
    let code = admin(&path).run_from(["bank-admin", "sweep", "accounts"]);
    assert_ne!(code, ExitCode::SUCCESS);
    assert_eq!(rows(&path), before);

    // A wrong key: a failure, nothing written.
    let wrong = dir.path().join("wrong.key");
    std::fs::write(&wrong, hex::encode([9u8; 32])).unwrap();
    let code = admin(&path).run_from([
        "bank-admin",
        "sweep",
        "accounts",
        "--key-file",
        wrong.to_str().unwrap(),
    ]);
    assert_ne!(code, ExitCode::SUCCESS);
    assert_eq!(rows(&path), before);

    // The dry run and the plan read the sealed rows through the chain.
    for args in [
        vec!["sweep", "accounts", "--dry-run"],
        vec!["schema", "plan", "accounts"],
    ] {
        let mut all = vec!["bank-admin"];
        all.extend(args.iter().copied());
        all.extend(["--key-file", key_file.to_str().unwrap()]);
        assert_eq!(admin(&path).run_from(all), ExitCode::SUCCESS, "{args:?}");
        assert_eq!(rows(&path), before, "{args:?} wrote");
    }

    // With the key: every row rewritten at v2, still sealed, no plaintext.
    let code = admin(&path).run_from([
        "bank-admin",
        "sweep",
        "accounts",
        "--key-file",
        key_file.to_str().unwrap(),
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    let after = rows(&path);
    assert_eq!(after.len(), 5);
    for (k, v) in &after {
        let (env, sealed) = strata::seal::peek(v).unwrap();
        assert!(sealed, "{k:?} is not sealed");
        assert_eq!(env.payload_version, 2, "{k:?}");
        assert!(!v.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()));
    }
    let store = Store::new(strata_redb::RedbStore::open_existing(&path).unwrap());
    let db = Database::builder(store)
        .key(Credential::raw_key(&KEY).unwrap())
        .open()
        .unwrap();
    let c = db.collection::<AcctV2>("accounts", options_v2()).unwrap();
    let a3 = c.get("a3").unwrap().unwrap();
    assert_eq!(
        (a3.note.as_str(), a3.tier.as_str()),
        (&*format!("{MARKER} 3"), "basic")
    );
}
