//! The eager sweep: cascade, marker, lease, abort/resume, contention, conflicts.
//!
//! The collection, seed and option helpers shared by every part stay here.

mod cascade;
mod conflicts;
mod lease;

use crate::collection_util::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::clock::{Clock, ManualClock, SharedClock};
use strata::layout;
use strata::ops::sweep::SweepOptions;
use strata::ops::sweep::{SweepMarker, SweepNote};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, Mutation, Precondition, Store};

/// v1 → v2 (lazy, `balance` → `balance_cents`), v2 → v3 (eager, adds `tier`), v3 → v4
/// (lazy, counts steps in `steps`). Every row touched by a sweep must reach v4.
fn options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("balance_cents".into(), json!(d * 100));
            Ok(())
        })
        .upcast(2, Mode::Eager, |o| {
            if o.contains_key("poison") {
                return Err(StepError::new("poisoned row"));
            }
            o.insert("tier".into(), json!("basic"));
            Ok(())
        })
        .upcast(3, Mode::Lazy, |o| {
            let n = o.get("steps").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("steps".into(), json!(n + 1));
            Ok(())
        })
}

fn coll(db: &Database) -> Collection<Account> {
    db.collection("acc", options()).unwrap()
}

fn seed(store: &Store, n: usize) {
    let mut b = Batch::new();
    for i in 0..n {
        let id = format!("r{i:05}");
        let json = format!(r#"{{"id":"{id}","balance":{i}}}"#);
        b = b.set(
            layout::keys::doc_key("acc", &id),
            strata::layout::envelope::encode(
                strata::layout::envelope::Envelope::new(1, 1),
                json.as_bytes(),
            ),
        );
    }
    store.apply(b).unwrap();
}

fn marker(store: &Store) -> Option<SweepMarker> {
    store
        .get(&layout::keys::sweep_key("acc"))
        .unwrap()
        .map(|b| SweepMarker::decode("acc", &b).unwrap())
}

fn clock() -> (ManualClock, SharedClock) {
    let c = ManualClock::new(1_000_000);
    (c.clone(), Arc::new(c))
}

fn opts(runner: &str, clock: &SharedClock) -> SweepOptions {
    SweepOptions::new()
        .runner_id(runner)
        .limits(strata::pass::PassLimits::new(10, 4 << 20).unwrap())
        .clock(clock.clone())
}
