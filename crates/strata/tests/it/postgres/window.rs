//! A deploy window on PostgreSQL (issue #26): two real child processes, one at build 1
//! and one at build 2, run at once on one table, each updating every shared document
//! (optimistic lock, retried on conflict) and writing its own. Nothing is refused; every
//! increment either build acknowledged is there; build 2's new field survives build 1's
//! updates; build 1 reads every document.
//!
//! The test re-runs its own binary (`--exact`) as the two children. `STRATA_WINDOW_DOCS`
//! sets the shared document count (default 10,000, as the issue asks).

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::policy::PolicyConfig;
use strata::policy::{additive_only, covered_by_upcasts, SchemaOptions};
use strata::{Collection, Database};
use strata::{CollectionError, CollectionOptions};
use strata::{Mode, StepError};
use strata_store::Store;

const CHILD: &str = "STRATA_PG_WINDOW_CHILD";
const TEST: &str = "postgres::window::two_builds_write_at_once_through_a_deploy_window";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Acct {
    id: String,
    owner: String,
    balance: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct AcctV2 {
    id: String,
    owner_name: String,
    balance: i64,
    #[serde(default)]
    tags: Vec<String>,
}

fn schema(props: &[&str]) -> Value {
    let p: serde_json::Map<String, Value> =
        props.iter().map(|n| (n.to_string(), json!({}))).collect();
    json!({"type": "object", "properties": p})
}

fn build1() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .schema(SchemaOptions::json(schema(&["id", "owner", "balance"])).strategy(additive_only()))
}

fn rename(o: &mut serde_json::Map<String, Value>, from: &str, to: &str) -> Result<(), StepError> {
    let v = o
        .remove(from)
        .ok_or_else(|| StepError::new(format!("no `{from}`")))?;
    o.insert(to.into(), v);
    Ok(())
}

fn build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| {
            rename(o, "owner", "owner_name")?;
            o.entry("tags").or_insert_with(|| json!([]));
            Ok(())
        })
        .downcast(2, |o| {
            rename(o, "owner_name", "owner")?;
            o.remove("tags");
            Ok(())
        })
        .schema(
            SchemaOptions::json(schema(&["id", "owner_name", "balance", "tags"]))
                .strategy(covered_by_upcasts()),
        )
}

fn docs() -> usize {
    std::env::var("STRATA_WINDOW_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn database(store: Store) -> Database {
    Database::builder(store)
        .policy(PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap()
}

/// Applies `change` to document `id` with the optimistic lock, re-reading after a
/// conflict (another process wrote it meanwhile).
fn bump<T: Serialize + serde::de::DeserializeOwned>(
    c: &Collection<T>,
    id: &str,
    change: impl Fn(&mut T),
) {
    for _ in 0..1_000 {
        let d = c.get_document(id).unwrap().unwrap();
        let mut v = d.value;
        change(&mut v);
        match c.update(id, &v, d.lock_version) {
            Ok(_) => return,
            Err(CollectionError::Conflict { .. }) => continue,
            Err(e) => panic!("update of {id} refused: {e}"),
        }
    }
    panic!("update of {id} kept conflicting");
}

fn child(role: &str) {
    let (build, table) = role.split_once(':').unwrap();
    let url = super::pg_url();
    let db = database(Store::new(peer(&url, table)));
    let n = docs();
    if build == "1" {
        let c = db.collection::<Acct>("accts", build1()).unwrap();
        for i in 0..n {
            bump(&c, &format!("s{i:04}"), |v| v.balance += 1);
            let own = format!("one-{i:04}");
            c.put(
                &own,
                &Acct {
                    id: own.clone(),
                    owner: "build1".into(),
                    balance: 1,
                },
            )
            .unwrap();
        }
    } else {
        let c = db.collection::<AcctV2>("accts", build2()).unwrap();
        for i in 0..n {
            bump(&c, &format!("s{i:04}"), |v| {
                v.balance += 1;
                v.tags.push("two".into());
            });
            let own = format!("two-{i:04}");
            c.put(
                &own,
                &AcctV2 {
                    id: own.clone(),
                    owner_name: "build2".into(),
                    balance: 2,
                    tags: vec!["own".into()],
                },
            )
            .unwrap();
        }
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn two_builds_write_at_once_through_a_deploy_window() {
    if let Ok(role) = std::env::var(CHILD) {
        child(&role);
        return;
    }
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let n = docs();
    {
        // Build 1's store: the shared documents at v1, its schema the baseline.
        let db = database(Store::new(peer(&url, &table)));
        let c = db.collection::<Acct>("accts", build1()).unwrap();
        for i in 0..n {
            let id = format!("s{i:04}");
            c.put(
                &id,
                &Acct {
                    id: id.clone(),
                    owner: format!("o{i}"),
                    balance: 0,
                },
            )
            .unwrap();
        }
    }
    let spawn = |build: &str| super::spawn_child(TEST, CHILD, format!("{build}:{table}"), &url);
    // Both at once.
    let children = [spawn("1"), spawn("2")];
    for (i, c) in children.into_iter().enumerate() {
        super::child_stdout(c, &(i + 1).to_string());
    }
    let store = Store::new(peer(&url, &table));
    assert_eq!(
        strata::ops::window::operational(&store, "accts").unwrap(),
        Some(1)
    );
    let db = database(store);
    let c2 = db.collection::<AcctV2>("accts", build2()).unwrap();
    for i in 0..n {
        let id = format!("s{i:04}");
        let d = c2.get_document(&id).unwrap().unwrap();
        assert_eq!(d.stored_version, 1, "{id}");
        assert_eq!(d.value.balance, 2, "{id}: both increments kept");
        assert_eq!(
            d.value.tags,
            vec!["two".to_string()],
            "{id}: build 2's field kept"
        );
        assert_eq!(d.value.owner_name, format!("o{i}"));
        let one = c2.get(&format!("one-{i:04}")).unwrap().unwrap();
        assert_eq!(one.owner_name, "build1");
        let two = c2.get(&format!("two-{i:04}")).unwrap().unwrap();
        assert_eq!(two.tags, vec!["own".to_string()]);
    }
    drop(c2);
    drop(db);
    let db = database(Store::new(peer(&url, &table)));
    let c1 = db.collection::<Acct>("accts", build1()).unwrap();
    assert_eq!(c1.iter().filter(|r| r.is_ok()).count(), 3 * n);
}
