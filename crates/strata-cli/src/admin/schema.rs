//! `schema check` and `schema plan`: the stored baseline against this build's schema and
//! chain, read-only.

use super::{CheckArgs, Extension, PlanArgs, Registered};
use crate::db;
use crate::exit::{CmdResult, Failure, NON_ADDITIVE, OK};
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use strata::layout::envelope;
use strata::layout::keys::doc_prefix;
use strata::policy::SchemaOptions;
use strata::policy::{evaluate_strategies, Baseline, UpdateContext, UpdateDecision};
use strata_store::{escape_key, Pages, ScanLimits};

impl Extension {
    pub(super) fn schema_check(&self, db_path: &Path, args: CheckArgs) -> CmdResult {
        // Read-only whatever the keys and collections: only baselines are read, so the
        // store is opened read-only (a redb file keeps its bytes and mtime).
        let store = db::open_for_reading(db_path)?;
        let shown = db::describe(db_path);
        let selected: Vec<&Registered> = if args.collections.is_empty() {
            self.admin.collections.iter().collect()
        } else {
            args.collections
                .iter()
                .map(|n| self.registered(n))
                .collect::<Result<_, _>>()?
        };
        let mut code = OK;
        let mut results = Vec::new();
        for reg in selected {
            let schema_options = reg.options.schema_options();
            let Some(schema) = schema_options.schema_value() else {
                if !args.collections.is_empty() {
                    results.push(serde_json::json!({"collection": reg.name, "verdict": "not_under_policy", "detail": "no persisted schema: nothing to check"}));
                }
                continue;
            };
            let strategies: Vec<&str> = schema_options
                .strategies()
                .iter()
                .map(|s| s.name())
                .collect();
            let Some(baseline) = Baseline::load(&store, &reg.name)? else {
                results.push(serde_json::json!({"collection": reg.name, "verdict": "new", "strategies": strategies, "detail": "no baseline stored yet: the first open records this schema"}));
                continue;
            };
            let delta = strata_schema::diff(&reg.name, &baseline.schema, schema).map_err(|e| {
                Failure::error(format!(
                    "cannot compare the schema of `{}` with its baseline: {e}",
                    reg.name
                ))
            })?;
            if delta.is_none() {
                results.push(serde_json::json!({"collection": reg.name, "verdict": "unchanged", "strategies": strategies, "detail": "the schema equals the stored baseline"}));
                continue;
            }
            let current = reg.current_version();
            let covers = baseline.payload_version.is_some_and(|b| {
                (b..current).all(|v| reg.options.steps().iter().any(|s| s.from() == v))
            });
            let ctx = UpdateContext::new(reg.name.clone()).with_payload(
                baseline.payload_version,
                current,
                covers,
            );
            let eval = evaluate_strategies(schema_options.strategies(), &delta, &ctx);
            let by = eval
                .strategy
                .clone()
                .unwrap_or_else(|| "every strategy".into());
            let (verdict, detail) = match &eval.decision {
                UpdateDecision::Allow => ("allowed", format!("allowed by {by}")),
                UpdateDecision::Accept => ("allowed", format!("accepted by {by}")),
                UpdateDecision::Cutover(_) => (
                    "cutover",
                    format!("{by} plans a coordinated cutover: writes are fenced after deploy until `cutover` runs"),
                ),
                UpdateDecision::Reject(r) => {
                    code = NON_ADDITIVE;
                    ("rejected", r.to_error(&reg.name, &by).to_string())
                }
            };
            results.push(serde_json::json!({
                "collection": reg.name,
                "verdict": verdict,
                "strategies": strategies,
                "detail": detail,
                "delta": delta,
            }));
        }
        let mut out = std::io::stdout().lock();
        if args.json {
            let doc = serde_json::json!({"db": shown, "ok": code == OK, "collections": results});
            crate::json::emit(&mut out, &doc)?;
        } else {
            if results.is_empty() {
                writeln!(
                    out,
                    "no registered collection persists a schema: nothing to check"
                )?;
            }
            for r in &results {
                writeln!(
                    out,
                    "{:<20} {:<10} {}",
                    r["collection"].as_str().unwrap_or_default(),
                    r["verdict"].as_str().unwrap_or_default(),
                    r["detail"].as_str().unwrap_or_default()
                )?;
                if let Some(delta) = r.get("delta").and_then(|d| {
                    serde_json::from_value::<strata_schema::SchemaDelta>(d.clone()).ok()
                }) {
                    for line in strata_schema::render_human(&delta).lines() {
                        writeln!(out, "    {line}")?;
                    }
                }
            }
            if code != OK {
                writeln!(out, "\nschema check failed: a change the strategies reject; revert it or register a strategy that accepts it")?;
            }
        }
        Ok(code)
    }

    pub(super) fn schema_plan(&self, db_path: &Path, args: PlanArgs) -> CmdResult {
        use std::collections::{BTreeMap, BTreeSet};
        let reg = self.registered(&args.collection)?;
        super::check_key(db_path, &args.key, &[&reg.name])?;
        // A plan only reads: the datastore is opened read-only; its reads tolerate
        // staleness, so a read replica the URL names answers them.
        let (store, hosts) = db::open_reading(db_path, db::Reads::StaleTolerant)?;
        let shown = db::describe(db_path);
        let Some(table) = strata::layout::read_catalog(&store)
            .map_err(Failure::error)?
            .get(&reg.name)
            .cloned()
        else {
            return Err(Failure::error(format!(
                "collection `{}` is not recorded in `{shown}` yet: the first open creates it, there is nothing to plan",
                reg.name
            )));
        };
        // Reads only: no read-repair, no schema declaration.
        let options = reg
            .options
            .clone()
            .read_repair(false)
            .schema(SchemaOptions::new());
        let database = super::open_database(&store, &args.key)?;
        let coll = (reg.open)(&database, &reg.name, options).map_err(Failure::error)?;
        let current = reg.current_version();
        let prefix = doc_prefix(&reg.name);
        let limits = ScanLimits::new(512, 64 << 20)?;
        // The shape change against the stored baseline, under the strategies.
        let schema_options = reg.options.schema_options();
        let mut verdict = "not_under_policy".to_string();
        let mut detail = "no persisted schema".to_string();
        let mut transform: Option<strata::policy::Transform> = None;
        let mut rejected = false;
        let mut stored_baseline: Option<Baseline> = None;
        if let Some(schema) = schema_options.schema_value() {
            match Baseline::load(&store, &reg.name)? {
                None => {
                    verdict = "new".into();
                    detail = "no baseline stored yet: the first open records this schema".into();
                }
                Some(baseline) => {
                    let ctx = UpdateContext::new(reg.name.clone()).with_payload(
                        baseline.payload_version,
                        current,
                        baseline.payload_version.is_some_and(|b| {
                            (b..current).all(|v| reg.options.steps().iter().any(|s| s.from() == v))
                        }),
                    );
                    let typed =
                        strata_schema::diff(&reg.name, &baseline.schema, schema).map_err(|e| {
                            Failure::error(format!(
                                "cannot compare the schema of `{}` with its baseline: {e}",
                                reg.name
                            ))
                        })?;
                    if typed.is_none() {
                        verdict = "unchanged".into();
                        detail = "the schema equals the stored baseline".into();
                    } else {
                        let eval = evaluate_strategies(schema_options.strategies(), &typed, &ctx);
                        let by = eval
                            .strategy
                            .clone()
                            .unwrap_or_else(|| "every strategy".into());
                        match &eval.decision {
                            UpdateDecision::Allow => {
                                verdict = "allowed".into();
                                detail = format!("allowed by {by}");
                            }
                            UpdateDecision::Accept => {
                                verdict = "allowed".into();
                                detail = format!("accepted by {by}");
                            }
                            UpdateDecision::Cutover(t) => {
                                verdict = "cutover".into();
                                detail = format!("{by} plans a coordinated cutover of every row (rows are checked through its transform)");
                                transform = Some(t.clone());
                            }
                            UpdateDecision::Reject(r) => {
                                verdict = "rejected".into();
                                detail = r.to_error(&reg.name, &by).to_string();
                                rejected = true;
                            }
                        }
                    }
                    stored_baseline = Some(baseline);
                }
            }
        }
        let cutover = transform.is_some();
        let started = Instant::now();
        let mut versions: BTreeMap<i32, u64> = BTreeMap::new();
        let (mut rows, mut bytes, mut behind, mut behind_bytes, mut ahead) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut failing: Vec<(String, String)> = Vec::new();
        for r in Pages::new(&store, table.prefix(), limits).records() {
            let r = r?;
            rows += 1;
            bytes += r.value.len() as u64;
            let id = String::from_utf8_lossy(&r.key[prefix.len().min(r.key.len())..]);
            let (env, json) = match row_json(&database, &table, &r.key, &r.value) {
                Ok(ok) => ok,
                Err(reason) => {
                    failing.push((escape_key(&r.key), reason));
                    continue;
                }
            };
            let json = json.as_ref();
            *versions.entry(env.payload_version).or_insert(0) += 1;
            if let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(json) {
                used.extend(m.keys().cloned());
            }
            if env.payload_version > current {
                ahead += 1;
                continue;
            }
            if env.payload_version < current {
                behind += 1;
                behind_bytes += r.value.len() as u64;
            }
            // What this build would do with the row: the cutover's transform (then the
            // type), else a read through the chain into the type.
            let outcome = match &transform {
                Some(t) => serde_json::from_slice::<serde_json::Value>(json)
                    .map_err(|e| format!("the document JSON is invalid: {e}"))
                    .and_then(|doc| {
                        t.apply(doc)
                            .map_err(|e| format!("the cutover transform fails: {e}"))
                    })
                    .and_then(|doc| {
                        coll.binds(doc)
                            .map_err(|e| format!("after the cutover transform, the document {e}"))
                    }),
                None => coll.read(&id).map_err(|e| crate::exit::message(&e)),
            };
            if let Err(reason) = outcome {
                failing.push((escape_key(&r.key), reason));
            }
        }
        let secs = started.elapsed().as_secs_f64().max(1e-6);
        let rate = rows as f64 / secs;
        // What the data settles: under the registry rule (strict open content), a property
        // added to an open model breaks old data only if a stored row already uses it.
        let mut settled: Vec<String> = Vec::new();
        let mut breaks: Vec<String> = Vec::new();
        if let (Some(schema), Some(baseline)) = (schema_options.schema_value(), &stored_baseline) {
            let strict = strata_schema::DiffOptions {
                open_content: strata_schema::OpenContentPolicy::Strict,
            };
            let delta = strata_schema::diff_with(&reg.name, &baseline.schema, schema, &strict)
                .map_err(|e| Failure::error(e.to_string()))?;
            for c in &delta.paths {
                if c.backward {
                    continue;
                }
                let top_level_add = matches!(
                    c.change,
                    strata_schema::ChangeKind::PropertyAdded { required: false }
                ) && c
                    .field
                    .as_deref()
                    .is_some_and(|f| c.path == format!("/{f}"));
                match &c.field {
                    Some(f) if top_level_add && !used.contains(f) => settled.push(format!(
                        "{}: {} — no stored row uses `{f}`, so no stored row breaks",
                        c.path, c.change
                    )),
                    _ => breaks.push(format!("{}: {}", c.path, c.change)),
                }
            }
        }
        let eager = reg
            .options
            .steps()
            .iter()
            .any(|s| s.mode() == strata::Mode::Eager);
        let (work, work_rows, work_bytes) = if cutover {
            ("cutover", rows, bytes)
        } else if eager && behind > 0 {
            ("sweep", behind, behind_bytes)
        } else {
            ("none", 0, 0)
        };
        let est_secs = (work_rows as f64 / rate.max(1.0)).ceil() as u64;
        let code = if rejected {
            NON_ADDITIVE
        } else if failing.is_empty() {
            OK
        } else {
            crate::exit::ERROR
        };
        let mut out = std::io::stdout().lock();
        if args.json {
            let failing_json: Vec<_> = failing
                .iter()
                .map(|(k, r)| serde_json::json!({"key": k, "reason": r}))
                .collect();
            let mut doc = serde_json::json!({
                "db": shown,
                "collection": reg.name,
                "current_version": current,
                "rows": rows,
                "versions": versions,
                "rows_behind": behind,
                "rows_ahead": ahead,
                "failing": failing_json,
                "schema": {"verdict": verdict, "detail": detail, "breaks": breaks, "settled_by_data": settled},
                "work": {"kind": work, "rows": work_rows, "bytes": work_bytes, "estimated_seconds": est_secs, "read_rate_rows_per_s": rate.round() as u64},
                "written": false,
            });
            if let Some(h) = &hosts {
                doc["hosts"] = serde_json::to_value(h).map_err(Failure::error)?;
            }
            crate::json::emit(&mut out, &doc)?;
            return Ok(code);
        }
        let hist: Vec<String> = versions.iter().map(|(v, n)| format!("v{v}:{n}")).collect();
        writeln!(
            out,
            "plan for `{}` in `{shown}` (this build: payload v{current}); nothing was written",
            reg.name
        )?;
        writeln!(
            out,
            "  rows            {rows} ({})",
            if hist.is_empty() {
                "-".into()
            } else {
                hist.join(" ")
            }
        )?;
        writeln!(out, "  behind / ahead  {behind} / {ahead}")?;
        writeln!(out, "  schema          {verdict}: {detail}")?;
        for b in &breaks {
            writeln!(out, "    break         {b}")?;
        }
        for s in &settled {
            writeln!(out, "    settled       {s}")?;
        }
        writeln!(out, "  failing rows    {}", failing.len())?;
        for (k, r) in failing.iter().take(50) {
            writeln!(out, "    {k}: {r}")?;
        }
        match work {
            "none" => writeln!(out, "  work            none (rows are upcast on read)")?,
            kind => writeln!(
                out,
                "  work            {kind} of {work_rows} rows, {work_bytes} bytes rewritten; about {est_secs} s at the {} rows/s this plan read (writes are slower)",
                rate.round() as u64
            )?,
        }
        if let Some(h) = &hosts {
            writeln!(out, "{}", h.line())?;
        }
        Ok(code)
    }
}

/// The envelope and the document JSON of a stored row: a clear row as stored, a sealed
/// row opened with the database's key (`Err` with the reason when it cannot be).
fn row_json<'a>(
    database: &strata::Database,
    table: &strata::TableDef,
    key: &[u8],
    value: &'a [u8],
) -> Result<
    (
        strata::layout::envelope::Envelope,
        std::borrow::Cow<'a, [u8]>,
    ),
    String,
> {
    match envelope::decode(value) {
        Ok((env, json)) => Ok((env, std::borrow::Cow::Borrowed(json))),
        Err(e) => match (strata::seal::peek(value), database.sealer()) {
            (Some((_, true)), Some(sealer)) => {
                strata::seal::open_document(&sealer, key, table.id(), value)
                    .map(|(env, json)| (env, std::borrow::Cow::Owned(json)))
                    .map_err(|e| e.to_string())
            }
            (Some((_, true)), None) => Err(
                "the row is sealed: pass the key (`--passphrase-env VAR` or `--key-file PATH`)"
                    .into(),
            ),
            _ => Err(e.to_string()),
        },
    }
}
