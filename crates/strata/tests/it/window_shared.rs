//! The two builds of the deploy-window tests.

use super::policy_util::config;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::clock::ManualClock;
use strata::layout::envelope::{self, Envelope};
use strata::policy::{additive_only, covered_by_upcasts, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};
use strata_store::{KvRead, Store};

/// Build 1: payload v1.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Acct {
    pub id: String,
    pub owner: String,
    pub balance: i64,
}

/// Build 2: payload v2 — `owner` renamed `owner_name`, new `tags`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct AcctV2 {
    pub id: String,
    pub owner_name: String,
    pub balance: i64,
    #[serde(default)]
    pub tags: Vec<String>,
}

pub fn build1() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .schema(SchemaOptions::of::<Acct>().strategy(additive_only()))
}

fn rename(obj: &mut serde_json::Map<String, Value>, from: &str, to: &str) -> Result<(), StepError> {
    let v = obj
        .remove(from)
        .ok_or_else(|| StepError::new(format!("no `{from}`")))?;
    obj.insert(to.into(), v);
    Ok(())
}

pub fn build2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |o| {
            rename(o, "owner", "owner_name")?;
            o.entry("tags").or_insert_with(|| json!([]));
            Ok(())
        })
        .downcast(2, |o| {
            if o.get("owner_name") == Some(&json!("refuse-me")) {
                return Err(StepError::new("this owner cannot be written at v1"));
            }
            rename(o, "owner_name", "owner")?;
            // Build 1 has no tags: the downcast cannot express them (they are kept).
            o.remove("tags");
            Ok(())
        })
        .schema(SchemaOptions::of::<AcctV2>().strategy(covered_by_upcasts()))
}

/// A database on `store` under policy with `clock`.
pub fn open(store: &Store, clock: &ManualClock) -> Database {
    Database::builder(store.clone())
        .policy(config(clock))
        .open()
        .unwrap()
}

/// The stored envelope and JSON of document `id` of collection `accts`.
pub fn stored(store: &Store, id: &str) -> (Envelope, Value) {
    let raw = store
        .get(format!("__nx/doc/accts/{id}").as_bytes())
        .unwrap()
        .unwrap();
    let (env, json) = envelope::decode(&raw).unwrap();
    (env, serde_json::from_slice(json).unwrap())
}
