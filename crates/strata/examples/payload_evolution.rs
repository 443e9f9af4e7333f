//! Payload schema evolution, end to end: an old build writes accounts with `balance` in
//! dollars; a new build declares the upcast chain, reads old rows lazily in the new shape,
//! then sweeps the collection eagerly. An old build opened afterwards may still read the
//! rows but is refused when it tries to overwrite one (the ahead guard).
//!
//! ```text
//! cargo run -p strata --example payload_evolution
//! ```

use serde::{Deserialize, Serialize};
use serde_json::json;
use strata::ops::sweep::SweepOptions;
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};

/// The v1 shape (the old build).
#[derive(Debug, Serialize, Deserialize)]
struct AccountV1 {
    id: String,
    balance: i64,
}

/// The v3 shape (the new build): cents instead of dollars, and a tier.
#[derive(Debug, Serialize, Deserialize)]
struct Account {
    id: String,
    balance_cents: i64,
    tier: String,
}

fn new_build() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        // v1 -> v2: dollars to cents (lazy: only on read).
        .upcast(1, Mode::Lazy, |obj| {
            let dollars = obj
                .remove("balance")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| StepError::new("v1 account without a numeric `balance`"))?;
            obj.insert("balance_cents".into(), json!(dollars * 100));
            Ok(())
        })
        // v2 -> v3: every account gets a tier (eager: the sweep rewrites stale rows).
        .upcast(2, Mode::Eager, |obj| {
            obj.entry("tier").or_insert(json!("basic"));
            Ok(())
        })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = strata_redb::RedbStore::create_store(dir.path().join("app.redb"))?;

    // The old build writes v1 rows.
    {
        let db = Database::builder(store.clone()).open()?;
        let old = db.collection::<AccountV1>("accounts", CollectionOptions::new())?;
        for (id, balance) in [("alice", 12), ("bob", 7), ("carol", 30)] {
            old.put(
                id,
                &AccountV1 {
                    id: id.into(),
                    balance,
                },
            )?;
        }
    }

    // The new build reads them in the new shape, lazily.
    let db = Database::builder(store.clone()).open()?;
    let accounts = db.collection::<Account>("accounts", new_build())?;
    println!(
        "current payload version v{}, eager target v{}",
        accounts.current_version(),
        accounts.eager_target_version().unwrap_or(0)
    );
    let alice = accounts.get_document("alice")?.ok_or("alice is missing")?;
    println!(
        "alice read as {:?} (stored at v{}, upcast on read: {})",
        alice.value, alice.stored_version, alice.upcast
    );

    // The eager sweep rewrites every stale row; a second sweep skips the scan.
    let report = accounts.sweep(SweepOptions::new())?;
    println!(
        "sweep: {} — scanned {}, rewritten {}",
        report.note,
        report.scanned(),
        report.rewritten()
    );
    println!("again: {}", accounts.sweep(SweepOptions::new())?.note);
    println!(
        "bob is now stored at v{}",
        accounts.envelope("bob")?.map_or(0, |e| e.payload_version)
    );

    // An old build is refused when it would overwrite a row a newer build wrote.
    let old = db.collection::<AccountV1>("accounts", CollectionOptions::new())?;
    match old.put(
        "bob",
        &AccountV1 {
            id: "bob".into(),
            balance: 1,
        },
    ) {
        Err(e) if e.is_ahead() => println!("old build refused: {e}"),
        other => return Err(format!("expected the ahead guard, got {other:?}").into()),
    }
    Ok(())
}
