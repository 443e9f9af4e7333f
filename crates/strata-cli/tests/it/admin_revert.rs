//! The embedded admin's `revert <collection> --to N` (issue #26 item 4): the dry run
//! writes not one byte of the redb file; the revert takes every row back to v1 and the
//! old build reads them; a row whose downcast fails makes it exit 1 and stays as it was.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::process::ExitCode;
use strata::layout::envelope;
use strata::ops::window::WindowOptions;
use strata::policy::PolicyConfig;
use strata::policy::{additive_only, covered_by_upcasts, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};
use strata_cli::Admin;
use strata_store::{KvRead, ScanLimits, Store};

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Acct {
    id: String,
    owner: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct AcctV2 {
    id: String,
    owner_name: String,
}

fn rename(o: &mut serde_json::Map<String, Value>, from: &str, to: &str) -> Result<(), StepError> {
    let v = o
        .remove(from)
        .ok_or_else(|| StepError::new(format!("no `{from}`")))?;
    o.insert(to.into(), v);
    Ok(())
}

fn build1() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .schema(SchemaOptions::of::<Acct>().strategy(additive_only()))
}

fn build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| rename(o, "owner", "owner_name"))
        .downcast(2, |o| {
            if o.get("owner_name") == Some(&json!("refuse-me")) {
                return Err(StepError::new("this owner cannot be written at v1"));
            }
            rename(o, "owner_name", "owner")
        })
        .schema(SchemaOptions::of::<AcctV2>().strategy(covered_by_upcasts()))
}

fn open(path: &std::path::Path) -> Database {
    let store = Store::new(strata_redb::RedbStore::open_existing(path).unwrap());
    Database::builder(store)
        .policy(PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap()
}

fn versions(path: &std::path::Path) -> Vec<(String, i32)> {
    let store = Store::new(strata_redb::RedbStore::open_existing(path).unwrap());
    store
        .scan(
            b"__nx/doc/accts/",
            None,
            ScanLimits::new(usize::MAX, 1 << 30).unwrap(),
        )
        .unwrap()
        .records
        .into_iter()
        .map(|r| {
            let (env, _) = envelope::decode(&r.value).unwrap();
            (
                String::from_utf8(r.key[15..].to_vec()).unwrap(),
                env.payload_version,
            )
        })
        .collect()
}

fn admin(path: &std::path::Path) -> Admin {
    Admin::new()
        .name("app-admin")
        .database(path)
        .collection::<AcctV2>("accts", build2())
}

#[test]
fn revert_takes_a_completed_window_back_and_its_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.redb");
    drop(strata_redb::RedbStore::create(&path).unwrap());
    {
        let db = open(&path);
        let c1 = db.collection::<Acct>("accts", build1()).unwrap();
        for i in 0..20 {
            let id = format!("a{i:02}");
            c1.put(
                &id,
                &Acct {
                    id: id.clone(),
                    owner: format!("o{i}"),
                },
            )
            .unwrap();
        }
    }
    {
        let db = open(&path);
        let c2 = db.collection::<AcctV2>("accts", build2()).unwrap();
        c2.complete_window(WindowOptions::new()).unwrap();
    }
    assert!(versions(&path).iter().all(|(_, v)| *v == 2));
    let bytes = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();

    let code = admin(&path).run_from(["app-admin", "revert", "accts", "--to", "1", "--dry-run"]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(std::fs::read(&path).unwrap() == bytes, "the dry run wrote");
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);

    // A bad version is a usage-level refusal that changes nothing.
    let code = admin(&path).run_from(["app-admin", "revert", "accts", "--to", "2"]);
    assert_ne!(code, ExitCode::SUCCESS);
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "a refused revert wrote"
    );

    let code = admin(&path).run_from(["app-admin", "revert", "accts", "--to", "1", "--json"]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(versions(&path).iter().all(|(_, v)| *v == 1));
    let db = open(&path);
    let c1 = db.collection::<Acct>("accts", build1()).unwrap();
    assert_eq!(c1.get("a03").unwrap().unwrap().owner, "o3");
    c1.put(
        "new",
        &Acct {
            id: "new".into(),
            owner: "n".into(),
        },
    )
    .unwrap();
}

#[test]
fn a_row_the_downcast_refuses_makes_revert_exit_1_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.redb");
    drop(strata_redb::RedbStore::create(&path).unwrap());
    {
        let db = open(&path);
        let c1 = db.collection::<Acct>("accts", build1()).unwrap();
        c1.put(
            "a",
            &Acct {
                id: "a".into(),
                owner: "ann".into(),
            },
        )
        .unwrap();
    }
    {
        let db = open(&path);
        let c2 = db.collection::<AcctV2>("accts", build2()).unwrap();
        c2.complete_window(WindowOptions::new()).unwrap();
        c2.put(
            "r",
            &AcctV2 {
                id: "r".into(),
                owner_name: "refuse-me".into(),
            },
        )
        .unwrap();
    }
    let code = admin(&path).run_from(["app-admin", "revert", "accts", "--to", "1"]);
    assert_eq!(code, ExitCode::from(1));
    assert_eq!(versions(&path), [("a".into(), 1), ("r".into(), 2)]);
}
