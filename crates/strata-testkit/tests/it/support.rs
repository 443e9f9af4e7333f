//! A store with rows at v1..v4 of an `accounts` collection, and its chain.

use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use strata::layout;
use strata::layout::envelope::{encode, Envelope};
use strata::{CollectionOptions, Database, Mode, StepError};
use strata_store::{Batch, KvWrite, Store};

/// The v4 shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Account {
    pub id: String,
    pub balance_cents: i64,
    pub tier: String,
    pub email: String,
    pub steps: i64,
}

/// v1 `{id, balance, email}` → v2 `balance_cents` → v3 adds `tier` (eager) → v4 counts
/// `steps` (eager).
pub fn options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            let d = o
                .remove("balance")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| StepError::new("v1 account without a numeric `balance`"))?;
            o.insert("balance_cents".into(), json!(d * 100));
            Ok(())
        })
        .upcast(2, Mode::Eager, |o| {
            o.insert("tier".into(), json!("basic"));
            Ok(())
        })
        .upcast(3, Mode::Eager, |o| {
            let n = o.get("steps").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("steps".into(), json!(n + 1));
            Ok(())
        })
}

/// The body of row `i` as written at `version`.
pub fn body(i: usize, version: i32) -> serde_json::Value {
    let id = format!("a{i:03}");
    let email = format!("user{i}@example.com");
    match version {
        1 => json!({"id": id, "balance": i, "email": email}),
        2 => json!({"id": id, "balance_cents": i * 100, "email": email}),
        3 => json!({"id": id, "balance_cents": i * 100, "tier": "gold", "email": email}),
        _ => {
            json!({"id": id, "balance_cents": i * 100, "tier": "gold", "email": email, "steps": 7})
        }
    }
}

/// `n` rows spread over v1..v4 (row i at version 1 + i % 4) in `store`, with the
/// collection registered by a v4 build.
pub fn seed(store: &Store, n: usize) {
    let db = Database::builder(store.clone()).open().unwrap();
    db.collection::<Account>("accounts", options()).unwrap();
    let mut b = Batch::new();
    for i in 0..n {
        let v = 1 + (i % 4) as i32;
        let json = serde_json::to_vec(&body(i, v)).unwrap();
        b = b.set(
            layout::keys::doc_key("accounts", &format!("a{i:03}")),
            encode(Envelope::new(v, 1 + i as u64), &json),
        );
    }
    store.apply(b).unwrap();
}

/// A new redb store at `path` with `n` seeded rows.
pub fn seeded_redb(path: &Path, n: usize) -> Store {
    let store = strata_redb::RedbStore::create_store(path).unwrap();
    seed(&store, n);
    store
}
