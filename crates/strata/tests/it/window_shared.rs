//! The two builds of the deploy-window tests.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::collection::CollectionOptions;
use strata::payload::{Mode, StepError};
use strata::policy::{additive_only, covered_by_upcasts, SchemaOptions};

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
