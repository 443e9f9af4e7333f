//! `strata demo [DIR]`: the guided tour of strata's main job on the embedded default.
//!
//! 1. write a legacy (v0, header-less) Numax datastore through the sync store's layout;
//! 2. show `status` and the sync manager refusing it;
//! 3. migrate it (progress bar on a terminal);
//! 4. open the sync manager and apply a few hundred ops of every CRDT family;
//! 5. restart and print the hydrated state;
//! 6. payload evolution: a typed collection written by an old build, read upcast by a new
//!    one, swept eagerly, and the ahead guard refusing the old build's overwrite;
//! 7. shape policy: a persisted JSON Schema under `additive_only`, an additive change
//!    allowed, a non-additive one refused at write time, then a coordinated cutover.
//!
//! Chapters 1-5 use `DIR/sync`; chapters 6-7 use `DIR/docs`.

use crate::cmd::status;
use crate::exit::{CmdResult, Failure};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use strata::collection::CollectionOptions;
use strata::numax::wire::{Op, OpKind};
use strata::payload::{Mode, StepError, SweepOptions};
use strata::policy::{
    additive_only, coordinated_cutover, Baseline, CutoverOptions, DeclareOutcome, PolicyConfig,
    SchemaDeclaration, Verdict,
};
use strata::Database;
use strata_store::{KvWrite, Store};
use strata_sync::SyncManager;

/// The marker file that identifies a demo directory (so a re-run may reuse it).
const MARKER: &str = ".strata-demo";

/// Arguments of `strata demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the demo datastores. Must be empty, absent, or a previous demo.
    #[arg(default_value = "./strata-demo")]
    dir: PathBuf,
    /// Ops per CRDT family applied after the migration.
    #[arg(long, default_value = "100", value_parser = crate::size::parse_nonzero)]
    ops: usize,
    /// Legacy ops written before the migration (the migration certifies their records).
    #[arg(long, default_value = "5000", value_parser = crate::size::parse_nonzero)]
    legacy_ops: usize,
}

/// Prepares DIR: creates it, or clears a previous demo; refuses anything else.
fn prepare(dir: &Path) -> Result<(), Failure> {
    if dir.exists() {
        let is_demo = dir.join(MARKER).exists();
        let is_empty = std::fs::read_dir(dir)?.next().is_none();
        if !is_demo && !is_empty {
            return Err(Failure::error(format!(
                "`{}` is not empty and is not a previous strata demo; choose another DIR",
                dir.display()
            )));
        }
        if is_demo {
            std::fs::remove_dir_all(dir)?;
        }
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(MARKER), b"strata demo directory; safe to delete\n")?;
    Ok(())
}

fn title(out: &mut impl Write, n: usize, text: &str) -> std::io::Result<()> {
    writeln!(out, "\n== {n}. {text}")
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    prepare(&args.dir)?;
    let mut out = std::io::stdout().lock();
    let sync_path = args.dir.join("sync");
    writeln!(
        out,
        "strata demo in `{}` (datastore `{}`)",
        args.dir.display(),
        sync_path.display()
    )?;

    // 1. A legacy datastore.
    title(
        &mut out,
        1,
        "A Numax release without schema headers wrote this datastore",
    )?;
    {
        let store = strata_sled::SledStore::open_store(&sync_path)?;
        let mut ops = strata_sync::legacy::fixture_ops();
        ops.extend(mixed_ops("legacy", "node-legacy", args.legacy_ops));
        let n = strata_sync::legacy::write_legacy_fixture(&store, &ops)?;
        store.flush()?;
        writeln!(
            out,
            "wrote {n} ops of every CRDT family through the v0 layout (no `__nx/schema/` keys)"
        )?;
    }

    // 2. Refused.
    title(
        &mut out,
        2,
        "strata status: the store needs an explicit migration",
    )?;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let tables = strata::validate::inspect(&store, &strata::numax::catalog())?;
        status::write_table(&mut out, &tables, &[])?;
        let (code, _) = status::verdict(&tables);
        writeln!(out, "(`strata status` exits {code})")?;
        match SyncManager::open(store) {
            Err(e) => writeln!(out, "SyncManager::open refuses it: {e}")?,
            Ok(_) => {
                return Err(Failure::error(
                    "the sync manager opened a legacy store; this is a bug",
                ))
            }
        }
    }

    // 3. Migrate.
    title(
        &mut out,
        3,
        "strata migrate: certify every record, resumable and memory-bounded",
    )?;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let report = crate::cmd::migrate::migrate_with_progress(
            &store,
            strata::pass::PassLimits::default(),
            false,
        )?;
        store.flush()?;
        let records: u64 = report.tables.iter().map(|t| t.records).sum();
        writeln!(
            out,
            "certified {records} records in {} tables; every payload byte unchanged",
            report.tables.len()
        )?;
        let tables = strata::validate::inspect(&store, &strata::numax::catalog())?;
        let (code, word) = status::verdict(&tables);
        writeln!(out, "`strata status` now says: {word} (exit {code})")?;
    }

    // 4. Serve it.
    title(
        &mut out,
        4,
        "Open the sync manager and apply ops of every family",
    )?;
    let before;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let sync = SyncManager::open(store)?;
        let ops = mixed_ops("live", "node-a", args.ops * 6);
        let t = Instant::now();
        let applied = sync.apply_batch(&ops)?;
        // Re-delivering the same ops is a no-op: they are in seen-ops.
        let again = sync.apply_batch(&ops[..10])?;
        sync.flush()?;
        writeln!(
            out,
            "applied {} ops in {:.1?}; re-delivered 10 of them: {} applied again",
            applied.len(),
            t.elapsed(),
            again
                .iter()
                .filter(|a| matches!(a, strata_sync::Applied::Applied { .. }))
                .count()
        )?;
        before = summary(&sync)?;
    }

    // 5. Restart.
    title(&mut out, 5, "Restart: hydrate from the datastore")?;
    {
        let store: Store = crate::db::open_existing(&sync_path)?;
        let sync = SyncManager::open(store)?;
        let after = summary(&sync)?;
        for line in &after {
            writeln!(out, "  {line}")?;
        }
        let report = sync.verify()?;
        writeln!(
            out,
            "hydrated state identical to before the restart: {}; op log, seen-ops and state consistent: {}",
            before == after,
            report.is_consistent()
        )?;
        if before != after || !report.is_consistent() {
            return Err(Failure::error("hydrated state differs; this is a bug"));
        }
    }

    // 6-7. Typed collections in a second datastore.
    let docs_path = args.dir.join("docs");
    {
        let store = strata_sled::SledStore::open_store(&docs_path)?;
        payload_chapter(&mut out, &store)?;
        policy_chapter(&mut out, &store)?;
        store.flush()?;
    }

    writeln!(
        out,
        "\ndone in {:.1?}. Try: strata --db {} status; strata --db {docs} collections; strata --db {docs} inspect accounts; strata --db {docs} fence; strata --db {docs} schema show invoices",
        started.elapsed(),
        sync_path.display(),
        docs = docs_path.display(),
    )?;
    Ok(0)
}

/// A demo invariant that did not hold.
fn bug(what: impl std::fmt::Display) -> Failure {
    Failure::error(format!("{what}; this is a bug"))
}

/// The policy error inside a refused collection write (the guard's source), as text.
fn refusal(e: &strata::CollectionError) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

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
fn payload_chapter(out: &mut impl Write, store: &Store) -> Result<(), Failure> {
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
fn policy_chapter(out: &mut impl Write, store: &Store) -> Result<(), Failure> {
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
    let invoices = db.collection::<InvoiceV4>("invoices", CollectionOptions::new())?;
    let o = declare(&db, 4, vec![coordinated_cutover(reshape), additive_only()])?;
    writeln!(
        out,
        "build 4 reshapes `total` into `amount.gross` with coordinated_cutover(reshape), additive_only: verdict {}",
        verdict_word(&o.verdict)
    )?;
    if !matches!(o.verdict, Verdict::CutoverPending { .. }) {
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

/// Human summary of the demo keys of every family.
fn summary(sync: &SyncManager) -> Result<Vec<String>, strata_sync::SyncError> {
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let row = |label: &str, value: String| format!("{label:<26} = {value}");
    let mut lines = vec![
        row("gcounter visits", format!("{:?}", sync.gcounter("visits")?)),
        row("pncounter stock", format!("{:?}", sync.pncounter("stock")?)),
        row(
            "register status",
            format!("{:?}", sync.register("status")?.map(text)),
        ),
    ];
    for k in ["legacy-counter", "live-counter"] {
        lines.push(row(
            &format!("gcounter {k}"),
            format!("{:?}", sync.gcounter(k)?),
        ));
    }
    lines.push(row(
        "pncounter live-balance",
        format!("{:?}", sync.pncounter("live-balance")?),
    ));
    lines.push(row(
        "register live-status",
        format!("{:?}", sync.register("live-status")?.map(text)),
    ));
    if let Some(m) = sync.map("live-settings")? {
        let fields: Vec<String> = m
            .into_iter()
            .map(|(k, v)| format!("{k}={}", text(v)))
            .collect();
        lines.push(row("map live-settings", fields.join(", ")));
    }
    if let Some(s) = sync.set("live-tags")? {
        lines.push(row("set live-tags", format!("{} elements", s.len())));
    }
    if let Some(seq) = sync.sequence("live-doc")? {
        let s: String = seq.into_iter().map(text).collect();
        lines.push(row(
            "sequence live-doc",
            format!(
                "{} elements: {:?}...",
                s.len(),
                s.chars().take(24).collect::<String>()
            ),
        ));
    }
    let (seen, log) = sync.next_sequences();
    lines.push(row("next seen-op / op-log seq", format!("{seen} / {log}")));
    Ok(lines)
}

/// `n` ops spread over the six families, deterministic, ids `<tag>-op-<i>`.
pub fn mixed_ops(tag: &str, node: &str, n: usize) -> Vec<Op> {
    let key = |k: &str| format!("{tag}-{k}");
    let mut ops = Vec::with_capacity(n);
    let mut last_rga: Option<String> = None;
    let mut added_tags: Vec<(String, String)> = Vec::new();
    for i in 0..n {
        let id = format!("{tag}-op-{i}");
        let kind = match i % 6 {
            0 => OpKind::GCounterIncrement {
                key: key("counter"),
                increment: 1 + (i as u64 % 5),
            },
            1 => {
                if i % 4 == 1 {
                    OpKind::PNCounterDecrement {
                        key: key("balance"),
                        decrement: 2,
                    }
                } else {
                    OpKind::PNCounterIncrement {
                        key: key("balance"),
                        increment: 3,
                    }
                }
            }
            2 => OpKind::LwwRegisterSet {
                key: key("status"),
                value: format!("state-{i}").into_bytes(),
                timestamp_ms: i as u64,
            },
            3 => {
                if i % 5 == 0 {
                    OpKind::LwwMapRemove {
                        key: key("settings"),
                        field: format!("f{}", i % 7),
                        timestamp_ms: i as u64,
                    }
                } else {
                    OpKind::LwwMapSet {
                        key: key("settings"),
                        field: format!("f{}", i % 7),
                        value: format!("v{i}").into_bytes(),
                        timestamp_ms: i as u64,
                    }
                }
            }
            4 => {
                let element = format!("e{}", i % 11);
                if i % 3 == 0 {
                    let observed: Vec<String> = added_tags
                        .iter()
                        .filter(|(e, _)| *e == element)
                        .map(|(_, t)| t.clone())
                        .collect();
                    OpKind::ORSetRemove {
                        key: key("tags"),
                        element,
                        observed_tags: observed,
                    }
                } else {
                    let tag_id = format!("{id}-tag");
                    added_tags.push((element.clone(), tag_id.clone()));
                    OpKind::ORSetAdd {
                        key: key("tags"),
                        element,
                        tag: tag_id,
                    }
                }
            }
            _ => {
                let elem = format!("{id}-el");
                let k = OpKind::RgaInsert {
                    key: key("doc"),
                    id: elem.clone(),
                    parent: last_rga.clone(),
                    value: vec![b'a' + (i % 26) as u8],
                };
                last_rga = Some(elem);
                k
            }
        };
        ops.push(Op::new(id, node, kind));
    }
    ops
}
