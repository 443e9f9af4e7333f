//! An application's own admin binary: every `strata` subcommand plus `sweep`, `cutover`
//! and `schema check` on the application's collections (their upcast chains, schemas and
//! cutover transforms live in the application's code).
//!
//! ```text
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb seed   # an old build's data
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb collections
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb schema check
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb schema plan accounts
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb sweep accounts --dry-run
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb sweep accounts
//! cargo run -p strata-cli --example bank_admin -- --db ./bank.redb cutover
//! ```
//!
//! `seed` is this example's own: it plays the old build in a redb file (v1 accounts with
//! `balance` in dollars, invoices with a flat `total` under a persisted schema).
//! `seed --bad-row` adds an account the upcast chain cannot read; `seed --old-baseline`
//! records a baseline the current `Account` schema is not additive to (so `schema check`
//! exits 6);
//! `seed --no-nickname-baseline` records the previous build's baseline (before the
//! optional `nickname`), a change `schema plan` shows the stored data settles.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::process::ExitCode;
use strata::policy::SchemaOptions;
use strata::policy::{additive_only, coordinated_cutover, Baseline};
use strata::{CollectionOptions, Database};
use strata::{Mode, StepError};

/// The current account shape (payload v3): cents and a tier.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Account {
    id: String,
    balance_cents: i64,
    tier: String,
    /// New in this build, optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nickname: Option<String>,
}

/// The current invoice shape: the flat `total` became `amount.gross` (a cutover).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Invoice {
    id: String,
    amount: Amount,
}

/// An invoice amount.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Amount {
    gross: f64,
}

/// How the application opens `accounts`.
fn accounts() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |obj| {
            let dollars = obj
                .remove("balance")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| StepError::new("v1 account without a numeric `balance`"))?;
            obj.insert("balance_cents".into(), json!(dollars * 100));
            Ok(())
        })
        .upcast(2, Mode::Eager, |obj| {
            obj.entry("tier").or_insert(json!("basic"));
            Ok(())
        })
        .schema(SchemaOptions::of::<Account>().strategy(additive_only()))
}

/// How the application opens `invoices`.
fn invoices() -> CollectionOptions {
    CollectionOptions::new().identity_fields(["id"]).schema(
        SchemaOptions::of::<Invoice>().strategy(coordinated_cutover(|mut doc| {
            let total = doc
                .as_object_mut()
                .and_then(|o| o.remove("total"))
                .ok_or("invoice without `total`")?;
            doc["amount"] = json!({ "gross": total });
            Ok(doc)
        })),
    )
}

/// The old invoice schema (a flat `total`).
fn old_invoice_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": { "id": {"type": "string"}, "total": {"type": "number"} },
        "required": ["id", "total"]
    })
}

/// The old build: writes v1 accounts and flat invoices under a persisted schema.
fn seed(
    db: &str,
    bad_row: bool,
    old_baseline: bool,
    no_nickname_baseline: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let store = strata_redb::RedbStore::create_store(db)?;
    {
        let database = Database::builder(store.clone()).open()?;
        let accounts =
            database.collection::<serde_json::Value>("accounts", CollectionOptions::new())?;
        for (id, dollars) in [("alice", 12), ("bob", 7), ("carol", 30)] {
            accounts.put(id, &json!({"id": id, "balance": dollars}))?;
        }
        if bad_row {
            accounts.put("mallory", &json!({"id": "mallory", "balance": "lots"}))?;
        }
        let invoices = database.collection::<serde_json::Value>(
            "invoices",
            CollectionOptions::new()
                .schema(SchemaOptions::json(old_invoice_schema()).strategy(additive_only())),
        )?;
        for (id, total) in [("i1", 100.0), ("i2", 42.5)] {
            invoices.put(id, &json!({"id": id, "total": total}))?;
        }
    }
    if no_nickname_baseline {
        // The previous build's baseline: `Account` before `nickname` was added.
        let mut schema = serde_json::to_value(schemars::schema_for!(Account))?;
        schema["properties"]
            .as_object_mut()
            .ok_or("no properties")?
            .remove("nickname");
        let expected = Baseline::read(&store, "accounts")?.map(|(_, raw)| raw);
        Baseline::new(&schema, Some(3)).compare_and_swap(&store, "accounts", expected)?;
    }
    if old_baseline {
        // A baseline with a property the current `Account` no longer has.
        let mut schema = serde_json::to_value(schemars::schema_for!(Account))?;
        schema["properties"]["legacy_code"] = json!({"type": "string"});
        let required = schema["required"]
            .as_array_mut()
            .ok_or("no required list")?;
        required.push(json!("legacy_code"));
        let expected = Baseline::read(&store, "accounts")?.map(|(_, raw)| raw);
        Baseline::new(&schema, Some(1)).compare_and_swap(&store, "accounts", expected)?;
    }
    strata_store::KvWrite::flush(&store)?;
    println!("seeded `{db}` as the old build");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // The example's own `--db PATH seed [--bad-row] [--old-baseline]`.
    if let Some(pos) = args.iter().position(|a| a == "seed") {
        let db = args
            .iter()
            .position(|a| a == "--db")
            .and_then(|i| args.get(i + 1))
            .map_or("./bank.redb", String::as_str);
        let has = |flag: &str| args[pos..].iter().any(|a| a == flag);
        return match seed(
            db,
            has("--bad-row"),
            has("--old-baseline"),
            has("--no-nickname-baseline"),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bank_admin seed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    strata_cli::Admin::new()
        .name("bank_admin")
        .database("./bank.redb")
        .collection::<Account>("accounts", accounts())
        .collection::<Invoice>("invoices", invoices())
        .run()
}
