//! Chapter 7: shape policy of the `invoices` collection.

use super::{bug, title};
use crate::exit::Failure;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Write;
use strata::ops::cutover::CutoverOptions;
use strata::policy::{
    additive_only, coordinated_cutover, Baseline, DeclareOutcome, PolicyConfig, SchemaDeclaration,
    SchemaOptions, Verdict,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::Store;

/// The policy error inside a refused collection write (the guard's source), as text.
fn refusal(e: &strata::CollectionError) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

/// Invoices, build 1 and 2 (build 2 adds the optional `note`).
#[derive(Debug, Serialize, Deserialize)]
struct Invoice {
    id: String,
    total: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Invoices, build 3: `total` dropped (non-additive).
#[derive(Debug, Serialize, Deserialize)]
struct InvoiceNoTotal {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// The gross amount of an invoice (build 4).
#[derive(Debug, Serialize, Deserialize)]
struct Amount {
    gross: f64,
}

/// Invoices, build 4: `total` reshaped into `amount.gross`.
#[derive(Debug, Serialize, Deserialize)]
struct InvoiceV4 {
    id: String,
    amount: Amount,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// The JSON Schema of each build's invoice type (what schemars derives for it).
fn invoice_schema(build: u32) -> Value {
    let id = json!({"type": "string"});
    let note = json!({"type": ["string", "null"]});
    let total = json!({"type": "number", "format": "double"});
    let amount = json!({
        "type": "object",
        "properties": {"gross": {"type": "number", "format": "double"}},
        "required": ["gross"]
    });
    let (props, required) = match build {
        1 => (json!({"id": id, "total": total}), json!(["id", "total"])),
        2 => (
            json!({"id": id, "total": total, "note": note}),
            json!(["id", "total"]),
        ),
        3 => (json!({"id": id, "note": note}), json!(["id"])),
        _ => (
            json!({"id": id, "amount": amount, "note": note}),
            json!(["id", "amount"]),
        ),
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Invoice",
        "type": "object",
        "properties": props,
        "required": required
    })
}

/// Build 4's cutover transform: `total` becomes `amount.gross`, everything else stays.
fn reshape(doc: Value) -> Result<Value, String> {
    let Value::Object(mut m) = doc else {
        return Err("the invoice is not a JSON object".into());
    };
    let total = m
        .remove("total")
        .ok_or("the invoice has no `total` to reshape")?;
    m.insert("amount".into(), json!({ "gross": total }));
    Ok(Value::Object(m))
}

/// A verdict in one or two lowercase words.
fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Registered => "registered",
        Verdict::Unchanged => "unchanged",
        Verdict::Allowed => "allowed",
        Verdict::Rejected { .. } => "rejected",
        Verdict::CutoverPending { .. } => "cutover pending",
        Verdict::DetectionFailed { .. } => "detection failed",
        Verdict::BehindAdditive { .. } => "behind (additive)",
        _ => "other",
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Opens a policy handle (no heartbeat thread: the cutover's poll hook ticks the other
/// handle, which keeps the chapter deterministic).
fn policy_db(store: &Store) -> Result<Database, Failure> {
    Ok(Database::builder(store.clone())
        .policy(PolicyConfig::new().heartbeat(None))
        .open()?)
}

/// Declares build `build`'s invoice schema with `strategies` (what
/// `Database::collection` does for a schemars type) and returns the outcome.
fn declare(
    db: &Database,
    build: u32,
    strategies: Vec<strata::policy::Strategy>,
) -> Result<DeclareOutcome, Failure> {
    Ok(db.declare(
        SchemaDeclaration::new("invoices", invoice_schema(build))
            .payload(1, [])
            .strategies(strategies),
    )?)
}

/// Chapter 7: shape policy of the `invoices` collection.
pub(super) fn policy_chapter(out: &mut impl Write, store: &Store) -> Result<(), Failure> {
    title(
        out,
        7,
        "Shape policy: a persisted JSON Schema, additive_only, and a coordinated cutover",
    )?;
    // Build 1: registers the schema and writes three invoices.
    let baseline_1;
    {
        let db = policy_db(store)?;
        let invoices = db.collection::<Invoice>("invoices", CollectionOptions::new())?;
        let o = declare(&db, 1, vec![additive_only()])?;
        if !matches!(o.verdict, Verdict::Registered) {
            return Err(bug(format!("build 1 was not registered: {:?}", o.verdict)));
        }
        for (id, total) in [("i1", 100.0), ("i2", 5.5), ("i3", 42.0)] {
            invoices.put(
                id,
                &Invoice {
                    id: id.into(),
                    total,
                    note: None,
                },
            )?;
        }
        baseline_1 = Baseline::load(store, "invoices")?.ok_or_else(|| bug("no baseline"))?;
        writeln!(
            out,
            "build 1 persists the schema of `invoices` {{id, total}} under additive_only (hash {}) and writes 3 invoices",
            short(&baseline_1.hash)
        )?;
    }

    // Build 2: a new optional field passes; it stays open until the cutover.
    let build2 = policy_db(store)?;
    let invoices2 = build2.collection::<Invoice>("invoices", CollectionOptions::new())?;
    let o = declare(&build2, 2, vec![additive_only()])?;
    let kind = o.delta.as_ref().map(|d| d.kind.to_string());
    invoices2.put(
        "i4",
        &Invoice {
            id: "i4".into(),
            total: 7.0,
            note: Some("rush".into()),
        },
    )?;
    let baseline_2 = Baseline::load(store, "invoices")?.ok_or_else(|| bug("no baseline"))?;
    writeln!(
        out,
        "build 2 adds an optional `note`: {} change, verdict {}; put(\"i4\") with a note succeeds; baseline now {}",
        kind.as_deref().unwrap_or("no"),
        verdict_word(&o.verdict),
        short(&baseline_2.hash)
    )?;
    if !matches!(o.verdict, Verdict::Allowed) || baseline_2.hash == baseline_1.hash {
        return Err(bug("the additive change was not allowed"));
    }

    // Build 3: drops `total`; the open succeeds, the first write is refused.
    {
        let db = policy_db(store)?;
        let invoices = db.collection::<InvoiceNoTotal>("invoices", CollectionOptions::new())?;
        let o = declare(&db, 3, vec![additive_only()])?;
        writeln!(
            out,
            "build 3 removes `total`, still under additive_only: the collection opens (verdict {}), the first write fails:\n  (expected: the engine logs the rejection, the WARN line on stderr)",
            verdict_word(&o.verdict)
        )?;
        if !matches!(o.verdict, Verdict::Rejected { .. }) {
            return Err(bug("additive_only did not reject the removal"));
        }
        match invoices.put(
            "i5",
            &InvoiceNoTotal {
                id: "i5".into(),
                note: None,
            },
        ) {
            Err(e) => writeln!(out, "  put(\"i5\") -> {}", refusal(&e))?,
            Ok(_) => return Err(bug("a non-additive change was written")),
        }
        if let Some(delta) = &o.delta {
            writeln!(
                out,
                "  the refused change, as `strata schema diff` shows it:"
            )?;
            for line in strata_schema::render_human(delta).lines() {
                writeln!(out, "    {line}")?;
            }
        }
        let now = Baseline::load(store, "invoices")?.ok_or_else(|| bug("no baseline"))?;
        writeln!(
            out,
            "  the persisted baseline is unchanged ({}) and nothing was written",
            short(&now.hash)
        )?;
        if now.hash != baseline_2.hash || invoices.envelope("i5")?.is_some() {
            return Err(bug("a refused change touched the store"));
        }
    }

    // Build 4: reshapes `total` into `amount.gross` through a coordinated cutover.
    let db = policy_db(store)?;
    // Declared with the collection, so the cutover is a payload step: its transform is the
    // step v1 -> v2 and the rows move to payload v2.
    let invoices = db.collection::<InvoiceV4>(
        "invoices",
        CollectionOptions::new().schema(
            SchemaOptions::json(invoice_schema(4))
                .strategy(coordinated_cutover(reshape))
                .strategy(additive_only()),
        ),
    )?;
    let verdict = db
        .verdict("invoices")
        .ok_or_else(|| bug("build 4's declaration left no verdict"))?;
    writeln!(
        out,
        "build 4 reshapes `total` into `amount.gross` with coordinated_cutover(reshape), additive_only: verdict {} (the transform is the payload step v1 -> v{})",
        verdict_word(&verdict),
        invoices.current_version()
    )?;
    if !matches!(verdict, Verdict::CutoverPending { .. }) {
        return Err(bug("coordinated_cutover did not schedule a cutover"));
    }
    let i5 = InvoiceV4 {
        id: "i5".into(),
        amount: Amount { gross: 9.0 },
        note: None,
    };
    match invoices.put("i5", &i5) {
        Err(e) => writeln!(out, "  put(\"i5\") -> {}", refusal(&e))?,
        Ok(_) => return Err(bug("a fenced collection was written")),
    }
    let fence = db.fence_state()?;
    writeln!(
        out,
        "  `strata fence`: state {}, generation {}, pending [{}]",
        fence.state,
        fence.generation,
        fence
            .pending
            .iter()
            .map(|p| p.collection.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let mut batches = 0u64;
    let build2_policy = &build2;
    let report = db.run_schema_cutover(
        CutoverOptions::new()
            // Build 2 is still open: its heartbeat acknowledges the drain.
            .poll(|| {
                if let Err(e) = build2_policy.heartbeat() {
                    tracing::warn!(error = %e, "demo heartbeat failed");
                }
            })
            .on_progress(|_| batches += 1),
    )?;
    writeln!(
        out,
        "  run_schema_cutover: build 2 acknowledged the drain; migrated {} collection, rewrote {} records in {} batch(es); generation {} -> {}",
        report.migrated, report.records, batches, fence.generation, report.generation
    )?;
    let i1 = invoices.get("i1")?.ok_or_else(|| bug("i1 is missing"))?;
    let i4 = invoices.get("i4")?.ok_or_else(|| bug("i4 is missing"))?;
    writeln!(out, "  get(\"i1\") -> {i1:?}")?;
    writeln!(out, "  get(\"i4\") -> {i4:?}")?;
    let lock = invoices.put("i5", &i5)?;
    writeln!(out, "  put(\"i5\") succeeds again (lock version {lock})")?;
    match invoices2.put(
        "i6",
        &Invoice {
            id: "i6".into(),
            total: 1.0,
            note: None,
        },
    ) {
        Err(e) => writeln!(
            out,
            "  build 2, still open at the old generation: {}",
            refusal(&e)
        )?,
        Ok(_) => return Err(bug("a stale handle wrote after the cutover")),
    }
    let fence = db.fence_state()?;
    writeln!(
        out,
        "  fence: state {}, generation {}, nothing pending: {}",
        fence.state,
        fence.generation,
        fence.pending.is_empty()
    )?;
    if report.records != 4 || i1.amount.gross != 100.0 || fence.generation != 1 {
        return Err(bug("the cutover did not rewrite every invoice"));
    }
    Ok(())
}
