//! The fence, client presence, the drain barrier and the coordinated cutover.
//!
//! The schema types, option builders and the generation-0 seed shared by every part stay here.

mod cutover;
mod drain;
mod rows;
mod writes;

use super::policy_util::{config, guard_err, mem};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::cell::Cell;
use strata::clock::ManualClock;
use strata::ops::cutover::CutoverOptions;
use strata::policy::{
    additive_only, baseline_key, client_key, coordinated_cutover, list_clients, ClientRecord,
    Fence, FenceState, PolicyError, Refusal, SchemaOptions, Verdict, CLIENT_FORMAT,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, Store};

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    amount: Amount,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct NoteOld {
    id: String,
    text: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct NoteNew {
    id: String,
    body: String,
}

fn reshape(d: Value) -> Result<Value, String> {
    Ok(json!({"id": d["id"], "amount": {"gross": d["total"]}}))
}

fn cutover_opts<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>()
        .strategy(coordinated_cutover(reshape))
        .strategy(additive_only())
}

fn note_opts<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>().strategy(coordinated_cutover(|d| {
        Ok(json!({"id": d["id"], "body": d["text"]}))
    }))
}

fn plain<T: schemars::JsonSchema>() -> SchemaOptions {
    SchemaOptions::of::<T>()
}

/// Generation 0: `invoices` (and `notes`) in the old shape with `n` records each.
fn seed(store: &Store, clock: &ManualClock, n: usize) {
    let db = Database::builder(store.clone())
        .policy(config(clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvOld>(
            "invoices",
            CollectionOptions::new().schema(plain::<InvOld>()),
        )
        .unwrap();
    let notes = db
        .collection::<NoteOld>("notes", CollectionOptions::new().schema(plain::<NoteOld>()))
        .unwrap();
    for i in 0..n {
        let id = format!("i{i:03}");
        inv.put(
            &id,
            &InvOld {
                id: id.clone(),
                total: i as f64,
            },
        )
        .unwrap();
        notes
            .put(
                &id,
                &NoteOld {
                    id: id.clone(),
                    text: format!("t{i}"),
                },
            )
            .unwrap();
    }
}

/// The key of the `orders` document `id` (the row-rewrite tests, and a cutover that must
/// leave `orders` alone).
fn order_key(id: &str) -> Vec<u8> {
    strata::layout::keys::doc_key("orders", id)
}
