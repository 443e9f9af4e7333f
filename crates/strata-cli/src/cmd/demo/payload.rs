//! Chapter 6: payload evolution of the `accounts` collection.

use super::{bug, title};
use crate::exit::Failure;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use strata::ops::sweep::SweepOptions;
use strata::CollectionOptions;
use strata::Database;
use strata::{Mode, StepError};
use strata_store::Store;

/// An account as the old build (payload v1) knows it: the balance in whole dollars.
#[derive(Debug, Serialize, Deserialize)]
struct AccountV1 {
    id: String,
    balance: i64,
}

/// An account as the new build (payload v2) knows it: the balance in cents.
#[derive(Debug, Serialize, Deserialize)]
struct Account {
    id: String,
    balance_cents: i64,
}

/// The new build's declaration: one eager step v1 -> v2 (dollars to cents).
fn accounts_v2() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Eager, |obj| {
            let dollars = obj
                .remove("balance")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| StepError::new("v1 account without a numeric `balance`"))?;
            obj.insert("balance_cents".into(), json!(dollars * 100));
            Ok(())
        })
}

/// Chapter 6: payload evolution of the `accounts` collection.
pub(super) fn payload_chapter(out: &mut impl Write, store: &Store) -> Result<(), Failure> {
    title(
        out,
        6,
        "Payload evolution: old rows upcast on read, swept eagerly, guarded against old builds",
    )?;
    let accounts_v1 = [("alice", 12), ("bob", 7), ("carol", 30), ("dave", 0)];
    {
        let db = Database::builder(store.clone()).open()?;
        let old = db.collection::<AccountV1>("accounts", CollectionOptions::new())?;
        for (id, balance) in accounts_v1 {
            old.put(
                id,
                &AccountV1 {
                    id: id.into(),
                    balance,
                },
            )?;
        }
        writeln!(
            out,
            "an old build (payload v{}) wrote {} accounts with `balance` in dollars",
            old.current_version(),
            accounts_v1.len()
        )?;
    }

    let db = Database::builder(store.clone()).open()?;
    let accounts = db.collection::<Account>("accounts", accounts_v2())?;
    writeln!(
        out,
        "the new build declares the step v1 -> v2 (`balance` dollars -> `balance_cents`, eager): current payload version v{}",
        accounts.current_version()
    )?;
    let alice = accounts
        .get_document("alice")?
        .ok_or_else(|| bug("alice is missing"))?;
    writeln!(
        out,
        "get(\"alice\") -> {:?} (stored at v{}, upcast on read: {})",
        alice.value, alice.stored_version, alice.upcast
    )?;
    let env = accounts
        .envelope("alice")?
        .ok_or_else(|| bug("alice is missing"))?;
    writeln!(
        out,
        "the stored row is untouched: its envelope says {env} (read without parsing the JSON)"
    )?;
    if env.payload_version != 1 || !alice.upcast || alice.value.balance_cents != 1200 {
        return Err(bug("the lazy upcast did not behave as documented"));
    }
    accounts.put(
        "erin",
        &Account {
            id: "erin".into(),
            balance_cents: 250,
        },
    )?;
    writeln!(out, "the new build writes erin directly at v2")?;

    let report = accounts.sweep(SweepOptions::new())?;
    writeln!(
        out,
        "sweep to v{}: {}; scanned {}, rewritten {}, skipped (newer) {}, failed {}",
        report.target_version.unwrap_or(0),
        report.note,
        report.scanned(),
        report.rewritten(),
        report.skipped_ahead(),
        report.failed()
    )?;
    let again = accounts.sweep(SweepOptions::new())?;
    writeln!(out, "sweep again: {} (no scan)", again.note)?;
    let mut stored = Vec::new();
    for (id, _) in accounts_v1 {
        let env = accounts
            .envelope(id)?
            .ok_or_else(|| bug(format!("{id} is missing")))?;
        stored.push(format!("{id} {env}"));
    }
    writeln!(out, "stored now: {}", stored.join(", "))?;
    if report.rewritten() != accounts_v1.len() as u64 || report.scanned() != 5 {
        return Err(bug("the sweep did not rewrite exactly the stale rows"));
    }

    // An old build still running (no upcast chain: it knows only v1).
    let old = db.collection::<AccountV1>("accounts", CollectionOptions::new())?;
    match old.put(
        "bob",
        &AccountV1 {
            id: "bob".into(),
            balance: 1,
        },
    ) {
        Err(e) if e.is_ahead() => writeln!(
            out,
            "an old build writing bob is refused: {e}\n  (expected: the engine also logs this refusal once per collection, the WARN line on stderr)"
        )?,
        Err(e) => return Err(e.into()),
        Ok(_) => return Err(bug("an old build overwrote a newer row")),
    }
    let bob = accounts.get("bob")?.ok_or_else(|| bug("bob is missing"))?;
    writeln!(out, "bob is unchanged: {bob:?}")?;
    Ok(())
}
